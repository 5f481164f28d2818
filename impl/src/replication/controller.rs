//! The controller's quorum state for the partition: leader, leader epoch,
//! ISR, KIP-966's ELR (eligible leader replicas) and last known leader, and
//! the leader recovery state, under Kafka 4.x's KRaft rules.
//!
//! Every change goes through one builder that mirrors Kafka's
//! `PartitionChangeBuilder.build` (metadata module) step by step; which
//! change each event makes is `ReplicationControlManager`'s glue. Two
//! front ends use it: the model's steps (`elect_leader`,
//! `shrink_isr_on_failure`, `alter_partition`, `broker_registered`), one for
//! one with the model's `model/src/controller.rs`, where the election after a
//! leader's removal is a step of its own and any allowed replica may be
//! chosen; and Kafka's events ([`Controller::handle_event`]), where the
//! first allowed replica in the replica list is elected in the same change,
//! as Kafka does. The differential test against Kafka's own classes
//! (`conformance/tests/kafka_controller.rs`) drives the second.

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
    /// From the ISR.
    Clean,
    /// KIP-966: from the ELR, while the ISR is empty.
    Elr,
    /// KIP-966: the last known leader, while ISR and ELR are both empty
    /// (unclean to Kafka: the partition is RECOVERING).
    LastKnownLeader,
    /// Any acceptable replica, when unclean election is enabled and no other
    /// is possible (data may be lost).
    Unclean,
}

/// Kafka's `PartitionChangeBuilder.Election`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ElectionType {
    /// PREFERRED: this replica if valid, else the current leader if valid,
    /// else another valid replica, else the last known leader; never unclean.
    Preferred(ReplicaId),
    /// ONLINE: the current leader if valid, else a valid replica, else the
    /// last known leader.
    Online,
    /// UNCLEAN: as ONLINE, then any acceptable replica.
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

/// A deliberately broken controller rule, to show that a check can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ControllerMutation {
    /// After an ELR election the rest of the ELR empties when the new ISR is
    /// at min.insync.replicas (highwater's rule before it followed Kafka).
    ElrElectionSettles,
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
    /// The leader recovery state is RECOVERING (after an unclean or
    /// last-known-leader election, until the leader's next ISR change).
    #[serde(default)]
    pub recovering: bool,
    /// Brokers registered (alive) as the controller knows.
    pub alive: Vec<ReplicaId>,
}

/// One partition change, as `ReplicationControlManager` sets up a
/// `PartitionChangeBuilder`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Change {
    /// `setTargetIsr`.
    target_isr: BTreeSet<ReplicaId>,
    /// `isAcceptableLeader`.
    acceptable: BTreeSet<ReplicaId>,
    /// `setUncleanShutdownReplicas`.
    unclean_shutdown: Option<ReplicaId>,
    election: ElectionType,
    /// `setTargetLeaderRecoveryState(RECOVERED)` (an AlterPartition).
    recovered: bool,
}

/// The partition after a change (Kafka's record merged into it).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    leader: Option<ReplicaId>,
    isr: BTreeSet<ReplicaId>,
    elr: BTreeSet<ReplicaId>,
    lke: BTreeSet<ReplicaId>,
    recovering: bool,
    /// The record names a leader (new, or none): the epoch goes up.
    epoch_bump: bool,
    elected: Option<(ReplicaId, Election)>,
}

/// Picks the new leader among candidates of one kind, listed in replica
/// order, or none (the partition is left leaderless).
type Choose<'a> = &'a mut dyn FnMut(Election, &[ReplicaId]) -> Option<ReplicaId>;

/// Kafka's choice: the first in the replica list.
fn first_in_order(_: Election, candidates: &[ReplicaId]) -> Option<ReplicaId> {
    candidates.first().copied()
}

/// A controller event, as Kafka's `ReplicationControlManager` handles it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ControllerEvent {
    /// `handleBrokerFenced` (also controlled shutdown, and a re-registration
    /// after a clean shutdown): for a partition with the broker in its ISR,
    /// the broker leaves it and is no acceptable leader.
    Fence(ReplicaId),
    /// `handleBrokerShutdown` after an unclean shutdown (with the ELR: the
    /// broker leaves ISR and ELR; without it, as `Fence`).
    UncleanShutdown(ReplicaId),
    /// `handleBrokerUnfenced`: for a leaderless partition, an election with
    /// the broker acceptable.
    Unfence(ReplicaId),
    /// `alterPartition` from `leader` with its new ISR (RECOVERED).
    AlterPartition {
        leader: ReplicaId,
        isr: Vec<ReplicaId>,
    },
    /// `electLeader`, ElectionType.PREFERRED.
    ElectPreferred,
    /// `electLeader`, ElectionType.UNCLEAN.
    ElectUnclean,
}

/// Why Kafka's controller refuses an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Refusal {
    /// KIP-841: the new ISR names a fenced or shutting-down broker.
    IneligibleReplica,
    /// Not from the leader, or an ISR without it.
    InvalidRequest,
    /// The preferred replica leads already, or (unclean) a leader exists.
    ElectionNotNeeded,
}

/// What an event did to the partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventResult {
    /// No record: the partition is as it was.
    Unchanged,
    Refused(Refusal),
    /// A record; `epoch_bump` when it named a leader (new, or none).
    Changed {
        epoch_bump: bool,
    },
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
    lke: BTreeSet<ReplicaId>,
    recovering: bool,
    alive: BTreeSet<ReplicaId>,
    /// Kafka's partition epoch (`PartitionRegistration.partitionEpoch`):
    /// bumped by every change to the partition, so that a broker can tell
    /// an older ISR from a newer one within one leader epoch.
    partition_epoch: u32,
    /// `useLastKnownLeaderInBalancedRecovery` (Kafka 4.x: always true).
    last_known_leader: bool,
    mutation: Option<ControllerMutation>,
    /// Every LeaderAndIsr sent, by epoch: replicas may get them late,
    /// twice, or out of order.
    sent: BTreeMap<LeaderEpoch, LeaderAndIsr>,
    /// Every ISR each epoch had, oldest first (its request's first), each
    /// with the last partition epoch it held at: the ISR updates of that
    /// epoch, which its leader applies in order, even after the
    /// controller left the epoch (a broker applies a partition's metadata
    /// in order).
    epoch_isrs: BTreeMap<LeaderEpoch, Vec<(Vec<ReplicaId>, u32)>>,
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
            lke: BTreeSet::new(),
            recovering: false,
            alive: all,
            partition_epoch: 0,
            last_known_leader: true,
            mutation: None,
            sent: BTreeMap::new(),
            epoch_isrs: BTreeMap::new(),
        })
    }

    /// A controller in the given state (for tests that start mid-run, such
    /// as the differential test against Kafka): `state.alive` are the
    /// brokers registered and unfenced. No LeaderAndIsr was sent.
    pub fn restore(
        replicas: Vec<ReplicaId>,
        config: ControllerConfig,
        state: &ControllerState,
    ) -> Result<Controller> {
        let mut c = Controller::new(replicas, config)?;
        let known = |ids: &[ReplicaId]| -> Result<BTreeSet<ReplicaId>> {
            ids.iter().map(|&r| c.check_replica(r).map(|_| r)).collect()
        };
        let (isr, elr, lke, alive) = (
            known(&state.isr)?,
            known(&state.elr)?,
            known(&state.last_known_elr)?,
            known(&state.alive)?,
        );
        if let Some(l) = state.leader {
            c.check_replica(l)?;
        }
        c.leader = state.leader;
        c.epoch = state.leader_epoch;
        c.isr = isr;
        c.elr = elr;
        c.lke = lke;
        c.recovering = state.recovering;
        c.alive = alive;
        Ok(c)
    }

    /// Sets `useLastKnownLeaderInBalancedRecovery` (Kafka 4.x leaves it on).
    pub fn set_last_known_leader(&mut self, on: bool) {
        self.last_known_leader = on;
    }

    /// Breaks one rule on purpose (see [`ControllerMutation`]).
    pub fn set_mutation(&mut self, mutation: Option<ControllerMutation>) {
        self.mutation = mutation;
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
    /// The version of the partition's state (leader, ISR, ELR, recovery).
    pub fn partition_epoch(&self) -> u32 {
        self.partition_epoch
    }
    pub fn elr(&self) -> Vec<ReplicaId> {
        self.elr.iter().copied().collect()
    }
    /// KIP-966's LastKnownElr.
    pub fn last_known_elr(&self) -> Vec<ReplicaId> {
        self.lke.iter().copied().collect()
    }
    /// The leader recovery state is RECOVERING.
    pub fn recovering(&self) -> bool {
        self.recovering
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
    /// The ISR updates of epoch `e` after the one a leader holding `isr`
    /// applied last, oldest first, with their partition epochs; only for
    /// an epoch the controller has left.
    pub fn left_epoch_isrs_after(
        &self,
        e: LeaderEpoch,
        isr: &[ReplicaId],
    ) -> &[(Vec<ReplicaId>, u32)] {
        match self.epoch_isrs.get(&e) {
            Some(h) if self.epoch != Some(e) => isrs_after(h, |x| x.0 == isr),
            _ => &[],
        }
    }

    /// Every ISR each epoch had, oldest first.
    pub fn epoch_isrs(&self) -> BTreeMap<LeaderEpoch, Vec<Vec<ReplicaId>>> {
        let isrs = |h: &Vec<(Vec<ReplicaId>, u32)>| h.iter().map(|(isr, _)| isr.clone()).collect();
        self.epoch_isrs.iter().map(|(&e, h)| (e, isrs(h))).collect()
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
            last_known_elr: self.last_known_elr(),
            recovering: self.recovering,
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

    /// The members of `set` in replica order.
    fn in_order(&self, set: &BTreeSet<ReplicaId>) -> Vec<ReplicaId> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| set.contains(r))
            .collect()
    }

    fn online_election(&self) -> ElectionType {
        if self.config.unclean_leader_election {
            ElectionType::Unclean
        } else {
            ElectionType::Online
        }
    }

    // --- PartitionChangeBuilder ------------------------------------------------

    /// Kafka's `PartitionChangeBuilder.build`: the change, or `None` when
    /// the record would be empty (`changeRecordIsNoOp`). Reassignment,
    /// directories and the ISR-shrink epoch bump of metadata versions before
    /// 3.6 have no part here.
    fn partition_change(&self, change: &Change, choose: Choose) -> Option<Outcome> {
        let min = self.config.min_insync_replicas;
        let elr_on = self.config.elr;
        let lkl = self.last_known_leader;
        let mut target_isr = change.target_isr.clone();
        let (mut target_elr, mut target_lke) = self.populate_target_elr(change);

        // tryElection
        let mut record_leader: Option<Option<ReplicaId>> = None;
        let mut record_isr: Option<BTreeSet<ReplicaId>> = None;
        let mut record_recovering: Option<bool> = None;
        let mut elected = None;
        let (node, unclean) = self.choose_leader(change, &target_isr, &target_elr, choose);
        if node.map(|(r, _)| r) != self.leader {
            if let Some((r, _)) = node {
                if target_elr.contains(&r) {
                    target_isr = BTreeSet::from([r]);
                    target_elr.remove(&r);
                    if self.mutation == Some(ControllerMutation::ElrElectionSettles)
                        && target_isr.len() >= min
                    {
                        target_elr.clear();
                    }
                }
                if unclean {
                    record_isr = Some(BTreeSet::from([r]));
                    if !self.recovering {
                        record_recovering = Some(true);
                    }
                }
            }
            record_leader = Some(node.map(|(r, _)| r));
            elected = node;
        }

        // maybeUpdateRecordElr
        if record_isr.is_some() || !elr_on {
            target_elr.clear();
            target_lke.clear();
        }
        let record_elr = (target_elr != self.elr).then_some(target_elr);
        let mut record_lke = None;
        if lkl
            && self.lke.len() == 1
            && (record_leader == Some(None) || (record_leader.is_none() && self.leader.is_none()))
        {
            target_lke = self.lke.clone();
        }
        if !lkl && target_lke != self.lke {
            record_lke = Some(target_lke);
        }

        // With the ELR the ISR may become empty; without it the last member stays.
        if record_isr.is_none() && (!target_isr.is_empty() || elr_on) && target_isr != self.isr {
            record_isr = Some(target_isr);
        }

        // maybeUpdateLastKnownLeader: remembered when the partition first
        // becomes leaderless, forgotten at the next election.
        if lkl && elr_on {
            if record_leader == Some(None) && self.lke.is_empty() {
                record_lke = self.leader.map(|l| BTreeSet::from([l]));
            } else if matches!(record_leader, Some(Some(_))) && !self.lke.is_empty() {
                record_lke = Some(BTreeSet::new());
            }
        }

        // An AlterPartition carries the leader's recovery state, RECOVERED.
        if change.recovered && self.recovering {
            record_recovering = Some(false);
        }

        if record_leader.is_none()
            && record_isr.is_none()
            && record_elr.is_none()
            && record_lke.is_none()
            && record_recovering.is_none()
        {
            return None;
        }
        Some(Outcome {
            leader: record_leader.unwrap_or(self.leader),
            isr: record_isr.unwrap_or_else(|| self.isr.clone()),
            elr: record_elr.unwrap_or_else(|| self.elr.clone()),
            lke: record_lke.unwrap_or_else(|| self.lke.clone()),
            recovering: record_recovering.unwrap_or(self.recovering),
            epoch_bump: record_leader.is_some(),
            elected,
        })
    }

    /// Kafka's `maybePopulateTargetElr`: below min.insync.replicas every
    /// replica leaving the ISR enters the ELR, except one known to have shut
    /// down uncleanly; at or above it the ELR and last known ELR empty.
    fn populate_target_elr(&self, change: &Change) -> (BTreeSet<ReplicaId>, BTreeSet<ReplicaId>) {
        if !self.config.elr {
            return (self.elr.clone(), self.lke.clone());
        }
        let target_isr = &change.target_isr;
        if target_isr.len() >= self.config.min_insync_replicas {
            return (BTreeSet::new(), BTreeSet::new());
        }
        let candidates: BTreeSet<ReplicaId> = self.elr.union(&self.isr).copied().collect();
        let elr: BTreeSet<ReplicaId> = candidates
            .iter()
            .copied()
            .filter(|r| !target_isr.contains(r) && Some(*r) != change.unclean_shutdown)
            .collect();
        let lke = candidates
            .union(&self.lke)
            .copied()
            .filter(|r| !target_isr.contains(r) && !elr.contains(r))
            .collect();
        (elr, lke)
    }

    /// Kafka's `electLeader`: the new leader and whether the election is
    /// unclean (`None`: no leader).
    fn choose_leader(
        &self,
        change: &Change,
        target_isr: &BTreeSet<ReplicaId>,
        target_elr: &BTreeSet<ReplicaId>,
        choose: Choose,
    ) -> (Option<(ReplicaId, Election)>, bool) {
        // isValidNewLeader: in the ISR, or in the ELR while the ISR is
        // empty; and acceptable.
        let valid = |r: ReplicaId| {
            (target_isr.contains(&r) || (target_isr.is_empty() && target_elr.contains(&r)))
                && change.acceptable.contains(&r)
        };
        let kind = if target_isr.is_empty() {
            Election::Elr
        } else {
            Election::Clean
        };
        let valid_in_order: Vec<ReplicaId> = self
            .replicas
            .iter()
            .copied()
            .filter(|&r| valid(r))
            .collect();
        let keep = self.leader.filter(|&l| valid(l)).map(|l| (l, kind));
        let mut pick = |k: Election, set: &[ReplicaId]| {
            (!set.is_empty()).then(|| choose(k, set).map(|r| (r, k)))
        };
        let lke_electable = self.config.elr
            && self.last_known_leader
            && target_elr.is_empty()
            && target_isr.is_empty()
            && self.lke.len() == 1
            && self.lke.iter().all(|r| change.acceptable.contains(r));
        let lke: Vec<ReplicaId> = self.lke.iter().copied().collect();
        match change.election {
            ElectionType::Preferred(p) => {
                if valid(p) {
                    return (Some((p, kind)), false);
                }
                if keep.is_some() {
                    return (keep, false);
                }
                let others: Vec<ReplicaId> =
                    valid_in_order.iter().copied().filter(|&r| r != p).collect();
                if let Some(r) = pick(kind, &others) {
                    return (r, false);
                }
                if lke_electable {
                    if let Some(r) = pick(Election::LastKnownLeader, &lke) {
                        return (r, true);
                    }
                }
                (None, false)
            }
            ElectionType::Online | ElectionType::Unclean => {
                if keep.is_some() {
                    return (keep, false);
                }
                if let Some(r) = pick(kind, &valid_in_order) {
                    return (r, false);
                }
                if lke_electable {
                    if let Some(r) = pick(Election::LastKnownLeader, &lke) {
                        return (r, true);
                    }
                }
                if change.election == ElectionType::Unclean {
                    let acceptable = self.in_order(&change.acceptable);
                    if let Some(r) = pick(Election::Unclean, &acceptable) {
                        return (r, true);
                    }
                }
                (None, false)
            }
        }
    }

    /// Applies a change; a new leader field bumps the epoch and sends the
    /// LeaderAndIsr, which it returns.
    fn apply(&mut self, o: Outcome) -> Option<LeaderAndIsr> {
        // Kafka's PartitionRegistration.merge: every change record applied
        // bumps the partition epoch.
        self.partition_epoch += 1;
        self.isr = o.isr;
        self.elr = o.elr;
        self.lke = o.lke;
        self.recovering = o.recovering;
        let sent = o.epoch_bump.then(|| self.send_leader_and_isr(o.leader));
        if let Some(e) = self.epoch {
            let (isr, pe) = (self.isr(), self.partition_epoch);
            let h = self.epoch_isrs.entry(e).or_default();
            match h.last_mut() {
                Some(last) if last.0 == isr => last.1 = pe,
                _ => h.push((isr, pe)),
            }
        }
        sent
    }

    // --- Kafka's events (ReplicationControlManager) ------------------------------

    /// Kafka's handling of `event`, with the brokers [`is_alive`](Self::is_alive)
    /// taken as registered, unfenced and not shutting down, and the first
    /// allowed replica in the replica list elected, in the same change.
    pub fn handle_event(&mut self, event: &ControllerEvent) -> Result<EventResult> {
        let online = self.online_election();
        let change = |target_isr, acceptable, unclean_shutdown, election| Change {
            target_isr,
            acceptable,
            unclean_shutdown,
            election,
            recovered: false,
        };
        let without = |set: &BTreeSet<ReplicaId>, r: ReplicaId| {
            let mut s = set.clone();
            s.remove(&r);
            s
        };
        let ch = match *event {
            ControllerEvent::Fence(r) | ControllerEvent::UncleanShutdown(r) => {
                self.check_replica(r)?;
                let unclean =
                    matches!(event, ControllerEvent::UncleanShutdown(_)) && self.config.elr;
                let involved = self.isr.contains(&r) || (unclean && self.elr.contains(&r));
                self.alive.remove(&r);
                if !involved {
                    return Ok(EventResult::Unchanged);
                }
                change(
                    without(&self.isr, r),
                    self.alive.clone(),
                    unclean.then_some(r),
                    online,
                )
            }
            ControllerEvent::Unfence(r) => {
                self.check_replica(r)?;
                self.alive.insert(r);
                if self.leader.is_some() {
                    return Ok(EventResult::Unchanged);
                }
                change(self.isr.clone(), self.alive.clone(), None, online)
            }
            ControllerEvent::AlterPartition { leader, ref isr } => {
                let isr: BTreeSet<ReplicaId> = isr.iter().copied().collect();
                if self.leader != Some(leader)
                    || !isr.contains(&leader)
                    || isr.iter().any(|r| !self.replicas.contains(r))
                {
                    return Ok(EventResult::Refused(Refusal::InvalidRequest));
                }
                if !isr.is_subset(&self.alive) {
                    return Ok(EventResult::Refused(Refusal::IneligibleReplica));
                }
                Change {
                    recovered: true,
                    ..change(isr, self.alive.clone(), None, online)
                }
            }
            ControllerEvent::ElectPreferred => {
                let preferred = self.replicas[0];
                if self.leader == Some(preferred) {
                    return Ok(EventResult::Refused(Refusal::ElectionNotNeeded));
                }
                let election = ElectionType::Preferred(preferred);
                change(self.isr.clone(), self.alive.clone(), None, election)
            }
            ControllerEvent::ElectUnclean => {
                if self.leader.is_some() {
                    return Ok(EventResult::Refused(Refusal::ElectionNotNeeded));
                }
                change(
                    self.isr.clone(),
                    self.alive.clone(),
                    None,
                    ElectionType::Unclean,
                )
            }
        };
        Ok(match self.partition_change(&ch, &mut first_in_order) {
            None => EventResult::Unchanged,
            Some(o) => {
                let epoch_bump = o.epoch_bump;
                self.apply(o);
                EventResult::Changed { epoch_bump }
            }
        })
    }

    // --- The model's steps ---------------------------------------------------

    /// Brokers counted as unfenced (acceptable leaders), as the model counts
    /// them: those alive; the named leader, whose death the controller learns
    /// only by removing it; and, while they are in the ISR, members that went
    /// down unnoticed, except, without the ELR, on a leaderless partition,
    /// whose ISR may hold the fenced last replica standing.
    fn unfenced(&self) -> BTreeSet<ReplicaId> {
        let mut set = self.alive.clone();
        if let Some(l) = self.leader {
            set.insert(l);
        }
        if self.config.elr || self.leader.is_some() {
            set.extend(self.isr.iter().copied());
        }
        set
    }

    /// The election `elect_leader(r)` runs: a preferred election moving
    /// leadership to `r` while a leader is named, else the election Kafka
    /// runs for a leaderless partition, with `r` chosen if allowed.
    fn election_change(&self, r: ReplicaId) -> Option<Outcome> {
        let election = match self.leader {
            Some(_) => ElectionType::Preferred(r),
            None => self.online_election(),
        };
        let change = Change {
            target_isr: self.isr.clone(),
            acceptable: self.unfenced(),
            unclean_shutdown: None,
            election,
            recovered: false,
        };
        let mut choose = |_: Election, set: &[ReplicaId]| set.contains(&r).then_some(r);
        self.partition_change(&change, &mut choose)
            .filter(|o| o.elected.is_some_and(|(x, _)| x == r))
    }

    /// Which election, if any, may make `r` (alive, not the leader) the
    /// leader now: while a leader is named, a clean move to an ISR member
    /// (preferred-leader election, controlled shutdown); for a leaderless
    /// partition, Kafka's order: the ISR, else the ELR while the ISR is
    /// empty, else the last known leader while the ELR is empty too, else
    /// unclean when enabled.
    pub fn election_kind(&self, r: ReplicaId) -> Option<Election> {
        if self.leader == Some(r) || !self.alive.contains(&r) {
            return None;
        }
        self.election_change(r)?.elected.map(|(_, k)| k)
    }

    /// For a leaderless partition, the first replica (by id) that may be
    /// elected, with the best kind of election available.
    pub fn candidate(&self) -> Option<(ReplicaId, Election)> {
        if self.leader.is_some() {
            return None;
        }
        self.replicas
            .iter()
            .find_map(|&r| self.election_kind(r).map(|k| (r, k)))
    }

    /// Makes `r` the leader in a new epoch (the model's
    /// ControllerElectLeader); returns how, and the LeaderAndIsr to send.
    pub fn elect_leader(&mut self, r: ReplicaId) -> Result<(Election, LeaderAndIsr)> {
        self.check_replica(r)?;
        let outcome = match self.election_change(r) {
            Some(o) if self.alive.contains(&r) && self.leader != Some(r) => o,
            _ => {
                return Err(Error::not_enabled(format!(
                    "replica {r} cannot be elected leader now"
                )))
            }
        };
        let (_, kind) = outcome.elected.expect("filtered on the elected replica");
        let req = self.apply(outcome).expect("an election bumps the epoch");
        Ok((kind, req))
    }

    /// The model's ControllerShrinkIsr: Kafka's fence of a broker in the
    /// ISR, with the election left to [`elect_leader`](Self::elect_leader).
    fn fence_change(&self, r: ReplicaId) -> Option<Outcome> {
        if !self.isr.contains(&r) {
            return None;
        }
        let mut acceptable = self.unfenced();
        acceptable.remove(&r);
        let mut target_isr = self.isr.clone();
        target_isr.remove(&r);
        let change = Change {
            target_isr,
            acceptable,
            unclean_shutdown: None,
            election: self.online_election(),
            recovered: false,
        };
        self.partition_change(&change, &mut |_, _| None)
    }

    /// Whether the controller may take `r` out of the ISR on a broker
    /// failure: it is in the ISR and that changes something (without the
    /// ELR the last member stays, and only its leadership is taken away).
    pub fn may_shrink_isr(&self, r: ReplicaId) -> bool {
        self.fence_change(r).is_some()
    }

    /// A failed broker leaves the ISR (the model's ControllerShrinkIsr).
    /// Returns the LeaderAndIsr to send when the leader was removed.
    pub fn shrink_isr_on_failure(&mut self, r: ReplicaId) -> Result<Option<LeaderAndIsr>> {
        self.check_replica(r)?;
        match self.fence_change(r) {
            Some(o) => Ok(self.apply(o)),
            None => Err(Error::not_enabled(format!(
                "the controller cannot remove replica {r} from the ISR"
            ))),
        }
    }

    /// AlterPartition from a leader: applied only from the current leader in
    /// the current epoch (the partition-epoch fence), to the controller's
    /// own ISR, with the leader's recovery state RECOVERED. An addition of a
    /// current member, or of a broker that is down (KIP-841), is refused
    /// (InvalidRequest); a removal of a non-member leaves the ISR as it is
    /// and tells the leader.
    pub fn alter_partition(&mut self, req: &AlterPartitionRequest) -> AlterPartitionResponse {
        let mut resp = AlterPartitionResponse {
            leader_epoch: req.leader_epoch,
            partition_epoch: self.partition_epoch,
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
        if !isr.is_subset(&self.unfenced()) {
            resp.result = Err(ApiError::InvalidRequest);
            return resp;
        }
        let change = Change {
            target_isr: isr,
            acceptable: self.unfenced(),
            unclean_shutdown: None,
            election: self.online_election(),
            recovered: true,
        };
        if let Some(o) = self.partition_change(&change, &mut |_, _| None) {
            debug_assert!(!o.epoch_bump, "the leader keeps leading");
            self.apply(o);
        }
        resp.result = Ok(self.isr());
        resp.partition_epoch = self.partition_epoch;
        resp
    }

    /// A broker stopped (its registration lapsed), or the controller fenced
    /// a live one that missed its heartbeats: it is no acceptable leader
    /// and may not join the ISR. It stays in the ISR until
    /// [`shrink_isr_on_failure`](Self::shrink_isr_on_failure).
    pub fn broker_stopped(&mut self, r: ReplicaId) -> Result<()> {
        self.check_replica(r)?;
        self.alive.remove(&r);
        Ok(())
    }

    /// Whether fencing live broker `r` can unblock an election (the model's
    /// `controller::fence_matters`): an unclean one, which `r` blocks from
    /// the ISR, the ELR or as last known leader; a last-known-leader one,
    /// which it blocks from the ELR. Elsewhere a fence only holds `r` back
    /// until its unfence, and the model's step driver unfences it at once.
    pub fn fence_matters(&self, r: ReplicaId) -> bool {
        let unclean_on = self.config.unclean_leader_election;
        let unclean = unclean_on && (self.isr.contains(&r) || self.lke.contains(&r));
        let lkl_on = self.config.elr && self.last_known_leader;
        let elr = self.elr.contains(&r) && (unclean_on || lkl_on);
        unclean || elr
    }

    /// A fenced broker heartbeats again and is unfenced (the model's
    /// ControllerUnfence): Kafka's `ReplicationControlManager.handleBrokerUnfenced`,
    /// which changes no ISR (the leader's AlterPartition brings the broker
    /// back). Its election for a leaderless partition is left to
    /// [`elect_leader`](Self::elect_leader). Refused for a broker not
    /// fenced.
    pub fn broker_unfenced(&mut self, r: ReplicaId) -> Result<()> {
        self.check_replica(r)?;
        if !self.alive.insert(r) {
            return Err(Error::not_enabled(format!("replica {r} is not fenced")));
        }
        Ok(())
    }

    /// A broker registers again after a restart (Kafka's
    /// `handleBrokerShutdown`): it leaves the ISR; after an unclean shutdown,
    /// with the ELR on, the ELR too, and it may not enter it. The election,
    /// if one is due, is left to [`elect_leader`](Self::elect_leader).
    /// Returns the LeaderAndIsr to send if that made the partition
    /// leaderless.
    pub fn broker_registered(
        &mut self,
        r: ReplicaId,
        unclean: bool,
    ) -> Result<Option<LeaderAndIsr>> {
        self.check_replica(r)?;
        let unclean_shutdown = (unclean && self.config.elr).then_some(r);
        let involved =
            self.isr.contains(&r) || (unclean_shutdown.is_some() && self.elr.contains(&r));
        let mut sent = None;
        if involved {
            let mut acceptable = self.unfenced();
            acceptable.remove(&r);
            let mut target_isr = self.isr.clone();
            target_isr.remove(&r);
            let change = Change {
                target_isr,
                acceptable,
                unclean_shutdown,
                election: self.online_election(),
                recovered: false,
            };
            if let Some(o) = self.partition_change(&change, &mut |_, _| None) {
                sent = self.apply(o);
            }
        }
        self.alive.insert(r);
        Ok(sent)
    }

    /// Bumps the leader epoch and records the LeaderAndIsr for it.
    fn send_leader_and_isr(&mut self, leader: Option<ReplicaId>) -> LeaderAndIsr {
        let epoch = self.epoch.map_or(0, |e| e + 1);
        self.epoch = Some(epoch);
        self.leader = leader;
        let req = LeaderAndIsr {
            leader_epoch: epoch,
            partition_epoch: self.partition_epoch,
            leader,
            isr: self.isr(),
            replicas: self.replicas.clone(),
        };
        self.sent.insert(epoch, req.clone());
        req
    }
}

/// The part of an epoch's ISR history after the last element `holds`
/// names (the one a leader applied last): what it has yet to apply, in
/// order. Nothing if no element is its; the controller only removes within
/// an epoch, and a leader's own change is the newest, so its last one
/// stands where it is.
pub fn isrs_after<T>(history: &[T], holds: impl Fn(&T) -> bool) -> &[T] {
    match history.iter().rposition(holds) {
        Some(i) => &history[i + 1..],
        None => &[],
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

    #[test]
    fn the_last_known_leader_is_elected_once_isr_and_elr_are_empty() {
        let mut c = controller(1, true, false);
        c.elect_leader(0).unwrap();
        for r in [1, 2] {
            c.alter_partition(&AlterPartitionRequest {
                leader: 0,
                leader_epoch: 0,
                change: IsrChange::Remove(r),
            });
        }
        c.broker_stopped(0).unwrap();
        let req = c.shrink_isr_on_failure(0).unwrap().unwrap();
        assert_eq!(req.leader, None);
        assert_eq!(
            (c.isr(), c.elr(), c.last_known_elr()),
            (vec![], vec![0], vec![0])
        );
        // Back after an unclean shutdown: out of the ELR, elected as the
        // last known leader; the partition is RECOVERING until the leader
        // changes the ISR.
        c.broker_registered(0, true).unwrap();
        assert_eq!(c.candidate(), Some((0, Election::LastKnownLeader)));
        let (kind, req) = c.elect_leader(0).unwrap();
        assert_eq!((kind, req.isr), (Election::LastKnownLeader, vec![0]));
        assert!(c.recovering() && c.last_known_elr().is_empty());
        c.alter_partition(&AlterPartitionRequest {
            leader: 0,
            leader_epoch: 2,
            change: IsrChange::Add(1),
        });
        assert!(!c.recovering());
        // Off, the partition stays leaderless.
        let mut off = controller(1, true, false);
        off.set_last_known_leader(false);
        off.elect_leader(0).unwrap();
        off.shrink_isr_on_failure(1).unwrap();
        off.shrink_isr_on_failure(2).unwrap();
        off.broker_stopped(0).unwrap();
        off.shrink_isr_on_failure(0).unwrap();
        off.broker_registered(0, true).unwrap();
        assert_eq!(off.candidate(), None);
    }

    #[test]
    fn kafka_events_elect_in_the_same_change() {
        let mut c = controller(2, true, false);
        c.elect_leader(0).unwrap();
        // Fencing the leader elects the first valid replica at once.
        let r = c.handle_event(&ControllerEvent::Fence(0)).unwrap();
        assert_eq!(r, EventResult::Changed { epoch_bump: true });
        assert_eq!((c.leader(), c.isr()), (Some(1), vec![1, 2]));
        // KIP-841: a fenced broker cannot join the ISR.
        let r = c
            .handle_event(&ControllerEvent::AlterPartition {
                leader: 1,
                isr: vec![0, 1, 2],
            })
            .unwrap();
        assert_eq!(r, EventResult::Refused(Refusal::IneligibleReplica));
        let state = c.state();
        let restored = Controller::restore(vec![0, 1, 2], c.config().clone(), &state).unwrap();
        assert_eq!(restored.state(), state);
        let bad = ControllerState {
            isr: vec![7],
            ..state
        };
        assert!(Controller::restore(vec![0, 1, 2], c.config().clone(), &bad).is_err());
    }
}
