//! KIP-279 as implemented (the iterative OffsetsForLeaderEpoch exchange over
//! epoch caches) ends where the model says: at the first offset where the
//! follower's log and the leader's differ, for any two logs that a leader
//! epoch names uniquely (one leader per epoch: after the logs part, no epoch
//! appears on both sides, though one side may go on with the last shared
//! epoch); except that a stale leader asked about an epoch above every one it
//! knows answers UNDEFINED, as Kafka does, and the follower keeps what is
//! below its HW.

use std::path::Path;

use highwater::replication::truncation::{follower_truncation, leader_end_offset, TruncationStep};
use highwater::replication::TruncationMode;
use highwater::storage::checkpoint::EpochEntry;
use highwater::storage::EpochCache;
use proptest::prelude::*;

fn cache(epochs: &[i32]) -> Vec<EpochEntry> {
    let mut c = EpochCache::new(Path::new(""), Vec::new());
    for (o, &e) in epochs.iter().enumerate() {
        c.assign_in_memory(e, o as u64);
    }
    c.entries().to_vec()
}

/// The follower's truncation offset after the whole exchange.
fn exchange(mode: TruncationMode, f: &[i32], hw: u64, l: &[i32], epoch: i32, start: u64) -> u64 {
    let leader = cache(l);
    let mut leo = f.len() as u64;
    for _ in 0..64 {
        let own = cache(&f[..leo as usize]);
        let Some(latest) = own.last().map(|e| e.epoch) else {
            return leo;
        };
        let answer = leader_end_offset(mode, &leader, l.len() as u64, epoch, start, latest);
        match follower_truncation(mode, &own, leo, hw.min(leo), answer) {
            TruncationStep::Done(o) => return o,
            TruncationStep::Continue(o) => {
                assert!(o < leo, "each round cuts something");
                leo = o;
            }
        }
    }
    panic!("the exchange did not end");
}

#[derive(Debug, Clone)]
struct Logs {
    follower: Vec<i32>,
    leader: Vec<i32>,
    shared: usize,
    /// The leader's current epoch and where it began leading in it.
    epoch: i32,
    start: u64,
}

fn logs() -> impl Strategy<Value = Logs> {
    (
        proptest::collection::vec(0i32..3, 0..5),
        proptest::collection::vec(any::<bool>(), 0..6),
        0usize..3,
        0usize..3,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(mut common, owners, f_more, l_more, f_continues, stale)| {
            common.sort_unstable();
            let last = common.last().copied().unwrap_or(-1);
            // Fresh epochs after the shared prefix, each owned by one side.
            let mut f_epochs = Vec::new();
            let mut l_epochs = Vec::new();
            for (i, &to_follower) in owners.iter().enumerate() {
                let e = last + 1 + i as i32;
                if to_follower {
                    f_epochs.push(e);
                } else {
                    l_epochs.push(e);
                }
            }
            let mut follower = common.clone();
            let mut leader = common.clone();
            // One side may go on with the last shared epoch.
            if last >= 0 {
                let side = if f_continues {
                    &mut follower
                } else {
                    &mut leader
                };
                side.extend(std::iter::repeat_n(last, 1 + f_more % 2));
            }
            for e in f_epochs {
                follower.extend(std::iter::repeat_n(e, 1 + f_more));
            }
            for e in l_epochs {
                leader.extend(std::iter::repeat_n(e, 1 + l_more));
            }
            let top = follower.iter().chain(&leader).copied().max().unwrap_or(0);
            // A current leader is at an epoch above every record; a stale one
            // (unfenced) may lead in an epoch below the follower's records.
            let epoch = if stale {
                leader.last().copied().unwrap_or(0)
            } else {
                top + 1
            };
            let start = if stale {
                leader
                    .iter()
                    .position(|&e| e == epoch)
                    .unwrap_or(leader.len()) as u64
            } else {
                leader.len() as u64
            };
            Logs {
                follower,
                leader,
                shared: common.len(),
                epoch,
                start,
            }
        })
}

/// The first offset where the logs differ: the shared prefix (past it
/// no record is on both sides, by construction, which this checks).
fn first_divergence(l: &Logs) -> u64 {
    let same = l
        .follower
        .iter()
        .zip(&l.leader)
        .take_while(|(a, b)| a == b)
        .count();
    assert_eq!(same, l.shared, "the generator keeps epochs apart: {l:?}");
    same as u64
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    #[test]
    fn kip279_ends_at_the_first_divergence(l in logs(), hw in 0u64..8) {
        let leader_top = l.leader.iter().copied().chain([l.epoch]).max();
        let expected = if l.follower.last().copied() > leader_top {
            hw.min(l.follower.len() as u64)
        } else {
            first_divergence(&l)
        };
        let mode = TruncationMode::EpochIterative;
        let got = exchange(mode, &l.follower, hw, &l.leader, l.epoch, l.start);
        prop_assert_eq!(got, expected, "{} {:?}", mode, l);
    }
}
