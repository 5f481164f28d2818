//! Replication: the partition state machine of one replica, and the
//! controller, both without I/O of their own (as etcd-io/raft does it).
//!
//! A [`Partition`] is one replica's view of the partition, as a pure state
//! machine: [`Partition::step`] takes one [`Input`] (a LeaderAndIsr from
//! the controller, a produce request, a fetch or OffsetsForLeaderEpoch
//! request from a follower or the responses to its own, an AlterPartition
//! response, a peer's crash, a timer [`Tick`], or the completion of a
//! storage operation it asked for) and returns [`Ready`]: one
//! [`StorageOp`] to perform (an append, a truncation, an HW update with
//! its checkpoint, a flush, a checkpoint write, a read), or the messages
//! and producer answers to send. The ordering rules (what is in the log
//! before what is sent or relied on) are written down in `partition.rs`
//! and in `spec/core.md`.
//!
//! The log sits behind the narrow [`ReplicaLog`] trait, with two
//! implementations of the same semantics, crashes included: [`DiskLog`],
//! Kafka's on-disk format through [`crate::storage`], and [`MemoryLog`].
//! A [`Replica`] puts a state machine on a log: it performs each operation
//! and feeds the completion back, so a transition either completes or, when
//! the log fails, leaves the replica as it was.
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
//!   epoch, and expands for a follower caught up to the HW (KIP-320: and to
//!   the start of the leader's epoch, Kafka's `Partition.isFollowerInSync`;
//!   KIP-903: not on the strength of a fetch from an incarnation that has
//!   since crashed);
//! - a new follower truncates by one of four rules ([`TruncationMode`]).
//!
//! Where these differ from a Kafka release, the difference is the model's
//! and is named where it is implemented.

pub mod controller;
pub mod disk_log;
pub mod error;
mod follower;
mod leader;
pub mod log;
pub mod memory_log;
pub mod messages;
pub mod partition;
pub mod replica;
pub mod truncation;
pub mod types;

pub use controller::{Controller, ControllerConfig, ControllerState, Election};
pub use disk_log::{DiskLog, DiskLogConfig, DiskStopped};
pub use error::{Error, Result};
pub use log::{
    LogEntry, LogState, ReplicaLog, StoppedImage, StorageDone, StorageFailed, StorageOp,
};
pub use memory_log::{MemoryLog, MemoryStopped};
pub use messages::{
    AlterPartitionRequest, AlterPartitionResponse, ApiError, DivergingEpoch, FetchRequest,
    FetchResponse, IsrChange, LeaderAndIsr, OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse, Output, ProduceRequest, ProduceResponse,
};
pub use partition::{FollowerView, Input, Partition, PartitionState, Ready, Role, Tick};
pub use replica::Replica;
pub use types::{
    Acks, HwCheckpointPolicy, IsrJoinRule, LeaderEpoch, LeaderView, RecordId, ReplicaId,
    ReplicationConfig, TruncationMode,
};
