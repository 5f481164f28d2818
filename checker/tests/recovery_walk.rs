//! The recovery walks' memo on a graph small enough to draw: a walk that
//! passes one goal and then another, and a second walk that joins the
//! first after its first goal. What the memo keeps for a state must be the
//! goals met from that state on, not all the walk met.
//!
//! ```text
//!        0 ----- 6    the states within the bounds
//!        |       |
//!        1       5    recovery states: each is walked
//!        |       |
//!        2 (A)   |    goal A
//!        |      /
//!        3 <---'      3 cannot reach A
//!        |
//!        4 (B)        goal B
//! ```
//!
//! Of the bounded states (the only ones the check asks of), 6 reaches B
//! and never A: it is stuck on A.

use highwater_checker::progress::{self, ProgressReport};
use highwater_checker::recovery_walk::RecoveryWalk;
use highwater_checker::search::ProgressOptions;
use highwater_checker::{Checkable, Goal};
use stateright::Model;
mod common;

#[derive(Clone, Debug)]
struct Graph;

const REACHES_A: &str = "reaches A";
const REACHES_B: &str = "reaches B";

impl Model for Graph {
    type State = u8;
    type Action = u8;

    fn init_states(&self) -> Vec<u8> {
        vec![0]
    }

    fn actions(&self, s: &u8, actions: &mut Vec<u8>) {
        // Each action is the state it leads to; 1 is found before 5, so
        // that 1 is walked first.
        actions.extend_from_slice(match s {
            0 => &[1, 6],
            6 => &[5],
            1 => &[2],
            2 | 5 => &[3],
            3 => &[4],
            _ => &[],
        });
    }

    fn next_state(&self, _: &u8, a: u8) -> Option<u8> {
        Some(a)
    }
}

impl Checkable for Graph {
    fn is_fault(&self, _: &u8, _: &u8) -> bool {
        false
    }

    fn within_bounds(&self, s: &u8) -> bool {
        matches!(s, 0 | 6)
    }

    fn progress_goals(&self) -> Vec<Goal<Self>> {
        vec![
            Goal {
                name: REACHES_A,
                condition: |_, s| *s == 2,
            },
            Goal {
                name: REACHES_B,
                condition: |_, s| *s == 4,
            },
        ]
    }
}

fn check(walk: RecoveryWalk) -> ProgressReport<Graph> {
    let progress = ProgressOptions {
        walk,
        ..ProgressOptions::of(&Graph)
    };
    // One thread: one memo, and 1 walked before 5.
    progress::check(&common::search_whole(&Graph, 1, Some(progress)))
}

fn stuck(r: &ProgressReport<Graph>) -> Vec<(&'static str, u64)> {
    r.properties
        .iter()
        .map(|p| (p.name, p.stuck_states))
        .collect()
}

#[test]
fn a_walk_joining_an_earlier_one_gets_only_the_goals_met_from_where_it_joined() {
    let expanded = check(RecoveryWalk::Off);
    assert_eq!(
        stuck(&expanded),
        [(REACHES_A, 1), (REACHES_B, 0)],
        "6 never reaches A"
    );
    // 1's walk meets A and B and spares its expansion; 5's walk joins it at
    // 3, from where only B is met, so 5 is expanded.
    let walked = check(RecoveryWalk::Greedy);
    assert_eq!(stuck(&walked), stuck(&expanded));
    assert_eq!(walked.recovery_walked, 1);
    // A memo that keeps A for 3 (met earlier on 1's walk) takes 5 to
    // reach A: 6, stuck, is hidden.
    let whole = check(RecoveryWalk::MemoOfWholeWalk);
    assert_eq!(stuck(&whole), [(REACHES_A, 0), (REACHES_B, 0)]);
    assert_eq!(whole.recovery_walked, 2);
}
