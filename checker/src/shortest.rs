//! Shortest counterexamples, by the search (`search.rs`): the first state
//! found breaking a property is at the least depth, and its parent chain in
//! the state graph is a shortest path.

use crate::search::{self, Completion, SearchOptions, Until};
use crate::{Checkable, Trace};
use stateright::Property;

/// For each always-property in `targets`, the shortest trace to a state that
/// breaks it; None for those that hold. The search stops once every target
/// has broken (or the state space is exhausted).
pub fn shortest_counterexamples<M: Checkable>(
    model: &M,
    targets: &[Property<M>],
) -> Vec<(&'static str, Option<Trace<M>>)> {
    let names: Vec<&str> = targets.iter().map(|p| p.name).collect();
    search(model, targets, Until::AllBroken(&names))
}

/// As [`shortest_counterexamples`], but stops once the search has finished
/// the level `until` names: every target broken within that many steps gets
/// its shortest trace, the others None. The answer is the same in every
/// run, whatever else a search stumbled on.
pub fn shortest_counterexamples_until<M: Checkable>(
    model: &M,
    targets: &[Property<M>],
    until: Until<'_>,
) -> Vec<(&'static str, Option<Trace<M>>)> {
    search(model, targets, until)
}

fn search<M: Checkable>(
    model: &M,
    targets: &[Property<M>],
    until: Until<'_>,
) -> Vec<(&'static str, Option<Trace<M>>)> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let g = search::search(
        model,
        SearchOptions {
            threads,
            properties: Some(targets.to_vec()),
            progress: None,
            until,
            stop: &|_| false,
            on_progress: &mut |_| {},
            budget: None,
            expected_states: None,
        },
    );
    debug_assert!(g.completion != Completion::Interrupted);
    targets
        .iter()
        .zip(&g.first)
        .map(|(t, first)| (t.name, first.map(|n| g.path_to(n))))
        .collect()
}
