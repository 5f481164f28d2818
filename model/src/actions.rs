//! The model's actions, each a named Kafka step: when it is enabled and what
//! it does. `enabled` lists the actions of a state in a fixed order (paths and
//! explorer URLs are action indices), `apply` performs one.

use crate::config::{Acks, Config, HwCheckpoint, Mutation, Truncation};
use crate::controller::{self, Election};
use crate::rules::Rule;
use crate::shape::{epoch_within, within};
use crate::state::{
    replica_name, Compact, Entry, IdSet, IsrChain, LeaderView, LogStore, Num, RecordName, Replica,
    ReplicaId, ReplicaSet, Request, Shape, State,
};
use crate::truncation::{fetch_divergence_with, truncation_offset, FetchCheck};
use std::fmt;

/// Debug prints as Display does (replica letters): the explorer shows paths
/// with it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action<S: Shape = Compact> {
    /// The controller elects a leader for a leaderless partition.
    ControllerElectLeader {
        replica: ReplicaId,
        election: Election,
    },
    /// The controller sees a broker fail, or believes a live one did (missed
    /// heartbeats): it fences the broker and removes it from the ISR.
    ControllerShrinkIsr { replica: ReplicaId },
    /// A live broker the controller fenced heartbeats again and is unfenced.
    ControllerUnfence { replica: ReplicaId },
    /// A replica named leader in a LeaderAndIsr of a newer epoch takes over.
    BecomeLeader { replica: ReplicaId, epoch: S::Epoch },
    /// Any other replica in that LeaderAndIsr follows, truncating its log.
    BecomeFollower { replica: ReplicaId, epoch: S::Epoch },
    /// A producer writes the next record to a replica that presumes it leads.
    Produce {
        leader: ReplicaId,
        record: S::RecordId,
    },
    /// A follower fetches from its leader and copies all it lacks.
    FollowerFetch {
        follower: ReplicaId,
        leader: ReplicaId,
    },
    /// A follower fetches from its leader and copies one record of the
    /// several it lacks: `replica.fetch.max.bytes` cut the response
    /// (Kafka returns at least one batch, KIP-74).
    FollowerFetchOne {
        follower: ReplicaId,
        leader: ReplicaId,
    },
    /// A fetch cut short at any length: the follower copies `records` of
    /// those it lacks, more than one and fewer than all. Never listed by
    /// `enabled`: the checker's cut is FollowerFetchOne (its bound on a
    /// cut, as it bounds records and epochs); trace validation takes the
    /// length from the trace, and [`allowed`] says whether it may be taken.
    FollowerFetchPart {
        follower: ReplicaId,
        leader: ReplicaId,
        records: S::Offset,
    },
    /// The leader moves its HW to the lowest LEO in its ISR, or lower: to
    /// that of a caught-up follower waiting to join it.
    LeaderAdvanceHw { leader: ReplicaId, hw: S::Offset },
    /// The leader drops a lagging follower, or one not on its epoch.
    LeaderShrinkIsr {
        leader: ReplicaId,
        follower: ReplicaId,
    },
    /// The leader takes a caught-up follower back into the ISR.
    LeaderExpandIsr {
        leader: ReplicaId,
        follower: ReplicaId,
    },
    /// The leader learns an ISR the controller shrank on its own (a broker
    /// failure, an unclean restart), as Kafka's leaders do from the metadata.
    LeaderLearnsIsr { leader: ReplicaId },
    /// A replica fsyncs its log: its recovery point moves to its LEO.
    Flush { replica: ReplicaId },
    /// A replica writes its HW to `replication-offset-checkpoint` (Kafka's
    /// `ReplicaManager.checkpointHighWatermarks`, every
    /// `replica.high.watermark.checkpoint.interval.ms`).
    CheckpointHw { replica: ReplicaId },
    /// A broker stops: cleanly (log kept) or not (unflushed suffix lost).
    Crash { replica: ReplicaId, clean: bool },
    /// A stopped broker comes back as a follower with its checkpointed HW.
    Restart { replica: ReplicaId },
}

impl<S: Shape> Action<S> {
    /// What this kind of action does, in one line (printed the first time it
    /// appears in a step table).
    pub fn gloss(&self) -> &'static str {
        match self {
            Action::ControllerElectLeader { .. } => {
                "the controller picks a leader (from the ISR, from the ELR, or uncleanly), \
                 bumps the leader epoch and sends a LeaderAndIsr"
            }
            Action::ControllerShrinkIsr { .. } => {
                "the controller believes a broker failed, fences it and removes it from the \
                 ISR; if it led, a new epoch with no leader"
            }
            Action::ControllerUnfence { .. } => {
                "a live broker the controller fenced heartbeats again: it is unfenced (an \
                 acceptable leader again; its leader brings it back into the ISR)"
            }
            Action::BecomeLeader { .. } => {
                "a replica takes a LeaderAndIsr that names it leader, and leads in that epoch"
            }
            Action::BecomeFollower { .. } => {
                "a replica takes a LeaderAndIsr that names another leader, truncates by its \
                 rule, and follows"
            }
            Action::Produce { .. } => {
                "the producer sends the next record to a replica that believes it leads"
            }
            Action::FollowerFetch { .. } => {
                "a follower copies what it lacks and learns the leader's HW; the leader learns \
                 the follower's LEO from the fetch offset"
            }
            Action::FollowerFetchOne { .. } => {
                "a fetch cut short by replica.fetch.max.bytes: the follower copies one record \
                 of those it lacks"
            }
            Action::FollowerFetchPart { .. } => {
                "a fetch cut short by replica.fetch.max.bytes: the follower copies some of the \
                 records it lacks"
            }
            Action::LeaderAdvanceHw { .. } => {
                "the leader moves its HW to the lowest LEO it knows in its ISR (and of a \
                 caught-up follower waiting to join it) and answers acks=all producers below it"
            }
            Action::LeaderShrinkIsr { .. } => {
                "the leader drops a follower that lags or stopped fetching (AlterPartition)"
            }
            Action::LeaderExpandIsr { .. } => {
                "the leader takes a caught-up follower back into the ISR (AlterPartition)"
            }
            Action::LeaderLearnsIsr { .. } => {
                "the leader learns an ISR change the controller made on its own (metadata)"
            }
            Action::Flush { .. } => "a replica fsyncs its log: its recovery point moves to its LEO",
            Action::CheckpointHw { .. } => {
                "a replica writes its HW to replication-offset-checkpoint, as Kafka does \
                 periodically: an unclean crash brings back this HW"
            }
            Action::Crash { .. } => {
                "a broker stops: cleanly (log kept) or uncleanly (what is above its recovery \
                 point is lost)"
            }
            Action::Restart { .. } => {
                "a stopped broker comes back with its checkpointed HW and re-registers"
            }
        }
    }

    /// Whether this action, taken in `s`, is a fault: a crash, the
    /// controller believing a live broker failed, or an unclean election.
    /// The progress check asks what the partition can do without them.
    pub fn is_fault(&self, s: &State<S>) -> bool {
        match *self {
            Action::Crash { .. } => true,
            Action::ControllerShrinkIsr { replica } => s.replica(replica).alive,
            Action::ControllerElectLeader { election, .. } => election == Election::Unclean,
            _ => false,
        }
    }
}

impl<S: Shape> fmt::Debug for Action<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl<S: Shape> fmt::Display for Action<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = replica_name;
        match *self {
            Action::ControllerElectLeader { replica, election } => {
                let how = match election {
                    Election::Clean => "from ISR",
                    Election::Elr => "from ELR",
                    Election::LastKnownLeader => "last known leader",
                    Election::Unclean => "unclean",
                };
                write!(f, "ControllerElectLeader({}, {how})", n(replica))
            }
            Action::ControllerShrinkIsr { replica } => {
                write!(f, "ControllerShrinkIsr({})", n(replica))
            }
            Action::ControllerUnfence { replica } => {
                write!(f, "ControllerUnfence({})", n(replica))
            }
            Action::BecomeLeader { replica, epoch } => {
                write!(f, "BecomeLeader({}, epoch {epoch})", n(replica))
            }
            Action::BecomeFollower { replica, epoch } => {
                write!(f, "BecomeFollower({}, epoch {epoch})", n(replica))
            }
            Action::Produce { leader, record } => {
                write!(f, "Produce({} -> {})", RecordName(record), n(leader))
            }
            Action::FollowerFetch { follower, leader } => {
                write!(f, "FollowerFetch({} <- {})", n(follower), n(leader))
            }
            Action::FollowerFetchOne { follower, leader } => {
                write!(
                    f,
                    "FollowerFetch({} <- {}, one record)",
                    n(follower),
                    n(leader)
                )
            }
            Action::FollowerFetchPart {
                follower,
                leader,
                records,
            } => {
                write!(
                    f,
                    "FollowerFetch({} <- {}, {records} records)",
                    n(follower),
                    n(leader)
                )
            }
            Action::LeaderAdvanceHw { leader, hw } => {
                write!(f, "LeaderAdvanceHw({}, hw {hw})", n(leader))
            }
            Action::LeaderShrinkIsr { leader, follower } => {
                write!(f, "LeaderShrinkIsr({}, drop {})", n(leader), n(follower))
            }
            Action::LeaderExpandIsr { leader, follower } => {
                write!(f, "LeaderExpandIsr({}, add {})", n(leader), n(follower))
            }
            Action::LeaderLearnsIsr { leader } => write!(f, "LeaderLearnsIsr({})", n(leader)),
            Action::Flush { replica } => write!(f, "Flush({})", n(replica)),
            Action::CheckpointHw { replica } => write!(f, "CheckpointHw({})", n(replica)),
            Action::Crash { replica, clean } => {
                let how = if clean { "clean" } else { "unclean" };
                write!(f, "Crash({}, {how})", n(replica))
            }
            Action::Restart { replica } => write!(f, "Restart({})", n(replica)),
        }
    }
}

/// Every action enabled in `s`, in a fixed order.
pub fn enabled<S: Shape>(cfg: &Config, s: &State<S>, out: &mut Vec<Action<S>>) {
    let ids = s.ids();
    for replica in ids.clone() {
        if let Some(election) = controller::election_kind(cfg, s, replica) {
            out.push(Action::ControllerElectLeader { replica, election });
        }
    }
    for replica in ids.clone() {
        if controller::may_shrink_isr(cfg, s, replica) {
            out.push(Action::ControllerShrinkIsr { replica });
        }
    }
    for replica in ids.clone() {
        if controller::may_unfence(s, replica) {
            out.push(Action::ControllerUnfence { replica });
        }
    }
    for replica in ids.clone() {
        for epoch in s.request_epochs() {
            match s.request(epoch) {
                Some(req) if takes_request(cfg, s, replica, epoch) => {
                    if req.leader == Some(replica) {
                        out.push(Action::BecomeLeader { replica, epoch });
                    } else if follow_enabled(cfg, s, epoch, req.leader) {
                        out.push(Action::BecomeFollower { replica, epoch });
                    }
                }
                _ => {}
            }
        }
    }
    for leader in s.presumed_leaders() {
        if produce_enabled(cfg, s, leader) {
            let record = s.produced;
            out.push(Action::Produce { leader, record });
        }
        for hw in advanced_hws(cfg, s, leader).into_iter().flatten() {
            out.push(Action::LeaderAdvanceHw { leader, hw });
        }
    }
    for follower in ids.clone() {
        if let Some(leader) = fetch_leader(cfg, s, follower) {
            out.push(Action::FollowerFetch { follower, leader });
            let (f, l) = (s.replica(follower), s.replica(leader));
            // A fetch cut short is answered like the full one when the
            // answer is a truncation (a diverging epoch carries no records).
            if f.leo() + S::Offset::ONE < l.leo() {
                out.push(Action::FollowerFetchOne { follower, leader });
            }
        }
    }
    for leader in s.presumed_leaders() {
        for follower in ids.clone() {
            if may_leader_shrink(cfg, s, leader, follower) {
                out.push(Action::LeaderShrinkIsr { leader, follower });
            }
            if may_leader_expand(cfg, s, leader, follower) {
                out.push(Action::LeaderExpandIsr { leader, follower });
            }
        }
        if may_learn_isr(cfg, s, leader) && !cfg.drops(Rule::LeaderLearnsIsr) {
            out.push(Action::LeaderLearnsIsr { leader });
        }
    }
    for replica in ids.clone() {
        let r = s.replica(replica);
        // The recovery point matters only to an unclean crash still to come.
        let unclean_left = within::<S, _>(s.unclean_crashes, cfg.unclean_crashes);
        if unclean_left && r.alive && r.recovery_point < r.leo() {
            out.push(Action::Flush { replica });
        }
        // So does the HW checkpoint.
        if cfg.hw_checkpoint == HwCheckpoint::Periodic
            && unclean_left
            && r.alive
            && r.hw_checkpoint != r.hw
        {
            out.push(Action::CheckpointHw { replica });
        }
    }
    for replica in ids.clone() {
        if s.replica(replica).alive {
            if within::<S, _>(s.clean_crashes, cfg.clean_crashes) {
                out.push(Action::Crash {
                    replica,
                    clean: true,
                });
            }
            if within::<S, _>(s.unclean_crashes, cfg.unclean_crashes) {
                out.push(Action::Crash {
                    replica,
                    clean: false,
                });
            }
        } else if may_restart(cfg, s, replica) {
            out.push(Action::Restart { replica });
        }
    }
}

/// Whether `action` may be taken in `s`: one of the actions `enabled`
/// lists, or a fetch cut short at a length the checker does not list
/// (FollowerFetchPart: copying, and more than one record and fewer than
/// all the follower lacks).
pub fn allowed<S: Shape>(cfg: &Config, s: &State<S>, action: Action<S>) -> bool {
    if let Action::FollowerFetchPart {
        follower,
        leader,
        records,
    } = action
    {
        let (f, l) = (s.replica(follower), s.replica(leader));
        return fetch_leader(cfg, s, follower) == Some(leader)
            && fetch_outcome(cfg, f, l) == FetchOutcome::Copy
            && records > S::Offset::ONE
            && f.leo() + records < l.leo();
    }
    let mut en = Vec::new();
    enabled(cfg, s, &mut en);
    en.contains(&action)
}

/// Performs `action` on `s`; None when it changes nothing.
pub fn apply<S: Shape>(cfg: &Config, s: &State<S>, action: Action<S>) -> Option<State<S>> {
    let next = successor(cfg, s, action);
    (next != *s).then_some(next)
}

/// The state after `action`, which `enabled` listed for `s`, without
/// asking whether it changed anything (`apply` asks). The search uses it:
/// comparing whole states was a twentieth of its time, and `enabled` lists
/// only actions that change the state (`enabled_means_changes.rs`); were
/// one not to, the search would see a step to the same state, which adds
/// no state and heals nothing.
pub fn successor<S: Shape>(cfg: &Config, s: &State<S>, action: Action<S>) -> State<S> {
    successor_of(cfg, s.clone(), action)
}

/// [`successor`], given the state to change: the checker's states are
/// `Copy`, and a copy is one block move where the derived `clone` went
/// field by field (a thirtieth of the search's time).
pub fn successor_of<S: Shape>(cfg: &Config, mut next: State<S>, action: Action<S>) -> State<S> {
    let n = &mut next;
    match action {
        Action::ControllerElectLeader { replica, election } => {
            controller::elect(cfg, n, replica, election)
        }
        Action::ControllerShrinkIsr { replica } => {
            controller::shrink_isr_on_failure(cfg, n, replica)
        }
        Action::ControllerUnfence { replica } => controller::unfence(n, replica),
        Action::BecomeLeader { replica, epoch } => become_leader(cfg, n, replica, epoch),
        Action::BecomeFollower { replica, epoch } => become_follower(cfg, n, replica, epoch),
        Action::Produce { leader, .. } => produce(cfg, n, leader),
        Action::FollowerFetch { follower, leader } => {
            follower_fetch(cfg, n, follower, leader, None)
        }
        Action::FollowerFetchOne { follower, leader } => {
            follower_fetch(cfg, n, follower, leader, Some(S::Offset::ONE))
        }
        Action::FollowerFetchPart {
            follower,
            leader,
            records,
        } => follower_fetch(cfg, n, follower, leader, Some(records)),
        Action::LeaderAdvanceHw { leader, hw } => advance_hw(cfg, n, leader, hw),
        Action::LeaderShrinkIsr { leader, follower } => {
            let isr = alter_from(cfg, n, leader).without(follower);
            leader_alters_isr(cfg, n, leader, isr)
        }
        Action::LeaderExpandIsr { leader, follower } => {
            let isr = alter_from(cfg, n, leader).with(follower);
            leader_alters_isr(cfg, n, leader, isr)
        }
        Action::LeaderLearnsIsr { leader } => {
            if let Some(isr) = isr_to_learn(cfg, n, leader) {
                learn_isr(n, leader, isr);
            }
        }
        Action::Flush { replica } => {
            let r = n.replica_mut(replica);
            r.recovery_point = r.leo();
        }
        Action::CheckpointHw { replica } => {
            let r = n.replica_mut(replica);
            r.hw_checkpoint = r.hw;
        }
        Action::Crash { replica, clean } => crash(cfg, n, replica, clean),
        Action::Restart { replica } => restart(cfg, n, replica),
    }
    forget_what_no_longer_matters(cfg, n);
    next
}

/// States that differ only in what can no longer affect the run are one
/// state: recovery points matter only while an unclean crash may still
/// happen, and are dropped (0) once none is left; a request's ISR matters
/// only to its leader, and once that leader can no longer take it, only to
/// "a removed follower rejoins": of the current epoch's request the members
/// still in the controller's ISR are kept (a member added later is outside
/// them), of older requests nothing; a live broker's fence is kept only
/// where it can unblock an election (`controller::fence_matters`). In the
/// checker's shape a request no replica can take any more, and that no
/// leader reads, is dropped whole (`dead_request`).
pub fn forget_what_no_longer_matters<S: Shape>(cfg: &Config, s: &mut State<S>) {
    forget_what_no_longer_matters_as(cfg, s, Forgetting::Exact)
}

/// How [`forget_what_no_longer_matters_as`] forgets: exactly, or with a
/// flaw planted for the shapes test to catch.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forgetting {
    Exact,
    /// Drops every request but the controller's epoch's, even one a live
    /// replica may still take.
    TakeableRequests,
}

/// [`forget_what_no_longer_matters`], or with a planted flaw.
#[doc(hidden)]
pub fn forget_what_no_longer_matters_as<S: Shape>(cfg: &Config, s: &mut State<S>, how: Forgetting) {
    let c = s.controller;
    let kept = c
        .fenced
        .iter()
        .filter(|&r| controller::fence_matters(cfg, &c, r));
    s.controller.fenced = kept.fold(ReplicaSet::EMPTY, ReplicaSet::with);
    if !within::<S, _>(s.unclean_crashes, cfg.unclean_crashes) {
        for r in 0..s.n {
            s.replica_mut(r).recovery_point = S::Offset::ZERO;
            s.replica_mut(r).hw_checkpoint = S::Offset::ZERO;
        }
    }
    for epoch in s.request_epochs() {
        let Some(req) = s.request(epoch) else {
            continue;
        };
        // A leader that is down never takes its request: it may restart only
        // once the controller names another leader, in a newer epoch, and
        // restarting sets its epoch to that newer one.
        if req.leader.is_some_and(|l| accepts_request(s, l, epoch)) {
            continue;
        }
        let isr = if s.controller.epoch == Some(epoch) {
            req.isr.intersection(s.controller.isr)
        } else {
            ReplicaSet::EMPTY
        };
        s.set_request(epoch, Request { isr, ..req });
    }
    // Not in trace validation's unbounded shape, which rebuilds every
    // request from the brokers' logs; nor with a rule knocked out (one may
    // let a replica take an older epoch) or a mutation: their runs keep
    // the counts spec/differences.md gives.
    if S::BOUNDED && cfg.knock_out.is_none() && cfg.mutation.is_none() {
        for epoch in s.request_epochs() {
            let dead = match how {
                Forgetting::Exact => dead_request(s, epoch),
                Forgetting::TakeableRequests => s.controller.epoch != Some(epoch),
            };
            if dead {
                s.drop_request(epoch);
            }
        }
    }
    // An epoch's chain of ISRs matters only to that epoch's leader, while
    // it can still learn from it: it leads in that epoch, or it may still
    // take that epoch's request. Kept for the second too, the field is a
    // function of the rest of the state (a leader that takes its request
    // late finds it there), as the abstraction of the implementation's
    // state needs; and states that differ only in whether the leader took
    // its request before or after the controller left are one.
    let zombies_learn = cfg.mutation != Some(Mutation::OnlyTrueLeaderLearnsIsr);
    for epoch in s.request_epochs() {
        let Some(req) = s.request(epoch) else {
            continue;
        };
        let kept = zombies_learn && req.leader.is_some_and(|l| may_read_request(s, l, epoch));
        if !kept && !req.later_isrs.is_empty() {
            s.set_request(
                epoch,
                Request {
                    later_isrs: IsrChain::EMPTY,
                    ..req
                },
            );
        }
    }
}

/// Whether epoch `epoch`'s request can no longer affect the run: it is not
/// the controller's epoch (the controller's epoch only grows, and only its
/// request is ever sent, so this one is never written again), no live
/// replica takes it (a replica's epoch only grows, and its leader becomes
/// unknown again only by restarting), none leads in its epoch (only such a
/// leader reads its chain of ISRs), and a replica that is down restarts
/// into the controller's epoch, newer than this one. Nothing else reads it
/// but "the leader changes", a sometimes-property, which its successors in
/// later epochs still show while they live.
fn dead_request<S: Shape>(s: &State<S>, epoch: S::Epoch) -> bool {
    s.controller.epoch != Some(epoch)
        && s.request(epoch).is_some()
        && s.ids().all(|r| !may_read_request(s, r, epoch))
}

/// Whether `replica` may still read epoch `epoch`'s request: it leads in
/// that epoch (and learns from its chain of ISRs), or it takes it. Both
/// need it alive.
fn may_read_request<S: Shape>(s: &State<S>, replica: ReplicaId, epoch: S::Epoch) -> bool {
    let r = s.replica(replica);
    let leads = r.epoch == Some(epoch) && r.presumes_leadership(replica);
    leads || accepts_request(s, replica, epoch)
}

// --- LeaderAndIsr -----------------------------------------------------------

/// A replica takes a LeaderAndIsr only from a newer epoch; a restarted one,
/// which has not been told the current state yet, also from the epoch the
/// controller had when it came back.
pub fn accepts_request<S: Shape>(s: &State<S>, replica: ReplicaId, epoch: S::Epoch) -> bool {
    let r = s.replica(replica);
    r.alive
        && match r.epoch {
            None => true,
            Some(current) => {
                epoch > current || (r.leader == LeaderView::Unknown && epoch == current)
            }
        }
}

/// [`accepts_request`], unless a test knocks out one of its rules.
fn takes_request<S: Shape>(
    cfg: &Config,
    s: &State<S>,
    replica: ReplicaId,
    epoch: S::Epoch,
) -> bool {
    let takes = accepts_request(s, replica, epoch);
    let r = s.replica(replica);
    match cfg.knock_out {
        None => takes,
        Some(Rule::TakesOnlyNewerEpoch) => takes || (r.alive && r.epoch.is_some_and(|e| epoch < e)),
        Some(Rule::RestartedTakesCurrentEpoch) => {
            takes && !(r.leader == LeaderView::Unknown && r.epoch == Some(epoch))
        }
        Some(_) => takes,
    }
}

/// A follower that must consult its leader (`epoch`, `epoch-iterative`)
/// waits until the leader is alive and leads; with fencing, until it leads
/// in that epoch. Under `hw` and `on-fetch` it follows at once.
fn follow_enabled<S: Shape>(
    cfg: &Config,
    s: &State<S>,
    epoch: S::Epoch,
    leader: Option<ReplicaId>,
) -> bool {
    let Some(leader) = leader else {
        return true;
    };
    if !cfg.truncation.looks_up_when_following() {
        return true;
    }
    let l = s.replica(leader);
    l.presumes_leadership(leader) && (!cfg.fencing || l.epoch == Some(epoch))
}

fn become_leader<S: Shape>(cfg: &Config, s: &mut State<S>, replica: ReplicaId, epoch: S::Epoch) {
    let req = s.request(epoch).expect("enabled only for a sent request");
    let r = s.replica_mut(replica);
    r.epoch = Some(epoch);
    r.leader = LeaderView::Replica(replica);
    let known = (r.follower_leo, r.stale_fetch);
    r.clear_leader_state();
    if cfg.drops(Rule::NewLeaderForgetsFollowers) {
        (r.follower_leo, r.stale_fetch) = known;
    }
    r.isr = req.isr;
    publish_visible(s, replica);
}

fn become_follower<S: Shape>(cfg: &Config, s: &mut State<S>, replica: ReplicaId, epoch: S::Epoch) {
    let req = s.request(epoch).expect("enabled only for a sent request");
    let leader = match req.leader {
        Some(l) if cfg.truncation.looks_up_when_following() => Some(s.replica(l).clone()),
        _ => None,
    };
    let r = s.replica_mut(replica);
    if req.leader.is_some() {
        let offset = truncation_offset(cfg.truncation, r, leader.as_ref());
        r.truncate_to(offset);
    }
    r.epoch = Some(epoch);
    r.leader = req.leader.map_or(LeaderView::NoLeader, LeaderView::Replica);
    if !cfg.drops(Rule::FollowerForgetsLeadership) {
        r.clear_leader_state();
    }
}

// --- Producer ---------------------------------------------------------------

pub fn produce_enabled<S: Shape>(cfg: &Config, s: &State<S>, leader: ReplicaId) -> bool {
    let n = s.replica(leader).isr.len();
    let enough = if cfg.drops(Rule::ProduceAtExactlyMinIsr) {
        n > cfg.min_isr
    } else {
        n >= cfg.min_isr || cfg.drops(Rule::ProduceNeedsMinIsr)
    };
    within::<S, _>(s.produced, cfg.records) && (cfg.acks != Acks::All || enough)
}

fn produce<S: Shape>(cfg: &Config, s: &mut State<S>, leader: ReplicaId) {
    let id = s.produced;
    s.produced += S::RecordId::ONE;
    let r = s.replica_mut(leader);
    let epoch = r.epoch.expect("a leader has an epoch");
    let offset = r.leo();
    r.log.append(Entry { id, epoch });
    match cfg.acks {
        Acks::None => {}
        Acks::Leader => s.record_mut(id).acked = Some(epoch),
        Acks::All => r.pending_acks.insert(id),
    }
    s.record_mut(id).offset = offset;
}

// --- Fetch ------------------------------------------------------------------

/// The leader `follower` may fetch from: alive, presuming leadership, and
/// (with fencing) on the follower's epoch.
fn fetch_leader<S: Shape>(cfg: &Config, s: &State<S>, follower: ReplicaId) -> Option<ReplicaId> {
    let f = s.replica(follower);
    let LeaderView::Replica(leader) = f.leader else {
        return None;
    };
    let l = s.replica(leader);
    let fenced_ok = !cfg.fencing || l.epoch == f.epoch || cfg.drops(Rule::FetchFromLeaderEpoch);
    let leads = l.presumes_leadership(leader) || (l.alive && cfg.drops(Rule::FetchFromLeader));
    let may_fetch = f.alive && leader != follower && leads && fenced_ok;
    let changes = match fetch_outcome(cfg, f, l) {
        FetchOutcome::Truncate(offset) => offset < f.leo(),
        FetchOutcome::Copy => fetch_changes_something(s, follower, leader),
    };
    (may_fetch && changes).then_some(leader)
}

/// What the leader's answer to a fetch makes the follower do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FetchOutcome<S: Shape> {
    /// No records: the follower truncates to this offset (a diverging epoch,
    /// or OffsetOutOfRange) and the leader learns nothing from the fetch
    /// (`Partition.fetchRecords` updates the follower's state only without
    /// a diverging epoch).
    Truncate(S::Offset),
    /// Records from the fetch offset, and the leader's HW.
    Copy,
}

fn fetch_outcome<S: Shape>(cfg: &Config, f: &Replica<S>, l: &Replica<S>) -> FetchOutcome<S> {
    if cfg.truncation == Truncation::OnFetch && cfg.mutation != Some(Mutation::NoLastFetchedEpoch) {
        match fetch_divergence_with(cfg.knock_out, f, l) {
            FetchCheck::Agrees => {}
            FetchCheck::Diverging { truncate_to, .. } => {
                return FetchOutcome::Truncate(truncate_to)
            }
            FetchCheck::Undefined if cfg.drops(Rule::UnknownEpochOutOfRange) => {}
            // OffsetOutOfRange (`AbstractFetcherThread.handleOutOfRangeError`):
            // a follower ahead of the leader cuts back to the leader's LEO;
            // one that is not gets the same answer again.
            FetchCheck::Undefined => return FetchOutcome::Truncate(l.leo().min(f.leo())),
        }
    }
    if f.leo() > l.leo() && !cfg.drops(Rule::AheadOfLeaderTruncates) {
        // OffsetOutOfRange: the follower is ahead of its leader and cuts back
        // to the leader's LEO.
        return FetchOutcome::Truncate(l.leo());
    }
    FetchOutcome::Copy
}

/// An idle fetch (nothing to copy, nothing new to learn on either side) is
/// not a step: it would leave the state as it was.
fn fetch_changes_something<S: Shape>(s: &State<S>, follower: ReplicaId, leader: ReplicaId) -> bool {
    let (f, l) = (s.replica(follower), s.replica(leader));
    f.leo() != l.leo()
        || f.hw != l.hw.min(f.leo())
        || l.follower_leo[follower as usize] != Some(f.leo())
        || l.stale_fetch.contains(follower)
}

/// A fetch: the follower copies at most `limit` records (None: all it
/// lacks) of the leader's log from its LEO on, or truncates if the leader's
/// answer says so.
fn follower_fetch<S: Shape>(
    cfg: &Config,
    s: &mut State<S>,
    follower: ReplicaId,
    leader: ReplicaId,
    limit: Option<S::Offset>,
) {
    let l = s.replica(leader).clone();
    let f = s.replica_mut(follower);
    if let FetchOutcome::Truncate(offset) = fetch_outcome(cfg, f, &l) {
        f.truncate_to(offset);
        return;
    }
    // The leader learns the follower's LEO from the fetch offset; what is
    // appended now reaches the leader with the next fetch.
    let fetch_offset = f.leo();
    let end = limit.map_or(l.leo(), |n| l.leo().min(fetch_offset + n));
    let count = end.idx().saturating_sub(fetch_offset.idx());
    for entry in l.log.iter_from(fetch_offset.idx()).take(count) {
        f.log.append(entry);
    }
    f.hw = if cfg.drops(Rule::FollowerHwWithinLog) {
        l.hw
    } else {
        l.hw.min(f.leo())
    };
    let learnt = if cfg.drops(Rule::LeaderLearnsFetchOffset) {
        f.leo()
    } else {
        fetch_offset
    };
    let l = s.replica_mut(leader);
    l.follower_leo[follower as usize] = Some(learnt);
    if !cfg.drops(Rule::FetchClearsStale) {
        l.stale_fetch = l.stale_fetch.without(follower);
    }
}

// --- High watermark ---------------------------------------------------------

/// The HWs the leader may move to (Kafka's `Partition.maybeIncrementLeaderHW`):
/// the lowest LEO, as the leader knows them, over its maximal ISR and the
/// followers `shouldWaitForReplicaToJoinIsr` counts. None while (with the
/// ELR, Kafka 3.7's KAFKA-15583) its ISR is below min.insync.replicas.
///
/// The maximal ISR is the leader's ISR copy: the model's AlterPartition is
/// atomic, so no addition is ever pending. A follower outside it waits to
/// join (`shouldWaitForReplicaToJoinIsr`) while it is caught up
/// (`ReplicaState.isCaughtUp`: within replica.lag.time.max.ms of having
/// reached the leader's LEO) and may join (`isReplicaIsrEligible`: here,
/// its last fetch is from its current incarnation). The model has no clock:
/// any eligible follower that has fetched in this leadership may still be
/// caught up, or the lag time may have passed for it. So up to two HWs are
/// offered: the lowest LEO over the ISR and those followers (no time
/// passed), and over the ISR alone (time passed). Counting a follower only
/// holds the HW lower; the `hw-over-isr-only` mutation never counts one.
pub fn advanced_hws<S: Shape>(
    cfg: &Config,
    s: &State<S>,
    leader: ReplicaId,
) -> [Option<S::Offset>; 2] {
    let l = s.replica(leader);
    let n = l.isr.len();
    let under_min = if cfg.drops(Rule::HwAtExactlyMinIsr) {
        n <= cfg.min_isr
    } else {
        n < cfg.min_isr && !cfg.drops(Rule::HwWaitsForMinIsr)
    };
    if cfg.elr && under_min {
        return [None, None];
    }
    let mut over_isr = l.leo();
    let isr = if cfg.drops(Rule::HwOverIsr) {
        ReplicaSet::EMPTY
    } else {
        l.isr
    };
    for f in isr.iter().filter(|&f| f != leader) {
        match l.follower_leo[f as usize] {
            Some(leo) => over_isr = over_isr.min(leo),
            None if cfg.drops(Rule::HwWaitsForUnknownMember) => {}
            None => return [None, None],
        }
    }
    let mut with_waiting = over_isr;
    if cfg.mutation != Some(Mutation::HwOverIsrOnly) {
        let counts_stale = cfg.drops(Rule::HwSkipsStaleFollower);
        for f in s.ids().filter(|&f| f != leader && !l.isr.contains(f)) {
            match l.follower_leo[f as usize] {
                Some(leo) if counts_stale || !l.stale_fetch.contains(f) => {
                    with_waiting = with_waiting.min(leo)
                }
                _ => {}
            }
        }
    }
    if cfg.mutation == Some(Mutation::HwPastLeo) {
        over_isr = over_isr.saturating_succ();
        with_waiting = with_waiting.saturating_succ();
    }
    let lower = (with_waiting > l.hw).then_some(with_waiting);
    let upper = (over_isr > l.hw && over_isr != with_waiting).then_some(over_isr);
    [lower, upper]
}

fn advance_hw<S: Shape>(cfg: &Config, s: &mut State<S>, leader: ReplicaId, hw: S::Offset) {
    let l = s.replica_mut(leader);
    l.hw = hw;
    // Waiting acks=all producers are answered: written when the ISR still
    // has min.insync.replicas, else NotEnoughReplicasAfterAppend.
    let l = l.clone();
    let isr_ok = (l.isr.len() >= cfg.min_isr || cfg.drops(Rule::AckNeedsMinIsr))
        && cfg.mutation != Some(Mutation::NeverAcknowledge);
    let epoch = l.epoch.expect("a leader has an epoch");
    let mut pending = l.pending_acks.clone();
    // Each waiting record is answered once the HW passes its offset, as
    // Kafka's DelayedProduce waits for the HW to reach the offset its
    // append got (`Partition.checkEnoughReplicasReachOffset`). A record is
    // only ever at the offset it was produced at (a fetch copies offsets),
    // so it is looked up there, not searched for in the log. Under the
    // `hw-past-leo` mutation the HW may pass the LEO: an offset past it
    // holds nothing.
    for id in l.pending_acks.iter_ids() {
        let Some(h) = s.produced_records().get(id.idx()) else {
            continue;
        };
        if h.offset >= hw || l.log.get(h.offset).is_none_or(|e| e.id != id) {
            continue;
        }
        pending.remove(id);
        if isr_ok {
            let h = s.record_mut(id);
            h.acked = Some(h.acked.map_or(epoch, |a| a.min(epoch)));
        }
    }
    s.replica_mut(leader).pending_acks = pending;
    publish_visible(s, leader);
}

/// Records below a presumed leader's HW are visible to consumers: remember
/// the lowest epoch at which each was.
fn publish_visible<S: Shape>(s: &mut State<S>, leader: ReplicaId) {
    let l = s.replica(leader);
    let epoch = l.epoch.expect("a leader has an epoch");
    // Below the HW and within the log (the `hw-past-leo` mutation lets the
    // HW pass the LEO: "HW <= LEO" breaks, and the model goes on).
    let below = l.hw.min(l.leo()).idx();
    // Most of a long log was visible long ago: a run of the log whose
    // records' chunks all hold records visible at this epoch or before
    // (`LogStore::ids_in_run`, `RecordTable::keys_at_most`) is passed over
    // whole. Reading every entry below the HW at every HW move a search
    // tried was a sixth of trace validation's time on a full-rate run.
    let run = <S::Log as LogStore<S>>::RUN;
    let produced = s.produced_records().len();
    let mut from = 0;
    while from < below {
        let to = below.min((from / run).saturating_add(1).saturating_mul(run));
        let seen_all = s
            .replica(leader)
            .log
            .ids_in_run(from / run)
            .is_some_and(|(lo, hi)| {
                (hi as usize) < produced
                    && crate::shape::RecordTable::keys_at_most(
                        &s.records,
                        lo as usize..=hi as usize,
                        epoch.idx() as u64,
                    )
            });
        if !seen_all {
            for offset in from..to {
                let Some(entry) = s.replica(leader).log.get(S::Offset::at(offset)) else {
                    break;
                };
                // Read before written: a record already visible at this
                // epoch or before is left as it is, and a table shared
                // between states is copied only where a record changes.
                let seen = s
                    .produced_records()
                    .get(entry.id.idx())
                    .and_then(|h| h.visible);
                if seen.is_some_and(|v| v <= epoch) {
                    continue;
                }
                let h = s.record_mut(entry.id);
                h.visible = Some(h.visible.map_or(epoch, |v| v.min(epoch)));
            }
        }
        from = to;
    }
}

// --- ISR changes by the leader ------------------------------------------------

/// Only the leader the controller knows, in the controller's epoch, may
/// change the ISR (the AlterPartition / zkVersion fence).
fn is_true_leader<S: Shape>(s: &State<S>, leader: ReplicaId) -> bool {
    let c = &s.controller;
    c.leader == Some(leader) && c.epoch == s.replica(leader).epoch
}

/// Kafka's `Partition.getOutOfSyncReplicas`: a follower is out of sync when
/// it is not caught up (`Replica.isCaughtUp`: its LEO, as the leader knows
/// it, is not the leader's LEO) for longer than replica.lag.time.max.ms
/// (the model lets that time pass at any moment). A follower whose LEO
/// equals the leader's is never removed for lag, even if it stopped
/// fetching; a broker that died leaves through the controller.
fn may_leader_shrink<S: Shape>(
    cfg: &Config,
    s: &State<S>,
    leader: ReplicaId,
    follower: ReplicaId,
) -> bool {
    let l = s.replica(leader);
    if follower == leader || !l.isr.contains(follower) || !may_alter_isr(cfg, s, leader) {
        return false;
    }
    l.follower_leo[follower as usize] != Some(l.leo()) || cfg.drops(Rule::ShrinkOnlyLagging)
}

/// Whether `leader` may send AlterPartition: [`is_true_leader`], unless a
/// test knocks that rule out.
fn may_alter_isr<S: Shape>(cfg: &Config, s: &State<S>, leader: ReplicaId) -> bool {
    is_true_leader(s, leader) || cfg.drops(Rule::IsrChangeByTrueLeader)
}

/// The ISR an AlterPartition starts from: the controller's (the partition
/// epoch fences any other), or the leader's copy with that rule knocked out.
fn alter_from<S: Shape>(cfg: &Config, s: &State<S>, leader: ReplicaId) -> ReplicaSet {
    if cfg.drops(Rule::AlterPartitionFromControllerIsr) {
        s.replica(leader).isr
    } else {
        s.controller.isr
    }
}

fn may_leader_expand<S: Shape>(
    cfg: &Config,
    s: &State<S>,
    leader: ReplicaId,
    follower: ReplicaId,
) -> bool {
    let l = s.replica(leader);
    // Against the controller's ISR: the leader's copy misses removals the
    // controller made on its own, and the update is checked against it.
    let from = alter_from(cfg, s, leader);
    if follower == leader || from.contains(follower) || !may_alter_isr(cfg, s, leader) {
        return false;
    }
    let fetched = match cfg.knock_out {
        Some(Rule::ExpandNeedsFetch) => l.follower_leo[follower as usize].or(Some(S::Offset::ZERO)),
        _ => l.follower_leo[follower as usize],
    };
    let Some(follower_leo) = fetched else {
        return false;
    };
    // KIP-841: the controller refuses a fenced follower; the leader's
    // ISR stays as it was.
    let accepted = controller::may_alter_isr(cfg, s, from.with(follower));
    let current = !l.stale_fetch.contains(follower) || cfg.drops(Rule::ExpandNotStale);
    accepted && current && follower_in_sync(cfg, l, follower_leo)
}

/// Kafka's `Partition.isFollowerInSync`: the follower's LEO has reached the
/// leader's HW and (KIP-320 era, KAFKA-7128) the offset where the leader's
/// epoch began, so a new member holds every record an earlier leader may
/// have committed. The `expand-on-leader-hw` mutation asks the leader's HW
/// to reach its epoch start instead, a rule about the leader that can stall
/// the partition for good.
fn follower_in_sync<S: Shape>(cfg: &Config, l: &Replica<S>, follower_leo: S::Offset) -> bool {
    let at_hw = match cfg.knock_out {
        Some(Rule::ExpandAtLeaderHw) => true,
        Some(Rule::ExpandAtExactlyLeaderHw) => follower_leo > l.hw,
        _ => follower_leo >= l.hw,
    };
    if !at_hw {
        return false;
    }
    if !cfg.fencing {
        return true;
    }
    let epoch = l.epoch.expect("a leader has an epoch");
    let epoch_start = l.leader_epoch_start(epoch);
    match (cfg.mutation, cfg.knock_out) {
        (Some(Mutation::ExpandOnLeaderHw), _) => l.hw >= epoch_start,
        (Some(Mutation::ExpandAtHw), _) => true,
        (_, Some(Rule::ExpandAtExactlyEpochStart)) => follower_leo > epoch_start,
        (_, Some(Rule::ExpandNotShortOfEpochStart)) => follower_leo + S::Offset::ONE >= epoch_start,
        _ => follower_leo >= epoch_start,
    }
}

/// The leader's copy of the ISR lacks the controller's own removals.
/// (Additions go through the leader, so the copy is never smaller.)
fn may_learn_isr<S: Shape>(cfg: &Config, s: &State<S>, leader: ReplicaId) -> bool {
    isr_to_learn(cfg, s, leader).is_some_and(|isr| learns(s, leader, isr))
}

/// Whether `leader` learns something from `isr` that still names it.
fn learns<S: Shape>(s: &State<S>, leader: ReplicaId, isr: ReplicaSet) -> bool {
    tells(s.replica(leader).isr, isr, leader)
}

/// Whether `isr` tells a leader holding `copy` something: it differs, and
/// still names the leader.
fn tells(copy: ReplicaSet, isr: ReplicaSet, leader: ReplicaId) -> bool {
    copy != isr && isr.contains(leader)
}

/// The ISR `leader` may learn next: the controller's, if it is the true
/// leader (Kafka's leader takes the newest metadata it has; the ISRs
/// between are reachable by learning sooner); if it still leads an epoch
/// the controller has left, the oldest of that epoch's ISRs it has not
/// applied (`Request::later_isrs`). Kafka's broker applies a partition's
/// metadata changes in order (`ReplicaManager.applyDelta` hands each to
/// `Partition.makeLeader`, which takes any whose partition epoch is not
/// older than its own, whatever the controller did since), so a leader left
/// behind takes its own epoch's ISR changes one after the other.
fn isr_to_learn<S: Shape>(cfg: &Config, s: &State<S>, leader: ReplicaId) -> Option<ReplicaSet> {
    if is_true_leader(s, leader) {
        return Some(s.controller.isr);
    }
    if cfg.mutation == Some(Mutation::OnlyTrueLeaderLearnsIsr) {
        return None;
    }
    let r = s.replica(leader);
    let epoch = r.epoch.filter(|_| r.presumes_leadership(leader))?;
    let req = s.request(epoch)?;
    (req.leader == Some(leader) && s.controller.epoch != Some(epoch))
        .then_some(req.later_isrs.first())
        .flatten()
}

/// The leader applies `isr`: the controller's, after which nothing older
/// of its epoch is left to apply, or the next of its epoch's chain.
fn learn_isr<S: Shape>(s: &mut State<S>, leader: ReplicaId, isr: ReplicaSet) {
    let true_leader = is_true_leader(s, leader);
    s.replica_mut(leader).isr = isr;
    let epoch = s.replica(leader).epoch;
    if let Some((e, req)) = epoch.and_then(|e| Some((e, s.request(e)?))) {
        let later_isrs = match true_leader {
            true => IsrChain::EMPTY,
            false => req.later_isrs.rest(),
        };
        s.set_request(e, Request { later_isrs, ..req });
    }
}

fn leader_alters_isr<S: Shape>(cfg: &Config, s: &mut State<S>, leader: ReplicaId, isr: ReplicaSet) {
    controller::leader_sets_isr(cfg, s, isr);
    s.replica_mut(leader).isr = isr;
    // Taken, its ISR is the newest of the epoch: the older changes it has
    // not applied it never will (`Partition.makeLeader` skips an older
    // partition epoch).
    let epoch = s.replica(leader).epoch;
    if let Some((e, req)) = epoch.and_then(|e| Some((e, s.request(e)?))) {
        if s.controller.isr == isr && s.controller.epoch == Some(e) {
            let later_isrs = IsrChain::EMPTY;
            s.set_request(e, Request { later_isrs, ..req });
        }
    }
}

// --- Crash and restart --------------------------------------------------------

fn crash<S: Shape>(cfg: &Config, s: &mut State<S>, replica: ReplicaId, clean: bool) {
    let periodic = cfg.hw_checkpoint == HwCheckpoint::Periodic;
    let r = s.replica_mut(replica);
    r.alive = false;
    if clean {
        // A clean shutdown flushes everything and checkpoints the HW
        // (`ReplicaManager.shutdown`).
        r.recovery_point = r.leo();
        if periodic {
            r.hw_checkpoint = r.hw;
        }
    } else {
        // The page cache is gone: the log is cut back to the recovery point,
        // and the HW is the last checkpointed one, within that log
        // (`UnifiedLog`'s HW is never above its LEO).
        let rp = r.recovery_point;
        r.truncate_to(rp);
        if periodic {
            r.hw = r.hw_checkpoint.min(r.leo());
        }
        r.unclean_down = true;
    }
    r.leader = LeaderView::Unknown;
    r.epoch = None;
    r.clear_leader_state();
    // Down, it is no acceptable leader whether fenced or not; it comes back
    // registered.
    s.controller.fenced = s.controller.fenced.without(replica);
    for other in 0..s.n {
        let o = s.replica_mut(other);
        if o.follower_leo[replica as usize].is_some() {
            o.stale_fetch = o.stale_fetch.with(replica);
        }
    }
    if clean {
        s.clean_crashes += S::Count::ONE;
    } else {
        s.unclean_crashes += S::Count::ONE;
    }
}

/// A down broker may restart once the controller no longer names it leader
/// (re-registration fences the old incarnation). With that rule knocked
/// out, at any time while an epoch is left for its removal as leader.
fn may_restart<S: Shape>(cfg: &Config, s: &State<S>, replica: ReplicaId) -> bool {
    if cfg.mutation == Some(Mutation::NoRestart) {
        return false;
    }
    let c = &s.controller;
    c.leader != Some(replica)
        || (cfg.drops(Rule::RestartWaitsForNewLeader)
            && epoch_within::<S>(c.next_epoch(), cfg.max_epoch))
}

fn restart<S: Shape>(cfg: &Config, s: &mut State<S>, replica: ReplicaId) {
    let epoch = s.controller.epoch;
    let r = s.replica_mut(replica);
    r.alive = true;
    r.epoch = epoch;
    let was_unclean = std::mem::take(&mut r.unclean_down);
    // Re-registration: the replica leaves the ISR; after an unclean
    // shutdown (KIP-966) the ELR too.
    controller::broker_registered(cfg, s, replica, was_unclean);
}
