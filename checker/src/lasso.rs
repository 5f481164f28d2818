//! Progress counterexamples as lassos, the shape Apalache's and TLC's
//! liveness counterexamples take: a path, then a loop that repeats forever.
//!
//! The progress check (`progress.rs`) reports a path to a state that cannot
//! reach its goal and the shortest fault-free continuation from it into a
//! trap (a bottom strongly connected component of the fault-free graph, no
//! goal among its states). That continuation stops at the first trap state
//! it reaches; it does not go round. Here it is closed: from that state,
//! the shortest fault-free walk back to it; or, when the trap is one state
//! with no fault-free step at all, nothing more: the system stutters there
//! forever. The lasso's loop state is that first trap state, and the last
//! state's fault-free successor is it (itself, when it stutters).
//!
//! The walk is on concrete states, over the edges the graph keeps
//! ([`graph::fault_free_edge`], under the recovery model its continuations
//! use), so it stays inside the trap. A concrete state may return to its
//! trap state only up to symmetry or up to what recovery states forget;
//! then the first state the walk repeats is the loop state instead.

use crate::graph;
use crate::{Checkable, Trace};
use std::collections::HashMap;
use std::hash::Hash;

/// The progress counterexample `path` (to the stuck state) continued by
/// `continuation` (from the stuck state into the trap) as one lasso: the
/// trace, and the index of the state the last one's successor is. `model`
/// is the bounded model, `recovery` the model recovery runs under.
pub fn progress_lasso<M: Checkable>(
    model: &M,
    recovery: &M,
    path: &Trace<M>,
    continuation: &Trace<M>,
) -> (Trace<M>, usize) {
    let mut trace = path.clone();
    trace.extend(continuation.iter().skip(1).cloned());
    let entry = trace.len() - 1;
    let start = trace[entry].0.clone();
    let (round, at) = close(start, |s| fault_free_steps(model, recovery, s));
    trace.extend(round.into_iter().skip(1));
    (trace, entry + at)
}

/// The fault-free steps from `s` the progress check follows: every action
/// the recovery model enables whose step is one of the graph's edges.
pub fn fault_free_steps<M: Checkable>(
    model: &M,
    recovery: &M,
    s: &M::State,
) -> Vec<(M::Action, M::State)> {
    let mut enabled = Vec::new();
    recovery.actions(s, &mut enabled);
    enabled
        .into_iter()
        .filter_map(|a| {
            let next = recovery.next_state(s, a.clone())?;
            graph::fault_free_edge(model, s, &a, &next).then_some((a, next))
        })
        .collect()
}

/// A lasso from `start` along `steps`: a path from `start` (with the action
/// into each state after the first) and the index of the state the last
/// one's successor is. A state with no step stutters: the loop is itself.
/// Preferred: the shortest way back to `start` (a breadth-first search);
/// where there is none, the first state a walk repeats.
pub fn close<S, A>(start: S, steps: impl Fn(&S) -> Vec<(A, S)>) -> (Vec<(S, Option<A>)>, usize)
where
    S: Clone + Eq + Hash,
    A: Clone,
{
    if let Some(round) = back_to_start(&start, &steps) {
        return (round, 0);
    }
    first_repeat(start, &steps)
}

/// The shortest path from `start` whose last state steps back to `start`
/// (None when no path returns, or `start` has no step).
fn back_to_start<S, A>(start: &S, steps: &impl Fn(&S) -> Vec<(A, S)>) -> Option<Vec<(S, Option<A>)>>
where
    S: Clone + Eq + Hash,
    A: Clone,
{
    // Nodes in discovery order, each with its parent and the action into it.
    let mut nodes: Vec<(S, Option<(usize, A)>)> = vec![(start.clone(), None)];
    let mut seen: HashMap<S, usize> = HashMap::from([(start.clone(), 0)]);
    let mut i = 0;
    while i < nodes.len() {
        let s = nodes[i].0.clone();
        for (a, next) in steps(&s) {
            if next == *start {
                return Some(path_to(&nodes, i));
            }
            if !seen.contains_key(&next) {
                seen.insert(next.clone(), nodes.len());
                nodes.push((next, Some((i, a))));
            }
        }
        i += 1;
    }
    None
}

fn path_to<S: Clone, A: Clone>(
    nodes: &[(S, Option<(usize, A)>)],
    mut i: usize,
) -> Vec<(S, Option<A>)> {
    let mut path = Vec::new();
    loop {
        let (s, parent) = &nodes[i];
        path.push((s.clone(), parent.as_ref().map(|(_, a)| a.clone())));
        match parent {
            Some((p, _)) => i = *p,
            None => break,
        }
    }
    path.reverse();
    path
}

/// A walk from `start` along each state's first step, until a step leads
/// back onto the walk or to a state with no step (which stutters). In a
/// finite graph one of the two happens.
fn first_repeat<S, A>(start: S, steps: &impl Fn(&S) -> Vec<(A, S)>) -> (Vec<(S, Option<A>)>, usize)
where
    S: Clone + Eq + Hash,
    A: Clone,
{
    let mut on_path: HashMap<S, usize> = HashMap::from([(start.clone(), 0)]);
    let mut path: Vec<(S, Option<A>)> = vec![(start, None)];
    loop {
        let last = path.len() - 1;
        let Some((a, next)) = steps(&path[last].0).into_iter().next() else {
            return (path, last);
        };
        if let Some(&at) = on_path.get(&next) {
            return (path, at);
        }
        on_path.insert(next.clone(), path.len());
        path.push((next, Some(a)));
    }
}

#[cfg(test)]
mod tests {
    use super::close;

    /// `close` on a graph given as successor lists (steps named by target).
    fn lasso(edges: &[&[u8]], start: u8) -> (Vec<u8>, usize) {
        let (path, at) = close(start, |&s| {
            edges[s as usize]
                .iter()
                .map(|&t| (t, t))
                .collect::<Vec<_>>()
        });
        (path.into_iter().map(|(s, _)| s).collect(), at)
    }

    #[test]
    fn a_state_with_no_step_stutters() {
        assert_eq!(lasso(&[&[]], 0), (vec![0], 0));
        assert_eq!(lasso(&[&[1], &[]], 0), (vec![0, 1], 1));
    }

    #[test]
    fn the_shortest_way_back_to_the_start_is_the_loop() {
        // 0 -> 1 -> 2 -> 0, and a longer way 0 -> 3 -> 4 -> 1.
        let edges: &[&[u8]] = &[&[3, 1], &[2], &[0], &[4], &[1]];
        assert_eq!(lasso(edges, 0), (vec![0, 1, 2], 0));
    }

    #[test]
    fn without_a_way_back_the_first_repeated_state_is_the_loop() {
        // 0 -> 1 <-> 2: the start is never met again.
        assert_eq!(lasso(&[&[1], &[2], &[1]], 0), (vec![0, 1, 2], 1));
        // Two ways into a cycle, the breadth-first tree's edges crossing.
        let edges: &[&[u8]] = &[&[1, 2], &[2], &[1]];
        assert_eq!(lasso(edges, 0), (vec![0, 1, 2], 1));
        // A longer walk into a cycle that leaves the start behind.
        let edges: &[&[u8]] = &[&[1], &[2], &[3], &[1]];
        assert_eq!(lasso(edges, 0), (vec![0, 1, 2, 3], 1));
    }
}
