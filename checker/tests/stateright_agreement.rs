//! The engine against stateright's own checkers, on a model written the
//! way stateright's examples are: two-phase commit (Gray and Lamport's
//! transaction commit, as in TLA+'s `TwoPhase` and stateright's examples).
//!
//! Without symmetry the engine must find what stateright's breadth-first
//! search finds: the same unique states and transitions, the same verdict
//! on every property, and for each broken (or reached) property a
//! counterexample (or example) of the least length, which stateright's
//! search bounded to that depth also finds and bounded one step shorter
//! does not. With symmetry (the resource managers are interchangeable) it
//! must find as many classes as stateright's depth-first search with the
//! same representative. Each comparison is shown to catch a wrong engine:
//! a representative that merges states that are not symmetric, and a fast
//! successor that loses an action.

use highwater_checker::{verdict, Checkable, Completion, Graph, Verdict};
use stateright::{Checker, Expectation, Model, Property};
mod common;
use common::two_phase::{sorted, Flaw, TwoPhase};

fn search_all<M: Checkable>(model: &M) -> Graph<M> {
    common::search_whole(model, 2, None)
}

/// Whether stateright's breadth-first search, looking at states at most
/// `steps` steps from an initial state, discovers property `name`. (It
/// looks at a state while its depth, the initial state's being 1, is
/// below the target depth.) One thread: its search is then level by level,
/// and each state is first met at its least depth.
fn stateright_discovers_within<M>(model: &M, name: &'static str, steps: usize) -> bool
where
    M: Checkable + 'static,
{
    model
        .clone()
        .checker()
        .threads(1)
        .target_max_depth(steps + 2)
        .spawn_bfs()
        .join()
        .discovery(name)
        .is_some()
}

/// Where the engine and stateright's breadth-first search disagree on
/// `model` (searched without symmetry); empty when they agree.
fn disagreements_with_bfs<M>(model: &M) -> Vec<String>
where
    M: Checkable + 'static,
{
    let mut out = Vec::new();
    let ours = search_all(model);
    let theirs = model.clone().checker().threads(1).spawn_bfs().join();
    assert_eq!(ours.completion, Completion::Exhaustive);
    if ours.progress.unique_states != theirs.unique_state_count() as u64 {
        out.push(format!(
            "unique states: ours {}, stateright's {}",
            ours.progress.unique_states,
            theirs.unique_state_count()
        ));
    }
    // stateright counts the initial states as generated too.
    let generated = ours.progress.transitions + model.init_states().len() as u64;
    if generated != theirs.state_count() as u64 {
        out.push(format!(
            "states generated: ours {generated}, stateright's {}",
            theirs.state_count()
        ));
    }
    for ((p, first), ours_verdict) in ours.properties.iter().zip(&ours.first).zip(ours.verdicts()) {
        let always = p.expectation == Expectation::Always;
        let found = theirs.discovery(p.name).is_some();
        let theirs_verdict = verdict::of_search(always, found, Completion::Exhaustive);
        if ours_verdict != theirs_verdict {
            out.push(format!(
                "{:?}: ours {ours_verdict:?}, stateright's {theirs_verdict:?}",
                p.name
            ));
            continue;
        }
        let Some(n) = *first else {
            continue;
        };
        out.extend(path_disagreements(model, &ours, p, n));
    }
    out
}

/// Whether the engine's path to node `n`, the first state it found
/// noteworthy for `p`, is a path of the model to such a state and as short
/// as stateright's own search can find one.
fn path_disagreements<M>(model: &M, ours: &Graph<M>, p: &Property<M>, n: u32) -> Vec<String>
where
    M: Checkable + 'static,
{
    let mut out = Vec::new();
    let path = ours.path_to(n);
    let steps = path.len() - 1;
    if steps != usize::from(ours.depth(n)) {
        out.push(format!(
            "{:?}: a path of {steps} steps to a node at depth {}",
            p.name,
            ours.depth(n)
        ));
    }
    for w in path.windows(2) {
        let (from, (to, action)) = (&w[0].0, &w[1]);
        let action = action
            .clone()
            .expect("every step after the first has an action");
        if model.next_state(from, action).as_ref() != Some(to) {
            out.push(format!(
                "{:?}: the path takes a step the model does not",
                p.name
            ));
        }
    }
    let last = &path.last().expect("a path has a state").0;
    let holds = (p.condition)(model, last);
    if holds != (p.expectation == Expectation::Sometimes) {
        out.push(format!(
            "{:?}: the path's last state is not one that {}",
            p.name,
            if holds { "breaks it" } else { "satisfies it" }
        ));
    }
    if !stateright_discovers_within(model, p.name, steps) {
        out.push(format!(
            "{:?}: stateright finds nothing within our {steps} steps",
            p.name
        ));
    }
    if steps > 0 && stateright_discovers_within(model, p.name, steps - 1) {
        out.push(format!(
            "{:?}: stateright finds a path shorter than our {steps} steps",
            p.name
        ));
    }
    out
}

/// Where the engine with symmetry and stateright's depth-first search
/// with the same representative disagree; empty when they agree.
fn disagreements_with_symmetric_dfs(model: &TwoPhase) -> Vec<String> {
    assert!(model.symmetric);
    let mut out = Vec::new();
    let ours = search_all(model);
    let theirs = model
        .clone()
        .checker()
        .symmetry_fn(sorted)
        .spawn_dfs()
        .join();
    if ours.progress.unique_states != theirs.unique_state_count() as u64 {
        out.push(format!(
            "classes: ours {}, stateright's {}",
            ours.progress.unique_states,
            theirs.unique_state_count()
        ));
    }
    for (p, ours_verdict) in ours.properties.iter().zip(ours.verdicts()) {
        let always = p.expectation == Expectation::Always;
        let found = theirs.discovery(p.name).is_some();
        let theirs_verdict = verdict::of_search(always, found, Completion::Exhaustive);
        if ours_verdict != theirs_verdict {
            out.push(format!(
                "{:?}: ours {ours_verdict:?}, stateright's {theirs_verdict:?}",
                p.name
            ));
        }
    }
    out
}

#[test]
fn the_engine_agrees_with_stateright_on_two_phase_commit() {
    for rms in 1..=4 {
        let model = TwoPhase::new(rms);
        assert_eq!(
            disagreements_with_bfs(&model),
            Vec::<String>::new(),
            "{rms} RMs"
        );
    }
    // The figures TLC gives for TLA+'s TwoPhase with three RMs, and the
    // verdicts the properties were written for.
    let g = search_all(&TwoPhase::new(3));
    assert_eq!(g.progress.unique_states, 288);
    assert_eq!(
        g.verdicts(),
        [
            Verdict::Holds,
            Verdict::Counterexample,
            Verdict::Reached,
            Verdict::Reached,
            Verdict::NotReached
        ]
    );
    let commit = g.first[1].expect("the TM commits");
    assert_eq!(
        g.depth(commit),
        7,
        "three prepares, three receipts, a commit"
    );
}

#[test]
fn the_engine_with_symmetry_agrees_with_stateright_s_symmetric_search() {
    for rms in 1..=5 {
        let model = TwoPhase {
            symmetric: true,
            ..TwoPhase::new(rms)
        };
        assert_eq!(
            disagreements_with_symmetric_dfs(&model),
            Vec::<String>::new(),
            "{rms} RMs"
        );
        let all = search_all(&TwoPhase::new(rms)).progress.unique_states;
        let classes = search_all(&model).progress.unique_states;
        assert!(
            rms == 1 || classes < all,
            "symmetry reduces ({classes} of {all})"
        );
    }
}

#[test]
fn the_comparison_catches_a_representative_that_merges_distinct_states() {
    let model = TwoPhase {
        flaw: Flaw::CoarseRepresentative,
        ..TwoPhase::new(3)
    };
    let found = disagreements_with_bfs(&model);
    assert!(
        found.iter().any(|d| d.starts_with("unique states")),
        "{found:?}"
    );
    // With the TM's receipts forgotten, the search never sees it commit.
    assert!(
        found
            .iter()
            .any(|d| d.starts_with("\"the TM never commits\"")),
        "{found:?}"
    );
}

#[test]
fn the_comparison_catches_a_successor_that_loses_an_action() {
    let model = TwoPhase {
        flaw: Flaw::LostAbort,
        ..TwoPhase::new(2)
    };
    let found = disagreements_with_bfs(&model);
    assert!(
        found.iter().any(|d| d.starts_with("unique states")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|d| d.starts_with("states generated")),
        "{found:?}"
    );
}
