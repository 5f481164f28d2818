//! The log a replica replicates, as the state machine sees it
//! ([`ReplicaLog`]), and its implementation over the storage layer
//! ([`DiskLog`]): one partition log plus the broker's log directory, whose
//! checkpoints keep the HW (`replication-offset-checkpoint`) and the
//! recovery point across restarts.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::Result;
use super::types::{LeaderEpoch, RecordId};
use crate::storage::checkpoint::EpochEntry;
use crate::storage::{
    self, EpochEndOffset, Log, LogConfig, LogDir, LogReader, Record, RecoveryReport, TopicPartition,
};

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

/// The operations the partition state machine performs on its log. Every
/// offset is a Kafka offset; epochs are partition leader epochs.
pub trait ReplicaLog {
    fn log_start_offset(&self) -> u64;
    /// LEO: the offset the next record gets.
    fn log_end_offset(&self) -> u64;
    fn high_watermark(&self) -> u64;
    /// Everything below it has been flushed.
    fn recovery_point(&self) -> u64;
    /// The leader epoch cache: (epoch, start offset), both increasing.
    fn epoch_entries(&self) -> Vec<EpochEntry>;
    /// The latest epoch with records.
    fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.epoch_entries().last().map(|e| e.epoch)
    }
    /// KIP-101/279 lookup in this log's epoch cache; see
    /// [`EpochCache::end_offset_for`](crate::storage::EpochCache::end_offset_for).
    fn end_offset_for_epoch(&self, epoch: LeaderEpoch) -> Option<EpochEndOffset>;
    /// Appends `records` as one batch stamped with `epoch` (a leader's
    /// append); returns the batch's first offset.
    fn append_as_leader(&mut self, records: &[Record], epoch: LeaderEpoch) -> Result<u64>;
    /// Appends batches fetched from the leader, keeping offsets and epochs.
    fn append_as_follower(&mut self, batches: &[u8]) -> Result<()>;
    /// Whole batches from `from` (a batch boundary) towards the LEO, at most
    /// `max_bytes` (but at least one batch).
    fn read(&self, from: u64, max_bytes: usize) -> Result<Vec<u8>>;
    /// Removes every record at or above `offset`; HW and recovery point
    /// follow it down.
    fn truncate_to(&mut self, offset: u64) -> Result<()>;
    /// Sets the HW (never above the LEO) and persists it as the policy says.
    fn set_high_watermark(&mut self, hw: u64) -> Result<()>;
    /// Flushes every record: the recovery point moves to the LEO.
    fn flush(&mut self) -> Result<()>;
}

/// When the HW is written to `replication-offset-checkpoint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HwCheckpointPolicy {
    /// After every change: a restart finds the HW it had, as in the model.
    EveryChange,
    /// At most once per interval, as Kafka does
    /// (`replica.high.watermark.checkpoint.interval.ms`, 5 s by default);
    /// [`DiskLog::maybe_checkpoint`] writes it. A restart may find an older HW.
    IntervalMs(u64),
}

/// How a [`DiskLog`] is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskLogConfig {
    pub topic_partition: TopicPartition,
    pub log: LogConfig,
    pub hw_checkpoint: HwCheckpointPolicy,
}

impl DiskLogConfig {
    pub fn new(topic_partition: TopicPartition) -> DiskLogConfig {
        DiskLogConfig {
            topic_partition,
            log: LogConfig::default(),
            hw_checkpoint: HwCheckpointPolicy::EveryChange,
        }
    }
}

/// A partition log in a broker log directory, with the broker-level
/// checkpoints kept up to date.
#[derive(Debug)]
pub struct DiskLog {
    log_dir: LogDir,
    tp: TopicPartition,
    log: Log,
    policy: HwCheckpointPolicy,
    /// The HW changed since the last checkpoint.
    hw_dirty: bool,
    last_checkpoint_ms: u64,
}

impl DiskLog {
    /// Opens the log directory at `path` (consuming its clean-shutdown
    /// marker) and the partition's log in it, recovering it if need be.
    pub fn open(path: &Path, config: &DiskLogConfig) -> Result<(DiskLog, RecoveryReport)> {
        let log_dir = LogDir::open(path)?;
        let (log, report) = log_dir.open_log(&config.topic_partition, config.log.clone())?;
        let mut d = DiskLog {
            log_dir,
            tp: config.topic_partition.clone(),
            log,
            policy: config.hw_checkpoint,
            hw_dirty: false,
            last_checkpoint_ms: 0,
        };
        // The checkpoints now describe the log as loaded (recovery may have
        // cut it), so a second crash starts from the truth.
        d.checkpoint()?;
        Ok((d, report))
    }

    pub fn log(&self) -> &Log {
        &self.log
    }
    pub fn reader(&self) -> LogReader {
        self.log.reader()
    }
    pub fn path(&self) -> &Path {
        self.log_dir.path()
    }

    /// Writes the broker-level checkpoints (recovery point, HW, log start).
    pub fn checkpoint(&mut self) -> Result<()> {
        self.log_dir.checkpoint([(&self.tp, &self.log)])?;
        self.hw_dirty = false;
        Ok(())
    }

    /// Under [`HwCheckpointPolicy::IntervalMs`], writes the checkpoints when
    /// the HW changed and the interval has passed since the last write.
    pub fn maybe_checkpoint(&mut self, now_ms: u64) -> Result<()> {
        if let HwCheckpointPolicy::IntervalMs(every) = self.policy {
            if self.hw_dirty && now_ms.saturating_sub(self.last_checkpoint_ms) >= every {
                self.checkpoint()?;
                self.last_checkpoint_ms = now_ms;
            }
        }
        Ok(())
    }

    /// Every record with its offset, epoch and id, read from the files.
    pub fn entries(&self) -> Result<Vec<LogEntry>> {
        read_entries(&self.log.reader(), self.log.log_start_offset(), u64::MAX)
    }

    /// Clean shutdown: flush, checkpoints, clean-shutdown marker.
    pub fn close(self) -> Result<()> {
        self.log_dir.close(vec![(self.tp, self.log)])?;
        Ok(())
    }

    /// Unclean shutdown: the in-memory state is dropped unflushed and every
    /// file is cut back to the recovery point (the page cache holding the
    /// rest is gone). The checkpoints and the leader-epoch-checkpoint were
    /// written atomically and survive; the next open recovers.
    pub fn crash(self) -> Result<()> {
        let dir: PathBuf = self.log.dir().to_path_buf();
        let cut = unflushed_start(&self.log)?;
        drop(self.log);
        drop(self.log_dir);
        if let Some((base, position)) = cut {
            for b in storage::segment_bases(&dir)? {
                if b < base {
                    continue;
                }
                let log_path = dir.join(storage::file_name(b, "log"));
                if b == base {
                    let f = OpenOptions::new()
                        .write(true)
                        .open(&log_path)
                        .map_err(|e| storage::Error::io(&log_path, "open segment", e))?;
                    f.set_len(position)
                        .map_err(|e| storage::Error::io(&log_path, "cut segment", e))?;
                } else {
                    for ext in ["log", "index", "timeindex"] {
                        let p = dir.join(storage::file_name(b, ext));
                        match fs::remove_file(&p) {
                            Ok(()) => {}
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                            Err(e) => return Err(storage::Error::io(&p, "delete", e).into()),
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Where unflushed data starts: (segment base, byte position) of the first
/// batch not wholly below the recovery point; `None` when all is flushed.
fn unflushed_start(log: &Log) -> Result<Option<(u64, u64)>> {
    let rp = log.recovery_point();
    if rp >= log.log_end_offset() {
        return Ok(None);
    }
    let reader = log.reader();
    let p = reader.lookup(rp)?;
    if p.batch_base_offset < rp {
        // A flush syncs whole files, so the batch holding the recovery
        // point was synced whole.
        let next = p.batch_last_offset + 1;
        if next >= log.log_end_offset() {
            return Ok(None);
        }
        let q = reader.lookup(next)?;
        return Ok(Some((q.segment_base_offset, q.position)));
    }
    Ok(Some((p.segment_base_offset, p.position)))
}

/// Reads every record in `[from, min(upper_bound, LEO))` as log entries.
pub fn read_entries(reader: &LogReader, from: u64, upper_bound: u64) -> Result<Vec<LogEntry>> {
    let mut out = Vec::new();
    let mut at = from;
    loop {
        let data = reader.read(at, 1 << 20, upper_bound)?;
        if data.next_offset <= at {
            break;
        }
        for b in data.batches() {
            let epoch = b.header.partition_leader_epoch;
            for r in b.records() {
                let (offset, rec) = r.map_err(storage::Error::InvalidBatch)?;
                if offset >= at {
                    out.push(LogEntry {
                        offset,
                        epoch,
                        record_id: record_id(&rec),
                    });
                }
            }
        }
        at = data.next_offset;
    }
    Ok(out)
}

impl ReplicaLog for DiskLog {
    fn log_start_offset(&self) -> u64 {
        self.log.log_start_offset()
    }
    fn log_end_offset(&self) -> u64 {
        self.log.log_end_offset()
    }
    fn high_watermark(&self) -> u64 {
        self.log.high_watermark()
    }
    fn recovery_point(&self) -> u64 {
        self.log.recovery_point()
    }
    fn epoch_entries(&self) -> Vec<EpochEntry> {
        self.log.epoch_entries().to_vec()
    }
    fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.log.latest_epoch()
    }
    fn end_offset_for_epoch(&self, epoch: LeaderEpoch) -> Option<EpochEndOffset> {
        self.log.end_offset_for_epoch(epoch)
    }
    fn append_as_leader(&mut self, records: &[Record], epoch: LeaderEpoch) -> Result<u64> {
        Ok(self.log.append(records, epoch)?.first_offset)
    }
    fn append_as_follower(&mut self, batches: &[u8]) -> Result<()> {
        self.log.append_replicated(batches)?;
        Ok(())
    }
    fn read(&self, from: u64, max_bytes: usize) -> Result<Vec<u8>> {
        // One storage read stops at a segment's end: go on to the LEO.
        let mut out = Vec::new();
        let mut at = from;
        let end = self.log.log_end_offset();
        while at < end && (out.is_empty() || out.len() < max_bytes) {
            let room = max_bytes.saturating_sub(out.len()).max(1);
            let data = self.log.read(at, room, u64::MAX)?;
            if data.next_offset <= at {
                break;
            }
            if !out.is_empty() && out.len() + data.records.len() > max_bytes {
                break;
            }
            out.extend_from_slice(&data.records);
            at = data.next_offset;
        }
        Ok(out)
    }
    fn truncate_to(&mut self, offset: u64) -> Result<()> {
        if offset < self.log.log_end_offset() {
            self.log.truncate_to(offset)?;
            self.checkpoint()?;
        }
        Ok(())
    }
    fn set_high_watermark(&mut self, hw: u64) -> Result<()> {
        if hw == self.log.high_watermark() {
            return Ok(());
        }
        self.log.set_high_watermark(hw)?;
        self.hw_dirty = true;
        if self.policy == HwCheckpointPolicy::EveryChange {
            self.checkpoint()?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        let before = self.log.recovery_point();
        self.log.flush(self.log.log_end_offset())?;
        if self.log.recovery_point() != before {
            self.checkpoint()?;
        }
        Ok(())
    }
}
