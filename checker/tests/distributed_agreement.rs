//! The distributed engine (`src/distributed/`) against the single-process
//! one, on two-phase commit: on 1, 2 and 3 workers (threads of this
//! process) the same figures, verdicts and paths, step by step, with and
//! without symmetry, searched to the end or stopped at the first
//! counterexample. Two planted mistakes show the comparison failing: owners
//! that let the last parent win (the paths change) and states dropped on
//! their way to another worker (the counts change).

mod common;
use common::two_phase::TwoPhase;
use common::{describe, single, spread};
use highwater_checker::distributed::Flaw;
use highwater_checker::search::Until;
use highwater_checker::Completion;

fn models() -> Vec<(&'static str, TwoPhase)> {
    let mut symmetric = TwoPhase::new(4);
    symmetric.symmetric = true;
    vec![("3 RMs", TwoPhase::new(3)), ("4 RMs, symmetric", symmetric)]
}

#[test]
fn one_two_and_three_workers_find_what_one_process_finds() {
    for (name, model) in models() {
        for until in [Until::Exhausted, Until::AnyBroken] {
            for progress in [true, false] {
                let want = describe(&single(&model, progress, until));
                for workers in 1..=3 {
                    let got = describe(&spread(&model, progress, until, workers, Flaw::None));
                    assert_eq!(
                        got, want,
                        "{name}, {until:?}, progress {progress}: {workers} worker(s) disagree"
                    );
                }
            }
        }
    }
}

#[test]
fn the_search_is_whole_and_stops_where_it_should() {
    let model = TwoPhase::new(3);
    let whole = spread(&model, true, Until::Exhausted, 2, Flaw::None);
    assert_eq!(whole.completion, Completion::Exhaustive);
    assert_eq!(whole.progress.unique_states, 288);
    let stopped = spread(&model, true, Until::AnyBroken, 2, Flaw::None);
    assert_eq!(stopped.completion, Completion::StoppedAtCounterexample);
    assert!(stopped.first[1].is_some(), "the TM's commit is found");
}

#[test]
fn the_comparison_catches_the_last_parent_winning() {
    let model = TwoPhase::new(3);
    let want = describe(&single(&model, true, Until::Exhausted));
    for workers in 1..=3 {
        let got = describe(&spread(
            &model,
            true,
            Until::Exhausted,
            workers,
            Flaw::LastParentWins,
        ));
        assert_ne!(got, want, "{workers} worker(s): the flaw went unnoticed");
    }
}

#[test]
fn the_comparison_catches_states_dropped_between_workers() {
    let model = TwoPhase::new(3);
    let want = describe(&single(&model, true, Until::Exhausted));
    for workers in 2..=3 {
        let got = describe(&spread(
            &model,
            true,
            Until::Exhausted,
            workers,
            Flaw::DropSomeSent,
        ));
        assert_ne!(got, want, "{workers} workers: the flaw went unnoticed");
    }
}
