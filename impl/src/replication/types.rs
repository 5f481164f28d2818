//! Names shared by the replication layer: ids, epochs, switches.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A broker (replica) id.
pub type ReplicaId = u32;
/// A leader epoch, as Kafka's 32-bit partition leader epoch (the first is 0).
pub type LeaderEpoch = i32;
/// The id a producer gives a record, carried in the record's key (see
/// [`crate::cluster::record_key`]); the properties speak of records by id.
pub type RecordId = u64;

/// What a replica believes about the partition's leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum LeaderView {
    /// Never told, or restarted and not yet told.
    Unknown,
    /// Told that the partition has no leader.
    NoLeader,
    Replica(ReplicaId),
}

/// Producer acknowledgement level (`acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Acks {
    /// `acks=0`: no response at all.
    None,
    /// `acks=1`: answered once the leader has appended.
    Leader,
    /// `acks=all`: answered once the HW passes the records; refused with
    /// NotEnoughReplicas when |ISR| < min.insync.replicas.
    All,
}

impl fmt::Display for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        })
    }
}

/// How a follower finds where to truncate when it follows a new leader
/// epoch: one lookup per historical Kafka rule, as in the model. KIP-320's
/// fencing is a separate switch, [`ReplicationConfig::fencing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TruncationMode {
    /// Truncate to the local HW (Kafka before KIP-101).
    Hw,
    /// KIP-101: one OffsetsForLeaderEpoch for the follower's latest epoch.
    Epoch,
    /// KIP-279: repeat OffsetsForLeaderEpoch until the logs agree.
    EpochIterative,
    /// Today (Kafka >= 2.7, `isTruncationOnFetchSupported`): a new follower
    /// fetches at once with its last fetched epoch; a leader whose log
    /// diverges answers with a diverging epoch, and the follower truncates
    /// by it (`AbstractFetcherThread.truncateOnFetchResponse`).
    OnFetch,
}

impl TruncationMode {
    /// Whether a new follower asks its leader (OffsetsForLeaderEpoch) where
    /// to truncate before it fetches.
    pub fn asks_leader(self) -> bool {
        matches!(self, TruncationMode::Epoch | TruncationMode::EpochIterative)
    }
    /// Whether a new follower truncates to its HW before taking the epoch.
    pub fn truncates_to_hw(self) -> bool {
        self == TruncationMode::Hw
    }
}

impl fmt::Display for TruncationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TruncationMode::Hw => "hw",
            TruncationMode::Epoch => "epoch",
            TruncationMode::EpochIterative => "epoch-iterative",
            TruncationMode::OnFetch => "on-fetch",
        })
    }
}

impl FromStr for TruncationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "hw" => TruncationMode::Hw,
            "epoch" => TruncationMode::Epoch,
            "epoch-iterative" => TruncationMode::EpochIterative,
            "on-fetch" => TruncationMode::OnFetch,
            "fenced" => {
                return Err(
                    "truncation mode \"fenced\" is now epoch-iterative with fencing on (fencing is its own switch)"
                        .to_string(),
                )
            }
            _ => {
                return Err(format!(
                    "unknown truncation mode {s:?}: expected hw, epoch, epoch-iterative or on-fetch"
                ))
            }
        })
    }
}

/// The replication settings of a replica, named after Kafka's configs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicationConfig {
    /// `min.insync.replicas`.
    pub min_insync_replicas: usize,
    pub truncation: TruncationMode,
    /// KIP-320: fetch and OffsetsForLeaderEpoch are fenced by the current
    /// leader epoch (`Partition.checkCurrentLeaderEpoch`), and a follower
    /// rejoins the ISR only from the leader's epoch start
    /// (`Partition.isFollowerInSync`).
    #[serde(default = "fencing_default")]
    pub fencing: bool,
    /// KIP-966 (eligible leader replicas): the HW does not advance while
    /// |ISR| < min.insync.replicas (Kafka 3.7's KAFKA-15583, which Kafka
    /// applies with the ELR off too; off, this stands for Kafka before it).
    pub elr: bool,
    /// `replica.lag.time.max.ms`: a follower that has not caught up (or has
    /// not fetched from this leader in its epoch) for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// `replica.fetch.max.bytes`: the most a fetch response carries
    /// (`usize::MAX` fetches everything, as the model's single-step fetch).
    pub replica_fetch_max_bytes: usize,
    /// When a caught-up follower may rejoin the ISR (Kafka's rule, or the
    /// old rule kept to show the stall it causes).
    #[serde(default)]
    pub isr_join: IsrJoinRule,
    /// When the HW is written to `replication-offset-checkpoint`.
    #[serde(default)]
    pub hw_checkpoint: HwCheckpointPolicy,
    /// Kafka's `shouldWaitForReplicaToJoinIsr`: the leader's HW also waits
    /// for a caught-up, ISR-eligible follower outside the ISR. `false` is a
    /// mutation (the model's `hw-over-isr-only`): the HW counts the ISR only.
    #[serde(default = "hw_waits_default")]
    pub hw_waits_for_caught_up: bool,
}

fn hw_waits_default() -> bool {
    true
}

fn fencing_default() -> bool {
    true
}

/// When the HW is written to `replication-offset-checkpoint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HwCheckpointPolicy {
    /// With every change (truncations and restarts included): a restart
    /// finds the HW it had, as the model's `every-change` assumes. Costs a
    /// file write per HW change.
    EveryChange,
    /// At most once per interval, as Kafka does
    /// (`replica.high.watermark.checkpoint.interval.ms`), on
    /// [`Tick::CheckpointHw`](super::Tick::CheckpointHw), and on a clean
    /// shutdown. A restart after a crash may find an older HW. The default,
    /// at Kafka's 5 s.
    IntervalMs(u64),
}

impl HwCheckpointPolicy {
    /// Kafka's default `replica.high.watermark.checkpoint.interval.ms`.
    pub const KAFKA_DEFAULT: HwCheckpointPolicy = HwCheckpointPolicy::IntervalMs(5_000);
}

impl Default for HwCheckpointPolicy {
    fn default() -> Self {
        HwCheckpointPolicy::KAFKA_DEFAULT
    }
}

/// When a follower may rejoin the ISR, beyond having reached the leader's HW.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IsrJoinRule {
    /// Kafka's `Partition.isFollowerInSync`: with fencing, the follower's LEO
    /// has also reached the offset where the leader's epoch began.
    #[default]
    FollowerReachedEpochStart,
    /// The rule highwater had before, kept as a mutation: the leader's HW
    /// must have reached its epoch start. A leader elected with its HW below
    /// its epoch start and its ISR below min.insync.replicas (KIP-966 holds
    /// the HW) then never takes anyone back: the partition stalls.
    LeaderHwReachedEpochStart,
    /// Reaching the leader's HW is enough (the rule before KAFKA-7128),
    /// kept as a mutation: a new ISR member can miss a record an earlier
    /// leader committed.
    HwOnly,
}

impl Default for ReplicationConfig {
    /// Today's rules (as the model's `safe` preset): truncation on fetch,
    /// KIP-320 fencing, KIP-966 ELR, min.insync.replicas=2.
    fn default() -> Self {
        ReplicationConfig {
            min_insync_replicas: 2,
            truncation: TruncationMode::OnFetch,
            fencing: true,
            elr: true,
            replica_lag_time_max_ms: 30_000,
            replica_fetch_max_bytes: 1 << 20,
            isr_join: IsrJoinRule::default(),
            hw_checkpoint: HwCheckpointPolicy::default(),
            hw_waits_for_caught_up: true,
        }
    }
}
