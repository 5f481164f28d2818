//! A recovery state shown to reach every goal by one path, so that it need
//! not be expanded.
//!
//! The progress check asks of each recovery state only whether some
//! fault-free path leads from it to each goal (`progress.rs`). One path that
//! reaches them proves it; searching every successor proves nothing more.
//! So before a recovery state is expanded, a greedy walk tries: from the
//! state, take the first healing step ([`Checkable::heals`], in the order
//! the recovery model lists actions) that leads to a state not yet on the
//! walk, and stop when every goal has been met, when no step leads anywhere
//! new, or after [`MAX_STEPS`]. The walk takes the same steps, under the
//! same model and through the same [`Checkable::recovery_view`], as the
//! expansion would, so the goals it meets are ones the search would find
//! reachable. A state whose walk falls short is expanded as before: the
//! check's verdicts do not depend on how well the walk does, only its
//! time does.

use crate::graph::{all_goals, flag};
use crate::{Checkable, Goal};

/// Whether recovery states are walked before they are expanded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecoveryWalk {
    /// The greedy walk of [`goals_reached`]; a state it takes to every goal
    /// is not expanded.
    #[default]
    Greedy,
    /// Every recovery state is expanded (what the walk must agree with).
    Off,
    /// Broken on purpose: every recovery state is taken to reach every goal
    /// without a walk. A test shows that it hides a state that cannot
    /// reach its goal, so the walk's goals are load-bearing.
    ClaimsEveryGoal,
}

/// The longest walk tried: a walk that falls short costs only the
/// expansion it did not spare, so a walk is cut where healing plainly
/// takes fewer steps than this.
pub const MAX_STEPS: usize = 48;

/// The goal flags (`flag::GOAL << i`) a state carries itself.
pub fn goals_of<M: Checkable>(model: &M, goals: &[Goal<M>], s: &M::State) -> u8 {
    let mut met = 0;
    for (i, g) in goals.iter().enumerate() {
        if (g.condition)(model, s) {
            met |= flag::GOAL << i;
        }
    }
    met
}

/// The goals a greedy fault-free walk from recovery state `s` meets (as
/// `flag::GOAL` bits), `s`'s own included. `model` is the bounded model
/// (goals and views are its), `recovery` the one recovery states run under.
pub fn goals_reached<M: Checkable>(model: &M, recovery: &M, goals: &[Goal<M>], s: &M::State) -> u8 {
    let all = all_goals(goals.len());
    let mut met = goals_of(model, goals, s);
    let mut walk: Vec<M::State> = vec![s.clone()];
    let mut enabled = Vec::new();
    while met != all && walk.len() <= MAX_STEPS {
        let here = walk.last().expect("the walk starts with a state");
        enabled.clear();
        recovery.actions(here, &mut enabled);
        let step = enabled
            .iter()
            .filter(|a| model.heals(here, a))
            .find_map(|a| {
                let next = model.recovery_view(recovery.successor(here, a.clone())?);
                (!walk.contains(&next)).then_some(next)
            });
        let Some(next) = step else {
            break;
        };
        met |= goals_of(model, goals, &next);
        walk.push(next);
    }
    met
}
