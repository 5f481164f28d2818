//! Recovery beyond the epoch bound: what the engine's second phase
//! (`checker/src/search.rs`) explores for the progress check.
//!
//! The progress check asks what the partition can still do from each state
//! if no further fault happens. A run's epoch bound would make every state
//! whose last epoch is spent look stuck, so recovery may use
//! [`RECOVERY_EPOCHS`] more leader epochs, and takes only the steps a
//! partition needs to heal ([`heals`]), on states stripped of what healing
//! never reads ([`recovery_view`]).

use crate::actions::Action;
use crate::config::Config;
use crate::state::{State, RECOVERY_EPOCHS};

/// The configuration recovery runs under: the run's, with `extra` more
/// leader epochs (at most [`RECOVERY_EPOCHS`]: the state has no room for
/// more; fewer only to show why they are needed).
pub fn recovery_config(cfg: &Config, extra: u8) -> Config {
    Config {
        max_epoch: cfg.max_epoch + extra.min(RECOVERY_EPOCHS),
        ..*cfg
    }
}

/// Whether a state is within the run's epoch bound.
pub fn within(bound: u8, s: &State) -> bool {
    s.controller.epoch.is_none_or(|e| e <= bound)
}

/// The steps recovery beyond the epoch bound takes: every fault-free step
/// but new writes, flushes, ISR shrinks and leader moves (a clean election
/// while the controller still names a leader), none of which a partition
/// needs to heal. A path through them is a real fault-free path, so a state
/// shown to heal this way does heal. Healing from any recovery state takes
/// a few steps per replica (take the LeaderAndIsr, fetch, join the ISR, see
/// the HW): far fewer than the engine's longest recovery walk.
pub fn heals(s: &State, a: Action) -> bool {
    if a.is_fault(s) {
        return false;
    }
    match a {
        Action::Produce { .. }
        | Action::Flush { .. }
        | Action::CheckpointHw { .. }
        | Action::LeaderShrinkIsr { .. } => false,
        Action::ControllerElectLeader { .. } => s.controller.leader.is_none(),
        _ => true,
    }
}

/// A recovery state as recovery sees it: what no healing step reads and no
/// goal asks about is dropped (which records were ever visible, recovery
/// points, the fault and leader-move counters, set as spent), so that
/// recovery states differing only there are one. Healing steps take no
/// fault, no flush and no leader move, and publishing visibility only
/// writes history.
pub fn recovery_view(cfg: Config, mut s: State) -> State {
    for h in &mut s.records {
        h.visible = None;
    }
    for r in 0..s.n {
        s.replica_mut(r).recovery_point = 0;
        s.replica_mut(r).hw_checkpoint = 0;
    }
    s.clean_crashes = cfg.clean_crashes;
    s.unclean_crashes = cfg.unclean_crashes;
    s.leader_moves = cfg.leader_moves;
    s
}
