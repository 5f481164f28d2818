//! A recovery state shown to heal by one path, so that it need not be
//! expanded.
//!
//! The progress check asks of each recovery state only whether some
//! fault-free path leads from it to each goal (`progress.rs`). One path that
//! reaches them proves it; searching every successor proves nothing more.
//! So before a recovery state is expanded, a greedy walk tries: from the
//! state, take the first healing step (`graph::heals`, in the order
//! `actions::enabled` lists them) that leads to a state not yet on the walk,
//! and stop when every goal has been met, when no step leads anywhere new,
//! or after [`MAX_STEPS`]. The walk takes the same steps, in the same
//! configuration and through the same `recovery_view`, as the expansion
//! would, so the goals it meets are ones the graph search would find
//! reachable. A state whose walk falls short is expanded as before: the
//! check's verdicts do not depend on how well the walk does, only its
//! time does.

use crate::actions;
use crate::config::Config;
use crate::graph::{flag, heals, recovery_view, NodePredicates};
use crate::state::State;

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
    /// without a walk. A test shows that it hides a partition that cannot
    /// heal, so the walk's goals are load-bearing.
    ClaimsEveryGoal,
}

/// The longest walk tried. Healing from any recovery state takes a few
/// steps per replica (take the LeaderAndIsr, fetch, join the ISR, see the
/// HW): far fewer than this.
pub const MAX_STEPS: usize = 48;

/// The goal flags a state carries itself (`flag::HEALTHY`,
/// `flag::ACKED_REPLICATED`).
pub fn goals_of(cfg: &Config, preds: &NodePredicates, s: &State) -> u8 {
    let mut goals = 0;
    if (preds.healthy)(cfg, s) {
        goals |= flag::HEALTHY;
    }
    if (preds.acked_replicated)(cfg, s) {
        goals |= flag::ACKED_REPLICATED;
    }
    goals
}

/// The goals a greedy fault-free walk from recovery state `s` meets (as
/// `flag` bits), `s`'s own included. `cfg` is the run's configuration,
/// `recovery` the one recovery states run under.
pub fn goals_reached(cfg: &Config, recovery: &Config, preds: &NodePredicates, s: &State) -> u8 {
    let all = flag::HEALTHY | flag::ACKED_REPLICATED;
    let mut goals = goals_of(cfg, preds, s);
    let mut walk: Vec<State> = vec![*s];
    let mut enabled = Vec::new();
    while goals != all && walk.len() <= MAX_STEPS {
        let here = *walk.last().expect("the walk starts with a state");
        enabled.clear();
        actions::enabled(recovery, &here, &mut enabled);
        let step = enabled.iter().filter(|&&a| heals(&here, a)).find_map(|&a| {
            let next = recovery_view(*cfg, actions::successor(recovery, &here, a));
            (!walk.contains(&next)).then_some(next)
        });
        let Some(next) = step else {
            break;
        };
        goals |= goals_of(cfg, preds, &next);
        walk.push(next);
    }
    goals
}
