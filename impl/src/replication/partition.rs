//! One replica's partition state machine (Kafka's `Partition` with the
//! follower side of `ReplicaFetcherThread`), without I/O of its own: it acts
//! on a [`ReplicaLog`] and answers or emits messages. Each public method is
//! one protocol event; the model action it mirrors is named on it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::error::{Error, Result};
use super::log::ReplicaLog;
use super::messages::{
    AlterPartitionRequest, AlterPartitionResponse, ApiError, FetchRequest, FetchResponse,
    IsrChange, LeaderAndIsr, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse, Output,
    ProduceRequest, ProduceResponse,
};
use super::truncation::{follower_truncation, leader_end_offset, TruncationStep};
use super::types::{Acks, IsrJoinRule, LeaderEpoch, LeaderView, ReplicaId, ReplicationConfig};
use crate::storage::EpochEndOffset;

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
    fn new(now: u64) -> FollowerView {
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
struct Waiter {
    request_id: u64,
    base_offset: u64,
    last_offset: u64,
}

#[derive(Debug, Clone)]
struct LeaderState {
    isr: BTreeSet<ReplicaId>,
    /// The LEO when this leadership began: its epoch starts here.
    epoch_start_offset: u64,
    followers: BTreeMap<ReplicaId, FollowerView>,
    waiters: Vec<Waiter>,
    /// An AlterPartition in flight and when it was sent.
    pending_isr: Option<(IsrChange, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for OffsetsForLeaderEpoch answers before fetching.
    Truncating,
    Fetching,
}

#[derive(Debug, Clone)]
struct FollowerState {
    leader: ReplicaId,
    phase: Phase,
    /// The correlation id and send time of the request in flight.
    in_flight: Option<(u64, u64)>,
}

#[derive(Debug, Clone)]
enum RoleState {
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
    /// As leader: each follower as it sees it.
    pub followers: BTreeMap<ReplicaId, FollowerView>,
    /// As leader: request ids of the acks=all producers waiting.
    pub waiting_acks: Vec<u64>,
    /// As leader: where its epoch starts.
    pub epoch_start_offset: Option<u64>,
    pub pending_isr_change: Option<IsrChange>,
}

/// What a leader's append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appended {
    pub base_offset: u64,
    pub last_offset: u64,
    pub leader_epoch: LeaderEpoch,
}

/// One replica of the partition.
#[derive(Debug)]
pub struct Partition<L> {
    id: ReplicaId,
    config: ReplicationConfig,
    log: L,
    replicas: Vec<ReplicaId>,
    leader_epoch: Option<LeaderEpoch>,
    leader: LeaderView,
    role: RoleState,
    outputs: Vec<Output>,
    next_correlation_id: u64,
    /// How long a request may stay unanswered before it is sent again.
    request_timeout_ms: u64,
}

impl<L: ReplicaLog> Partition<L> {
    /// A replica starting (or restarting) on `log`. `registered_epoch` is
    /// the controller's leader epoch when the broker registered (the model's
    /// restart): the replica then takes a LeaderAndIsr of that epoch or a
    /// newer one. A fresh replica passes `None`.
    pub fn new(
        id: ReplicaId,
        replicas: Vec<ReplicaId>,
        config: ReplicationConfig,
        log: L,
        registered_epoch: Option<LeaderEpoch>,
    ) -> Result<Partition<L>> {
        if config.min_insync_replicas == 0 {
            return Err(Error::InvalidConfig(
                "min.insync.replicas must be at least 1".into(),
            ));
        }
        if !replicas.contains(&id) {
            return Err(Error::UnknownReplica(id));
        }
        if log.high_watermark() > log.log_end_offset() {
            return Err(Error::InvalidConfig(
                "the log's high watermark is above its end".into(),
            ));
        }
        Ok(Partition {
            id,
            config,
            log,
            replicas,
            leader_epoch: registered_epoch,
            leader: LeaderView::Unknown,
            role: RoleState::None,
            outputs: Vec::new(),
            next_correlation_id: 0,
            request_timeout_ms: 30_000,
        })
    }

    /// Sets how long a fetch or OffsetsForLeaderEpoch may go unanswered
    /// before [`fetch_request`](Self::fetch_request) sends another.
    pub fn set_request_timeout_ms(&mut self, ms: u64) {
        self.request_timeout_ms = ms;
    }

    pub fn id(&self) -> ReplicaId {
        self.id
    }
    pub fn config(&self) -> &ReplicationConfig {
        &self.config
    }
    pub fn log(&self) -> &L {
        &self.log
    }
    /// The log, for the driver's own storage work (flush policy, checkpoints).
    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }
    /// Gives the log back (on shutdown or crash); producers still waiting
    /// get no answer, as when a broker goes away.
    pub fn into_log(self) -> L {
        self.log
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
    pub fn is_truncating(&self) -> bool {
        matches!(&self.role, RoleState::Follower(f) if f.phase == Phase::Truncating)
    }

    /// Takes what the replica asked to be sent since the last call.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.outputs)
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
                l.pending_isr.map(|(c, _)| c),
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
            high_watermark: self.log.high_watermark(),
            log_end_offset: self.log.log_end_offset(),
            log_start_offset: self.log.log_start_offset(),
            recovery_point: self.log.recovery_point(),
            followers,
            waiting_acks: waiting,
            epoch_start_offset: start,
            pending_isr_change: pending,
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
    /// `hw` mode truncate to the HW at once; in the other modes start asking
    /// the leader where to truncate ([`offsets_for_leader_epoch_request`]);
    /// with no leader, just wait.
    ///
    /// [`offsets_for_leader_epoch_request`]: Self::offsets_for_leader_epoch_request
    pub fn handle_leader_and_isr(&mut self, req: &LeaderAndIsr, now: u64) -> Result<()> {
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
        }
        // Whatever belonged to an earlier leadership goes (the model's
        // clear_leader_state): waiting producers are told to retry.
        self.drop_leader_state();
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
                    epoch_start_offset: self.log.log_end_offset(),
                    followers,
                    waiters: Vec::new(),
                    pending_isr: None,
                });
                self.leader = LeaderView::Replica(self.id);
                self.outputs.push(Output::Following { leader: None });
            }
            Some(l) => {
                self.leader = LeaderView::Replica(l);
                let phase = if self.config.truncation.asks_leader() {
                    Phase::Truncating
                } else {
                    let hw = self.log.high_watermark();
                    self.log.truncate_to(hw)?;
                    Phase::Fetching
                };
                self.role = RoleState::Follower(FollowerState {
                    leader: l,
                    phase,
                    in_flight: None,
                });
                // An empty log has nothing to ask about.
                self.maybe_finish_truncation();
                self.outputs.push(Output::Following {
                    leader: Some((l, req.leader_epoch)),
                });
            }
            None => {
                self.leader = LeaderView::NoLeader;
                self.role = RoleState::None;
                self.outputs.push(Output::Following { leader: None });
            }
        }
        Ok(())
    }

    fn drop_leader_state(&mut self) {
        if let RoleState::Leader(l) = &mut self.role {
            for w in l.waiters.drain(..) {
                self.outputs.push(Output::Produce(ProduceResponse {
                    request_id: w.request_id,
                    result: Err(ApiError::NotLeaderOrFollower),
                }));
            }
        }
        self.role = RoleState::None;
    }

    fn maybe_finish_truncation(&mut self) {
        if self.log.latest_epoch().is_none() {
            if let RoleState::Follower(f) = &mut self.role {
                if f.phase == Phase::Truncating {
                    f.phase = Phase::Fetching;
                    f.in_flight = None;
                }
            }
        }
    }

    fn next_correlation_id(&mut self) -> u64 {
        self.next_correlation_id += 1;
        self.next_correlation_id
    }

    /// Whether a request may be sent now: none in flight, or the one in
    /// flight has timed out (its destination may have gone away).
    fn may_send(in_flight: Option<(u64, u64)>, now: u64, timeout: u64) -> bool {
        in_flight.is_none_or(|(_, sent)| now.saturating_sub(sent) >= timeout)
    }

    // --- Truncation (follower) and OffsetsForLeaderEpoch (leader) ----------

    /// A follower in `phase` with no request in flight (or one timed out)
    /// starts one: its leader and the new request's correlation id.
    fn start_follower_request(&mut self, phase: Phase, now: u64) -> Option<(ReplicaId, u64)> {
        let timeout = self.request_timeout_ms;
        let RoleState::Follower(f) = &self.role else {
            return None;
        };
        if f.phase != phase || !Self::may_send(f.in_flight, now, timeout) {
            return None;
        }
        let leader = f.leader;
        let correlation_id = self.next_correlation_id();
        if let RoleState::Follower(f) = &mut self.role {
            f.in_flight = Some((correlation_id, now));
        }
        Some((leader, correlation_id))
    }

    /// A truncating follower's next OffsetsForLeaderEpoch: for the latest
    /// epoch in its log. `None` when not truncating or one is in flight.
    pub fn offsets_for_leader_epoch_request(
        &mut self,
        now: u64,
    ) -> Option<(ReplicaId, OffsetsForLeaderEpochRequest)> {
        self.maybe_finish_truncation();
        let latest = self.log.latest_epoch()?;
        let epoch = self.leader_epoch?;
        let (leader, correlation_id) = self.start_follower_request(Phase::Truncating, now)?;
        Some((
            leader,
            OffsetsForLeaderEpochRequest {
                correlation_id,
                replica_id: self.id,
                current_leader_epoch: epoch,
                leader_epoch: latest,
            },
        ))
    }

    /// The leader answers where an epoch ends in its log (see
    /// [`leader_end_offset`]). Under `fenced`, only requests in its own
    /// epoch are answered (KIP-320).
    pub fn handle_offsets_for_leader_epoch_request(
        &self,
        req: &OffsetsForLeaderEpochRequest,
    ) -> OffsetsForLeaderEpochResponse {
        let mut resp = OffsetsForLeaderEpochResponse {
            correlation_id: req.correlation_id,
            leader_id: self.id,
            error: None,
            leader_epoch: None,
            end_offset: None,
        };
        let RoleState::Leader(l) = &self.role else {
            resp.error = Some(ApiError::NotLeaderOrFollower);
            return resp;
        };
        let my_epoch = self.leader_epoch.unwrap_or(-1);
        if let Some(e) = self.fence(req.current_leader_epoch) {
            resp.error = Some(e);
            return resp;
        }
        if let Some(a) = leader_end_offset(
            self.config.truncation,
            &self.log.epoch_entries(),
            self.log.log_end_offset(),
            my_epoch,
            l.epoch_start_offset,
            req.leader_epoch,
        ) {
            resp.leader_epoch = Some(a.epoch);
            resp.end_offset = Some(a.end_offset);
        }
        resp
    }

    /// KIP-320: a request in another epoch than the leader's is refused.
    fn fence(&self, requester_epoch: LeaderEpoch) -> Option<ApiError> {
        if !self.config.truncation.is_fenced() {
            return None;
        }
        let mine = self.leader_epoch.unwrap_or(-1);
        match requester_epoch.cmp(&mine) {
            std::cmp::Ordering::Less => Some(ApiError::FencedLeaderEpoch),
            std::cmp::Ordering::Greater => Some(ApiError::UnknownLeaderEpoch),
            std::cmp::Ordering::Equal => None,
        }
    }

    /// The follower takes the leader's answer: truncates, and either asks
    /// again (KIP-279) or starts fetching. A late or unexpected answer is
    /// ignored; an error leaves it truncating, to ask again later.
    pub fn handle_offsets_for_leader_epoch_response(
        &mut self,
        resp: &OffsetsForLeaderEpochResponse,
    ) -> Result<()> {
        let RoleState::Follower(f) = &mut self.role else {
            return Ok(());
        };
        if f.phase != Phase::Truncating
            || f.leader != resp.leader_id
            || f.in_flight.map(|(c, _)| c) != Some(resp.correlation_id)
        {
            return Ok(());
        }
        f.in_flight = None;
        if resp.error.is_some() {
            return Ok(());
        }
        let answer = match (resp.leader_epoch, resp.end_offset) {
            (Some(epoch), Some(end_offset)) => Some(EpochEndOffset { epoch, end_offset }),
            _ => None,
        };
        let step = follower_truncation(
            self.config.truncation,
            &self.log.epoch_entries(),
            self.log.log_end_offset(),
            self.log.high_watermark(),
            answer,
        );
        let leo = self.log.log_end_offset();
        let (offset, done) = match step {
            TruncationStep::Done(o) => (o, true),
            // Each round cuts the follower's latest epoch away; one that
            // would not (a malformed answer) ends the exchange rather than
            // asking the same question forever.
            TruncationStep::Continue(o) => (o, o >= leo),
        };
        self.log.truncate_to(offset)?;
        if done {
            if let RoleState::Follower(f) = &mut self.role {
                f.phase = Phase::Fetching;
            }
        }
        self.maybe_finish_truncation();
        Ok(())
    }

    // --- Fetch --------------------------------------------------------------

    /// A fetching follower's next fetch, from its LEO. `None` when it is not
    /// fetching or a fetch is in flight.
    pub fn fetch_request(&mut self, now: u64) -> Option<(ReplicaId, FetchRequest)> {
        let epoch = self.leader_epoch?;
        let (leader, correlation_id) = self.start_follower_request(Phase::Fetching, now)?;
        Some((
            leader,
            FetchRequest {
                correlation_id,
                replica_id: self.id,
                fetch_offset: self.log.log_end_offset(),
                current_leader_epoch: epoch,
                max_bytes: self.config.replica_fetch_max_bytes,
            },
        ))
    }

    /// The leader answers a fetch (the leader's half of the model's
    /// FollowerFetch): it learns the follower's LEO from the fetch offset
    /// and sends what it has from there, with its HW. A fetch past its LEO
    /// gets OffsetOutOfRange and teaches it nothing.
    pub fn handle_fetch_request(&mut self, req: &FetchRequest, now: u64) -> FetchResponse {
        let mut resp = FetchResponse {
            correlation_id: req.correlation_id,
            leader_id: self.id,
            leader_epoch: self.leader_epoch,
            fetch_offset: req.fetch_offset,
            error: None,
            high_watermark: self.log.high_watermark(),
            log_end_offset: self.log.log_end_offset(),
            records: Vec::new(),
        };
        if !self.is_leader()
            || req.replica_id == self.id
            || !self.replicas.contains(&req.replica_id)
        {
            resp.error = Some(ApiError::NotLeaderOrFollower);
            return resp;
        }
        if let Some(e) = self.fence(req.current_leader_epoch) {
            resp.error = Some(e);
            return resp;
        }
        let leo = self.log.log_end_offset();
        if req.fetch_offset > leo || req.fetch_offset < self.log.log_start_offset() {
            resp.error = Some(ApiError::OffsetOutOfRange);
            return resp;
        }
        if req.fetch_offset < leo {
            match self.log.read(req.fetch_offset, req.max_bytes) {
                Ok(records) => resp.records = records,
                Err(_) => {
                    resp.error = Some(ApiError::KafkaStorageError);
                    return resp;
                }
            }
        }
        if let RoleState::Leader(l) = &mut self.role {
            if let Some(v) = l.followers.get_mut(&req.replica_id) {
                // Kafka's `updateFetchState`.
                if req.fetch_offset >= leo {
                    v.last_caught_up_ms = v.last_caught_up_ms.max(now);
                } else if req.fetch_offset >= v.last_fetch_leader_leo {
                    v.last_caught_up_ms = v.last_caught_up_ms.max(v.last_fetch_ms);
                }
                v.last_fetch_leader_leo = leo;
                v.last_fetch_ms = now;
                v.log_end_offset = Some(req.fetch_offset);
                v.fetching_epoch = Some(req.current_leader_epoch);
                v.stale_fetch = false;
            }
        }
        resp
    }

    /// The follower takes a fetch response (the follower's half of the
    /// model's FollowerFetch): appends the records, then sets its HW to
    /// min(leader's HW, own LEO). OffsetOutOfRange with a leader behind it
    /// cuts its log back to the leader's LEO. Late responses are ignored.
    pub fn handle_fetch_response(&mut self, resp: &FetchResponse) -> Result<()> {
        let RoleState::Follower(f) = &mut self.role else {
            return Ok(());
        };
        if f.phase != Phase::Fetching
            || f.leader != resp.leader_id
            || f.in_flight.map(|(c, _)| c) != Some(resp.correlation_id)
        {
            return Ok(());
        }
        f.in_flight = None;
        if resp.fetch_offset != self.log.log_end_offset() {
            return Ok(());
        }
        match resp.error {
            None => {}
            Some(ApiError::OffsetOutOfRange) => {
                if self.log.log_end_offset() > resp.log_end_offset {
                    self.log.truncate_to(resp.log_end_offset)?;
                }
                return Ok(());
            }
            Some(_) => return Ok(()),
        }
        if !resp.records.is_empty() {
            self.log.append_as_follower(&resp.records)?;
        }
        let hw = resp.high_watermark.min(self.log.log_end_offset());
        self.log.set_high_watermark(hw)?;
        Ok(())
    }

    /// A follower tells whom it now fetches from ([`Output::Following`]).
    pub fn handle_following(
        &mut self,
        follower: ReplicaId,
        leader: Option<(ReplicaId, LeaderEpoch)>,
    ) {
        let me = self.id;
        if let RoleState::Leader(l) = &mut self.role {
            if let Some(v) = l.followers.get_mut(&follower) {
                v.fetching_epoch = match leader {
                    Some((to, epoch)) if to == me => Some(epoch),
                    _ => None,
                };
            }
        }
    }

    /// A peer broker crashed (its connections dropped; KIP-903's broker
    /// epoch changes). A leader stops counting it as fetching, and a fetch
    /// it had made no longer lets it into the ISR.
    pub fn handle_peer_crashed(&mut self, peer: ReplicaId) {
        if let RoleState::Leader(l) = &mut self.role {
            if let Some(v) = l.followers.get_mut(&peer) {
                if v.log_end_offset.is_some() {
                    v.stale_fetch = true;
                }
                v.fetching_epoch = None;
            }
        }
    }

    // --- Produce --------------------------------------------------------------

    /// A producer writes a batch (the model's Produce). The leader appends it
    /// with its epoch. acks=all is refused with NotEnoughReplicas when
    /// |ISR| < min.insync.replicas, and otherwise waits for the HW (see
    /// [`leader_advance_hw`](Self::leader_advance_hw)).
    pub fn produce(&mut self, req: ProduceRequest) -> std::result::Result<Appended, ApiError> {
        let epoch = self.leader_epoch.ok_or(ApiError::NotLeaderOrFollower)?;
        let min_isr = self.config.min_insync_replicas;
        let RoleState::Leader(l) = &self.role else {
            return Err(ApiError::NotLeaderOrFollower);
        };
        if req.records.is_empty() {
            return Err(ApiError::InvalidRequest);
        }
        if req.acks == Acks::All && l.isr.len() < min_isr {
            return Err(ApiError::NotEnoughReplicas);
        }
        let base_offset = self
            .log
            .append_as_leader(&req.records, epoch)
            .map_err(|_| ApiError::KafkaStorageError)?;
        let last_offset = self.log.log_end_offset() - 1;
        if req.acks == Acks::All {
            if let RoleState::Leader(l) = &mut self.role {
                l.waiters.push(Waiter {
                    request_id: req.request_id,
                    base_offset,
                    last_offset,
                });
            }
        }
        Ok(Appended {
            base_offset,
            last_offset,
            leader_epoch: epoch,
        })
    }

    // --- High watermark -----------------------------------------------------------

    /// The HW the leader may move to: the lowest LEO over its ISR as it
    /// knows them (while an ISR change is in flight, over both ISRs, as
    /// Kafka's maximal ISR); `None` when that is not higher than its HW,
    /// when an ISR member has not fetched yet, or (ELR) while
    /// |ISR| < min.insync.replicas.
    pub fn advanced_hw(&self) -> Option<u64> {
        let RoleState::Leader(l) = &self.role else {
            return None;
        };
        if self.config.elr && l.isr.len() < self.config.min_insync_replicas {
            return None;
        }
        let mut members: BTreeSet<ReplicaId> = l.isr.clone();
        if let Some((IsrChange::Add(r), _)) = l.pending_isr {
            members.insert(r);
        }
        let mut hw = self.log.log_end_offset();
        for f in members.iter().filter(|&&f| f != self.id) {
            hw = hw.min(l.followers.get(f)?.log_end_offset?);
        }
        (hw > self.log.high_watermark()).then_some(hw)
    }

    /// The leader advances its HW (the model's LeaderAdvanceHw) and answers
    /// the acks=all producers it passed: success while the ISR has
    /// min.insync.replicas, else NotEnoughReplicasAfterAppend. Returns the
    /// new HW, or `None` when it cannot move.
    pub fn leader_advance_hw(&mut self) -> Result<Option<u64>> {
        let Some(hw) = self.advanced_hw() else {
            return Ok(None);
        };
        self.log.set_high_watermark(hw)?;
        let epoch = self.leader_epoch.unwrap_or(-1);
        let min_isr = self.config.min_insync_replicas;
        if let RoleState::Leader(l) = &mut self.role {
            let isr_ok = l.isr.len() >= min_isr;
            let (done, waiting): (Vec<Waiter>, Vec<Waiter>) =
                l.waiters.drain(..).partition(|w| w.last_offset < hw);
            l.waiters = waiting;
            for w in done {
                self.outputs.push(Output::Produce(ProduceResponse {
                    request_id: w.request_id,
                    result: if isr_ok {
                        Ok((w.base_offset, epoch))
                    } else {
                        Err(ApiError::NotEnoughReplicasAfterAppend)
                    },
                }));
            }
        }
        Ok(Some(hw))
    }

    // --- ISR changes ------------------------------------------------------------------

    /// Whether `follower` is out of sync at `now`: for longer than
    /// `replica.lag.time.max.ms` it has not caught up with the leader's LEO,
    /// or has not been fetching from this leader in its epoch (Kafka's
    /// documented rule: "hasn't sent any fetch requests or hasn't consumed
    /// up to the leader's log end offset for at least this time").
    pub fn is_out_of_sync(&self, follower: ReplicaId, now: u64) -> bool {
        let RoleState::Leader(l) = &self.role else {
            return false;
        };
        let Some(v) = l.followers.get(&follower) else {
            return false;
        };
        let caught_up = v.log_end_offset == Some(self.log.log_end_offset());
        let present = v.fetching_epoch.is_some() && v.fetching_epoch == self.leader_epoch;
        let lag_passed =
            now.saturating_sub(v.last_caught_up_ms) > self.config.replica_lag_time_max_ms;
        lag_passed && !(caught_up && present)
    }

    /// Whether `follower` may join the ISR: caught up to the HW, its last
    /// fetch from its current incarnation (KIP-903), and, when fenced, its
    /// LEO at or past the start of this leader's epoch (Kafka's
    /// `Partition.isFollowerInSync`: nothing an earlier leader committed can
    /// be missing from the new member).
    pub fn is_caught_up_for_isr(&self, follower: ReplicaId) -> bool {
        let RoleState::Leader(l) = &self.role else {
            return false;
        };
        let Some(v) = l.followers.get(&follower) else {
            return false;
        };
        let Some(leo) = v.log_end_offset else {
            return false;
        };
        let hw = self.log.high_watermark();
        let epoch_ok = !self.config.truncation.is_fenced()
            || match self.config.isr_join {
                IsrJoinRule::FollowerReachedEpochStart => leo >= l.epoch_start_offset,
                IsrJoinRule::LeaderHwReachedEpochStart => hw >= l.epoch_start_offset,
            };
        leo >= hw && !v.stale_fetch && epoch_ok
    }

    /// The leader asks to drop an out-of-sync follower (the leader's half of
    /// the model's LeaderShrinkIsr). Returns the AlterPartition to send.
    pub fn leader_shrink_isr(
        &mut self,
        follower: ReplicaId,
        now: u64,
    ) -> Result<AlterPartitionRequest> {
        self.check_isr_change(follower, now, true)?;
        if !self.is_out_of_sync(follower, now) {
            return Err(Error::not_enabled(format!(
                "follower {follower} is in sync with leader {}",
                self.id
            )));
        }
        Ok(self.start_isr_change(IsrChange::Remove(follower), now))
    }

    /// The leader asks to take a caught-up follower back (the leader's half
    /// of the model's LeaderExpandIsr). Returns the AlterPartition to send;
    /// the controller refuses a follower already in its ISR.
    pub fn leader_expand_isr(
        &mut self,
        follower: ReplicaId,
        now: u64,
    ) -> Result<AlterPartitionRequest> {
        self.check_isr_change(follower, now, false)?;
        if !self.is_caught_up_for_isr(follower) {
            return Err(Error::not_enabled(format!(
                "follower {follower} has not caught up with leader {} for the ISR",
                self.id
            )));
        }
        Ok(self.start_isr_change(IsrChange::Add(follower), now))
    }

    fn check_isr_change(&self, follower: ReplicaId, now: u64, remove: bool) -> Result<()> {
        let RoleState::Leader(l) = &self.role else {
            return Err(Error::not_enabled(format!(
                "replica {} does not lead",
                self.id
            )));
        };
        if follower == self.id || !self.replicas.contains(&follower) {
            return Err(Error::UnknownReplica(follower));
        }
        // A removal is checked against the ISR the leader knows; an addition
        // is the controller's to check (as the model does): the leader's copy
        // misses removals the controller made on its own.
        if remove && !l.isr.contains(&follower) {
            return Err(Error::not_enabled(format!(
                "follower {follower} is not in the ISR"
            )));
        }
        if let Some((_, sent)) = l.pending_isr {
            if now.saturating_sub(sent) < self.request_timeout_ms {
                return Err(Error::not_enabled("an ISR change is in flight"));
            }
        }
        Ok(())
    }

    fn start_isr_change(&mut self, change: IsrChange, now: u64) -> AlterPartitionRequest {
        if let RoleState::Leader(l) = &mut self.role {
            l.pending_isr = Some((change, now));
        }
        AlterPartitionRequest {
            leader: self.id,
            leader_epoch: self.leader_epoch.unwrap_or(-1),
            change,
        }
    }

    /// The controller's answer to an ISR change: on success the leader takes
    /// the ISR it returns. Returns whether the ISR changed.
    pub fn handle_alter_partition_response(&mut self, resp: &AlterPartitionResponse) -> bool {
        let epoch = self.leader_epoch;
        let RoleState::Leader(l) = &mut self.role else {
            return false;
        };
        if epoch != Some(resp.leader_epoch) || l.pending_isr.map(|(c, _)| c) != Some(resp.change) {
            return false;
        }
        l.pending_isr = None;
        match &resp.result {
            Ok(isr) => {
                l.isr = isr.iter().copied().collect();
                true
            }
            Err(_) => false,
        }
    }

    /// The controller changed the ISR without a new leader epoch (it
    /// removed a failed broker). Kafka's leader learns this from the
    /// metadata (a new partition epoch); the model has no such event, and
    /// its leader keeps the ISR it had until the next epoch (see the step
    /// driver, which never calls this). Applied only by the leader of
    /// `leader_epoch` with no ISR change of its own in flight. Returns
    /// whether the ISR changed.
    pub fn handle_isr_update(&mut self, leader_epoch: LeaderEpoch, isr: &[ReplicaId]) -> bool {
        if self.leader_epoch != Some(leader_epoch) {
            return false;
        }
        let RoleState::Leader(l) = &mut self.role else {
            return false;
        };
        if l.pending_isr.is_some() || !isr.contains(&self.id) {
            return false;
        }
        let isr: BTreeSet<ReplicaId> = isr.iter().copied().collect();
        let changed = isr != l.isr;
        l.isr = isr;
        changed
    }

    // --- Durability -------------------------------------------------------------------

    /// Flushes the log: the recovery point moves to the LEO (the model's Flush).
    pub fn flush(&mut self) -> Result<()> {
        self.log.flush()
    }
}
