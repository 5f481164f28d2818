//! Truncation on fetch (`--truncation on-fetch`, today's rule): a new
//! follower keeps its log, and its fetches find the divergence
//! (`Partition.readRecords`' diverging epoch, `AbstractFetcherThread`'s
//! `truncateOnFetchResponse`). The `no-last-fetched-epoch` mutation shows the
//! check is load-bearing.

mod common;

use common::*;
use highwater_model::config::Mutation;
use highwater_model::state::{Epoch, LeaderView, Log, ReplicaId, Request};
use highwater_model::truncation::{fetch_divergence, FetchCheck};
use highwater_model::{Config, State, Truncation};

fn on_fetch() -> Config {
    Config {
        truncation: Truncation::OnFetch,
        ..base()
    }
}

/// `leader` leads `epoch` (ISR all three) with `leader_log`; A took the
/// epoch's LeaderAndIsr with `a_log` and follows it; C is down.
fn following(cfg: &Config, epoch: Epoch, leader: ReplicaId, leader_log: Log, a_log: Log) -> State {
    let mut s = leading(cfg, leader, epoch, set(&[A, B, C]));
    s.produced = 4;
    let l = s.replica_mut(leader);
    l.log = leader_log;
    l.hw = 1;
    let a = s.replica_mut(A);
    a.epoch = Some(epoch);
    a.leader = LeaderView::Replica(leader);
    a.log = a_log;
    s.replica_mut(C).alive = false;
    s
}

#[test]
fn a_new_follower_keeps_its_log_and_does_not_wait_for_the_leader() {
    let cfg = on_fetch();
    let s = run(&cfg, &init(&cfg), &[elect(A)]);
    assert_enabled(&cfg, &s, follow(B, 0));
    let mut s = run(&cfg, &led(&cfg), &[produce(A, 0), fetch(B, A)]);
    // B has a0; C is named leader of epoch 1 but has not taken it yet.
    s.controller.leader = Some(C);
    s.controller.epoch = Some(1);
    s.requests[1] = Some(Request {
        leader: Some(C),
        isr: set(&[B, C]),
        later_isrs: highwater_model::state::IsrChain::EMPTY,
    });
    let next = step(&cfg, &s, follow(B, 1));
    assert_eq!(next.replica(B).log, log(&[(0, 0)]), "no truncation yet");
    assert_eq!(next.replica(B).leader, LeaderView::Replica(C));
}

#[test]
fn the_fetch_answers_a_diverging_epoch_and_the_follower_truncates_then_copies() {
    let cfg = on_fetch();
    // B leads epoch 2 with [a0, c0, d2]; A follows with [a0, b1].
    let s = following(
        &cfg,
        2,
        B,
        log(&[(0, 0), (2, 0), (3, 2)]),
        log(&[(0, 0), (1, 1)]),
    );
    assert_eq!(
        fetch_divergence(s.replica(A), s.replica(B)),
        FetchCheck::Diverging {
            epoch: 0,
            end_offset: 2,
            truncate_to: 1
        }
    );
    let t = step(&cfg, &s, fetch(A, B));
    assert_eq!(t.replica(A).log, log(&[(0, 0)]));
    assert_eq!(t.replica(A).hw, 0, "no HW from a diverging answer");
    assert_eq!(
        t.replica(B).follower_leo[A as usize],
        None,
        "the leader learns nothing from a diverging fetch"
    );
    assert_eq!(
        fetch_divergence(t.replica(A), t.replica(B)),
        FetchCheck::Agrees
    );
    let u = step(&cfg, &t, fetch(A, B));
    assert_eq!(u.replica(A).log, s.replica(B).log);
    assert_eq!(u.replica(A).hw, 1);
    assert_eq!(u.replica(B).follower_leo[A as usize], Some(1));
}

#[test]
fn the_follower_iterates_one_fetch_per_round_as_kip279_does() {
    let cfg = on_fetch();
    // B leads epoch 3 with [a0, d1], its epoch starting at 2; A has
    // [a0, b0, c2]. Round 1: A asks with epoch 2, B answers epoch 1 ending
    // at 2, A lacks epoch 1 and cuts to the end of epoch 0 (2). Round 2: A
    // asks with epoch 0, B answers epoch 0 ending at 1: A cuts to 1.
    let s = following(
        &cfg,
        3,
        B,
        log(&[(0, 0), (3, 1)]),
        log(&[(0, 0), (1, 0), (2, 2)]),
    );
    let t = step(&cfg, &s, fetch(A, B));
    assert_eq!(t.replica(A).log, log(&[(0, 0), (1, 0)]));
    let u = step(&cfg, &t, fetch(A, B));
    assert_eq!(u.replica(A).log, log(&[(0, 0)]));
    let v = step(&cfg, &u, fetch(A, B));
    assert_eq!(v.replica(A).log, log(&[(0, 0), (3, 1)]));
    // KIP-279's exchange at BecomeFollower ends at the same offset.
    let kip279 = Config {
        truncation: Truncation::EpochIterative,
        ..base()
    };
    let mut before = s;
    before.replica_mut(A).epoch = Some(2);
    let w = step(&kip279, &before, follow(A, 3));
    assert_eq!(w.replica(A).log, log(&[(0, 0)]));
}

#[test]
fn the_leaders_own_epoch_counts_from_where_it_began_leading() {
    // B leads epoch 2 with [a0] and has written nothing in it; A has
    // [a0, b1]: B's cache holds (2, 1), so epoch 1 ends for B at 1, a
    // diverging epoch (0, 1).
    let cfg = on_fetch();
    let s = following(&cfg, 2, B, log(&[(0, 0)]), log(&[(0, 0), (1, 1)]));
    assert_eq!(
        fetch_divergence(s.replica(A), s.replica(B)),
        FetchCheck::Diverging {
            epoch: 0,
            end_offset: 1,
            truncate_to: 1
        }
    );
    // A fetch that agrees copies; one with nothing to learn is no step.
    let t = step(&cfg, &s, fetch(A, B));
    assert_eq!(t.replica(A).log, log(&[(0, 0)]));
}

#[test]
fn without_the_last_fetched_epoch_the_follower_appends_onto_a_divergent_log() {
    let cfg = Config {
        mutation: Some(Mutation::NoLastFetchedEpoch),
        ..on_fetch()
    };
    let s = following(
        &cfg,
        2,
        B,
        log(&[(0, 0), (2, 0), (3, 2)]),
        log(&[(0, 0), (1, 1)]),
    );
    let t = step(&cfg, &s, fetch(A, B));
    assert_eq!(t.replica(A).log, log(&[(0, 0), (1, 1), (3, 2)]));
    assert!(!t.replica(A).log.agrees_below(&t.replica(B).log, 2));
    assert_eq!(t.replica(B).follower_leo[A as usize], Some(2));
}

/// The check over the whole state space: `safe` without the last fetched
/// epoch breaks the strong ISR (a follower keeps a record of a deposed
/// leader below the new leader's HW).
#[test]
fn without_the_last_fetched_epoch_safe_breaks_the_strong_isr() {
    use highwater_model::presets::SAFE;
    use highwater_model::properties::STRONG_ISR;
    use highwater_model::run::{self, RunOptions, Search, StopAt, Verdict};
    use highwater_model::Expect;
    let cfg = Config {
        mutation: Some(Mutation::NoLastFetchedEpoch),
        ..SAFE
    };
    let opts = RunOptions {
        stop_at: StopAt::Property(STRONG_ISR),
        ..RunOptions::new(2, Search::Graph)
    };
    let report = run::run(cfg, None, Some(Expect::Breaks(STRONG_ISR)), &opts, |_| {});
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);
    let strong = report
        .properties
        .iter()
        .find(|p| p.name == STRONG_ISR)
        .expect("the property is reported");
    assert_eq!(strong.verdict, Verdict::Counterexample);
}
