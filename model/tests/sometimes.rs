//! The sometimes-properties witness the steps they are named after: each is
//! reached in `safe`, and never once the step it needs is taken away.

mod common;

use highwater_model::presets::SAFE;
use highwater_model::properties::{properties, SOMETIMES_COMMIT, SOMETIMES_FOLLOWER_REJOINS};
use highwater_model::{Action, PartitionModel, State};

/// Whether the sometimes-property `name` holds in some state of `safe`
/// (with one record, for speed) reachable by the actions `keep` allows.
fn reached(name: &str, keep: impl Fn(&Action) -> bool) -> bool {
    let cfg = highwater_model::Config { records: 1, ..SAFE };
    let model = PartitionModel::new(cfg);
    let property = properties()
        .into_iter()
        .find(|p| p.name == name)
        .expect("a property of that name");
    let mut found = false;
    common::explore(&cfg, usize::MAX, keep, |s: &State, _| {
        found |= (property.condition)(&model, s);
    });
    found
}

#[test]
fn a_follower_rejoins_only_through_an_isr_expansion() {
    assert!(reached(SOMETIMES_FOLLOWER_REJOINS, |_| true));
    assert!(!reached(SOMETIMES_FOLLOWER_REJOINS, |a| !matches!(
        a,
        Action::LeaderExpandIsr { .. }
    )));
}

#[test]
fn a_record_commits_only_through_an_hw_advance() {
    assert!(reached(SOMETIMES_COMMIT, |_| true));
    assert!(!reached(SOMETIMES_COMMIT, |a| !matches!(
        a,
        Action::LeaderAdvanceHw { .. }
    )));
}
