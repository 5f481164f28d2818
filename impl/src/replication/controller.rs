//! The controller's quorum state for the partition: leader, leader epoch,
//! ISR, and the KIP-966 ELR (eligible leader replicas). Every change to the
//! ISR goes through here, so each ELR rule has one home; the rules are the
//! model's (`model/src/controller.rs`) one for one.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::error::{Error, Result};
use super::messages::{
    AlterPartitionRequest, AlterPartitionResponse, ApiError, IsrChange, LeaderAndIsr,
};
use super::types::{LeaderEpoch, ReplicaId};

/// How a leader was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

/// The controller's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerConfig {
    /// `min.insync.replicas`.
    pub min_insync_replicas: usize,
    /// KIP-966 eligible leader replicas.
    pub elr: bool,
    /// `unclean.leader.election.enable`.
    pub unclean_leader_election: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            min_insync_replicas: 2,
            elr: true,
            unclean_leader_election: false,
        }
    }
}

/// A read-only picture of the controller.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerState {
    pub leader: Option<ReplicaId>,
    /// The current leader epoch; `None` before the first election.
    pub leader_epoch: Option<LeaderEpoch>,
    pub isr: Vec<ReplicaId>,
    pub elr: Vec<ReplicaId>,
    /// KIP-966's LastKnownElr: the last leader, while leaderless.
    #[serde(default)]
    pub last_known_elr: Vec<ReplicaId>,
    /// The leader recovery state is RECOVERING.
    #[serde(default)]
    pub recovering: bool,
    /// Brokers registered (alive) as the controller knows.
    pub alive: Vec<ReplicaId>,
}

/// The controller of one partition.
#[derive(Debug, Clone)]
pub struct Controller {
    config: ControllerConfig,
    replicas: Vec<ReplicaId>,
    leader: Option<ReplicaId>,
    epoch: Option<LeaderEpoch>,
    isr: BTreeSet<ReplicaId>,
    elr: BTreeSet<ReplicaId>,
    alive: BTreeSet<ReplicaId>,
    /// Every LeaderAndIsr sent, by epoch: replicas may get them late,
    /// twice, or out of order.
    sent: BTreeMap<LeaderEpoch, LeaderAndIsr>,
}

impl Controller {
    /// A partition on `replicas`, all alive and in the ISR, with no leader yet.
    pub fn new(replicas: Vec<ReplicaId>, config: ControllerConfig) -> Result<Controller> {
        if replicas.is_empty() {
            return Err(Error::InvalidConfig("a partition needs a replica".into()));
        }
        if config.min_insync_replicas == 0 || config.min_insync_replicas > replicas.len() {
            return Err(Error::InvalidConfig(format!(
                "min.insync.replicas {} is impossible with {} replicas",
                config.min_insync_replicas,
                replicas.len()
            )));
        }
        let all: BTreeSet<ReplicaId> = replicas.iter().copied().collect();
        if all.len() != replicas.len() {
            return Err(Error::InvalidConfig("replica ids repeat".into()));
        }
        Ok(Controller {
            config,
            replicas,
            leader: None,
            epoch: None,
            isr: all.clone(),
            elr: BTreeSet::new(),
            alive: all,
            sent: BTreeMap::new(),
        })
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }
    pub fn replicas(&self) -> &[ReplicaId] {
        &self.replicas
    }
    pub fn leader(&self) -> Option<ReplicaId> {
        self.leader
    }
    pub fn leader_epoch(&self) -> Option<LeaderEpoch> {
        self.epoch
    }
    pub fn isr(&self) -> Vec<ReplicaId> {
        self.isr.iter().copied().collect()
    }
    pub fn elr(&self) -> Vec<ReplicaId> {
        self.elr.iter().copied().collect()
    }
    pub fn is_alive(&self, r: ReplicaId) -> bool {
        self.alive.contains(&r)
    }
    /// The LeaderAndIsr sent for `epoch`, if any.
    pub fn request(&self, epoch: LeaderEpoch) -> Option<&LeaderAndIsr> {
        self.sent.get(&epoch)
    }
    /// The latest LeaderAndIsr sent.
    pub fn latest_request(&self) -> Option<&LeaderAndIsr> {
        self.sent.values().next_back()
    }
    pub fn requests(&self) -> &BTreeMap<LeaderEpoch, LeaderAndIsr> {
        &self.sent
    }

    pub fn state(&self) -> ControllerState {
        ControllerState {
            leader: self.leader,
            leader_epoch: self.epoch,
            isr: self.isr(),
            elr: self.elr(),
            last_known_elr: Vec::new(),
            recovering: false,
            alive: self.alive.iter().copied().collect(),
        }
    }

    fn check_replica(&self, r: ReplicaId) -> Result<()> {
        if self.replicas.contains(&r) {
            Ok(())
        } else {
            Err(Error::UnknownReplica(r))
        }
    }

    fn live(&self, set: &BTreeSet<ReplicaId>) -> bool {
        set.iter().any(|r| self.alive.contains(r))
    }

    /// Which election, if any, may make `r` (alive, not the leader) the
    /// leader now: clean from the ISR, which may also move leadership while a
    /// leader is named (controlled shutdown, preferred-leader election); the
    /// others only fill a leaderless partition with no clean choice (an
    /// empty ISR with the ELR, no live ISR member without): from the ELR;
    /// else unclean when enabled and no ELR member is alive.
    pub fn election_kind(&self, r: ReplicaId) -> Option<Election> {
        if self.leader == Some(r) || !self.alive.contains(&r) {
            return None;
        }
        // With the ELR, failed ISR members are removed first (so that they
        // may enter the ELR) and other elections need an empty ISR; without
        // it, the last member stays, and no live member is enough.
        let no_clean_choice = if self.config.elr {
            self.isr.is_empty()
        } else {
            !self.live(&self.isr)
        };
        if self.isr.contains(&r) {
            Some(Election::Clean)
        } else if self.leader.is_some() || !no_clean_choice {
            None
        } else if self.config.elr && self.elr.contains(&r) {
            Some(Election::Elr)
        } else if self.config.unclean_leader_election && !(self.config.elr && self.live(&self.elr))
        {
            Some(Election::Unclean)
        } else {
            None
        }
    }

    /// For a leaderless partition, the first replica (by id) that may be
    /// elected, with the best kind of election available: clean, then ELR,
    /// then unclean.
    pub fn candidate(&self) -> Option<(ReplicaId, Election)> {
        if self.leader.is_some() {
            return None;
        }
        let mut best: Option<(ReplicaId, Election)> = None;
        for &r in &self.replicas {
            if let Some(kind) = self.election_kind(r) {
                let rank = |k: Election| match k {
                    Election::Clean => 0,
                    Election::Elr => 1,
                    Election::LastKnownLeader | Election::Unclean => 2,
                };
                if best.is_none_or(|(_, b)| rank(kind) < rank(b)) {
                    best = Some((r, kind));
                }
            }
        }
        best
    }

    /// Makes `r` the leader in a new epoch (the model's
    /// ControllerElectLeader); returns how, and the LeaderAndIsr to send.
    pub fn elect_leader(&mut self, r: ReplicaId) -> Result<(Election, LeaderAndIsr)> {
        self.check_replica(r)?;
        let kind = self.election_kind(r).ok_or_else(|| {
            Error::not_enabled(format!("replica {r} cannot be elected leader now"))
        })?;
        match kind {
            Election::Clean => {}
            // The ELR leader starts an ISR of its own and leaves the ELR.
            Election::Elr => {
                self.isr = BTreeSet::from([r]);
                self.elr.remove(&r);
            }
            Election::Unclean | Election::LastKnownLeader => {
                self.isr = BTreeSet::from([r]);
                self.elr.clear();
            }
        }
        self.settle_elr();
        Ok((kind, self.send_leader_and_isr(Some(r))))
    }

    /// Whether the controller may take `r` out of the ISR on a broker
    /// failure: without the ELR the last member stays ("last replica
    /// standing") and only its leadership is taken away.
    pub fn may_shrink_isr(&self, r: ReplicaId) -> bool {
        let is_leader = self.leader == Some(r);
        let last_standing = !self.config.elr && self.isr == BTreeSet::from([r]);
        self.isr.contains(&r) && (!last_standing || is_leader)
    }

    /// A failed broker leaves the ISR (the model's ControllerShrinkIsr).
    /// Returns the LeaderAndIsr to send when the leader was removed.
    pub fn shrink_isr_on_failure(&mut self, r: ReplicaId) -> Result<Option<LeaderAndIsr>> {
        self.check_replica(r)?;
        if !self.may_shrink_isr(r) {
            return Err(Error::not_enabled(format!(
                "the controller cannot remove replica {r} from the ISR"
            )));
        }
        let last_standing = !self.config.elr && self.isr == BTreeSet::from([r]);
        if last_standing {
            return Ok(Some(self.send_leader_and_isr(None)));
        }
        Ok(self.remove_from_isr(r, true))
    }

    /// Removes `r` from the ISR. With `may_enter_elr` (not known to have
    /// shut down uncleanly) it enters the ELR when the ISR left is below
    /// min.insync.replicas. A removed leader leaves the partition leaderless
    /// in a new epoch.
    fn remove_from_isr(&mut self, r: ReplicaId, may_enter_elr: bool) -> Option<LeaderAndIsr> {
        self.isr.remove(&r);
        if self.config.elr && may_enter_elr && self.isr.len() < self.config.min_insync_replicas {
            self.elr.insert(r);
        }
        (self.leader == Some(r)).then(|| self.send_leader_and_isr(None))
    }

    /// AlterPartition from a leader: applied only from the current leader in
    /// the current epoch (the zkVersion / partition-epoch fence), to the
    /// controller's own ISR, with the ELR rules for leaving and joining. An
    /// addition of a current member is refused (InvalidRequest); a removal
    /// of a non-member leaves the ISR as it is and tells the leader.
    pub fn alter_partition(&mut self, req: &AlterPartitionRequest) -> AlterPartitionResponse {
        let mut resp = AlterPartitionResponse {
            leader_epoch: req.leader_epoch,
            change: req.change,
            result: Err(ApiError::FencedLeaderEpoch),
        };
        if self.leader != Some(req.leader) || self.epoch != Some(req.leader_epoch) {
            return resp;
        }
        let mut isr = self.isr.clone();
        match req.change {
            IsrChange::Remove(r) if r != req.leader => {
                isr.remove(&r);
            }
            // Adding a member changes nothing: refused, so that the leader's
            // expand is enabled only against the controller's ISR (the model).
            IsrChange::Add(r) if self.replicas.contains(&r) && !isr.contains(&r) => {
                isr.insert(r);
            }
            _ => {
                resp.result = Err(ApiError::InvalidRequest);
                return resp;
            }
        }
        self.leader_sets_isr(isr);
        resp.result = Ok(self.isr());
        resp
    }

    fn leader_sets_isr(&mut self, isr: BTreeSet<ReplicaId>) {
        let min = self.config.min_insync_replicas;
        let left: Vec<ReplicaId> = self.isr.difference(&isr).copied().collect();
        for r in left {
            if self.config.elr && isr.len() < min {
                self.elr.insert(r);
            }
        }
        for r in isr.difference(&self.isr) {
            self.elr.remove(r);
        }
        self.isr = isr;
        self.settle_elr();
    }

    /// KIP-966: the ELR empties whenever the ISR is back at min.insync.replicas.
    fn settle_elr(&mut self) {
        if self.isr.len() >= self.config.min_insync_replicas {
            self.elr.clear();
        }
    }

    /// A broker stopped (its registration lapsed). It stays in the ISR
    /// until [`shrink_isr_on_failure`](Self::shrink_isr_on_failure).
    pub fn broker_stopped(&mut self, r: ReplicaId) -> Result<()> {
        self.check_replica(r)?;
        self.alive.remove(&r);
        Ok(())
    }

    /// A broker registers again after a restart. KIP-966: after an unclean
    /// shutdown it leaves both the ISR and the ELR. Returns the
    /// LeaderAndIsr to send if that made the partition leaderless.
    pub fn broker_registered(
        &mut self,
        r: ReplicaId,
        unclean: bool,
    ) -> Result<Option<LeaderAndIsr>> {
        self.check_replica(r)?;
        self.alive.insert(r);
        let mut sent = None;
        if unclean && self.config.elr {
            if self.isr.contains(&r) {
                sent = self.remove_from_isr(r, false);
            }
            self.elr.remove(&r);
        }
        Ok(sent)
    }

    /// Bumps the leader epoch and records the LeaderAndIsr for it.
    fn send_leader_and_isr(&mut self, leader: Option<ReplicaId>) -> LeaderAndIsr {
        let epoch = self.epoch.map_or(0, |e| e + 1);
        self.epoch = Some(epoch);
        self.leader = leader;
        let req = LeaderAndIsr {
            leader_epoch: epoch,
            leader,
            isr: self.isr(),
            replicas: self.replicas.clone(),
        };
        self.sent.insert(epoch, req.clone());
        req
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controller(min_isr: usize, elr: bool, unclean: bool) -> Controller {
        Controller::new(
            vec![0, 1, 2],
            ControllerConfig {
                min_insync_replicas: min_isr,
                elr,
                unclean_leader_election: unclean,
            },
        )
        .unwrap()
    }

    #[test]
    fn first_election_is_clean_and_bumps_the_epoch() {
        let mut c = controller(2, true, false);
        let (kind, req) = c.elect_leader(1).unwrap();
        assert_eq!(kind, Election::Clean);
        assert_eq!((req.leader_epoch, req.leader), (0, Some(1)));
        assert!(c.elect_leader(1).is_err(), "already the leader");
        // Leadership may move to another ISR member, in a new epoch.
        let (_, req) = c.elect_leader(0).unwrap();
        assert_eq!((req.leader_epoch, req.leader), (1, Some(0)));
    }

    #[test]
    fn elr_entry_and_exit_follow_kip966() {
        let mut c = controller(2, true, false);
        c.elect_leader(0).unwrap();
        // The leader drops 2: ISR {0,1} is still at min.insync.replicas.
        let r = c.alter_partition(&AlterPartitionRequest {
            leader: 0,
            leader_epoch: 0,
            change: IsrChange::Remove(2),
        });
        assert_eq!(r.result, Ok(vec![0, 1]));
        assert!(c.elr().is_empty());
        // Broker 1 fails: ISR {0} < 2, so 1 enters the ELR.
        assert_eq!(c.shrink_isr_on_failure(1).unwrap(), None);
        assert_eq!((c.isr(), c.elr()), (vec![0], vec![1]));
        // 2 rejoins: the ISR is back at 2 and the ELR empties.
        let r = c.alter_partition(&AlterPartitionRequest {
            leader: 0,
            leader_epoch: 0,
            change: IsrChange::Add(2),
        });
        assert_eq!(r.result, Ok(vec![0, 2]));
        assert!(c.elr().is_empty());
        // A stale epoch is fenced.
        let r = c.alter_partition(&AlterPartitionRequest {
            leader: 0,
            leader_epoch: 7,
            change: IsrChange::Add(1),
        });
        assert_eq!(r.result, Err(ApiError::FencedLeaderEpoch));
    }

    #[test]
    fn elr_election_and_unclean_restart() {
        let mut c = controller(2, true, true);
        c.elect_leader(0).unwrap();
        c.broker_stopped(1).unwrap();
        c.shrink_isr_on_failure(1).unwrap();
        assert_eq!((c.isr(), c.elr()), (vec![0, 2], vec![]));
        c.broker_stopped(2).unwrap();
        c.shrink_isr_on_failure(2).unwrap();
        assert_eq!((c.isr(), c.elr()), (vec![0], vec![2]));
        c.broker_stopped(0).unwrap();
        let req = c.shrink_isr_on_failure(0).unwrap().unwrap();
        assert_eq!((req.leader, req.leader_epoch), (None, 1));
        assert_eq!((c.isr(), c.elr()), (vec![], vec![0, 2]));
        // 2 comes back after an unclean shutdown: it leaves the ELR; with
        // no ELR member alive, only an unclean election could elect it.
        c.broker_registered(2, true).unwrap();
        assert_eq!(c.elr(), vec![0]);
        assert_eq!(c.election_kind(2), Some(Election::Unclean));
        c.broker_registered(0, false).unwrap();
        assert_eq!(c.election_kind(2), None, "a live ELR member blocks unclean");
        assert_eq!(c.candidate(), Some((0, Election::Elr)));
        let (kind, req) = c.elect_leader(0).unwrap();
        assert_eq!((kind, req.isr.clone()), (Election::Elr, vec![0]));
        assert!(c.elr().is_empty());
    }

    #[test]
    fn last_replica_standing_without_elr() {
        let mut c = controller(1, false, false);
        c.elect_leader(0).unwrap();
        c.shrink_isr_on_failure(1).unwrap();
        c.shrink_isr_on_failure(2).unwrap();
        assert!(c.may_shrink_isr(0));
        let req = c.shrink_isr_on_failure(0).unwrap().unwrap();
        assert_eq!((req.leader, req.isr), (None, vec![0]), "the ISR keeps 0");
        assert!(!c.may_shrink_isr(0));
        assert!(c.shrink_isr_on_failure(0).is_err());
    }
}
