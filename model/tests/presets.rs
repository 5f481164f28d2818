//! Each preset's verdict, and the shortest counterexample of each historical
//! preset: found, naming the property the preset says it breaks, and with no
//! shorter one (checked independently with stateright's own BFS).

#[path = "../../testkit/long_tier.rs"]
mod long_tier;
use highwater_checker::shortest::shortest_counterexamples;
use highwater_model::config::Mutation;
use highwater_model::presets::{Expect, Preset, PRESETS};
use highwater_model::properties::STRONG_ISR;
use highwater_model::rerun;
use highwater_model::run::{self, RunOptions, Search, StopAt, Verdict};
use highwater_model::{Action, Config, PartitionModel};
use stateright::{Checker, Model};

fn preset(name: &str) -> &'static Preset {
    Preset::find(name).unwrap_or_else(|| panic!("no preset {name}"))
}

fn exhaustive(cfg: Config, expect: Expect) -> run::Report {
    let opts = RunOptions::new(2, Search::Graph);
    run::run(cfg, None, Some(expect), &opts, |_| {})
}

/// The exhaustive run of a preset agrees with what it expects.
fn assert_verdict(cfg: Config, expect: Expect) {
    let report = exhaustive(cfg, expect);
    assert!(
        report.mismatches.is_empty(),
        "{cfg}: {:?}\n{:#?}",
        report.mismatches,
        report
            .properties
            .iter()
            .map(|p| (p.name, p.verdict))
            .collect::<Vec<_>>()
    );
}

// `safe` itself (every verdict as expected, its state count the one
// recorded) is searched once in the long tier, by
// `model/tests/distributed.rs`, whose single-process run it is.

#[test]
fn safe_deep_holds_with_one_record() {
    if !long_tier::enabled("a search of safe-deep with one record, about 20 seconds") {
        return;
    }
    // The full preset runs in the benchmark; one record keeps the clean
    // crash's extra interleavings and still commits, changes leaders, etc.
    let p = preset("safe-deep");
    assert_verdict(
        Config {
            records: 1,
            ..p.config
        },
        p.expect,
    );
}

/// KIP-320's ISR-join condition (the follower's LEO has reached the
/// leader's epoch start, `Partition.isFollowerInSync`) is load-bearing once
/// fetches can be cut short: without it `safe` breaks the strong ISR.
#[test]
fn without_the_epoch_start_condition_safe_breaks_the_strong_isr() {
    if !long_tier::enabled("a search of safe, about a minute and a half") {
        return;
    }
    let cfg = Config {
        mutation: Some(Mutation::ExpandAtHw),
        ..preset("safe").config
    };
    assert_verdict(cfg, Expect::Breaks(STRONG_ISR));
}

#[test]
fn safe_hw_checkpoint_holds_with_one_record() {
    // The full preset (38 million states) runs in the benchmark; one record
    // still commits, checkpoints, crashes uncleanly with an older HW and
    // comes back.
    let p = preset("safe-hw-checkpoint");
    assert_verdict(
        Config {
            records: 1,
            ..p.config
        },
        p.expect,
    );
}

/// min.insync.replicas at the replica count, where the rules' bounds meet
/// (`model/tests/rules.rs`: the HW and acks=all writes at exactly
/// min.insync.replicas).
#[test]
fn safe_min_isr_3_holds_and_its_state_count_is_measured() {
    let p = preset("safe-min-isr-3");
    let report = exhaustive(p.config, p.expect);
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);
    assert_eq!(
        Some(report.progress.unique_states),
        p.measured.map(|m| m.unique_states),
        "update SAFE_MIN_ISR_3_UNIQUE_STATES to the new count"
    );
}

#[test]
fn tla_kip320_holds_and_its_state_count_is_the_one_published() {
    let p = preset("tla-kip320");
    let report = exhaustive(p.config, p.expect);
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);
    assert_eq!(
        report.progress.unique_states,
        highwater_model::presets::TLA_KIP320_UNIQUE_STATES,
        "update TLA_KIP320_UNIQUE_STATES (shown by `highwater presets`) to the new count"
    );
}

/// The shortest counterexample of `name`'s expected property, by our BFS:
/// its configuration, the property and the trace's actions.
fn shortest(name: &str) -> (Config, &'static str, Vec<Action>) {
    let p = preset(name);
    let Expect::Breaks(property) = p.expect else {
        panic!("{name} is not a historical preset");
    };
    let model = PartitionModel::new(p.config);
    let target: Vec<_> = model
        .properties()
        .into_iter()
        .filter(|q| q.name == property)
        .collect();
    assert_eq!(target.len(), 1, "{name} names an existing property");
    let found = shortest_counterexamples(&model, &target);
    let (found_name, trace) = &found[0];
    let trace = trace
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: no counterexample to \"{property}\""));
    assert_eq!(*found_name, property);
    // The trace is a real path: each action enabled, each state its result,
    // and the last state breaks the property (and no earlier one does).
    let cond = target[0].condition;
    for w in trace.windows(2) {
        let ((prev, _), (next, Some(action))) = (&w[0], &w[1]) else {
            panic!("steps after the first carry an action");
        };
        let mut enabled = Vec::new();
        model.actions(prev, &mut enabled);
        assert!(enabled.contains(action), "{action} is enabled");
        assert_eq!(model.next_state(prev, *action).as_ref(), Some(next));
        assert!(cond(&model, prev), "an earlier state already breaks it");
    }
    assert!(!cond(&model, &trace.last().unwrap().0));
    let actions = trace.iter().filter_map(|(_, a)| *a).collect();
    (p.config, property, actions)
}

/// `name`'s counterexample, replayed action by action under the preset that
/// differs from it by the rule that fixed it: the fix either forbids a step
/// or changes what a step does, and the property holds at every state the
/// replay reaches. The two presets must differ by that one rule and share
/// their bounds, so the fix alone is what changes the outcome. The re-run
/// is `rerun::rerun`, as `highwater replay --under` runs it.
fn assert_the_fix_holds(name: &str, property: &'static str, actions: &[Action]) {
    let p = preset(name);
    let fix = p.fixed_by.unwrap_or_else(|| panic!("{name} names its fix"));
    let fixed = preset(fix.preset).config;
    let changes = rerun::rule_changes(&p.config, &fixed);
    assert_eq!(changes.len(), 1, "{name} -> {}: {changes:?}", fix.preset);
    assert_eq!(
        rerun::with_rules(&p.config, &fixed),
        fixed,
        "{name} and {} share their bounds",
        fix.preset
    );
    assert_holds_under(name, &fixed, fix.rule, property, actions);
}

/// The re-run of `actions` under `cfg` never breaks `property`.
fn assert_holds_under(
    name: &str,
    cfg: &Config,
    rule: &str,
    property: &'static str,
    actions: &[Action],
) {
    let run = rerun::rerun(cfg, actions, &[property]).expect("an always-property");
    assert!(
        !run.breaks(),
        "{name}'s counterexample, under {rule}: {}",
        run.verdict()
    );
    eprintln!("{name}: under {rule}, {}", run.verdict());
}

/// The fix check can fail: a "fix" that changes nothing leaves each
/// counterexample breaking its property at its last step.
#[test]
#[should_panic(
    expected = "hw-truncation's counterexample, under no change: \"committed records survive\" still breaks, at the last step"
)]
fn a_fix_that_changes_nothing_fails_the_fix_check() {
    let (cfg, property, actions) = shortest("hw-truncation");
    assert_holds_under("hw-truncation", &cfg, "no change", property, &actions);
}

/// stateright's own breadth-first search (no symmetry reduction) confirms
/// that `property` breaks within `steps` actions and not within fewer.
fn assert_no_shorter(cfg: Config, property: &'static str, steps: usize) {
    let within = |depth: usize| {
        // target_max_depth counts the initial state as depth 1 and checks
        // only states below the target: `depth` actions need depth + 2.
        PartitionModel::new(cfg)
            .checker()
            .threads(1)
            .target_max_depth(depth + 2)
            .spawn_bfs()
            .join()
            .discovery(property)
            .is_some()
    };
    assert!(
        within(steps),
        "a counterexample within {steps} steps exists"
    );
    assert!(
        !within(steps - 1),
        "no counterexample within {} steps",
        steps - 1
    );
}

macro_rules! historical {
    ($test:ident, $preset:literal) => {
        historical!($test, $preset, None);
    };
    // Those whose search without symmetry to the counterexample's depth
    // takes a minute or more.
    ($test:ident, $preset:literal, long: $cost:literal) => {
        historical!($test, $preset, Some($cost));
    };
    ($test:ident, $preset:literal, $long:expr) => {
        #[test]
        fn $test() {
            if let Some(cost) = $long {
                if !long_tier::enabled(cost) {
                    return;
                }
            }
            let (cfg, property, actions) = shortest($preset);
            assert_no_shorter(cfg, property, actions.len());
            assert_the_fix_holds($preset, property, &actions);
        }
    };
}

historical!(acks_1_loses_an_acknowledged_write, "acks-1");
historical!(min_isr_1_loses_an_acknowledged_write, "min-isr-1");
historical!(
    unclean_election_loses_a_committed_record,
    "unclean-election"
);
historical!(no_elr_loses_a_committed_record, "no-elr");
historical!(
    hw_truncation_loses_a_committed_record,
    "hw-truncation",
    long: "no shorter one, by a search without symmetry, about 1.5 minutes"
);
historical!(
    epoch_lookup_breaks_the_strong_isr,
    "epoch-lookup",
    long: "no shorter one, by a search without symmetry, about 1.5 minutes"
);
historical!(
    unfenced_breaks_the_strong_isr,
    "unfenced",
    long: "no shorter one, by a search without symmetry, about 40 seconds"
);

#[test]
fn every_preset_is_valid_and_historical_ones_differ_from_safe() {
    let safe = preset("safe").config;
    for p in PRESETS {
        p.config
            .validate()
            .unwrap_or_else(|e| panic!("{}: {e}", p.name));
        if matches!(p.expect, Expect::Breaks(_)) {
            assert_ne!(p.config, safe, "{} changes something", p.name);
        }
    }
}

#[test]
fn a_simulation_finds_an_acks_1_loss_but_claims_no_proof() {
    let p = preset("acks-1");
    let opts = RunOptions {
        threads: 1,
        search: Search::Simulate {
            seed: 7,
            max_depth: 40,
        },
        // Stops at the loss; the limit only bounds a run that never finds it,
        // so a slow shared machine does not change the outcome.
        time_limit: Some(std::time::Duration::from_secs(120)),
        stop_at: StopAt::Property("acknowledged records survive"),
        ..RunOptions::new(1, Search::Graph)
    };
    let report = run::run(p.config, None, Some(p.expect), &opts, |_| {});
    for prop in &report.properties {
        assert_ne!(prop.verdict, Verdict::Holds, "a simulation proves nothing");
    }
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);
    let acked = report
        .properties
        .iter()
        .find(|p| p.name == "acknowledged records survive")
        .expect("the property is reported");
    assert_eq!(acked.verdict, Verdict::Counterexample);
    assert!(acked.counterexample.is_some(), "with its shortest path");
}

/// A historical preset stops at its first counterexample; what it then
/// reports is the same in every run (every property broken within as many
/// steps as the expected one), not whatever the threads stumbled on.
#[test]
fn a_stopped_run_reports_the_same_every_time() {
    let p = preset("unclean-election");
    let Expect::Breaks(expected) = p.expect else {
        panic!("a historical preset")
    };
    let opts = RunOptions {
        stop_at: StopAt::Property(expected),
        ..RunOptions::new(2, Search::Graph)
    };
    let summary = |r: &run::Report| -> Vec<(&str, Verdict, Option<usize>)> {
        r.properties
            .iter()
            .map(|q| {
                (
                    q.name,
                    q.verdict,
                    q.counterexample.as_ref().map(|c| c.len()),
                )
            })
            .collect()
    };
    let first = summary(&run::run(p.config, None, Some(p.expect), &opts, |_| {}));
    let limit = first
        .iter()
        .find(|(name, _, _)| *name == expected)
        .and_then(|&(_, _, len)| len)
        .expect("the expected counterexample");
    for &(name, verdict, len) in &first {
        if verdict == Verdict::Counterexample {
            assert!(
                len.is_some_and(|l| l <= limit),
                "{name} is longer than {expected}"
            );
        } else {
            assert!(
                matches!(verdict, Verdict::NotChecked | Verdict::Reached),
                "{name}: {verdict:?}"
            );
        }
    }
    for _ in 0..3 {
        let again = summary(&run::run(p.config, None, Some(p.expect), &opts, |_| {}));
        assert_eq!(again, first);
    }
}

/// highwater's own search and stateright's depth-first search agree on the
/// state space (both symmetry-reduced) and on every safety verdict.
#[test]
fn the_state_graph_and_staterights_dfs_agree() {
    let p = preset("tla-kip320");
    let run_with = |search| {
        let opts = RunOptions::new(2, search);
        run::run(p.config, None, Some(p.expect), &opts, |_| {})
    };
    let ours = run_with(Search::Graph);
    let theirs = run_with(Search::Dfs);
    assert_eq!(ours.progress.unique_states, theirs.progress.unique_states);
    let verdicts = |r: &run::Report| -> Vec<_> {
        r.properties
            .iter()
            .filter(|q| q.kind != "progress")
            .map(|q| (q.name, q.verdict))
            .collect()
    };
    assert_eq!(verdicts(&ours), verdicts(&theirs));
}
