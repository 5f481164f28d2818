//! The partition's progress goals: from every reachable state, with no
//! further fault, the partition can heal. Safety alone is not enough: a
//! partition that never commits anything loses nothing.
//!
//! The engine's progress check (`checker/src/progress.rs`) proves each goal
//! "always, eventually possible": every state of the bounded model reaches
//! a goal state by fault-free steps (no crash, no controller belief that a
//! live broker failed, no unclean election: `Action::is_fault`). Symmetry is
//! sound for it: the goals are unchanged by renaming replicas.
//!
//! A partition whose ISR and ELR are both empty cannot elect a leader
//! without an unclean election: KIP-966 keeps it offline until an operator
//! acts. Such states are offline by design (the engine's exempt states),
//! and a state from which every fault-free future ends there is counted,
//! not reported as stuck.

use crate::actions::produce_enabled;
use crate::config::Config;
use crate::model::PartitionModel;
use crate::state::{LeaderView, State};
use highwater_checker::Goal;

pub const RECOVERABLE: &str = "the partition can heal";
pub const ACKED_REPLICATED: &str = "acknowledged records reach every replica";

/// The goals, one progress property each; the first is the one the
/// offline-by-design count is held against.
pub fn goals() -> Vec<Goal<PartitionModel>> {
    vec![
        Goal {
            name: RECOVERABLE,
            condition: |m, s| healthy(&m.cfg, s),
        },
        Goal {
            name: ACKED_REPLICATED,
            condition: |m, s| acked_replicated(&m.cfg, s),
        },
    ]
}

/// A healthy partition: a live leader, in the controller's epoch, known to
/// every replica; every replica back (a restart is no fault: a crashed
/// broker must come back for the partition to have healed), unfenced, in
/// the ISR, holding exactly the leader's log with the HW at its end; and,
/// while the producer has records left, a write the leader accepts
/// (acks=all: its ISR has min.insync.replicas).
pub fn healthy(cfg: &Config, s: &State) -> bool {
    let c = &s.controller;
    let Some(l) = c.leader else {
        return false;
    };
    let leader = s.replica(l);
    if !leader.presumes_leadership(l) || leader.epoch != c.epoch {
        return false;
    }
    let end = leader.leo();
    let replicas_ok = s.ids().all(|r| {
        let x = s.replica(r);
        x.alive
            && !c.fenced.contains(r)
            && c.isr.contains(r)
            && x.leader == LeaderView::Replica(l)
            && x.epoch == c.epoch
            && x.leo() == end
            && x.hw == end
    });
    replicas_ok && (s.produced >= cfg.records || produce_enabled(cfg, s, l))
}

/// No leader, and no replica the controller could elect without an unclean
/// election: the ISR and the ELR are empty (KIP-966's offline partition),
/// and so is the last known leader when that election is on.
pub fn offline_by_design(cfg: &Config, s: &State) -> bool {
    let c = &s.controller;
    let last_known = cfg.last_known_leader && !c.lke.is_empty();
    c.leader.is_none() && c.isr.is_empty() && c.elr.is_empty() && !last_known
}

/// Every acknowledged record is, at its offset, on every replica, back
/// from any crash, and below that replica's HW.
pub fn acked_replicated(_cfg: &Config, s: &State) -> bool {
    s.records[..s.produced as usize]
        .iter()
        .enumerate()
        .filter(|(_, h)| h.acked.is_some())
        .all(|(id, h)| {
            s.ids().all(|r| {
                let x = s.replica(r);
                x.alive
                    && x.hw > h.offset
                    && x.log.get(h.offset).is_some_and(|e| e.id as usize == id)
            })
        })
}
