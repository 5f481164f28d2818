//! What the random lockstep covers: its runs of a preset, replayed on the
//! model alone (the model chooses every step, so the implementation, on
//! files or in memory, goes where the model goes), against the preset's
//! whole state space, up to symmetry (see `coverage`). Printed by kind of
//! action; the figures are in conformance/README.md. CI measures
//! `tla-kip320`; `safe`'s measure is an ignored test, run by hand.

mod common;

use common::{guided_runs, CASES, IN_MEMORY_CASES, STEPS};
use highwater_conformance::coverage::{Share, Space, Visits};
use highwater_model::actions::{apply, enabled};
use highwater_model::presets::Preset;
use highwater_model::{Config, PartitionModel};
use std::cell::RefCell;
use std::time::Instant;

/// The share of `name`'s state space its random lockstep runs visit: the
/// runs on files, then those in memory.
fn coverage(name: &str) -> (Share, Share) {
    let cfg: Config = Preset::find(name).expect("a preset").config;
    let started = Instant::now();
    let space = Space::explore(&cfg);
    println!(
        "{name}: state space explored in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let on_files = runs_share(&cfg, &space, name, CASES);
    let in_memory = runs_share(
        &cfg,
        &space,
        &format!("{name} (in memory)"),
        IN_MEMORY_CASES,
    );
    (on_files, in_memory)
}

/// The share of `space` the `cases` runs named `name` visit.
fn runs_share(cfg: &Config, space: &Space, name: &str, cases: u32) -> Share {
    let cfg = *cfg;
    let visits = RefCell::new(Visits::default());
    guided_runs(name, cases, STEPS, |choices, guide| {
        let mut s = PartitionModel::new(cfg).init_state();
        let mut v = visits.borrow_mut();
        v.reached(&s);
        guide.visit(&s);
        let mut actions = Vec::new();
        for &c in choices {
            actions.clear();
            enabled(&cfg, &s, &mut actions);
            if actions.is_empty() {
                break;
            }
            let a = guide.pick(&cfg, &s, &actions, c);
            v.took(&s, a);
            s = apply(&cfg, &s, a).expect("an enabled action changes the state");
            v.reached(&s);
            guide.visit(&s);
        }
        Ok(())
    })
    .expect("runs on the model alone do not fail");
    let share = visits.borrow().share_of(space);
    println!("{name}: {cases} random lockstep runs of up to {STEPS} steps cover\n{share}");
    share
}

/// Plausible figures: something visited, never more than there is, and
/// more runs visiting more.
fn plausible(on_files: &Share, in_memory: &Share) {
    for share in [on_files, in_memory] {
        assert!(share.states.0 > 0 && share.states.0 <= share.states.1);
        assert!(share.transitions.0 > 0 && share.transitions.0 <= share.transitions.1);
    }
    assert!(in_memory.states.0 > on_files.states.0);
}

/// Explores `safe`'s 20 million states first, over two minutes: a
/// measure for conformance/README.md, run by hand
/// (`cargo test --release -p highwater-conformance --test lockstep_coverage -- --ignored`);
/// the smaller preset below runs in every tier.
#[test]
#[ignore = "a measure run by hand: explores all of safe first"]
fn the_random_lockstep_reports_what_it_covers_of_safe() {
    let (on_files, in_memory) = coverage("safe");
    plausible(&on_files, &in_memory);
}

#[test]
fn the_random_lockstep_reports_what_it_covers_of_tla_kip320() {
    let (on_files, in_memory) = coverage("tla-kip320");
    plausible(&on_files, &in_memory);
}
