//! The controller's rules for the quorum ISR, the KIP-966 ELR and elections.
//! Every change to the quorum ISR goes through here, so each ELR rule has one
//! home.

use crate::config::{Config, Mutation};
use crate::state::{Controller, ReplicaId, ReplicaSet, Request, State};

/// How a leader was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Election {
    /// From the live ISR.
    Clean,
    /// KIP-966: from the ELR, once the ISR is empty.
    Elr,
    /// KIP-966: the last known leader (not yet elected by these rules).
    LastKnownLeader,
    /// Any live replica, when no clean candidate is alive (data may be lost).
    Unclean,
}

/// Which election, if any, may make `r` the leader now.
pub fn election_kind(cfg: &Config, s: &State, r: ReplicaId) -> Option<Election> {
    let c = &s.controller;
    if c.leader == Some(r) || c.next_epoch() > cfg.max_epoch || !s.replica(r).alive {
        return None;
    }
    let live = |set: ReplicaSet| set.iter().any(|x| s.replica(x).alive);
    let is_move = c.leader.is_some();
    // With the ELR, the controller removes each failed ISR member first (so
    // that it may enter the ELR) and elects otherwise only from an empty
    // ISR; without it, the last member stays, and it is enough that no
    // member is alive.
    let no_clean_choice = if cfg.elr {
        c.isr.is_empty()
    } else {
        !live(c.isr)
    };
    if c.isr.contains(r) && (!is_move || s.leader_moves < cfg.leader_moves) {
        Some(Election::Clean)
    } else if c.leader.is_some() || !no_clean_choice {
        None
    } else if cfg.elr && c.elr.contains(r) {
        (cfg.mutation != Some(Mutation::NoElrElection)).then_some(Election::Elr)
    } else if cfg.unclean_election && !(cfg.elr && live(c.elr)) {
        Some(Election::Unclean)
    } else {
        None
    }
}

/// Makes `r` the leader in a new epoch and sends the LeaderAndIsr.
pub fn elect(cfg: &Config, s: &mut State, r: ReplicaId, kind: Election) {
    if s.controller.leader.is_some() {
        s.leader_moves += 1;
    }
    let c = &mut s.controller;
    match kind {
        Election::Clean => {}
        // The ELR leader starts a new ISR of its own; it leaves the ELR.
        Election::Elr => {
            c.isr = ReplicaSet::single(r);
            c.elr = c.elr.without(r);
        }
        Election::Unclean | Election::LastKnownLeader => {
            c.isr = ReplicaSet::single(r);
            c.elr = ReplicaSet::EMPTY;
        }
    }
    settle_elr(cfg, c);
    send_leader_and_isr(s, Some(r));
}

/// Removes `r` from the quorum ISR. With `may_enter_elr` (the replica is not
/// known to have shut down uncleanly) it enters the ELR when the ISR left is
/// below min.insync.replicas. A removed leader leaves the partition leaderless
/// in a new epoch, which the replicas learn from a LeaderAndIsr.
pub fn remove_from_isr(cfg: &Config, s: &mut State, r: ReplicaId, may_enter_elr: bool) {
    let c = &mut s.controller;
    c.isr = c.isr.without(r);
    if cfg.elr && may_enter_elr && c.isr.len() < cfg.min_isr {
        c.elr = c.elr.with(r);
    }
    if c.leader == Some(r) {
        send_leader_and_isr(s, None);
    }
}

/// Whether the controller may take `r` out of the ISR on a broker failure:
/// without the ELR the last member stays ("last replica standing"), and only
/// its leadership is taken away. Removing a leader needs a new epoch.
pub fn may_shrink_isr(cfg: &Config, s: &State, r: ReplicaId) -> bool {
    let c = &s.controller;
    let epoch_left = c.next_epoch() <= cfg.max_epoch;
    let is_leader = c.leader == Some(r);
    let last_standing = !cfg.elr && c.isr == ReplicaSet::single(r);
    c.isr.contains(r) && (!is_leader || epoch_left) && (!last_standing || is_leader)
}

/// A failed broker leaves the quorum ISR (ControllerShrinkIsr).
pub fn shrink_isr_on_failure(cfg: &Config, s: &mut State, r: ReplicaId) {
    let last_standing = !cfg.elr && s.controller.isr == ReplicaSet::single(r);
    if last_standing {
        send_leader_and_isr(s, None);
    } else {
        remove_from_isr(cfg, s, r, true);
    }
}

/// The quorum ISR after the leader changed it (AlterPartition): the ELR
/// follows the rules for leaving and rejoining.
pub fn leader_sets_isr(cfg: &Config, s: &mut State, isr: ReplicaSet) {
    let c = &mut s.controller;
    for left in c.isr.iter().filter(|r| !isr.contains(*r)) {
        if cfg.elr && isr.len() < cfg.min_isr {
            c.elr = c.elr.with(left);
        }
    }
    for joined in isr.iter().filter(|r| !c.isr.contains(*r)) {
        c.elr = c.elr.without(joined);
    }
    c.isr = isr;
    settle_elr(cfg, c);
}

/// KIP-966: the ELR empties whenever the ISR is back at min.insync.replicas.
pub fn settle_elr(cfg: &Config, c: &mut Controller) {
    if c.isr.len() >= cfg.min_isr {
        c.elr = ReplicaSet::EMPTY;
    }
}

/// Bumps the leader epoch and records the LeaderAndIsr request for it.
fn send_leader_and_isr(s: &mut State, leader: Option<ReplicaId>) {
    let c = &mut s.controller;
    let epoch = c.next_epoch();
    c.epoch = Some(epoch);
    c.leader = leader;
    s.requests[epoch as usize] = Some(Request { leader, isr: c.isr });
}

/// A broker registers again after a restart: after an unclean shutdown, with
/// the ELR on, it leaves both the ISR and the ELR (KIP-966).
pub fn broker_registered(cfg: &Config, s: &mut State, r: ReplicaId, unclean: bool) {
    if unclean && cfg.elr {
        if s.controller.isr.contains(r) {
            remove_from_isr(cfg, s, r, false);
        }
        s.controller.elr = s.controller.elr.without(r);
    }
}
