//! The progress check: from every state of the bounded model, with no
//! further fault, some goal state can still be reached. Safety alone is not
//! enough: a system that never does anything breaks no invariant.
//!
//! Each progress property is "always, eventually possible" (AG EF) over the
//! state graph: every state of the bounded model can reach a state meeting
//! its goal ([`Checkable::progress_goals`]) by fault-free steps
//! ([`Checkable::is_fault`]). stateright 0.31's `eventually` cannot say
//! this (it follows single paths and is unsound on cycles), so it is
//! computed here: backward reachability from the goal states over the
//! graph's fault-free edges (`graph.rs`). Symmetry is sound for it: the
//! goals are unchanged by the model's symmetry, and so is the transition
//! relation, so a class reaches a goal exactly when each of its members
//! does.
//!
//! A model may owe no progress in some states by design
//! ([`Checkable::exempt`]: a system waiting for an operator); a state from
//! which every fault-free future can end there is counted, not reported as
//! stuck.

use crate::graph::{flag, Graph, NodeId};
use crate::search::Completion;
use crate::{Checkable, Trace};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// One progress property's verdict.
#[derive(Clone, Debug)]
pub struct ProgressResult<M: Checkable> {
    /// The goal's name.
    pub name: &'static str,
    /// States of the bounded model that cannot reach the goal (nor an
    /// exempt state) without a fault.
    pub stuck_states: u64,
    /// States of the bounded model that cannot reach the goal but can
    /// reach an exempt state (counted, not violations).
    pub exempt_states: u64,
    /// The shortest path to a stuck state, if any.
    pub counterexample: Option<Stuck<M>>,
}

impl<M: Checkable> ProgressResult<M> {
    pub fn verdict(&self) -> crate::Verdict {
        crate::verdict::of_progress(self.stuck_states)
    }
}

/// A stuck state, with the way to it and the way it cannot get out.
#[derive(Clone, Debug)]
pub struct Stuck<M: Checkable> {
    pub trace: Trace<M>,
    /// Every fault-free action enabled in the stuck state, each leading to
    /// another stuck state.
    pub exits: Vec<(M::Action, M::State)>,
    /// The shortest fault-free continuation from the stuck state into a
    /// trap: a set of states that lead only to each other, none a goal.
    pub continuation: Trace<M>,
    /// How many states the trap holds.
    pub trap_states: u64,
}

/// What the progress check found.
#[derive(Clone, Debug)]
pub struct ProgressReport<M: Checkable> {
    /// One per goal, in the graph's goal order.
    pub properties: Vec<ProgressResult<M>>,
    /// A shortest path to an exempt state, if any.
    pub exempt_example: Option<Trace<M>>,
    /// Fault-free edges walked, and recovery states beyond the bounds.
    pub edges: u64,
    pub recovery_states: u64,
    /// Recovery states a walk showed to reach every goal
    /// (`recovery_walk.rs`).
    pub recovery_walked: u64,
    pub seconds: f64,
}

/// Runs the progress check on a complete graph that kept its fault-free
/// edges (on any other graph every state would look stuck). It needs no
/// index ([`Graph::release_index`]).
pub fn check<M: Checkable>(graph: &Graph<M>) -> ProgressReport<M> {
    check_as(graph, Reach::default())
}

/// How [`check`] finds the states that can reach each goal.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reach {
    /// Sweeps over the forward edges, then, if they have not settled after
    /// [`MAX_SWEEPS`], backward searches over the reversed edges.
    #[default]
    Sweeps,
    /// A planted flaw: the sweeps' answer, settled or not.
    SweepsOnly,
}

/// [`check`], or with a planted flaw.
#[doc(hidden)]
pub fn check_as<M: Checkable>(graph: &Graph<M>, how: Reach) -> ProgressReport<M> {
    assert!(
        graph.keeps_progress && graph.completion == Completion::Exhaustive,
        "the progress check needs a complete graph with its fault-free edges"
    );
    let start = std::time::Instant::now();
    // Bit EXEMPT: can reach an exempt state; bit GOAL << i: can reach goal
    // i. A recovery state a walk took to a goal carries the goal's flag: it
    // reaches the goal too.
    let reached = reachable(graph, how);
    let by_depth = nodes_by_depth(graph);
    let exempt_example = by_depth
        .iter()
        .find(|&&n| graph.flags(n) & flag::EXEMPT != 0)
        .map(|&n| graph.path_to(n));
    let properties = graph
        .goals
        .iter()
        .enumerate()
        .map(|(i, goal)| {
            let bits = flag::GOAL << i;
            let reaches = |n: NodeId| reached[n as usize] & bits != 0;
            let exempt = |n: NodeId| reached[n as usize] & flag::EXEMPT != 0;
            let stuck = |n: NodeId| !reaches(n) && !exempt(n);
            let mut count = 0;
            let mut exempt_states = 0;
            let mut first = None;
            for &n in &by_depth {
                if stuck(n) {
                    count += 1;
                    first.get_or_insert(n);
                } else if !reaches(n) {
                    exempt_states += 1;
                }
            }
            ProgressResult {
                name: goal.name,
                stuck_states: count,
                exempt_states,
                counterexample: first.map(|n| stuck_report(graph, n, &stuck)),
            }
        })
        .collect();
    ProgressReport {
        properties,
        exempt_example,
        edges: graph.edge_count() as u64,
        recovery_states: graph.progress.recovery_states,
        recovery_walked: graph.progress.recovery_walked,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// The bounded model's states, shallowest first (ties in search order).
fn nodes_by_depth<M: Checkable>(graph: &Graph<M>) -> Vec<NodeId> {
    let mut order: Vec<NodeId> = (0..graph.len() as NodeId)
        .filter(|&n| graph.in_bounds(n))
        .collect();
    order.sort_by_key(|&n| (graph.depth(n), n));
    order
}

fn stuck_report<M: Checkable>(
    graph: &Graph<M>,
    n: NodeId,
    stuck: &dyn Fn(NodeId) -> bool,
) -> Stuck<M> {
    let trace = graph.path_to(n);
    let last = trace.last().expect("a path has a state").0.clone();
    let recovery = &graph.recovery;
    let mut enabled = Vec::new();
    recovery.actions(&last, &mut enabled);
    let exits = enabled
        .into_iter()
        .filter_map(|a| Some((a.clone(), recovery.next_state(&last, a)?)))
        .filter(|(a, next)| graph.is_edge(&last, a, next))
        .inspect(|(a, next)| {
            assert!(
                graph.find_node(next, graph.edges(n)).is_some_and(stuck),
                "{} leads out of a stuck state: the progress check is wrong",
                graph.model.format_action(a)
            );
        })
        .collect();
    let (continuation, trap_states) = trap(graph, n, last);
    Stuck {
        trace,
        exits,
        continuation,
        trap_states,
    }
}

/// From stuck node `n` (concrete state `from`), the shortest fault-free
/// path into a bottom strongly connected component of the states it can
/// reach (all stuck: stuck states lead only to stuck states), and that
/// component's size. Every fault-free future of `n` ends in such a trap.
fn trap<M: Checkable>(graph: &Graph<M>, n: NodeId, from: M::State) -> (Trace<M>, u64) {
    let (chain, size) = trap_chain(n, |m| graph.edges(m));
    let path = concrete_path(&graph.model, &graph.recovery, from, &chain, |s, want| {
        graph.is_node(s, want)
    });
    (path, size)
}

/// [`trap`] on any graph, given by each node's successors in the order the
/// search recorded them: the nodes from `n`'s successor into the trap (`n`
/// itself left out), and the trap's size.
pub(crate) fn trap_chain<'a>(
    n: NodeId,
    edges: impl Fn(NodeId) -> &'a [NodeId],
) -> (Vec<NodeId>, u64) {
    // The states reachable from n, breadth-first, with parents.
    let mut order = vec![n];
    let mut parent = std::collections::HashMap::from([(n, n)]);
    let mut i = 0;
    while i < order.len() {
        let m = order[i];
        i += 1;
        for &t in edges(m) {
            if let std::collections::hash_map::Entry::Vacant(v) = parent.entry(t) {
                v.insert(m);
                order.push(t);
            }
        }
    }
    let component = strongly_connected(&edges, &order);
    // A component is a trap when no edge leaves it.
    let mut leaves = std::collections::HashSet::new();
    for &m in &order {
        for &t in edges(m) {
            if component[&t] != component[&m] {
                leaves.insert(component[&m]);
            }
        }
    }
    let target = *order
        .iter()
        .find(|m| !leaves.contains(&component[m]))
        .expect("a finite graph has a bottom component");
    let size = order
        .iter()
        .filter(|m| component[m] == component[&target])
        .count() as u64;
    let mut chain = vec![target];
    while let Some(&last) = chain.last() {
        if last == n {
            break;
        }
        chain.push(parent[&last]);
    }
    chain.reverse();
    chain.remove(0);
    (chain, size)
}

/// Concrete fault-free steps from `from` through the nodes of `chain`
/// (`is(state, node)`: the state is in that node's class).
pub(crate) fn concrete_path<M: Checkable>(
    model: &M,
    recovery: &M,
    from: M::State,
    chain: &[NodeId],
    is: impl Fn(&M::State, NodeId) -> bool,
) -> Trace<M> {
    let mut state = from;
    let mut trace = vec![(state.clone(), None)];
    for &want in chain {
        let mut enabled = Vec::new();
        recovery.actions(&state, &mut enabled);
        let (a, next) = enabled
            .into_iter()
            .find_map(|a| {
                let next = recovery.next_state(&state, a.clone())?;
                let edge =
                    crate::graph::fault_free_edge(model, &state, &a, &next) && is(&next, want);
                edge.then_some((a, next))
            })
            .expect("an edge of the graph is an enabled fault-free action");
        trace.push((next.clone(), Some(a)));
        state = next;
    }
    trace
}

/// Tarjan's strongly connected components of the subgraph on `nodes`
/// (closed under edges), iteratively: component id per node.
fn strongly_connected<'a>(
    edges: &impl Fn(NodeId) -> &'a [NodeId],
    nodes: &[NodeId],
) -> std::collections::HashMap<NodeId, u32> {
    use std::collections::HashMap;
    let mut index: HashMap<NodeId, u32> = HashMap::new();
    let mut low: HashMap<NodeId, u32> = HashMap::new();
    let mut on_stack = std::collections::HashSet::new();
    let mut stack = Vec::new();
    let mut component = HashMap::new();
    let mut next_index = 0u32;
    let mut next_component = 0u32;
    for &root in nodes {
        if index.contains_key(&root) {
            continue;
        }
        // (node, next edge to look at)
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut e)) = work.last_mut() {
            if *e == 0 && !index.contains_key(&v) {
                index.insert(v, next_index);
                low.insert(v, next_index);
                next_index += 1;
                stack.push(v);
                on_stack.insert(v);
            }
            let out = edges(v);
            if let Some(&w) = out.get(*e) {
                *e += 1;
                if !index.contains_key(&w) {
                    work.push((w, 0));
                } else if on_stack.contains(&w) {
                    let lw = index[&w].min(low[&v]);
                    low.insert(v, lw);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                let lu = low[&u].min(low[&v]);
                low.insert(u, lu);
            }
            if low[&v] == index[&v] {
                while let Some(w) = stack.pop() {
                    on_stack.remove(&w);
                    component.insert(w, next_component);
                    if w == v {
                        break;
                    }
                }
                next_component += 1;
            }
        }
    }
    component
}

/// The bytes the progress check adds to the graph at most: a byte of
/// reached goals per state, the states by depth, and the reversed edges if
/// the sweeps do not settle.
pub fn check_bytes<M: Checkable>(graph: &Graph<M>) -> u64 {
    let n = graph.len() as u64;
    let row_starts = 2 * 4 * (n + 1);
    let sources = 4 * graph.edge_count() as u64;
    let reached = n;
    let by_depth = 4 * n;
    row_starts + sources + reached + by_depth
}

/// The sweeps tried before the backward searches: `safe` settles in 7.
pub const MAX_SWEEPS: u32 = 16;

/// States swept by a thread at a time, from the last state down.
const SWEEP_BLOCK: usize = 1 << 14;

/// For each state, the flags (goals, exempt) of the states it can reach
/// by fault-free edges, itself included: the least fixpoint of "a state
/// reaches what its successors reach".
///
/// Sweeps first: each state, from the last found down to the first, takes
/// in what its successors reach. The search numbers states breadth-first,
/// so most edges lead to a later state, already swept, and a few sweeps
/// settle (`safe`: 7, on the graph's own edges, against a reversed copy of
/// them and a backward search per goal, 40 % of the check's time before).
/// A sweep that changes nothing shows the fixpoint reached. Sweeps that
/// have not settled after [`MAX_SWEEPS`] (paths that keep going back to
/// earlier states) are finished by a backward search over the reversed
/// edges, from every state that reaches something.
fn reachable<M: Checkable>(graph: &Graph<M>, how: Reach) -> Vec<u8> {
    let reached: Vec<AtomicU8> = (0..graph.len() as NodeId)
        .map(|m| AtomicU8::new(graph.flags(m) & !(flag::IN_BOUNDS | flag::EXPANDED)))
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    // Flags spread by OR, so a state can gain only flags some state starts
    // with; one that has them all is passed over (after the first sweep,
    // most states of a check that holds have every goal).
    let every = reached
        .iter()
        .fold(0u8, |all, r| all | r.load(Ordering::Relaxed));
    let mut settled = false;
    for _ in 0..MAX_SWEEPS {
        if sweep(graph, &reached, every, threads) == 0 {
            settled = true;
            break;
        }
    }
    let mut reached: Vec<u8> = reached.into_iter().map(AtomicU8::into_inner).collect();
    if !settled && how == Reach::Sweeps {
        Reverse::of(graph).spread(&mut reached);
    }
    reached
}

/// One sweep, blocks of states taken in turn by `threads` threads; the
/// states whose reached flags grew. A state holding `every` flag is skipped.
fn sweep<M: Checkable>(graph: &Graph<M>, reached: &[AtomicU8], every: u8, threads: usize) -> u64 {
    let n = reached.len();
    let blocks = n.div_ceil(SWEEP_BLOCK);
    let taken = AtomicUsize::new(0);
    // Each state is written by the thread sweeping its block only; flags
    // only grow, so a successor read before another thread raises it costs
    // another sweep, never a wrong answer (that sweep changes something).
    let work = || {
        let mut changed = 0u64;
        loop {
            let b = taken.fetch_add(1, Ordering::Relaxed);
            if b >= blocks {
                return changed;
            }
            let end = n - b * SWEEP_BLOCK;
            for m in (end.saturating_sub(SWEEP_BLOCK)..end).rev() {
                let old = reached[m].load(Ordering::Relaxed);
                if old == every {
                    continue;
                }
                let mut now = old;
                for &t in graph.edges(m as NodeId) {
                    now |= reached[t as usize].load(Ordering::Relaxed);
                }
                if now != old {
                    reached[m].store(now, Ordering::Relaxed);
                    changed += 1;
                }
            }
        }
    };
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        let mine = work();
        helpers
            .into_iter()
            .map(|h| h.join().expect("a sweep thread panicked"))
            .sum::<u64>()
            + mine
    })
}

/// The fault-free edges reversed, in compressed rows ([`check_bytes`]
/// counts what they take).
struct Reverse {
    start: Vec<u32>,
    sources: Vec<NodeId>,
}

impl Reverse {
    fn of<M: Checkable>(graph: &Graph<M>) -> Reverse {
        let n = graph.len();
        let mut start = vec![0u32; n + 1];
        for m in 0..n as NodeId {
            for &t in graph.edges(m) {
                start[t as usize + 1] += 1;
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut sources = vec![0; graph.edge_count()];
        for m in 0..n as NodeId {
            for &t in graph.edges(m) {
                sources[fill[t as usize] as usize] = m;
                fill[t as usize] += 1;
            }
        }
        Reverse { start, sources }
    }

    /// Gives each state's reached flags to every state with an edge to it,
    /// until none grows: a backward search for all the flags at once, from
    /// every state that reaches something. A state is visited again only
    /// when its flags grow, so at most once per flag.
    fn spread(&self, reached: &mut [u8]) {
        let mut stack: Vec<NodeId> = (0..reached.len() as NodeId)
            .filter(|&m| reached[m as usize] != 0)
            .collect();
        while let Some(t) = stack.pop() {
            let range = self.start[t as usize] as usize..self.start[t as usize + 1] as usize;
            let flags = reached[t as usize];
            for &s in &self.sources[range] {
                if reached[s as usize] | flags != reached[s as usize] {
                    reached[s as usize] |= flags;
                    stack.push(s);
                }
            }
        }
    }
}
