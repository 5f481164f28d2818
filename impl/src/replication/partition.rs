//! One replica's partition state machine (Kafka's `Partition` with the
//! follower side of `ReplicaFetcherThread`), without I/O: [`Partition::step`]
//! takes one [`Input`] (a request, a response, a timer [`Tick`], or the
//! completion of a storage operation it asked for) and returns [`Ready`]:
//! either one storage operation to perform, or the messages and answers to
//! send. The leader's handlers are in `leader.rs`, the follower's in
//! `follower.rs`; the model action each mirrors is named on it.
//!
//! # Ordering rules
//!
//! 1. **Storage before state.** An input that needs the log asks for one
//!    [`StorageOp`] and changes nothing else until its completion comes
//!    back as [`Input::Storage`]; the completion carries the log's state,
//!    which the replica adopts, and finishes the transition. A failed
//!    operation finishes nothing: the replica is as it was before the input
//!    (given a log whose operations are all or nothing, see
//!    [`ReplicaLog`]). So every input is one transition, which completes or
//!    leaves the replica unchanged.
//! 2. **Persist before send.** [`Ready`] is either an operation or messages,
//!    never both: messages and producer answers go out only once every
//!    operation of their transition has completed.
//! 3. **One operation at a time.** While an operation is in flight the
//!    replica takes no other input ([`Error::NotEnabled`]).
//! 4. **Appends before offsets.** A follower's fetched records are in its
//!    log before its LEO moves, so the fetch offset that reports the LEO to
//!    the leader names appended records; its HW (the leader's HW, capped at
//!    its own LEO) is set after that append, in the same operation, as
//!    Kafka's `UnifiedLog.updateHighWatermark` caps it. A leader's records are in
//!    its log before acks=1 is answered, before a fetch can be served them,
//!    and before an HW can pass them.
//! 5. **The HW checkpoint before the answer.** With
//!    [`HwCheckpointPolicy::EveryChange`] a leader's HW is set and
//!    checkpointed in one operation, and the acks=all producers it passes
//!    are answered only after that completes, so a restart never finds an
//!    HW below one a producer was told of. With
//!    [`HwCheckpointPolicy::IntervalMs`] (Kafka's default) the checkpoint
//!    follows on the next [`Tick::CheckpointHw`], and a restart may find an
//!    older HW, as in Kafka.
//! 6. **Truncate before following.** Under `hw` a replica takes a new
//!    leader epoch and role only once its truncation completed; under the
//!    epoch rules it fetches only once the OffsetsForLeaderEpoch exchange
//!    has truncated its log. A truncation rewrites the checkpoints before
//!    it completes ([`StorageOp::Truncate`]).
//! 7. **Reads before learning.** A leader answers a fetch from a read that
//!    completed, and learns the follower's fetch offset only then; a failed
//!    read is answered with KAFKA_STORAGE_ERROR and teaches it nothing.
//!
//! [`ReplicaLog`]: super::ReplicaLog

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::error::{Error, Result};
use super::log::{LogState, StorageDone, StorageFailed, StorageOp};
use super::messages::{
    AlterPartitionResponse, ApiError, FetchRequest, FetchResponse, IsrChange, LeaderAndIsr,
    OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse, Output, ProduceRequest,
    ProduceResponse,
};
use super::types::{
    Acks, HwCheckpointPolicy, LeaderEpoch, LeaderView, ReplicaId, ReplicationConfig,
};

/// The leader's view of one follower (Kafka's `Replica` state on the leader).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowerView {
    /// The follower's LEO, learnt from its last fetch offset in this
    /// leadership; `None` until it fetches.
    pub log_end_offset: Option<u64>,
    /// Kafka's `lastCaughtUpTimeMs`: the last time the follower's fetch
    /// reached the leader's LEO of the moment (or of its previous fetch).
    pub last_caught_up_ms: u64,
    pub last_fetch_ms: u64,
    /// The leader's LEO when the previous fetch was answered.
    pub last_fetch_leader_leo: u64,
    /// The epoch in which the follower fetches from this leader: from its
    /// fetches and from its notices ([`Output::Following`]); `None` when it
    /// fetches from no one here (crashed, or following someone else).
    pub fetching_epoch: Option<LeaderEpoch>,
    /// KIP-903: the last fetch came from an incarnation that has since
    /// crashed. Its LEO still counts for the HW (the leader cannot know
    /// better), but it does not let the follower into the ISR.
    pub stale_fetch: bool,
}

impl FollowerView {
    pub(super) fn new(now: u64) -> FollowerView {
        FollowerView {
            log_end_offset: None,
            last_caught_up_ms: now,
            last_fetch_ms: now,
            last_fetch_leader_leo: 0,
            fetching_epoch: None,
            stale_fetch: false,
        }
    }
}

/// A producer waiting for the HW (acks=all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Waiter {
    pub(super) request_id: u64,
    pub(super) base_offset: u64,
    pub(super) last_offset: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LeaderState {
    pub(super) isr: BTreeSet<ReplicaId>,
    /// The controller's partition epoch of `isr`: an ISR of an older one
    /// (a metadata update or an answer overtaken by a newer) is ignored.
    pub(super) partition_epoch: u32,
    /// The LEO when this leadership began: its epoch starts here.
    pub(super) epoch_start_offset: u64,
    pub(super) followers: BTreeMap<ReplicaId, FollowerView>,
    pub(super) waiters: Vec<Waiter>,
    /// The AlterPartition in flight: one at a time, never replaced, until
    /// the controller answers it (Kafka's `Partition` holds a
    /// `PendingShrinkIsr` or `PendingExpandIsr` state until
    /// `handleAlterPartitionUpdate` or its error handler clears it, and
    /// proposes no other change meanwhile).
    pub(super) pending_isr: Option<IsrChange>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for OffsetsForLeaderEpoch answers before fetching.
    Truncating,
    Fetching,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FollowerState {
    pub(super) leader: ReplicaId,
    pub(super) phase: Phase,
    /// The correlation id and send time of the request in flight.
    pub(super) in_flight: Option<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RoleState {
    None,
    Leader(LeaderState),
    Follower(FollowerState),
}

/// What a replica is doing, for snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Neither leading nor following (never told, or no leader).
    None,
    Leader,
    /// Following `leader`; `truncating` until OffsetsForLeaderEpoch is done.
    Follower {
        leader: ReplicaId,
        truncating: bool,
    },
}

/// A read-only picture of a replica's partition state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    pub replica_id: ReplicaId,
    pub leader_epoch: Option<LeaderEpoch>,
    pub leader: LeaderView,
    pub role: Role,
    /// The ISR as this replica knows it; empty unless it leads.
    pub isr: Vec<ReplicaId>,
    pub high_watermark: u64,
    pub log_end_offset: u64,
    pub log_start_offset: u64,
    pub recovery_point: u64,
    /// The HW `replication-offset-checkpoint` holds.
    #[serde(default)]
    pub hw_checkpoint: u64,
    /// As leader: each follower as it sees it.
    pub followers: BTreeMap<ReplicaId, FollowerView>,
    /// As leader: request ids of the acks=all producers waiting.
    pub waiting_acks: Vec<u64>,
    /// As leader: where its epoch starts.
    pub epoch_start_offset: Option<u64>,
    pub pending_isr_change: Option<IsrChange>,
}

/// One input to the state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// From the controller: a leader epoch (the model's BecomeLeader and
    /// BecomeFollower).
    LeaderAndIsr(LeaderAndIsr),
    /// From the controller: the ISR changed within `leader_epoch` (it
    /// removed a failed broker; the model's LeaderLearnsIsr), as of its
    /// `partition_epoch`.
    IsrUpdate {
        leader_epoch: LeaderEpoch,
        partition_epoch: u32,
        isr: Vec<ReplicaId>,
    },
    /// From the controller: the answer to this leader's AlterPartition.
    AlterPartitionResponse(AlterPartitionResponse),
    /// From a producer.
    Produce(ProduceRequest),
    /// From a follower (to a leader).
    Fetch(FetchRequest),
    /// From the leader (to a follower).
    FetchResponse(FetchResponse),
    /// From a follower (to a leader).
    OffsetsForLeaderEpoch(OffsetsForLeaderEpochRequest),
    /// From the leader (to a follower).
    OffsetsForLeaderEpochResponse(OffsetsForLeaderEpochResponse),
    /// From a peer: whom it now fetches from ([`Output::Following`]).
    Following {
        follower: ReplicaId,
        leader: Option<(ReplicaId, LeaderEpoch)>,
    },
    /// A peer broker crashed (its connections dropped; KIP-903's broker
    /// epoch changes).
    PeerCrashed(ReplicaId),
    /// Time has come for something the replica does on its own.
    Tick(Tick),
    /// The storage operation the replica asked for completed, or failed.
    Storage(std::result::Result<StorageDone, StorageFailed>),
}

/// What a replica does on its own, when its driver's timers say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Tick {
    /// A follower sends its next request to its leader: OffsetsForLeaderEpoch
    /// while truncating, else a fetch; not while one is in flight (unless it
    /// timed out).
    SendRequest,
    /// A leader moves its HW (the model's LeaderAdvanceHw).
    AdvanceHw,
    /// `replica.lag.time.max.ms` has passed: a leader asks to drop this
    /// follower if it is out of sync (the model's LeaderShrinkIsr).
    ShrinkIsr(ReplicaId),
    /// A leader asks to take this caught-up follower back (the model's
    /// LeaderExpandIsr).
    ExpandIsr(ReplicaId),
    /// The flush interval: fsync the log (the model's Flush).
    Flush,
    /// `replica.high.watermark.checkpoint.interval.ms` (with
    /// [`HwCheckpointPolicy::IntervalMs`]).
    CheckpointHw,
}

/// What a step asks of its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// Perform this operation on the log, then step again with its
    /// completion ([`Input::Storage`]).
    Persist(StorageOp),
    /// The transition is complete: deliver these (possibly none).
    Send(Vec<Output>),
}

impl Ready {
    pub(super) fn none() -> Ready {
        Ready::Send(Vec::new())
    }
}

/// What the completion of the operation in flight finishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pending {
    /// Under `hw`: the truncation to the HW, then the LeaderAndIsr is taken.
    Follow(LeaderAndIsr),
    /// An OffsetsForLeaderEpoch answer's truncation; `done` ends the exchange.
    ExchangeTruncation {
        done: bool,
    },
    /// A fetch answered OffsetOutOfRange: the cut to the leader's LEO.
    OutOfRangeTruncation,
    /// A fetch answered with a diverging epoch: the cut it asks for.
    DivergingTruncation,
    /// A fetch response's records and HW (or its HW alone).
    FetchApplied,
    /// A producer's batch.
    LeaderAppend {
        request_id: u64,
        acks: Acks,
        base_offset: u64,
        epoch: LeaderEpoch,
    },
    /// The leader's HW; then the producers it passed are answered.
    AdvanceHw,
    /// The records a fetch asked for.
    ServeFetch(FetchRequest),
    Flush,
    Checkpoint {
        now: u64,
    },
}

/// One replica of the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub(super) id: ReplicaId,
    pub(super) config: ReplicationConfig,
    pub(super) replicas: Vec<ReplicaId>,
    pub(super) leader_epoch: Option<LeaderEpoch>,
    pub(super) leader: LeaderView,
    pub(super) role: RoleState,
    /// The log as the last completion reported it.
    pub(super) log: LogState,
    pub(super) next_correlation_id: u64,
    /// How long a request may stay unanswered before it is sent again.
    pub(super) request_timeout_ms: u64,
    pub(super) last_hw_checkpoint_ms: u64,
    pub(super) pending: Option<Pending>,
}

impl Partition {
    /// A replica starting (or restarting) on a log in state `log`.
    /// `registered_epoch` is the controller's leader epoch when the broker
    /// registered (the model's restart): the replica then takes a
    /// LeaderAndIsr of that epoch or a newer one. A fresh replica passes
    /// `None`.
    pub fn new(
        id: ReplicaId,
        replicas: Vec<ReplicaId>,
        config: ReplicationConfig,
        log: LogState,
        registered_epoch: Option<LeaderEpoch>,
    ) -> Result<Partition> {
        if config.min_insync_replicas == 0 {
            return Err(Error::InvalidConfig(
                "min.insync.replicas must be at least 1".into(),
            ));
        }
        if !replicas.contains(&id) {
            return Err(Error::UnknownReplica(id));
        }
        if log.high_watermark > log.log_end_offset {
            return Err(Error::InvalidConfig(
                "the log's high watermark is above its end".into(),
            ));
        }
        Ok(Partition {
            id,
            config,
            replicas,
            leader_epoch: registered_epoch,
            leader: LeaderView::Unknown,
            role: RoleState::None,
            log,
            next_correlation_id: 0,
            request_timeout_ms: 30_000,
            last_hw_checkpoint_ms: 0,
            pending: None,
        })
    }

    /// Sets how long a fetch, OffsetsForLeaderEpoch or AlterPartition may go
    /// unanswered before another may be sent.
    pub fn set_request_timeout_ms(&mut self, ms: u64) {
        self.request_timeout_ms = ms;
    }

    /// Numbers this incarnation's requests from `base`: a restarted broker
    /// numbers them apart from its last incarnation's, so a late answer to
    /// one of those never passes for an answer to its own (in Kafka the
    /// answer came over a connection that died with the broker).
    pub fn set_correlation_base(&mut self, base: u64) {
        self.next_correlation_id = base;
    }

    pub fn id(&self) -> ReplicaId {
        self.id
    }
    pub fn config(&self) -> &ReplicationConfig {
        &self.config
    }
    /// The log as the state machine knows it.
    pub fn log_state(&self) -> &LogState {
        &self.log
    }
    pub fn leader_epoch(&self) -> Option<LeaderEpoch> {
        self.leader_epoch
    }
    pub fn leader(&self) -> LeaderView {
        self.leader
    }
    /// Believes it leads: it takes writes (the model's `presumes_leadership`).
    pub fn is_leader(&self) -> bool {
        matches!(self.role, RoleState::Leader(_))
    }
    /// The ISR as this replica knows it (empty unless it leads).
    /// As leader: the controller's partition epoch of its ISR copy.
    pub fn isr_partition_epoch(&self) -> Option<u32> {
        match &self.role {
            RoleState::Leader(l) => Some(l.partition_epoch),
            _ => None,
        }
    }
    pub fn isr(&self) -> Vec<ReplicaId> {
        match &self.role {
            RoleState::Leader(l) => l.isr.iter().copied().collect(),
            _ => Vec::new(),
        }
    }
    /// The leader this replica fetches from, once truncation is done.
    pub fn fetching_from(&self) -> Option<ReplicaId> {
        match &self.role {
            RoleState::Follower(f) if f.phase == Phase::Fetching => Some(f.leader),
            _ => None,
        }
    }
    /// The correlation id of the fetch in flight, while fetching.
    pub fn fetch_in_flight(&self) -> Option<u64> {
        match &self.role {
            RoleState::Follower(f) if f.phase == Phase::Fetching => f.in_flight.map(|(c, _)| c),
            _ => None,
        }
    }
    pub fn is_truncating(&self) -> bool {
        matches!(&self.role, RoleState::Follower(f) if f.phase == Phase::Truncating)
    }
    /// Whether a storage operation is in flight.
    pub fn awaiting_storage(&self) -> bool {
        self.pending.is_some()
    }
    /// Producers still waiting for an answer: request ids.
    pub fn waiting_acks(&self) -> Vec<u64> {
        match &self.role {
            RoleState::Leader(l) => l.waiters.iter().map(|w| w.request_id).collect(),
            _ => Vec::new(),
        }
    }

    /// A read-only picture of the state.
    pub fn state(&self) -> PartitionState {
        let (role, isr, followers, waiting, start, pending) = match &self.role {
            RoleState::None => (Role::None, vec![], BTreeMap::new(), vec![], None, None),
            RoleState::Leader(l) => (
                Role::Leader,
                l.isr.iter().copied().collect(),
                l.followers.clone(),
                l.waiters.iter().map(|w| w.request_id).collect(),
                Some(l.epoch_start_offset),
                l.pending_isr,
            ),
            RoleState::Follower(f) => (
                Role::Follower {
                    leader: f.leader,
                    truncating: f.phase == Phase::Truncating,
                },
                vec![],
                BTreeMap::new(),
                vec![],
                None,
                None,
            ),
        };
        PartitionState {
            replica_id: self.id,
            leader_epoch: self.leader_epoch,
            leader: self.leader,
            role,
            isr,
            high_watermark: self.log.high_watermark,
            log_end_offset: self.log.log_end_offset,
            log_start_offset: self.log.log_start_offset,
            recovery_point: self.log.recovery_point,
            hw_checkpoint: self.log.hw_checkpoint,
            followers,
            waiting_acks: waiting,
            epoch_start_offset: start,
            pending_isr_change: pending,
        }
    }

    // --- The step -----------------------------------------------------------

    /// Takes one input at time `now` (milliseconds). An `Err` is a refusal
    /// (a stale LeaderAndIsr, a tick with nothing to do, an input while an
    /// operation is in flight): the replica is unchanged. Every input that
    /// is a message is taken, even when it only earns an error answer.
    pub fn step(&mut self, now: u64, input: Input) -> Result<Ready> {
        if let Input::Storage(result) = input {
            return self.complete(now, result);
        }
        if self.pending.is_some() {
            return Err(Error::not_enabled(format!(
                "replica {} has a storage operation in flight",
                self.id
            )));
        }
        match input {
            Input::LeaderAndIsr(req) => self.on_leader_and_isr(req, now),
            Input::IsrUpdate {
                leader_epoch,
                partition_epoch,
                isr,
            } => {
                self.on_isr_update(leader_epoch, partition_epoch, &isr);
                Ok(Ready::none())
            }
            Input::AlterPartitionResponse(resp) => {
                self.on_alter_partition_response(&resp);
                Ok(Ready::none())
            }
            Input::Produce(req) => Ok(self.on_produce(req)),
            Input::Fetch(req) => Ok(self.on_fetch(req, now)),
            Input::FetchResponse(resp) => Ok(self.on_fetch_response(resp)),
            Input::OffsetsForLeaderEpoch(req) => {
                Ok(Ready::Send(vec![Output::OffsetsForLeaderEpochResponse {
                    to: req.replica_id,
                    response: self.answer_offsets_for_leader_epoch(&req),
                }]))
            }
            Input::OffsetsForLeaderEpochResponse(resp) => {
                Ok(self.on_offsets_for_leader_epoch_response(&resp))
            }
            Input::Following { follower, leader } => {
                self.on_following(follower, leader);
                Ok(Ready::none())
            }
            Input::PeerCrashed(peer) => {
                self.on_peer_crashed(peer);
                Ok(Ready::none())
            }
            Input::Tick(t) => self.on_tick(t, now),
            Input::Storage(_) => unreachable!("handled above"),
        }
    }

    fn on_tick(&mut self, tick: Tick, now: u64) -> Result<Ready> {
        match tick {
            Tick::SendRequest => self.send_request(now),
            Tick::AdvanceHw => self.advance_hw(now),
            Tick::ShrinkIsr(f) => self.shrink_isr(f, now),
            Tick::ExpandIsr(f) => self.expand_isr(f),
            Tick::Flush => Ok(if self.log.recovery_point < self.log.log_end_offset {
                self.persist(StorageOp::Flush, Pending::Flush)
            } else {
                Ready::none()
            }),
            Tick::CheckpointHw => Ok(match self.config.hw_checkpoint {
                HwCheckpointPolicy::IntervalMs(every)
                    if now.saturating_sub(self.last_hw_checkpoint_ms) >= every =>
                {
                    self.persist(StorageOp::WriteCheckpoints, Pending::Checkpoint { now })
                }
                _ => Ready::none(),
            }),
        }
    }

    /// Asks for `op`; `then` is what its completion finishes.
    pub(super) fn persist(&mut self, op: StorageOp, then: Pending) -> Ready {
        self.pending = Some(then);
        Ready::Persist(op)
    }

    /// Whether an HW change is checkpointed with it.
    pub(super) fn checkpoint_every_hw(&self) -> bool {
        self.config.hw_checkpoint == HwCheckpointPolicy::EveryChange
    }

    /// The operation in flight completed (or failed): adopt the log's state
    /// and finish (or drop) what it was for.
    fn complete(
        &mut self,
        now: u64,
        result: std::result::Result<StorageDone, StorageFailed>,
    ) -> Result<Ready> {
        let Some(pending) = self.pending.take() else {
            return Err(Error::not_enabled(format!(
                "replica {} has no storage operation in flight",
                self.id
            )));
        };
        let done = match result {
            Ok(done) => done,
            Err(failed) => {
                self.log = failed.state;
                return Ok(self.failed(pending));
            }
        };
        self.log = done.state;
        Ok(match pending {
            Pending::Follow(req) => Ready::Send(self.take_leader_and_isr(&req, now)),
            Pending::ExchangeTruncation { done } => {
                self.exchange_step_done(done);
                Ready::none()
            }
            Pending::OutOfRangeTruncation
            | Pending::DivergingTruncation
            | Pending::FetchApplied => {
                self.fetch_answered();
                Ready::none()
            }
            Pending::LeaderAppend {
                request_id,
                acks,
                base_offset,
                epoch,
            } => self.appended(request_id, acks, base_offset, epoch),
            Pending::AdvanceHw => self.hw_advanced(),
            Pending::ServeFetch(req) => Ready::Send(vec![self.serve_fetch(req, now, done.records)]),
            Pending::Flush => Ready::none(),
            Pending::Checkpoint { now } => {
                self.last_hw_checkpoint_ms = now;
                Ready::none()
            }
        })
    }

    /// What a failed operation still owes: an answer to the request that
    /// asked for it. Nothing else changes.
    fn failed(&mut self, pending: Pending) -> Ready {
        match pending {
            Pending::LeaderAppend { request_id, .. } => {
                Ready::Send(vec![Output::Produce(ProduceResponse {
                    request_id,
                    result: Err(ApiError::KafkaStorageError),
                })])
            }
            Pending::ServeFetch(req) => {
                let mut response = self.fetch_response(&req);
                response.error = Some(ApiError::KafkaStorageError);
                Ready::Send(vec![Output::FetchResponse {
                    to: req.replica_id,
                    response,
                }])
            }
            _ => Ready::none(),
        }
    }

    // --- LeaderAndIsr -----------------------------------------------------

    /// Whether a LeaderAndIsr of `epoch` would be taken: a newer epoch, or
    /// (after a restart, before being told anything) the registration epoch.
    pub fn accepts_leader_and_isr(&self, epoch: LeaderEpoch) -> bool {
        match self.leader_epoch {
            None => true,
            Some(current) => {
                epoch > current || (self.leader == LeaderView::Unknown && epoch == current)
            }
        }
    }

    /// A LeaderAndIsr arrives (the model's BecomeLeader / BecomeFollower).
    /// Named leader: take over with the request's ISR. Otherwise follow: in
    /// `hw` mode truncate to the HW first, and take the epoch once that is
    /// done; in the other modes start asking the leader where to truncate
    /// ([`Tick::SendRequest`]); with no leader, just wait.
    fn on_leader_and_isr(&mut self, req: LeaderAndIsr, now: u64) -> Result<Ready> {
        if !self.accepts_leader_and_isr(req.leader_epoch) {
            return Err(Error::StaleLeaderAndIsr {
                epoch: req.leader_epoch,
                current: self.leader_epoch,
            });
        }
        if !req.replicas.contains(&self.id) {
            return Err(Error::UnknownReplica(self.id));
        }
        if let Some(l) = req.leader {
            if !req.replicas.contains(&l) {
                return Err(Error::UnknownReplica(l));
            }
            let hw = self.log.high_watermark;
            if l != self.id
                && self.config.truncation.truncates_to_hw()
                && hw < self.log.log_end_offset
            {
                let op = StorageOp::Truncate {
                    offset: hw,
                    checkpoint: self.checkpoint_every_hw(),
                };
                return Ok(self.persist(op, Pending::Follow(req)));
            }
        }
        Ok(Ready::Send(self.take_leader_and_isr(&req, now)))
    }

    /// Takes a LeaderAndIsr whose storage work (if any) is done.
    fn take_leader_and_isr(&mut self, req: &LeaderAndIsr, now: u64) -> Vec<Output> {
        // Whatever belonged to an earlier leadership goes (the model's
        // clear_leader_state): waiting producers are told to retry.
        let mut out = self.drop_leader_state();
        self.replicas = req.replicas.clone();
        self.leader_epoch = Some(req.leader_epoch);
        match req.leader {
            Some(l) if l == self.id => {
                let followers = self
                    .replicas
                    .iter()
                    .filter(|&&r| r != self.id)
                    .map(|&r| (r, FollowerView::new(now)))
                    .collect();
                self.role = RoleState::Leader(LeaderState {
                    isr: req.isr.iter().copied().collect(),
                    partition_epoch: req.partition_epoch,
                    epoch_start_offset: self.log.log_end_offset,
                    followers,
                    waiters: Vec::new(),
                    pending_isr: None,
                });
                self.leader = LeaderView::Replica(self.id);
                out.push(Output::Following { leader: None });
            }
            Some(l) => {
                self.leader = LeaderView::Replica(l);
                let phase = if self.config.truncation.asks_leader() {
                    Phase::Truncating
                } else {
                    Phase::Fetching
                };
                self.role = RoleState::Follower(FollowerState {
                    leader: l,
                    phase,
                    in_flight: None,
                });
                // An empty log has nothing to ask about.
                self.maybe_finish_truncation();
                out.push(Output::Following {
                    leader: Some((l, req.leader_epoch)),
                });
            }
            None => {
                self.leader = LeaderView::NoLeader;
                self.role = RoleState::None;
                out.push(Output::Following { leader: None });
            }
        }
        out
    }

    fn drop_leader_state(&mut self) -> Vec<Output> {
        let mut out = Vec::new();
        if let RoleState::Leader(l) = &mut self.role {
            for w in l.waiters.drain(..) {
                out.push(Output::Produce(ProduceResponse {
                    request_id: w.request_id,
                    result: Err(ApiError::NotLeaderOrFollower),
                }));
            }
        }
        self.role = RoleState::None;
        out
    }

    pub(super) fn next_correlation_id(&mut self) -> u64 {
        self.next_correlation_id += 1;
        self.next_correlation_id
    }

    /// Whether a request may be sent now: none in flight, or the one in
    /// flight has timed out (its destination may have gone away).
    pub(super) fn may_send(in_flight: Option<(u64, u64)>, now: u64, timeout: u64) -> bool {
        in_flight.is_none_or(|(_, sent)| now.saturating_sub(sent) >= timeout)
    }

    /// KIP-320: a request in another epoch than the leader's is refused.
    pub(super) fn fence(&self, requester_epoch: LeaderEpoch) -> Option<ApiError> {
        if !self.config.fencing {
            return None;
        }
        let mine = self.leader_epoch.unwrap_or(-1);
        match requester_epoch.cmp(&mine) {
            std::cmp::Ordering::Less => Some(ApiError::FencedLeaderEpoch),
            std::cmp::Ordering::Greater => Some(ApiError::UnknownLeaderEpoch),
            std::cmp::Ordering::Equal => None,
        }
    }
}
