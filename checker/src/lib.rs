//! highwater-checker: an exhaustive model checker for
//! [stateright](https://docs.rs/stateright) models.
//!
//! stateright's own checkers report, for each property, some path to a
//! state that breaks it (0.31 keeps the last one found, not the shortest),
//! keep no state graph, and cannot say "from every state, a goal can still
//! be reached" (their `eventually` follows single paths and is unsound on
//! cycles). This engine does those three things in one breadth-first pass:
//!
//! - [the search](search) expands the model level by level on several
//!   threads into [the state graph](graph), one node per symmetry class,
//!   with the [fingerprint table](fingerprint_table) as its index; it
//!   evaluates every property, so the first state found breaking one is at
//!   the least depth: its path is a [shortest counterexample](shortest);
//! - [the progress check](progress) walks the graph's fault-free edges
//!   backwards from goal states: a state that cannot reach a goal without
//!   a further fault is stuck, reported with the shortest path to it and
//!   the trap it falls into (as a [lasso](lasso));
//! - states beyond the model's bounds that fault-free steps lead to are
//!   explored in a second phase (recovery), or shown to reach every goal by
//!   one [recovery walk](recovery_walk), so that a bound (a spent counter)
//!   does not make a state look stuck.
//!
//! What it asks of a model beyond stateright's [`Model`] is the
//! [`Checkable`] trait: which actions are faults, the bounds and what
//! recovery does beyond them, the progress goals, and the symmetry
//! representative its fingerprints are taken of.

pub mod distributed;
pub mod fingerprint_table;
pub mod graph;
pub mod lasso;
pub mod memory;
pub mod outcome;
pub mod progress;
mod queue;
pub mod recovery_walk;
pub mod search;
pub mod shortest;
pub mod verdict;

pub use graph::{Graph, NodeId};
pub use outcome::Outcome;
pub use search::{search, Completion, ProgressOptions, SearchOptions, SearchProgress, Until};
pub use verdict::Verdict;

use stateright::Model;
use std::fmt::Debug;
use std::hash::Hash;

/// A path: an initial state, then each action with the state it leads to.
pub type Trace<M> = Vec<(<M as Model>::State, Option<<M as Model>::Action>)>;

/// A progress goal: the progress check asks that from every state of the
/// bounded model some state meeting `condition` can be reached without a
/// fault. Shaped as stateright's `Property`.
pub struct Goal<M: Model> {
    pub name: &'static str,
    pub condition: fn(&M, &M::State) -> bool,
}

impl<M: Model> Clone for Goal<M> {
    fn clone(&self) -> Self {
        Goal {
            name: self.name,
            condition: self.condition,
        }
    }
}

impl<M: Model> Debug for Goal<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Goal").field("name", &self.name).finish()
    }
}

/// What the engine asks of a model beyond stateright's [`Model`].
///
/// Every method but [`is_fault`](Checkable::is_fault) has a default that
/// suits a model with no bounds to relax, no symmetry and no progress goals:
/// such a model is searched exactly as stateright's breadth-first checker
/// searches it.
///
/// `init_states` and `actions` must be deterministic: paths are found again
/// by replaying actions in the order `actions` lists them. stateright's
/// `within_boundary` is honoured as its checkers honour it: a state outside
/// it is no state of the model at all.
pub trait Checkable:
    Model<
        State: Clone + Debug + Eq + Hash + Send + Sync,
        Action: Clone + Debug + PartialEq + Send + Sync,
    > + Clone
    + Send
    + Sync
{
    /// Whether taking `action` in `state` is a fault (a crash, a lost
    /// message, an operator's forced decision). The progress check asks
    /// what can still happen from each state once faults stop, so it
    /// follows only the other edges.
    fn is_fault(&self, state: &Self::State, action: &Self::Action) -> bool;

    /// The state `action` leads to, for an action `actions` listed for
    /// `state`: the search's hot path. The default is `next_state`; a model
    /// whose `next_state` does work the search need not (such as comparing
    /// the states to refuse a step that changes nothing) may skip it, as
    /// long as it answers as `next_state` would.
    fn successor(&self, state: &Self::State, action: Self::Action) -> Option<Self::State> {
        self.next_state(state, action)
    }

    /// The representative of `state`'s symmetry class: the search stores
    /// one node per class, fingerprinted by its representative. It must map
    /// every member of a class to the same state, and the properties, goals
    /// and transitions must not tell the members apart. The default, the
    /// state itself, reduces nothing.
    fn representative(&self, state: &Self::State) -> Self::State {
        state.clone()
    }

    /// Whether `state` is within the model's bounds (no counter of faults,
    /// rounds or messages past its limit). Properties
    /// are checked within the bounds only; a fault-free step beyond them
    /// leads to a recovery state, which only the progress check looks at.
    /// The default: no bounds.
    fn within_bounds(&self, _state: &Self::State) -> bool {
        true
    }

    /// The model recovery states are explored under: this one with its
    /// bounds relaxed, so that a state at the edge of the bounds is not
    /// judged stuck only because a counter is spent. From a state within the
    /// bounds it must list every action this model lists, with the same
    /// successors, and may list more. The default: this model.
    fn recovery_model(&self) -> Self {
        self.clone()
    }

    /// Whether recovery takes `action` from `state`: beyond the bounds only
    /// these steps are followed. A subset of the fault-free steps that still
    /// reaches every goal keeps recovery small; a state shown to reach a
    /// goal by them does reach it. The default: every fault-free step.
    fn heals(&self, state: &Self::State, action: &Self::Action) -> bool {
        !self.is_fault(state, action)
    }

    /// A recovery state as recovery sees it: what no healing step reads and
    /// no goal asks about may be forgotten, so that recovery states that
    /// differ only there are one. The default forgets nothing.
    fn recovery_view(&self, state: Self::State) -> Self::State {
        state
    }

    /// The progress goals, one progress property each (at most
    /// [`graph::MAX_GOALS`]). The default: none.
    fn progress_goals(&self) -> Vec<Goal<Self>> {
        Vec::new()
    }

    /// Whether the search's queues (the level being expanded, the next
    /// level, the recovery states) hold this model's states packed into
    /// bytes by [`pack`](Checkable::pack) rather than whole: a state
    /// waiting in a queue then takes its packed size. The default: whole.
    const PACKS: bool = false;

    /// Appends `state`'s packed bytes to `out` (called only when
    /// [`PACKS`](Checkable::PACKS) is true). [`unpack`](Checkable::unpack)
    /// must give the state back exactly, and the state's `Hash` must write
    /// exactly these bytes in one `write`: the search fingerprints a
    /// packed state by its bytes, so that a state is encoded once, and
    /// this fingerprint must be [`fingerprint`]'s (asserted on the initial
    /// states). At most 65,535 bytes.
    fn pack(&self, _state: &Self::State, _out: &mut Vec<u8>) {
        unreachable!("pack is called only when the model PACKS")
    }

    /// Appends what [`pack`](Checkable::pack) appends for `state`'s
    /// [`representative`](Checkable::representative): a model may pack the
    /// representative without building it. The search does so for every
    /// successor; its answer must be exactly the default's (asserted on the
    /// initial states).
    fn pack_representative(&self, state: &Self::State, out: &mut Vec<u8>) {
        self.pack(&self.representative(state), out)
    }

    /// The state [`pack`](Checkable::pack) packed into `bytes` (only ever
    /// bytes it packed).
    fn unpack(&self, _bytes: &[u8]) -> Self::State {
        unreachable!("unpack is called only when the model PACKS")
    }

    /// Whether the model owes no progress from `state` by design (a system
    /// that waits for an operator). A state whose every fault-free future
    /// can end in such states is counted, not reported as stuck. The
    /// default: none.
    fn exempt(&self, _state: &Self::State) -> bool {
        false
    }
}

/// A stable 64-bit fingerprint of a state's class.
pub fn fingerprint<M: Checkable>(model: &M, state: &M::State) -> u64 {
    fingerprint_of_representative(&model.representative(state))
}

/// The fingerprint of a state already made its class's representative.
pub(crate) fn fingerprint_of_representative<S: Hash>(rep: &S) -> u64 {
    // Fixed keys: the same state has the same fingerprint in every run.
    fingerprint_hasher().hash_one(rep)
}

/// The fingerprint of a state packed by [`Checkable::pack`]: the same as
/// [`fingerprint_of_representative`]'s when the state's `Hash` writes its
/// packed bytes in one `write`, as `pack` requires.
pub(crate) fn fingerprint_of_packed(bytes: &[u8]) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = fingerprint_hasher().build_hasher();
    h.write(bytes);
    h.finish()
}

fn fingerprint_hasher() -> ahash::RandomState {
    ahash::RandomState::with_seeds(1, 2, 3, 4)
}
