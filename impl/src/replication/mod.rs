//! Replication: the partition state machine of one replica, and the
//! controller, both without I/O of their own (as etcd-io/raft does it).
//!
//! A [`Partition`] is one replica's view of the partition. Its inputs are
//! method calls, one per protocol event: a LeaderAndIsr from the controller,
//! a produce request, a fetch or OffsetsForLeaderEpoch request from a
//! follower and the responses to its own, an AlterPartition response, a
//! peer's crash, and the time. Its outputs are the responses it returns and
//! the requests it asks its caller to send ([`Partition::take_outputs`]).
//! The log it replicates is a [`ReplicaLog`]: [`DiskLog`] puts it in Kafka's
//! on-disk format through [`crate::storage`]; the state machine itself
//! never touches a file.
//!
//! The [`Controller`] owns the quorum state (leader, leader epoch, ISR and
//! the KIP-966 ELR), elects leaders and applies the leader's ISR changes.
//!
//! The rules are the model's (`model/src/actions.rs`, `controller.rs`,
//! `truncation.rs`), action for action:
//! - the leader appends with its epoch, refuses acks=all writes with
//!   NotEnoughReplicas when |ISR| < min.insync.replicas, and answers waiting
//!   acks=all producers when the HW passes their records
//!   (NotEnoughReplicasAfterAppend when the ISR is then too small);
//! - the HW is the lowest LEO over the ISR, the followers' LEOs learnt from
//!   their fetch offsets (so the HW reaches followers one round late); with
//!   the ELR switch it does not move while |ISR| < min.insync.replicas;
//! - the ISR shrinks for a follower that has not caught up within
//!   `replica.lag.time.max.ms` or is not fetching from this leader in its
//!   epoch, and expands for a follower caught up to the HW (KIP-320: once
//!   the HW has reached the leader's own epoch; KIP-903: not on the strength
//!   of a fetch from an incarnation that has since crashed);
//! - a new follower truncates by one of four rules ([`TruncationMode`]).
//!
//! Where these differ from a Kafka release, the difference is the model's
//! and is named where it is implemented.

pub mod controller;
pub mod error;
pub mod log;
pub mod messages;
pub mod partition;
pub mod truncation;
pub mod types;

pub use controller::{Controller, ControllerConfig, ControllerState, Election};
pub use error::{Error, Result};
pub use log::{DiskLog, DiskLogConfig, HwCheckpointPolicy, LogEntry, ReplicaLog};
pub use messages::{
    AlterPartitionRequest, AlterPartitionResponse, ApiError, FetchRequest, FetchResponse,
    IsrChange, LeaderAndIsr, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse, Output,
    ProduceRequest, ProduceResponse,
};
pub use partition::{FollowerView, Partition, PartitionState, Role};
pub use types::{
    Acks, IsrJoinRule, LeaderEpoch, LeaderView, RecordId, ReplicaId, ReplicationConfig,
    TruncationMode,
};
