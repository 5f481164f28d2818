//! Mutation: the implementation run with one of Kafka's old rules (each
//! historical preset's switch: acks, min.insync.replicas, truncation mode,
//! ELR, unclean election) against the model with today's rules. Lockstep,
//! with its check that the implementation refuses what the model forbids,
//! must notice within a bounded number of random runs; otherwise it would
//! not notice that bug either, were it written by mistake. The runs are
//! seeded, so the outcome does not depend on luck.

mod common;

use common::scripted;
use highwater_conformance::lockstep::Lockstep;
use highwater_conformance::mapping::step_config;
use highwater_model::presets::{Expect, PRESETS, SAFE};
use highwater_model::Config;
use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// Old rules whose difference from today's needs a path too particular for
/// random runs: KIP-101's single lookup, fenced, differs from KIP-279's only
/// when a deposed leader wrote in its epoch and the new leader has no record
/// of that epoch or later (14 steps, `spec/history.md#epoch-lookup`).
/// `the_exhaustive_run_notices_every_old_rule_in_the_implementation`
/// (tests/exhaustive.rs) notices it, over every transition.
const BEYOND_RANDOM_RUNS: &[&str] = &["epoch-lookup"];

/// Random runs allowed per mutant.
const RUNS: usize = 400;
const STEPS: usize = 80;

/// `cfg` with today's rules and its own bounds.
fn todays_rules(cfg: &Config) -> Config {
    Config {
        acks: SAFE.acks,
        min_isr: SAFE.min_isr,
        truncation: SAFE.truncation,
        fencing: SAFE.fencing,
        elr: SAFE.elr,
        unclean_election: SAFE.unclean_election,
        ..*cfg
    }
}

#[test]
fn lockstep_notices_every_historical_rule_in_the_implementation() {
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut missed = Vec::new();
    for p in PRESETS
        .iter()
        .filter(|p| matches!(p.expect, Expect::Breaks(_)))
    {
        let model = todays_rules(&p.config);
        let mut caught = None;
        for run in 1..=RUNS {
            let choices: Vec<u16> = (0..STEPS).map(|_| rng.next_u32() as u16).collect();
            let dir = tempfile::tempdir().expect("a temporary directory");
            let result = Lockstep::start_with(&model, step_config(&p.config), dir.path()).and_then(
                |mut both| {
                    both.check_refusals()?;
                    both.walk(&choices, Lockstep::check_refusals)
                },
            );
            if let Err(d) = result {
                caught = Some((run, d));
                break;
            }
        }
        match caught {
            Some((run, d)) => println!("{}: noticed in run {run}: {}", p.name, d.what),
            None if BEYOND_RANDOM_RUNS.contains(&p.name) => println!(
                "{}: not noticed in {RUNS} random runs (the exhaustive run notices it)",
                p.name
            ),
            None => missed.push(p.name),
        }
    }
    assert!(missed.is_empty(), "lockstep did not notice: {missed:?}");
}

/// The model's leader HW waits for a caught-up follower outside the ISR
/// (Kafka's `shouldWaitForReplicaToJoinIsr`). Holding the HW lower breaks
/// no property, so only lockstep notices an implementation that never
/// waits (the `hw-over-isr-only` mutation): it refuses the HW the model
/// offers. A scripted path, as a random one seldom leaves a follower caught
/// up outside the ISR with a record above it.
#[test]
fn lockstep_notices_an_implementation_whose_hw_never_waits() {
    use highwater_model::Action::*;
    let (a, b, c) = (0, 1, 2);
    let mut path = scripted::leads(a, 0, &[b, c]);
    path.extend([
        LeaderShrinkIsr {
            leader: a,
            follower: c,
        },
        Produce {
            leader: a,
            record: 0,
        },
        FollowerFetch {
            follower: c,
            leader: a,
        },
        FollowerFetch {
            follower: c,
            leader: a,
        },
        Produce {
            leader: a,
            record: 1,
        },
        FollowerFetch {
            follower: b,
            leader: a,
        },
        FollowerFetch {
            follower: b,
            leader: a,
        },
        LeaderAdvanceHw { leader: a, hw: 1 },
    ]);
    let mutated = Config {
        mutation: Some(highwater_model::config::Mutation::HwOverIsrOnly),
        ..SAFE
    };
    let run = |imp: &Config| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        Lockstep::start_with(&SAFE, step_config(imp), dir.path()).and_then(|mut both| {
            for &action in &path {
                both.step(action)?;
                both.check_refusals()?;
            }
            Ok(())
        })
    };
    if let Err(d) = run(&SAFE) {
        panic!("today's implementation must follow the path: {d}");
    }
    let d = run(&mutated).expect_err("lockstep must notice the HW that never waits");
    assert!(
        d.what.contains("refused LeaderAdvanceHw(A, hw 1)"),
        "{}",
        d.what
    );
}

/// The implementation run with the rule before truncation on fetch (KIP-279's
/// OffsetsForLeaderEpoch exchange when following) against the model's
/// `safe`: lockstep must notice, or the implementation's truncation on fetch
/// would go unchecked (a new follower there follows at once and truncates by
/// its fetches).
#[test]
fn lockstep_notices_the_rule_before_truncation_on_fetch() {
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut imp = step_config(&SAFE);
    imp.replication.truncation = highwater::replication::TruncationMode::EpochIterative;
    let noticed = (1..=RUNS).find_map(|run| {
        let choices: Vec<u16> = (0..STEPS).map(|_| rng.next_u32() as u16).collect();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let result = Lockstep::start_with(&SAFE, imp.clone(), dir.path()).and_then(|mut both| {
            both.check_refusals()?;
            both.walk(&choices, Lockstep::check_refusals)
        });
        result.err().map(|d| (run, d.what))
    });
    let (run, what) = noticed.expect("lockstep notices KIP-279's exchange under safe");
    println!("noticed in run {run}: {what}");
}
