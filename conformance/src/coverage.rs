//! Coverage: which share of a configuration's reachable states and
//! transitions a set of runs (the random lockstep's) visited.
//!
//! States and transitions are counted as the model checker counts states:
//! up to symmetry. A state stands for its class (its representative, with
//! replicas renamed); a transition is a state's class with an action, the
//! action named as in the representative, and actions that a symmetry of
//! the representative maps onto each other counted once (taking `A` or `B`
//! from a state where the two are interchangeable is one transition). So a
//! transition is an orbit of (state, action) pairs under renaming, whichever
//! member of the class a run was in. [`Space::transitions`] is the number of
//! such orbits, at most the model checker's count (which counts each action
//! of one member of each class).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};

use highwater_model::actions::{apply, enabled};
use highwater_model::state::{ReplicaId, MAX_REPLICAS};
use highwater_model::{Action, Config, PartitionModel, State};
use stateright::Representative;

/// The action's name without its arguments, e.g. "FollowerFetch".
pub fn kind(a: &Action) -> &'static str {
    highwater_model::itf::action_kind(a)
}

/// `a` with every replica `r` renamed `map[r]`.
pub fn renamed_action(a: Action, map: &[ReplicaId; MAX_REPLICAS]) -> Action {
    let m = |r: ReplicaId| map[r as usize];
    match a {
        Action::ControllerElectLeader { replica, election } => Action::ControllerElectLeader {
            replica: m(replica),
            election,
        },
        Action::ControllerShrinkIsr { replica } => Action::ControllerShrinkIsr {
            replica: m(replica),
        },
        Action::ControllerUnfence { replica } => Action::ControllerUnfence {
            replica: m(replica),
        },
        Action::BecomeLeader { replica, epoch } => Action::BecomeLeader {
            replica: m(replica),
            epoch,
        },
        Action::BecomeFollower { replica, epoch } => Action::BecomeFollower {
            replica: m(replica),
            epoch,
        },
        Action::Produce { leader, record } => Action::Produce {
            leader: m(leader),
            record,
        },
        Action::FollowerFetch { follower, leader } => Action::FollowerFetch {
            follower: m(follower),
            leader: m(leader),
        },
        Action::FollowerFetchOne { follower, leader } => Action::FollowerFetchOne {
            follower: m(follower),
            leader: m(leader),
        },
        Action::FollowerFetchPart {
            follower,
            leader,
            records,
        } => Action::FollowerFetchPart {
            follower: m(follower),
            leader: m(leader),
            records,
        },
        Action::LeaderAdvanceHw { leader, hw } => Action::LeaderAdvanceHw {
            leader: m(leader),
            hw,
        },
        Action::LeaderShrinkIsr { leader, follower } => Action::LeaderShrinkIsr {
            leader: m(leader),
            follower: m(follower),
        },
        Action::LeaderExpandIsr { leader, follower } => Action::LeaderExpandIsr {
            leader: m(leader),
            follower: m(follower),
        },
        Action::LeaderLearnsIsr { leader } => Action::LeaderLearnsIsr { leader: m(leader) },
        Action::Flush { replica } => Action::Flush {
            replica: m(replica),
        },
        Action::CheckpointHw { replica } => Action::CheckpointHw {
            replica: m(replica),
        },
        Action::Crash { replica, clean } => Action::Crash {
            replica: m(replica),
            clean,
        },
        Action::Restart { replica } => Action::Restart {
            replica: m(replica),
        },
    }
}

/// Every order of `0..n` (as `State::renamed` takes them: replica
/// `order[i]` becomes `i`).
fn orders(n: usize) -> Vec<[ReplicaId; MAX_REPLICAS]> {
    fn go(
        n: usize,
        at: usize,
        o: &mut [ReplicaId; MAX_REPLICAS],
        out: &mut Vec<[ReplicaId; MAX_REPLICAS]>,
    ) {
        if at == n {
            out.push(*o);
            return;
        }
        for i in at..n {
            o.swap(at, i);
            go(n, at + 1, o, out);
            o.swap(at, i);
        }
    }
    let mut o = [0, 1, 2, 3, 4];
    let mut out = Vec::new();
    go(n, 0, &mut o, &mut out);
    out
}

/// The renamings (old id -> new id) that take `s` to `rep`.
fn renamings_to(s: &State, rep: &State) -> Vec<[ReplicaId; MAX_REPLICAS]> {
    let n = s.n as usize;
    orders(n)
        .into_iter()
        .filter(|o| s.renamed(o) == *rep)
        .map(|o| {
            let mut map = [0u8; MAX_REPLICAS];
            for (new, &old) in o[..n].iter().enumerate() {
                map[old as usize] = new as ReplicaId;
            }
            map
        })
        .collect()
}

fn fingerprint(s: &State) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// A state's class and an action's orbit, named in the representative.
fn canonical(rep_fp: u64, maps: &[[ReplicaId; MAX_REPLICAS]], a: Action) -> (u64, Action) {
    let named = maps
        .iter()
        .map(|m| renamed_action(a, m))
        .min()
        .expect("the representative is a renaming of the state");
    (rep_fp, named)
}

/// A configuration's reachable state space, up to symmetry.
#[derive(Debug, Default)]
pub struct Space {
    classes: HashSet<u64>,
    /// Transitions (orbits), in all.
    pub transitions: u64,
    /// Transitions by action kind.
    pub by_kind: BTreeMap<&'static str, u64>,
}

impl Space {
    /// States (symmetry classes).
    pub fn states(&self) -> u64 {
        self.classes.len() as u64
    }

    /// Explores `cfg`'s state space (one thread; the `safe` preset takes
    /// some seconds).
    pub fn explore(cfg: &Config) -> Space {
        let mut space = Space::default();
        let init = PartitionModel::new(*cfg).init_state().representative();
        space.classes.insert(fingerprint(&init));
        let mut stack = vec![init];
        let mut actions = Vec::new();
        while let Some(rep) = stack.pop() {
            let fp = fingerprint(&rep);
            let automorphisms = renamings_to(&rep, &rep);
            let mut orbits = HashSet::new();
            enabled(cfg, &rep, &mut actions);
            for a in actions.drain(..) {
                let Some(next) = apply(cfg, &rep, a) else {
                    continue;
                };
                if orbits.insert(canonical(fp, &automorphisms, a)) {
                    space.transitions += 1;
                    *space.by_kind.entry(kind(&a)).or_default() += 1;
                }
                let next = next.representative();
                if space.classes.insert(fingerprint(&next)) {
                    stack.push(next);
                }
            }
        }
        space
    }
}

/// The states and transitions some runs visited.
#[derive(Debug, Default)]
pub struct Visits {
    states: HashSet<u64>,
    transitions: HashSet<(u64, Action)>,
}

impl Visits {
    /// A run was in `s` and took `a` (a model action enabled there).
    pub fn took(&mut self, s: &State, a: Action) {
        let rep = s.representative();
        let fp = fingerprint(&rep);
        self.states.insert(fp);
        self.transitions
            .insert(canonical(fp, &renamings_to(s, &rep), a));
    }

    /// A run reached `s`.
    pub fn reached(&mut self, s: &State) {
        self.states.insert(fingerprint(&s.representative()));
    }

    /// The share of `space` visited.
    pub fn share_of(&self, space: &Space) -> Share {
        let mut by_kind: BTreeMap<&'static str, (u64, u64)> =
            space.by_kind.iter().map(|(&k, &n)| (k, (0, n))).collect();
        for (_, a) in &self.transitions {
            if let Some(e) = by_kind.get_mut(kind(a)) {
                e.0 += 1;
            }
        }
        Share {
            states: (self.states.len() as u64, space.states()),
            transitions: (self.transitions.len() as u64, space.transitions),
            by_kind,
        }
    }
}

/// Visited and total states and transitions.
#[derive(Debug, Clone)]
pub struct Share {
    pub states: (u64, u64),
    pub transitions: (u64, u64),
    /// Transitions visited and in all, by action kind.
    pub by_kind: BTreeMap<&'static str, (u64, u64)>,
}

fn percent((part, whole): (u64, u64)) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "states {} of {} ({:.3}%), transitions {} of {} ({:.3}%)",
            self.states.0,
            self.states.1,
            percent(self.states),
            self.transitions.0,
            self.transitions.1,
            percent(self.transitions)
        )?;
        for (k, &v) in &self.by_kind {
            writeln!(f, "  {k:<22} {:>9} of {:>9} ({:.3}%)", v.0, v.1, percent(v))?;
        }
        Ok(())
    }
}
