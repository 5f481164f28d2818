//! The state graph the search builds: one node per symmetry class of the
//! states found, each stored as its representative's 64-bit fingerprint
//! with a parent pointer (towards an initial state, on a shortest path),
//! its depth and a few flags; and, when the progress check is asked for,
//! each node's fault-free edges, which the check (`progress.rs`) walks
//! backwards. The states themselves are not kept: a path is found again by
//! replaying actions from an initial state ([`Graph::path_to`]).
//!
//! Nodes are of two kinds: states of the bounded model (within the
//! model's bounds, checked against its properties) and recovery states
//! (beyond the bounds, reached by fault-free steps while the progress check
//! is on; `search.rs` says why).

use crate::fingerprint_table::FingerprintTable;
use crate::memory::{bytes_of, Footprint, OverBudget};
use crate::search::{Completion, SearchProgress};
use crate::{fingerprint, verdict, Checkable, Goal, Trace, Verdict};
use stateright::{Expectation, Property};

/// Index of a state in the graph.
pub type NodeId = u32;

/// The index's value for a node: its id, with [`IN_BOUNDS_TAG`] set once the
/// bounded model reaches it (expansion threads read the tag, not the flags
/// the merge is writing).
pub(crate) const IN_BOUNDS_TAG: u32 = 1 << 31;

#[inline]
pub(crate) fn index_value(n: NodeId, in_bounds: bool) -> u32 {
    if in_bounds {
        n | IN_BOUNDS_TAG
    } else {
        n
    }
}

/// Facts about a state that the progress check needs, kept per node in one
/// byte.
pub mod flag {
    /// Reachable in the bounded model (not a recovery state).
    pub const IN_BOUNDS: u8 = 1;
    /// Expanded: its successors and edges are known.
    pub const EXPANDED: u8 = 2;
    /// The model owes no progress here ([`Checkable::exempt`](crate::Checkable::exempt)).
    pub const EXEMPT: u8 = 4;
    /// Goal i's bit is `GOAL << i`: the state meets goal i, or (a recovery
    /// state) a fault-free walk from it met it (`recovery_walk.rs`).
    pub const GOAL: u8 = 8;
}

/// The bytes of a node in the per-node arrays: fingerprint, parent, depth,
/// flags, edge start and edge count.
pub(crate) const NODE_BYTES: u64 = 8 + 4 + 1 + 1 + 4 + 2;

/// The most progress goals a search records: one flag bit each.
pub const MAX_GOALS: usize = 5;

/// The flag bits of every goal of `goals` goals.
#[inline]
pub(crate) fn all_goals(goals: usize) -> u8 {
    (((1u16 << goals) - 1) as u8) * flag::GOAL
}

/// The searched graph and what the properties said about it.
pub struct Graph<M: Checkable> {
    pub model: M,
    /// The model recovery states run under
    /// ([`Checkable::recovery_model`]; the model itself when the search
    /// kept no progress data).
    pub recovery: M,
    /// The properties evaluated, in the order of [`Graph::first`].
    pub properties: Vec<Property<M>>,
    /// The progress goals recorded, in the order of their flag bits.
    pub goals: Vec<Goal<M>>,
    pub(crate) fps: Vec<u64>,
    pub(crate) parent: Vec<NodeId>,
    pub(crate) depth: Vec<u8>,
    pub(crate) flags: Vec<u8>,
    /// Fault-free successors of node n: `edges[edge_start[n]..][..edge_len[n]]`.
    pub(crate) edge_start: Vec<u32>,
    pub(crate) edge_len: Vec<u16>,
    pub(crate) edges: Vec<NodeId>,
    pub(crate) index: FingerprintTable,
    /// Per property: the first state in search order that breaks it
    /// (always) or satisfies it (sometimes).
    pub first: Vec<Option<NodeId>>,
    pub completion: Completion,
    pub progress: SearchProgress,
    /// Whether the search kept the fault-free edges and the progress
    /// flags ([`SearchOptions::progress`](crate::SearchOptions::progress)).
    pub keeps_progress: bool,
    /// The most the search held, part by part (`memory.rs`), and in all at
    /// one moment.
    pub peak: Footprint,
    pub peak_total: u64,
    /// Why the search stopped for its memory budget, if it did
    /// ([`Completion::OverBudget`]).
    pub over_budget: Option<OverBudget>,
}

impl<M: Checkable> Graph<M> {
    /// Whether the progress check follows `a` from `s` to `next` (the
    /// graph's fault-free edges).
    pub fn is_edge(&self, s: &M::State, a: &M::Action, next: &M::State) -> bool {
        fault_free_edge(&self.model, s, a, next)
    }

    pub fn len(&self) -> usize {
        self.fps.len()
    }
    pub fn is_empty(&self) -> bool {
        self.fps.is_empty()
    }
    pub fn flags(&self, n: NodeId) -> u8 {
        self.flags[n as usize]
    }
    pub fn depth(&self, n: NodeId) -> u8 {
        self.depth[n as usize]
    }
    pub fn in_bounds(&self, n: NodeId) -> bool {
        self.flags(n) & flag::IN_BOUNDS != 0
    }
    pub fn edges(&self, n: NodeId) -> &[NodeId] {
        let start = self.edge_start[n as usize] as usize;
        &self.edges[start..start + self.edge_len[n as usize] as usize]
    }
    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }
    /// The node of a state of the bounded model, or of a recovery state,
    /// looked up in the index (None once the index is released,
    /// [`release_index`](Self::release_index); [`find_node`](Self::find_node)
    /// needs none).
    pub fn node_of(&self, s: &M::State) -> Option<NodeId> {
        self.index
            .get(self.fingerprint_of(s))
            .map(|v| v & !IN_BOUNDS_TAG)
    }

    /// The fingerprint a node of `s` has: of its class, or, beyond the
    /// bounds, of what recovery sees of it.
    fn fingerprint_of(&self, s: &M::State) -> u64 {
        if self.model.within_bounds(s) {
            fingerprint(&self.model, s)
        } else {
            fingerprint(&self.model, &self.model.recovery_view(s.clone()))
        }
    }

    /// Whether `s` is in node `n`'s class.
    pub fn is_node(&self, s: &M::State, n: NodeId) -> bool {
        self.fps[n as usize] == self.fingerprint_of(s)
    }

    /// The node of `s` without the index: among `near` first (such as the
    /// successors of the node `s` was reached from), else among every node.
    pub fn find_node(&self, s: &M::State, near: &[NodeId]) -> Option<NodeId> {
        let fp = self.fingerprint_of(s);
        near.iter()
            .copied()
            .find(|&n| self.fps[n as usize] == fp)
            .or_else(|| self.fps.iter().position(|&f| f == fp).map(|n| n as NodeId))
    }

    /// Frees the fingerprint index: what comes after the search (paths,
    /// the progress check) needs none, and the check's buffers then take
    /// its place.
    pub fn release_index(&mut self) {
        self.index = FingerprintTable::default();
    }
    /// Bytes held by the graph (index, per-node arrays and edges).
    pub fn memory_bytes(&self) -> usize {
        self.fps.capacity() * NODE_BYTES as usize
            + self.index.memory_bytes()
            + self.edges.capacity() * 4
    }

    /// What the graph holds with `index` as its index (the search takes
    /// the index out of the graph while a level runs); no queue. The
    /// arrays count by their length: room reserved and not yet written is
    /// never touched, so it takes no memory (`memory.rs`).
    pub(crate) fn footprint(&self, index: &FingerprintTable) -> Footprint {
        Footprint {
            index: index.memory_bytes() as u64,
            nodes: self.fps.len() as u64 * NODE_BYTES,
            edges: bytes_of::<NodeId>(self.edges.len()),
            queue: 0,
        }
    }

    /// Each property's verdict, in [`Graph::properties`] order, from what
    /// the search saw and how it ended.
    pub fn verdicts(&self) -> Vec<Verdict> {
        self.properties
            .iter()
            .zip(&self.first)
            .map(|(p, first)| {
                verdict::of_search(
                    p.expectation == Expectation::Always,
                    first.is_some(),
                    self.completion,
                )
            })
            .collect()
    }

    /// The path from an initial state to node `n`, on concrete states: at
    /// each step the first enabled action whose successor is in the next
    /// state's class. A recovery state's path ends with fault-free steps
    /// beyond the bounds.
    pub fn path_to(&self, n: NodeId) -> Trace<M> {
        let mut chain = vec![n];
        while let Some(&last) = chain.last() {
            let p = self.parent[last as usize];
            if p == last {
                break;
            }
            chain.push(p);
        }
        chain.reverse();
        let chain: Vec<(u64, bool)> = chain
            .iter()
            .map(|&m| (self.fps[m as usize], self.in_bounds(m)))
            .collect();
        replay_chain(&self.model, &self.recovery, &chain)
    }

    pub(crate) fn add_node(
        &mut self,
        index: &FingerprintTable,
        fp: u64,
        parent: Option<NodeId>,
        flags: u8,
    ) -> NodeId {
        let n = NodeId::try_from(self.fps.len())
            .ok()
            .filter(|n| n & IN_BOUNDS_TAG == 0)
            .expect("fewer than 2^31 states");
        self.fps.push(fp);
        self.parent.push(parent.unwrap_or(n));
        self.depth
            .push(parent.map_or(0, |p| self.depth[p as usize].saturating_add(1)));
        self.flags.push(flags);
        self.edge_start.push(0);
        self.edge_len.push(0);
        index.insert(fp, index_value(n, flags & flag::IN_BOUNDS != 0));
        if flags & flag::IN_BOUNDS != 0 {
            self.progress.unique_states += 1;
            self.progress.max_depth = self
                .progress
                .max_depth
                .max(u64::from(self.depth[n as usize]));
        } else {
            self.progress.recovery_states += 1;
        }
        n
    }
}

/// Whether the progress check follows `a` from `s` to `next`: a fault-free
/// step within the bounds, or a healing step beyond them or from a recovery
/// state ([`Graph::is_edge`]; `lasso.rs` walks the same edges).
pub fn fault_free_edge<M: Checkable>(
    model: &M,
    s: &M::State,
    a: &M::Action,
    next: &M::State,
) -> bool {
    if model.within_bounds(s) && model.within_bounds(next) {
        !model.is_fault(s, a)
    } else {
        model.heals(s, a)
    }
}

/// The path through a chain of nodes, each given as its fingerprint and
/// whether it is a state of the bounded model, from an initial state: at
/// each step the first enabled action (under the bounded model, or the
/// recovery model into a recovery state) whose successor is in the next
/// node's class ([`Graph::path_to`]; the distributed search finds its
/// chains across workers and replays them here, so that both engines print
/// the same steps).
pub fn replay_chain<M: Checkable>(model: &M, recovery: &M, chain: &[(u64, bool)]) -> Trace<M> {
    let root_fp = chain[0].0;
    let mut state = model
        .init_states()
        .into_iter()
        .find(|s| fingerprint(model, s) == root_fp)
        .expect("a parent chain starts at an initial state");
    let mut trace = vec![(state.clone(), None)];
    let mut enabled = Vec::new();
    for &(want_fp, bounded) in &chain[1..] {
        let m = if bounded { model } else { recovery };
        enabled.clear();
        m.actions(&state, &mut enabled);
        let (action, next) = enabled
            .drain(..)
            .find_map(|a| {
                let next = m.next_state(&state, a.clone())?;
                let fp = if bounded {
                    fingerprint(model, &next)
                } else {
                    fingerprint(model, &model.recovery_view(next.clone()))
                };
                (fp == want_fp).then_some((a, next))
            })
            .expect("every node on a parent chain has an action from its parent");
        trace.push((next.clone(), Some(action)));
        state = next;
    }
    trace
}
