//! Every rule of today's rules is needed, or explained: each entry of
//! `highwater_model::rules::Rule`, knocked out on the preset named here (one
//! CI checks exhaustively, with a measured state count), breaks the named
//! property, in a shortest counterexample of the named length. A rule no
//! preset needs is in [`NOT_NEEDED`], with its reason, and in the table of
//! `spec/differences.md`; its knock-out is checked to break nothing there.
//!
//! A knock-out whose run takes under about 20 s on an idle machine always
//! runs: a safety counterexample stops the search at its level, and a
//! progress verdict on `safe-min-isr-3` searches that preset whole (about
//! 10 s). The two that search all of `safe` for a progress verdict (over a
//! minute each), the rules no preset needs, and the bounds beyond the
//! presets run with `HIGHWATER_LONG_TESTS=1`.

mod common;
#[path = "../../testkit/long_tier.rs"]
mod long_tier;

use common::*;
use highwater_model::controller::Election;
use highwater_model::presets::{Preset, SAFE};
use highwater_model::progress::{ACKED_REPLICATED, RECOVERABLE};
use highwater_model::properties::*;
use highwater_model::rules::Rule;
use highwater_model::run::{self, Ended, Report, RunOptions, Search, StopAt, Verdict};
use highwater_model::{Action, Config, PartitionModel, State};

/// What a knock-out shows.
#[derive(Clone, Copy, Debug)]
enum Shows {
    /// This always-property breaks; its shortest counterexample has this
    /// many steps.
    Breaks(&'static str, usize),
    /// This progress property has stuck states; the shortest path to one
    /// has this many steps.
    Stuck(&'static str, usize),
    /// This sometimes-property is never reached.
    Unreached(&'static str),
}

use Shows::*;

/// How long a knock-out takes to show what it breaks, on an idle machine.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cost {
    /// Under 2.5 s: in the README's test command.
    Instant,
    /// 2.5 to 20 s: the long tier.
    Seconds,
    /// A whole search of `safe`, minutes: the long tier.
    Minutes,
}

use Cost::*;

/// A rule, the preset whose bounds need it, what its knock-out shows there,
/// and how long that takes to see.
struct Needed {
    rule: Rule,
    preset: &'static str,
    shows: Shows,
    cost: Cost,
}

const fn needed(rule: Rule, preset: &'static str, shows: Shows, cost: Cost) -> Needed {
    Needed {
        rule,
        preset,
        shows,
        cost,
    }
}

const M3: &str = "safe-min-isr-3";

/// The evidence: for each rule, a smallest CI preset found to need it (the
/// smallest of `safe` with one record, `safe-min-isr-3` and `safe`), and
/// what its knock-out breaks there.
const NEEDED: &[Needed] = &[
    // The controller.
    needed(
        Rule::CleanLeaderFromIsr,
        M3,
        Breaks(LEADER_IN_ISR, 3),
        Instant,
    ),
    needed(
        Rule::ElrLeaderOnlyWithEmptyIsr,
        M3,
        Stuck(ACKED_REPLICATED, 14),
        Seconds,
    ),
    needed(Rule::KeepValidLeader, M3, Stuck(RECOVERABLE, 3), Seconds),
    needed(Rule::ElrElection, M3, Stuck(RECOVERABLE, 3), Seconds),
    needed(
        Rule::ElrLeaderBecomesIsr,
        M3,
        Breaks(LEADER_IN_ISR, 5),
        Instant,
    ),
    needed(
        Rule::LastKnownLeaderWaitsForElr,
        M3,
        Breaks(COMMITTED_RECORDS_SURVIVE, 17),
        Instant,
    ),
    needed(
        Rule::LeavingIsrEntersElr,
        M3,
        Breaks(COMMITTED_RECORDS_SURVIVE, 17),
        Instant,
    ),
    needed(
        Rule::ElrEmptiesAtMinIsr,
        "safe",
        Breaks(STRONG_ISR, 13),
        Seconds,
    ),
    needed(
        Rule::ElrEmptiesAtExactlyMinIsr,
        "safe",
        Breaks(STRONG_ISR, 11),
        Instant,
    ),
    needed(
        Rule::UncleanShutdownLeavesElr,
        M3,
        Breaks(STRONG_ISR, 15),
        Instant,
    ),
    needed(Rule::RestartLeavesIsr, M3, Breaks(STRONG_ISR, 12), Instant),
    needed(
        Rule::DeathNoticedByRemovalOnly,
        "safe",
        Breaks(STRONG_ISR, 9),
        Instant,
    ),
    // LeaderAndIsr.
    needed(
        Rule::TakesOnlyNewerEpoch,
        M3,
        Breaks(COMMITTED_RECORDS_SURVIVE, 14),
        Seconds,
    ),
    needed(
        Rule::RestartedTakesCurrentEpoch,
        M3,
        Stuck(RECOVERABLE, 4),
        Seconds,
    ),
    needed(
        Rule::NewLeaderForgetsFollowers,
        M3,
        Breaks(STRONG_ISR, 16),
        Instant,
    ),
    // Produce.
    needed(
        Rule::ProduceAtExactlyMinIsr,
        M3,
        Unreached(SOMETIMES_COMMIT),
        Instant,
    ),
    // Fetch.
    needed(
        Rule::FetchFromLeaderEpoch,
        M3,
        Breaks(STRONG_ISR, 15),
        Instant,
    ),
    needed(
        Rule::LastFetchedEpochChecked,
        "safe",
        Breaks(STRONG_ISR, 10),
        Instant,
    ),
    needed(
        Rule::DivergenceTruncatesToOwnEnd,
        "safe",
        Stuck(RECOVERABLE, 8),
        Minutes,
    ),
    needed(
        Rule::LeaderCachesOwnEpoch,
        "safe",
        Stuck(RECOVERABLE, 8),
        Minutes,
    ),
    needed(
        Rule::FollowerHwWithinLog,
        "safe",
        Breaks(HW_WITHIN_LOG, 11),
        Instant,
    ),
    needed(Rule::FetchClearsStale, M3, Stuck(RECOVERABLE, 7), Seconds),
    // High watermark.
    needed(Rule::HwWaitsForMinIsr, M3, Breaks(STRONG_ISR, 8), Instant),
    needed(Rule::HwAtExactlyMinIsr, M3, Stuck(RECOVERABLE, 5), Seconds),
    needed(Rule::HwOverIsr, M3, Breaks(STRONG_ISR, 4), Instant),
    needed(
        Rule::HwWaitsForUnknownMember,
        M3,
        Breaks(STRONG_ISR, 4),
        Instant,
    ),
    // ISR changes.
    needed(
        Rule::IsrChangeByTrueLeader,
        M3,
        Breaks(LEADER_IN_ISR, 6),
        Instant,
    ),
    needed(
        Rule::AlterPartitionFromControllerIsr,
        M3,
        Breaks(STRONG_ISR, 14),
        Instant,
    ),
    needed(Rule::ExpandNotStale, M3, Breaks(STRONG_ISR, 13), Instant),
    needed(
        Rule::ExpandAtLeaderHw,
        "safe",
        Breaks(STRONG_ISR, 11),
        Instant,
    ),
    needed(
        Rule::ExpandAtExactlyLeaderHw,
        M3,
        Stuck(RECOVERABLE, 1),
        Seconds,
    ),
    needed(
        Rule::ExpandAtEpochStart,
        "safe",
        Breaks(STRONG_ISR, 14),
        Seconds,
    ),
    needed(
        Rule::ExpandAtExactlyEpochStart,
        M3,
        Stuck(RECOVERABLE, 1),
        Seconds,
    ),
    // Crash and restart.
    needed(
        Rule::RestartWaitsForNewLeader,
        M3,
        Breaks(COMMITTED_RECORDS_SURVIVE, 13),
        Instant,
    ),
];

/// Why no preset needs a rule (`spec/differences.md` says more).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    /// Another rule, or the order of other steps, already does what it does.
    Redundant,
    /// It acts only where no preset's bounds reach.
    Unreachable,
    /// It has an effect, but no property reads it.
    Unobserved,
}

/// The rules no preset needs. Knocked out, `safe-min-isr-3` and `safe`
/// with one record still hold everything they expect, with the state
/// counts `spec/differences.md` gives (which also gives `safe`'s, measured
/// once: a minute or more each).
const NOT_NEEDED: &[(Rule, Why)] = &[
    (Rule::ElectLiveReplica, Why::Redundant),
    (Rule::LastKnownLeaderElection, Why::Unreachable),
    (Rule::LastKnownLeaderAcceptable, Why::Redundant),
    (Rule::UncleanLeaderBecomesIsr, Why::Unreachable),
    (Rule::UncleanElectionRecovering, Why::Unobserved),
    (Rule::UncleanElectionEmptiesElr, Why::Redundant),
    (Rule::LastLeaderRemembered, Why::Unreachable),
    (Rule::LastLeaderForgotten, Why::Unreachable),
    (Rule::FencedNotAcceptable, Why::Unobserved),
    (Rule::AlterPartitionRefusesFenced, Why::Redundant),
    (Rule::FollowerForgetsLeadership, Why::Redundant),
    (Rule::ProduceNeedsMinIsr, Why::Redundant),
    (Rule::FetchFromLeader, Why::Redundant),
    (Rule::UnknownEpochOutOfRange, Why::Unreachable),
    (Rule::AheadOfLeaderTruncates, Why::Redundant),
    (Rule::LeaderLearnsFetchOffset, Why::Unobserved),
    (Rule::HwWaitsForCaughtUpFollower, Why::Unobserved),
    (Rule::HwSkipsStaleFollower, Why::Unobserved),
    (Rule::AckNeedsMinIsr, Why::Redundant),
    (Rule::ShrinkOnlyLagging, Why::Unobserved),
    (Rule::ExpandNeedsFetch, Why::Redundant),
    (Rule::ExpandNotShortOfEpochStart, Why::Unobserved),
    (Rule::LeaderLearnsIsr, Why::Redundant),
];

fn preset(name: &str) -> &'static Preset {
    Preset::find(name).unwrap_or_else(|| panic!("no preset {name}"))
}

/// An exhaustive search of `cfg`, or (for an always-property) one that stops
/// at the level of its first counterexample.
fn search(cfg: Config, shows: Shows) -> Report {
    let stop_at = match shows {
        Breaks(p, _) => StopAt::Property(p),
        Stuck(..) | Unreached(_) => StopAt::Never,
    };
    let opts = RunOptions {
        stop_at,
        ..RunOptions::new(2, Search::Graph)
    };
    run::run(cfg, None, None, &opts, |_| {})
}

/// `rule` knocked out on `cfg` shows what `shows` says; the run's report.
fn assert_shows(rule: Rule, what: &str, cfg: Config, shows: Shows) -> Report {
    let report = search(rule.knocked_out(cfg), shows);
    let name = match shows {
        Breaks(p, _) | Stuck(p, _) | Unreached(p) => p,
    };
    let p = report
        .properties
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("{name} is reported"));
    let context = format!("{rule} knocked out on {what}");
    match shows {
        Breaks(_, steps) | Stuck(_, steps) => {
            assert_eq!(
                p.verdict,
                Verdict::Counterexample,
                "{context}: \"{name}\" should break"
            );
            let found = p.counterexample.as_ref().map(|c| c.len() - 1);
            assert_eq!(found, Some(steps), "{context}: \"{name}\"'s shortest path");
        }
        Unreached(_) => {
            assert_eq!(report.ended, Ended::Exhaustive, "{context}");
            assert_eq!(
                p.verdict,
                Verdict::NotReached,
                "{context}: \"{name}\" should never be reached"
            );
        }
    }
    eprintln!("{context}: {shows:?} in {:.1} s", report.progress.seconds);
    report
}

fn check_needed(costs: &[Cost]) {
    for n in NEEDED.iter().filter(|n| costs.contains(&n.cost)) {
        let _ = assert_shows(n.rule, n.preset, preset(n.preset).config, n.shows);
    }
}

#[test]
fn every_rule_is_needed_by_a_measured_preset_or_explained() {
    let differences = differences();
    for &rule in Rule::all() {
        let needed: Vec<_> = NEEDED.iter().filter(|n| n.rule == rule).collect();
        let explained: Vec<_> = NOT_NEEDED.iter().filter(|(r, _)| *r == rule).collect();
        assert_eq!(
            needed.len() + explained.len(),
            1,
            "{rule}: one entry, in NEEDED or NOT_NEEDED"
        );
        for (_, why) in explained {
            // Its row in the table: "| `rule` | why: ... |".
            let row = format!("| `{rule}` | {}", format!("{why:?}").to_lowercase());
            assert!(
                differences.contains(&row),
                "spec/differences.md's table has the row {row:?}"
            );
        }
        for n in needed {
            assert!(
                preset(n.preset).measured.is_some(),
                "{rule}: {} is checked exhaustively (a measured preset)",
                n.preset
            );
        }
    }
}

/// The knock-outs that take under 2.5 s each (21 of them, about 20 s).
#[test]
fn each_rule_knocked_out_breaks_what_it_guards_quick() {
    check_needed(&[Instant]);
}

/// The knock-outs that take 2.5 to 20 s each (11, about a minute), and
/// the two that search all of `safe` for a progress verdict.
#[test]
fn each_rule_knocked_out_breaks_what_it_guards_long() {
    if !long_tier::enabled("knock-outs of seconds each, and two that search all of safe") {
        return;
    }
    check_needed(&[Seconds, Minutes]);
}

/// The check can fail: a rule's knock-out named with the wrong property (or
/// a rule that is not knocked out at all) is caught.
#[test]
#[should_panic(
    expected = "hw-over-isr knocked out on safe-min-isr-3: \"strong ISR\"'s shortest path"
)]
fn a_wrong_length_is_caught() {
    assert_shows(
        Rule::HwOverIsr,
        M3,
        preset(M3).config,
        Breaks(STRONG_ISR, 5),
    );
}

#[test]
#[should_panic(expected = "\"strong ISR\" should break")]
fn a_rule_that_changes_nothing_is_caught() {
    // Nothing reads the recovery state: knocking it out breaks nothing.
    assert_shows(
        Rule::UncleanElectionRecovering,
        M3,
        preset(M3).config,
        Breaks(STRONG_ISR, 4),
    );
}

/// spec/differences.md's text.
fn differences() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../spec/differences.md"
    ))
    .expect("spec/differences.md is readable")
}

/// The unique states `rule`'s row in spec/differences.md gives for its
/// knock-out at each measured bound ("1,151,877 / 1,059,765 / ...").
fn documented_counts(differences: &str, rule: Rule) -> Vec<Option<u64>> {
    let start = format!("| `{rule}` |");
    let row = differences
        .lines()
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("spec/differences.md has a row for `{rule}`"));
    let cell = row.split('|').nth(3).unwrap_or_default();
    cell.split('/')
        .map(|n| n.trim().replace(',', "").parse().ok())
        .collect()
}

/// The rules no preset needs break nothing at the small presets' bounds,
/// with the state counts spec/differences.md gives: were one to become
/// needed, it would move to [`NEEDED`].
#[test]
fn the_rules_not_needed_break_nothing() {
    if !long_tier::enabled(&format!(
        "{} knock-outs at two bounds, minutes",
        NOT_NEEDED.len()
    )) {
        return;
    }
    let safe = preset("safe");
    let bounds = [
        ("safe-min-isr-3", preset(M3).config, preset(M3).expect),
        (
            "safe with one record",
            Config {
                records: 1,
                ..safe.config
            },
            safe.expect,
        ),
    ];
    let differences = differences();
    for &(rule, _) in NOT_NEEDED {
        let documented = documented_counts(&differences, rule);
        for (i, &(what, cfg, expect)) in bounds.iter().enumerate() {
            let opts = RunOptions::new(2, Search::Graph);
            let report = run::run(rule.knocked_out(cfg), None, Some(expect), &opts, |_| {});
            assert!(
                report.mismatches.is_empty(),
                "{rule} knocked out on {what}: {:?}",
                report.mismatches
            );
            assert_eq!(
                documented.get(i).copied().flatten(),
                Some(report.progress.unique_states),
                "{rule} knocked out on {what}: the unique states spec/differences.md gives"
            );
            eprintln!(
                "{rule} knocked out on {what}: {} unique states, as expected, in {:.1} s",
                report.progress.unique_states, report.progress.seconds
            );
        }
    }
}

/// `SAFE` with one record and two unclean crashes: the bounds where the
/// last-known-leader election first happens (spec/history.md, "the last
/// known leader"). There it can lose a committed record, so no preset that
/// holds can include it.
fn two_unclean_crashes() -> Config {
    Config {
        records: 1,
        unclean_crashes: 2,
        ..SAFE
    }
}

/// Every verdict of `report` but the sometimes-properties'.
fn verdicts(report: &Report) -> Vec<(&'static str, Verdict)> {
    report
        .properties
        .iter()
        .filter(|p| p.kind != "sometimes")
        .map(|p| (p.name, p.verdict))
        .collect()
}

/// KIP-966's last-known-leader election, needed only beyond the presets:
/// where it first happens it is the step that loses a committed record, and
/// without it a partition it would have brought back cannot heal. Its
/// clauses there: the ISR clause is needed; without the remembered leader
/// no one is elected, and the partition is offline by design (nothing
/// breaks); a leader remembered past an election changes no verdict.
#[test]
fn the_last_known_leader_election_is_needed_where_it_loses_a_record() {
    if !long_tier::enabled(
        "safe with one record and two unclean crashes, searched whole five times, minutes",
    ) {
        return;
    }
    let cfg = two_unclean_crashes();
    let what = "safe, one record, two unclean crashes";
    let with = search(cfg, Stuck(RECOVERABLE, 0));
    let p = with
        .properties
        .iter()
        .find(|p| p.name == COMMITTED_RECORDS_SURVIVE)
        .expect("reported");
    let trace = p.counterexample.as_ref().expect("a lost committed record");
    let elected = trace.iter().rev().find_map(|s| match s.raw.1 {
        Some(Action::ControllerElectLeader { election, .. }) => Some(election),
        _ => None,
    });
    assert_eq!(elected, Some(Election::LastKnownLeader));

    let without = assert_shows(
        Rule::LastKnownLeaderElection,
        what,
        cfg,
        Stuck(RECOVERABLE, 4),
    );
    for p in without.properties.iter().filter(|p| p.kind == "always") {
        assert_eq!(
            p.verdict,
            Verdict::Holds,
            "without the election: {}",
            p.name
        );
    }
    let _ = assert_shows(
        Rule::UncleanLeaderBecomesIsr,
        what,
        cfg,
        Breaks(LEADER_IN_ISR, 7),
    );

    let nobody = search(
        Rule::LastLeaderRemembered.knocked_out(cfg),
        Stuck(RECOVERABLE, 0),
    );
    for (name, verdict) in verdicts(&nobody) {
        assert_eq!(verdict, Verdict::Holds, "no leader remembered: {name}");
    }
    let kept = search(
        Rule::LastLeaderForgotten.knocked_out(cfg),
        Stuck(RECOVERABLE, 0),
    );
    assert_eq!(
        verdicts(&kept),
        verdicts(&with),
        "a leader remembered past an election"
    );
}

/// Whether `property` holds in `s` under `cfg`.
fn holds(cfg: &Config, s: &State, property: &str) -> bool {
    let p = properties()
        .into_iter()
        .find(|p| p.name == property)
        .expect("the property");
    (p.condition)(&PartitionModel::new(*cfg), s)
}

/// Under `safe`: A leads epoch 0 and commits `a` with B (ISR {A,B}); B
/// takes over in epoch 1 (a leader move) without having learnt the HW, so
/// its HW is 0 and its epoch starts at 1; C, with an empty log, follows B
/// and fetches from offset 0. B now knows C at offset 0: one short of its
/// epoch start.
fn c_fetched_from_b() -> State {
    let cfg = SAFE;
    let elect_b = Action::ControllerElectLeader {
        replica: B,
        election: Election::Clean,
    };
    run(
        &cfg,
        &led(&cfg),
        &[
            produce(A, 0),
            shrink(A, C),
            fetch(B, A),
            fetch(B, A),
            advance(A, 1),
            elect_b,
            lead(B, 1),
            follow(C, 1),
            fetch(C, B),
        ],
    )
}

/// The epoch-start boundary of KIP-320's ISR join (`Partition.isFollowerInSync`:
/// the follower's LEO, as the leader knows it, at or beyond the leader's
/// epoch start). One short of it is admitted by the knock-out
/// `expand-not-short-of-epoch-start`, which breaks nothing in the model: a
/// model fetch appends its records in the step in which the leader learns
/// the fetch offset, so a follower known one short already holds the record
/// there. In Kafka the leader learns the fetch offset before the follower
/// appends the response (`Partition.fetchRecords` runs
/// `updateFollowerFetchState`, which runs `maybeExpandIsr`, as it builds the
/// response), and the response may never be appended (lost, or the follower
/// is made leader first and drops it). That state is built here by hand,
/// from the model's own: there the boundary decides whether a committed
/// record is lost.
#[test]
fn the_epoch_start_boundary_matters_once_a_fetch_response_is_not_appended() {
    let knocked = Rule::ExpandNotShortOfEpochStart.knocked_out(SAFE);
    let s = c_fetched_from_b();
    let b = s.replica(B);
    assert_eq!(b.leader_epoch_start(1), 1, "B's epoch 1 starts at offset 1");
    assert_eq!(b.follower_leo[C as usize], Some(0), "B knows C at 0");
    assert_eq!(
        s.replica(C).leo(),
        1,
        "the model's C appended `a` in the fetch"
    );
    // The rule refuses C; the knock-out takes it, harmlessly: C holds `a`.
    assert_disabled(&SAFE, &s, expand(B, C));
    let elect_c = Action::ControllerElectLeader {
        replica: C,
        election: Election::Clean,
    };
    let then = [expand(B, C), elect_c, lead(C, 2)];
    let end = run(&knocked, &s, &then);
    assert!(holds(&knocked, &end, COMMITTED_RECORDS_SURVIVE));

    // Kafka's C when the response is not appended: the same state, C's log
    // still empty. The rule still refuses it; the knock-out takes it, C is
    // elected (a leader move) and `a`, committed in epoch 0, is lost.
    let mut kafka = s;
    kafka.replica_mut(C).truncate_to(0);
    assert_disabled(&SAFE, &kafka, expand(B, C));
    let end = run(&knocked, &kafka, &then);
    assert!(!holds(&knocked, &end, COMMITTED_RECORDS_SURVIVE));
}
