//! The partition log: an ordered set of segments with one writer ([`Log`])
//! and any number of readers ([`LogReader`]).
//!
//! # Concurrency
//!
//! The segment list sits behind a read-write lock. Readers hold it shared
//! for the whole of a read; the writer takes it exclusively only to change
//! the list or to cut data (roll, truncation, retention). Appends take no
//! list lock: the writer writes a batch past the published end, then
//! publishes (see `publish.rs`). So a reader sees either the log before an
//! append or after it, and never a byte past the published log end offset
//! (nor past the high watermark, when it asks for that bound); truncation
//! waits for in-flight reads and lowers the end offset before it cuts.
//!
//! # Durability
//!
//! Appends reach the page cache. [`Log::flush`] fsyncs the segments that
//! hold unflushed offsets, then the directory if segments were created, and
//! only then advances the recovery point. Truncation and segment deletion
//! are fsynced before they return, so cut data never reappears after a crash.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::batch::{
    self, check_batch, encode_batch_with, BatchHeader, BatchOptions, Record, RecordBatch,
    LOG_OVERHEAD,
};
use super::checkpoint::{self, EpochEntry};
use super::compression::Codec;
use super::config::LogConfig;
use super::epoch_cache::{EpochCache, EpochEndOffset};
use super::error::{BatchError, Error, Result};
use super::mutation::Mutation;
use super::publish::Published;
use super::recovery::{self, LoadParams, RecoveryReport};
use super::segment::Segment;
use crate::sync::{read, write, Arc, RwLock};

/// What an append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: u64,
    pub last_offset: u64,
    pub max_timestamp: i64,
    /// The segment the batch went to, and its position there.
    pub segment_base_offset: u64,
    pub position: u64,
}

/// The result of a read: whole, checked batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchData {
    /// Consecutive record batches, each checked (CRC included) before it
    /// was served. The first may start below the offset asked for, as in
    /// Kafka: the reader skips the records it did not ask for.
    pub records: Vec<u8>,
    /// The offset after the last batch returned (the offset asked for when
    /// nothing was returned).
    pub next_offset: u64,
    pub high_watermark: u64,
    pub log_start_offset: u64,
    pub log_end_offset: u64,
}

impl FetchData {
    /// The batches read.
    pub fn batches(&self) -> impl Iterator<Item = RecordBatch<'_>> {
        // Every batch was checked when it was read.
        batch::batches(&self.records).filter_map(|b| b.ok())
    }
}

/// Where an offset lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetPosition {
    pub segment_base_offset: u64,
    /// Byte position of the batch holding the offset.
    pub position: u64,
    pub batch_base_offset: u64,
    pub batch_last_offset: u64,
}

/// A timestamp lookup result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampAndOffset {
    pub timestamp: i64,
    pub offset: u64,
}

/// A summary of one segment, for tools and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    pub base_offset: u64,
    pub next_offset: u64,
    pub size: u64,
    pub index_entries: usize,
    pub time_index_entries: usize,
    pub max_timestamp: i64,
    pub log_path: PathBuf,
    /// Set when a read found an offset index entry naming the wrong batch:
    /// the `.index` file, the entry, what it named and the fallback taken.
    pub index_note: Option<String>,
}

/// State shared by the writer and the readers.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) dir: PathBuf,
    pub(crate) config: LogConfig,
    pub(crate) segments: RwLock<BTreeMap<u64, Arc<Segment>>>,
    pub(crate) published: Published,
}

/// The writer of one partition log. There is one per log: it is not
/// `Clone`, and every mutation takes `&mut self`. Readers come from
/// [`Log::reader`].
#[derive(Debug)]
pub struct Log {
    pub(crate) shared: Arc<Shared>,
    pub(crate) active: Arc<Segment>,
    pub(crate) epochs: EpochCache,
    pub(crate) log_end_offset: u64,
    pub(crate) log_start_offset: u64,
    pub(crate) high_watermark: u64,
    pub(crate) recovery_point: u64,
    /// Segments were created or deleted since the directory's last fsync.
    pub(crate) dir_dirty: bool,
    buf: Vec<u8>,
}

/// A read handle on a log; cheap to clone, `Send + Sync`.
#[derive(Debug, Clone)]
pub struct LogReader {
    shared: Arc<Shared>,
}

impl Log {
    /// Opens (creating if needed) the partition directory `dir`, loading and
    /// if need be recovering it (see the `recovery` module for the rules).
    /// [`LogDir::open_log`](super::LogDir::open_log) supplies `params` from
    /// the broker-level checkpoints.
    pub fn open(
        dir: &Path,
        config: LogConfig,
        params: LoadParams,
    ) -> Result<(Log, RecoveryReport)> {
        config.validate()?;
        if !dir.exists() {
            super::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "create directory", e))?;
            if let Some(parent) = dir.parent() {
                checkpoint::sync_dir(parent)?;
            }
        }
        let loaded = recovery::load(dir, &config, &params)?;
        let report = loaded.report;
        let active = loaded
            .segments
            .values()
            .next_back()
            .cloned()
            .ok_or_else(|| Error::InvalidConfig("no segment after loading".into()))?;
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            config,
            segments: RwLock::new(loaded.segments),
            published: Published::new(
                report.log_start_offset,
                report.log_end_offset,
                report.high_watermark,
            ),
        });
        let log = Log {
            shared,
            active,
            epochs: loaded.epochs,
            log_end_offset: report.log_end_offset,
            log_start_offset: report.log_start_offset,
            high_watermark: report.high_watermark,
            recovery_point: report.recovery_point,
            dir_dirty: false,
            buf: Vec::new(),
        };
        Ok((log, report))
    }

    /// A read handle.
    pub fn reader(&self) -> LogReader {
        LogReader {
            shared: self.shared.clone(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.shared.config
    }
    /// The offset the next append gets (LEO).
    pub fn log_end_offset(&self) -> u64 {
        self.log_end_offset
    }
    pub fn log_start_offset(&self) -> u64 {
        self.log_start_offset
    }
    pub fn high_watermark(&self) -> u64 {
        self.high_watermark
    }
    /// Every offset below this has been fsynced.
    pub fn recovery_point(&self) -> u64 {
        self.recovery_point
    }
    /// The latest leader epoch with records in this log.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.latest_epoch()
    }
    /// The leader epoch cache entries (epoch, start offset).
    pub fn epoch_entries(&self) -> &[EpochEntry] {
        self.epochs.entries()
    }
    /// KIP-101/279: the largest epoch <= `epoch` and the offset where it
    /// ends in this log; see [`EpochCache::end_offset_for`].
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<EpochEndOffset> {
        self.epochs.end_offset_for(epoch, self.log_end_offset)
    }

    /// Appends `records` as one batch at the log end, stamped with
    /// `leader_epoch` (what a leader does with a produce request), and
    /// compressed if `compression.type` names a codec.
    pub fn append(&mut self, records: &[Record], leader_epoch: i32) -> Result<AppendInfo> {
        let options = BatchOptions {
            codec: self.shared.config.compression_type.target(Codec::None),
            ..BatchOptions::PLAIN
        };
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let r = encode_batch_with(
            &mut buf,
            self.log_end_offset,
            leader_epoch,
            &options,
            records,
        )
        .map_err(Error::InvalidBatch)
        .and_then(|()| {
            // Encoded just now: the header parses, and the CRC need not be
            // computed a second time.
            let h = BatchHeader::parse(&buf).map_err(Error::InvalidBatch)?;
            self.append_checked(&buf, h)
        });
        self.buf = buf;
        r
    }

    /// Appends one batch encoded by a producer: checks it (CRC included),
    /// then stamps the base offset and the leader epoch, which lie outside
    /// the CRC, as a Kafka leader does. When `compression.type` names a
    /// codec other than the batch's, the records are re-encoded with it
    /// (producer fields, transactional and control flags and timestamp type
    /// kept), as Kafka's `LogValidator` does.
    pub fn append_batch(&mut self, batch: &mut [u8], leader_epoch: i32) -> Result<AppendInfo> {
        let mut h = check_batch(batch).map_err(Error::InvalidBatch)?;
        let source = h
            .codec()
            .ok_or(Error::InvalidBatch(BatchError::UnknownCodec {
                codec: h.compression(),
            }))?;
        let target = self.shared.config.compression_type.target(source);
        if target != source {
            let records: Vec<Record> = RecordBatch::new(batch)
                .and_then(|b| b.decode_records())
                .map_err(Error::InvalidBatch)?
                .into_iter()
                .map(|(_, r)| r)
                .collect();
            let options = BatchOptions {
                codec: target,
                ..BatchOptions::of(&h).expect("a known codec")
            };
            let mut buf = std::mem::take(&mut self.buf);
            buf.clear();
            let r = encode_batch_with(
                &mut buf,
                self.log_end_offset,
                leader_epoch,
                &options,
                &records,
            )
            .map_err(Error::InvalidBatch)
            .and_then(|()| {
                let h = BatchHeader::parse(&buf).map_err(Error::InvalidBatch)?;
                self.append_checked(&buf, h)
            });
            self.buf = buf;
            return r;
        }
        // Neither field is covered by the CRC, which stays valid.
        batch::set_base_offset(batch, self.log_end_offset).map_err(Error::InvalidBatch)?;
        batch::set_partition_leader_epoch(batch, leader_epoch).map_err(Error::InvalidBatch)?;
        h.base_offset = self.log_end_offset;
        h.partition_leader_epoch = leader_epoch;
        self.append_checked(batch, h)
    }

    /// Appends batches fetched from a leader, keeping their offsets and
    /// epochs: each must check and start at the log end offset.
    pub fn append_replicated(&mut self, batches: &[u8]) -> Result<Option<AppendInfo>> {
        let mut first: Option<AppendInfo> = None;
        for b in batch::batches(batches) {
            let b = b.map_err(Error::InvalidBatch)?;
            if b.header.base_offset != self.log_end_offset {
                return Err(Error::NonMonotonicAppend {
                    expected: self.log_end_offset,
                    got: b.header.base_offset,
                });
            }
            let info = self.append_checked(b.as_bytes(), b.header)?;
            first = Some(match first {
                None => info,
                Some(f) => AppendInfo {
                    last_offset: info.last_offset,
                    max_timestamp: f.max_timestamp.max(info.max_timestamp),
                    ..f
                },
            });
        }
        Ok(first)
    }

    fn append_checked(&mut self, bytes: &[u8], h: BatchHeader) -> Result<AppendInfo> {
        if bytes.len() > i32::MAX as usize - 1 {
            return Err(Error::InvalidBatch(BatchError::TooLarge {
                size: bytes.len() as u64,
            }));
        }
        let epoch = h.partition_leader_epoch;
        // -1 is "no epoch"; anything lower is not an epoch at all, and
        // recovery would refuse the log that holds it.
        if epoch < batch::NO_PARTITION_LEADER_EPOCH {
            return Err(Error::InvalidBatch(BatchError::NegativeEpoch { epoch }));
        }
        self.maybe_roll(bytes.len(), h.last_offset())?;
        // The epoch entry is persisted before the data: after a crash it may
        // point past the log end, and loading trims it. An epoch below the
        // latest is taken as Kafka takes it (an unfenced follower may hold
        // records of a later epoch than it then leads in): the cache drops
        // the entries it no longer strictly follows.
        self.epochs.assign(epoch, h.base_offset)?;
        let seg = self.active.clone();
        let position = seg.size();
        seg.append(bytes, &h, &self.shared.config)?;
        self.log_end_offset = h.next_offset();
        self.shared.published.publish_end(self.log_end_offset);
        Ok(AppendInfo {
            first_offset: h.base_offset,
            last_offset: h.last_offset(),
            max_timestamp: h.max_timestamp,
            segment_base_offset: seg.base_offset,
            position,
        })
    }

    fn maybe_roll(&mut self, batch_size: usize, last_offset: u64) -> Result<()> {
        let seg = &self.active;
        let size = seg.size();
        let must_roll = {
            let st = read(&seg.state);
            (size > 0 && size + batch_size as u64 > u64::from(self.shared.config.segment_bytes))
                || st.offset_index.is_full()
                || st.time_index.is_full()
                || !st.offset_index.can_append_offset(last_offset)
        };
        if must_roll {
            self.roll()?;
        }
        Ok(())
    }

    /// Starts a new segment at the log end offset (unless the active one
    /// is empty). The old segment's indexes are written out, and it is
    /// synced, log and indexes, before the new one exists: a crash can then
    /// never keep data of the new segment while losing the end of the old
    /// one (a gap, which recovery refuses to cut), and every finished
    /// segment's indexes are durable. Kafka flushes the old segment
    /// asynchronously after a roll.
    pub fn roll(&mut self) -> Result<()> {
        if self.active.size() == 0 && self.active.base_offset == self.log_end_offset {
            return Ok(());
        }
        self.active.on_become_inactive()?;
        self.active.sync(true)?;
        let seg = Arc::new(Segment::create(
            &self.shared.dir,
            self.log_end_offset,
            &self.shared.config,
        )?);
        write(&self.shared.segments).insert(seg.base_offset, seg.clone());
        self.active = seg;
        self.dir_dirty = true;
        Ok(())
    }

    /// Fsyncs every segment holding offsets in `[recovery point, up_to)`
    /// and then advances the recovery point to `min(up_to, log end)`.
    pub fn flush(&mut self, up_to: u64) -> Result<()> {
        let up_to = up_to.min(self.log_end_offset);
        if up_to <= self.recovery_point {
            return Ok(());
        }
        let segs: Vec<Arc<Segment>> = read(&self.shared.segments)
            .range(..up_to)
            .map(|(_, s)| s.clone())
            .collect();
        for seg in segs {
            // The active segment is re-read by recovery after a crash, so
            // its indexes need not be synced; a finished one is trusted, so
            // its indexes are synced (once, after its roll).
            let is_active = Arc::ptr_eq(&seg, &self.active);
            if is_active || seg.next_offset() > self.recovery_point || seg.is_dirty() {
                seg.sync(!is_active)?;
            }
        }
        if self.dir_dirty {
            checkpoint::sync_dir(&self.shared.dir)?;
            self.dir_dirty = false;
        }
        self.recovery_point = up_to;
        Ok(())
    }

    /// Sets the high watermark, which must not pass the log end offset; a
    /// value below the log start offset is raised to it.
    pub fn set_high_watermark(&mut self, hw: u64) -> Result<()> {
        if hw > self.log_end_offset {
            return Err(Error::HighWatermarkBeyondLeo {
                high_watermark: hw,
                log_end_offset: self.log_end_offset,
            });
        }
        self.high_watermark = hw.max(self.log_start_offset);
        self.shared
            .published
            .publish_high_watermark(self.high_watermark);
        Ok(())
    }

    /// Removes every record at or above `offset` (what a follower does
    /// after finding where its log diverges). Later segments are deleted,
    /// the segment holding `offset` is cut with its indexes, the leader
    /// epoch cache is trimmed, and the high watermark and recovery point are
    /// lowered if needed. An offset inside a batch removes the whole batch:
    /// the log end becomes that batch's base offset. Returns the log bytes
    /// removed. Below the log start offset, see
    /// [`truncate_fully_and_start_at`](Self::truncate_fully_and_start_at).
    pub fn truncate_to(&mut self, offset: u64) -> Result<u64> {
        if offset >= self.log_end_offset {
            return Ok(0);
        }
        if offset < self.log_start_offset {
            let before = self.size_in_bytes();
            self.truncate_fully_and_start_at(offset)?;
            return Ok(before);
        }
        let mut removed = Vec::new();
        let mut bytes = 0;
        let new_end;
        {
            // Exclusive: no reader is mid-read while data is cut. As Kafka's
            // `LocalLog.truncateTo`, later segments go first, newest first,
            // and only then is the segment holding `offset` cut: a crash at
            // any point leaves a log that ends at a segment boundary of the
            // old one, never a cut segment followed by stale later ones.
            let mut segs = write(&self.shared.segments);
            let seg = segs
                .range(..=offset)
                .next_back()
                .map(|(_, s)| s.clone())
                .ok_or(Error::OffsetOutOfRange {
                    offset,
                    log_start_offset: self.log_start_offset,
                    log_end_offset: self.log_end_offset,
                })?;
            let (position, next) = match seg.translate(offset, seg.size())? {
                Some((pos, h)) => (pos, h.base_offset),
                None => (seg.size(), seg.next_offset()),
            };
            new_end = next;
            self.shared.published.publish_end(new_end);
            if self.high_watermark > new_end {
                self.high_watermark = new_end;
                self.shared.published.publish_high_watermark(new_end);
            }
            let later: Vec<u64> = segs.range(offset + 1..).map(|(b, _)| *b).collect();
            if self.shared.config.mutation == Some(Mutation::HoleAfterTruncation) {
                // The old order: cut first, then delete the later segments.
                bytes += seg.truncate_to_position(position, new_end)?;
            }
            for &b in later.iter().rev() {
                if let Some(s) = segs.remove(&b) {
                    bytes += s.size();
                    s.delete_files()?;
                    removed.push(s);
                }
            }
            if !removed.is_empty() {
                checkpoint::sync_dir(&self.shared.dir)?;
            }
            if self.shared.config.mutation != Some(Mutation::HoleAfterTruncation) {
                bytes += seg.truncate_to_position(position, new_end)?;
            }
            self.active = seg;
        }
        if self.epochs.truncate_from_end(new_end) {
            self.epochs.write()?;
        }
        self.log_end_offset = new_end;
        self.recovery_point = self.recovery_point.min(new_end);
        Ok(bytes)
    }

    /// Deletes every segment and starts an empty log at `offset` (what a
    /// follower does when its fetch offset is out of the leader's range).
    pub fn truncate_fully_and_start_at(&mut self, offset: u64) -> Result<()> {
        let old: Vec<Arc<Segment>>;
        {
            let mut segs = write(&self.shared.segments);
            self.shared.published.publish_end(offset);
            old = std::mem::take(&mut *segs).into_values().collect();
            for s in &old {
                s.delete_files()?;
            }
            let seg = Arc::new(Segment::create(
                &self.shared.dir,
                offset,
                &self.shared.config,
            )?);
            segs.insert(offset, seg.clone());
            self.active = seg;
            self.log_start_offset = offset;
            self.high_watermark = offset;
            self.shared.published.publish_log_start(offset);
            self.shared.published.publish_high_watermark(offset);
            self.shared.published.publish_end(offset);
        }
        checkpoint::sync_dir(&self.shared.dir)?;
        self.dir_dirty = false;
        self.epochs = EpochCache::new(&self.shared.dir, Vec::new());
        self.epochs.write()?;
        self.log_end_offset = offset;
        self.recovery_point = offset;
        Ok(())
    }

    /// Bytes of record data in all segments.
    pub fn size_in_bytes(&self) -> u64 {
        read(&self.shared.segments).values().map(|s| s.size()).sum()
    }

    /// A summary of every segment, oldest first.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        self.reader().segments()
    }

    /// Flushes everything, indexes included, for a clean shutdown. The
    /// caller then writes the checkpoints and the clean-shutdown marker
    /// (see [`LogDir`](super::LogDir)).
    pub fn close(mut self) -> Result<()> {
        self.flush(self.log_end_offset)?;
        // As Kafka's `LogSegment.close`: the time index ends with the
        // segment's largest timestamp.
        self.active.on_become_inactive()?;
        let segs: Vec<Arc<Segment>> = read(&self.shared.segments).values().cloned().collect();
        for s in segs {
            s.sync(true)?;
        }
        checkpoint::sync_dir(&self.shared.dir)?;
        Ok(())
    }

    /// Reads batches; see [`LogReader::read`].
    pub fn read(&self, from: u64, max_bytes: usize, upper_bound: u64) -> Result<FetchData> {
        self.shared.read(from, max_bytes, upper_bound)
    }
}

impl LogReader {
    /// Reads whole batches starting with the one holding `from`, up to
    /// `max_bytes` (but always at least one batch, so a reader always makes
    /// progress), and only batches that end below `min(upper_bound, log
    /// end offset)`. Pass the high watermark as `upper_bound` for a
    /// consumer, `u64::MAX` for a follower. Every batch is checked (CRC
    /// included) before it is served.
    ///
    /// `from` must lie in `[log start offset, log end offset]`; at the log
    /// end (or the bound) the result is empty.
    pub fn read(&self, from: u64, max_bytes: usize, upper_bound: u64) -> Result<FetchData> {
        self.shared.read(from, max_bytes, upper_bound)
    }

    /// Where the batch holding `offset` lives: the segment by base offset,
    /// then the offset index, then a short scan.
    pub fn lookup(&self, offset: u64) -> Result<OffsetPosition> {
        self.shared.lookup(offset)
    }

    /// The first offset whose record has a timestamp >= `timestamp`, below
    /// the log end offset.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<TimestampAndOffset>> {
        self.shared.offset_for_timestamp(timestamp)
    }

    pub fn log_end_offset(&self) -> u64 {
        self.shared.published.log_end_offset()
    }
    pub fn high_watermark(&self) -> u64 {
        self.shared.published.high_watermark()
    }
    pub fn log_start_offset(&self) -> u64 {
        self.shared.published.log_start_offset()
    }

    /// Waits up to `timeout` for the log end offset to pass `offset`;
    /// returns whether it did.
    pub fn wait_for_end_offset(&self, offset: u64, timeout: Duration) -> bool {
        self.shared
            .published
            .wait_until(timeout, |p| p.log_end_offset() > offset)
    }

    /// Waits up to `timeout` for the high watermark to pass `offset`.
    pub fn wait_for_high_watermark(&self, offset: u64, timeout: Duration) -> bool {
        self.shared
            .published
            .wait_until(timeout, |p| p.high_watermark() > offset)
    }

    /// The offset index entries reads found naming the wrong batch, one
    /// line per segment (reads fell back to scanning the segment and were
    /// served correctly); empty when every index checked out.
    pub fn index_notes(&self) -> Vec<String> {
        read(&self.shared.segments)
            .values()
            .filter_map(|s| s.index_note())
            .collect()
    }

    /// A summary of every segment, oldest first.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        read(&self.shared.segments)
            .values()
            .map(|s| {
                let st = read(&s.state);
                SegmentInfo {
                    base_offset: s.base_offset,
                    next_offset: st.next_offset,
                    size: s.size(),
                    index_entries: st.offset_index.len(),
                    time_index_entries: st.time_index.len(),
                    max_timestamp: st.max_timestamp,
                    log_path: s.log_path.clone(),
                    index_note: s.index_note(),
                }
            })
            .collect()
    }
}

impl Shared {
    fn out_of_range(&self, offset: u64, lso: u64, leo: u64) -> Error {
        Error::OffsetOutOfRange {
            offset,
            log_start_offset: lso,
            log_end_offset: leo,
        }
    }

    fn read(&self, from: u64, max_bytes: usize, upper_bound: u64) -> Result<FetchData> {
        let segs = read(&self.segments);
        // Loaded under the list lock: truncation cannot run until we finish.
        let leo = self.published.log_end_offset();
        let lso = self.published.log_start_offset();
        let hw = self.published.high_watermark().min(leo);
        if from < lso || from > leo {
            return Err(self.out_of_range(from, lso, leo));
        }
        let bound = upper_bound.min(leo);
        let mut out = FetchData {
            records: Vec::new(),
            next_offset: from,
            high_watermark: hw,
            log_start_offset: lso,
            log_end_offset: leo,
        };
        if from >= bound {
            return Ok(out);
        }
        let floor = segs
            .range(..=from)
            .next_back()
            .map(|(b, _)| *b)
            .unwrap_or(0);
        let mut last_tried = None;
        for seg in segs.range(floor..).map(|(_, s)| s) {
            last_tried = Some(seg);
            let limit = seg.size();
            let Some((pos, first)) = seg.translate(from, limit)? else {
                continue;
            };
            // Segments follow one another (recovery refuses a gap), so the
            // batch found holds `from`; one that starts above it is damage.
            if first.base_offset > from {
                return Err(Error::BadOffsets {
                    path: seg.log_path.clone(),
                    position: pos,
                    reason: format!(
                        "no batch holds offset {from}: the next one starts at {}",
                        first.base_offset
                    ),
                });
            }
            // The batch holding `from` ends at or past the bound (a consumer
            // reading up to the HW in the middle of a batch): nothing yet.
            if first.last_offset() >= bound {
                return Ok(out);
            }
            let want = (first.size() as u64).max(max_bytes as u64).min(limit - pos);
            let mut buf = seg.read_at(pos, want as usize)?;
            let mut used = 0;
            while used + LOG_OVERHEAD <= buf.len() {
                let size = match batch::parse_length_prefix(&buf[used..]) {
                    Ok((_, size)) => size,
                    Err(e) => return Err(Error::corrupt(&seg.log_path, pos + used as u64, e)),
                };
                if used + size > buf.len() {
                    break;
                }
                let at = pos + used as u64;
                let h = check_batch(&buf[used..used + size])
                    .map_err(|e| Error::corrupt(&seg.log_path, at, e))?;
                if used > 0 && h.base_offset != out.next_offset {
                    return Err(Error::BadOffsets {
                        path: seg.log_path.clone(),
                        position: at,
                        reason: format!(
                            "base offset {} where {} was expected",
                            h.base_offset, out.next_offset
                        ),
                    });
                }
                if h.last_offset() >= bound || (used > 0 && used + size > max_bytes) {
                    break;
                }
                used += size;
                out.next_offset = h.next_offset();
            }
            buf.truncate(used);
            out.records = buf;
            if used == 0 {
                // The first batch was found, fits the bound and was read
                // whole: only damage can leave nothing served.
                return Err(Error::BadOffsets {
                    path: seg.log_path.clone(),
                    position: pos,
                    reason: format!("the batch holding offset {from} could not be read"),
                });
            }
            return Ok(out);
        }
        // `from` is below the log end, yet no segment holds it: a segment's
        // batches end before the offsets the log claims. Never return no
        // progress without saying why.
        let (path, position) =
            last_tried.map_or_else(|| (self.dir.clone(), 0), |s| (s.log_path.clone(), s.size()));
        Err(Error::BadOffsets {
            path,
            position,
            reason: format!("no batch holds offset {from}, below the log end {leo}"),
        })
    }

    fn lookup(&self, offset: u64) -> Result<OffsetPosition> {
        let segs = read(&self.segments);
        let leo = self.published.log_end_offset();
        let lso = self.published.log_start_offset();
        if offset < lso || offset >= leo {
            return Err(self.out_of_range(offset, lso, leo));
        }
        let floor = segs
            .range(..=offset)
            .next_back()
            .map(|(b, _)| *b)
            .unwrap_or(0);
        for seg in segs.range(floor..).map(|(_, s)| s) {
            if let Some((position, h)) = seg.translate(offset, seg.size())? {
                return Ok(OffsetPosition {
                    segment_base_offset: seg.base_offset,
                    position,
                    batch_base_offset: h.base_offset,
                    batch_last_offset: h.last_offset(),
                });
            }
        }
        Err(self.out_of_range(offset, lso, leo))
    }

    /// Kafka's `UnifiedLog.fetchOffsetByTimestamp`: the first segment whose
    /// largest timestamp reaches the target, then `LogSegment.findOffsetByTimestamp`
    /// there. The time index entry (t, o) places the scan (the batch holding
    /// o holds the first record with timestamp t); the records are filtered
    /// only by the log start offset, never by o, since records before o in
    /// o's batch may carry t too.
    fn offset_for_timestamp(&self, target: i64) -> Result<Option<TimestampAndOffset>> {
        let segs = read(&self.segments);
        let leo = self.published.log_end_offset();
        let lso = self.published.log_start_offset();
        let Some(seg) = segs
            .values()
            .find(|s| read(&s.state).max_timestamp >= target)
        else {
            return Ok(None);
        };
        let start = read(&seg.state).time_index.lookup(target).offset.max(lso);
        let limit = seg.size();
        // The batch holding the entry's offset, found with offsets checked.
        let Some((mut position, _)) = seg.translate(start, limit)? else {
            return Ok(None);
        };
        let mut expected = None;
        while position + LOG_OVERHEAD as u64 <= limit {
            let h = seg.header_at(position, limit)?;
            if let Some(e) = expected.filter(|&e| e != h.base_offset) {
                return Err(Error::BadOffsets {
                    path: seg.log_path.clone(),
                    position,
                    reason: format!("base offset {} where {e} was expected", h.base_offset),
                });
            }
            expected = Some(h.next_offset());
            if h.base_offset >= leo {
                break;
            }
            if h.max_timestamp >= target && h.last_offset() >= lso {
                let bytes = seg.read_at(position, h.size())?;
                let b = RecordBatch::new(&bytes)
                    .map_err(|e| Error::corrupt(&seg.log_path, position, e))?;
                for r in b.records() {
                    let (offset, rec) =
                        r.map_err(|e| Error::corrupt(&seg.log_path, position, e))?;
                    if rec.timestamp >= target && offset >= lso && offset < leo {
                        return Ok(Some(TimestampAndOffset {
                            timestamp: rec.timestamp,
                            offset,
                        }));
                    }
                }
            }
            position += h.size() as u64;
        }
        Ok(None)
    }
}
