//! Kafka's text checkpoint files (`CheckpointFile`).
//!
//! Layout: a version line (`0`), a count line, then one entry a line with
//! fields separated by a space. Broker-level offset checkpoints
//! (`recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
//! `log-start-offset-checkpoint`) hold `topic partition offset`; the
//! per-partition `leader-epoch-checkpoint` holds `epoch startOffset`.
//!
//! Writes go to `<name>.tmp`, which is fsynced and renamed over the old
//! file, and then the directory is fsynced: a crash leaves either the old
//! or the new checkpoint, never a torn one.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::fs as seam;
use super::topic_partition::TopicPartition;

/// The only checkpoint format version Kafka has written.
pub const VERSION: u32 = 0;

/// Writes `contents` to `path` atomically (temp file, fsync, rename, fsync
/// of the directory).
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let tmp = tmp_path(path);
    let write = || -> io::Result<()> {
        let f = seam::create(&tmp)?;
        seam::write_at(&f, &tmp, contents, 0)?;
        seam::sync_all(&f, &tmp)
    };
    write().map_err(|e| Error::io(&tmp, "write checkpoint", e))?;
    seam::rename(&tmp, path).map_err(|e| Error::io(path, "rename checkpoint", e))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// The temporary file a checkpoint is written to before its rename.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// Fsyncs a directory, making creations, renames and deletions in it durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    seam::sync_dir(dir).map_err(|e| Error::io(dir, "fsync directory", e))
}

/// Entry lines: (line number, fields).
type Entries = Vec<(usize, Vec<String>)>;

/// Reads a checkpoint file's entry lines, checking the version and count.
/// Returns `None` when the file does not exist.
fn read_entries(path: &Path) -> Result<Option<Entries>> {
    let text = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, "read checkpoint", e)),
    };
    let bad = |line: usize, reason: String| Error::Checkpoint {
        path: path.to_path_buf(),
        line,
        reason,
    };
    let text = String::from_utf8(text).map_err(|_| bad(0, "not UTF-8 text".into()))?;
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (n, version) = lines.next().ok_or_else(|| bad(1, "empty file".into()))?;
    if version.trim() != VERSION.to_string() {
        return Err(bad(n, format!("unrecognised version {version:?}")));
    }
    let (n, count) = lines
        .next()
        .ok_or_else(|| bad(2, "missing entry count".into()))?;
    let count: usize = count
        .trim()
        .parse()
        .map_err(|_| bad(n, format!("entry count {count:?} is not a number")))?;
    let mut entries = Vec::with_capacity(count.min(1 << 16));
    for (n, line) in lines {
        if entries.len() == count {
            if line.trim().is_empty() {
                continue;
            }
            return Err(bad(n, format!("more entries than the count {count}")));
        }
        let fields = line.split_whitespace().map(str::to_owned).collect();
        entries.push((n, fields));
    }
    if entries.len() != count {
        return Err(bad(
            0,
            format!("expected {count} entries but found {}", entries.len()),
        ));
    }
    Ok(Some(entries))
}

fn parse_offset(path: &Path, line: usize, s: &str) -> Result<u64> {
    s.parse::<i64>()
        .ok()
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| Error::Checkpoint {
            path: path.to_path_buf(),
            line,
            reason: format!("{s:?} is not a non-negative offset"),
        })
}

/// Reads `topic partition offset` entries; `None` when the file is missing.
pub fn read_offsets(path: &Path) -> Result<Option<BTreeMap<TopicPartition, u64>>> {
    let Some(entries) = read_entries(path)? else {
        return Ok(None);
    };
    let mut map = BTreeMap::new();
    for (line, f) in entries {
        let bad = |reason: String| Error::Checkpoint {
            path: path.to_path_buf(),
            line,
            reason,
        };
        if f.len() != 3 {
            return Err(bad(format!(
                "expected `topic partition offset`, found {} fields",
                f.len()
            )));
        }
        let partition: u32 = f[1]
            .parse()
            .map_err(|_| bad(format!("partition {:?} is not a number", f[1])))?;
        let tp = TopicPartition::new(&f[0], partition).map_err(|e| bad(e.to_string()))?;
        let offset = parse_offset(path, line, &f[2])?;
        if map.insert(tp, offset).is_some() {
            return Err(bad(format!("{}-{} appears twice", f[0], f[1])));
        }
    }
    Ok(Some(map))
}

/// Writes `topic partition offset` entries atomically.
pub fn write_offsets(path: &Path, offsets: &BTreeMap<TopicPartition, u64>) -> Result<()> {
    let mut s = format!("{VERSION}\n{}\n", offsets.len());
    for (tp, off) in offsets {
        s.push_str(&format!("{} {} {off}\n", tp.topic(), tp.partition()));
    }
    write_atomically(path, s.as_bytes())
}

/// One `leader-epoch-checkpoint` entry: an epoch and its first offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: u64,
}

/// Reads `epoch startOffset` entries; `None` when the file is missing.
pub fn read_epochs(path: &Path) -> Result<Option<Vec<EpochEntry>>> {
    let Some(entries) = read_entries(path)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(entries.len());
    for (line, f) in entries {
        let bad = |reason: String| Error::Checkpoint {
            path: path.to_path_buf(),
            line,
            reason,
        };
        if f.len() != 2 {
            return Err(bad(format!(
                "expected `epoch startOffset`, found {} fields",
                f.len()
            )));
        }
        let epoch: i32 = f[0]
            .parse()
            .ok()
            .filter(|e| *e >= 0)
            .ok_or_else(|| bad(format!("{:?} is not a non-negative epoch", f[0])))?;
        let start_offset = parse_offset(path, line, &f[1])?;
        out.push(EpochEntry {
            epoch,
            start_offset,
        });
    }
    Ok(Some(out))
}

/// Writes `epoch startOffset` entries atomically.
pub fn write_epochs(path: &Path, entries: &[EpochEntry]) -> Result<()> {
    let mut s = format!("{VERSION}\n{}\n", entries.len());
    for e in entries {
        s.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
    }
    write_atomically(path, s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip_in_kafka_layout() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("replication-offset-checkpoint");
        assert_eq!(read_offsets(&p).unwrap(), None);
        let mut m = BTreeMap::new();
        m.insert(TopicPartition::new("orders", 3).unwrap(), 42);
        m.insert(TopicPartition::new("a.b_c-d", 0).unwrap(), 0);
        write_offsets(&p, &m).unwrap();
        let text = fs::read_to_string(&p).unwrap();
        assert_eq!(text, "0\n2\na.b_c-d 0 0\norders 3 42\n");
        assert_eq!(read_offsets(&p).unwrap(), Some(m));
        assert!(!tmp_path(&p).exists());
    }

    #[test]
    fn malformed_checkpoints_are_typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c");
        for bad in [
            "",
            "1\n0\n",
            "0\nx\n",
            "0\n2\nt 0 1\n",
            "0\n1\nt 0 1\nt 1 1\n",
            "0\n1\nt 0\n",
            "0\n1\nt x 1\n",
            "0\n1\nt 0 -5\n",
            "0\n1\nt 0 99999999999999999999\n",
            "0\n1\nbad/topic 0 1\n",
            "0\n2\nt 0 1\nt 0 2\n",
        ] {
            fs::write(&p, bad).unwrap();
            match read_offsets(&p) {
                Err(Error::Checkpoint { .. }) => {}
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
        fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(matches!(read_offsets(&p), Err(Error::Checkpoint { .. })));
        for bad in ["0\n1\n-1 0\n", "0\n1\n1\n", "0\n1\n1 x\n"] {
            fs::write(&p, bad).unwrap();
            assert!(
                matches!(read_epochs(&p), Err(Error::Checkpoint { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn epochs_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("leader-epoch-checkpoint");
        let e = vec![
            EpochEntry {
                epoch: 0,
                start_offset: 0,
            },
            EpochEntry {
                epoch: 3,
                start_offset: 17,
            },
        ];
        write_epochs(&p, &e).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "0\n2\n0 0\n3 17\n");
        assert_eq!(read_epochs(&p).unwrap(), Some(e));
    }
}
