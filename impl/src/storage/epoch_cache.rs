//! The leader epoch cache (`leader-epoch-checkpoint`): for each leader epoch,
//! the first offset written in it (Kafka's `LeaderEpochFileCache`).
//!
//! Followers use it to find where their log diverges from the leader's
//! (KIP-101, KIP-279): the leader answers [`EpochCache::end_offset_for`]
//! and the follower truncates to that offset. Entries are kept with epochs
//! and start offsets both strictly increasing; assigning an entry that
//! breaks that order drops the conflicting later entries, as Kafka does.

use std::path::{Path, PathBuf};

use super::checkpoint::{self, EpochEntry};
use super::error::Result;

/// The answer to an end-offset-for-epoch query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// The largest epoch <= the one asked that this log knows.
    pub epoch: i32,
    /// The offset after that epoch's last record: the start offset of the
    /// next larger epoch, or the log end offset for the latest epoch.
    pub end_offset: u64,
}

/// Epoch → start offset, persisted in the partition's
/// `leader-epoch-checkpoint` after every change.
#[derive(Debug, Clone)]
pub struct EpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

/// File name of the per-partition checkpoint.
pub const FILE_NAME: &str = "leader-epoch-checkpoint";

impl EpochCache {
    /// A cache backed by `dir/leader-epoch-checkpoint` holding `entries`
    /// (which are put in order first, as [`assign`](Self::assign) would).
    pub fn new(dir: &Path, entries: Vec<EpochEntry>) -> EpochCache {
        let mut c = EpochCache {
            path: dir.join(FILE_NAME),
            entries: Vec::new(),
        };
        for e in entries {
            c.assign_in_memory(e.epoch, e.start_offset);
        }
        c
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }
    /// The latest epoch with records, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`, in memory only;
    /// returns whether anything changed. Negative epochs (batches written
    /// without one) are ignored.
    pub fn assign_in_memory(&mut self, epoch: i32, start_offset: u64) -> bool {
        if epoch < 0 {
            return false;
        }
        if let Some(last) = self.entries.last() {
            if last.epoch == epoch && start_offset >= last.start_offset {
                return false;
            }
        }
        while let Some(last) = self.entries.last() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                self.entries.pop();
            } else {
                break;
            }
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// [`assign_in_memory`](Self::assign_in_memory), then writes the
    /// checkpoint if anything changed.
    pub fn assign(&mut self, epoch: i32, start_offset: u64) -> Result<bool> {
        let changed = self.assign_in_memory(epoch, start_offset);
        if changed {
            self.write()?;
        }
        Ok(changed)
    }

    /// KIP-101/279: the largest known epoch <= `requested` and its end
    /// offset. `None` means "undefined" (Kafka's UNDEFINED_EPOCH and
    /// UNDEFINED_EPOCH_OFFSET): the requested epoch is -1, or larger than
    /// every epoch here while not being the latest.
    ///
    /// When `requested` precedes every known epoch, the answer is
    /// `(requested, start of the first epoch)`, as in Kafka: that data is
    /// gone and the follower must start from there.
    pub fn end_offset_for(&self, requested: i32, log_end_offset: u64) -> Option<EpochEndOffset> {
        if requested < 0 {
            return None;
        }
        if self.latest_epoch() == Some(requested) {
            return Some(EpochEndOffset {
                epoch: requested,
                end_offset: log_end_offset,
            });
        }
        let higher = self.entries.partition_point(|e| e.epoch <= requested);
        let next = self.entries.get(higher)?;
        Some(match higher {
            0 => EpochEndOffset {
                epoch: requested,
                end_offset: next.start_offset,
            },
            _ => EpochEndOffset {
                epoch: self.entries[higher - 1].epoch,
                end_offset: next.start_offset,
            },
        })
    }

    /// Drops entries starting at or after `end_offset` (after truncation).
    pub fn truncate_from_end(&mut self, end_offset: u64) -> bool {
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        let changed = keep != self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// Drops entries wholly below `start_offset` (after retention): the last
    /// entry starting at or before it is kept, moved to start there.
    pub fn truncate_from_start(&mut self, start_offset: u64) -> bool {
        let n = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        if n == 0 {
            return false;
        }
        let epoch = self.entries[n - 1].epoch;
        let changed = n > 1 || self.entries[0].start_offset != start_offset;
        self.entries.drain(..n - 1);
        self.entries[0] = EpochEntry {
            epoch,
            start_offset,
        };
        changed
    }

    /// Writes the checkpoint file.
    pub fn write(&self) -> Result<()> {
        checkpoint::write_epochs(&self.path, &self.entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, u64)]) -> EpochCache {
        EpochCache::new(
            Path::new("/nonexistent"),
            entries
                .iter()
                .map(|&(epoch, start_offset)| EpochEntry {
                    epoch,
                    start_offset,
                })
                .collect(),
        )
    }

    #[test]
    fn end_offset_follows_kafka() {
        let c = cache(&[(1, 0), (3, 10), (5, 20)]);
        let q = |e| c.end_offset_for(e, 30).map(|r| (r.epoch, r.end_offset));
        assert_eq!(q(-1), None);
        assert_eq!(q(0), Some((0, 0)), "before the first epoch");
        assert_eq!(q(1), Some((1, 10)));
        assert_eq!(q(2), Some((1, 10)), "unknown epoch: the largest below");
        assert_eq!(q(3), Some((3, 20)));
        assert_eq!(q(4), Some((3, 20)));
        assert_eq!(q(5), Some((5, 30)), "latest epoch ends at the LEO");
        assert_eq!(q(6), None, "beyond every epoch");
        assert_eq!(cache(&[]).end_offset_for(0, 5), None);
    }

    #[test]
    fn assign_keeps_order() {
        let mut c = cache(&[(1, 0), (3, 10)]);
        assert!(!c.assign_in_memory(3, 12), "same epoch, later offset");
        assert!(c.assign_in_memory(4, 15));
        // An entry that conflicts drops the later ones.
        assert!(c.assign_in_memory(2, 5));
        let v: Vec<_> = c
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect();
        assert_eq!(v, vec![(1, 0), (2, 5)]);
        assert!(!c.assign_in_memory(-1, 50));
    }

    #[test]
    fn truncation() {
        let mut c = cache(&[(1, 0), (3, 10), (5, 20)]);
        assert!(c.truncate_from_end(20));
        assert_eq!(c.latest_epoch(), Some(3));
        assert!(!c.truncate_from_end(25));
        assert!(c.truncate_from_start(12));
        let v: Vec<_> = c
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect();
        assert_eq!(v, vec![(3, 12)]);
        assert!(!c.truncate_from_start(5));
    }
}
