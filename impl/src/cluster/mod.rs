//! Drivers that wire replicas, a controller and storage together. Each
//! replica is a [`Replica`](crate::replication::Replica): the sans-IO state
//! machine on its log; a driver turns messages and timers into its inputs
//! and delivers its outputs.
//!
//! - [`step`]: a deterministic step driver. Each call performs exactly one
//!   protocol action, named as the model's actions, so a test or the
//!   conformance crate chooses the interleaving; on Kafka-format files or
//!   in memory.
//! - [`concurrent`]: the same replicas on threads, exchanging messages
//!   through channels, with producers, consumers and scheduled faults; it
//!   records a trace of every protocol event and state change.
//! - [`snapshot`]: a read-only picture of a whole cluster, shaped to map
//!   onto the model's state.
//!
//! Records carry their id in their key ([`record_key`]), so that logs can
//! be read back as (offset, epoch, record id).

pub mod concurrent;
pub mod snapshot;
pub mod step;
pub mod trace;

pub use crate::replication::log::{record_id, record_key};
pub use snapshot::{BrokenProperty, ClusterSnapshot, RecordHistory, ReplicaSnapshot};
pub use step::{StepAction, StepCluster, StepConfig};
pub use trace::{Actor, Event, Trace, TraceEntry};
