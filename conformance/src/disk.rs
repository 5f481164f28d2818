//! Lockstep reads the disk. A down replica's image comes from its files:
//! the step driver copies its stopped directory and opens the copy as a
//! restart would (`DiskLog::read_stopped`), and lockstep compares what that
//! recovery loads, and what the checkpoint files then say, with the
//! model's view of the replica ([`down_replica_differences`]). Two more
//! crash images are built from the files, never predicted:
//!
//! - [`flipped_epoch_image`]: the stopped files with one bit of the
//!   `leader-epoch-checkpoint` flipped (the file has no checksum, and
//!   Kafka's own write of it after a truncation is asynchronous, so a
//!   restart may find it wrong). Recovery must load the same log from the
//!   batches.
//! - [`KillPoints`]: a follower killed (`kill -9`: what it wrote stays in
//!   the page cache) before each file deletion or cut of a
//!   BecomeFollower step. Its files as they were before the step, with the
//!   step's recorded file operations up to that point replayed on a copy,
//!   must recover a log between the model's after the step and before it.

use crate::abstraction::model_entry;
use highwater::replication::{DiskLog, DiskLogConfig, LogEntry, ReplicaLog, StoppedImage};
use highwater::storage::checkpoint::{self, EpochEntry};
use highwater::storage::fs::{unsynced, FsOp};
use highwater::storage::image::copy_log_dir;
use highwater::storage::{epoch_cache, TopicPartition};
use highwater_model::state::{replica_name, Compact, Entry, Log, Replica, ReplicaId};
use highwater_model::truncation::cache_of;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The leader epoch cache the model's `log` implies (the model keeps none:
/// it computes `cache_of` the log), as storage entries.
pub fn model_cache(log: &Log) -> Vec<EpochEntry> {
    cache_of::<Compact>(log, log.leo())
        .into_iter()
        .map(|(epoch, start)| EpochEntry {
            epoch: i32::from(epoch),
            start_offset: u64::from(start),
        })
        .collect()
}

/// Where what a down replica's files recover to differs from the model's
/// view of it, beyond what the abstraction compares (log, HW, recovery
/// point, HW checkpoint): the leader epoch cache loaded, and the checkpoint
/// files as the restart left them. The HW a restart takes from
/// `replication-offset-checkpoint` (the file's, within the log) must be the
/// model's HW; the file itself the model's `hw_checkpoint` when the model
/// keeps one (periodic, and the recovery points, `keeps_recovery_point`,
/// are kept). The recovery-point checkpoint is compared only while the
/// model keeps recovery points.
pub fn down_replica_differences(
    r: ReplicaId,
    model: &Replica,
    keeps_recovery_point: bool,
    periodic: bool,
    image: &StoppedImage,
) -> Vec<String> {
    let name = replica_name(r);
    let cache = model_cache(&model.log);
    let mut out = Vec::new();
    if image.epochs != cache {
        out.push(format!(
            "{name} is down: its files load the leader epoch cache {}, the model's log gives {}",
            show(&image.epochs),
            show(&cache)
        ));
    }
    let Some(files) = &image.files else {
        return out;
    };
    let mut file = |what: &str, found: String, expected: String| {
        if found != expected {
            out.push(format!(
                "{name} is down: after its restart's recovery, {what} says {found}, the model {expected}"
            ));
        }
    };
    let leo = image.log.last().map_or(0, |e| e.offset + 1);
    file(
        "replication-offset-checkpoint (within the log)",
        format!("{:?}", files.high_watermark.map(|hw| hw.min(leo))),
        format!("{:?}", Some(u64::from(model.hw))),
    );
    if periodic && keeps_recovery_point {
        file(
            "replication-offset-checkpoint",
            format!("{:?}", files.high_watermark),
            format!("{:?}", Some(u64::from(model.hw_checkpoint))),
        );
    }
    if keeps_recovery_point {
        file(
            "recovery-point-offset-checkpoint",
            format!("{:?}", files.recovery_point),
            format!("{:?}", Some(u64::from(model.recovery_point))),
        );
    }
    // A cache never written (no epoch yet) has no file: an empty one.
    file(
        "leader-epoch-checkpoint",
        show(files.epochs.as_deref().unwrap_or_default()),
        show(&cache),
    );
    out
}

/// Epoch entries as `[(epoch, start), ...]`.
fn show(entries: &[EpochEntry]) -> String {
    let parts: Vec<String> = entries
        .iter()
        .map(|e| format!("({}, {})", e.epoch, e.start_offset))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// A temporary directory, as an error message when it cannot be made.
fn scratch() -> Result<tempfile::TempDir, String> {
    tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))
}

/// The image the stopped log directory `dir` recovers to when the last
/// entry of its partition's `leader-epoch-checkpoint` has the lowest bit of
/// its epoch flipped; with what was flipped. `None` when the file holds no
/// entry. `dir` is not changed.
pub fn flipped_epoch_image(
    dir: &Path,
    config: &DiskLogConfig,
) -> Result<Option<(String, StoppedImage)>, String> {
    let tmp = scratch()?;
    copy_log_dir(dir, tmp.path()).map_err(|e| e.to_string())?;
    let path = epoch_file(tmp.path(), &config.topic_partition);
    let mut entries = match checkpoint::read_epochs(&path) {
        Ok(Some(e)) if !e.is_empty() => e,
        Ok(_) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let last = entries.len() - 1;
    let was = entries[last];
    entries[last].epoch ^= 1;
    let what = format!(
        "the leader-epoch-checkpoint's entry (epoch {}, start {}) read as epoch {}",
        was.epoch, was.start_offset, entries[last].epoch
    );
    // A throwaway copy: no fsyncs.
    unsynced(|| {
        checkpoint::write_epochs(&path, &entries).map_err(|e| e.to_string())?;
        let (log, _) = DiskLog::open(tmp.path(), config).map_err(|e| format!("{what}: {e}"))?;
        let image = log.image().map_err(|e| format!("{what}: {e}"))?;
        Ok(Some((what, image)))
    })
}

fn epoch_file(log_dir: &Path, tp: &TopicPartition) -> PathBuf {
    log_dir.join(tp.dir_name()).join(epoch_cache::FILE_NAME)
}

/// A replica's files before a step, kept to rebuild what a kill at any
/// point of the step leaves.
pub struct KillPoints {
    live: PathBuf,
    before: tempfile::TempDir,
}

/// What the files of a replica killed at one point of a step recover to.
pub struct KillImage {
    /// The file operation the kill came before, and its position.
    pub before_op: String,
    pub at: usize,
    pub of: usize,
    /// The log recovered (as the model's entries), or why it is not one.
    pub log: Result<Vec<Entry>, String>,
}

impl KillPoints {
    /// Copies the log directory `live` as it is now.
    pub fn before(live: &Path) -> Result<KillPoints, String> {
        let before = scratch()?;
        copy_log_dir(live, before.path()).map_err(|e| e.to_string())?;
        Ok(KillPoints {
            live: live.to_path_buf(),
            before,
        })
    }

    /// For each deletion or cut among `ops` (the step's file operations,
    /// all replicas') in the live directory: the files killed just before
    /// it, recovered.
    pub fn images(&self, ops: &[FsOp], config: &DiskLogConfig) -> Result<Vec<KillImage>, String> {
        let mine: Vec<&FsOp> = ops
            .iter()
            .filter(|op| paths(op).iter().all(|p| p.starts_with(&self.live)))
            .collect();
        let mut out = Vec::new();
        for (k, op) in mine.iter().enumerate() {
            if !matches!(op, FsOp::Remove { .. } | FsOp::SetLen { .. }) {
                continue;
            }
            let tmp = scratch()?;
            copy_log_dir(self.before.path(), tmp.path()).map_err(|e| e.to_string())?;
            for done in &mine[..k] {
                self.replay(done, tmp.path())
                    .map_err(|e| format!("replaying {done:?}: {e}"))?;
            }
            let log = unsynced(|| DiskLog::open(tmp.path(), config))
                .map_err(|e| format!("its files would not recover: {e}"))
                .and_then(|(log, _)| log.entries().map_err(|e| e.to_string()))
                .and_then(|entries| model_log(&entries));
            out.push(KillImage {
                before_op: describe(op, &self.live),
                at: k + 1,
                of: mine.len(),
                log,
            });
        }
        Ok(out)
    }

    /// `op`, done in the live directory, done in `copy` instead.
    fn replay(&self, op: &FsOp, copy: &Path) -> std::io::Result<()> {
        let at = |p: &Path| copy.join(p.strip_prefix(&self.live).unwrap_or(p));
        let open = |p: &Path| OpenOptions::new().write(true).open(at(p));
        match op {
            FsOp::Create { path } => File::create(at(path)).map(drop),
            FsOp::Write { path, offset, data } => open(path)?.write_all_at(data, *offset),
            FsOp::SetLen { path, len } => open(path)?.set_len(*len),
            FsOp::Remove { path } => match fs::remove_file(at(path)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                r => r,
            },
            FsOp::Rename { from, to } => fs::rename(at(from), at(to)),
            FsOp::CreateDir { path } => fs::create_dir_all(at(path)),
            // A kill keeps what the page cache holds: syncs change nothing.
            FsOp::Fsync { .. } | FsOp::SyncDir { .. } => Ok(()),
        }
    }
}

fn paths(op: &FsOp) -> Vec<&Path> {
    match op {
        FsOp::Create { path }
        | FsOp::Write { path, .. }
        | FsOp::SetLen { path, .. }
        | FsOp::Fsync { path }
        | FsOp::Remove { path }
        | FsOp::SyncDir { path }
        | FsOp::CreateDir { path } => vec![path],
        FsOp::Rename { from, to } => vec![from, to],
    }
}

/// `op` in a few words, its paths relative to the log directory.
fn describe(op: &FsOp, live: &Path) -> String {
    let rel = |p: &Path| p.strip_prefix(live).unwrap_or(p).display().to_string();
    match op {
        FsOp::Remove { path } => format!("deleting {}", rel(path)),
        FsOp::SetLen { path, len } => format!("cutting {} to {len} bytes", rel(path)),
        FsOp::Rename { from, to } => format!("renaming {} to {}", rel(from), rel(to)),
        other => format!("{other:?}"),
    }
}

/// A log read from files as the model's entries: contiguous from offset 0,
/// each a record id in an epoch.
fn model_log(entries: &[LogEntry]) -> Result<Vec<Entry>, String> {
    entries
        .iter()
        .enumerate()
        .map(|(expected, e)| {
            if e.offset != expected as u64 {
                return Err(format!(
                    "its files recover offset {} where {expected} was expected (a hole)",
                    e.offset
                ));
            }
            model_entry(e)
        })
        .collect()
}

/// Whether `log` lies between `after` and `before` (a prefix of `before`
/// at least as long as `after`, which is a prefix of `before` when a step
/// only cuts).
pub fn between(log: &[Entry], after: &Log, before: &Log) -> bool {
    before.entries().starts_with(log) && log.len() >= after.entries().len()
}
