//! Where a follower truncates when it follows a new leader epoch, one rule per
//! Kafka version. Each returns the offset to truncate to; the follower never
//! truncates above its own LEO. Today's rule, truncation on fetch
//! ([`fetch_divergence`]), learns it from the fetch response instead.
//!
//! The epoch-based rules run OffsetsForLeaderEpoch as Kafka does, on leader
//! epoch caches: (epoch, start offset) pairs kept strictly rising in both, as
//! Kafka's `LeaderEpochFileCache` keeps them. While each log's epochs rise
//! along it, KIP-279's exchange ends at the first offset where the two logs
//! differ; without KIP-320's fencing a log's epochs can go down, and then the
//! caches, not the logs, decide.

use crate::config::Truncation;
use crate::rules::Rule;
use crate::state::{Compact, LogStore, Replica, Shape};

/// The offset `follower` truncates to on becoming a follower of `leader`
/// (None under `hw`, which never consults the leader). Under `on-fetch` it
/// keeps its log: the fetches find the divergence.
pub fn truncation_offset<S: Shape>(
    mode: Truncation,
    follower: &Replica<S>,
    leader: Option<&Replica<S>>,
) -> S::Offset {
    let offset = match (mode, leader) {
        (Truncation::OnFetch, _) => follower.leo(),
        (Truncation::Hw, _) | (_, None) => follower.hw,
        (_, Some(leader)) => exchange(mode, follower, leader),
    };
    offset.min(follower.leo())
}

/// What the leader finds when it checks a fetch's last fetched epoch
/// against its log (Kafka's `Partition.readRecords`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchCheck<S: Shape = Compact> {
    /// The follower's log agrees up to its fetch offset (or it has no epoch
    /// to send): records are read from the fetch offset.
    Agrees,
    /// The leader answers with a diverging epoch, (epoch, end offset) from
    /// its cache, and no records: the follower truncates to `truncate_to`.
    Diverging {
        epoch: S::Epoch,
        end_offset: S::Offset,
        truncate_to: S::Offset,
    },
    /// The leader knows no end for that epoch: OffsetOutOfRange (only a
    /// stale leader, unfenced, can be asked).
    Undefined,
}

/// Truncation on fetch (Kafka >= 2.7, `isTruncationOnFetchSupported`): the
/// follower's fetch carries its LEO and the latest epoch in its log
/// (`lastFetchedEpoch`); the leader looks that epoch up in its cache, which
/// holds its own epoch from where it began leading (`Partition.makeLeader`,
/// `UnifiedLog.maybeAssignEpochStartOffset`), and answers with the diverging
/// epoch when it ended below the fetch offset or is an older epoch
/// (`Partition.readRecords`). The follower then truncates as after an
/// OffsetsForLeaderEpoch answer (`AbstractFetcherThread.truncateOnFetchResponse`,
/// `getOffsetTruncationState`) and fetches again, with its new latest epoch:
/// the iteration of KIP-279, one fetch per round.
pub fn fetch_divergence<S: Shape>(follower: &Replica<S>, leader: &Replica<S>) -> FetchCheck<S> {
    fetch_divergence_with(None, follower, leader)
}

/// [`fetch_divergence`] with one of its rules knocked out (`rules.rs`):
/// [`Rule::LeaderCachesOwnEpoch`] or [`Rule::DivergenceTruncatesToOwnEnd`].
pub fn fetch_divergence_with<S: Shape>(
    knock_out: Option<Rule>,
    follower: &Replica<S>,
    leader: &Replica<S>,
) -> FetchCheck<S> {
    let leo = follower.leo();
    let Some(last_fetched) = follower.log.last().map(|e| e.epoch) else {
        return FetchCheck::Agrees;
    };
    let own_epoch = knock_out != Some(Rule::LeaderCachesOwnEpoch);
    let Some((epoch, end_offset)) =
        leader_answer(Truncation::OnFetch, leader, last_fetched, own_epoch)
    else {
        return FetchCheck::Undefined;
    };
    if epoch == last_fetched && end_offset >= leo {
        return FetchCheck::Agrees;
    }
    let own = cache_of::<S>(&follower.log, leo);
    let truncate_to = match end_offset_for(&own, epoch, leo) {
        _ if knock_out == Some(Rule::DivergenceTruncatesToOwnEnd) => end_offset,
        // Not tracking epochs that old: the leader's offset decides.
        None => end_offset,
        // It lacks the leader's epoch: the end of its largest epoch below.
        Some((own_epoch, own_end)) if own_epoch != epoch => own_end,
        Some((_, own_end)) => own_end.min(end_offset),
    };
    FetchCheck::Diverging {
        epoch,
        end_offset,
        truncate_to: truncate_to.min(leo),
    }
}

/// A leader epoch cache: (epoch, start offset), both strictly rising.
pub type EpochCache<S = Compact> = Vec<(<S as Shape>::Epoch, <S as Shape>::Offset)>;

/// Kafka's `LeaderEpochFileCache.assign`: nothing for the latest epoch at or
/// after its start; otherwise drop every trailing entry the new one does not
/// strictly follow, then add it.
pub fn assign<E: Ord + Copy, O: Ord + Copy>(cache: &mut Vec<(E, O)>, epoch: E, start: O) {
    if cache.last().is_some_and(|&(e, s)| e == epoch && start >= s) {
        return;
    }
    while cache.last().is_some_and(|&(e, s)| e >= epoch || s >= start) {
        cache.pop();
    }
    cache.push((epoch, start));
}

/// The cache of the first `upto` entries of `log`, as appends build it.
pub fn cache_of<S: Shape>(log: &S::Log, upto: S::Offset) -> EpochCache<S> {
    let mut cache = Vec::new();
    // The entries past each run's first change nothing (`assign`).
    for (epoch, start) in log.epoch_starts().take_while(|&(_, start)| start < upto) {
        assign(&mut cache, epoch, start);
    }
    cache
}

/// Kafka's `endOffsetFor`: the largest epoch at or below `requested` and
/// where it ends (the latest ends at `leo`); None (UNDEFINED) when
/// `requested` is above every epoch but is not the latest.
pub fn end_offset_for<E: Ord + Copy, O: Ord + Copy>(
    cache: &[(E, O)],
    requested: E,
    leo: O,
) -> Option<(E, O)> {
    if cache.last().is_some_and(|&(e, _)| e == requested) {
        return Some((requested, leo));
    }
    let higher = cache.iter().position(|&(e, _)| e > requested)?;
    Some(match higher {
        // Below every epoch: that data is gone, start where the first begins.
        0 => (requested, cache[0].1),
        _ => (cache[higher - 1].0, cache[higher].1),
    })
}

/// The leader's answer to OffsetsForLeaderEpoch for `requested`. KIP-101's
/// leader answers from its records' epochs; from KIP-279 on the leader has
/// also recorded its own epoch where it began leading (`own_epoch` false:
/// that rule knocked out).
fn leader_answer<S: Shape>(
    mode: Truncation,
    leader: &Replica<S>,
    requested: S::Epoch,
    own_epoch: bool,
) -> Option<(S::Epoch, S::Offset)> {
    let mut cache = cache_of::<S>(&leader.log, leader.leo());
    if mode != Truncation::Epoch && own_epoch {
        if let Some(epoch) = leader.epoch {
            assign(&mut cache, epoch, leader.leader_epoch_start(epoch));
        }
    }
    end_offset_for(&cache, requested, leader.leo())
}

/// The follower's side (Kafka's `getOffsetTruncationState`): it asks about
/// its latest epoch; KIP-101 truncates to the answer at once; KIP-279 cuts
/// back and asks again while the answer names an epoch it lacks. With no
/// answer (UNDEFINED) it falls back to its HW.
fn exchange<S: Shape>(mode: Truncation, follower: &Replica<S>, leader: &Replica<S>) -> S::Offset {
    let mut leo = follower.leo();
    loop {
        let own = cache_of::<S>(&follower.log, leo);
        let Some(&(latest, _)) = own.last() else {
            return leo;
        };
        let fallback = follower.hw.min(leo);
        let Some((epoch, end)) = leader_answer(mode, leader, latest, true) else {
            return fallback;
        };
        if mode == Truncation::Epoch {
            return end.min(leo);
        }
        match end_offset_for(&own, epoch, leo) {
            None => return fallback,
            // It lacks the leader's epoch: cut back to the end of its largest
            // epoch below it, and ask about that one.
            Some((own_epoch, own_end)) if own_epoch != epoch => leo = own_end.min(leo),
            Some((_, own_end)) => return own_end.min(end).min(leo),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Entry, Epoch, Log, Offset};

    fn log(entries: &[(u8, u8)]) -> Log {
        let mut l = Log::default();
        for &(id, epoch) in entries {
            l.append(Entry { id, epoch });
        }
        l
    }

    fn follower(entries: &[(u8, u8)], hw: Offset) -> Replica {
        Replica {
            log: log(entries),
            hw,
            ..Replica::default()
        }
    }

    /// A leader leading `epoch` with this log.
    fn leader(entries: &[(u8, u8)], epoch: Epoch) -> Replica {
        Replica {
            log: log(entries),
            epoch: Some(epoch),
            ..Replica::default()
        }
    }

    fn at(mode: Truncation, f: &Replica, l: &Replica) -> Offset {
        truncation_offset(mode, f, Some(l))
    }

    #[test]
    fn hw_mode_truncates_to_local_hw_whatever_the_leader_has() {
        let f = follower(&[(0, 0), (1, 0)], 1);
        assert_eq!(at(Truncation::Hw, &f, &leader(&[(0, 0), (1, 0)], 0)), 1);
    }

    #[test]
    fn kip101_keeps_a_suffix_of_the_leaders_latest_epoch() {
        let f = follower(&[(0, 0), (1, 0)], 1);
        assert_eq!(at(Truncation::Epoch, &f, &leader(&[(0, 0), (1, 0)], 0)), 2);
    }

    #[test]
    fn kip101_cuts_at_the_first_later_epoch() {
        let f = follower(&[(0, 0), (1, 0)], 0);
        assert_eq!(at(Truncation::Epoch, &f, &leader(&[(0, 0), (2, 1)], 1)), 1);
    }

    #[test]
    fn kip101_falls_back_to_hw_without_an_answer() {
        let f = follower(&[(0, 1), (1, 1)], 1);
        assert_eq!(at(Truncation::Epoch, &f, &leader(&[(0, 0)], 0)), 1);
        assert_eq!(at(Truncation::Epoch, &f, &leader(&[], 2)), 1);
    }

    #[test]
    fn kip101_misses_a_divergence_within_an_older_epoch_and_kip279_finds_it() {
        let f = follower(&[(0, 0), (1, 1)], 0);
        let l = leader(&[(0, 0), (2, 0), (3, 2)], 2);
        assert_eq!(
            at(Truncation::Epoch, &f, &l),
            2,
            "KIP-101 keeps b1 at offset 1"
        );
        assert_eq!(at(Truncation::EpochIterative, &f, &l), 1);
    }

    #[test]
    fn kip279_ends_at_the_first_difference_while_epochs_rise() {
        let f = follower(&[(0, 0), (1, 0)], 0);
        assert_eq!(
            at(
                Truncation::EpochIterative,
                &f,
                &leader(&[(0, 0), (2, 1)], 1)
            ),
            1
        );
        let f = follower(&[(0, 0)], 0);
        assert_eq!(
            at(
                Truncation::EpochIterative,
                &f,
                &leader(&[(0, 0), (2, 1)], 1)
            ),
            1
        );
        let f = follower(&[(1, 1)], 0);
        assert_eq!(at(Truncation::EpochIterative, &f, &leader(&[(0, 0)], 2)), 0);
    }

    #[test]
    fn a_request_beyond_a_stale_leaders_epochs_is_undefined_and_the_hw_decides() {
        // A leads epoch 3 but holds a record of epoch 4 (fetched unfenced):
        // its cache forgets epoch 4, so a follower whose latest epoch is 4
        // gets no answer and keeps what is below its HW.
        let l = leader(&[(0, 2), (1, 4), (2, 3)], 3);
        let f = follower(&[(0, 2), (1, 4)], 2);
        assert_eq!(at(Truncation::EpochIterative, &f, &l), 2);
        let f = follower(&[(0, 2), (1, 4)], 1);
        assert_eq!(at(Truncation::EpochIterative, &f, &l), 1);
    }

    #[test]
    fn the_cache_keeps_epochs_and_starts_rising() {
        let mut c: EpochCache = Vec::new();
        assign(&mut c, 2, 0);
        assign(&mut c, 4, 1);
        assign(&mut c, 4, 2);
        assert_eq!(c, vec![(2, 0), (4, 1)]);
        assign(&mut c, 3, 2);
        assert_eq!(c, vec![(2, 0), (3, 2)], "epoch 4 is dropped");
        assert_eq!(end_offset_for(&c, 2, 3), Some((2, 2)));
        assert_eq!(end_offset_for(&c, 3, 3), Some((3, 3)));
        assert_eq!(end_offset_for(&c, 4, 3), None);
        assert_eq!(end_offset_for(&c, 1, 3), Some((1, 0)));
    }

    #[test]
    fn truncation_never_goes_above_the_follower_leo() {
        let f = follower(&[(0, 0)], 0);
        let l = leader(&[(0, 0), (1, 0)], 0);
        for mode in [Truncation::Epoch, Truncation::EpochIterative] {
            assert_eq!(at(mode, &f, &l), 1, "{mode}");
        }
    }
}
