//! Replay: each historical preset's shortest counterexample, found by the
//! model checker, runs on the implementation (real files, real recovery) in
//! lockstep and breaks the same property there, at the same last step.

use highwater::cluster::ClusterSnapshot;
use highwater_conformance::lockstep::Lockstep;
use highwater_conformance::replay::shortest_counterexample;
use highwater_model::presets::{Expect, PRESETS};

fn broken(snap: &ClusterSnapshot) -> Vec<&'static str> {
    snap.broken_properties()
        .iter()
        .map(|b| b.property)
        .collect()
}

#[test]
fn every_historical_counterexample_breaks_the_implementation_too() {
    let mut replayed = 0;
    for p in PRESETS {
        let Expect::Breaks(property) = p.expect else {
            continue;
        };
        let actions = shortest_counterexample(&p.config, property)
            .unwrap_or_else(|| panic!("{}: the model finds no counterexample", p.name));

        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut both =
            Lockstep::start(&p.config, dir.path()).unwrap_or_else(|d| panic!("{}: {d}", p.name));
        for (i, &a) in actions.iter().enumerate() {
            both.step(a).unwrap_or_else(|d| panic!("{}: {d}", p.name));
            let snap = both.implementation().snapshot().expect("a snapshot");
            let last = i + 1 == actions.len();
            assert_eq!(
                broken(&snap).contains(&property),
                last,
                "{}: \"{property}\" should break at step {} of {}, not at step {}: {:?}",
                p.name,
                actions.len(),
                actions.len(),
                i + 1,
                snap.broken_properties()
            );
        }
        replayed += 1;
    }
    assert!(replayed >= 7, "every historical preset is replayed");
}
