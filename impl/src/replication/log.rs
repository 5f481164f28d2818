//! The log a replica replicates, as the state machine sees it: the
//! [`LogState`] it reasons with, the [`StorageOp`]s it asks for, and the
//! narrow [`ReplicaLog`] trait that performs them. Two implementations:
//! [`DiskLog`](super::DiskLog), Kafka's on-disk format through
//! [`crate::storage`], and [`MemoryLog`](super::MemoryLog), the same
//! semantics in memory (crashes included), cheap enough to clone at every
//! step of an exhaustive search.
//!
//! # What every implementation promises
//!
//! - **One operation, all or nothing.** [`ReplicaLog::apply`] performs one
//!   operation; when it fails, the log is as it was before it (where an
//!   implementation cannot promise that, it says so, and
//!   [`StorageFailed::state`] reports what the log holds).
//! - **The state it reports is the state it holds.** Every completion
//!   carries [`ReplicaLog::state`] after the operation; the state machine
//!   adopts it, so it never believes what the log does not hold (a
//!   truncation inside a batch, for one, removes the whole batch).
//! - **Crash semantics.** A clean shutdown ([`ReplicaLog::close`]) flushes
//!   and checkpoints everything. An unclean one ([`ReplicaLog::crash`])
//!   keeps every batch that starts below the recovery point (a flush syncs
//!   whole batches) and nothing after; the restarted log takes its HW and
//!   recovery point from the last checkpoint written, clamped to what is
//!   left (the HW's checkpoint is written only when asked for, see
//!   [`StorageOp::WriteCheckpoints`], so it may be older than the HW was), and its leader epoch cache trimmed to it, as Kafka's
//!   `LogLoader` does.

use serde::{Deserialize, Serialize};

pub use super::disk_log::read_entries;

use super::error::Result;
use super::types::{LeaderEpoch, RecordId};
use crate::storage::checkpoint::EpochEntry;
use crate::storage::image::CheckpointFiles;
use crate::storage::{EpochCache, EpochEndOffset, Record, RecoveryReport};

/// One record as the properties see it: where, written in which leader
/// epoch, and which record (by the id in its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LogEntry {
    pub offset: u64,
    pub epoch: LeaderEpoch,
    /// `None` for a record whose key is not a record id.
    pub record_id: Option<RecordId>,
}

/// The key that carries a record id: its 8 bytes, big-endian.
pub fn record_key(id: RecordId) -> Vec<u8> {
    id.to_be_bytes().to_vec()
}

/// The record id in a record's key, if the key is one.
pub fn record_id(record: &Record) -> Option<RecordId> {
    let key: [u8; 8] = record.key.as_deref()?.try_into().ok()?;
    Some(RecordId::from_be_bytes(key))
}

/// What the replication state machine knows of its log. It changes only
/// through the completions of the operations the state machine asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogState {
    pub log_start_offset: u64,
    /// LEO: the offset the next record gets.
    pub log_end_offset: u64,
    pub high_watermark: u64,
    /// Everything below it has been flushed.
    pub recovery_point: u64,
    /// The HW `replication-offset-checkpoint` holds: the last one
    /// checkpointed, which an unclean restart comes back with (within the
    /// log it recovers). It may be above the LEO after a truncation or an
    /// unclean restart, as Kafka's file may be until its next checkpoint.
    pub hw_checkpoint: u64,
    /// The leader epoch cache: (epoch, start offset), both strictly rising.
    pub epochs: Vec<EpochEntry>,
}

impl LogState {
    /// The latest epoch with records.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.epochs.last().map(|e| e.epoch)
    }

    /// KIP-101/279 lookup in this log's epoch cache; see
    /// [`EpochCache::end_offset_for`].
    pub fn end_offset_for_epoch(&self, epoch: LeaderEpoch) -> Option<EpochEndOffset> {
        EpochCache::new(std::path::Path::new(""), self.epochs.clone())
            .end_offset_for(epoch, self.log_end_offset)
    }
}

/// A storage operation the state machine asks for ([`Ready::Persist`]).
/// Each is one step of Kafka's log (`UnifiedLog`) or log manager.
///
/// [`Ready::Persist`]: super::Ready::Persist
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageOp {
    /// A leader's append (`Partition.appendRecordsToLeader`): `records` as
    /// one batch at the LEO, stamped with `epoch`; the epoch cache learns
    /// where `epoch` starts.
    AppendAsLeader {
        records: Vec<Record>,
        epoch: LeaderEpoch,
    },
    /// A follower's fetch response (`ReplicaFetcherThread.processPartitionData`):
    /// the batches fetched from the leader, offsets and epochs kept, each
    /// starting at the LEO (`Partition.appendRecordsToFollowerOrFutureReplica`);
    /// then the HW set to the leader's, capped at the new LEO
    /// (`UnifiedLog.updateHighWatermark`), and with `checkpoint` written
    /// when it changed. All or nothing: a failure of the HW's checkpoint
    /// undoes the append too.
    AppendAsFollower {
        batches: Vec<u8>,
        high_watermark: u64,
        checkpoint: bool,
    },
    /// Removes every record at or above `offset` (the whole batch holding
    /// it), lowers the HW and recovery point with the log, and rewrites the
    /// recovery-point and log-start checkpoints before returning (Kafka's
    /// `LogManager.truncateTo`): a stale recovery point above the cut would
    /// vouch, after a crash, for records appended later and never flushed.
    /// The HW's checkpoint is rewritten too only with `checkpoint` (the
    /// every-change policy); Kafka leaves it to the periodic task.
    Truncate { offset: u64, checkpoint: bool },
    /// Sets the HW (never above the LEO); with `checkpoint`, also writes
    /// it to `replication-offset-checkpoint`. On failure the HW is as it was.
    SetHighWatermark { hw: u64, checkpoint: bool },
    /// Fsyncs every record: the recovery point moves to the LEO and is
    /// checkpointed (`UnifiedLog.flush`, then the recovery-point checkpoint).
    /// The HW's checkpoint is not touched.
    Flush,
    /// The HW checkpoint (`ReplicaManager.checkpointHighWatermarks`): writes
    /// the live HW to `replication-offset-checkpoint`, and any other
    /// checkpoint a failed write left stale. The one operation, besides a
    /// clean shutdown and the `checkpoint` flags above, that moves the
    /// checkpointed HW.
    WriteCheckpoints,
    /// Reads whole batches from the one holding `from` towards the LEO, at
    /// most `max_bytes` but at least one batch. Changes nothing.
    Read { from: u64, max_bytes: usize },
}

impl StorageOp {
    /// The operation's name, for errors and traces.
    pub fn name(&self) -> &'static str {
        match self {
            StorageOp::AppendAsLeader { .. } => "append as leader",
            StorageOp::AppendAsFollower { .. } => "append as follower",
            StorageOp::Truncate { .. } => "truncate",
            StorageOp::SetHighWatermark { .. } => "set high watermark",
            StorageOp::Flush => "flush",
            StorageOp::WriteCheckpoints => "write checkpoints",
            StorageOp::Read { .. } => "read",
        }
    }
}

/// A completed operation: the log's state after it, and what a read
/// returned (empty for every other operation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageDone {
    pub state: LogState,
    pub records: Vec<u8>,
}

/// A failed operation: the log's state after the failure (the state
/// before it, for an operation that is all or nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageFailed {
    pub state: LogState,
}

/// What a stopped replica's log holds, as the properties read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoppedImage {
    pub log: Vec<LogEntry>,
    pub high_watermark: u64,
    pub recovery_point: u64,
    /// The HW `replication-offset-checkpoint` holds once a restart opened
    /// the log (see [`LogState::hw_checkpoint`]).
    pub hw_checkpoint: u64,
    /// The leader epoch cache a restart loads.
    pub epochs: Vec<EpochEntry>,
    /// What the checkpoint files say once a restart opened the log (`None`
    /// where there are no files: a log in memory, or an image predicted
    /// rather than read back).
    pub files: Option<CheckpointFiles>,
}

/// The storage a replica's state machine runs on: it reports its state,
/// performs one [`StorageOp`] at a time, and stops cleanly or crashes.
pub trait ReplicaLog: Sized {
    /// What a stopped broker leaves of this log (its files, or an
    /// in-memory image of what they would hold), from which it restarts.
    type Stopped: std::fmt::Debug;

    /// The state the replication state machine mirrors.
    fn state(&self) -> LogState;

    /// Performs one operation; see the module docs for what a failure
    /// leaves.
    fn apply(&mut self, op: StorageOp) -> Result<StorageDone>;

    /// Every record with its offset, epoch and id, in offset order.
    fn entries(&self) -> Result<Vec<LogEntry>>;

    /// Clean shutdown: flush, checkpoints, clean-shutdown marker.
    fn close(self) -> Result<Self::Stopped>;

    /// Unclean shutdown: what was not flushed is lost.
    fn crash(self) -> Result<Self::Stopped>;

    /// Opens a stopped log again, recovering it after an unclean shutdown.
    fn restart(stopped: &Self::Stopped) -> Result<(Self, RecoveryReport)>;

    /// What a stopped log holds, read without restarting it (a
    /// [`DiskLog`](super::DiskLog) recovers a copy of its files); `None`
    /// when the implementation cannot read it back (then the caller keeps
    /// what the log held when it stopped).
    fn read_stopped(_stopped: &Self::Stopped) -> Option<Result<StoppedImage>> {
        None
    }
}
