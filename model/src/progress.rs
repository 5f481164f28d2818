//! Progress: from every reachable state, with no further fault, the
//! partition can heal. Safety alone is not enough: a partition that never
//! commits anything loses nothing.
//!
//! Each progress property is "always, eventually possible" (AG EF) over the
//! state graph: every state of the bounded model can reach a goal state by
//! fault-free steps (no crash, no controller belief that a live broker
//! failed, no unclean election). stateright 0.31's `eventually` cannot say
//! this (it follows single paths and is unsound on cycles), so it is
//! computed here: backward reachability from the goal states over the
//! graph's fault-free edges (`graph.rs`). Symmetry is sound for it: the
//! goals are unchanged by renaming replicas, and so is the transition
//! relation, so a class reaches a goal exactly when each of its members does.
//!
//! A partition whose ISR and ELR are both empty cannot elect a leader
//! without an unclean election: KIP-966 keeps it offline until an operator
//! acts. Such states are offline by design, and a state from which every
//! fault-free future ends there is counted, not reported as stuck.

use crate::actions::{self, produce_enabled};
use crate::config::Config;
use crate::graph::{flag, Graph, NodeId, NodePredicates, Trace};
use crate::state::{LeaderView, State};

pub const RECOVERABLE: &str = "the partition can heal";
pub const ACKED_REPLICATED: &str = "acknowledged records reach every replica";

/// The predicates the graph search records for the progress check.
pub const PREDICATES: NodePredicates = NodePredicates {
    healthy,
    offline: offline_by_design,
    acked_replicated,
};

/// A healthy partition: a live leader, in the controller's epoch, known to
/// every replica; every replica back (a restart is no fault: a crashed
/// broker must come back for the partition to have healed), unfenced, in
/// the ISR, holding exactly the leader's log with the HW at its end; and,
/// while the producer has records left, a write the leader accepts
/// (acks=all: its ISR has min.insync.replicas).
pub fn healthy(cfg: &Config, s: &State) -> bool {
    let c = &s.controller;
    let Some(l) = c.leader else {
        return false;
    };
    let leader = s.replica(l);
    if !leader.presumes_leadership(l) || leader.epoch != c.epoch {
        return false;
    }
    let end = leader.leo();
    let replicas_ok = s.ids().all(|r| {
        let x = s.replica(r);
        x.alive
            && !c.fenced.contains(r)
            && c.isr.contains(r)
            && x.leader == LeaderView::Replica(l)
            && x.epoch == c.epoch
            && x.leo() == end
            && x.hw == end
    });
    replicas_ok && (s.produced >= cfg.records || produce_enabled(cfg, s, l))
}

/// No leader, and no replica the controller could elect without an unclean
/// election: the ISR and the ELR are empty (KIP-966's offline partition),
/// and so is the last known leader when that election is on.
pub fn offline_by_design(cfg: &Config, s: &State) -> bool {
    let c = &s.controller;
    let last_known = cfg.last_known_leader && !c.lke.is_empty();
    c.leader.is_none() && c.isr.is_empty() && c.elr.is_empty() && !last_known
}

/// Every acknowledged record is, at its offset, on every replica, back
/// from any crash, and below that replica's HW.
pub fn acked_replicated(_cfg: &Config, s: &State) -> bool {
    s.records[..s.produced as usize]
        .iter()
        .enumerate()
        .filter(|(_, h)| h.acked.is_some())
        .all(|(id, h)| {
            s.ids().all(|r| {
                let x = s.replica(r);
                x.alive
                    && x.hw > h.offset
                    && x.log.get(h.offset).is_some_and(|e| e.id as usize == id)
            })
        })
}

/// One progress property's verdict.
#[derive(Clone, Debug)]
pub struct ProgressResult {
    pub name: &'static str,
    /// States of the bounded model that cannot reach the goal (nor an
    /// offline-by-design state) without a fault.
    pub stuck_states: u64,
    /// The shortest path to a stuck state, if any.
    pub counterexample: Option<Stuck>,
}

/// A stuck state, with the way to it and the way it cannot get out.
#[derive(Clone, Debug)]
pub struct Stuck {
    pub trace: Trace,
    /// Every fault-free action enabled in the stuck state, each leading to
    /// another stuck state.
    pub exits: Vec<(crate::actions::Action, State)>,
    /// The shortest fault-free continuation from the stuck state into a
    /// trap: a set of states that lead only to each other, none healthy.
    pub continuation: Trace,
    /// How many states the trap holds.
    pub trap_states: u64,
}

/// What the progress check found.
#[derive(Clone, Debug)]
pub struct ProgressReport {
    pub properties: Vec<ProgressResult>,
    /// States of the bounded model that can no longer heal but go offline
    /// by design (counted, not violations).
    pub offline_states: u64,
    /// A shortest path to an offline-by-design state, if any.
    pub offline_example: Option<Trace>,
    /// Fault-free edges walked, and recovery states beyond the epoch bound.
    pub edges: u64,
    pub recovery_states: u64,
    /// Recovery states a walk showed to heal (`witness.rs`).
    pub recovery_walked: u64,
    pub seconds: f64,
}

/// Runs the progress check on a complete graph that kept its fault-free
/// edges (on any other graph every state would look stuck).
pub fn check(graph: &Graph) -> ProgressReport {
    assert!(
        graph.keeps_progress && graph.completion == crate::graph::Completion::Exhaustive,
        "the progress check needs a complete graph with its fault-free edges"
    );
    let start = std::time::Instant::now();
    let reverse = Reverse::of(graph);
    // Three independent backward searches over the same reversed graph.
    let reachable = |goal: u8| reverse.reachable_from(graph, move |f| f & goal != 0);
    let (offline, healthy, acked) = std::thread::scope(|scope| {
        let offline = scope.spawn(|| reachable(flag::OFFLINE));
        // A recovery state a walk took to a goal reaches it too.
        let healthy = scope.spawn(|| reachable(flag::HEALTHY | flag::REACHES_HEALTHY));
        let acked = reachable(flag::ACKED_REPLICATED | flag::REACHES_ACKED_REPLICATED);
        let join = |h: std::thread::ScopedJoinHandle<'_, Vec<bool>>| {
            h.join().expect("a backward search panicked")
        };
        (join(offline), join(healthy), acked)
    });
    let by_depth = nodes_by_depth(graph);
    let mut offline_states = 0;
    let mut offline_example = None;
    for &n in &by_depth {
        if !healthy[n as usize] && offline[n as usize] {
            offline_states += 1;
        }
        if offline_example.is_none() && graph.flags(n) & flag::OFFLINE != 0 {
            offline_example = Some(n);
        }
    }
    let properties = [(RECOVERABLE, &healthy), (ACKED_REPLICATED, &acked)]
        .into_iter()
        .map(|(name, reach)| {
            let stuck = |n: NodeId| !reach[n as usize] && !offline[n as usize];
            let mut count = 0;
            let mut first = None;
            for &n in &by_depth {
                if stuck(n) {
                    count += 1;
                    first.get_or_insert(n);
                }
            }
            ProgressResult {
                name,
                stuck_states: count,
                counterexample: first.map(|n| stuck_report(graph, n, &stuck)),
            }
        })
        .collect();
    ProgressReport {
        properties,
        offline_states,
        offline_example: offline_example.map(|n| graph.path_to(n)),
        edges: graph.edge_count() as u64,
        recovery_states: graph.progress.recovery_states,
        recovery_walked: graph.progress.recovery_walked,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// The bounded model's states, shallowest first (ties in search order).
fn nodes_by_depth(graph: &Graph) -> Vec<NodeId> {
    let mut order: Vec<NodeId> = (0..graph.len() as NodeId)
        .filter(|&n| graph.in_bounds(n))
        .collect();
    order.sort_by_key(|&n| (graph.depth(n), n));
    order
}

fn stuck_report(graph: &Graph, n: NodeId, stuck: &dyn Fn(NodeId) -> bool) -> Stuck {
    let trace = graph.path_to(n);
    let last = trace.last().expect("a path has a state").0;
    let cfg = graph.recovery;
    let mut enabled = Vec::new();
    actions::enabled(&cfg, &last, &mut enabled);
    let exits = enabled
        .into_iter()
        .filter_map(|a| Some((a, actions::apply(&cfg, &last, a)?)))
        .filter(|(a, next)| graph.is_edge(&last, *a, next))
        .inspect(|(a, next)| {
            assert!(
                graph.node_of(next).is_some_and(stuck),
                "{a} leads out of a stuck state: the progress check is wrong"
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
fn trap(graph: &Graph, n: NodeId, from: State) -> (Trace, u64) {
    // The states reachable from n, breadth-first, with parents.
    let mut order = vec![n];
    let mut parent = std::collections::HashMap::from([(n, n)]);
    let mut i = 0;
    while i < order.len() {
        let m = order[i];
        i += 1;
        for &t in graph.edges(m) {
            if let std::collections::hash_map::Entry::Vacant(v) = parent.entry(t) {
                v.insert(m);
                order.push(t);
            }
        }
    }
    let component = strongly_connected(graph, &order);
    // A component is a trap when no edge leaves it.
    let mut leaves = std::collections::HashSet::new();
    for &m in &order {
        for &t in graph.edges(m) {
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
    (concrete_path(graph, from, &chain[1..]), size)
}

/// Concrete fault-free steps from `from` through the nodes of `chain`.
fn concrete_path(graph: &Graph, from: State, chain: &[NodeId]) -> Trace {
    let cfg = graph.recovery;
    let mut state = from;
    let mut trace = vec![(state, None)];
    for &want in chain {
        let mut enabled = Vec::new();
        actions::enabled(&cfg, &state, &mut enabled);
        let (a, next) = enabled
            .into_iter()
            .find_map(|a| {
                let next = actions::apply(&cfg, &state, a)?;
                let edge = graph.is_edge(&state, a, &next) && graph.node_of(&next) == Some(want);
                edge.then_some((a, next))
            })
            .expect("an edge of the graph is an enabled fault-free action");
        trace.push((next, Some(a)));
        state = next;
    }
    trace
}

/// Tarjan's strongly connected components of the subgraph on `nodes`
/// (closed under edges), iteratively: component id per node.
fn strongly_connected(graph: &Graph, nodes: &[NodeId]) -> std::collections::HashMap<NodeId, u32> {
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
            let edges = graph.edges(v);
            if let Some(&w) = edges.get(*e) {
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

/// The fault-free edges reversed, in compressed rows.
struct Reverse {
    start: Vec<u32>,
    sources: Vec<NodeId>,
}

impl Reverse {
    fn of(graph: &Graph) -> Reverse {
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

    /// Which states can reach a state whose flags satisfy `goal`.
    fn reachable_from(&self, graph: &Graph, goal: impl Fn(u8) -> bool) -> Vec<bool> {
        let n = graph.len();
        let mut reached = vec![false; n];
        let mut stack: Vec<NodeId> = Vec::new();
        for m in 0..n as NodeId {
            if goal(graph.flags(m)) {
                reached[m as usize] = true;
                stack.push(m);
            }
        }
        while let Some(t) = stack.pop() {
            let range = self.start[t as usize] as usize..self.start[t as usize + 1] as usize;
            for &s in &self.sources[range] {
                if !reached[s as usize] {
                    reached[s as usize] = true;
                    stack.push(s);
                }
            }
        }
        reached
    }
}
