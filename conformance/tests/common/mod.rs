//! The random lockstep's generator, shared by the lockstep runs and the
//! measure of what they cover.
#![allow(dead_code)]

use highwater_conformance::lockstep::Guide;
pub mod binary;
pub mod concurrent;
pub mod scripted;

use highwater_model::state::{MAX_EPOCH, MAX_RECORDS};
use highwater_model::Config;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};

/// Runs per configuration, and actions per run (preset bounds, wide bounds).
pub const CASES: u32 = 64;
/// Runs per configuration in memory.
pub const IN_MEMORY_CASES: u32 = 512;
pub const STEPS: usize = 60;
pub const WIDE_STEPS: usize = 80;

/// The seed of the random runs: `HIGHWATER_LOCKSTEP_SEED` when set (to
/// explore new runs), else a fixed one, so that CI's verdict does not depend
/// on luck. A failure prints the seed and the steps, either of which repeats
/// it.
pub fn seed() -> u64 {
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

/// The runner of the runs named `name`: `cases` runs from `seed`.
pub fn runner(seed: u64, name: &str, cases: u32) -> TestRunner {
    let config = RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    };
    TestRunner::new_with_rng(config, rng(seed, name))
}

/// One run: a choice per step (see `lockstep::pick`).
pub fn choices(max_steps: usize) -> impl Strategy<Value = Vec<u16>> {
    prop::collection::vec(any::<u16>(), 0..=max_steps)
}

/// `cfg` at the model's widest bounds: longer logs, more epochs, crashes
/// and leader moves than any preset checks exhaustively.
pub fn wide(cfg: &Config) -> Config {
    Config {
        records: MAX_RECORDS as u8,
        max_epoch: MAX_EPOCH,
        clean_crashes: 2,
        unclean_crashes: 2,
        leader_moves: 3,
        mutation: None,
        ..*cfg
    }
}

/// Runs `cases` random runs named `name`, each `run(choices, guide)` with
/// the [`Guide`] as earlier runs left it; the runs it visits teach it. A
/// failing run is shrunk with the guide frozen as it was when that run
/// began, so that each shrunk run is chosen as it was. Returns how many
/// states the runs visited, or the failure.
pub fn guided_runs(
    name: &str,
    cases: u32,
    max_steps: usize,
    run: impl Fn(&[u16], &mut Guide) -> Result<(), TestCaseError>,
) -> Result<usize, String> {
    let seed = seed();
    let learnt = std::cell::RefCell::new(Guide::default());
    let frozen: std::cell::RefCell<Option<Guide>> = std::cell::RefCell::new(None);
    let result = runner(seed, name, cases).run(&choices(max_steps), |choices| {
        let at_start = frozen
            .borrow()
            .clone()
            .unwrap_or_else(|| learnt.borrow().clone());
        let mut guide = at_start.clone();
        let outcome = run(&choices, &mut guide);
        let mut f = frozen.borrow_mut();
        match (&outcome, f.is_none()) {
            // After a failure every call shrinks it: the guide stays.
            (Err(_), true) => *f = Some(at_start),
            (Ok(()), true) => *learnt.borrow_mut() = guide,
            _ => {}
        }
        outcome
    });
    result
        .map(|()| learnt.borrow().visited())
        .map_err(|e| format!("{name} (seed {seed}): {e}"))
}
