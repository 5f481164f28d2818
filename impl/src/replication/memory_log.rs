//! [`MemoryLog`]: a replica's log in memory, with the semantics of the
//! file log ([`DiskLog`](super::DiskLog)) and of Kafka's `UnifiedLog`
//! underneath it: Kafka batches (magic v2, CRC-32C) at contiguous offsets,
//! the leader epoch cache kept as `LeaderEpochFileCache` keeps it, an HW
//! and a recovery point, and the broker-level checkpoints as the last
//! values written. Every operation is all or nothing. A crash keeps what
//! the file log's does: the batches that start below the recovery point,
//! the epoch cache trimmed to them, the HW and recovery point of the last
//! checkpoint, clamped. As on disk, the HW is checkpointed only when an
//! operation asks for it and on a clean shutdown.
//!
//! Cloning one costs a reference count per batch, so an exhaustive search
//! can carry a whole cluster of them along its stack.

use std::path::Path;
use std::sync::Arc;

use super::error::Result;
use super::log::{record_id, LogEntry, LogState, ReplicaLog, StoppedImage, StorageDone, StorageOp};
use super::types::LeaderEpoch;
use crate::storage::batch::{self, encode_batch, ProducerInfo};
use crate::storage::checkpoint::EpochEntry;
use crate::storage::{self as st, EpochCache, Record, RecoveryReport};

/// One stored batch: its bytes as a leader serves them, and its records as
/// the properties read them.
#[derive(Debug, PartialEq, Eq)]
struct StoredBatch {
    base_offset: u64,
    next_offset: u64,
    bytes: Vec<u8>,
    entries: Vec<LogEntry>,
}

/// What the broker-level checkpoint files would hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Checkpoints {
    high_watermark: u64,
    recovery_point: u64,
    log_start_offset: u64,
}

/// A partition log in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryLog {
    batches: Vec<Arc<StoredBatch>>,
    log_start_offset: u64,
    log_end_offset: u64,
    high_watermark: u64,
    recovery_point: u64,
    epochs: Vec<EpochEntry>,
    checkpoints: Checkpoints,
}

/// A stopped [`MemoryLog`]: what its files would hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryStopped {
    /// The log as a restart finds it, before recovery settles its offsets.
    durable: MemoryLog,
    clean: bool,
}

impl MemoryLog {
    /// An empty log starting at offset 0.
    pub fn new() -> MemoryLog {
        MemoryLog::default()
    }

    /// The HW as `replication-offset-checkpoint` would hold it.
    pub fn checkpointed_high_watermark(&self) -> u64 {
        self.checkpoints.high_watermark
    }

    /// The recovery-point and log-start checkpoints (not the HW's).
    fn write_checkpoints(&mut self) {
        self.checkpoints.recovery_point = self.recovery_point;
        self.checkpoints.log_start_offset = self.log_start_offset;
    }

    /// `replication-offset-checkpoint`.
    fn write_hw_checkpoint(&mut self) {
        self.checkpoints.high_watermark = self.high_watermark;
    }

    /// Kafka's `LeaderEpochFileCache.assign`, through the storage layer's cache.
    fn assign_epoch(epochs: &mut Vec<EpochEntry>, epoch: LeaderEpoch, start: u64) {
        let mut cache = EpochCache::new(Path::new(""), std::mem::take(epochs));
        cache.assign_in_memory(epoch, start);
        *epochs = cache.entries().to_vec();
    }

    fn append_batch(&mut self, stored: StoredBatch, epoch: LeaderEpoch) {
        Self::assign_epoch(&mut self.epochs, epoch, stored.base_offset);
        self.log_end_offset = stored.next_offset;
        self.batches.push(Arc::new(stored));
    }

    fn append_as_leader(&mut self, records: &[Record], epoch: LeaderEpoch) -> Result<()> {
        let mut bytes = Vec::new();
        let base = self.log_end_offset;
        encode_batch(&mut bytes, base, epoch, ProducerInfo::NONE, records)
            .map_err(st::Error::InvalidBatch)?;
        let entries = records
            .iter()
            .enumerate()
            .map(|(i, r)| LogEntry {
                offset: base + i as u64,
                epoch,
                record_id: record_id(r),
            })
            .collect();
        let stored = StoredBatch {
            base_offset: base,
            next_offset: base + records.len() as u64,
            bytes,
            entries,
        };
        self.append_batch(stored, epoch);
        Ok(())
    }

    /// Checks every batch first, so that a bad one appends nothing.
    fn append_as_follower(&mut self, bytes: &[u8]) -> Result<()> {
        let mut checked = Vec::new();
        let mut expected = self.log_end_offset;
        for b in batch::batches(bytes) {
            let b = b.map_err(st::Error::InvalidBatch)?;
            if b.header.base_offset != expected {
                return Err(st::Error::NonMonotonicAppend {
                    expected,
                    got: b.header.base_offset,
                }
                .into());
            }
            let epoch = b.header.partition_leader_epoch;
            let mut entries = Vec::new();
            for r in b.records() {
                let (offset, rec) = r.map_err(st::Error::InvalidBatch)?;
                entries.push(LogEntry {
                    offset,
                    epoch,
                    record_id: record_id(&rec),
                });
            }
            expected = b.header.next_offset();
            checked.push((
                StoredBatch {
                    base_offset: b.header.base_offset,
                    next_offset: expected,
                    bytes: b.as_bytes().to_vec(),
                    entries,
                },
                epoch,
            ));
        }
        for (stored, epoch) in checked {
            self.append_batch(stored, epoch);
        }
        Ok(())
    }

    /// `UnifiedLog.truncateTo`: the batch holding `offset` goes whole.
    fn truncate_to(&mut self, offset: u64) {
        if offset >= self.log_end_offset {
            return;
        }
        if offset < self.log_start_offset {
            // `truncateFullyAndStartAt`.
            self.batches.clear();
            self.epochs.clear();
            self.log_start_offset = offset;
            self.log_end_offset = offset;
            self.high_watermark = offset;
            self.recovery_point = offset;
            return;
        }
        let keep = self.batches.partition_point(|b| b.next_offset <= offset);
        let new_end = self
            .batches
            .get(keep)
            .map_or(self.log_end_offset, |b| b.base_offset);
        self.batches.truncate(keep);
        let mut cache = EpochCache::new(Path::new(""), std::mem::take(&mut self.epochs));
        cache.truncate_from_end(new_end);
        self.epochs = cache.entries().to_vec();
        self.log_end_offset = new_end;
        self.high_watermark = self.high_watermark.min(new_end);
        self.recovery_point = self.recovery_point.min(new_end);
    }

    fn set_high_watermark(&mut self, hw: u64) -> Result<()> {
        if hw > self.log_end_offset {
            return Err(st::Error::HighWatermarkBeyondLeo {
                high_watermark: hw,
                log_end_offset: self.log_end_offset,
            }
            .into());
        }
        self.high_watermark = hw.max(self.log_start_offset);
        Ok(())
    }

    fn read(&self, from: u64, max_bytes: usize) -> Result<Vec<u8>> {
        if from < self.log_start_offset || from > self.log_end_offset {
            return Err(st::Error::OffsetOutOfRange {
                offset: from,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            }
            .into());
        }
        let first = self.batches.partition_point(|b| b.next_offset <= from);
        let mut out = Vec::new();
        for b in &self.batches[first..] {
            if !out.is_empty() && out.len() + b.bytes.len() > max_bytes {
                break;
            }
            out.extend_from_slice(&b.bytes);
        }
        Ok(out)
    }

    /// What a restart of `durable` finds, as `LogLoader` settles it.
    fn loaded(durable: &MemoryLog, clean: bool) -> (MemoryLog, RecoveryReport) {
        let mut log = durable.clone();
        let end = log.log_end_offset;
        let c = log.checkpoints;
        log.log_start_offset = c.log_start_offset.min(end);
        log.recovery_point = if clean {
            end
        } else {
            c.recovery_point.min(end)
        };
        log.high_watermark = c.high_watermark.min(end).max(log.log_start_offset);
        // The HW's checkpoint stays as it was, as on disk.
        log.write_checkpoints();
        let report = RecoveryReport {
            clean_shutdown: clean,
            log_start_offset: log.log_start_offset,
            log_end_offset: end,
            recovery_point: log.recovery_point,
            high_watermark: log.high_watermark,
            ..RecoveryReport::default()
        };
        (log, report)
    }
}

impl ReplicaLog for MemoryLog {
    type Stopped = MemoryStopped;

    fn state(&self) -> LogState {
        LogState {
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            high_watermark: self.high_watermark,
            recovery_point: self.recovery_point,
            hw_checkpoint: self.checkpoints.high_watermark,
            epochs: self.epochs.clone(),
        }
    }

    fn apply(&mut self, op: StorageOp) -> Result<StorageDone> {
        let mut records = Vec::new();
        match op {
            StorageOp::AppendAsLeader { records, epoch } => {
                self.append_as_leader(&records, epoch)?
            }
            StorageOp::AppendAsFollower {
                batches,
                high_watermark,
                checkpoint,
            } => {
                self.append_as_follower(&batches)?;
                let hw = high_watermark.min(self.log_end_offset);
                if hw != self.high_watermark {
                    self.set_high_watermark(hw)?;
                }
                if checkpoint {
                    self.write_hw_checkpoint();
                }
            }
            StorageOp::Truncate { offset, checkpoint } => {
                if offset < self.log_end_offset {
                    self.truncate_to(offset);
                    self.write_checkpoints();
                    if checkpoint {
                        self.write_hw_checkpoint();
                    }
                }
            }
            StorageOp::SetHighWatermark { hw, checkpoint } => {
                self.set_high_watermark(hw)?;
                if checkpoint {
                    self.write_hw_checkpoint();
                }
            }
            StorageOp::Flush => {
                if self.recovery_point < self.log_end_offset {
                    self.recovery_point = self.log_end_offset;
                    self.write_checkpoints();
                }
            }
            StorageOp::WriteCheckpoints => {
                self.write_checkpoints();
                self.write_hw_checkpoint();
            }
            StorageOp::Read { from, max_bytes } => records = self.read(from, max_bytes)?,
        }
        Ok(StorageDone {
            state: self.state(),
            records,
        })
    }

    fn entries(&self) -> Result<Vec<LogEntry>> {
        Ok(self
            .batches
            .iter()
            .flat_map(|b| b.entries.iter().copied())
            .collect())
    }

    fn close(mut self) -> Result<MemoryStopped> {
        self.recovery_point = self.log_end_offset;
        self.write_checkpoints();
        self.write_hw_checkpoint();
        Ok(MemoryStopped {
            durable: self,
            clean: true,
        })
    }

    /// Keeps the batches that start below the recovery point; the epoch
    /// cache (written as it changed) is trimmed to them on restart.
    fn crash(mut self) -> Result<MemoryStopped> {
        let keep = self
            .batches
            .partition_point(|b| b.base_offset < self.recovery_point);
        self.batches.truncate(keep);
        let end = self
            .batches
            .last()
            .map_or(self.log_start_offset.min(self.log_end_offset), |b| {
                b.next_offset
            });
        let mut cache = EpochCache::new(Path::new(""), std::mem::take(&mut self.epochs));
        cache.truncate_from_end(end);
        self.epochs = cache.entries().to_vec();
        self.log_end_offset = end;
        Ok(MemoryStopped {
            durable: self,
            clean: false,
        })
    }

    fn restart(stopped: &MemoryStopped) -> Result<(MemoryLog, RecoveryReport)> {
        Ok(MemoryLog::loaded(&stopped.durable, stopped.clean))
    }

    fn read_stopped(stopped: &MemoryStopped) -> Option<Result<StoppedImage>> {
        let (log, _) = MemoryLog::loaded(&stopped.durable, stopped.clean);
        Some(log.entries().map(|entries| StoppedImage {
            log: entries,
            high_watermark: log.high_watermark,
            recovery_point: log.recovery_point,
            hw_checkpoint: log.checkpoints.high_watermark,
            epochs: log.epochs.clone(),
            files: None,
        }))
    }
}
