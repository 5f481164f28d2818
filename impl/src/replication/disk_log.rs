//! [`DiskLog`]: a replica's log in Kafka's on-disk format, through the
//! storage layer: one partition log plus the broker's log directory, whose
//! checkpoints keep the HW (`replication-offset-checkpoint`) and the
//! recovery point across restarts. The HW's file is written only when an
//! operation asks for it (the periodic checkpoint, or the `checkpoint` flag
//! of the every-change policy) and on a clean shutdown, never with the
//! recovery point's: a crash finds the HW last checkpointed, as in Kafka.
//!
//! Its operations are all or nothing, except where a file system cannot
//! undo what it did:
//! - a follower's append that fails part way (a later batch, or the HW's
//!   checkpoint) cuts the batches it wrote (if that cut fails too, the
//!   prefix stays: whole, valid batches, which
//!   [`StorageFailed`](super::StorageFailed) reports);
//! - an HW whose checkpoint write fails is set back, but readers may have
//!   seen it in between (the storage layer publishes an HW as it is set);
//! - a truncation or a flush whose checkpoint write fails stays done: the
//!   checkpoint files then name offsets above the truth (a truncation) or
//!   below it (a flush); loading clamps the first to the log and the second
//!   only costs a longer recovery. Either way the next append first
//!   rewrites the checkpoints, and fails if it cannot, so that a stale
//!   recovery point never vouches for records written after the cut.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use super::error::Result;
use super::log::{record_id, LogEntry, LogState, ReplicaLog, StoppedImage, StorageDone, StorageOp};
use crate::storage::image::{copy_log_dir, CheckpointFiles};
use crate::storage::{
    self, Log, LogConfig, LogDir, LogReader, Mutation, RecoveryReport, TopicPartition,
};

/// How a [`DiskLog`] is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskLogConfig {
    pub topic_partition: TopicPartition,
    pub log: LogConfig,
}

impl DiskLogConfig {
    pub fn new(topic_partition: TopicPartition) -> DiskLogConfig {
        DiskLogConfig {
            topic_partition,
            log: LogConfig::default(),
        }
    }
}

/// A partition log in a broker log directory, with the broker-level
/// checkpoints kept up to date.
#[derive(Debug)]
pub struct DiskLog {
    log_dir: LogDir,
    config: DiskLogConfig,
    log: Log,
    /// A checkpoint write after a truncation or flush failed: rewrite the
    /// checkpoints before the next append.
    checkpoint_owed: bool,
    /// The same for a truncation's HW checkpoint (the every-change policy).
    hw_checkpoint_owed: bool,
}

/// A stopped [`DiskLog`]: its log directory, to be opened again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskStopped {
    pub dir: PathBuf,
    pub config: DiskLogConfig,
}

impl DiskLog {
    /// Opens the log directory at `path` (consuming its clean-shutdown
    /// marker) and the partition's log in it, recovering it if need be.
    pub fn open(path: &Path, config: &DiskLogConfig) -> Result<(DiskLog, RecoveryReport)> {
        let log_dir = LogDir::open(path)?;
        let (log, report) = log_dir.open_log(&config.topic_partition, config.log.clone())?;
        let mut d = DiskLog {
            log_dir,
            config: config.clone(),
            log,
            checkpoint_owed: false,
            hw_checkpoint_owed: false,
        };
        // The recovery point and log start now describe the log as loaded
        // (recovery may have cut it), so a second crash starts from the
        // truth. The HW's file keeps the last HW checkpointed (Kafka's
        // `LogManager.loadLogs` does not rewrite it either), unless it has
        // none for this partition (a new log, or a file that did not parse).
        d.checkpoint()?;
        if d.checkpointed_hw().is_none() {
            d.checkpoint_hw()?;
        }
        Ok((d, report))
    }

    /// Copies the stopped log directory `dir` into `scratch` and opens the
    /// copy as [`DiskLog::open`] opens a directory on restart (recovery
    /// included); `dir` itself is left as it is.
    pub fn open_copy(
        dir: &Path,
        scratch: &Path,
        config: &DiskLogConfig,
    ) -> Result<(DiskLog, RecoveryReport)> {
        copy_log_dir(dir, scratch)?;
        DiskLog::open(scratch, config)
    }

    /// What the log holds and its checkpoint files say, as a stopped
    /// image (the files as this open left them).
    pub fn image(&self) -> Result<StoppedImage> {
        let state = self.state();
        Ok(StoppedImage {
            log: self.entries()?,
            high_watermark: state.high_watermark,
            recovery_point: state.recovery_point,
            hw_checkpoint: state.hw_checkpoint,
            epochs: state.epochs,
            files: Some(CheckpointFiles::read(
                self.path(),
                &self.config.topic_partition,
            )?),
        })
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

    /// Writes the recovery-point and log-start checkpoints (not the HW's:
    /// see [`checkpoint_hw`](Self::checkpoint_hw)).
    pub fn checkpoint(&mut self) -> Result<()> {
        self.log_dir
            .checkpoint([(&self.config.topic_partition, &self.log)])?;
        self.checkpoint_owed = false;
        if self.config.log.mutation == Some(Mutation::HwWithEveryCheckpoint) {
            self.checkpoint_hw()?;
        }
        Ok(())
    }

    /// Writes the live HW to `replication-offset-checkpoint`
    /// (`ReplicaManager.checkpointHighWatermarks`), if the file holds another.
    pub fn checkpoint_hw(&mut self) -> Result<()> {
        self.log_dir
            .checkpoint_high_watermarks([(&self.config.topic_partition, &self.log)])?;
        self.hw_checkpoint_owed = false;
        Ok(())
    }

    /// The HW `replication-offset-checkpoint` holds for this partition.
    fn checkpointed_hw(&self) -> Option<u64> {
        self.log_dir
            .checkpoints(&self.config.topic_partition)
            .high_watermark
    }

    /// Before an append: the checkpoints a failed write left stale go first.
    fn pay_checkpoint_debt(&mut self) -> Result<()> {
        if self.checkpoint_owed {
            self.checkpoint()?;
        }
        if self.hw_checkpoint_owed {
            self.checkpoint_hw()?;
        }
        Ok(())
    }

    /// After a change that cannot be undone: its checkpoint, owed if it fails.
    fn checkpoint_or_owe(&mut self) -> Result<()> {
        let r = self.checkpoint();
        self.checkpoint_owed = r.is_err();
        r
    }

    /// Appends fetched batches, then takes the leader's HW capped at the LEO.
    fn append_as_follower(&mut self, batches: &[u8], hw: u64, checkpoint: bool) -> Result<()> {
        self.log.append_replicated(batches)?;
        let hw = hw.min(self.log.log_end_offset());
        if hw != self.log.high_watermark() {
            self.log.set_high_watermark(hw)?;
        }
        if checkpoint {
            self.checkpoint_hw()?;
        }
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

    fn stopped(&self) -> DiskStopped {
        DiskStopped {
            dir: self.log_dir.path().to_path_buf(),
            config: self.config.clone(),
        }
    }
}

impl ReplicaLog for DiskLog {
    type Stopped = DiskStopped;

    fn state(&self) -> LogState {
        LogState {
            log_start_offset: self.log.log_start_offset(),
            log_end_offset: self.log.log_end_offset(),
            high_watermark: self.log.high_watermark(),
            recovery_point: self.log.recovery_point(),
            hw_checkpoint: self.checkpointed_hw().unwrap_or(0),
            epochs: self.log.epoch_entries().to_vec(),
        }
    }

    fn apply(&mut self, op: StorageOp) -> Result<StorageDone> {
        let mut records = Vec::new();
        match op {
            StorageOp::AppendAsLeader { records, epoch } => {
                self.pay_checkpoint_debt()?;
                self.log.append(&records, epoch)?;
            }
            StorageOp::AppendAsFollower {
                batches,
                high_watermark,
                checkpoint,
            } => {
                self.pay_checkpoint_debt()?;
                let (leo, hw) = (self.log.log_end_offset(), self.log.high_watermark());
                if let Err(e) = self.append_as_follower(&batches, high_watermark, checkpoint) {
                    // Undo what was done before the failure; if that fails
                    // too, it stays (whole batches, an HW within them).
                    if self.log.log_end_offset() > leo {
                        let _ = self.log.truncate_to(leo);
                    }
                    let _ = self.log.set_high_watermark(hw);
                    return Err(e);
                }
            }
            StorageOp::Truncate { offset, checkpoint } => {
                if offset < self.log.log_end_offset() {
                    self.log.truncate_to(offset)?;
                    self.checkpoint_or_owe()?;
                    if checkpoint {
                        let r = self.checkpoint_hw();
                        self.hw_checkpoint_owed = r.is_err();
                        r?;
                    }
                }
            }
            StorageOp::SetHighWatermark { hw, checkpoint } => {
                let old = self.log.high_watermark();
                if hw != old {
                    self.log.set_high_watermark(hw)?;
                }
                if checkpoint {
                    if let Err(e) = self.checkpoint_hw() {
                        let _ = self.log.set_high_watermark(old);
                        return Err(e);
                    }
                }
            }
            StorageOp::Flush => {
                let before = self.log.recovery_point();
                self.log.flush(self.log.log_end_offset())?;
                if self.log.recovery_point() != before {
                    self.checkpoint_or_owe()?;
                }
            }
            StorageOp::WriteCheckpoints => {
                self.pay_checkpoint_debt()?;
                self.checkpoint_hw()?;
            }
            StorageOp::Read { from, max_bytes } => records = self.read(from, max_bytes)?,
        }
        Ok(StorageDone {
            state: self.state(),
            records,
        })
    }

    fn entries(&self) -> Result<Vec<LogEntry>> {
        read_entries(&self.log.reader(), self.log.log_start_offset(), u64::MAX)
    }

    fn close(self) -> Result<DiskStopped> {
        let stopped = self.stopped();
        self.log_dir
            .close(vec![(self.config.topic_partition, self.log)])?;
        Ok(stopped)
    }

    /// The in-memory state is dropped unflushed and every file is cut back
    /// to the recovery point (the page cache holding the rest is gone). The
    /// checkpoints and the leader-epoch-checkpoint were written atomically
    /// and survive; the next open recovers.
    fn crash(self) -> Result<DiskStopped> {
        let stopped = self.stopped();
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
        Ok(stopped)
    }

    fn restart(stopped: &DiskStopped) -> Result<(DiskLog, RecoveryReport)> {
        DiskLog::open(&stopped.dir, &stopped.config)
    }

    /// What a restart would find: the stopped directory is copied and the
    /// copy opened (recovered, after an unclean shutdown) and read back.
    fn read_stopped(stopped: &DiskStopped) -> Option<Result<StoppedImage>> {
        let read = || {
            let scratch = tempfile::tempdir()
                .map_err(|e| storage::Error::io(Path::new("temporary directory"), "create", e))?;
            // A copy read once and thrown away: no fsyncs.
            storage::fs::unsynced(|| {
                let (log, _) = DiskLog::open_copy(&stopped.dir, scratch.path(), &stopped.config)?;
                log.image()
            })
        };
        Some(read())
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
