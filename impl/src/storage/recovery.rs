//! Loading a partition directory, and recovery after an unclean shutdown
//! (Kafka's `LogLoader` and `LogSegment.recover`).
//!
//! Rules, in order:
//! 1. Stray files: `*.deleted` and `*.cleaned` (work in progress at a crash)
//!    and checkpoint `*.tmp` files are deleted; an orphaned index (no `.log`)
//!    is deleted; a `.swap` file (an interrupted compaction, which this
//!    implementation never starts) or a segment file whose name is not 20
//!    digits is an error.
//! 2. Without the clean-shutdown marker, every segment from the one holding
//!    the recovery point onwards is recovered: each batch is read and
//!    checked (length, magic, CRC-32C, offsets contiguous from the segment's
//!    base offset, relative offsets within 32 bits, a leader epoch of -1 or
//!    more), the indexes and the leader epoch cache are rebuilt from the
//!    batches, which may lower epochs as Kafka's `LeaderEpochFileCache.assign`
//!    takes them. Segments below it are trusted, but their indexes are
//!    validated and rebuilt (by recovering the segment) when missing or
//!    invalid, and the batches after their last index entry are walked to
//!    find where each ends. With the marker, no segment is re-read unless its
//!    index is missing or invalid, or the tail of the last one does not check.
//!    An index ending in zero-filled slots (Kafka preallocates its active
//!    segment's indexes and, since Kafka 4, leaves them so at close) is
//!    rebuilt too, the note naming the tail: zeros could also be entries
//!    lost to damage. Entries below the last are checked by the reads that
//!    use them (see `Segment::translate`).
//! 3. A partial batch at the end of a segment is a torn tail; it is cut.
//!    At the first invalid batch the segment is cut there and every later
//!    segment is deleted.
//! 4. Data below the recovery point (or anywhere, after a clean shutdown)
//!    was acknowledged as flushed: if it has to be cut, loading fails with
//!    [`Error::CorruptBelowRecoveryPoint`] before anything is changed,
//!    unless [`LogConfig::truncate_below_recovery_point`] allows it.
//!    Problems that Kafka's loader does not see — a gap or overlap between
//!    segments, a leader epoch below -1 — are never cut, wherever they are:
//!    cutting would discard batches Kafka keeps. Loading fails with
//!    [`Error::RefusedToCut`] unless the same setting allows the cut. No
//!    crash of this implementation leaves either (a roll syncs the old
//!    segment before the new one gets data; truncation deletes later
//!    segments, newest first, before it cuts).
//! 5. The `leader-epoch-checkpoint` is a cache with no checksum: it never
//!    decides what data is kept. Its entries are checked against the
//!    batches they name; if one disagrees the cache is rebuilt from the
//!    batches' epochs, as Kafka rebuilds it when it recovers a segment.
//! 6. The high watermark is clamped to the log end offset, the recovery
//!    point likewise, and the log start offset is raised to the first
//!    segment's base offset; a log start offset beyond the log end deletes
//!    the log and starts afresh there, as Kafka does.
//!
//! Everything done is counted in a [`RecoveryReport`].

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::batch::{self, check_batch, parse_length_prefix, BatchHeader, LOG_OVERHEAD};
use super::checkpoint::{self, EpochEntry};
use super::config::LogConfig;
use super::epoch_cache::{self, EpochCache};
use super::error::{BatchError, Error, Result};
use super::mutation::Mutation;
use super::offset_index::{self, OffsetIndex};
use super::segment::{self, SegState, Segment};
use super::time_index::{self, TimeIndex};
use crate::sync::{write, Arc};

/// Bytes read at a time while recovering.
const CHUNK: usize = 1 << 20;

/// What stopped a segment scan before the end of its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanProblem {
    /// A partial batch at the end of the file.
    TornTail {
        position: u64,
        needed: u64,
        available: u64,
    },
    /// A batch that does not check.
    Corrupt { position: u64, error: BatchError },
    /// A batch whose offsets do not follow the previous batch.
    BadOffsets { position: u64, reason: String },
    /// A batch whose leader epoch is below -1 (the only negative epoch, "no
    /// epoch"); the CRC does not cover the field. Kafka's loader keeps it.
    NegativeEpoch { position: u64, epoch: i32 },
    /// A segment whose base offset is not where the previous one ends.
    /// Kafka's loader keeps both.
    Gap { expected: u64, found: u64 },
}

impl ScanProblem {
    pub fn position(&self) -> u64 {
        match self {
            ScanProblem::TornTail { position, .. }
            | ScanProblem::Corrupt { position, .. }
            | ScanProblem::BadOffsets { position, .. }
            | ScanProblem::NegativeEpoch { position, .. } => *position,
            ScanProblem::Gap { .. } => 0,
        }
    }

    /// Whether Kafka's log loader would keep the data from here on: then it
    /// is never cut unless configured to be (rule 4).
    pub fn kafka_keeps(&self) -> bool {
        matches!(
            self,
            ScanProblem::NegativeEpoch { .. } | ScanProblem::Gap { .. }
        )
    }
}

impl fmt::Display for ScanProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScanProblem::TornTail {
                position,
                needed,
                available,
            } => write!(
                f,
                "torn tail at byte {position}: batch needs {needed} bytes, {available} left"
            ),
            ScanProblem::Corrupt { position, error } => {
                write!(f, "corrupt batch at byte {position}: {error}")
            }
            ScanProblem::BadOffsets { position, reason } => {
                write!(f, "bad batch at byte {position}: {reason}")
            }
            ScanProblem::NegativeEpoch { position, epoch } => write!(
                f,
                "batch at byte {position} has leader epoch {epoch} (below -1, which means none)"
            ),
            ScanProblem::Gap { expected, found } => write!(
                f,
                "segment base offset {found} does not follow the previous segment's end {expected}"
            ),
        }
    }
}

/// The result of scanning one segment file.
#[derive(Debug)]
pub struct SegmentScan {
    /// Bytes from the start of the file up to the end of the last valid batch.
    pub valid_bytes: u64,
    /// Bytes checked by this scan (from where it started).
    pub bytes_checked: u64,
    pub batches: u64,
    /// The offset after the last valid batch.
    pub next_offset: u64,
    /// The first problem, if the scan stopped before the end of the file.
    pub problem: Option<ScanProblem>,
    /// Where the batches' leader epoch changes: (epoch, first offset), in
    /// log order (epochs may go down; see `EpochCache::assign`).
    pub epochs: Vec<(i32, u64)>,
    pub(crate) state: SegState,
}

/// Reads a file sequentially in large chunks.
struct ChunkReader<'a> {
    file: &'a File,
    path: &'a Path,
    file_len: u64,
    buf: Vec<u8>,
    start: u64,
}

impl ChunkReader<'_> {
    /// Bytes `[pos, pos + need)`; the caller checked they are in the file.
    fn get(&mut self, pos: u64, need: usize) -> Result<&[u8]> {
        let end = pos + need as u64;
        if pos < self.start || end > self.start + self.buf.len() as u64 {
            let want = need.max(CHUNK).min((self.file_len - pos) as usize);
            self.buf.resize(want, 0);
            self.file
                .read_exact_at(&mut self.buf[..want], pos)
                .map_err(|e| Error::io(self.path, "read", e))?;
            self.start = pos;
        }
        let off = (pos - self.start) as usize;
        Ok(&self.buf[off..off + need])
    }
}

/// Called with each valid batch's position, bytes and header.
pub type BatchVisitor<'a> = &'a mut dyn FnMut(u64, &[u8], &BatchHeader);

/// What a scan checks batches against.
pub(crate) struct ScanContext<'a> {
    pub(crate) config: &'a LogConfig,
    /// The leader epoch of the batch before the scan's start, or -1.
    pub(crate) prev_epoch: i32,
    pub(crate) on_batch: Option<BatchVisitor<'a>>,
    /// Only under [`Mutation::TrustEpochCheckpoint`]: the checkpoint's
    /// entries, which every batch's epoch must match.
    pub(crate) known_epochs: Option<&'a [EpochEntry]>,
}

impl<'a> ScanContext<'a> {
    pub(crate) fn new(config: &'a LogConfig) -> Self {
        ScanContext {
            config,
            prev_epoch: -1,
            on_batch: None,
            known_epochs: None,
        }
    }
}

/// Scans a segment file from `start` (a batch boundary that `state`
/// already accounts for), checking every batch and extending the indexes
/// in `state`. I/O errors are errors; invalid data is a [`ScanProblem`].
pub(crate) fn scan_segment(
    file: &File,
    path: &Path,
    base_offset: u64,
    start: u64,
    mut state: SegState,
    ctx: ScanContext<'_>,
) -> Result<SegmentScan> {
    let ScanContext {
        config,
        mut prev_epoch,
        mut on_batch,
        known_epochs,
    } = ctx;
    let file_len = file
        .metadata()
        .map_err(|e| Error::io(path, "stat segment", e))?
        .len();
    let mut reader = ChunkReader {
        file,
        path,
        file_len,
        buf: Vec::new(),
        start: 0,
    };
    let mut pos = start;
    let mut batches = 0;
    let mut epochs = Vec::new();
    let problem = loop {
        if pos >= file_len {
            break None;
        }
        if pos > i32::MAX as u64 {
            // Positions are 32-bit in the index; Kafka never writes more.
            break Some(ScanProblem::BadOffsets {
                position: pos,
                reason: "segment is larger than 2 GiB".into(),
            });
        }
        let available = file_len - pos;
        if available < LOG_OVERHEAD as u64 {
            break Some(ScanProblem::TornTail {
                position: pos,
                needed: LOG_OVERHEAD as u64,
                available,
            });
        }
        let size = match parse_length_prefix(reader.get(pos, LOG_OVERHEAD)?) {
            Ok((_, size)) => size,
            Err(error) => {
                break Some(ScanProblem::Corrupt {
                    position: pos,
                    error,
                })
            }
        };
        if size as u64 > available {
            break Some(ScanProblem::TornTail {
                position: pos,
                needed: size as u64,
                available,
            });
        }
        let bytes = reader.get(pos, size)?;
        let h = match check_batch(bytes) {
            Ok(h) => h,
            Err(error) => {
                break Some(ScanProblem::Corrupt {
                    position: pos,
                    error,
                })
            }
        };
        if let Some(f) = on_batch.as_mut() {
            f(pos, bytes, &h);
        }
        // Offsets are contiguous from the segment's base offset. A scan
        // that starts mid-file (at a validated index entry) takes the first
        // batch's base offset as given.
        let expected = match (batches, start) {
            (0, 0) => Some(base_offset),
            (0, _) => None,
            _ => Some(state.next_offset),
        };
        if let Some(expected) = expected.filter(|&e| e != h.base_offset) {
            break Some(ScanProblem::BadOffsets {
                position: pos,
                reason: format!(
                    "base offset {} where {expected} was expected",
                    h.base_offset
                ),
            });
        }
        if h.base_offset < base_offset {
            break Some(ScanProblem::BadOffsets {
                position: pos,
                reason: format!(
                    "base offset {} below the segment's {base_offset}",
                    h.base_offset
                ),
            });
        }
        if h.last_offset() - base_offset > i32::MAX as u64 {
            break Some(ScanProblem::BadOffsets {
                position: pos,
                reason: format!(
                    "last offset {} overflows the segment based at {base_offset}",
                    h.last_offset()
                ),
            });
        }
        let epoch = h.partition_leader_epoch;
        if epoch < batch::NO_PARTITION_LEADER_EPOCH {
            break Some(ScanProblem::NegativeEpoch {
                position: pos,
                epoch,
            });
        }
        if let Some(reason) = mutated_epoch_check(config, known_epochs, epoch, prev_epoch, &h) {
            break Some(ScanProblem::BadOffsets {
                position: pos,
                reason,
            });
        }
        // Epochs may go down (an unfenced follower that led a lower epoch):
        // Kafka's cache takes them, dropping what they no longer follow.
        if epoch >= 0 && epoch != prev_epoch {
            epochs.push((epoch, h.base_offset));
            prev_epoch = epoch;
        }
        state.index_batch(&h, pos, config.index_interval_bytes);
        batches += 1;
        pos += size as u64;
    };
    Ok(SegmentScan {
        valid_bytes: pos,
        bytes_checked: pos - start,
        batches,
        next_offset: state.next_offset,
        problem,
        epochs,
        state,
    })
}

/// The epoch checks findings 3 and 4 of issue 10 removed, when a
/// [`Mutation`] puts one back: a descending epoch refused, or an epoch the
/// `leader-epoch-checkpoint` does not name treated as corrupt.
fn mutated_epoch_check(
    config: &LogConfig,
    known: Option<&[EpochEntry]>,
    epoch: i32,
    prev_epoch: i32,
    h: &BatchHeader,
) -> Option<String> {
    if epoch < 0 {
        return None;
    }
    match config.mutation {
        Some(Mutation::RefuseDescendingEpochs) if epoch < prev_epoch => {
            Some(format!("leader epoch {epoch} after epoch {prev_epoch}"))
        }
        Some(Mutation::TrustEpochCheckpoint) => {
            let k = known?;
            let n = k.partition_point(|e| e.start_offset <= h.base_offset);
            let expected = k.get(n.checked_sub(1)?)?.epoch;
            (expected != epoch).then(|| {
                format!(
                    "leader epoch {epoch} where the leader-epoch-checkpoint says {expected} (a corrupt epoch field)"
                )
            })
        }
        _ => None,
    }
}

/// Offsets a log is loaded with, from the broker-level checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadParams {
    /// From `recovery-point-offset-checkpoint`: everything below it was
    /// flushed.
    pub recovery_point: u64,
    /// From `log-start-offset-checkpoint`.
    pub log_start_offset: u64,
    /// From `replication-offset-checkpoint`.
    pub high_watermark: u64,
    /// Whether the log directory holds the clean-shutdown marker.
    pub clean_shutdown: bool,
}

/// What loading a log found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub clean_shutdown: bool,
    /// Base offsets of the segments re-read and checked.
    pub segments_recovered: Vec<u64>,
    /// Bytes re-read and found valid.
    pub bytes_recovered: u64,
    /// Bytes cut from the segment where invalid data was found.
    pub bytes_truncated: u64,
    /// Segment files deleted because they followed invalid data.
    pub segments_removed: Vec<PathBuf>,
    /// Bytes of log data in the deleted segments.
    pub bytes_removed: u64,
    /// Index files rebuilt from their logs.
    pub indexes_rebuilt: Vec<PathBuf>,
    /// The first invalid data found, with file and position.
    pub problem: Option<String>,
    /// Every repair made, one line each, for the caller to log.
    pub repairs: Vec<String>,
    pub log_start_offset: u64,
    pub log_end_offset: u64,
    pub recovery_point: u64,
    pub high_watermark: u64,
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "clean shutdown: {}; log start {}, log end {}, recovery point {}, high watermark {}",
            self.clean_shutdown,
            self.log_start_offset,
            self.log_end_offset,
            self.recovery_point,
            self.high_watermark
        )?;
        writeln!(
            f,
            "recovered {} segment(s), {} bytes checked; truncated {} bytes; removed {} segment(s), {} bytes; rebuilt {} index file(s)",
            self.segments_recovered.len(),
            self.bytes_recovered,
            self.bytes_truncated,
            self.segments_removed.len(),
            self.bytes_removed,
            self.indexes_rebuilt.len()
        )?;
        if let Some(p) = &self.problem {
            writeln!(f, "first problem: {p}")?;
        }
        for r in &self.repairs {
            writeln!(f, "repair: {r}")?;
        }
        Ok(())
    }
}

/// A loaded log, ready to be wrapped in a `Log`.
pub(crate) struct Loaded {
    pub(crate) segments: BTreeMap<u64, Arc<Segment>>,
    pub(crate) epochs: EpochCache,
    pub(crate) report: RecoveryReport,
}

fn remove_file(path: &Path, report: &mut RecoveryReport, why: &str) -> Result<()> {
    super::fs::remove(path).map_err(|e| Error::io(path, "delete", e))?;
    report
        .repairs
        .push(format!("deleted {} ({why})", path.display()));
    Ok(())
}

/// Lists segment base offsets, cleaning stray files (rule 1).
fn list_segments(dir: &Path, report: &mut RecoveryReport) -> Result<Vec<u64>> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| Error::io(dir, "list directory", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, "list directory", e))?;
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            return Err(Error::BadFileName {
                path,
                reason: "file name is not UTF-8".into(),
            });
        };
        if !entry
            .file_type()
            .map_err(|e| Error::io(&path, "stat", e))?
            .is_file()
        {
            continue;
        }
        if name.ends_with(".deleted") || name.ends_with(".cleaned") {
            remove_file(
                &path,
                report,
                "left over from an interrupted deletion or cleaning",
            )?;
            continue;
        }
        if name.ends_with(".tmp") {
            remove_file(
                &path,
                report,
                "left over from an interrupted checkpoint write",
            )?;
            continue;
        }
        if name.ends_with(".swap") {
            return Err(Error::BadFileName {
                path,
                reason: "an interrupted compaction or split (.swap) is not supported".into(),
            });
        }
        let Some((stem, suffix)) = name.rsplit_once('.') else {
            continue;
        };
        let kind = match suffix {
            segment::LOG_SUFFIX => 0,
            segment::INDEX_SUFFIX | segment::TIME_INDEX_SUFFIX => 1,
            _ => continue, // .snapshot, .txnindex, partition.metadata, ...
        };
        let base = segment::parse_base_offset(stem).ok_or_else(|| Error::BadFileName {
            path: path.clone(),
            reason: "a segment file must be named by its base offset in 20 digits".into(),
        })?;
        if kind == 0 {
            logs.push(base);
        } else {
            indexes.push((base, path));
        }
    }
    logs.sort_unstable();
    for (base, path) in indexes {
        if logs.binary_search(&base).is_err() {
            remove_file(&path, report, "index without a log file")?;
        }
    }
    Ok(logs)
}

/// Loads a trusted segment's indexes; `Err(reason)` means they must be
/// rebuilt.
fn load_trusted(
    seg: &Segment,
    next_base: Option<u64>,
    config: &LogConfig,
) -> Result<std::result::Result<(), String>> {
    let size = seg.size();
    let read_index = |p: &Path| -> Result<Option<Vec<u8>>> {
        match fs::read(p) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(p, "read index", e)),
        }
    };
    let Some(idx) = read_index(&seg.index_path)? else {
        return Ok(Err(format!("{} is missing", seg.index_path.display())));
    };
    let Some(tidx) = read_index(&seg.time_index_path)? else {
        return Ok(Err(format!("{} is missing", seg.time_index_path.display())));
    };
    // Kafka leaves its active segment's index files preallocated, zero
    // after the entries. The tail is room, not damage; but zeros can also
    // be entries lost to damage, which would leave the segment's largest
    // timestamp short. So the segment is rebuilt, as Kafka's own recovery
    // of its active segment does, and the note says why.
    for (path, slots) in [
        (
            &seg.index_path,
            offset_index::preallocated_slots(&idx, offset_index::ENTRY_SIZE),
        ),
        (&seg.time_index_path, time_index::preallocated_slots(&tidx)),
    ] {
        if slots > 0 {
            return Ok(Err(format!(
                "{}: {slots} preallocated zero-filled slots after the entries, as Kafka leaves an active segment's index",
                path.display()
            )));
        }
    }
    let oi = match OffsetIndex::parse(
        &idx,
        seg.base_offset,
        config.max_index_entries(),
        size,
        next_base,
    ) {
        Ok(i) => i,
        Err(e) => {
            return Ok(Err(format!(
                "{}: invalid index: {e}",
                seg.index_path.display()
            )))
        }
    };
    let ti = match TimeIndex::parse(
        &tidx,
        seg.base_offset,
        config.max_time_index_entries(),
        next_base,
    ) {
        Ok(i) => i,
        Err(e) => {
            return Ok(Err(format!(
                "{}: invalid index: {e}",
                seg.time_index_path.display()
            )))
        }
    };
    // The last entry must name a batch that starts where it says and ends
    // at the entry's offset: catches an index written ahead of its log.
    if let Some(last) = oi.entries().last() {
        let key = seg.base_offset + u64::from(last.relative_offset);
        match seg.header_at(u64::from(last.position), size) {
            Ok(h) if h.last_offset() == key => {}
            Ok(h) => {
                return Ok(Err(format!(
                    "{}: last entry names offset {key} but the batch there ends at {}",
                    seg.index_path.display(),
                    h.last_offset()
                )))
            }
            Err(e) => {
                return Ok(Err(format!(
                    "{}: last entry: {e}",
                    seg.index_path.display()
                )))
            }
        }
    }
    // Where the segment ends: walk the batch headers after the last index
    // entry (a few KiB). The next segment's base offset is not taken on
    // trust: a crash or damage could have left a gap between them.
    let mut position = oi.entries().last().map_or(0, |e| u64::from(e.position));
    let mut next_offset = seg.base_offset;
    while position < size {
        match seg.header_at(position, size) {
            Ok(h) => {
                next_offset = h.next_offset();
                position += h.size() as u64;
            }
            Err(e) => {
                return Ok(Err(format!(
                    "{}: batch after the last index entry: {e}",
                    seg.log_path.display()
                )))
            }
        }
    }
    if config.mutation == Some(Mutation::HoleAfterTruncation) {
        // The old rule: the next segment's base offset ends this one.
        if let Some(next) = next_base {
            next_offset = next;
        }
    }
    let (n, tn) = (oi.len(), ti.len());
    {
        let mut st = write(&seg.state);
        let last_ts = ti.last_entry();
        st.max_timestamp = last_ts.timestamp;
        st.offset_of_max_timestamp = last_ts.offset;
        st.bytes_since_last_index_entry =
            size - oi.entries().last().map_or(0, |e| u64::from(e.position));
        st.offset_index = oi;
        st.time_index = ti;
        st.next_offset = next_offset;
    }
    seg.set_indexes_on_disk(n, tn);
    Ok(Ok(()))
}

/// Loads (and if need be recovers) the log in `dir`.
pub(crate) fn load(dir: &Path, config: &LogConfig, params: &LoadParams) -> Result<Loaded> {
    let mut report = RecoveryReport {
        clean_shutdown: params.clean_shutdown,
        ..RecoveryReport::default()
    };
    let bases = list_segments(dir, &mut report)?;

    // The epoch checkpoint: rebuilt from the batches when missing or bad.
    let epoch_path = dir.join(epoch_cache::FILE_NAME);
    let (mut epochs, rebuild_epochs, original_epochs) = match checkpoint::read_epochs(&epoch_path) {
        Ok(Some(e)) => {
            let cache = EpochCache::new(dir, e);
            let entries = cache.entries().to_vec();
            (cache, false, entries)
        }
        Ok(None) => {
            if !bases.is_empty() {
                report.repairs.push(format!(
                    "{} is missing; rebuilt from the batches",
                    epoch_path.display()
                ));
            }
            (
                EpochCache::new(dir, Vec::new()),
                !bases.is_empty(),
                Vec::new(),
            )
        }
        Err(Error::Checkpoint { line, reason, .. }) => {
            report.repairs.push(format!(
                "{} does not parse (line {line}: {reason}); rebuilt from the batches",
                epoch_path.display()
            ));
            (EpochCache::new(dir, Vec::new()), true, Vec::new())
        }
        Err(e) => return Err(e),
    };

    // Data below this offset was acknowledged as flushed.
    let flushed_below = if params.clean_shutdown {
        u64::MAX
    } else {
        params.recovery_point
    };
    let mut segments: BTreeMap<u64, Arc<Segment>> = BTreeMap::new();
    let mut prev_next: Option<u64> = None;
    let mut prev_epoch = -1;
    let mut cut_at: Option<usize> = None;

    for (i, &base) in bases.iter().enumerate() {
        let next_base = bases.get(i + 1).copied();
        let seg = Segment::open(dir, base, SegState::new(base, config))?;
        let is_last = next_base.is_none();
        let unflushed =
            !params.clean_shutdown && next_base.is_none_or(|n| n > params.recovery_point);
        if let Some(p) = prev_next {
            if p != base {
                // A gap or overlap between segments: everything from here
                // on is suspect.
                let problem = ScanProblem::Gap {
                    expected: p,
                    found: base,
                };
                if p >= flushed_below && only_empty_segments(dir, &bases[i..])? {
                    // Past the gap, above the recovery point, only empty
                    // files: deleting them loses no batch (Kafka would keep
                    // them, and a log end past the gap).
                    report.repairs.push(format!(
                        "{}: {problem}; deleting the empty unflushed segments from offset {base} on: no batch is lost",
                        seg.log_path.display()
                    ));
                } else {
                    handle_problem(&seg, &problem, p, flushed_below, config, &mut report)?;
                }
                cut_at = Some(i);
                drop(seg);
                break;
            }
        }

        let mut recover_from: Option<(u64, SegState, &str)> = None;
        if unflushed {
            recover_from = Some((0, SegState::new(base, config), "unflushed"));
        } else {
            match load_trusted(&seg, next_base, config)? {
                Ok(()) if is_last => {
                    // Clean shutdown: find the log end by checking the tail
                    // from the last index entry.
                    let mut st =
                        std::mem::replace(&mut *write(&seg.state), SegState::new(base, config));
                    // The scan starts at the last entry's batch and counts
                    // bytes from there, as appends did.
                    st.bytes_since_last_index_entry = 0;
                    let start = st
                        .offset_index
                        .entries()
                        .last()
                        .map_or(0, |e| u64::from(e.position));
                    let n = (st.offset_index.len(), st.time_index.len());
                    let scan = scan_segment(
                        &seg_file(&seg)?,
                        &seg.log_path,
                        base,
                        start,
                        st,
                        ScanContext::new(config),
                    )?;
                    if scan.problem.is_none() {
                        *write(&seg.state) = scan.state;
                        seg.set_indexes_on_disk(n.0, n.1);
                    } else {
                        report.repairs.push(format!(
                            "{}: tail after the last index entry does not check; recovering the segment",
                            seg.log_path.display()
                        ));
                        recover_from = Some((0, SegState::new(base, config), "tail"));
                    }
                }
                Ok(()) => {}
                Err(reason) => {
                    report
                        .repairs
                        .push(format!("{reason}; rebuilding the segment's indexes"));
                    recover_from = Some((0, SegState::new(base, config), "index"));
                }
            }
        }

        if let Some((start, st, why)) = recover_from {
            let scan = scan_segment(
                &seg_file(&seg)?,
                &seg.log_path,
                base,
                start,
                st,
                ScanContext {
                    prev_epoch,
                    known_epochs: (config.mutation == Some(Mutation::TrustEpochCheckpoint)
                        && !rebuild_epochs)
                        .then_some(original_epochs.as_slice()),
                    ..ScanContext::new(config)
                },
            )?;
            report.segments_recovered.push(base);
            report.bytes_recovered += scan.bytes_checked;
            if let Some(&(e, _)) = scan.epochs.last() {
                prev_epoch = e;
            }
            if why != "unflushed" {
                report.indexes_rebuilt.push(seg.index_path.clone());
                report.indexes_rebuilt.push(seg.time_index_path.clone());
            }
            // In the unflushed suffix, the batches' epochs replace what the
            // checkpoint says; a segment re-read only for its index leaves
            // the cache alone (later, trusted segments have entries too).
            if why == "unflushed" {
                epochs.truncate_from_end(base);
                for &(e, o) in &scan.epochs {
                    epochs.assign_in_memory(e, o);
                }
            }
            let problem = scan.problem.clone();
            let next = scan.next_offset;
            let valid = scan.valid_bytes;
            let mut state = scan.state;
            // As Kafka's `LogSegment.recover`: the rebuilt time index ends
            // with the segment's largest timestamp.
            let (ts, off) = (state.max_timestamp, state.offset_of_max_timestamp);
            state.time_index.maybe_append(ts, off, true);
            *write(&seg.state) = state;
            if let Some(problem) = problem {
                handle_problem(&seg, &problem, next, flushed_below, config, &mut report)?;
                report.bytes_truncated += seg.truncate_to_position(valid, next)?;
                seg.rewrite_indexes()?;
                mutated_time_index_file(&seg, config)?;
                segments.insert(base, Arc::new(seg));
                cut_at = Some(i + 1);
                break;
            }
            seg.rewrite_indexes()?;
            mutated_time_index_file(&seg, config)?;
        }
        prev_next = Some(seg.next_offset());
        segments.insert(base, Arc::new(seg));
    }

    // Segments after invalid data go (rule 3).
    if let Some(from) = cut_at {
        for &base in &bases[from..] {
            let seg = Segment::open(dir, base, SegState::new(base, config))?;
            report.bytes_removed += seg.size();
            report.segments_removed.push(seg.log_path.clone());
            seg.delete_files()?;
        }
        checkpoint::sync_dir(dir)?;
    }

    finish(
        dir,
        config,
        params,
        segments,
        epochs,
        rebuild_epochs,
        original_epochs,
        report,
    )
}

/// The leader epoch cache the batches describe (Kafka's
/// `LeaderEpochFileCache.assign` of every batch, as its recovery does).
fn epochs_from_batches(dir: &Path, segments: &BTreeMap<u64, Arc<Segment>>) -> Result<EpochCache> {
    let mut epochs = EpochCache::new(dir, Vec::new());
    for seg in segments.values() {
        let limit = seg.size();
        let mut pos = 0;
        while pos + LOG_OVERHEAD as u64 <= limit {
            let h: BatchHeader = seg.header_at(pos, limit)?;
            epochs.assign_in_memory(h.partition_leader_epoch, h.base_offset);
            pos += h.size() as u64;
        }
    }
    Ok(epochs)
}

/// Checks each cache entry against the batch it names: that batch must
/// carry the entry's epoch and start at the entry's offset (or hold the log
/// start offset, for the first entry). A checkpoint with no checksum, or
/// one Kafka wrote asynchronously and lost, can disagree; the batches win.
fn epoch_cache_disagrees(
    segments: &BTreeMap<u64, Arc<Segment>>,
    entries: &[EpochEntry],
    log_start: u64,
) -> Result<Option<String>> {
    for (i, e) in entries.iter().enumerate() {
        let Some(seg) = segments
            .range(..=e.start_offset)
            .next_back()
            .map(|(_, s)| s)
        else {
            return Ok(Some(format!(
                "no segment holds epoch {}'s start offset {}",
                e.epoch, e.start_offset
            )));
        };
        let found = match seg.translate(e.start_offset, seg.size()) {
            Ok(Some((_, h))) => h,
            Ok(None) | Err(_) => {
                return Ok(Some(format!(
                    "no batch holds epoch {}'s start offset {}",
                    e.epoch, e.start_offset
                )))
            }
        };
        let starts_here =
            found.base_offset == e.start_offset || (i == 0 && e.start_offset == log_start);
        if found.partition_leader_epoch != e.epoch || !starts_here {
            return Ok(Some(format!(
                "entry (epoch {}, start {}) but the batch there starts at {} in epoch {}",
                e.epoch, e.start_offset, found.base_offset, found.partition_leader_epoch
            )));
        }
        // The epoch starts there: the batch before is of another epoch.
        if e.start_offset > log_start {
            let before = e.start_offset - 1;
            let seg = segments.range(..=before).next_back().map(|(_, s)| s);
            let prev = match seg.map(|s| s.translate(before, s.size())) {
                Some(Ok(Some((_, h)))) => h,
                _ => {
                    return Ok(Some(format!(
                        "no batch holds offset {before}, before epoch {}'s start",
                        e.epoch
                    )))
                }
            };
            if prev.partition_leader_epoch == e.epoch {
                return Ok(Some(format!(
                    "entry (epoch {}, start {}) but epoch {} already holds offset {before}",
                    e.epoch, e.start_offset, e.epoch
                )));
            }
        }
    }
    Ok(None)
}

/// Under [`Mutation::EmptyTimeIndexAfterRecovery`] only: the rebuilt time
/// index never reaches its file.
fn mutated_time_index_file(seg: &Segment, config: &LogConfig) -> Result<()> {
    if config.mutation == Some(Mutation::EmptyTimeIndexAfterRecovery) {
        super::fs::write_file(&seg.time_index_path, &[])
            .map_err(|e| Error::io(&seg.time_index_path, "write time index", e))?;
    }
    Ok(())
}

fn seg_file(seg: &Segment) -> Result<File> {
    File::open(&seg.log_path).map_err(|e| Error::io(&seg.log_path, "open segment", e))
}

/// Decides whether a problem may be cut (rule 4) and records it.
/// Whether every segment in `bases` has an empty `.log` file.
fn only_empty_segments(dir: &Path, bases: &[u64]) -> Result<bool> {
    for &base in bases {
        let path = dir.join(super::segment::file_name(base, "log"));
        let len = fs::metadata(&path)
            .map_err(|e| Error::io(&path, "stat", e))?
            .len();
        if len > 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

fn handle_problem(
    seg: &Segment,
    problem: &ScanProblem,
    lost_from: u64,
    flushed_below: u64,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<()> {
    let torn_above = matches!(problem, ScanProblem::TornTail { .. }) && lost_from >= flushed_below;
    if problem.kafka_keeps() && !config.truncate_below_recovery_point {
        return Err(Error::RefusedToCut {
            path: seg.log_path.clone(),
            position: problem.position(),
            offset: lost_from,
            reason: problem.to_string(),
        });
    }
    if lost_from < flushed_below && !config.truncate_below_recovery_point {
        return Err(Error::CorruptBelowRecoveryPoint {
            path: seg.log_path.clone(),
            position: problem.position(),
            offset: lost_from,
            recovery_point: flushed_below,
            reason: problem.to_string(),
        });
    }
    let text = format!("{}: {problem}", seg.log_path.display());
    if problem.kafka_keeps() {
        report.repairs.push(format!(
            "{text}; cutting the log at offset {lost_from}, data Kafka would keep (allowed by configuration)"
        ));
    } else if lost_from < flushed_below {
        report.repairs.push(format!(
            "{text}; cutting at offset {lost_from}, below the recovery point (allowed by configuration)"
        ));
    } else if torn_above {
        report.repairs.push(format!(
            "{text}; cutting the unflushed torn tail at offset {lost_from}"
        ));
    } else {
        report
            .repairs
            .push(format!("{text}; truncating the log to offset {lost_from}"));
    }
    if report.problem.is_none() {
        report.problem = Some(text);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn finish(
    dir: &Path,
    config: &LogConfig,
    params: &LoadParams,
    mut segments: BTreeMap<u64, Arc<Segment>>,
    mut epochs: EpochCache,
    rebuild_epochs: bool,
    original_epochs: Vec<EpochEntry>,
    mut report: RecoveryReport,
) -> Result<Loaded> {
    let mut log_end = segments.values().next_back().map(|s| s.next_offset());
    let first_base = segments.keys().next().copied();
    let mut log_start = params.log_start_offset.max(first_base.unwrap_or(0));
    if let Some(end) = log_end {
        if log_start > end {
            report.repairs.push(format!(
                "log start offset {log_start} is beyond the log end {end}; deleting every segment, as Kafka does"
            ));
            for seg in segments.values() {
                report.bytes_removed += seg.size();
                report.segments_removed.push(seg.log_path.clone());
                seg.delete_files()?;
            }
            segments.clear();
            epochs = EpochCache::new(dir, Vec::new());
            log_end = None;
        }
    }
    if segments.is_empty() {
        log_start = params.log_start_offset;
        let seg = Segment::create(dir, log_start, config)?;
        segments.insert(log_start, Arc::new(seg));
        checkpoint::sync_dir(dir)?;
        log_end = Some(log_start);
    }
    let log_end = log_end.unwrap_or(log_start);

    let mut rebuild_epochs = rebuild_epochs;
    if !rebuild_epochs {
        epochs.truncate_from_end(log_end);
        epochs.truncate_from_start(log_start);
        if let Some(why) = epoch_cache_disagrees(&segments, epochs.entries(), log_start)? {
            report.repairs.push(format!(
                "{}: {why}; rebuilt from the batches",
                epochs.path().display()
            ));
            rebuild_epochs = true;
        }
    }
    if rebuild_epochs {
        epochs = epochs_from_batches(dir, &segments)?;
    }
    epochs.truncate_from_end(log_end);
    epochs.truncate_from_start(log_start);
    if epochs.entries() != original_epochs.as_slice() {
        epochs.write()?;
        if !rebuild_epochs {
            report.repairs.push(format!(
                "{} updated to match the log",
                epochs.path().display()
            ));
        }
    }

    let recovery_point = if params.clean_shutdown {
        log_end
    } else {
        if params.recovery_point > log_end && report.problem.is_none() {
            report.repairs.push(format!(
                "recovery point {} is beyond the log end {log_end}; lowered (the log ends cleanly, as after a truncation)",
                params.recovery_point
            ));
        }
        params.recovery_point.min(log_end)
    };
    let mut hw = params.high_watermark;
    if hw > log_end {
        report.repairs.push(format!(
            "high watermark {hw} is beyond the log end {log_end}; clamped"
        ));
        hw = log_end;
    }
    hw = hw.max(log_start);
    report.log_start_offset = log_start;
    report.log_end_offset = log_end;
    report.recovery_point = recovery_point;
    report.high_watermark = hw;
    // The last segment's largest timestamp is known: a recovery scan or
    // the tail scan after a clean shutdown (which starts from the time
    // index's last entry, the largest before the tail) computed it.
    Ok(Loaded {
        segments,
        epochs,
        report,
    })
}

/// The state of one index file, as [`check_segment`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexCheck {
    Missing,
    /// Does not parse, or an entry does not name a batch of the log.
    Invalid(String),
    /// Valid; `matches_rebuilt` tells whether it equals the index a rebuild
    /// with the given configuration would write (a valid index may be
    /// sparser, e.g. written with another `index.interval.bytes`).
    Valid {
        entries: usize,
        matches_rebuilt: bool,
        /// Zero slots after the entries: room Kafka preallocates for an
        /// active segment's index and trims only at roll
        /// ([`offset_index::preallocated_slots`]). Not entries, not damage.
        preallocated: usize,
    },
}

/// A read-only check of one segment: every batch and both indexes.
#[derive(Debug, Clone)]
pub struct SegmentCheck {
    pub base_offset: u64,
    pub log_path: PathBuf,
    pub size: u64,
    pub batches: u64,
    pub valid_bytes: u64,
    pub next_offset: u64,
    pub problem: Option<ScanProblem>,
    pub index: IndexCheck,
    pub time_index: IndexCheck,
}

/// Checks the segment at `base_offset` in `dir` without changing anything:
/// reads every batch (calling `on_batch` with its position, bytes and
/// header) as recovery would, and validates both index files entry by
/// entry against the log.
pub fn check_segment(
    dir: &Path,
    base_offset: u64,
    config: &LogConfig,
    mut on_batch: Option<BatchVisitor<'_>>,
) -> Result<SegmentCheck> {
    let log_path = dir.join(segment::file_name(base_offset, segment::LOG_SUFFIX));
    let file = File::open(&log_path).map_err(|e| Error::io(&log_path, "open segment", e))?;
    let size = file
        .metadata()
        .map_err(|e| Error::io(&log_path, "stat", e))?
        .len();
    // Batch start position -> last offset, to check index entries against.
    let mut starts: BTreeMap<u64, u64> = BTreeMap::new();
    let mut both = |pos: u64, bytes: &[u8], h: &BatchHeader| {
        starts.insert(pos, h.last_offset());
        if let Some(f) = on_batch.as_mut() {
            f(pos, bytes, h);
        }
    };
    let mut scan = scan_segment(
        &file,
        &log_path,
        base_offset,
        0,
        SegState::new(base_offset, config),
        ScanContext {
            on_batch: Some(&mut both),
            ..ScanContext::new(config)
        },
    )?;
    let (valid, next) = (scan.valid_bytes, scan.next_offset);
    let (ts, off) = (scan.state.max_timestamp, scan.state.offset_of_max_timestamp);
    scan.state.time_index.maybe_append(ts, off, true);

    let index_path = dir.join(segment::file_name(base_offset, segment::INDEX_SUFFIX));
    let rebuilt = scan.state.offset_index.encode_from(0);
    let index = check_index_file(
        &index_path,
        &rebuilt,
        offset_index::ENTRY_SIZE,
        |b| offset_index::preallocated_slots(b, offset_index::ENTRY_SIZE),
        |bytes| {
            let i = OffsetIndex::parse(bytes, base_offset, usize::MAX / 8, valid, Some(next))?;
            for e in i.entries() {
                let key = base_offset + u64::from(e.relative_offset);
                if starts.get(&u64::from(e.position)) != Some(&key) {
                    return Err(format!(
                        "entry ({key}, {}) does not name a batch ending at {key}",
                        e.position
                    ));
                }
            }
            Ok(i.len())
        },
    )?;
    let time_path = dir.join(segment::file_name(base_offset, segment::TIME_INDEX_SUFFIX));
    let rebuilt_time = scan.state.time_index.encode_from(0);
    let time_index = check_index_file(
        &time_path,
        &rebuilt_time,
        time_index::ENTRY_SIZE,
        time_index::preallocated_slots,
        |bytes| TimeIndex::parse(bytes, base_offset, usize::MAX / 12, Some(next)).map(|t| t.len()),
    )?;
    Ok(SegmentCheck {
        base_offset,
        log_path,
        size,
        batches: scan.batches,
        valid_bytes: valid,
        next_offset: next,
        problem: scan.problem,
        index,
        time_index,
    })
}

/// Reads and checks one index file: `zero_tail` counts its preallocated
/// slots (of `entry_size` bytes), which are left out of the entries parsed
/// and compared with a rebuild.
fn check_index_file(
    path: &Path,
    rebuilt: &[u8],
    entry_size: usize,
    zero_tail: impl FnOnce(&[u8]) -> usize,
    parse: impl FnOnce(&[u8]) -> std::result::Result<usize, String>,
) -> Result<IndexCheck> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(IndexCheck::Missing),
        Err(e) => return Err(Error::io(path, "read index", e)),
    };
    let preallocated = zero_tail(&bytes);
    let entries = &bytes[..bytes.len() - preallocated * entry_size];
    Ok(match parse(entries) {
        Ok(n) => IndexCheck::Valid {
            entries: n,
            matches_rebuilt: entries == rebuilt,
            preallocated,
        },
        Err(reason) => IndexCheck::Invalid(reason),
    })
}

/// Base offsets of the segments in `dir`, read-only (no cleaning).
pub fn segment_bases(dir: &Path) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, "list directory", e))? {
        let entry = entry.map_err(|e| Error::io(dir, "list directory", e))?;
        let path = entry.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if let Some(stem) = name.strip_suffix(".log") {
            out.push(
                segment::parse_base_offset(stem).ok_or_else(|| Error::BadFileName {
                    path: path.clone(),
                    reason: "a segment file must be named by its base offset in 20 digits".into(),
                })?,
            );
        }
    }
    out.sort_unstable();
    Ok(out)
}
