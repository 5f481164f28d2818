//! Lockstep over random runs of every preset: after each step the
//! implementation's files and state, abstracted, equal the model's state;
//! the implementation refuses every action the model's rules forbid (or
//! takes it without a visible change); and under the current rules the
//! implementation's own property checks find nothing broken. A failure
//! shrinks and prints both states.

mod common;
#[path = "../../testkit/long_tier.rs"]
mod long_tier;

use common::{guided_runs, wide, CASES, IN_MEMORY_CASES, STEPS, WIDE_STEPS};
use highwater::replication::ReplicaLog;
use highwater_conformance::lockstep::{Divergence, Lockstep};
use highwater_model::presets::{Expect, PRESETS};
use highwater_model::{Action, Config};
use proptest::prelude::*;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// The action's name without its arguments, e.g. "FollowerFetch".
fn kind(a: &Action) -> String {
    let s = a.to_string();
    s.split('(').next().unwrap_or(&s).to_string()
}

/// Random runs of `config` (see `common::guided_runs`), each up to
/// `max_steps` actions, on the implementation `start` builds, counting the
/// actions taken by kind into `taken`; with `safe`, the implementation's
/// own safety checks must pass after every step. Returns the states visited.
fn lockstep_runs<L: ReplicaLog>(
    name: &str,
    config: &Config,
    safe: bool,
    cases: u32,
    max_steps: usize,
    taken: &RefCell<BTreeMap<String, usize>>,
    start: impl Fn(&Config, &Path) -> Result<Lockstep<L>, Divergence>,
) -> usize {
    let fail = |d: &dyn std::fmt::Display| TestCaseError::fail(d.to_string());
    let result = guided_runs(name, cases, max_steps, |choices, guide| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut both = start(config, dir.path()).map_err(|d| fail(&d))?;
        both.walk_guided(choices, guide, |both| {
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
    result.unwrap_or_else(|e| panic!("the implementation left the model: {e}"))
}

/// Every kind of action was exercised, so no part of the comparison was
/// skipped by chance.
fn every_kind_taken(taken: &BTreeMap<String, usize>) {
    for expected in [
        "ControllerElectLeader",
        "ControllerShrinkIsr",
        "ControllerUnfence",
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
}

/// On files, at the model's widest bounds (`wide`): longer logs, more
/// epochs, crashes and leader moves. Lockstep is not exhaustive, so it can
/// afford them; the preset's verdict is not claimed there (a second
/// unclean crash, for one, defeats min.insync.replicas=1), only the
/// agreement.
#[test]
fn the_implementation_moves_as_the_model_in_every_preset() {
    let taken = RefCell::new(BTreeMap::new());
    let started = Instant::now();
    for p in PRESETS {
        let name = format!("{} (wide bounds)", p.name);
        let w = wide(&p.config);
        lockstep_runs(&name, &w, false, CASES, WIDE_STEPS, &taken, Lockstep::start);
    }
    let taken = taken.into_inner();
    every_kind_taken(&taken);
    println!(
        "on files, {} presets, {CASES} runs each at wide bounds, in {:.1} s: {taken:?}",
        PRESETS.len(),
        started.elapsed().as_secs_f64()
    );
}

/// On files, at each preset's own bounds, where a preset that holds is
/// claimed to hold along each run too.
#[test]
fn the_implementation_moves_as_the_model_at_each_presets_bounds() {
    if !long_tier::enabled("about 45 s of lockstep on files") {
        return;
    }
    let taken = RefCell::new(BTreeMap::new());
    for p in PRESETS {
        let safe = matches!(p.expect, Expect::Holds { .. });
        lockstep_runs(
            p.name,
            &p.config,
            safe,
            CASES,
            STEPS,
            &taken,
            Lockstep::start,
        );
    }
    every_kind_taken(&taken.into_inner());
}

/// The same runs and more of them, in memory: the implementation's core on
/// `MemoryLog`s, as cheap as the model, so that CI can afford
/// `IN_MEMORY_CASES` runs of every configuration.
#[test]
fn the_in_memory_implementation_moves_as_the_model_in_every_preset() {
    let taken = RefCell::new(BTreeMap::new());
    let started = Instant::now();
    let in_memory = |cfg: &Config, _: &Path| Lockstep::in_memory(cfg);
    let mut visited = 0;
    for p in PRESETS {
        let safe = matches!(p.expect, Expect::Holds { .. });
        let name = format!("{} (in memory)", p.name);
        visited += lockstep_runs(
            &name,
            &p.config,
            safe,
            IN_MEMORY_CASES,
            STEPS,
            &taken,
            in_memory,
        );
        let name = format!("{} (wide bounds, in memory)", p.name);
        let w = wide(&p.config);
        visited += lockstep_runs(
            &name,
            &w,
            false,
            IN_MEMORY_CASES,
            WIDE_STEPS,
            &taken,
            in_memory,
        );
    }
    let taken = taken.into_inner();
    every_kind_taken(&taken);
    println!(
        "in memory, {} presets, {IN_MEMORY_CASES} runs each at their bounds and at wide bounds, \
         {visited} states visited, in {:.1} s: {taken:?}",
        PRESETS.len(),
        started.elapsed().as_secs_f64()
    );
}
