//! The search merges states by fingerprint (a hash of `State`'s byte
//! encoding), so a field the encoding leaves out merges states that differ
//! in it, silently: the search then explores fewer states than the rules
//! reach. This walks a whole preset with a set keyed by the states
//! themselves (equality over every field) beside a set of their
//! fingerprints, and holds the two counts equal. A fingerprint made blind
//! to one field (a request's ISRs still to apply, which the encoding once
//! left out, as a one-element `last_isr`: 2,472,055 states reachable,
//! 1,977,319 fingerprints) is shown to fail it. (This preset has no
//! crashes: no chain there holds two ISRs.)

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use highwater_model::actions::{apply, enabled};
use highwater_model::state::IsrChain;
use highwater_model::{PartitionModel, State};

fn hash_of(s: &State) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// `s` with every request's ISRs still to apply forgotten: a fingerprint
/// that leaves out one field.
fn blind_to_later_isrs(s: &State) -> State {
    let mut t = *s;
    for req in t.requests.iter_mut().flatten() {
        req.later_isrs = IsrChain::EMPTY;
    }
    t
}

#[test]
fn the_fingerprint_tells_every_reachable_state_apart() {
    let preset = highwater_model::presets::PRESETS
        .iter()
        .find(|p| p.name == "tla-kip320")
        .expect("the tla-kip320 preset");
    let cfg = preset.config;
    let mut states = HashSet::new();
    let (mut fingerprints, mut blind) = (HashSet::new(), HashSet::new());
    let mut queue = VecDeque::from([PartitionModel::new(cfg).init_state()]);
    let mut actions = Vec::new();
    while let Some(s) = queue.pop_front() {
        if !states.insert(s) {
            continue;
        }
        fingerprints.insert(hash_of(&s));
        blind.insert(hash_of(&blind_to_later_isrs(&s)));
        actions.clear();
        enabled(&cfg, &s, &mut actions);
        queue.extend(actions.drain(..).filter_map(|a| apply(&cfg, &s, a)));
    }
    assert_eq!(
        fingerprints.len(),
        states.len(),
        "distinct states share a fingerprint: a field is missing from State::encode"
    );
    assert!(
        blind.len() < states.len(),
        "a fingerprint blind to later_isrs should merge states ({} of {})",
        blind.len(),
        states.len()
    );
}
