//! Where a new follower truncates: the leader's side and the follower's side
//! of OffsetsForLeaderEpoch, one rule per [`TruncationMode`] (the model's
//! `truncation.rs`). Pure functions over epoch caches.

use std::path::Path;

use super::messages::DivergingEpoch;
use super::types::{LeaderEpoch, TruncationMode};
use crate::storage::checkpoint::EpochEntry;
use crate::storage::{EpochCache, EpochEndOffset};

/// The leader's answer to OffsetsForLeaderEpoch for `requested`: the
/// largest epoch <= `requested` it knows, and that epoch's end offset;
/// `None` is Kafka's UNDEFINED answer.
///
/// - `epoch` (KIP-101): the cache of the leader's records, as Kafka 0.11:
///   its LEO when `requested` is its latest epoch, else the start of the
///   first later epoch, else UNDEFINED (the follower falls back to its HW).
/// - `epoch-iterative`, `on-fetch` (KIP-279): the leader's own epoch counts
///   from the offset where it became leader, written or not (Kafka >= 2.1,
///   KAFKA-7415). A request beyond every epoch the leader knows (only a
///   stale leader, unfenced, can get one) is UNDEFINED, and the follower
///   truncates to its HW.
pub fn leader_end_offset(
    mode: TruncationMode,
    records: &[EpochEntry],
    log_end_offset: u64,
    leader_epoch: LeaderEpoch,
    epoch_start_offset: u64,
    requested: LeaderEpoch,
) -> Option<EpochEndOffset> {
    let mut cache = EpochCache::new(Path::new(""), records.to_vec());
    if mode == TruncationMode::Epoch {
        return cache.end_offset_for(requested, log_end_offset);
    }
    cache.assign_in_memory(leader_epoch, epoch_start_offset);
    if requested < 0 {
        return None;
    }
    cache.end_offset_for(requested, log_end_offset)
}

/// Truncation on fetch, the follower's side (Kafka's
/// `AbstractFetcherThread.truncateOnFetchResponse` through
/// `getOffsetTruncationState`; the model's `fetch_divergence`): the offset
/// to cut its log to, given its epoch cache and LEO and the leader's
/// diverging epoch. One cut per fetch; the next fetch carries the new latest
/// epoch, so several fetches do what KIP-279's exchange does.
pub fn truncation_on_fetch(
    follower: &[EpochEntry],
    log_end_offset: u64,
    diverging: DivergingEpoch,
) -> u64 {
    let own = EpochCache::new(Path::new(""), follower.to_vec());
    let offset = match own.end_offset_for(diverging.epoch, log_end_offset) {
        // Not tracking epochs that old: the leader's offset decides.
        None => diverging.end_offset,
        // It lacks the leader's epoch: the end of its largest epoch below.
        Some(f) if f.epoch != diverging.epoch => f.end_offset,
        Some(f) => f.end_offset.min(diverging.end_offset),
    };
    offset.min(log_end_offset)
}

/// What a follower does with an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncationStep {
    /// Truncate to this offset; truncation is complete.
    Done(u64),
    /// Truncate to this offset and ask again for the latest epoch left
    /// (KIP-279's intermediate step).
    Continue(u64),
}

/// The follower's side (Kafka's `getOffsetTruncationState`): given its own
/// epoch cache, LEO and HW and the leader's answer, where it truncates.
pub fn follower_truncation(
    mode: TruncationMode,
    follower: &[EpochEntry],
    log_end_offset: u64,
    high_watermark: u64,
    answer: Option<EpochEndOffset>,
) -> TruncationStep {
    let fallback = TruncationStep::Done(high_watermark.min(log_end_offset));
    let Some(answer) = answer else {
        // UNDEFINED: nothing better is known than the HW.
        return fallback;
    };
    if mode == TruncationMode::Epoch {
        return TruncationStep::Done(answer.end_offset.min(log_end_offset));
    }
    let own = EpochCache::new(Path::new(""), follower.to_vec());
    match own.end_offset_for(answer.epoch, log_end_offset) {
        None => fallback,
        // The follower lacks the leader's epoch: cut back to the end of its
        // largest epoch below it and ask about that one.
        Some(f) if f.epoch != answer.epoch => {
            TruncationStep::Continue(f.end_offset.min(log_end_offset))
        }
        Some(f) => TruncationStep::Done(f.end_offset.min(answer.end_offset).min(log_end_offset)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(v: &[(i32, u64)]) -> Vec<EpochEntry> {
        v.iter()
            .map(|&(epoch, start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
            .collect()
    }

    /// Runs the whole exchange over two logs given as record epochs.
    fn exchange(
        mode: TruncationMode,
        f: &[i32],
        fhw: u64,
        l: &[i32],
        lepoch: i32,
        lstart: u64,
    ) -> u64 {
        let cache = |log: &[i32]| {
            let mut c = EpochCache::new(Path::new(""), Vec::new());
            for (o, &e) in log.iter().enumerate() {
                c.assign_in_memory(e, o as u64);
            }
            c.entries().to_vec()
        };
        let mut leo = f.len() as u64;
        let lc = cache(l);
        loop {
            let fc: Vec<EpochEntry> = cache(&f[..leo as usize]);
            let Some(latest) = fc.last().map(|e| e.epoch) else {
                return leo;
            };
            let answer = leader_end_offset(mode, &lc, l.len() as u64, lepoch, lstart, latest);
            match follower_truncation(mode, &fc, leo, fhw.min(leo), answer) {
                TruncationStep::Done(o) => return o,
                TruncationStep::Continue(o) => leo = o,
            }
        }
    }

    #[test]
    fn kip101_answers_as_the_model() {
        let m = TruncationMode::Epoch;
        // The leader's latest epoch is the follower's: keep everything.
        assert_eq!(exchange(m, &[0, 0], 1, &[0, 0], 1, 2), 2);
        // Cut at the first later epoch.
        assert_eq!(exchange(m, &[0, 0], 0, &[0, 1], 2, 2), 1);
        // No later epoch and not the latest: fall back to the HW.
        assert_eq!(exchange(m, &[1, 1], 1, &[0], 2, 1), 1);
        assert_eq!(exchange(m, &[1, 1], 1, &[], 2, 0), 1);
        // KIP-101 keeps a divergent record inside an older epoch.
        assert_eq!(exchange(m, &[0, 1], 0, &[0, 0, 2], 3, 3), 2);
    }

    #[test]
    fn kip279_finds_the_first_divergence() {
        {
            let m = TruncationMode::EpochIterative;
            assert_eq!(exchange(m, &[0, 1], 0, &[0, 0, 2], 3, 3), 1);
            assert_eq!(exchange(m, &[0, 0], 0, &[0, 1], 2, 2), 1);
            assert_eq!(exchange(m, &[0, 2], 0, &[0, 1, 3], 3, 2), 1);
            // An empty leader: its own epoch starts at 0, so all goes.
            assert_eq!(exchange(m, &[0], 1, &[], 1, 0), 0);
            // A stale leader that never saw the follower's epoch: no answer,
            // so the follower's HW decides.
            assert_eq!(exchange(m, &[0, 1], 0, &[0, 0], 0, 0), 0);
            assert_eq!(exchange(m, &[0, 1], 1, &[0, 0], 0, 0), 1);
            assert_eq!(exchange(m, &[0], 0, &[0, 0], 1, 2), 1);
        }
    }

    #[test]
    fn answers_to_unusual_requests() {
        let l = entries(&[(1, 0), (3, 5)]);
        let m = TruncationMode::EpochIterative;
        assert_eq!(leader_end_offset(m, &l, 9, 4, 9, -1), None);
        assert_eq!(
            leader_end_offset(m, &l, 9, 4, 9, 7),
            None,
            "beyond every epoch: UNDEFINED, as in Kafka"
        );
        let a = leader_end_offset(m, &l, 9, 4, 9, 3).unwrap();
        assert_eq!((a.epoch, a.end_offset), (3, 9), "its own epoch starts at 9");
        assert_eq!(
            follower_truncation(m, &entries(&[(0, 0)]), 3, 2, None),
            TruncationStep::Done(2)
        );
    }
}
