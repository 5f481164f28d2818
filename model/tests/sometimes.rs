//! The sometimes-properties witness the steps they are named after: each is
//! reached in `safe`, and never once the step it needs is taken away.

mod common;
#[path = "../../testkit/long_tier.rs"]
mod long_tier;

use highwater_model::presets::SAFE;
use highwater_model::properties::{
    premises, properties, safety_names, ACKNOWLEDGED_RECORDS_SURVIVE,
    SOMETIMES_ACKED_OUTLIVES_LEADER, SOMETIMES_ACKNOWLEDGED, SOMETIMES_COMMIT,
    SOMETIMES_FOLLOWER_REJOINS,
};
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
    if !long_tier::enabled("two unreduced explorations of safe with one record, about a minute") {
        return;
    }
    assert!(reached(SOMETIMES_FOLLOWER_REJOINS, |_| true));
    assert!(!reached(SOMETIMES_FOLLOWER_REJOINS, |a| !matches!(
        a,
        Action::LeaderExpandIsr { .. }
    )));
}

#[test]
fn a_record_commits_only_through_an_hw_advance() {
    if !long_tier::enabled("two unreduced explorations of safe with one record, about a minute") {
        return;
    }
    assert!(reached(SOMETIMES_COMMIT, |_| true));
    assert!(!reached(SOMETIMES_COMMIT, |a| !matches!(
        a,
        Action::LeaderAdvanceHw { .. }
    )));
}

/// Which premises of the always-properties (`properties::premises`) some
/// state of `cfg` meets, by the always-property's name.
fn premises_met(cfg: highwater_model::Config) -> Vec<(&'static str, bool)> {
    use highwater_checker::search::{self, SearchOptions, Until};
    let premises = premises();
    let names: Vec<&'static str> = premises.iter().map(|p| p.name).collect();
    let g = search::search(
        &highwater_model::PartitionModel::new(cfg),
        SearchOptions {
            threads: 2,
            properties: Some(premises),
            progress: None,
            until: Until::Exhausted,
            stop: &|_| false,
            on_progress: &mut |_| {},
            budget: None,
            expected_states: None,
        },
    );
    names
        .into_iter()
        .zip(&g.first)
        .map(|(name, first)| (name, first.is_some()))
        .collect()
}

/// No guarantee of `safe` holds vacuously: for every always-property, some
/// reachable state is one where its check is not trivially true (a record
/// committed, or acknowledged, in one epoch and a leader of a later one; a
/// leader with an HW above 0 and another ISR member; ...). One record is
/// enough: every state of that run is one of `safe`'s.
#[test]
fn every_guarantee_of_safe_says_something() {
    let met = premises_met(highwater_model::Config { records: 1, ..SAFE });
    assert_eq!(
        met.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        safety_names(),
        "one premise per always-property, in order"
    );
    for (name, ok) in met {
        assert!(
            ok,
            "\"{name}\" holds vacuously in safe: no state meets its premise"
        );
    }
}

/// A leader that never acknowledges a write (`never-acknowledge`) keeps
/// every guarantee, vacuously: the premise of "acknowledged records
/// survive" is never met, and `safe`'s own expectation fails on exactly the
/// two sometimes-properties that ask for an acknowledgement.
#[test]
fn a_leader_that_never_acknowledges_is_noticed() {
    use highwater_model::config::Mutation;
    use highwater_model::run::{self, Outcome, RunOptions, Search};
    let cfg = highwater_model::Config {
        records: 1,
        mutation: Some(Mutation::NeverAcknowledge),
        ..SAFE
    };
    let met = premises_met(cfg);
    for (name, ok) in &met {
        assert_eq!(
            *ok,
            *name != ACKNOWLEDGED_RECORDS_SURVIVE,
            "\"{name}\": only the acknowledgement premise goes unmet"
        );
    }
    let expect = highwater_model::presets::Preset::find("safe")
        .unwrap()
        .expect;
    let r = run::run(
        cfg,
        None,
        Some(expect),
        &RunOptions::new(2, Search::Graph),
        |_| {},
    );
    assert_eq!(r.outcome, Outcome::NotAsExpected);
    assert_eq!(
        r.mismatches,
        [
            format!("\"{SOMETIMES_ACKNOWLEDGED}\" was expected to be reached but never was"),
            format!(
                "\"{SOMETIMES_ACKED_OUTLIVES_LEADER}\" was expected to be reached but never was"
            ),
        ],
        "every safety and progress property still holds"
    );
}
