//! Retention: deleting whole segments from the start of the log (Kafka's
//! `UnifiedLog.deleteOldSegments`).
//!
//! Three rules, applied to the oldest segments and stopping at the first
//! segment a rule does not select:
//! - below the log start offset: a segment whose every offset is below it
//!   (after [`Log::delete_records_before`], Kafka's DeleteRecords);
//! - by time (`retention.ms`): a segment whose newest record is older than
//!   the retention time;
//! - by size (`retention.bytes`): oldest segments while the log stays at
//!   least `retention.bytes` large without them.
//!
//! Only segments wholly below the high watermark are ever deleted, and
//! never the active segment. The log start offset then moves to the first
//! remaining segment.

use std::time::UNIX_EPOCH;

use super::batch::NO_TIMESTAMP;
use super::checkpoint;
use super::error::{Error, Result};
use super::log::{Log, SegmentInfo};
use crate::sync::write;

/// What a retention pass deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// Base offsets of the deleted segments.
    pub deleted_segments: Vec<u64>,
    pub bytes_deleted: u64,
    /// The log start offset afterwards.
    pub log_start_offset: u64,
}

/// Why a segment is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    BelowLogStart,
    Time,
    Size,
}

/// How many of the oldest segments to delete, and why. `segments` is the
/// whole log, oldest first (the last is the active segment); `max_ts_ms`
/// gives each segment's newest timestamp (falling back to its file's
/// modification time when it has none).
pub fn select(
    segments: &[SegmentInfo],
    max_ts_ms: &[i64],
    log_start_offset: u64,
    high_watermark: u64,
    retention_ms: Option<i64>,
    retention_bytes: Option<u64>,
    now_ms: i64,
) -> (usize, Option<Reason>) {
    // A segment may go only if the next one starts at or below the HW.
    let deletable = |i: usize| {
        segments
            .get(i + 1)
            .is_some_and(|next| next.base_offset <= high_watermark)
    };
    let mut n = 0;
    let mut reason = None;
    while deletable(n) && segments[n + 1].base_offset <= log_start_offset {
        n += 1;
        reason = Some(Reason::BelowLogStart);
    }
    if let Some(ms) = retention_ms {
        while deletable(n)
            && now_ms.saturating_sub(max_ts_ms.get(n).copied().unwrap_or(i64::MAX)) > ms
        {
            n += 1;
            reason = Some(Reason::Time);
        }
    }
    if let Some(limit) = retention_bytes {
        let total: u64 = segments[n..].iter().map(|s| s.size).sum();
        let mut excess = total.saturating_sub(limit);
        while deletable(n) && segments[n].size <= excess {
            excess -= segments[n].size;
            n += 1;
            reason = Some(Reason::Size);
        }
    }
    (n, reason)
}

impl Log {
    /// Raises the log start offset to `offset` (at most the high
    /// watermark) and deletes the segments wholly below it.
    pub fn delete_records_before(&mut self, offset: u64) -> Result<RetentionReport> {
        if offset > self.high_watermark {
            return Err(Error::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.high_watermark,
            });
        }
        if offset > self.log_start_offset {
            self.log_start_offset = offset;
            self.shared.published.publish_log_start(offset);
            if self.epochs.truncate_from_start(offset) {
                self.epochs.write()?;
            }
        }
        self.apply_retention_at(None)
    }

    /// Applies `retention.ms` and `retention.bytes` as of `now_ms`
    /// (milliseconds since the Unix epoch), and deletes segments below the
    /// log start offset.
    pub fn apply_retention(&mut self, now_ms: i64) -> Result<RetentionReport> {
        self.apply_retention_at(Some(now_ms))
    }

    fn apply_retention_at(&mut self, now_ms: Option<i64>) -> Result<RetentionReport> {
        let infos = self.segments();
        let max_ts: Vec<i64> = infos
            .iter()
            .map(|s| {
                if s.max_timestamp != NO_TIMESTAMP {
                    return s.max_timestamp;
                }
                std::fs::metadata(&s.log_path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map_or(i64::MAX, |d| d.as_millis() as i64)
            })
            .collect();
        let config = self.shared.config.clone();
        let (n, _) = select(
            &infos,
            &max_ts,
            self.log_start_offset,
            self.high_watermark,
            now_ms.and(config.retention_ms),
            now_ms.and(config.retention_bytes),
            now_ms.unwrap_or(0),
        );
        let mut report = RetentionReport {
            log_start_offset: self.log_start_offset,
            ..RetentionReport::default()
        };
        if n == 0 {
            return Ok(report);
        }
        let removed: Vec<_> = {
            let mut segs = write(&self.shared.segments);
            let bases: Vec<u64> = segs.keys().take(n).copied().collect();
            let removed = bases.iter().filter_map(|b| segs.remove(b)).collect();
            if let Some(first) = segs.keys().next() {
                self.log_start_offset = self.log_start_offset.max(*first);
            }
            self.shared
                .published
                .publish_log_start(self.log_start_offset);
            removed
        };
        for s in &removed {
            report.deleted_segments.push(s.base_offset);
            report.bytes_deleted += s.size();
            s.delete_files()?;
        }
        checkpoint::sync_dir(&self.shared.dir)?;
        if self.high_watermark < self.log_start_offset {
            self.high_watermark = self.log_start_offset;
            self.shared
                .published
                .publish_high_watermark(self.high_watermark);
        }
        self.recovery_point = self.recovery_point.max(self.log_start_offset);
        if self.epochs.truncate_from_start(self.log_start_offset) {
            self.epochs.write()?;
        }
        report.log_start_offset = self.log_start_offset;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn segs(spec: &[(u64, u64)]) -> Vec<SegmentInfo> {
        spec.iter()
            .map(|&(base, size)| SegmentInfo {
                base_offset: base,
                next_offset: 0,
                size,
                index_entries: 0,
                time_index_entries: 0,
                max_timestamp: 0,
                log_path: PathBuf::new(),
                index_note: None,
            })
            .collect()
    }

    #[test]
    fn selection() {
        let s = segs(&[(0, 100), (10, 100), (20, 100), (30, 50)]);
        let ts = [1000, 2000, 3000, 4000];
        // Nothing without a reason.
        assert_eq!(select(&s, &ts, 0, 30, None, None, 0).0, 0);
        // Time: segments older than 1500 ms at now = 3600.
        assert_eq!(
            select(&s, &ts, 0, 30, Some(1500), None, 3600),
            (2, Some(Reason::Time))
        );
        // Never past the HW: with HW 15 only the first can go.
        assert_eq!(select(&s, &ts, 0, 15, Some(0), None, 10_000).0, 1);
        // Never the active segment.
        assert_eq!(select(&s, &ts, 0, 1000, Some(0), None, 10_000).0, 3);
        // Size: 350 bytes, keep at least 200 -> delete the first one (100),
        // not the second (would leave 150).
        assert_eq!(
            select(&s, &ts, 0, 30, None, Some(200), 0),
            (1, Some(Reason::Size))
        );
        assert_eq!(select(&s, &ts, 0, 30, None, Some(150), 0).0, 2);
        // Below the log start offset.
        assert_eq!(
            select(&s, &ts, 20, 30, None, None, 0),
            (2, Some(Reason::BelowLogStart))
        );
        assert_eq!(select(&s, &ts, 19, 30, None, None, 0).0, 1);
    }
}
