//! What a search, whole or partial, can say about a property.

use crate::search::Completion;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// An always-property held in every reachable state (a progress
    /// property: every state of the bounded model can reach its goal).
    Holds,
    /// An always-property failed: a counterexample exists (a progress
    /// property: some state cannot reach its goal without a fault).
    Counterexample,
    /// A sometimes-property was seen.
    Reached,
    /// A sometimes-property was never seen.
    NotReached,
    /// A non-exhaustive search saw no counterexample.
    NoneFound,
    /// The run stopped at an earlier counterexample before deciding this one,
    /// or (progress) its search keeps no state graph.
    NotChecked,
}

/// The verdict on a property (`always`, or sometimes) that the search saw
/// break or hold (`found`) before it ended as `completion`. A search
/// stopped at a counterexample decides only what it found; one
/// interrupted proves no absence.
pub fn of_search(always: bool, found: bool, completion: Completion) -> Verdict {
    let complete = completion == Completion::Exhaustive;
    let stopped = completion == Completion::StoppedAtCounterexample;
    match (always, found) {
        (true, true) => Verdict::Counterexample,
        (_, false) if stopped => Verdict::NotChecked,
        (true, false) if complete => Verdict::Holds,
        (true, false) => Verdict::NoneFound,
        (false, true) => Verdict::Reached,
        (false, false) if complete => Verdict::NotReached,
        (false, false) => Verdict::NotChecked,
    }
}

/// The verdict on a progress property with `stuck` states that cannot
/// reach its goal.
pub fn of_progress(stuck: u64) -> Verdict {
    if stuck == 0 {
        Verdict::Holds
    } else {
        Verdict::Counterexample
    }
}
