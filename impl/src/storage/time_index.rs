//! The time index (`.timeindex`): maps timestamps to offsets.
//!
//! Each entry is 12 bytes, big-endian: a timestamp (i64) and an offset
//! relative to the segment base (u32). Entry `(t, o)` says that the largest
//! timestamp seen up to offset `o` is `t`: every record with a timestamp
//! greater than `t` comes after `o`. Entries are added next to offset-index
//! entries, only when the timestamp grows (Kafka's `TimeIndex.maybeAppend`),
//! and once more for the segment's largest timestamp when it is rolled.
//! Like the offset index it has no checksum and is rebuilt when invalid.

use super::batch::NO_TIMESTAMP;

/// Bytes per entry.
pub const ENTRY_SIZE: usize = 12;

/// The preallocated zero slots that end a time index file (see
/// [`offset_index::preallocated_slots`](super::offset_index::preallocated_slots)
/// for why Kafka leaves them). A zero entry after a real one cannot be an
/// entry (timestamps strictly increase); a file holding one zero entry and
/// nothing else is the real entry (timestamp 0, base offset) of a segment
/// whose records carry timestamp 0, and is kept. Kafka's
/// `TimeIndex.sanityCheck` refuses a zero tail after real entries (the last
/// timestamp is below the first).
pub fn preallocated_slots(bytes: &[u8]) -> usize {
    let n = super::offset_index::preallocated_slots(bytes, ENTRY_SIZE);
    if n == 1 && bytes.len() == ENTRY_SIZE {
        0
    } else {
        n
    }
}

/// One entry: timestamp and absolute offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: u64,
}

/// A time index held in memory (the file mirrors it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeIndex {
    base_offset: u64,
    max_entries: usize,
    entries: Vec<TimestampOffset>,
}

impl TimeIndex {
    pub fn new(base_offset: u64, max_entries: usize) -> TimeIndex {
        TimeIndex {
            base_offset,
            max_entries: max_entries.max(2),
            entries: Vec::new(),
        }
    }

    /// Parses and validates a time index file's bytes; see
    /// [`OffsetIndex::parse`](super::offset_index::OffsetIndex::parse).
    pub fn parse(
        bytes: &[u8],
        base_offset: u64,
        max_entries: usize,
        next_offset: Option<u64>,
    ) -> Result<TimeIndex, String> {
        if !bytes.len().is_multiple_of(ENTRY_SIZE) {
            return Err(format!(
                "size {} is not a multiple of {ENTRY_SIZE}",
                bytes.len()
            ));
        }
        let mut idx = TimeIndex::new(base_offset, max_entries.max(bytes.len() / ENTRY_SIZE + 1));
        for (n, e) in bytes.chunks_exact(ENTRY_SIZE).enumerate() {
            let mut t = [0u8; 8];
            t.copy_from_slice(&e[..8]);
            let timestamp = i64::from_be_bytes(t);
            let rel = u32::from_be_bytes([e[8], e[9], e[10], e[11]]);
            if rel > i32::MAX as u32 {
                return Err(format!("entry {n}: negative relative offset"));
            }
            let offset = base_offset + u64::from(rel);
            if let Some(last) = idx.entries.last() {
                if timestamp <= last.timestamp || offset < last.offset {
                    return Err(format!(
                        "entry {n} ({timestamp}, {offset}) does not follow ({}, {})",
                        last.timestamp, last.offset
                    ));
                }
            }
            if let Some(next) = next_offset {
                if offset >= next {
                    return Err(format!(
                        "entry {n} names offset {offset}, past the segment's end {next}"
                    ));
                }
            }
            idx.entries.push(TimestampOffset { timestamp, offset });
        }
        Ok(idx)
    }

    pub fn entries(&self) -> &[TimestampOffset] {
        &self.entries
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Full one entry early, keeping a slot for the entry added on roll.
    pub fn is_full(&self) -> bool {
        self.entries.len() + 1 >= self.max_entries
    }

    /// The last entry, or `(NO_TIMESTAMP, base_offset)`.
    pub fn last_entry(&self) -> TimestampOffset {
        self.entries.last().copied().unwrap_or(TimestampOffset {
            timestamp: NO_TIMESTAMP,
            offset: self.base_offset,
        })
    }

    /// Adds `(timestamp, offset)` if the timestamp is larger than the last
    /// one and the offset not smaller. `force` ignores the full check (used
    /// on roll, which the reserved slot is for).
    pub fn maybe_append(&mut self, timestamp: i64, offset: u64, force: bool) -> bool {
        if (!force && self.is_full()) || self.entries.len() >= self.max_entries {
            return false;
        }
        if offset < self.base_offset || offset - self.base_offset > i32::MAX as u64 {
            return false;
        }
        let last = self.last_entry();
        if timestamp > last.timestamp && (self.entries.is_empty() || offset >= last.offset) {
            self.entries.push(TimestampOffset { timestamp, offset });
            return true;
        }
        false
    }

    /// The entry with the largest timestamp <= `target`, or
    /// `(NO_TIMESTAMP, base_offset)`.
    pub fn lookup(&self, target: i64) -> TimestampOffset {
        let n = self.entries.partition_point(|e| e.timestamp <= target);
        match n {
            0 => TimestampOffset {
                timestamp: NO_TIMESTAMP,
                offset: self.base_offset,
            },
            _ => self.entries[n - 1],
        }
    }

    /// Removes every entry whose offset is >= `offset`.
    pub fn truncate_to(&mut self, offset: u64) {
        let keep = self.entries.partition_point(|e| e.offset < offset);
        self.entries.truncate(keep);
    }

    /// Encodes entries `from..` as file bytes.
    pub fn encode_from(&self, from: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for e in self.entries.iter().skip(from) {
            out.extend_from_slice(&e.timestamp.to_be_bytes());
            out.extend_from_slice(&((e.offset - self.base_offset) as u32).to_be_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_only_when_timestamp_grows() {
        let mut t = TimeIndex::new(10, 10);
        assert!(t.maybe_append(100, 12, false));
        assert!(!t.maybe_append(100, 15, false));
        assert!(!t.maybe_append(90, 15, false));
        assert!(t.maybe_append(200, 15, false));
        assert_eq!(t.lookup(50).timestamp, NO_TIMESTAMP);
        assert_eq!(t.lookup(50).offset, 10);
        assert_eq!(t.lookup(150).offset, 12);
        assert_eq!(t.lookup(500).offset, 15);
        t.truncate_to(15);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn parse_round_trip_and_validation() {
        let mut t = TimeIndex::new(0, 10);
        t.maybe_append(5, 1, false);
        t.maybe_append(9, 4, false);
        let b = t.encode_from(0);
        assert_eq!(b.len(), 24);
        assert_eq!(
            TimeIndex::parse(&b, 0, 10, Some(5)).unwrap().entries(),
            t.entries()
        );
        assert!(TimeIndex::parse(&b[..13], 0, 10, None).is_err());
        assert!(TimeIndex::parse(&b, 0, 10, Some(4)).is_err());
        let mut zeros = b.clone();
        zeros.extend_from_slice(&[0; 12]);
        assert!(TimeIndex::parse(&zeros, 0, 10, None).is_err());
    }
}
