//! A broker log directory: partition directories plus the broker-level
//! checkpoints kept beside them, keyed by topic and partition:
//! `recovery-point-offset-checkpoint`, `replication-offset-checkpoint` (the
//! high watermarks), `log-start-offset-checkpoint`, and the clean-shutdown
//! marker `.kafka_cleanshutdown`.
//!
//! The marker is read and removed when the directory is opened, so that a
//! crash at any later moment leads to recovery; [`LogDir::close`] writes it
//! back after everything is flushed and checkpointed.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::checkpoint;
use super::config::LogConfig;
use super::error::{Error, Result};
use super::log::Log;
use super::recovery::{LoadParams, RecoveryReport};
use super::topic_partition::TopicPartition;

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const REPLICATION_CHECKPOINT: &str = "replication-offset-checkpoint";
pub const LOG_START_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";

/// Offsets of one partition as the broker-level checkpoints hold them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionCheckpoints {
    pub recovery_point: Option<u64>,
    pub high_watermark: Option<u64>,
    pub log_start_offset: Option<u64>,
}

/// A log directory and its checkpoint files.
#[derive(Debug)]
pub struct LogDir {
    path: PathBuf,
    clean_shutdown: bool,
    broker_epoch: Option<i64>,
    recovery_points: BTreeMap<TopicPartition, u64>,
    high_watermarks: BTreeMap<TopicPartition, u64>,
    log_starts: BTreeMap<TopicPartition, u64>,
    /// A checkpoint write failed: the files may be older than memory, so the
    /// next checkpoint writes all three.
    files_stale: bool,
    /// Checkpoint files that did not parse, and what was assumed instead.
    repairs: Vec<String>,
}

/// Reads an offset checkpoint; a missing file is empty. A file that does
/// not parse, or cannot be read at all (a directory where the file should
/// be, permission denied, an I/O error), is empty too, with a repair noted,
/// as Kafka's `LogManager.loadLogs` treats the recovery-point and log-start
/// checkpoints (it catches any exception of the read and starts from the
/// defaults): each partition then gets the safe value (recovery from offset
/// 0, the log start at the first segment, the HW at the log start).
fn read_or_reset(
    path: &Path,
    assumed: &str,
    repairs: &mut Vec<String>,
) -> BTreeMap<TopicPartition, u64> {
    match checkpoint::read_offsets(path) {
        Ok(m) => m.unwrap_or_default(),
        Err(e) => {
            repairs.push(format!("{e}; ignoring the file: {assumed}"));
            BTreeMap::new()
        }
    }
}

/// The three broker checkpoints of a log directory, each read leniently
/// ([`read_or_reset`]), with the repairs that reading needed.
struct Checkpoints {
    recovery_points: BTreeMap<TopicPartition, u64>,
    high_watermarks: BTreeMap<TopicPartition, u64>,
    log_starts: BTreeMap<TopicPartition, u64>,
    repairs: Vec<String>,
}

fn read_checkpoints(path: &Path) -> Checkpoints {
    let mut repairs = Vec::new();
    let recovery_points = read_or_reset(
        &path.join(RECOVERY_POINT_CHECKPOINT),
        "every partition is recovered from offset 0",
        &mut repairs,
    );
    let high_watermarks = read_or_reset(
        &path.join(REPLICATION_CHECKPOINT),
        "every partition's high watermark starts at its log start offset",
        &mut repairs,
    );
    let log_starts = read_or_reset(
        &path.join(LOG_START_CHECKPOINT),
        "every partition's log start offset is its first segment's base offset",
        &mut repairs,
    );
    Checkpoints {
        recovery_points,
        high_watermarks,
        log_starts,
        repairs,
    }
}

impl LogDir {
    /// Opens (creating if needed) a log directory: reads the three offset
    /// checkpoints (a missing file counts as empty; so does one that does
    /// not parse or cannot be read, which is noted in [`repairs`](Self::repairs) and in every
    /// partition's recovery report: its partitions are recovered from offset
    /// 0, which never skips recovery) and consumes the clean-shutdown marker.
    pub fn open(path: &Path) -> Result<LogDir> {
        super::fs::create_dir_all(path).map_err(|e| Error::io(path, "create log directory", e))?;
        // The files that did not parse are rewritten at the next checkpoint
        // (`files_stale`).
        let dir = LogDir::inspect(path)?;
        if dir.clean_shutdown {
            let marker = path.join(CLEAN_SHUTDOWN_MARKER);
            super::fs::remove(&marker).map_err(|e| Error::io(&marker, "remove marker", e))?;
            checkpoint::sync_dir(path)?;
        }
        Ok(dir)
    }

    /// Reads an existing log directory as [`open`](Self::open) would,
    /// changing nothing: the clean-shutdown marker stays, nothing is
    /// created. For tools that must load a partition exactly as the
    /// library would (the same repairs of the broker checkpoints).
    pub fn inspect(path: &Path) -> Result<LogDir> {
        if !path.is_dir() {
            return Err(Error::io(
                path,
                "open log directory",
                std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
            ));
        }
        let marker = path.join(CLEAN_SHUTDOWN_MARKER);
        let clean_shutdown = marker.exists();
        let broker_epoch = if clean_shutdown {
            fs::read_to_string(&marker)
                .ok()
                .and_then(|t| parse_broker_epoch(&t))
        } else {
            None
        };
        let c = read_checkpoints(path);
        Ok(LogDir {
            path: path.to_path_buf(),
            clean_shutdown,
            broker_epoch,
            recovery_points: c.recovery_points,
            high_watermarks: c.high_watermarks,
            log_starts: c.log_starts,
            files_stale: !c.repairs.is_empty(),
            repairs: c.repairs,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Checkpoint files that did not parse when the directory was opened,
    /// each with the value assumed instead.
    pub fn repairs(&self) -> &[String] {
        &self.repairs
    }

    /// Whether the directory held the clean-shutdown marker when opened.
    pub fn had_clean_shutdown(&self) -> bool {
        self.clean_shutdown
    }

    /// The broker epoch the clean-shutdown marker recorded, if it held one.
    pub fn clean_shutdown_broker_epoch(&self) -> Option<i64> {
        self.broker_epoch
    }

    /// The checkpointed offsets of one partition.
    pub fn checkpoints(&self, tp: &TopicPartition) -> PartitionCheckpoints {
        PartitionCheckpoints {
            recovery_point: self.recovery_points.get(tp).copied(),
            high_watermark: self.high_watermarks.get(tp).copied(),
            log_start_offset: self.log_starts.get(tp).copied(),
        }
    }

    /// The partitions found as `<topic>-<partition>` directories.
    pub fn partitions(&self) -> Result<Vec<TopicPartition>> {
        let mut out = Vec::new();
        let entries = fs::read_dir(&self.path).map_err(|e| Error::io(&self.path, "list", e))?;
        for e in entries {
            let e = e.map_err(|e| Error::io(&self.path, "list", e))?;
            if !e.path().is_dir() {
                continue;
            }
            if let Some(name) = e.file_name().to_str() {
                out.push(TopicPartition::parse_dir_name(name)?);
            }
        }
        out.sort();
        Ok(out)
    }

    /// The load parameters of one partition: a partition missing from the
    /// recovery-point checkpoint is recovered from its start.
    pub fn load_params(&self, tp: &TopicPartition) -> LoadParams {
        let c = self.checkpoints(tp);
        LoadParams {
            recovery_point: c.recovery_point.unwrap_or(0),
            log_start_offset: c.log_start_offset.unwrap_or(0),
            high_watermark: c.high_watermark.unwrap_or(0),
            clean_shutdown: self.clean_shutdown,
        }
    }

    /// Opens the log of `tp` in `<dir>/<topic>-<partition>/`.
    pub fn open_log(
        &self,
        tp: &TopicPartition,
        config: LogConfig,
    ) -> Result<(Log, RecoveryReport)> {
        let (log, mut report) =
            Log::open(&self.path.join(tp.dir_name()), config, self.load_params(tp))?;
        report.repairs.splice(0..0, self.repairs.iter().cloned());
        Ok((log, report))
    }

    /// Records the recovery points and log start offsets of `logs` and
    /// writes those of the two checkpoint files whose contents changed
    /// (each atomically). The HW's file is not written here: Kafka writes
    /// it only from `ReplicaManager.checkpointHighWatermarks` (periodic) and
    /// on shutdown, so a crash finds the HW last checkpointed, not the one
    /// of the last flush or truncation; see
    /// [`checkpoint_high_watermarks`](Self::checkpoint_high_watermarks).
    /// Partitions not in `logs` keep their entries.
    pub fn checkpoint<'a>(
        &mut self,
        logs: impl IntoIterator<Item = (&'a TopicPartition, &'a Log)>,
    ) -> Result<()> {
        let (mut rp, mut start) = (false, false);
        for (tp, log) in logs {
            rp |= self
                .recovery_points
                .insert(tp.clone(), log.recovery_point())
                != Some(log.recovery_point());
            start |= self.log_starts.insert(tp.clone(), log.log_start_offset())
                != Some(log.log_start_offset());
        }
        self.write_changed(rp, false, start)
    }

    /// Kafka's `ReplicaManager.checkpointHighWatermarks`: records the HWs of
    /// `logs` and writes `replication-offset-checkpoint` if one changed
    /// (with any file a failed write left stale). An HW change, the common
    /// case, rewrites this one file.
    pub fn checkpoint_high_watermarks<'a>(
        &mut self,
        logs: impl IntoIterator<Item = (&'a TopicPartition, &'a Log)>,
    ) -> Result<()> {
        let mut before = Vec::new();
        for (tp, log) in logs {
            let was = self
                .high_watermarks
                .insert(tp.clone(), log.high_watermark());
            if was != Some(log.high_watermark()) {
                before.push((tp.clone(), was));
            }
        }
        let written = self.write_changed(false, !before.is_empty(), false);
        if written.is_err() {
            // The file (written atomically) still holds the old values.
            for (tp, was) in before {
                match was {
                    Some(hw) => self.high_watermarks.insert(tp, hw),
                    None => self.high_watermarks.remove(&tp),
                };
            }
        }
        written
    }

    /// Writes the files named (all three if a write failed before).
    fn write_changed(&mut self, rp: bool, hw: bool, start: bool) -> Result<()> {
        let all = self.files_stale;
        let written = (|| {
            if rp || all {
                self.write(RECOVERY_POINT_CHECKPOINT, &self.recovery_points)?;
            }
            if hw || all {
                self.write(REPLICATION_CHECKPOINT, &self.high_watermarks)?;
            }
            if start || all {
                self.write(LOG_START_CHECKPOINT, &self.log_starts)?;
            }
            Ok(())
        })();
        self.files_stale = written.is_err();
        written
    }

    fn write(&self, name: &str, offsets: &BTreeMap<TopicPartition, u64>) -> Result<()> {
        checkpoint::write_offsets(&self.path.join(name), offsets)
    }

    /// Writes the three broker-level checkpoint files from memory.
    fn write_checkpoints(&self) -> Result<()> {
        checkpoint::write_offsets(
            &self.path.join(RECOVERY_POINT_CHECKPOINT),
            &self.recovery_points,
        )?;
        checkpoint::write_offsets(
            &self.path.join(REPLICATION_CHECKPOINT),
            &self.high_watermarks,
        )?;
        checkpoint::write_offsets(&self.path.join(LOG_START_CHECKPOINT), &self.log_starts)
    }

    /// Forgets a partition (after its directory was deleted).
    pub fn remove(&mut self, tp: &TopicPartition) {
        self.recovery_points.remove(tp);
        self.high_watermarks.remove(tp);
        self.log_starts.remove(tp);
    }

    /// Clean shutdown: flushes and closes every log, writes the checkpoints,
    /// then the marker, so the next open skips recovery.
    pub fn close(self, logs: Vec<(TopicPartition, Log)>) -> Result<()> {
        self.close_with_broker_epoch(logs, -1)
    }

    /// [`close`](Self::close), recording the broker epoch in the marker as
    /// Kafka does for KIP-966 (`{"version":"0","broker_epoch":"<epoch>"}`).
    pub fn close_with_broker_epoch(
        mut self,
        logs: Vec<(TopicPartition, Log)>,
        broker_epoch: i64,
    ) -> Result<()> {
        let mut offsets = Vec::new();
        for (tp, mut log) in logs {
            log.flush(log.log_end_offset())?;
            offsets.push((
                tp.clone(),
                log.recovery_point(),
                log.high_watermark(),
                log.log_start_offset(),
            ));
            log.close()?;
        }
        for (tp, rp, hw, lso) in offsets {
            self.recovery_points.insert(tp.clone(), rp);
            self.high_watermarks.insert(tp.clone(), hw);
            self.log_starts.insert(tp, lso);
        }
        self.write_checkpoints()?;
        let marker = format!("{{\"version\":\"0\",\"broker_epoch\":\"{broker_epoch}\"}}");
        checkpoint::write_atomically(&self.path.join(CLEAN_SHUTDOWN_MARKER), marker.as_bytes())
    }
}

/// Reads `"broker_epoch":"<n>"` from the marker's small JSON object. The
/// marker only needs to exist; an unreadable epoch is simply unknown.
fn parse_broker_epoch(text: &str) -> Option<i64> {
    let rest = &text[text.find("\"broker_epoch\"")? + "\"broker_epoch\"".len()..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"').unwrap_or(rest);
    let end = rest
        .find(|c: char| c != '-' && !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_epoch() {
        assert_eq!(
            parse_broker_epoch(r#"{"version":"0","broker_epoch":"42"}"#),
            Some(42)
        );
        assert_eq!(
            parse_broker_epoch(r#"{"broker_epoch": "-1", "version":"0"}"#),
            Some(-1)
        );
        assert_eq!(parse_broker_epoch(""), None);
        assert_eq!(parse_broker_epoch(r#"{"broker_epoch":"x"}"#), None);
    }
}
