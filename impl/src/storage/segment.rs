//! A segment: one `.log` file of record batches and its two indexes.
//!
//! Files are named by the segment's base offset, 20 digits:
//! `00000000000000000000.log`, `.index`, `.timeindex`. The base offset is
//! <= every offset in the segment and > every offset in earlier segments.
//!
//! The log file is appended with positioned writes and read with positioned
//! reads, so the writer and any number of readers share one file handle.
//! The indexes live in memory (lookups never touch the disk) and are written
//! to their files when the segment is rolled, flushed past, truncated or
//! closed; between those moments the files may lag, which is safe because
//! a lagging index is merely sparser and a torn one is rebuilt on load.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::batch::{BatchHeader, HEADER_SIZE, LOG_OVERHEAD, NO_TIMESTAMP};
use super::config::LogConfig;
use super::error::{Error, Result};
use super::fs as seam;
use super::offset_index::{self, OffsetIndex};
use super::time_index::{self, TimeIndex};
use crate::sync::{lock, read, write, AtomicU64, Mutex, Ordering, RwLock};

/// Suffix of the record batch file.
pub const LOG_SUFFIX: &str = "log";
/// Suffix of the offset index file.
pub const INDEX_SUFFIX: &str = "index";
/// Suffix of the time index file.
pub const TIME_INDEX_SUFFIX: &str = "timeindex";

/// `<base offset, 20 digits>.<suffix>`.
pub fn file_name(base_offset: u64, suffix: &str) -> String {
    format!("{base_offset:020}.{suffix}")
}

/// Parses the base offset from a segment file stem: exactly 20 decimal
/// digits naming a non-negative i64.
pub fn parse_base_offset(stem: &str) -> Option<u64> {
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse::<u64>().ok().filter(|&v| v <= i64::MAX as u64)
}

/// Writer-maintained state of a segment; readers take it shared for index
/// lookups.
#[derive(Debug)]
pub(crate) struct SegState {
    pub(crate) offset_index: OffsetIndex,
    pub(crate) time_index: TimeIndex,
    /// Entries of each index already in its file.
    index_on_disk: usize,
    time_index_on_disk: usize,
    /// Bytes since the start of the batch that got the last index entry
    /// (Kafka's `bytesSinceLastIndexEntry`).
    pub(crate) bytes_since_last_index_entry: u64,
    pub(crate) max_timestamp: i64,
    pub(crate) offset_of_max_timestamp: u64,
    /// The offset after the segment's last batch.
    pub(crate) next_offset: u64,
    /// Log bytes written since the last fsync.
    log_dirty: bool,
    /// Index files changed since their last fsync.
    index_dirty: bool,
}

impl SegState {
    pub(crate) fn new(base_offset: u64, config: &LogConfig) -> SegState {
        SegState {
            offset_index: OffsetIndex::new(base_offset, config.max_index_entries()),
            time_index: TimeIndex::new(base_offset, config.max_time_index_entries()),
            index_on_disk: 0,
            time_index_on_disk: 0,
            bytes_since_last_index_entry: 0,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: base_offset,
            next_offset: base_offset,
            log_dirty: false,
            index_dirty: false,
        }
    }

    /// Account for a batch at `position` in the indexes, exactly as both
    /// append and recovery do (Kafka's `LogSegment.append`/`recover`).
    pub(crate) fn index_batch(&mut self, h: &BatchHeader, position: u64, interval: u32) {
        if h.max_timestamp > self.max_timestamp {
            self.max_timestamp = h.max_timestamp;
            self.offset_of_max_timestamp = h.last_offset();
        }
        if self.bytes_since_last_index_entry > u64::from(interval) {
            self.offset_index.append(h.last_offset(), position as u32);
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, false);
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += h.size() as u64;
        self.next_offset = h.next_offset();
    }
}

/// One segment, shared by the writer and readers.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) base_offset: u64,
    pub(crate) log_path: PathBuf,
    pub(crate) index_path: PathBuf,
    pub(crate) time_index_path: PathBuf,
    file: File,
    /// Bytes readers may read; stored only after those bytes are written.
    size: AtomicU64,
    pub(crate) state: RwLock<SegState>,
    /// Set the first time a read finds an offset index entry that does not
    /// name the batch it should (the index has no checksum): what was found
    /// and the fallback taken. Reads of such a segment stay correct; the
    /// note tells tools and callers that the `.index` file is damaged.
    index_note: Mutex<Option<String>>,
}

/// Where a validated walk over a segment's batches starts.
#[derive(Debug, Clone, Copy)]
enum WalkStart {
    /// The segment start: the first batch's base offset is the segment's.
    Segment,
    /// An offset index entry's position, whose batch was checked to end at
    /// the entry's offset.
    Entry(u32),
}

impl Segment {
    fn paths(dir: &Path, base: u64) -> (PathBuf, PathBuf, PathBuf) {
        (
            dir.join(file_name(base, LOG_SUFFIX)),
            dir.join(file_name(base, INDEX_SUFFIX)),
            dir.join(file_name(base, TIME_INDEX_SUFFIX)),
        )
    }

    /// Creates an empty segment (truncating any leftover files of that name).
    pub(crate) fn create(dir: &Path, base_offset: u64, config: &LogConfig) -> Result<Segment> {
        let (log_path, index_path, time_index_path) = Self::paths(dir, base_offset);
        let file =
            seam::create(&log_path).map_err(|e| Error::io(&log_path, "create segment", e))?;
        for p in [&index_path, &time_index_path] {
            seam::create(p).map_err(|e| Error::io(p, "create index", e))?;
        }
        Ok(Segment {
            base_offset,
            log_path,
            index_path,
            time_index_path,
            file,
            size: AtomicU64::new(0),
            state: RwLock::new(SegState::new(base_offset, config)),
            index_note: Mutex::new(None),
        })
    }

    /// Opens an existing segment's log file; the state is filled in by the
    /// loader (from the index files or by recovery).
    pub(crate) fn open(dir: &Path, base_offset: u64, state: SegState) -> Result<Segment> {
        let (log_path, index_path, time_index_path) = Self::paths(dir, base_offset);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&log_path)
            .map_err(|e| Error::io(&log_path, "open segment", e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(&log_path, "stat segment", e))?
            .len();
        Ok(Segment {
            base_offset,
            log_path,
            index_path,
            time_index_path,
            file,
            size: AtomicU64::new(len),
            state: RwLock::new(state),
            index_note: Mutex::new(None),
        })
    }

    /// Bytes readers may read.
    pub(crate) fn size(&self) -> u64 {
        self.size.load(Ordering::SeqCst)
    }

    pub(crate) fn next_offset(&self) -> u64 {
        read(&self.state).next_offset
    }

    /// Appends one checked batch at the end (writer only).
    pub(crate) fn append(&self, bytes: &[u8], h: &BatchHeader, config: &LogConfig) -> Result<()> {
        let position = self.size();
        seam::write_at(&self.file, &self.log_path, bytes, position)
            .map_err(|e| Error::io(&self.log_path, "append", e))?;
        {
            let mut st = write(&self.state);
            st.index_batch(h, position, config.index_interval_bytes);
            st.log_dirty = true;
        }
        // Publish the bytes only after they are written and indexed.
        self.size
            .store(position + bytes.len() as u64, Ordering::SeqCst);
        Ok(())
    }

    /// Reads up to `len` bytes at `position` (fewer at the end of file).
    pub(crate) fn read_at(&self, position: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        let mut done = 0;
        while done < len {
            match self.file.read_at(&mut buf[done..], position + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(&self.log_path, "read", e)),
            }
        }
        buf.truncate(done);
        Ok(buf)
    }

    /// Reads and parses the batch header at `position`, which must lie
    /// within the first `limit` bytes together with the whole batch.
    pub(crate) fn header_at(&self, position: u64, limit: u64) -> Result<BatchHeader> {
        let want = HEADER_SIZE.min(limit.saturating_sub(position) as usize);
        let buf = self.read_at(position, want)?;
        let h =
            BatchHeader::parse(&buf).map_err(|e| Error::corrupt(&self.log_path, position, e))?;
        if position + h.size() as u64 > limit {
            return Err(Error::corrupt(
                &self.log_path,
                position,
                super::error::BatchError::Truncated {
                    needed: h.size() as u64,
                    available: limit - position,
                },
            ));
        }
        Ok(h)
    }

    /// The first batch whose last offset is >= `target`, searching the
    /// first `limit` bytes: index lookup, then a short forward scan.
    ///
    /// The scan checks that offsets follow one another (a field outside
    /// the CRC can be damaged): the batch at an index entry must end at the
    /// entry's offset, the batch at the segment start must begin at the
    /// segment's base offset, and each later batch must begin where the one
    /// before ended. A break in the log is an [`Error::BadOffsets`] naming
    /// the file and byte position. An index entry that names the wrong
    /// batch is the index's fault, not the log's: the scan is redone from
    /// the segment start and, if that succeeds, the entry is recorded in
    /// [`index_note`](Self::index_note). Kafka's `LogSegment.translateOffset`
    /// trusts both (`OffsetIndex.lookup`, then
    /// `FileRecords.searchForOffsetFromPosition` from the entry's position).
    pub(crate) fn translate(&self, target: u64, limit: u64) -> Result<Option<(u64, BatchHeader)>> {
        let entry = read(&self.state).offset_index.lookup_entry(target);
        let Some((slot, e)) = entry else {
            return self.walk(target, limit, WalkStart::Segment, None);
        };
        let key = self.base_offset + u64::from(e.relative_offset);
        match self.entry_batch(e.position, key, limit) {
            Ok(first) => self.walk(target, limit, WalkStart::Entry(e.position), Some(first)),
            Err(found) => {
                let r = self.walk(target, limit, WalkStart::Segment, None)?;
                let mut note = lock(&self.index_note);
                if note.is_none() {
                    *note = Some(format!(
                        "{}: entry {slot} (relative offset {}, position {}) names offset {} but {found}; \
                         fell back to a scan of {} from its start",
                        self.index_path.display(),
                        e.relative_offset,
                        e.position,
                        key,
                        self.log_path.display()
                    ));
                }
                Ok(r)
            }
        }
    }

    /// What a damaged offset index entry was found to name, if any.
    pub(crate) fn index_note(&self) -> Option<String> {
        lock(&self.index_note).clone()
    }

    /// The header of the batch at an index entry, or why it is not the
    /// batch the entry names.
    fn entry_batch(
        &self,
        position: u32,
        key: u64,
        limit: u64,
    ) -> std::result::Result<BatchHeader, String> {
        let position = u64::from(position);
        if position + LOG_OVERHEAD as u64 > limit {
            return Err(format!(
                "position {position} is past the log's {limit} bytes"
            ));
        }
        match self.header_at(position, limit) {
            Ok(h) if h.last_offset() == key => Ok(h),
            Ok(h) => Err(format!(
                "the batch at byte {position} holds {}..{}",
                h.base_offset,
                h.last_offset()
            )),
            Err(e) => Err(format!("no batch starts at byte {position} ({e})")),
        }
    }

    /// The forward scan of [`translate`](Self::translate), offsets checked;
    /// `first` is the header at an index entry, already read and checked.
    fn walk(
        &self,
        target: u64,
        limit: u64,
        start: WalkStart,
        mut first: Option<BatchHeader>,
    ) -> Result<Option<(u64, BatchHeader)>> {
        let (mut position, mut expected) = match start {
            WalkStart::Segment => (0, Some(self.base_offset)),
            WalkStart::Entry(position) => (u64::from(position), None),
        };
        while position + LOG_OVERHEAD as u64 <= limit {
            let h = match first.take() {
                Some(h) => h,
                None => self.header_at(position, limit)?,
            };
            if let Some(expected) = expected.filter(|&x| x != h.base_offset) {
                return Err(Error::BadOffsets {
                    path: self.log_path.clone(),
                    position,
                    reason: format!(
                        "base offset {} where {expected} was expected",
                        h.base_offset
                    ),
                });
            }
            if h.last_offset() >= target {
                return Ok(Some((position, h)));
            }
            expected = Some(h.next_offset());
            position += h.size() as u64;
        }
        Ok(None)
    }

    /// Brings the index files in line with memory (writer only).
    pub(crate) fn write_indexes(&self) -> Result<()> {
        let mut st = write(&self.state);
        let st = &mut *st;
        if st.index_on_disk != st.offset_index.len() {
            write_index_file(
                &self.index_path,
                st.index_on_disk,
                st.offset_index.len(),
                offset_index::ENTRY_SIZE,
                |keep| st.offset_index.encode_from(keep),
            )?;
            st.index_on_disk = st.offset_index.len();
            st.index_dirty = true;
        }
        if st.time_index_on_disk != st.time_index.len() {
            write_index_file(
                &self.time_index_path,
                st.time_index_on_disk,
                st.time_index.len(),
                time_index::ENTRY_SIZE,
                |keep| st.time_index.encode_from(keep),
            )?;
            st.time_index_on_disk = st.time_index.len();
            st.index_dirty = true;
        }
        Ok(())
    }

    /// Marks the index files as matching memory (after a load that read
    /// them, or a rebuild that rewrote them).
    pub(crate) fn set_indexes_on_disk(&self, offset_entries: usize, time_entries: usize) {
        let mut st = write(&self.state);
        st.index_on_disk = offset_entries;
        st.time_index_on_disk = time_entries;
    }

    /// Rewrites both index files from memory (after a rebuild).
    pub(crate) fn rewrite_indexes(&self) -> Result<()> {
        let (idx, tidx) = {
            let st = read(&self.state);
            (st.offset_index.encode_from(0), st.time_index.encode_from(0))
        };
        seam::write_file(&self.index_path, &idx)
            .map_err(|e| Error::io(&self.index_path, "write index", e))?;
        seam::write_file(&self.time_index_path, &tidx)
            .map_err(|e| Error::io(&self.time_index_path, "write time index", e))?;
        let mut st = write(&self.state);
        st.index_on_disk = st.offset_index.len();
        st.time_index_on_disk = st.time_index.len();
        st.index_dirty = true;
        Ok(())
    }

    /// Called when the segment stops being the active one: records its
    /// largest timestamp in the time index (Kafka's
    /// `onBecomeInactiveSegment`) and writes the index files out.
    pub(crate) fn on_become_inactive(&self) -> Result<()> {
        {
            let mut st = write(&self.state);
            let (ts, off) = (st.max_timestamp, st.offset_of_max_timestamp);
            st.time_index.maybe_append(ts, off, true);
        }
        self.write_indexes()
    }

    /// Fsyncs the log file if it changed; with `indexes`, also writes and
    /// fsyncs the index files. Returns whether anything was synced.
    pub(crate) fn sync(&self, indexes: bool) -> Result<bool> {
        let mut synced = false;
        if read(&self.state).log_dirty {
            seam::sync_data(&self.file, &self.log_path)
                .map_err(|e| Error::io(&self.log_path, "fsync", e))?;
            write(&self.state).log_dirty = false;
            synced = true;
        }
        if indexes {
            self.write_indexes()?;
            if read(&self.state).index_dirty {
                for p in [&self.index_path, &self.time_index_path] {
                    let f = File::open(p).map_err(|e| Error::io(p, "open index", e))?;
                    seam::sync_all(&f, p).map_err(|e| Error::io(p, "fsync index", e))?;
                }
                write(&self.state).index_dirty = false;
                synced = true;
            }
        }
        Ok(synced)
    }

    /// Cuts the log at `position` (a batch boundary) holding offsets below
    /// `next_offset`, trims the indexes to match, and fsyncs, so the cut
    /// data cannot come back after a crash. Writer only, with readers
    /// excluded by the caller.
    pub(crate) fn truncate_to_position(&self, position: u64, next_offset: u64) -> Result<u64> {
        let old = self.size();
        if position < old {
            self.size.store(position, Ordering::SeqCst);
            seam::set_len(&self.file, &self.log_path, position)
                .map_err(|e| Error::io(&self.log_path, "truncate", e))?;
        }
        {
            let mut st = write(&self.state);
            st.offset_index.truncate_to(next_offset);
            st.time_index.truncate_to(next_offset);
            st.index_on_disk = st.index_on_disk.min(st.offset_index.len());
            st.time_index_on_disk = st.time_index_on_disk.min(st.time_index.len());
            st.next_offset = next_offset;
            let last_entry_position = st
                .offset_index
                .entries()
                .last()
                .map_or(0, |e| u64::from(e.position));
            st.bytes_since_last_index_entry = position - last_entry_position;
            st.log_dirty = true;
        }
        // Index files shrink to their entries.
        let (n, tn) = {
            let st = read(&self.state);
            (st.offset_index.len(), st.time_index.len())
        };
        set_file_len(&self.index_path, (n * offset_index::ENTRY_SIZE) as u64)?;
        set_file_len(&self.time_index_path, (tn * time_index::ENTRY_SIZE) as u64)?;
        write(&self.state).index_dirty = true;
        self.recompute_max_timestamp(position)?;
        self.sync(true)?;
        Ok(old.saturating_sub(position))
    }

    /// Recomputes the largest timestamp from the time index's last entry
    /// and the batches after it (Kafka's `readLargestTimestamp`).
    pub(crate) fn recompute_max_timestamp(&self, limit: u64) -> Result<()> {
        let (mut ts, mut off, mut position) = {
            let st = read(&self.state);
            let last = st.time_index.last_entry();
            let (_, pos) = st.offset_index.lookup(last.offset);
            (last.timestamp, last.offset, u64::from(pos))
        };
        while position + LOG_OVERHEAD as u64 <= limit {
            let h = self.header_at(position, limit)?;
            if h.max_timestamp > ts {
                ts = h.max_timestamp;
                off = h.last_offset();
            }
            position += h.size() as u64;
        }
        let mut st = write(&self.state);
        st.max_timestamp = ts;
        st.offset_of_max_timestamp = off;
        Ok(())
    }

    /// Deletes the segment's files.
    pub(crate) fn delete_files(&self) -> Result<()> {
        for p in [&self.log_path, &self.index_path, &self.time_index_path] {
            match seam::remove(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(p, "delete", e)),
            }
        }
        Ok(())
    }

    /// Whether the log file has bytes not yet fsynced, or the index files
    /// changes not yet written and fsynced.
    pub(crate) fn is_dirty(&self) -> bool {
        let st = read(&self.state);
        st.log_dirty
            || st.index_dirty
            || st.index_on_disk != st.offset_index.len()
            || st.time_index_on_disk != st.time_index.len()
    }
}

fn set_file_len(path: &Path, len: u64) -> Result<()> {
    let f = seam::open_or_create(path).map_err(|e| Error::io(path, "open index", e))?;
    seam::set_len(&f, path, len).map_err(|e| Error::io(path, "truncate index", e))
}

/// Makes an index file hold `new_entries` entries, given that its first
/// `on_disk` entries are already right: appends the rest or cuts it short.
fn write_index_file(
    path: &Path,
    on_disk: usize,
    new_entries: usize,
    entry_size: usize,
    encode_tail: impl FnOnce(usize) -> Vec<u8>,
) -> Result<()> {
    let f = seam::open_or_create(path).map_err(|e| Error::io(path, "open index", e))?;
    let keep = on_disk.min(new_entries);
    seam::set_len(&f, path, (keep * entry_size) as u64)
        .map_err(|e| Error::io(path, "truncate index", e))?;
    if new_entries > keep {
        seam::write_at(&f, path, &encode_tail(keep), (keep * entry_size) as u64)
            .map_err(|e| Error::io(path, "write index", e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        assert_eq!(file_name(42, LOG_SUFFIX), "00000000000000000042.log");
        assert_eq!(parse_base_offset("00000000000000000042"), Some(42));
        for bad in [
            "42",
            "0000000000000000004x",
            "99999999999999999999",
            "-0000000000000000001",
        ] {
            assert_eq!(parse_base_offset(bad), None, "{bad}");
        }
    }
}
