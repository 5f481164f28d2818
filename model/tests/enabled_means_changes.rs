//! Every action `enabled` lists changes the state. Stateright's simulation
//! checker rebuilds its paths from action indices and cannot cope with an
//! action that changes nothing, and the explorer would show a step that
//! does nothing; so `enabled` must be exact.

use highwater_model::actions::{apply, enabled};
use highwater_model::presets::PRESETS;
use highwater_model::{Config, PartitionModel, State};
use std::collections::{HashSet, VecDeque};

/// Breadth-first over every state of `cfg` (up to `limit`), failing on the
/// first enabled action that changes nothing.
const LIMIT: usize = 300_000;

fn check_every_enabled_action_changes_state(name: &str, cfg: &Config, limit: usize) {
    let init = PartitionModel::new(*cfg).init_state();
    let mut seen: HashSet<State> = HashSet::from([init]);
    let mut queue = VecDeque::from([init]);
    let mut actions = Vec::new();
    while let Some(s) = queue.pop_front() {
        actions.clear();
        enabled(cfg, &s, &mut actions);
        for &a in &actions {
            let Some(next) = apply(cfg, &s, a) else {
                panic!(
                    "{name}: {a} is enabled but changes nothing in\n{}",
                    highwater_model::render::state_table(&s)
                );
            };
            if seen.len() < limit && seen.insert(next) {
                queue.push_back(next);
            }
        }
    }
}

#[test]
fn every_enabled_action_changes_the_state_in_every_preset() {
    for p in PRESETS {
        // Small bounds keep this quick; the shapes of states are the same.
        let mut cfg = p.config;
        cfg.records = cfg.records.min(2);
        cfg.max_epoch = cfg.max_epoch.min(2);
        check_every_enabled_action_changes_state(p.name, &cfg, LIMIT);
    }
}
