//! The progress check's sweeps on a ladder that climbs down: each rung's
//! only way to the goal is the rung found just before it, so each sweep
//! (last state first) moves the goal up one rung, and a long ladder does
//! not settle within the sweeps. The backward search that then finishes
//! must give what a settled sweep would.
//!
//! ```text
//!   0 --> 1 (goal)      0 leads to every rung and to the dead end D;
//!   |     ^             rung k leads to rung k - 1 only
//!   +---> 2
//!   |     ^
//!   ...   ...
//!   +---> RUNGS
//!   +---> D             D leads nowhere: stuck, the only one
//! ```

use highwater_checker::progress::{self, ProgressReport, Reach, MAX_SWEEPS};
use highwater_checker::search::ProgressOptions;
use highwater_checker::{Checkable, Goal};
use stateright::Model;
mod common;

#[derive(Clone, Debug)]
struct Ladder {
    rungs: u16,
}

impl Ladder {
    fn dead_end(&self) -> u16 {
        self.rungs + 1
    }
}

impl Model for Ladder {
    type State = u16;
    type Action = u16;

    fn init_states(&self) -> Vec<u16> {
        vec![0]
    }

    fn actions(&self, s: &u16, actions: &mut Vec<u16>) {
        // Each action is the state it leads to; the breadth-first search
        // numbers rung k as state k.
        match *s {
            0 => actions.extend(1..=self.dead_end()),
            k if k >= 2 && k <= self.rungs => actions.push(k - 1),
            _ => {}
        }
    }

    fn next_state(&self, _: &u16, a: u16) -> Option<u16> {
        Some(a)
    }
}

impl Checkable for Ladder {
    fn is_fault(&self, _: &u16, _: &u16) -> bool {
        false
    }

    fn progress_goals(&self) -> Vec<Goal<Self>> {
        vec![Goal {
            name: "reaches rung 1",
            condition: |_, s| *s == 1,
        }]
    }
}

fn check(rungs: u16, how: Reach) -> ProgressReport<Ladder> {
    let model = Ladder { rungs };
    let g = common::search_whole(&model, 1, Some(ProgressOptions::of(&model)));
    progress::check_as(&g, how)
}

fn stuck(r: &ProgressReport<Ladder>) -> u64 {
    r.properties[0].stuck_states
}

#[test]
fn a_short_ladder_settles_within_the_sweeps() {
    let rungs = MAX_SWEEPS as u16 / 2;
    assert_eq!(stuck(&check(rungs, Reach::Sweeps)), 1, "only D is stuck");
    assert_eq!(stuck(&check(rungs, Reach::SweepsOnly)), 1);
}

#[test]
fn a_ladder_longer_than_the_sweeps_is_finished_by_a_backward_search() {
    let rungs = 3 * MAX_SWEEPS as u16;
    let report = check(rungs, Reach::Sweeps);
    assert_eq!(stuck(&report), 1, "only D is stuck");
    let stuck_state = &report.properties[0].counterexample.as_ref().unwrap().trace;
    assert_eq!(stuck_state.last().map(|(s, _)| *s), Some(rungs + 1));
}

/// Without the backward search, the rungs the sweeps did not reach look
/// stuck, yet each leads to a rung that is not: the stuck report's own
/// check catches the planted flaw.
#[test]
#[should_panic(expected = "leads out of a stuck state: the progress check is wrong")]
fn sweeps_left_unsettled_are_caught() {
    check(3 * MAX_SWEEPS as u16, Reach::SweepsOnly);
}
