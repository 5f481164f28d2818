//! The requests and responses replicas, the controller and producers
//! exchange, named after Kafka's APIs, and the outputs of a [`Partition`].
//!
//! [`Partition`]: super::Partition

use std::fmt;

use serde::{Deserialize, Serialize};

use super::types::{Acks, LeaderEpoch, ReplicaId};
use crate::storage::Record;

/// Kafka error codes the protocol answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ApiError {
    /// The replica asked is not the leader (or not a replica) now.
    NotLeaderOrFollower,
    /// The request carries an older leader epoch than the replica's (KIP-320).
    FencedLeaderEpoch,
    /// The request carries a newer leader epoch than the replica knows (KIP-320).
    UnknownLeaderEpoch,
    /// acks=all refused before appending: |ISR| < min.insync.replicas.
    NotEnoughReplicas,
    /// acks=all appended, but when the HW passed the records the ISR was
    /// below min.insync.replicas.
    NotEnoughReplicasAfterAppend,
    /// A fetch offset outside the leader's log.
    OffsetOutOfRange,
    /// The leader could not read or write its log.
    KafkaStorageError,
    /// The request is malformed (for example, an empty produce).
    InvalidRequest,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ApiError::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            ApiError::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            ApiError::UnknownLeaderEpoch => "UNKNOWN_LEADER_EPOCH",
            ApiError::NotEnoughReplicas => "NOT_ENOUGH_REPLICAS",
            ApiError::NotEnoughReplicasAfterAppend => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            ApiError::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            ApiError::KafkaStorageError => "KAFKA_STORAGE_ERROR",
            ApiError::InvalidRequest => "INVALID_REQUEST",
        })
    }
}

/// The controller's word on the partition: one per leader epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderAndIsr {
    pub leader_epoch: LeaderEpoch,
    /// The controller's partition epoch when it sent this.
    pub partition_epoch: u32,
    /// `None`: the partition has no leader in this epoch.
    pub leader: Option<ReplicaId>,
    pub isr: Vec<ReplicaId>,
    /// Every assigned replica.
    pub replicas: Vec<ReplicaId>,
}

/// A produce request to the leader: one batch of records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRequest {
    /// Chosen by the producer; echoed in the response.
    pub request_id: u64,
    pub acks: Acks,
    pub records: Vec<Record>,
}

/// The answer to a produce request (none for acks=0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceResponse {
    pub request_id: u64,
    /// On success: the batch's first offset and the epoch it was written in.
    pub result: Result<(u64, LeaderEpoch), ApiError>,
}

/// A follower's fetch (Kafka's FetchRequest from a replica).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchRequest {
    /// Chosen by the follower; echoed, so a late response is recognised.
    pub correlation_id: u64,
    pub replica_id: ReplicaId,
    /// The follower's LEO: the leader learns it from here.
    pub fetch_offset: u64,
    /// KIP-320: the follower's leader epoch (checked only when fenced).
    pub current_leader_epoch: LeaderEpoch,
    pub max_bytes: usize,
    /// Truncation on fetch: the latest epoch in the follower's log (Kafka's
    /// `lastFetchedEpoch`), checked by the leader for divergence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fetched_epoch: Option<LeaderEpoch>,
}

/// Where the follower's last fetched epoch ends in the leader's log, when
/// the logs diverge (Kafka's `FetchResponseData.EpochEndOffset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DivergingEpoch {
    pub epoch: LeaderEpoch,
    pub end_offset: u64,
}

/// The leader's answer to a fetch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchResponse {
    pub correlation_id: u64,
    pub leader_id: ReplicaId,
    /// The leader's epoch when it answered.
    pub leader_epoch: Option<LeaderEpoch>,
    /// Echo of the request's offset.
    pub fetch_offset: u64,
    pub error: Option<ApiError>,
    pub high_watermark: u64,
    pub log_end_offset: u64,
    /// Truncation on fetch: the follower's log diverges from the leader's;
    /// no records, and the follower truncates by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diverging_epoch: Option<DivergingEpoch>,
    /// Record batches from `fetch_offset`, as stored (offsets and epochs kept).
    #[serde(skip)]
    pub records: Vec<u8>,
}

/// KIP-101/279: "where does my latest epoch end in your log?"
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetsForLeaderEpochRequest {
    pub correlation_id: u64,
    pub replica_id: ReplicaId,
    /// KIP-320: the follower's current leader epoch (checked only when fenced).
    pub current_leader_epoch: LeaderEpoch,
    /// The epoch whose end offset is asked.
    pub leader_epoch: LeaderEpoch,
}

/// The leader's answer: the largest epoch <= the one asked that it knows,
/// and where that epoch ends. Both `None` is Kafka's UNDEFINED answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetsForLeaderEpochResponse {
    pub correlation_id: u64,
    pub leader_id: ReplicaId,
    pub error: Option<ApiError>,
    pub leader_epoch: Option<LeaderEpoch>,
    pub end_offset: Option<u64>,
}

/// An ISR change the leader asks of the controller (AlterPartition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum IsrChange {
    Remove(ReplicaId),
    Add(ReplicaId),
}

/// AlterPartition: the leader asks for one ISR change. It names the change,
/// not a whole ISR, because the controller applies it to its own ISR (which
/// may have lost a failed broker meanwhile), as the model does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartitionRequest {
    pub leader: ReplicaId,
    pub leader_epoch: LeaderEpoch,
    pub change: IsrChange,
}

/// The controller's answer: the ISR as it now stands, or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartitionResponse {
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch of the ISR in `result`.
    #[serde(default)]
    pub partition_epoch: u32,
    pub change: IsrChange,
    pub result: Result<Vec<ReplicaId>, ApiError>,
}

/// A message or answer a [`Partition`](super::Partition) asks its caller
/// to deliver ([`Ready::Send`](super::Ready::Send)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Answer a producer.
    Produce(ProduceResponse),
    /// The leader appended a producer's batch (for the caller's records:
    /// where and in which epoch; the producer's answer is separate).
    Appended {
        request_id: u64,
        base_offset: u64,
        last_offset: u64,
        leader_epoch: LeaderEpoch,
    },
    /// Answer a follower's fetch.
    FetchResponse {
        to: ReplicaId,
        response: FetchResponse,
    },
    /// Answer a follower's OffsetsForLeaderEpoch.
    OffsetsForLeaderEpochResponse {
        to: ReplicaId,
        response: OffsetsForLeaderEpochResponse,
    },
    /// Send a fetch to the leader `to`.
    Fetch {
        to: ReplicaId,
        request: FetchRequest,
    },
    /// Send an OffsetsForLeaderEpoch to the leader `to`.
    OffsetsForLeaderEpoch {
        to: ReplicaId,
        request: OffsetsForLeaderEpochRequest,
    },
    /// Send an AlterPartition to the controller.
    AlterPartition(AlterPartitionRequest),
    /// Tell the other replicas whom this one now fetches from, and in which
    /// epoch (a fetch session opened or closed). A leader counts a follower
    /// as present only while it fetches from it in the leader's epoch.
    Following {
        leader: Option<(ReplicaId, LeaderEpoch)>,
    },
}
