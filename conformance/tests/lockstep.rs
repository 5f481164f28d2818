//! Lockstep over random runs of every preset: after each step the
//! implementation's files and state, abstracted, equal the model's state;
//! the implementation refuses every action the model's rules forbid (or
//! takes it without a visible change); and under the current rules the
//! implementation's own property checks find nothing broken. A failure
//! shrinks and prints both states.

use highwater_conformance::lockstep::Lockstep;
use highwater_model::presets::{Expect, PRESETS};
use highwater_model::state::{MAX_EPOCH, MAX_RECORDS};
use highwater_model::{Action, Config};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// The action's name without its arguments, e.g. "FollowerFetch".
fn kind(a: &Action) -> String {
    let s = a.to_string();
    s.split('(').next().unwrap_or(&s).to_string()
}

/// The seed of the random runs: `HIGHWATER_LOCKSTEP_SEED` when set (to
/// explore new runs), else a fixed one, so that CI's verdict does not depend
/// on luck. A failure prints the seed and the steps, either of which repeats
/// it.
fn seed() -> u64 {
    std::env::var("HIGHWATER_LOCKSTEP_SEED")
        .ok()
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("HIGHWATER_LOCKSTEP_SEED={s:?} is not a number"))
        })
        .unwrap_or(20261129)
}

fn rng(seed: u64, run: &str) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    for (i, b) in run.bytes().enumerate() {
        bytes[8 + i % 24] ^= b;
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// Random runs of `config`, each up to `max_steps` actions, counting the
/// actions taken by kind into `taken`; with `safe`, the implementation's
/// own safety checks must pass after every step.
fn lockstep_runs(
    name: &str,
    config: &Config,
    safe: bool,
    cases: u32,
    max_steps: usize,
    taken: &RefCell<BTreeMap<String, usize>>,
) {
    let seed = seed();
    let config_runner = RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    };
    let mut runner = TestRunner::new_with_rng(config_runner, rng(seed, name));
    let strategy = prop::collection::vec(any::<u16>(), 0..=max_steps);
    let result = runner.run(&strategy, |choices| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let fail = |d: &dyn std::fmt::Display| TestCaseError::fail(d.to_string());
        let mut both = Lockstep::start(config, dir.path()).map_err(|d| fail(&d))?;
        both.walk(&choices, |both| {
            if let Some(a) = both.steps().last() {
                *taken.borrow_mut().entry(kind(a)).or_default() += 1;
            }
            both.check_refusals()?;
            if !safe {
                return Ok(());
            }
            let snap = both
                .implementation()
                .snapshot()
                .map_err(|e| both.fail(e.to_string()))?;
            match snap.broken_properties().first() {
                Some(b) => Err(both.fail(format!("{}: {}", b.property, b.detail))),
                None => Ok(()),
            }
        })
        .map_err(|d| fail(&d))
    });
    if let Err(e) = result {
        panic!("{name} (seed {seed}): the implementation left the model\n{e}");
    }
}

#[test]
fn the_implementation_moves_as_the_model_in_every_preset() {
    let taken = RefCell::new(BTreeMap::new());
    for p in PRESETS {
        let safe = matches!(p.expect, Expect::Holds { .. });
        lockstep_runs(p.name, &p.config, safe, 64, 60, &taken);
        // Lockstep is not exhaustive, so it can afford the model's widest
        // bounds: longer logs, more epochs, crashes and leader moves. The
        // preset's verdict is not claimed there (a second unclean crash, for
        // one, defeats min.insync.replicas=1), only the agreement.
        let wide = Config {
            records: MAX_RECORDS as u8,
            max_epoch: MAX_EPOCH,
            clean_crashes: 2,
            unclean_crashes: 2,
            leader_moves: 3,
            mutation: None,
            ..p.config
        };
        let name = format!("{} (wide bounds)", p.name);
        lockstep_runs(&name, &wide, false, 64, 80, &taken);
    }
    let taken = taken.into_inner();
    // Every kind of action was exercised, so no part of the comparison was
    // skipped by chance.
    for expected in [
        "ControllerElectLeader",
        "ControllerShrinkIsr",
        "BecomeLeader",
        "BecomeFollower",
        "Produce",
        "FollowerFetch",
        "LeaderAdvanceHw",
        "LeaderShrinkIsr",
        "LeaderExpandIsr",
        "LeaderLearnsIsr",
        "Flush",
        "Crash",
        "Restart",
    ] {
        assert!(
            taken.get(expected).is_some_and(|&n| n > 0),
            "no {expected} was taken: {taken:?}"
        );
    }
    println!("actions taken in lockstep: {taken:?}");
}
