//! A replica's log as the concurrent driver runs it: a [`DiskLog`] whose
//! disk the nemesis can fill. While full, every storage operation fails as
//! a write to a full disk does (ENOSPC), even one that writes nothing (an
//! HW moved in memory while a leader serves a fetch; a real full disk
//! would let it through: spec/coverage.md), and a clean shutdown cannot
//! complete; reads of the log's entries still work. The driver takes a
//! replica whose log failed offline (`nodes.rs`).

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::replication::{
    DiskLog, DiskLogConfig, DiskStopped, Error, LogEntry, LogState, ReplicaLog, Result,
    StorageDone, StorageOp,
};
use crate::storage::{self, LogReader, RecoveryReport};

#[derive(Debug)]
pub(crate) struct NemesisDisk {
    inner: DiskLog,
    full: Arc<AtomicBool>,
    /// HW checkpoints fail (`ConcurrentConfig::hw_checkpoints_fail`).
    checkpoints_fail: Arc<AtomicBool>,
}

/// How long a failing HW checkpoint write takes (a write or fsync that
/// fails does not fail at once): the storage layer's HW is set meanwhile.
const FAILING_CHECKPOINT: std::time::Duration = std::time::Duration::from_millis(5);

/// The error a write to a full disk meets.
pub(crate) fn disk_full(path: &Path) -> Error {
    Error::Storage(storage::Error::Io {
        path: path.to_path_buf(),
        op: "write",
        source: io::Error::new(io::ErrorKind::StorageFull, "no space left on device"),
    })
}

/// What an injected HW checkpoint failure says (`RunUntil` counts them).
pub(crate) const CHECKPOINT_FAILURE: &str = "injected checkpoint failure";

/// The error a failing HW checkpoint write meets.
pub(crate) fn checkpoint_failed(path: &Path) -> Error {
    Error::Storage(storage::Error::Io {
        path: path.to_path_buf(),
        op: "write the HW checkpoint",
        source: io::Error::other(CHECKPOINT_FAILURE),
    })
}

impl NemesisDisk {
    /// Opens the log at `path`; fails as a full disk would while `full`.
    pub(crate) fn open(
        path: &Path,
        config: &DiskLogConfig,
        full: Arc<AtomicBool>,
        checkpoints_fail: Arc<AtomicBool>,
    ) -> Result<(NemesisDisk, RecoveryReport)> {
        if full.load(Ordering::SeqCst) {
            return Err(disk_full(path));
        }
        let (inner, report) = DiskLog::open(path, config)?;
        Ok((
            NemesisDisk {
                inner,
                full,
                checkpoints_fail,
            },
            report,
        ))
    }

    pub(crate) fn reader(&self) -> LogReader {
        self.inner.reader()
    }

    fn full(&self) -> bool {
        self.full.load(Ordering::SeqCst)
    }
}

impl ReplicaLog for NemesisDisk {
    type Stopped = DiskStopped;

    fn state(&self) -> LogState {
        self.inner.state()
    }

    fn apply(&mut self, op: StorageOp) -> Result<StorageDone> {
        if self.full() {
            return Err(disk_full(self.inner.path()));
        }
        match op {
            StorageOp::SetHighWatermark {
                hw,
                checkpoint: true,
            } if self.checkpoints_fail.load(Ordering::SeqCst)
                && hw != self.inner.state().high_watermark =>
            {
                // What `DiskLog` does when the checkpoint write fails: the
                // HW is set (the storage layer publishes it to readers),
                // the write fails, the HW is set back.
                let old = self.inner.state().high_watermark;
                self.inner.apply(StorageOp::SetHighWatermark {
                    hw,
                    checkpoint: false,
                })?;
                std::thread::sleep(FAILING_CHECKPOINT);
                let _ = self.inner.apply(StorageOp::SetHighWatermark {
                    hw: old,
                    checkpoint: false,
                });
                Err(checkpoint_failed(self.inner.path()))
            }
            op => self.inner.apply(op),
        }
    }

    fn entries(&self) -> Result<Vec<LogEntry>> {
        self.inner.entries()
    }

    /// A clean shutdown writes its checkpoints and marker: on a full disk
    /// it fails, and the process goes down as after a crash.
    fn close(self) -> Result<DiskStopped> {
        if self.full() {
            let path = self.inner.path().to_path_buf();
            self.inner.crash()?;
            return Err(disk_full(&path));
        }
        self.inner.close()
    }

    fn crash(self) -> Result<DiskStopped> {
        self.inner.crash()
    }

    /// Restarted outside the driver, the disk is no longer the nemesis's.
    fn restart(stopped: &DiskStopped) -> Result<(NemesisDisk, RecoveryReport)> {
        let (inner, report) = DiskLog::restart(stopped)?;
        let full = Arc::new(AtomicBool::new(false));
        let checkpoints_fail = Arc::new(AtomicBool::new(false));
        Ok((
            NemesisDisk {
                inner,
                full,
                checkpoints_fail,
            },
            report,
        ))
    }
}
