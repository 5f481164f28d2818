//! What a stopped log directory would recover to, read without touching
//! it: [`copy_log_dir`] copies the directory (broker checkpoints, the
//! clean-shutdown marker, each partition directory) so that recovery can
//! run on the copy, and [`CheckpointFiles::read`] reads what the checkpoint
//! files say about one partition. Recovery changes the directory it opens
//! (it cuts, rebuilds indexes, consumes the marker), so a stopped broker's
//! own directory is left for its restart.

use std::fs;
use std::path::Path;

use super::checkpoint::{self, EpochEntry};
use super::epoch_cache;
use super::error::{Error, Result};
use super::log_dir::{LOG_START_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_CHECKPOINT};
use super::topic_partition::TopicPartition;

/// Copies the log directory `from` into `to` (created if missing): its
/// files, and the files of each directory in it (partition directories
/// hold no subdirectories). Plain copies, outside the file-system seam:
/// the copy is a reader's, not the storage layer's work.
pub fn copy_log_dir(from: &Path, to: &Path) -> Result<()> {
    copy_files(from, to, true)
}

fn copy_files(from: &Path, to: &Path, descend: bool) -> Result<()> {
    fs::create_dir_all(to).map_err(|e| Error::io(to, "create directory", e))?;
    let entries = fs::read_dir(from).map_err(|e| Error::io(from, "list directory", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(from, "list directory", e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| Error::io(&path, "stat", e))?;
        let target = to.join(entry.file_name());
        if kind.is_file() {
            fs::copy(&path, &target).map_err(|e| Error::io(&path, "copy", e))?;
        } else if kind.is_dir() && descend {
            copy_files(&path, &target, false)?;
        }
    }
    Ok(())
}

/// What the checkpoint files of a log directory say about one partition;
/// `None` where a file is missing or does not name the partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointFiles {
    /// `recovery-point-offset-checkpoint`.
    pub recovery_point: Option<u64>,
    /// `replication-offset-checkpoint` (the high watermark).
    pub high_watermark: Option<u64>,
    /// `log-start-offset-checkpoint`.
    pub log_start_offset: Option<u64>,
    /// The partition's `leader-epoch-checkpoint`.
    pub epochs: Option<Vec<EpochEntry>>,
}

impl CheckpointFiles {
    /// Reads the four files; one that does not parse is an error.
    pub fn read(log_dir: &Path, tp: &TopicPartition) -> Result<CheckpointFiles> {
        let offset = |name: &str| -> Result<Option<u64>> {
            Ok(checkpoint::read_offsets(&log_dir.join(name))?.and_then(|m| m.get(tp).copied()))
        };
        Ok(CheckpointFiles {
            recovery_point: offset(RECOVERY_POINT_CHECKPOINT)?,
            high_watermark: offset(REPLICATION_CHECKPOINT)?,
            log_start_offset: offset(LOG_START_CHECKPOINT)?,
            epochs: checkpoint::read_epochs(
                &log_dir.join(tp.dir_name()).join(epoch_cache::FILE_NAME),
            )?,
        })
    }
}
