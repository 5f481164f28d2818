//! The memory budget (`src/memory.rs`): a search that would grow past it
//! stops before it does, with a partial answer; a progress check that
//! would not fit beside the complete graph is not run; a budget with room
//! to spare changes nothing, and a hint of the states to expect (the index
//! sized for them from the start) changes no answer. A planted flaw (the budget never checked)
//! shows the first check failing.

mod common;

use common::two_phase::TwoPhase;
use highwater_checker::memory::{Budget, BudgetFlaw, Step};
use highwater_checker::search::{self, Completion, ProgressOptions, SearchOptions, Until};
use highwater_checker::{Outcome, Verdict};

fn run(model: &TwoPhase, budget: Option<Budget>) -> Outcome<TwoPhase> {
    run_expecting(model, budget, None)
}

fn run_expecting(
    model: &TwoPhase,
    budget: Option<Budget>,
    expected_states: Option<u64>,
) -> Outcome<TwoPhase> {
    let mut g = search::search(
        model,
        SearchOptions {
            threads: 2,
            progress: Some(ProgressOptions::of(model)),
            properties: None,
            until: Until::Exhausted,
            stop: &|_| false,
            on_progress: &mut |_| {},
            budget,
            expected_states,
        },
    );
    Outcome::of_graph(&mut g, budget, || {})
}

/// What a search that did not fit its budget must show: stopped by it,
/// some states explored but not all, none held past the budget, and no
/// property claimed to hold.
fn stopped_by(o: &Outcome<TwoPhase>, budget: Budget, whole: &Outcome<TwoPhase>) -> Vec<String> {
    let mut wrong = Vec::new();
    if o.completion != Completion::OverBudget {
        wrong.push(format!("completion {:?}", o.completion));
    }
    let Some(over) = o.over_budget else {
        wrong.push("no over-budget report".to_string());
        return wrong;
    };
    if over.step != Step::Search {
        wrong.push(format!("stopped before {:?}", over.step));
    }
    if over.held.total() > budget.engine_limit() {
        wrong.push(format!(
            "held {} past the engine's share {}",
            over.held.total(),
            budget.engine_limit()
        ));
    }
    if over.next_step <= budget.engine_limit() {
        wrong.push("stopped before a step that fits".to_string());
    }
    let explored = o.progress.unique_states;
    if explored == 0 || explored >= whole.progress.unique_states {
        wrong.push(format!(
            "{explored} states explored of {}",
            whole.progress.unique_states
        ));
    }
    if o.verdicts
        .iter()
        .any(|v| matches!(v, Verdict::Holds | Verdict::NotReached))
    {
        wrong.push(format!("a partial search decided: {:?}", o.verdicts));
    }
    wrong
}

#[test]
fn a_search_that_would_grow_past_its_budget_stops_before_it_does() {
    let model = TwoPhase::new(5);
    let whole = run(&model, None);
    let needed = whole.footprint.expect("counted").total();
    let budget = Budget::new(Budget::needed_for(needed) / 3);
    let o = run(&model, Some(budget));
    assert_eq!(stopped_by(&o, budget, &whole), Vec::<String>::new());
    assert!(o.check.is_none(), "no progress check on a partial graph");
}

#[test]
fn without_the_check_the_search_runs_past_its_budget() {
    let model = TwoPhase::new(5);
    let whole = run(&model, None);
    let needed = whole.footprint.expect("counted").total();
    let budget = Budget {
        bytes: Budget::needed_for(needed) / 3,
        flaw: BudgetFlaw::Unchecked,
    };
    let o = run(&model, Some(budget));
    assert!(
        !stopped_by(&o, budget, &whole).is_empty(),
        "the planted flaw goes unnoticed"
    );
    assert_eq!(o.completion, Completion::Exhaustive);
}

#[test]
fn a_progress_check_that_does_not_fit_beside_the_graph_is_not_run() {
    let model = TwoPhase::new(5);
    let whole = run(&model, None);
    let mut g = common::search_whole(&model, 2, Some(ProgressOptions::of(&model)));
    // The search ran without a budget: what is held against it here is
    // the check's buffers beside the complete graph (its index released:
    // the check needs none).
    let check = highwater_checker::progress::check_bytes(&g);
    let graph = whole.footprint.expect("counted");
    let with_check = graph.nodes + graph.edges + check;
    let fits = Outcome::of_graph(
        &mut g,
        Some(Budget::new(Budget::needed_for(with_check) + 8)),
        || {},
    );
    assert!(
        fits.over_budget.is_none() && fits.check.is_some(),
        "room for the check"
    );
    let budget = Budget::new(Budget::needed_for(with_check - 1));
    let o = Outcome::of_graph(&mut g, Some(budget), || {});
    let over = o.over_budget.expect("stopped before the check");
    assert_eq!(over.step, Step::ProgressCheck);
    assert!(o.check.is_none());
    assert_eq!(o.completion, Completion::Exhaustive, "the search was whole");
    assert_eq!(o.verdicts, whole.verdicts, "safety is decided all the same");
}

#[test]
fn a_budget_with_room_to_spare_changes_nothing() {
    let model = TwoPhase::new(5);
    let whole = run(&model, None);
    let o = run(&model, Some(Budget::new(64 << 30)));
    assert_eq!(common::describe(&o), common::describe(&whole));
    assert!(o.over_budget.is_none());
}

/// The index sized from the start for a hinted count of states, right,
/// far too small or far too large: the answer is the run's without a hint.
/// A hint whose index would not fit the budget is not taken: the run does
/// not stop for it.
#[test]
fn a_hint_of_the_states_to_expect_changes_no_answer() {
    let model = TwoPhase::new(5);
    let whole = run(&model, None);
    let states = whole.progress.unique_states;
    for hint in [0, 1, states, states * 10] {
        let o = run_expecting(&model, None, Some(hint));
        assert_eq!(
            common::describe(&o),
            common::describe(&whole),
            "hint {hint}"
        );
    }
    let needed = whole.footprint.expect("counted").total();
    let budget = Budget::new(Budget::needed_for(needed) * 2);
    let o = run_expecting(&model, Some(budget), Some(1 << 32));
    assert!(
        o.over_budget.is_none(),
        "stopped by a hint it could not take"
    );
    assert_eq!(common::describe(&o), common::describe(&whole));
}
