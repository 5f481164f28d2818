//! The storage layer's file-system seam: every operation that changes a
//! file or a directory goes through these functions (reads do not).
//!
//! Each one does what `std::fs` does and, when the calling thread is
//! recording ([`record`]), also appends an [`FsOp`] to the record. The
//! crash-state enumeration (`impl/tests/crash_states.rs`, `impl/tests/enumerate/`) records a
//! workload this way and builds from the record every state a POSIX file
//! system may leave after a crash. Storage does its work on the caller's
//! thread, so a thread-local record sees all of it.

use std::cell::{Cell, RefCell};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One operation that changes the file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsOp {
    /// A file created empty (or an existing one cut to nothing).
    Create {
        path: PathBuf,
    },
    /// Bytes written at an offset.
    Write {
        path: PathBuf,
        offset: u64,
        data: Vec<u8>,
    },
    /// A file's length set (cut or extended with zeros).
    SetLen {
        path: PathBuf,
        len: u64,
    },
    /// A file's data made durable (`fsync`/`fdatasync`).
    Fsync {
        path: PathBuf,
    },
    Remove {
        path: PathBuf,
    },
    Rename {
        from: PathBuf,
        to: PathBuf,
    },
    /// A directory's entries made durable.
    SyncDir {
        path: PathBuf,
    },
    CreateDir {
        path: PathBuf,
    },
}

thread_local! {
    static RECORD: RefCell<Option<Vec<FsOp>>> = const { RefCell::new(None) };
    static UNSYNCED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every fsync the storage layer would make on this thread
/// skipped (still recorded): for work on a throwaway copy, such as a
/// recovery run only to read what it loads, where durability means nothing
/// and fsyncs are most of the cost.
pub fn unsynced<T>(f: impl FnOnce() -> T) -> T {
    let before = UNSYNCED.with(|u| u.replace(true));
    let out = f();
    UNSYNCED.with(|u| u.set(before));
    out
}

fn syncing() -> bool {
    !UNSYNCED.with(|u| u.get())
}

/// Runs `f`, recording every file-system change the storage layer makes on
/// this thread meanwhile; returns `f`'s result and the record.
pub fn record<T>(f: impl FnOnce() -> T) -> (T, Vec<FsOp>) {
    let before = RECORD.with(|r| r.borrow_mut().replace(Vec::new()));
    let out = f();
    let ops = RECORD.with(|r| std::mem::replace(&mut *r.borrow_mut(), before));
    (out, ops.unwrap_or_default())
}

fn note(op: impl FnOnce() -> FsOp) {
    RECORD.with(|r| {
        if let Some(v) = r.borrow_mut().as_mut() {
            v.push(op());
        }
    });
}

/// Creates (or truncates) a file for reading and writing.
pub(crate) fn create(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    note(|| FsOp::Create {
        path: path.to_path_buf(),
    });
    Ok(f)
}

/// Opens a file for writing, creating it empty if it does not exist.
pub(crate) fn open_or_create(path: &Path) -> io::Result<File> {
    let existed = path.exists();
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    if !existed {
        note(|| FsOp::Create {
            path: path.to_path_buf(),
        });
    }
    Ok(f)
}

pub(crate) fn write_at(file: &File, path: &Path, data: &[u8], offset: u64) -> io::Result<()> {
    file.write_all_at(data, offset)?;
    note(|| FsOp::Write {
        path: path.to_path_buf(),
        offset,
        data: data.to_vec(),
    });
    Ok(())
}

pub(crate) fn set_len(file: &File, path: &Path, len: u64) -> io::Result<()> {
    file.set_len(len)?;
    note(|| FsOp::SetLen {
        path: path.to_path_buf(),
        len,
    });
    Ok(())
}

/// `fdatasync` (enough for data and the length it extends to).
pub(crate) fn sync_data(file: &File, path: &Path) -> io::Result<()> {
    if syncing() {
        file.sync_data()?;
    }
    note(|| FsOp::Fsync {
        path: path.to_path_buf(),
    });
    Ok(())
}

/// `fsync`.
pub(crate) fn sync_all(file: &File, path: &Path) -> io::Result<()> {
    if syncing() {
        file.sync_all()?;
    }
    note(|| FsOp::Fsync {
        path: path.to_path_buf(),
    });
    Ok(())
}

/// A whole file written afresh (`fs::write`).
pub(crate) fn write_file(path: &Path, data: &[u8]) -> io::Result<()> {
    let f = create(path)?;
    write_at(&f, path, data, 0)
}

pub(crate) fn remove(path: &Path) -> io::Result<()> {
    fs::remove_file(path)?;
    note(|| FsOp::Remove {
        path: path.to_path_buf(),
    });
    Ok(())
}

pub(crate) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    fs::rename(from, to)?;
    note(|| FsOp::Rename {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
    });
    Ok(())
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    if syncing() {
        File::open(dir)?.sync_all()?;
    }
    note(|| FsOp::SyncDir {
        path: dir.to_path_buf(),
    });
    Ok(())
}

pub(crate) fn create_dir_all(dir: &Path) -> io::Result<()> {
    let existed = dir.is_dir();
    fs::create_dir_all(dir)?;
    if !existed {
        note(|| FsOp::CreateDir {
            path: dir.to_path_buf(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsynced_skips_syncs_on_this_thread_only_while_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let ((inside, outside), ops) = record(|| {
            let inside = unsynced(|| {
                sync_dir(dir.path()).unwrap();
                syncing()
            });
            (inside, syncing())
        });
        assert!(!inside && outside);
        // Skipped syncs are still recorded: a crash-state record stays whole.
        assert_eq!(
            ops,
            vec![FsOp::SyncDir {
                path: dir.path().to_path_buf()
            }]
        );
    }
}
