//! The controller's rules for the partition: leader elections, the quorum
//! ISR, KIP-966's ELR and last known leader, and the leader recovery state,
//! as Kafka 4.x's KRaft controller runs them.
//!
//! Every change goes through [`partition_change`], which mirrors Kafka's
//! `PartitionChangeBuilder.build` (metadata module) step by step. Which
//! change an event makes (which broker is excluded, which ISR is targeted)
//! is `ReplicationControlManager`'s glue, mirrored by [`kafka_event`] for
//! the differential test against Kafka's own classes
//! (`conformance/tests/kafka_controller.rs`), and by the model's actions
//! below ([`election_kind`], [`shrink_isr_on_failure`], [`leader_sets_isr`],
//! [`broker_registered`]).
//!
//! The model's controller counts a broker as fenced while it is down and
//! out of the ISR, and while it is alive but fenced (see `unfenced`): it
//! learns of a death, or believes in one (missed heartbeats), by fencing the
//! broker and removing it from the ISR (ControllerShrinkIsr stands for
//! Kafka's `handleBrokerFenced`); a live broker it fenced stays fenced until
//! it heartbeats again (ControllerUnfence, Kafka's `handleBrokerUnfenced`)
//! or goes down. Kafka elects in the same change
//! that removes a leader; the model leaves the partition leaderless and lets
//! ControllerElectLeader choose among the replicas Kafka's rules allow, in
//! any order (Kafka takes the first in its replica list; the model's
//! replicas have no order).

use crate::config::{Config, Mutation};
use crate::rules::Rule;
use crate::shape::{epoch_within, within};
use crate::state::{Controller, IsrChain, Num, ReplicaId, ReplicaSet, Request, Shape, State};

/// How a leader was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Election {
    /// From the ISR.
    Clean,
    /// KIP-966: from the ELR, while the ISR is empty.
    Elr,
    /// KIP-966: the last known leader, while ISR and ELR are both empty
    /// (Kafka counts it as unclean: the partition is RECOVERING).
    LastKnownLeader,
    /// Any acceptable replica, when unclean election is enabled and no other
    /// is possible (data may be lost).
    Unclean,
}

/// Kafka's `PartitionChangeBuilder.Election`: which elections a change may
/// run when the current leader is not valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElectionType {
    /// PREFERRED: this replica (the head of Kafka's replica list) if valid,
    /// else the current leader if valid, else any other valid replica, else
    /// the last known leader; never unclean.
    Preferred(ReplicaId),
    /// ONLINE: the current leader if valid, else any valid replica, else the
    /// last known leader.
    Online,
    /// UNCLEAN: as ONLINE, then any acceptable replica.
    Unclean,
}

/// The controller's settings its rules read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    pub min_isr: u8,
    /// KIP-966 eligible leader replicas.
    pub elr: bool,
    /// `PartitionChangeBuilder.useLastKnownLeaderInBalancedRecovery`.
    pub last_known_leader: bool,
    /// `unclean.leader.election.enable`: the election type of every change
    /// but a preferred election.
    pub unclean_election: bool,
    /// The `elr-election-settles` mutation (highwater's rule before it
    /// followed Kafka): an ELR election also empties the rest of the ELR when
    /// the new ISR is at min.insync.replicas.
    pub elr_election_settles: bool,
    /// A rule knocked out for a test (`rules.rs`).
    pub knock_out: Option<Rule>,
}

impl Rules {
    pub fn of(cfg: &Config) -> Rules {
        Rules {
            min_isr: cfg.min_isr,
            elr: cfg.elr,
            last_known_leader: cfg.last_known_leader,
            unclean_election: cfg.unclean_election,
            elr_election_settles: cfg.mutation == Some(Mutation::ElrElectionSettles),
            knock_out: cfg.knock_out,
        }
    }

    /// Whether `rule` is knocked out.
    #[inline]
    pub fn drops(&self, rule: Rule) -> bool {
        self.knock_out == Some(rule)
    }

    /// The election type of a change the controller makes on its own
    /// (`ReplicationControlManager` sets UNCLEAN when the topic allows it).
    pub fn election(&self) -> ElectionType {
        if self.unclean_election {
            ElectionType::Unclean
        } else {
            ElectionType::Online
        }
    }
}

/// One partition change, as `ReplicationControlManager` sets up a
/// `PartitionChangeBuilder`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    /// `setTargetIsr`.
    pub target_isr: ReplicaSet,
    /// `isAcceptableLeader`: registered, unfenced and not shutting down.
    pub acceptable: ReplicaSet,
    /// `setUncleanShutdownReplicas`.
    pub unclean_shutdown: Option<ReplicaId>,
    pub election: ElectionType,
    /// `setTargetLeaderRecoveryState(RECOVERED)` (an AlterPartition from a
    /// leader, which has recovered by then); otherwise the state is kept.
    pub recovered: bool,
}

/// What a change did: the partition after Kafka's `PartitionChangeRecord`
/// is merged into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub leader: Option<ReplicaId>,
    pub isr: ReplicaSet,
    pub elr: ReplicaSet,
    pub lke: ReplicaSet,
    pub recovering: bool,
    /// The record names a leader (a new one, or none): the leader epoch goes
    /// up by one.
    pub epoch_bump: bool,
    /// The replica made leader, and how.
    pub elected: Option<(ReplicaId, Election)>,
}

impl Outcome {
    /// The controller after the change: a new leader field bumps the epoch.
    pub fn apply_to<S: Shape>(&self, c: &mut Controller<S>) {
        c.isr = self.isr;
        c.elr = self.elr;
        c.lke = self.lke;
        c.recovering = self.recovering;
        if self.epoch_bump {
            c.epoch = Some(c.next_epoch());
            c.leader = self.leader;
        }
    }
}

/// Picks the new leader among `candidates` (all of one kind), or none: the
/// partition is then left leaderless. Kafka takes the first in its replica
/// list; the model's actions name the one they elect.
pub type Choose<'a> = &'a mut dyn FnMut(Election, ReplicaSet) -> Option<ReplicaId>;

/// Kafka's choice: the first replica in the replica list, which for the
/// differential test is replica 0, 1, 2, ...
pub fn first_in_order(_: Election, candidates: ReplicaSet) -> Option<ReplicaId> {
    candidates.iter().next()
}

/// Kafka's `PartitionChangeBuilder.build`: the change, or None when the
/// record would be empty (`changeRecordIsNoOp`). Reassignment, directories
/// and the ISR-shrink epoch bump of metadata versions before 3.6 have no
/// part here.
pub fn partition_change<S: Shape>(
    rules: &Rules,
    c: &Controller<S>,
    change: &Change,
    choose: Choose,
) -> Option<Outcome> {
    let mut target_isr = change.target_isr;
    let (mut target_elr, mut target_lke) = populate_target_elr(rules, c, change);

    // tryElection
    let mut record_leader: Option<Option<ReplicaId>> = None;
    let mut record_isr: Option<ReplicaSet> = None;
    let mut record_recovering: Option<bool> = None;
    let mut elected = None;
    let (node, unclean) = elect_leader(rules, c, change, target_isr, target_elr, choose);
    if node.map(|(r, _)| r) != c.leader {
        if let Some((r, _)) = node {
            if target_elr.contains(r) && !rules.drops(Rule::ElrLeaderBecomesIsr) {
                target_isr = ReplicaSet::single(r);
                target_elr = target_elr.without(r);
                if rules.elr_election_settles && target_isr.len() >= rules.min_isr {
                    target_elr = ReplicaSet::EMPTY;
                }
            }
            if unclean {
                record_isr = Some(if rules.drops(Rule::UncleanLeaderBecomesIsr) {
                    target_isr
                } else {
                    ReplicaSet::single(r)
                });
                if !c.recovering && !rules.drops(Rule::UncleanElectionRecovering) {
                    record_recovering = Some(true);
                }
            }
        }
        record_leader = Some(node.map(|(r, _)| r));
        elected = node;
    }

    // maybeUpdateRecordElr
    let clean_election = record_isr.is_none();
    let unclean_empties = !clean_election && !rules.drops(Rule::UncleanElectionEmptiesElr);
    if unclean_empties || !rules.elr {
        target_elr = ReplicaSet::EMPTY;
        target_lke = ReplicaSet::EMPTY;
    }
    let record_elr = (target_elr != c.elr).then_some(target_elr);
    let mut record_lke = None;
    if rules.last_known_leader
        && c.lke.len() == 1
        && (record_leader == Some(None) || (record_leader.is_none() && c.leader.is_none()))
    {
        target_lke = c.lke;
    }
    if !rules.last_known_leader && target_lke != c.lke {
        record_lke = Some(target_lke);
    }

    // With the ELR the ISR may become empty; without it the last member stays.
    if record_isr.is_none() && (!target_isr.is_empty() || rules.elr) && target_isr != c.isr {
        record_isr = Some(target_isr);
    }

    // maybeUpdateLastKnownLeader: the last leader is remembered when the
    // partition first becomes leaderless, and forgotten at the next election.
    if rules.last_known_leader && rules.elr {
        if record_leader == Some(None) && c.lke.is_empty() {
            if !rules.drops(Rule::LastLeaderRemembered) {
                record_lke = c.leader.map(ReplicaSet::single);
            }
        } else if matches!(record_leader, Some(Some(_)))
            && !c.lke.is_empty()
            && !rules.drops(Rule::LastLeaderForgotten)
        {
            record_lke = Some(ReplicaSet::EMPTY);
        }
    }

    // An AlterPartition carries the leader's recovery state, RECOVERED.
    if change.recovered && c.recovering {
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
        leader: record_leader.unwrap_or(c.leader),
        isr: record_isr.unwrap_or(c.isr),
        elr: record_elr.unwrap_or(c.elr),
        lke: record_lke.unwrap_or(c.lke),
        recovering: record_recovering.unwrap_or(c.recovering),
        epoch_bump: record_leader.is_some(),
        elected,
    })
}

/// Kafka's `maybePopulateTargetElr`: the ELR and last known ELR the change
/// aims at. Below min.insync.replicas, every replica leaving the ISR enters
/// the ELR, except one known to have shut down uncleanly; at or above it
/// both empty. Without the ELR both are kept as they are.
fn populate_target_elr<S: Shape>(
    rules: &Rules,
    c: &Controller<S>,
    change: &Change,
) -> (ReplicaSet, ReplicaSet) {
    if !rules.elr {
        return (c.elr, c.lke);
    }
    let target_isr = change.target_isr;
    let at_min = if rules.drops(Rule::ElrEmptiesAtExactlyMinIsr) {
        target_isr.len() > rules.min_isr
    } else {
        target_isr.len() >= rules.min_isr
    };
    if at_min {
        if rules.drops(Rule::ElrEmptiesAtMinIsr) {
            return (ReplicaSet(c.elr.0 & !target_isr.0), c.lke);
        }
        return (ReplicaSet::EMPTY, ReplicaSet::EMPTY);
    }
    let entering = if rules.drops(Rule::LeavingIsrEntersElr) {
        0
    } else {
        c.isr.0
    };
    let candidates = ReplicaSet(c.elr.0 | entering);
    let mut elr = ReplicaSet(candidates.0 & !target_isr.0);
    if let Some(r) = change.unclean_shutdown {
        elr = elr.without(r);
    }
    let lke = ReplicaSet((candidates.0 | c.lke.0) & !target_isr.0 & !elr.0);
    (elr, lke)
}

/// Kafka's `electLeader` (`electPreferredLeader`, `electAnyLeader`): the new
/// leader and whether the election is unclean (None: no leader).
fn elect_leader<S: Shape>(
    rules: &Rules,
    c: &Controller<S>,
    change: &Change,
    target_isr: ReplicaSet,
    target_elr: ReplicaSet,
    choose: Choose,
) -> (Option<(ReplicaId, Election)>, bool) {
    // isValidNewLeader: in the ISR, or in the ELR while the ISR is empty;
    // and acceptable.
    let elr_valid = target_isr.is_empty() || rules.drops(Rule::ElrLeaderOnlyWithEmptyIsr);
    let mut valid_set =
        ReplicaSet((target_isr.0 | if elr_valid { target_elr.0 } else { 0 }) & change.acceptable.0);
    if rules.drops(Rule::CleanLeaderFromIsr) {
        valid_set = change.acceptable;
    }
    let valid = |r: ReplicaId| valid_set.contains(r);
    let kind = if target_isr.is_empty() {
        Election::Elr
    } else {
        Election::Clean
    };
    let keep = c
        .leader
        .filter(|&l| valid(l) && !rules.drops(Rule::KeepValidLeader))
        .map(|l| (l, kind));
    let pick = |choose: Choose, k: Election, set: ReplicaSet| {
        if set.is_empty() {
            None
        } else {
            Some(choose(k, set).map(|r| (r, k)))
        }
    };
    let last_known = |choose: Choose| {
        let can = rules.elr
            && rules.last_known_leader
            && !rules.drops(Rule::LastKnownLeaderElection)
            && (target_elr.is_empty() || rules.drops(Rule::LastKnownLeaderWaitsForElr))
            && target_isr.is_empty()
            && c.lke.len() == 1
            && (change.acceptable.0 & c.lke.0 != 0 || rules.drops(Rule::LastKnownLeaderAcceptable));
        if can {
            pick(choose, Election::LastKnownLeader, c.lke)
        } else {
            None
        }
    };
    match change.election {
        ElectionType::Preferred(p) => {
            if valid(p) {
                return (Some((p, kind)), false);
            }
            if keep.is_some() {
                return (keep, false);
            }
            if let Some(r) = pick(choose, kind, valid_set.without(p)) {
                return (r, false);
            }
            match last_known(choose) {
                Some(r) => (r, true),
                None => (None, false),
            }
        }
        ElectionType::Online | ElectionType::Unclean => {
            if keep.is_some() {
                return (keep, false);
            }
            if let Some(r) = pick(choose, kind, valid_set) {
                return (r, false);
            }
            if let Some(r) = last_known(choose) {
                return (r, true);
            }
            if change.election == ElectionType::Unclean {
                if let Some(r) = pick(choose, Election::Unclean, change.acceptable) {
                    return (r, true);
                }
            }
            (None, false)
        }
    }
}

// --- Kafka's events (ReplicationControlManager) -------------------------------

/// A controller event that changes the partition, as Kafka's
/// `ReplicationControlManager` handles it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// `handleBrokerFenced` (also `handleBrokerInControlledShutdown`, and a
    /// re-registration after a clean shutdown, `handleBrokerShutdown`): for a
    /// partition with the broker in its ISR, the broker leaves it and is no
    /// acceptable leader.
    Fence(ReplicaId),
    /// `handleBrokerShutdown` after an unclean shutdown, with the ELR on: for
    /// a partition with the broker in its ISR or ELR, it leaves both and is
    /// no acceptable leader. (With the ELR off, as `Fence`.)
    UncleanShutdown(ReplicaId),
    /// `handleBrokerUnfenced`: for a leaderless partition, an election with
    /// the broker acceptable.
    Unfence(ReplicaId),
    /// `alterPartition` from the leader: its new ISR.
    AlterPartition { leader: ReplicaId, isr: ReplicaSet },
    /// `electLeader` with ElectionType.PREFERRED (replica 0 is preferred).
    ElectPreferred,
    /// `electLeader` with ElectionType.UNCLEAN.
    ElectUnclean,
}

/// Why Kafka refuses an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// AlterPartition: the new ISR names a fenced or shutting-down broker
    /// (KIP-841, `validateAlterPartitionData`).
    IneligibleReplica,
    /// AlterPartition: not from the leader, or an ISR without it.
    InvalidRequest,
    /// `electLeader`: the preferred replica leads already, or (unclean) a
    /// leader exists.
    ElectionNotNeeded,
}

/// What an event did to the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventResult {
    /// The partition is as it was (no record).
    Unchanged,
    Refused(Refusal),
    Changed(Outcome),
}

/// Kafka's handling of `event` for a partition in state `c`, with the
/// brokers in `unfenced` registered, unfenced and not shutting down, and
/// Kafka's choice of leader (the first in replica order).
pub fn kafka_event<S: Shape>(
    rules: &Rules,
    c: &Controller<S>,
    unfenced: ReplicaSet,
    event: Event,
) -> EventResult {
    let change = |target_isr, acceptable, unclean_shutdown, election| Change {
        target_isr,
        acceptable,
        unclean_shutdown,
        election,
        recovered: false,
    };
    let result =
        |outcome: Option<Outcome>| outcome.map_or(EventResult::Unchanged, EventResult::Changed);
    let build = |ch: Change| result(partition_change(rules, c, &ch, &mut first_in_order));
    match event {
        Event::Fence(r) => {
            if !c.isr.contains(r) {
                return EventResult::Unchanged;
            }
            build(change(
                c.isr.without(r),
                unfenced.without(r),
                None,
                rules.election(),
            ))
        }
        Event::UncleanShutdown(r) => {
            if !rules.elr {
                return kafka_event(rules, c, unfenced, Event::Fence(r));
            }
            if !c.isr.contains(r) && !c.elr.contains(r) {
                return EventResult::Unchanged;
            }
            build(change(
                c.isr.without(r),
                unfenced.without(r),
                Some(r),
                rules.election(),
            ))
        }
        Event::Unfence(r) => {
            if c.leader.is_some() {
                return EventResult::Unchanged;
            }
            build(change(c.isr, unfenced.with(r), None, rules.election()))
        }
        Event::AlterPartition { leader, isr } => {
            if c.leader != Some(leader) || !isr.contains(leader) {
                return EventResult::Refused(Refusal::InvalidRequest);
            }
            if isr.0 & !unfenced.0 != 0 {
                return EventResult::Refused(Refusal::IneligibleReplica);
            }
            let ch = Change {
                recovered: true,
                ..change(isr, unfenced, None, rules.election())
            };
            result(partition_change(rules, c, &ch, &mut first_in_order))
        }
        Event::ElectPreferred => {
            if c.leader == Some(0) {
                return EventResult::Refused(Refusal::ElectionNotNeeded);
            }
            build(change(c.isr, unfenced, None, ElectionType::Preferred(0)))
        }
        Event::ElectUnclean => {
            if c.leader.is_some() {
                return EventResult::Refused(Refusal::ElectionNotNeeded);
            }
            build(change(c.isr, unfenced, None, ElectionType::Unclean))
        }
    }
}

/// The brokers unfenced after `event`: a fenced or re-registering broker is
/// fenced (Kafka's broker registration), an unfenced one is not.
pub fn unfenced_after(event: Event, unfenced: ReplicaSet) -> ReplicaSet {
    match event {
        Event::Fence(r) | Event::UncleanShutdown(r) => unfenced.without(r),
        Event::Unfence(r) => unfenced.with(r),
        _ => unfenced,
    }
}

// --- The model's controller steps ---------------------------------------------

/// Brokers the model's controller counts as unfenced (Kafka's acceptable
/// leaders, `ClusterControlManager.isActive`): those up and not fenced; the
/// leader it names, whose death it learns only by removing it
/// (ControllerShrinkIsr stands for the fence); and, while they are in the
/// ISR, members that went down unnoticed. Without the ELR a leaderless
/// partition's ISR may hold the last replica standing, which the controller
/// removed as leader and fenced (Kafka keeps it in the ISR): there a member
/// that is down, or alive and fenced, counts as fenced. A live broker the
/// controller fenced stays fenced until ControllerUnfence.
fn unfenced<S: Shape>(cfg: &Config, s: &State<S>) -> ReplicaSet {
    let c = &s.controller;
    let counts_fence = cfg.mutation != Some(Mutation::FencedStillAcceptable);
    let mut set = s
        .ids()
        .filter(|&r| s.replica(r).alive && !(counts_fence && c.fenced.contains(r)))
        .fold(ReplicaSet::EMPTY, ReplicaSet::with);
    let unnoticed = !cfg.drops(Rule::DeathNoticedByRemovalOnly);
    if let Some(l) = c.leader.filter(|_| unnoticed) {
        set = set.with(l);
    }
    if (cfg.elr || c.leader.is_some()) && unnoticed {
        set = ReplicaSet(set.0 | c.isr.0);
    }
    set
}

/// The election ControllerElectLeader(r) runs: a preferred election moving
/// leadership to `r` while a leader is named, else the election Kafka runs
/// for a leaderless partition (at an unfencing, or the periodic unclean
/// election), with `r` chosen if Kafka's rules allow it.
fn election_change<S: Shape>(cfg: &Config, s: &State<S>, r: ReplicaId) -> Option<Outcome> {
    let c = &s.controller;
    let election = match c.leader {
        Some(_) => ElectionType::Preferred(r),
        None => Rules::of(cfg).election(),
    };
    let change = Change {
        target_isr: c.isr,
        acceptable: unfenced(cfg, s),
        unclean_shutdown: None,
        election,
        recovered: false,
    };
    let mut choose = |_: Election, set: ReplicaSet| set.contains(r).then_some(r);
    partition_change(&Rules::of(cfg), c, &change, &mut choose)
        .filter(|o| o.elected.is_some_and(|(x, _)| x == r))
}

/// Which election, if any, may make `r` the leader now.
pub fn election_kind<S: Shape>(cfg: &Config, s: &State<S>, r: ReplicaId) -> Option<Election> {
    let c = &s.controller;
    let alive_ok = s.replica(r).alive || cfg.drops(Rule::ElectLiveReplica);
    if c.leader == Some(r) || !epoch_within::<S>(c.next_epoch(), cfg.max_epoch) || !alive_ok {
        return None;
    }
    if c.leader.is_some() && !within::<S, _>(s.leader_moves, cfg.leader_moves) {
        return None;
    }
    let kind = election_change(cfg, s, r)?.elected?.1;
    if kind == Election::Elr && cfg.mutation == Some(Mutation::NoElrElection) {
        return None;
    }
    Some(kind)
}

/// Makes `r` the leader in a new epoch and sends the LeaderAndIsr.
pub fn elect<S: Shape>(cfg: &Config, s: &mut State<S>, r: ReplicaId, kind: Election) {
    let outcome = election_change(cfg, s, r).expect("enabled only for a possible election");
    debug_assert_eq!(outcome.elected, Some((r, kind)));
    if s.controller.leader.is_some() {
        s.leader_moves += S::Count::ONE;
    }
    apply(cfg, s, &outcome);
}

/// ControllerShrinkIsr(r): Kafka's `handleBrokerFenced` for a broker in the
/// ISR, with the election left to ControllerElectLeader.
fn fence_change<S: Shape>(cfg: &Config, s: &State<S>, r: ReplicaId) -> Option<Outcome> {
    let c = &s.controller;
    if !c.isr.contains(r) {
        return None;
    }
    let change = Change {
        target_isr: c.isr.without(r),
        acceptable: unfenced(cfg, s).without(r),
        unclean_shutdown: None,
        election: Rules::of(cfg).election(),
        recovered: false,
    };
    partition_change(&Rules::of(cfg), c, &change, &mut |_, _| None)
}

/// Whether the fence of `r` still has to change the partition: take it out
/// of the ISR, or take its leadership away (without the ELR the last member
/// stays in the ISR).
pub fn fence_changes_partition<S: Shape>(cfg: &Config, s: &State<S>, r: ReplicaId) -> bool {
    fence_change(cfg, s, r).is_some()
}

/// Whether the controller may fence `r` on a (believed) broker failure
/// (ControllerShrinkIsr): the fence changes the partition, and removing a
/// leader needs a new epoch; or, when it changes nothing there, `r` is a
/// live broker not yet fenced whose fence matters (`fence_matters`): it is
/// then no acceptable leader and may not join the ISR.
pub fn may_shrink_isr<S: Shape>(cfg: &Config, s: &State<S>, r: ReplicaId) -> bool {
    match fence_change(cfg, s, r) {
        Some(o) => !o.epoch_bump || epoch_within::<S>(s.controller.next_epoch(), cfg.max_epoch),
        None => {
            s.replica(r).alive
                && !s.controller.fenced.contains(r)
                && fence_matters(cfg, &s.controller, r)
        }
    }
}

/// Whether the controller's fence of live broker `r` can change what the
/// model may do. A fence only holds `r` back (no election of it, no ISR
/// join) until its unfence, which may come at any time: what the model may
/// do while `r` is fenced it may also do once `r` is unfenced, except the
/// elections `r`, acceptable, would block. Those are an unclean election
/// (blocked by `r` in the ISR, the ELR or the last known leader, if unclean
/// election is on) and a last-known-leader election (blocked by `r` in the
/// ELR, with the ELR and that election on). Elsewhere the model forgets the
/// fence (`forget_what_no_longer_matters`), as if `r` were unfenced at once.
/// A fenced broker cannot enter the ISR, ELR or last known leader: it is
/// never elected and the controller refuses it in an ISR (KIP-841).
pub fn fence_matters<S: Shape>(cfg: &Config, c: &Controller<S>, r: ReplicaId) -> bool {
    let unclean = cfg.unclean_election && (c.isr.contains(r) || c.lke.contains(r));
    let elr = c.elr.contains(r) && (cfg.unclean_election || (cfg.elr && cfg.last_known_leader));
    unclean || elr
}

/// The controller fences a broker it believes failed, and the broker leaves
/// the quorum ISR (ControllerShrinkIsr): Kafka's `handleBrokerFenced`. A
/// live broker stays fenced until ControllerUnfence.
pub fn shrink_isr_on_failure<S: Shape>(cfg: &Config, s: &mut State<S>, r: ReplicaId) {
    if let Some(outcome) = fence_change(cfg, s, r) {
        apply(cfg, s, &outcome);
    }
    if s.replica(r).alive {
        s.controller.fenced = s.controller.fenced.with(r);
    }
}

/// Whether a live broker the controller fenced may be unfenced
/// (ControllerUnfence).
pub fn may_unfence<S: Shape>(s: &State<S>, r: ReplicaId) -> bool {
    s.controller.fenced.contains(r)
}

/// A fenced live broker heartbeats again and the controller unfences it
/// (ControllerUnfence): Kafka's `BrokerHeartbeatManager.calculateNextBrokerState`
/// (FENCED to UNFENCED once the broker has caught up with the metadata) and
/// `ReplicationControlManager.handleBrokerUnfenced`, which changes no ISR (a
/// leader's AlterPartition brings the broker back) and runs an election for
/// each leaderless partition: the model leaves that election to
/// ControllerElectLeader, with the broker now acceptable.
pub fn unfence<S: Shape>(s: &mut State<S>, r: ReplicaId) {
    s.controller.fenced = s.controller.fenced.without(r);
}

/// Whether the controller takes the leader's new ISR (AlterPartition): every
/// member must be an acceptable broker (KIP-841: a fenced or shutting-down
/// replica cannot join).
pub fn may_alter_isr<S: Shape>(cfg: &Config, s: &State<S>, isr: ReplicaSet) -> bool {
    isr.0 & !unfenced(cfg, s).0 == 0 || cfg.drops(Rule::AlterPartitionRefusesFenced)
}

/// The quorum ISR after the leader changed it (AlterPartition), with the
/// leader's recovery state RECOVERED. Refused (nothing changes) under
/// KIP-841 when it names a broker that is down.
pub fn leader_sets_isr<S: Shape>(cfg: &Config, s: &mut State<S>, isr: ReplicaSet) {
    if !may_alter_isr(cfg, s, isr) {
        return;
    }
    let change = Change {
        target_isr: isr,
        acceptable: unfenced(cfg, s),
        unclean_shutdown: None,
        election: Rules::of(cfg).election(),
        recovered: true,
    };
    if let Some(outcome) =
        partition_change(&Rules::of(cfg), &s.controller, &change, &mut |_, _| None)
    {
        debug_assert!(
            !outcome.epoch_bump || cfg.knock_out.is_some(),
            "the leader keeps leading"
        );
        apply(cfg, s, &outcome);
    }
}

/// A broker registers again after a restart (Kafka's `handleBrokerShutdown`):
/// it leaves the ISR (it is fenced until it catches up); after an unclean
/// shutdown, with the ELR on, it leaves the ELR too and may not enter it.
/// The election, if one is due, is left to ControllerElectLeader.
pub fn broker_registered<S: Shape>(cfg: &Config, s: &mut State<S>, r: ReplicaId, unclean: bool) {
    let c = &s.controller;
    let unclean = unclean && !cfg.drops(Rule::UncleanShutdownLeavesElr);
    let unclean_shutdown = (unclean && cfg.elr).then_some(r);
    let leaves_isr = !cfg.drops(Rule::RestartLeavesIsr);
    let involved =
        (leaves_isr && c.isr.contains(r)) || (unclean_shutdown.is_some() && c.elr.contains(r));
    if !involved {
        return;
    }
    let change = Change {
        target_isr: if leaves_isr { c.isr.without(r) } else { c.isr },
        acceptable: unfenced(cfg, s).without(r),
        unclean_shutdown,
        election: Rules::of(cfg).election(),
        recovered: false,
    };
    if let Some(outcome) = partition_change(&Rules::of(cfg), c, &change, &mut |_, _| None) {
        apply(cfg, s, &outcome);
    }
}

/// Applies a change; a new leader field bumps the epoch and sends the
/// LeaderAndIsr.
fn apply<S: Shape>(cfg: &Config, s: &mut State<S>, o: &Outcome) {
    let (left, before) = (s.controller.epoch, s.controller.isr);
    o.apply_to(&mut s.controller);
    if let Some(e) = left.filter(|_| o.epoch_bump || s.controller.isr != before) {
        isr_left_behind(cfg, s, e, before);
    }
    if o.epoch_bump {
        let c = &s.controller;
        let epoch = c.epoch.expect("just set");
        let request = Request {
            leader: c.leader,
            isr: c.isr,
            later_isrs: IsrChain::EMPTY,
        };
        s.set_request(epoch, request);
    }
}

/// The controller's ISR of epoch `e` was `isr` and is no more (changed, or
/// the epoch left): it joins the ISRs the epoch's leader has yet to apply,
/// unless that leader holds it already or could not learn it (it does not
/// name it). `forget_what_no_longer_matters` drops the chain where no
/// leader can learn from it.
fn isr_left_behind<S: Shape>(cfg: &Config, s: &mut State<S>, e: S::Epoch, isr: ReplicaSet) {
    let Some(req) = s.request(e) else {
        return;
    };
    let Some(l) = req.leader.filter(|&l| isr.contains(l)) else {
        return;
    };
    // Where the leader stands: its copy once it took the request, else the
    // request's ISR, the first it will hold.
    let r = s.replica(l);
    let holds = match r.epoch == Some(e) && r.presumes_leadership(l) {
        true => r.isr,
        false => req.isr,
    };
    let later_isrs = match cfg.mutation {
        // The rule before the chain: only the ISR the epoch ends with.
        Some(Mutation::ZombieLearnsOnlyLastIsr) if s.controller.epoch == Some(e) => return,
        Some(Mutation::ZombieLearnsOnlyLastIsr) if holds != isr => IsrChain::EMPTY.pushed(isr),
        _ if holds != isr => req.later_isrs.pushed(isr),
        _ => return,
    };
    s.set_request(e, Request { later_isrs, ..req });
}
