//! Every action `enabled` lists changes the state. Stateright's simulation
//! checker rebuilds its paths from action indices and cannot cope with an
//! action that changes nothing, and the explorer would show a step that
//! does nothing; so `enabled` must be exact.

mod common;

use highwater_model::actions::apply;
use highwater_model::presets::PRESETS;
use highwater_model::render::state_table;

#[test]
fn every_enabled_action_changes_the_state_in_every_preset() {
    for p in PRESETS {
        // Small bounds keep this quick; the shapes of states are the same.
        let mut cfg = p.config;
        cfg.records = cfg.records.min(2);
        cfg.max_epoch = cfg.max_epoch.min(2);
        common::explore(
            &cfg,
            300_000,
            |_| true,
            |s, actions| {
                for &a in actions {
                    assert!(
                        apply(&cfg, s, a).is_some(),
                        "{}: {a} is enabled but changes nothing in\n{}",
                        p.name,
                        state_table(s)
                    );
                }
            },
        );
    }
}
