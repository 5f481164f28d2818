//! An unclean shutdown that also loses the unflushed tail: after kill -9
//! (the page cache keeps every write, so a killed process loses nothing),
//! the partition's log is cut back to what was known to be flushed.
//!
//! What was flushed is read from the broker's
//! `recovery-point-offset-checkpoint`: Kafka writes a recovery point only
//! after flushing the log below it. The cut is at the first batch that
//! holds an offset at or above that recovery point: the last batch
//! boundary at or below it. This is an approximation: the checkpoint lags
//! the flushes (it is written every 2 s here), so the cut may also drop
//! records flushed since the last checkpoint — a loss a real power cut
//! would not make, but one the model's unclean crash (losing the suffix
//! above the recovery point) does make. Later segments are deleted whole.

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::Result;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    pub recovery_point: u64,
    /// The segment cut, its size before and after.
    pub segment: PathBuf,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Segments after it, deleted.
    pub deleted_segments: usize,
}

/// The recovery point of `topic`-`partition` in a log dir's checkpoint, if any.
pub fn recovery_point(data_dir: &Path, topic: &str, partition: u32) -> Result<Option<u64>> {
    let path = data_dir.join("recovery-point-offset-checkpoint");
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    // Kafka's checkpoint format: version, entry count, then "topic partition offset" lines.
    for line in text.lines().skip(2) {
        let fields: Vec<&str> = line.split(' ').collect();
        if let [t, p, o] = fields[..] {
            if t == topic && p == partition.to_string() {
                return o
                    .parse()
                    .map(Some)
                    .map_err(|e| format!("{}: bad offset {o:?}: {e}", path.display()));
            }
        }
    }
    Ok(None)
}

/// Cuts `topic`-`partition` under `data_dir` back to its recovery point (0
/// when the checkpoint has none yet). The broker must be down.
pub fn cut_unflushed(data_dir: &Path, topic: &str, partition: u32) -> Result<Cut> {
    let rp = recovery_point(data_dir, topic, partition)?.unwrap_or(0);
    let dir = data_dir.join(format!("{topic}-{partition}"));
    let mut segments: Vec<(u64, PathBuf)> = fs::read_dir(&dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .filter_map(|p| {
            let base = p.file_stem()?.to_str()?.parse::<u64>().ok()?;
            Some((base, p))
        })
        .collect();
    segments.sort();
    // The segment holding the recovery point: the last one starting at or below it.
    let index = segments
        .iter()
        .rposition(|(base, _)| *base <= rp)
        .unwrap_or(0);
    let Some((_, segment)) = segments.get(index).cloned() else {
        return Err(format!("{} has no segment", dir.display()));
    };
    let bytes_before = fs::metadata(&segment)
        .map_err(|e| format!("{}: {e}", segment.display()))?
        .len();
    let keep = batches_below(&segment, rp)?;
    let file = OpenOptions::new()
        .write(true)
        .open(&segment)
        .map_err(|e| format!("cannot open {}: {e}", segment.display()))?;
    file.set_len(keep)
        .map_err(|e| format!("cannot cut {}: {e}", segment.display()))?;
    let mut deleted = 0;
    for (base, later) in &segments[index + 1..] {
        for ext in ["log", "index", "timeindex", "txnindex"] {
            let f = dir.join(format!("{base:020}.{ext}"));
            if f.exists() {
                fs::remove_file(&f).map_err(|e| format!("cannot delete {}: {e}", f.display()))?;
            }
        }
        let _ = later;
        deleted += 1;
    }
    Ok(Cut {
        recovery_point: rp,
        segment,
        bytes_before,
        bytes_after: keep,
        deleted_segments: deleted,
    })
}

/// The byte length of the batches in a segment whose offsets all lie below `rp`.
fn batches_below(segment: &Path, rp: u64) -> Result<u64> {
    let mut f =
        fs::File::open(segment).map_err(|e| format!("cannot open {}: {e}", segment.display()))?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut pos = 0u64;
    // A batch: baseOffset (8), batchLength (4), partitionLeaderEpoch (4), magic (1),
    // crc (4), attributes (2), lastOffsetDelta (4), ...; it spans 12 + batchLength bytes.
    let mut header = [0u8; 27];
    while pos + header.len() as u64 <= len {
        f.seek(SeekFrom::Start(pos)).map_err(|e| e.to_string())?;
        f.read_exact(&mut header)
            .map_err(|e| format!("{}: {e}", segment.display()))?;
        let base = u64::from_be_bytes(header[0..8].try_into().expect("8 bytes"));
        let length = u32::from_be_bytes(header[8..12].try_into().expect("4 bytes")) as u64;
        let delta = u32::from_be_bytes(header[23..27].try_into().expect("4 bytes")) as u64;
        if length == 0 || base + delta >= rp || pos + 12 + length > len {
            break;
        }
        pos += 12 + length;
    }
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch header with the fields the cut reads, padded to `length`.
    fn batch(base: u64, last_delta: u32, length: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(base.to_be_bytes());
        b.extend(length.to_be_bytes());
        b.extend([0u8; 11]); // partitionLeaderEpoch, magic, crc, attributes
        b.extend(last_delta.to_be_bytes());
        b.resize(12 + length as usize, 0);
        b
    }

    #[test]
    fn the_cut_keeps_only_batches_wholly_below_the_recovery_point() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let part = data.join("t-0");
        fs::create_dir_all(&part).unwrap();
        // Offsets 0-1, 2, 3-5; a later segment from 6.
        let mut log = batch(0, 1, 40);
        log.extend(batch(2, 0, 30));
        log.extend(batch(3, 2, 50));
        fs::write(part.join(format!("{:020}.log", 0)), &log).unwrap();
        fs::write(part.join(format!("{:020}.log", 6)), batch(6, 0, 30)).unwrap();
        fs::write(part.join(format!("{:020}.index", 6)), b"").unwrap();
        fs::write(
            data.join("recovery-point-offset-checkpoint"),
            "0\n1\nt 0 4\n",
        )
        .unwrap();

        let cut = cut_unflushed(data, "t", 0).unwrap();
        // Offset 4 lies in the third batch: the first two stay, 52 + 42 bytes.
        assert_eq!((cut.recovery_point, cut.bytes_after), (4, 94));
        assert_eq!(cut.deleted_segments, 1);
        assert!(!part.join(format!("{:020}.log", 6)).exists());
        assert!(!part.join(format!("{:020}.index", 6)).exists());
        assert_eq!(
            fs::metadata(part.join(format!("{:020}.log", 0)))
                .unwrap()
                .len(),
            94
        );
    }

    #[test]
    fn a_broken_checkpoint_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("recovery-point-offset-checkpoint"),
            "0\n1\nt 0 x\n",
        )
        .unwrap();
        let err = recovery_point(dir.path(), "t", 0).unwrap_err();
        assert!(err.contains("bad offset"), "{err}");
        let missing = cut_unflushed(dir.path(), "t", 0);
        assert!(missing.is_err());
    }
}
