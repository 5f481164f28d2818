//! Where a follower truncates when it follows a new leader epoch, one rule per
//! historical Kafka version. Each returns the offset to truncate to; the
//! follower never truncates above its own LEO.

use crate::config::Truncation;
use crate::state::{Log, Offset, Replica};

/// The offset `follower` truncates to on becoming a follower of `leader`
/// (`leader` is None under `hw`, which never consults the leader).
pub fn truncation_offset(mode: Truncation, follower: &Replica, leader: Option<&Log>) -> Offset {
    let offset = match (mode, leader) {
        (Truncation::Hw, _) | (_, None) => follower.hw,
        (Truncation::Epoch, Some(leader)) => kip101(follower, leader),
        (Truncation::EpochIterative | Truncation::Fenced, Some(leader)) => {
            first_divergence(&follower.log, leader)
        }
    };
    offset.min(follower.leo())
}

/// KIP-101: the follower sends the epoch of its last record. The leader
/// answers its LEO when that is also its own latest epoch, else the start of
/// the first later epoch in its log; with no answer (an empty leader log, or
/// no later epoch) the follower falls back to its HW.
pub fn kip101(follower: &Replica, leader: &Log) -> Offset {
    let Some(last) = follower.log.last() else {
        return 0;
    };
    if leader.last().map(|e| e.epoch) == Some(last.epoch) {
        return leader.leo();
    }
    leader
        .entries()
        .iter()
        .position(|e| e.epoch > last.epoch)
        .map_or(follower.hw, |p| p as Offset)
}

/// KIP-279: the follower repeats OffsetsForLeaderEpoch, each time for its
/// latest remaining epoch, and truncates to min(leader's end offset for that
/// epoch, its own) until both agree. As a leader epoch has one leader and an
/// (offset, epoch) pair therefore names one record, the exchange ends at the
/// first offset where the two logs differ, which is what is computed here.
pub fn first_divergence(follower: &Log, leader: &Log) -> Offset {
    follower
        .entries()
        .iter()
        .zip(leader.entries())
        .take_while(|(f, l)| f == l)
        .count() as Offset
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Entry;

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

    #[test]
    fn hw_mode_truncates_to_local_hw_whatever_the_leader_has() {
        let f = follower(&[(0, 0), (1, 0)], 1);
        let leader = log(&[(0, 0), (1, 0)]);
        assert_eq!(truncation_offset(Truncation::Hw, &f, Some(&leader)), 1);
    }

    #[test]
    fn kip101_keeps_a_suffix_of_the_leaders_latest_epoch() {
        let f = follower(&[(0, 0), (1, 0)], 1);
        assert_eq!(kip101(&f, &log(&[(0, 0), (1, 0)])), 2);
    }

    #[test]
    fn kip101_cuts_at_the_first_later_epoch() {
        let f = follower(&[(0, 0), (1, 0)], 0);
        assert_eq!(kip101(&f, &log(&[(0, 0), (2, 1)])), 1);
    }

    #[test]
    fn kip101_falls_back_to_hw_without_an_answer() {
        let f = follower(&[(0, 1), (1, 1)], 1);
        assert_eq!(kip101(&f, &log(&[(0, 0)])), 1);
        assert_eq!(kip101(&f, &Log::default()), 1);
    }

    #[test]
    fn kip101_misses_a_divergence_within_an_older_epoch() {
        // The follower's last epoch (0) is not the leader's latest, and the
        // leader's first later epoch starts at 2: the divergent record at
        // offset 1 survives. KIP-279 finds it.
        let f = follower(&[(0, 0), (1, 0)], 0);
        let leader = log(&[(0, 0), (2, 1), (3, 2)]);
        assert_eq!(kip101(&f, &leader), 1);
        let f2 = follower(&[(0, 0), (1, 1)], 0);
        let leader2 = log(&[(0, 0), (2, 2)]);
        assert_eq!(kip101(&f2, &leader2), 1);
        let f3 = follower(&[(0, 0), (1, 1)], 0);
        let leader3 = log(&[(0, 0), (2, 0), (3, 2)]);
        assert_eq!(kip101(&f3, &leader3), 2, "KIP-101 keeps b1 at offset 1");
        assert_eq!(first_divergence(&f3.log, &leader3), 1);
    }

    #[test]
    fn first_divergence_is_the_longest_common_prefix() {
        assert_eq!(
            first_divergence(&log(&[(0, 0), (1, 0)]), &log(&[(0, 0), (2, 1)])),
            1
        );
        assert_eq!(
            first_divergence(&log(&[(0, 0)]), &log(&[(0, 0), (2, 1)])),
            1
        );
        assert_eq!(first_divergence(&log(&[(1, 1)]), &log(&[(0, 0)])), 0);
    }

    #[test]
    fn truncation_never_goes_above_the_follower_leo() {
        let f = follower(&[(0, 0)], 0);
        let leader = log(&[(0, 0), (1, 0)]);
        for mode in [
            Truncation::Epoch,
            Truncation::EpochIterative,
            Truncation::Fenced,
        ] {
            assert_eq!(truncation_offset(mode, &f, Some(&leader)), 1, "{mode}");
        }
    }
}
