//! The offset index (`.index`): a sparse map from offsets to file positions.
//!
//! Each entry is 8 bytes, big-endian: the offset relative to the segment's
//! base offset (u32) and the byte position in the `.log` file (u32). As in
//! Kafka's `LogSegment.append`, an entry is added for a batch once more than
//! `index.interval.bytes` were written since the batch of the last entry; its
//! key is the batch's **last** offset and its value the position where the
//! batch **starts**. A lookup takes the largest entry whose key is <= the
//! target (or the segment start) and scans the log forward from there.
//!
//! The index carries no checksum. Kafka preallocates the file and trims it on
//! roll; we never preallocate, so the file is always exactly its entries
//! (Kafka reads such a file as it reads a trimmed one), and a zero tail
//! Kafka left is not read as entries ([`preallocated_slots`]). We validate
//! every entry on load: a file that is not a whole number of entries, whose
//! keys or positions do not strictly increase, or that points past the log
//! is rejected and the caller rebuilds it from the log. An entry that names
//! the wrong batch is found by the read that uses it (the segment's
//! `translate`), which falls back to a scan from the segment start.

/// Bytes per entry.
pub const ENTRY_SIZE: usize = 8;

/// The number of all-zero entries (of `entry_size` bytes) that end an
/// index file: the preallocated, never written slots Kafka leaves.
///
/// Kafka preallocates a new index file to `segment.index.bytes` (the
/// `AbstractIndex` constructor, `createAndAssignMmap`) and cuts it to its
/// entries only when the segment rolls (`AbstractIndex.trimToValidSize`,
/// from `LogSegment.onBecomeInactiveSegment`); since Kafka 4,
/// `AbstractIndex.close` only unmaps, so a directory Kafka closed keeps its
/// active segment's `.index` and `.timeindex` at full size, zero after the
/// entries. Kafka itself counts every slot of an existing file as an entry
/// (`createMappedBuffer` positions it at the file's end) and never relies on
/// them: `LogSegment.sanityCheck` skips the index checks, and the segments
/// above the recovery point are rebuilt by `LogSegment.recover`. A zero
/// slot is never a real offset index entry: (0, 0) would name the first
/// batch at position 0, which never gets an entry (an entry is added only
/// after `index.interval.bytes` were written); so the zero tail is unused
/// room, and is not read as entries. (The time index has its own rule:
/// [`time_index::preallocated_slots`](super::time_index::preallocated_slots).)
pub fn preallocated_slots(bytes: &[u8], entry_size: usize) -> usize {
    if entry_size == 0 || !bytes.len().is_multiple_of(entry_size) {
        return 0;
    }
    bytes
        .chunks_exact(entry_size)
        .rev()
        .take_while(|e| e.iter().all(|&b| b == 0))
        .count()
}

/// One entry: offset relative to the segment base, and file position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub relative_offset: u32,
    pub position: u32,
}

/// An offset index held in memory (the file mirrors it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetIndex {
    base_offset: u64,
    max_entries: usize,
    entries: Vec<IndexEntry>,
}

impl OffsetIndex {
    /// An empty index for a segment at `base_offset` holding at most
    /// `max_entries` entries (`segment.index.bytes / 8`).
    pub fn new(base_offset: u64, max_entries: usize) -> OffsetIndex {
        OffsetIndex {
            base_offset,
            max_entries: max_entries.max(1),
            entries: Vec::new(),
        }
    }

    /// Parses and validates an index file's bytes for a segment whose log
    /// holds `log_size` bytes and ends before offset `next_offset`.
    ///
    /// Errors describe the first problem found; the caller rebuilds the
    /// index from the log instead of trusting it.
    pub fn parse(
        bytes: &[u8],
        base_offset: u64,
        max_entries: usize,
        log_size: u64,
        next_offset: Option<u64>,
    ) -> Result<OffsetIndex, String> {
        if !bytes.len().is_multiple_of(ENTRY_SIZE) {
            return Err(format!(
                "size {} is not a multiple of {ENTRY_SIZE}",
                bytes.len()
            ));
        }
        let mut idx = OffsetIndex::new(base_offset, max_entries.max(bytes.len() / ENTRY_SIZE));
        for (n, e) in bytes.chunks_exact(ENTRY_SIZE).enumerate() {
            let relative_offset = u32::from_be_bytes([e[0], e[1], e[2], e[3]]);
            let position = u32::from_be_bytes([e[4], e[5], e[6], e[7]]);
            if relative_offset > i32::MAX as u32 || position > i32::MAX as u32 {
                return Err(format!("entry {n}: negative offset or position"));
            }
            if let Some(last) = idx.entries.last() {
                if relative_offset <= last.relative_offset || position <= last.position {
                    return Err(format!(
                        "entry {n} ({relative_offset}, {position}) does not follow ({}, {})",
                        last.relative_offset, last.position
                    ));
                }
            }
            if u64::from(position) >= log_size {
                return Err(format!(
                    "entry {n} points at byte {position}, past the log's {log_size} bytes"
                ));
            }
            if let Some(next) = next_offset {
                if base_offset + u64::from(relative_offset) >= next {
                    return Err(format!(
                        "entry {n} names offset {}, past the segment's end {next}",
                        base_offset + u64::from(relative_offset)
                    ));
                }
            }
            idx.entries.push(IndexEntry {
                relative_offset,
                position,
            });
        }
        Ok(idx)
    }

    pub fn base_offset(&self) -> u64 {
        self.base_offset
    }
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// True when `offset` can be stored relative to the base offset.
    pub fn can_append_offset(&self, offset: u64) -> bool {
        offset >= self.base_offset && offset - self.base_offset <= i32::MAX as u64
    }

    /// The largest entry whose offset is <= `target`, as (offset, position);
    /// `(base_offset, 0)` when there is none.
    pub fn lookup(&self, target: u64) -> (u64, u32) {
        if target < self.base_offset {
            return (self.base_offset, 0);
        }
        let rel = target - self.base_offset;
        let n = self
            .entries
            .partition_point(|e| u64::from(e.relative_offset) <= rel);
        match n {
            0 => (self.base_offset, 0),
            _ => {
                let e = self.entries[n - 1];
                (self.base_offset + u64::from(e.relative_offset), e.position)
            }
        }
    }

    /// The largest entry whose offset is <= `target`, with its slot number;
    /// `None` when there is none (the scan then starts at the segment).
    pub fn lookup_entry(&self, target: u64) -> Option<(usize, IndexEntry)> {
        let rel = target.checked_sub(self.base_offset)?;
        let n = self
            .entries
            .partition_point(|e| u64::from(e.relative_offset) <= rel);
        n.checked_sub(1).map(|slot| (slot, self.entries[slot]))
    }

    /// Adds an entry; returns false (adding nothing) when the index is full,
    /// the offset does not fit, or the entry does not follow the last one.
    pub fn append(&mut self, offset: u64, position: u32) -> bool {
        if self.is_full() || !self.can_append_offset(offset) || position > i32::MAX as u32 {
            return false;
        }
        let relative_offset = (offset - self.base_offset) as u32;
        if let Some(last) = self.entries.last() {
            if relative_offset <= last.relative_offset || position <= last.position {
                return false;
            }
        }
        self.entries.push(IndexEntry {
            relative_offset,
            position,
        });
        true
    }

    /// Removes every entry whose offset is >= `offset`.
    pub fn truncate_to(&mut self, offset: u64) {
        let rel = offset.saturating_sub(self.base_offset);
        let keep = self
            .entries
            .partition_point(|e| u64::from(e.relative_offset) < rel);
        self.entries.truncate(keep);
    }

    /// Encodes entries `from..` as file bytes.
    pub fn encode_from(&self, from: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len().saturating_sub(from) * ENTRY_SIZE);
        for e in self.entries.iter().skip(from) {
            out.extend_from_slice(&e.relative_offset.to_be_bytes());
            out.extend_from_slice(&e.position.to_be_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_takes_largest_lower_bound() {
        let mut i = OffsetIndex::new(100, 10);
        assert_eq!(i.lookup(150), (100, 0));
        assert!(i.append(110, 500));
        assert!(i.append(120, 900));
        assert_eq!(i.lookup(99), (100, 0));
        assert_eq!(i.lookup(109), (100, 0));
        assert_eq!(i.lookup(110), (110, 500));
        assert_eq!(i.lookup(119), (110, 500));
        assert_eq!(i.lookup(1000), (120, 900));
        assert!(!i.append(120, 1000), "keys must increase");
        assert!(!i.append(130, 900), "positions must increase");
    }

    #[test]
    fn parse_round_trip_and_validation() {
        let mut i = OffsetIndex::new(0, 10);
        i.append(5, 100);
        i.append(9, 300);
        let b = i.encode_from(0);
        assert_eq!(b, [0, 0, 0, 5, 0, 0, 0, 100, 0, 0, 0, 9, 0, 0, 1, 44]);
        assert_eq!(OffsetIndex::parse(&b, 0, 10, 400, Some(12)).unwrap(), i);
        assert!(OffsetIndex::parse(&b[..7], 0, 10, 400, None).is_err());
        assert!(
            OffsetIndex::parse(&b, 0, 10, 300, None).is_err(),
            "past log"
        );
        assert!(
            OffsetIndex::parse(&b, 0, 10, 400, Some(9)).is_err(),
            "past end"
        );
        let mut swapped = b[8..].to_vec();
        swapped.extend_from_slice(&b[..8]);
        assert!(OffsetIndex::parse(&swapped, 0, 10, 400, None).is_err());
        // Zero-filled (preallocated, crashed) tails are out of order.
        let mut zeros = b.clone();
        zeros.extend_from_slice(&[0; 16]);
        assert!(OffsetIndex::parse(&zeros, 0, 10, 400, None).is_err());
    }

    #[test]
    fn truncate_and_full() {
        let mut i = OffsetIndex::new(0, 3);
        for (o, p) in [(1, 10), (2, 20), (3, 30)] {
            assert!(i.append(o, p));
        }
        assert!(i.is_full());
        assert!(!i.append(4, 40));
        i.truncate_to(2);
        assert_eq!(i.len(), 1);
        i.truncate_to(0);
        assert!(i.is_empty());
        assert!(!OffsetIndex::new(10, 5).can_append_offset(10 + (1 << 31)));
    }
}
