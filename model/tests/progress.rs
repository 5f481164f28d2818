//! The progress check: from every reachable state, without a further
//! fault, the partition can heal. Each test shows the check failing where
//! a rule is broken on purpose, and holding where it is not.

mod common;
#[path = "../../testkit/long_tier.rs"]
mod long_tier;

use common::*;
use highwater_checker::progress::ProgressReport;
use highwater_checker::recovery_walk::RecoveryWalk;
use highwater_checker::search::{self, ProgressOptions, SearchOptions, Until};
use highwater_checker::Goal;
use highwater_model::config::Mutation;
use highwater_model::controller::Election;
use highwater_model::presets::{Preset, SAFE};
use highwater_model::progress::{self, ACKED_REPLICATED, RECOVERABLE};
use highwater_model::recovery::recovery_config;
use highwater_model::run::{self, Report, RunOptions, Search, Verdict};
use highwater_model::state::{LeaderView, State, RECOVERY_EPOCHS};
use highwater_model::{Action, Config, PartitionModel};

fn check(cfg: Config) -> Report {
    let opts = RunOptions::new(2, Search::Graph);
    run::run(cfg, None, None, &opts, |_| {})
}

fn verdict(r: &Report, name: &str) -> Verdict {
    r.properties
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("{name} is reported"))
        .verdict
}

/// The last state of the shortest stuck path's continuation: a state of
/// the trap every fault-free future ends in.
fn trap_state(r: &Report, name: &str) -> State {
    let p = r.properties.iter().find(|p| p.name == name).unwrap();
    let cont = p
        .stuck_continuation
        .as_ref()
        .expect("a stuck state comes with its continuation");
    cont.last().unwrap().raw.0
}

/// The stall highwater's old ISR rule allowed, in `safe`: a leader elected
/// with its ISR below min.insync.replicas and its HW below the start of its
/// epoch. KIP-966 holds the HW; the old rule held every follower out until
/// the HW reached the epoch start. Its followers are caught up, and nothing
/// moves again.
#[test]
fn the_old_isr_rule_stalls_safe_and_kafkas_does_not() {
    if !long_tier::enabled("two searches of safe with the progress graph, about 2 minutes") {
        return;
    }
    let stalled = check(Config {
        mutation: Some(Mutation::ExpandOnLeaderHw),
        ..SAFE
    });
    assert_eq!(verdict(&stalled, RECOVERABLE), Verdict::Counterexample);
    let s = trap_state(&stalled, RECOVERABLE);
    let leader = s
        .controller
        .leader
        .expect("the stalled partition has a leader");
    let l = s.replica(leader);
    let epoch = l.epoch.unwrap();
    assert!(l.presumes_leadership(leader) && s.controller.epoch == Some(epoch));
    assert!(
        l.isr.len() < SAFE.min_isr,
        "its ISR is below min.insync.replicas"
    );
    assert!(
        l.hw < l.leader_epoch_start(epoch),
        "its HW is below its epoch start"
    );
    for f in s.ids().filter(|&f| f != leader) {
        let x = s.replica(f);
        assert!(x.alive && x.leader == LeaderView::Replica(leader));
        assert_eq!(x.leo(), l.leo(), "follower {f} is caught up");
    }
    // Kafka's rule (Partition.isFollowerInSync) takes a follower back there.
    let expands = enabled_actions(&SAFE, &s)
        .into_iter()
        .filter(|a| matches!(a, Action::LeaderExpandIsr { .. }))
        .count();
    assert!(expands > 0, "under Kafka's rule a follower rejoins");

    // The safety properties still hold: the stall loses nothing.
    for p in &stalled.properties {
        if p.kind == "always" {
            assert_eq!(p.verdict, Verdict::Holds, "{}", p.name);
        }
    }
}

/// A mutation that only breaks progress: the controller keeps the ELR but
/// never elects from it. Once the ISR empties, live eligible replicas wait
/// forever; nothing unsafe ever happens.
#[test]
fn an_elr_never_elected_from_waits_forever() {
    if !long_tier::enabled("a progress search, about 20 seconds") {
        return;
    }
    let cfg = Config {
        records: 1,
        mutation: Some(Mutation::NoElrElection),
        ..SAFE
    };
    let r = check(cfg);
    assert_eq!(verdict(&r, RECOVERABLE), Verdict::Counterexample);
    for p in &r.properties {
        if p.kind == "always" {
            assert_eq!(p.verdict, Verdict::Holds, "{}", p.name);
        }
    }
    let s = trap_state(&r, RECOVERABLE);
    let c = &s.controller;
    assert!(c.leader.is_none() && c.isr.is_empty());
    assert!(c.elr.iter().any(|e| s.replica(e).alive));
    let unmutated = Config {
        mutation: None,
        ..cfg
    };
    assert!(
        elections(&unmutated, &s)
            .iter()
            .any(|&(_, e)| e == Election::Elr),
        "without the mutation the controller elects from the ELR there"
    );
    // And without the mutation every state heals.
    let healthy = check(unmutated);
    assert_eq!(verdict(&healthy, RECOVERABLE), Verdict::Holds);
    assert_eq!(verdict(&healthy, ACKED_REPLICATED), Verdict::Holds);
}

/// With two unclean crashes the last replicas standing can both leave the
/// ISR and the ELR: KIP-966 keeps such a partition offline. Those states are
/// counted, with an example, and are not violations.
#[test]
fn offline_by_design_is_counted_not_reported() {
    if !long_tier::enabled("two progress searches, about a minute") {
        return;
    }
    let r = check(Config {
        records: 1,
        unclean_crashes: 2,
        ..SAFE
    });
    assert_eq!(verdict(&r, RECOVERABLE), Verdict::Holds);
    let pc = r.progress_check.as_ref().expect("the progress check ran");
    assert!(pc.offline_states > 0);
    let example = pc.offline_example.as_ref().expect("an example path");
    let last = example.last().unwrap().raw.0;
    assert!(progress::offline_by_design(&SAFE, &last));
    // Under safe's one unclean crash the ELR always keeps a candidate.
    let safe = check(Config { records: 1, ..SAFE });
    assert_eq!(safe.progress_check.unwrap().offline_states, 0);
}

/// Recovery may need leader epochs beyond a run's bound (a leader that dies
/// in the last epoch is replaced by a removal and an election). Without
/// them, states at the bound look stuck: the extension is load-bearing.
#[test]
fn without_recovery_epochs_the_epoch_bound_looks_like_a_stall() {
    let cfg = Config { records: 1, ..SAFE };
    let stuck_with = |recovery_epochs: u8| {
        let report = progress_report(cfg, recovery_epochs, RecoveryWalk::default());
        let p = &report.properties[0];
        assert_eq!(p.name, RECOVERABLE);
        (p.stuck_states, p.counterexample.clone())
    };
    let (stuck, example) = stuck_with(0);
    assert!(stuck > 0, "the bound alone strands some states");
    let s = example.unwrap().trace.last().unwrap().0;
    assert_eq!(s.controller.epoch, Some(cfg.max_epoch), "at the bound");
    assert_eq!(stuck_with(RECOVERY_EPOCHS).0, 0);
}

#[test]
fn healthy_means_a_known_leader_a_full_isr_and_the_hw_at_the_end() {
    let cfg = base();
    let s = init(&cfg);
    assert!(!progress::healthy(&cfg, &s), "no leader yet");
    let followers = led(&cfg);
    assert!(progress::healthy(&cfg, &followers));
    let written = run(&cfg, &followers, &[produce(A, 0)]);
    assert!(!progress::healthy(&cfg, &written), "the HW is behind");
    let caught_up = run(
        &cfg,
        &written,
        &[
            fetch(B, A),
            fetch(C, A),
            fetch(B, A),
            fetch(C, A),
            advance(A, 1),
        ],
    );
    assert!(
        !progress::healthy(&cfg, &caught_up),
        "followers lack the HW"
    );
    let done = run(&cfg, &caught_up, &[fetch(B, A), fetch(C, A)]);
    assert!(progress::healthy(&cfg, &done));
    assert!(progress::acked_replicated(&cfg, &done));
    let down = run(&cfg, &done, &[crash(C, true)]);
    assert!(
        !progress::healthy(&cfg, &down),
        "a down broker must come back: a restart is no fault"
    );
    assert!(
        !progress::acked_replicated(&cfg, &down),
        "nor is a record on every replica while one is down"
    );
    let out = run(&cfg, &done, &[ctrl_shrink(C)]);
    assert!(
        !progress::healthy(&cfg, &out),
        "a live replica is out of the ISR"
    );
}

/// The default preset's progress verdicts are part of what it expects.
#[test]
fn safe_expects_progress() {
    let p = Preset::default_preset();
    let opts = RunOptions::new(2, Search::Graph);
    let r = run::run(
        Config {
            mutation: Some(Mutation::ExpandOnLeaderHw),
            records: 1,
            ..p.config
        },
        None,
        Some(p.expect),
        &opts,
        |_| {},
    );
    assert!(
        r.mismatches.iter().any(|m| m.contains(RECOVERABLE)),
        "a stuck state is a mismatch for a preset that expects everything to hold: {:?}",
        r.mismatches
    );
}

/// What the progress check found under a walk mode: per property, the stuck
/// count and the first stuck state; offline states; recovery states found
/// and walked.
struct UnderWalk {
    stuck: Vec<(u64, Option<State>)>,
    offline: u64,
    recovery: u64,
    walked: u64,
}

/// The progress check of an exhaustive search of `cfg`.
fn progress_report(
    cfg: Config,
    recovery_epochs: u8,
    walk: RecoveryWalk,
) -> ProgressReport<PartitionModel> {
    let model = PartitionModel::new(cfg);
    let g = search::search(
        &model,
        SearchOptions {
            threads: 2,
            properties: None,
            progress: Some(ProgressOptions {
                recovery: PartitionModel::new(recovery_config(&cfg, recovery_epochs)),
                goals: progress::goals(),
                walk,
            }),
            until: Until::Exhausted,
            stop: &|_| false,
            on_progress: &mut |_| {},
            budget: None,
            expected_states: None,
        },
    );
    highwater_checker::progress::check(&g)
}

fn progress_under(cfg: Config, walk: RecoveryWalk) -> UnderWalk {
    let report = progress_report(cfg, RECOVERY_EPOCHS, walk);
    UnderWalk {
        stuck: report
            .properties
            .iter()
            .map(|p| {
                let first = p.counterexample.as_ref().map(|c| c.trace.last().unwrap().0);
                (p.stuck_states, first)
            })
            .collect(),
        offline: report.properties[0].exempt_states,
        recovery: report.recovery_states,
        walked: report.recovery_walked,
    }
}

/// A recovery state a walk takes to every goal is not expanded
/// (`checker/src/recovery_walk.rs`), and walks stop at a state an earlier
/// walk passed (its memo; `checker/tests/recovery_walk.rs` shows a memo
/// keeping too much failing). The verdicts must be those of expanding every recovery
/// state: the same stuck states, the same first one, the same offline
/// count, on configurations where walks succeed for some recovery states
/// and fall short for others (the stall under the old ISR rule; two unclean
/// crashes, where acknowledged records can be lost for good). And the
/// walk's goals are load-bearing: taking every recovery state to heal
/// without a walk hides stuck states.
#[test]
fn the_recovery_walk_changes_no_verdict_and_its_goals_are_load_bearing() {
    if !long_tier::enabled("six progress searches, about 2 minutes") {
        return;
    }
    for cfg in [
        Config {
            mutation: Some(Mutation::ExpandOnLeaderHw),
            records: 1,
            ..SAFE
        },
        Config {
            records: 1,
            unclean_crashes: 2,
            ..SAFE
        },
    ] {
        let walked = progress_under(cfg, RecoveryWalk::Greedy);
        let expanded = progress_under(cfg, RecoveryWalk::Off);
        let claimed = progress_under(cfg, RecoveryWalk::ClaimsEveryGoal);
        assert_eq!(walked.stuck, expanded.stuck, "{cfg:?}");
        assert_eq!(walked.offline, expanded.offline, "{cfg:?}");
        assert!(
            0 < walked.walked && walked.walked < walked.recovery,
            "some walks succeed and some fall short: {} of {}",
            walked.walked,
            walked.recovery
        );
        assert_eq!(expanded.walked, 0);
        let stuck = |u: &UnderWalk| u.stuck.iter().map(|s| s.0).sum::<u64>();
        assert!(stuck(&expanded) > 0, "{cfg:?} has stuck states");
        assert!(
            stuck(&claimed) < stuck(&expanded),
            "claiming every goal hides stuck states ({} of {})",
            stuck(&claimed),
            stuck(&expanded)
        );
    }
}

/// A partition has healed only when every broker is back: a restart is no
/// fault. With brokers that never restart (`no-restart`) both progress
/// properties break, and the trap they fall into has a broker down. The
/// goals highwater had before, which counted only the live replicas, are
/// kept here to show what they missed: under them the same model heals.
#[test]
fn a_broker_that_never_restarts_is_a_partition_that_never_heals() {
    let cfg = Config {
        records: 1,
        mutation: Some(Mutation::NoRestart),
        ..SAFE
    };
    let r = check(cfg);
    assert_eq!(verdict(&r, RECOVERABLE), Verdict::Counterexample);
    assert_eq!(verdict(&r, ACKED_REPLICATED), Verdict::Counterexample);
    let s = trap_state(&r, RECOVERABLE);
    assert!(
        s.ids().any(|b| !s.replica(b).alive),
        "the partition is stuck with a broker down"
    );

    fn live_only_healthy(cfg: &Config, s: &State) -> bool {
        let c = &s.controller;
        let Some(l) = c.leader else { return false };
        let leader = s.replica(l);
        let end = leader.leo();
        leader.presumes_leadership(l)
            && leader.epoch == c.epoch
            && s.ids().filter(|&b| s.replica(b).alive).all(|b| {
                let x = s.replica(b);
                c.isr.contains(b)
                    && x.leader == LeaderView::Replica(l)
                    && x.epoch == c.epoch
                    && x.leo() == end
                    && x.hw == end
            })
            && (s.produced >= cfg.records || highwater_model::actions::produce_enabled(cfg, s, l))
    }
    fn live_only_acked(_cfg: &Config, s: &State) -> bool {
        s.records[..s.produced as usize]
            .iter()
            .enumerate()
            .filter(|(_, h)| h.acked.is_some())
            .all(|(id, h)| {
                s.ids().filter(|&b| s.replica(b).alive).all(|b| {
                    let x = s.replica(b);
                    x.hw > h.offset && x.log.get(h.offset).is_some_and(|e| e.id as usize == id)
                })
            })
    }
    let model = PartitionModel::new(cfg);
    let g = search::search(
        &model,
        SearchOptions {
            threads: 2,
            properties: None,
            progress: Some(ProgressOptions {
                goals: vec![
                    Goal {
                        name: RECOVERABLE,
                        condition: |m, s| live_only_healthy(&m.cfg, s),
                    },
                    Goal {
                        name: ACKED_REPLICATED,
                        condition: |m, s| live_only_acked(&m.cfg, s),
                    },
                ],
                ..ProgressOptions::of(&model)
            }),
            until: Until::Exhausted,
            stop: &|_| false,
            on_progress: &mut |_| {},
            budget: None,
            expected_states: None,
        },
    );
    let live_only = highwater_checker::progress::check(&g);
    for p in &live_only.properties {
        assert_eq!(
            p.stuck_states, 0,
            "{}: counting only live replicas, nothing looks stuck",
            p.name
        );
    }
}
