//! Shortest counterexamples, by a breadth-first search of our own.
//!
//! stateright 0.31 keeps the last path it found for a property, not the
//! shortest, and its BFS ignores symmetry. This search walks the quotient
//! state space (representatives) level by level, keeping only a parent
//! fingerprint per state, so the first state found that breaks a property is
//! at the least depth. The path is then rebuilt forwards on concrete states:
//! at each step, the action whose successor is in the next class.

use crate::actions::{self, Action};
use crate::model::PartitionModel;
use crate::state::State;
use stateright::{Model, Property, Representative};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// A path: the initial state, then each action with the state it leads to.
pub type Trace = Vec<(State, Option<Action>)>;

/// A stable 64-bit fingerprint of a state's class.
fn fingerprint(s: &State) -> u64 {
    fingerprint_of_representative(&s.representative())
}

fn fingerprint_of_representative(rep: &State) -> u64 {
    // Fixed keys: the same state has the same fingerprint in every run.
    ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(rep)
}

/// Fingerprints are already uniform: the parent map uses them as they are.
#[derive(Default)]
struct FingerprintHasher(u64);

impl Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type ParentMap = HashMap<u64, u64, BuildHasherDefault<FingerprintHasher>>;

/// For each always-property, the shortest trace to a state that breaks it;
/// None for those that hold.
pub fn shortest_counterexamples(
    model: &PartitionModel,
    targets: &[Property<PartitionModel>],
) -> Vec<(&'static str, Option<Trace>)> {
    search(model, targets, None)
}

/// As [`shortest_counterexamples`], but stops once the search has finished
/// the level at which `until` (one of `targets`) breaks: every target broken
/// within that many steps gets its shortest trace, the others None. The
/// answer is the same in every run, whatever else a search stumbled on.
pub fn shortest_counterexamples_until(
    model: &PartitionModel,
    targets: &[Property<PartitionModel>],
    until: &str,
) -> Vec<(&'static str, Option<Trace>)> {
    search(model, targets, targets.iter().position(|p| p.name == until))
}

fn search(
    model: &PartitionModel,
    targets: &[Property<PartitionModel>],
    until: Option<usize>,
) -> Vec<(&'static str, Option<Trace>)> {
    let init = model.init_state();
    let mut parent = ParentMap::default();
    let mut found: Vec<Option<u64>> = vec![None; targets.len()];
    let init_fp = fingerprint(&init);
    parent.insert(init_fp, init_fp);
    let mut level = VecDeque::from([init.representative()]);
    let mut actions = Vec::new();
    'search: while !level.is_empty() {
        let mut next_level = VecDeque::new();
        for s in level.drain(..) {
            // Levels hold representatives already.
            let fp = fingerprint_of_representative(&s);
            for (i, p) in targets.iter().enumerate() {
                if found[i].is_none() && !(p.condition)(model, &s) {
                    found[i] = Some(fp);
                }
            }
            if found.iter().all(Option::is_some) {
                break 'search;
            }
            actions.clear();
            model.actions(&s, &mut actions);
            for a in actions.drain(..) {
                let Some(next) = actions::apply(&model.cfg, &s, a) else {
                    continue;
                };
                let rep = next.representative();
                if let Entry::Vacant(v) = parent.entry(fingerprint_of_representative(&rep)) {
                    v.insert(fp);
                    next_level.push_back(rep);
                }
            }
        }
        if until.is_some_and(|u| found[u].is_some()) {
            break;
        }
        level = next_level;
    }
    targets
        .iter()
        .zip(found)
        .map(|(p, fp)| (p.name, fp.map(|fp| rebuild(model, &parent, init_fp, fp))))
        .collect()
}

/// Rebuilds a concrete path from the initial state to the class `target`.
fn rebuild(model: &PartitionModel, parent: &ParentMap, init_fp: u64, target: u64) -> Trace {
    let mut chain = vec![target];
    while *chain.last().expect("non-empty") != init_fp {
        chain.push(parent[chain.last().expect("non-empty")]);
    }
    chain.reverse();
    let mut state = model.init_state();
    let mut trace = vec![(state, None)];
    for want in &chain[1..] {
        let mut actions = Vec::new();
        model.actions(&state, &mut actions);
        let (action, next) = actions
            .into_iter()
            .find_map(|a| {
                let next = actions::apply(&model.cfg, &state, a)?;
                (fingerprint(&next) == *want).then_some((a, next))
            })
            .expect("every class on the chain has a parent with an action into it");
        trace.push((next, Some(action)));
        state = next;
    }
    trace
}
