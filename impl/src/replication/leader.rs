//! The leader's side of [`Partition`]: produce, serving fetches and
//! OffsetsForLeaderEpoch, the HW and its waiting producers, and ISR changes.

use std::collections::BTreeSet;

use super::error::{Error, Result};
use super::log::StorageOp;
use super::messages::{
    AlterPartitionRequest, AlterPartitionResponse, ApiError, DivergingEpoch, FetchRequest,
    FetchResponse, IsrChange, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse, Output,
    ProduceRequest, ProduceResponse,
};
use super::partition::{FollowerView, Partition, Pending, Ready, RoleState, Waiter};
use super::truncation::leader_end_offset;
use super::types::{Acks, IsrJoinRule, LeaderEpoch, ReplicaId, TruncationMode};

impl Partition {
    // --- Produce --------------------------------------------------------------

    /// A producer writes a batch (the model's Produce;
    /// `Partition.appendRecordsToLeader`). The leader appends it with its
    /// epoch. acks=all is refused with NotEnoughReplicas when
    /// |ISR| < min.insync.replicas, and otherwise waits for the HW.
    pub(super) fn on_produce(&mut self, req: ProduceRequest) -> Ready {
        let refuse = |e| {
            Ready::Send(vec![Output::Produce(ProduceResponse {
                request_id: req.request_id,
                result: Err(e),
            })])
        };
        let (Some(epoch), RoleState::Leader(l)) = (self.leader_epoch, &self.role) else {
            return refuse(ApiError::NotLeaderOrFollower);
        };
        if req.records.is_empty() {
            return refuse(ApiError::InvalidRequest);
        }
        if req.acks == Acks::All && l.isr.len() < self.config.min_insync_replicas {
            return refuse(ApiError::NotEnoughReplicas);
        }
        let then = Pending::LeaderAppend {
            request_id: req.request_id,
            acks: req.acks,
            base_offset: self.log.log_end_offset,
            epoch,
        };
        self.persist(
            StorageOp::AppendAsLeader {
                records: req.records,
                epoch,
            },
            then,
        )
    }

    /// The append is in the log: acks=1 is answered, acks=all waits.
    pub(super) fn appended(
        &mut self,
        request_id: u64,
        acks: Acks,
        base_offset: u64,
        epoch: LeaderEpoch,
    ) -> Ready {
        let last_offset = self.log.log_end_offset.saturating_sub(1);
        let mut out = vec![Output::Appended {
            request_id,
            base_offset,
            last_offset,
            leader_epoch: epoch,
        }];
        match acks {
            Acks::All => {
                if let RoleState::Leader(l) = &mut self.role {
                    l.waiters.push(Waiter {
                        request_id,
                        base_offset,
                        last_offset,
                    });
                }
            }
            Acks::Leader => out.push(Output::Produce(ProduceResponse {
                request_id,
                result: Ok((base_offset, epoch)),
            })),
            Acks::None => {}
        }
        Ready::Send(out)
    }

    // --- Fetch ----------------------------------------------------------------

    /// The answer to `req` as the leader stands, with no records yet.
    pub(super) fn fetch_response(&self, req: &FetchRequest) -> FetchResponse {
        FetchResponse {
            correlation_id: req.correlation_id,
            leader_id: self.id,
            leader_epoch: self.leader_epoch,
            fetch_offset: req.fetch_offset,
            error: None,
            high_watermark: self.log.high_watermark,
            log_end_offset: self.log.log_end_offset,
            diverging_epoch: None,
            records: Vec::new(),
        }
    }

    /// A follower's fetch (the leader's half of the model's FollowerFetch):
    /// the leader reads what it has from the fetch offset, then learns the
    /// follower's LEO from that offset and answers with its HW. A fetch past
    /// its LEO gets OffsetOutOfRange and teaches it nothing.
    pub(super) fn on_fetch(&mut self, req: FetchRequest, now: u64) -> Ready {
        let error = if !self.is_leader()
            || req.replica_id == self.id
            || !self.replicas.contains(&req.replica_id)
        {
            Some(ApiError::NotLeaderOrFollower)
        } else if let Some(e) = self.fence(req.current_leader_epoch) {
            Some(e)
        } else if let Some(check) = self.check_last_fetched_epoch(&req) {
            let mut response = self.fetch_response(&req);
            match check {
                Ok(d) => response.diverging_epoch = Some(d),
                Err(e) => response.error = Some(e),
            }
            return Ready::Send(vec![Output::FetchResponse {
                to: req.replica_id,
                response,
            }]);
        } else if req.fetch_offset > self.log.log_end_offset
            || req.fetch_offset < self.log.log_start_offset
        {
            Some(ApiError::OffsetOutOfRange)
        } else {
            None
        };
        if let Some(e) = error {
            let mut response = self.fetch_response(&req);
            response.error = Some(e);
            return Ready::Send(vec![Output::FetchResponse {
                to: req.replica_id,
                response,
            }]);
        }
        if req.fetch_offset < self.log.log_end_offset {
            let read = StorageOp::Read {
                from: req.fetch_offset,
                max_bytes: req.max_bytes,
            };
            return self.persist(read, Pending::ServeFetch(req));
        }
        Ready::Send(vec![self.serve_fetch(req, now, Vec::new())])
    }

    /// Truncation on fetch, the leader's side (Kafka's `Partition.readRecords`;
    /// the model's `fetch_divergence`): the fetch's last fetched epoch is
    /// looked up in the leader's cache, its own epoch counting from where it
    /// began leading (`Partition.makeLeader`). `Some(Ok)`: a diverging epoch
    /// (that epoch ended below the fetch offset, or the leader knows only an
    /// older one), answered without records and learnt nothing from
    /// (`Partition.fetchRecords`); `Some(Err)`: OffsetOutOfRange, no end is
    /// known; `None`: the fetch is served.
    fn check_last_fetched_epoch(
        &self,
        req: &FetchRequest,
    ) -> Option<std::result::Result<DivergingEpoch, ApiError>> {
        let last = req.last_fetched_epoch?;
        let RoleState::Leader(l) = &self.role else {
            return None;
        };
        if self.config.truncation != TruncationMode::OnFetch {
            return None;
        }
        let Some(a) = leader_end_offset(
            self.config.truncation,
            &self.log.epochs,
            self.log.log_end_offset,
            self.leader_epoch.unwrap_or(-1),
            l.epoch_start_offset,
            last,
        ) else {
            return Some(Err(ApiError::OffsetOutOfRange));
        };
        (a.epoch < last || a.end_offset < req.fetch_offset).then_some(Ok(DivergingEpoch {
            epoch: a.epoch,
            end_offset: a.end_offset,
        }))
    }

    /// Answers a fetch with what was read, and learns from it (Kafka's
    /// `updateFollowerFetchState`).
    pub(super) fn serve_fetch(&mut self, req: FetchRequest, now: u64, records: Vec<u8>) -> Output {
        let leo = self.log.log_end_offset;
        if let RoleState::Leader(l) = &mut self.role {
            if let Some(v) = l.followers.get_mut(&req.replica_id) {
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
        let mut response = self.fetch_response(&req);
        response.records = records;
        Output::FetchResponse {
            to: req.replica_id,
            response,
        }
    }

    /// The leader answers where an epoch ends in its log (see
    /// [`leader_end_offset`]). Under `fenced`, only requests in its own
    /// epoch are answered (KIP-320).
    pub(super) fn answer_offsets_for_leader_epoch(
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
        if let Some(e) = self.fence(req.current_leader_epoch) {
            resp.error = Some(e);
            return resp;
        }
        if let Some(a) = leader_end_offset(
            self.config.truncation,
            &self.log.epochs,
            self.log.log_end_offset,
            self.leader_epoch.unwrap_or(-1),
            l.epoch_start_offset,
            req.leader_epoch,
        ) {
            resp.leader_epoch = Some(a.epoch);
            resp.end_offset = Some(a.end_offset);
        }
        resp
    }

    /// A follower tells whom it now fetches from ([`Output::Following`]).
    pub(super) fn on_following(
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

    /// A peer crashed: a leader stops counting it as fetching, and a fetch
    /// it had made no longer lets it into the ISR (KIP-903).
    pub(super) fn on_peer_crashed(&mut self, peer: ReplicaId) {
        if let RoleState::Leader(l) = &mut self.role {
            if let Some(v) = l.followers.get_mut(&peer) {
                if v.log_end_offset.is_some() {
                    v.stale_fetch = true;
                }
                v.fetching_epoch = None;
            }
        }
    }

    // --- High watermark -----------------------------------------------------------

    /// The HW the leader may move to at `now` (`Partition.maybeIncrementLeaderHW`):
    /// the lowest LEO, as it knows them, over its maximal ISR (its ISR, plus
    /// the follower of an addition in flight) and over the followers
    /// `shouldWaitForReplicaToJoinIsr` counts: outside it, caught up
    /// (`ReplicaState.isCaughtUp`) and eligible (their last fetch from
    /// their current incarnation, as `isReplicaIsrEligible` asks of the
    /// broker epoch). `None` when that is not higher than its HW, when an
    /// ISR member has not fetched yet, or (ELR) while
    /// |ISR| < min.insync.replicas.
    pub fn advanced_hw(&self, now: u64) -> Option<u64> {
        let RoleState::Leader(l) = &self.role else {
            return None;
        };
        if self.config.elr && l.isr.len() < self.config.min_insync_replicas {
            return None;
        }
        let mut members: BTreeSet<ReplicaId> = l.isr.clone();
        if let Some(IsrChange::Add(r)) = l.pending_isr {
            members.insert(r);
        }
        let mut hw = self.log.log_end_offset;
        for f in members.iter().filter(|&&f| f != self.id) {
            hw = hw.min(l.followers.get(f)?.log_end_offset?);
        }
        if self.config.hw_waits_for_caught_up {
            for (f, v) in &l.followers {
                let waits = *f != self.id
                    && !members.contains(f)
                    && !v.stale_fetch
                    && self.is_caught_up(v, now);
                if let (true, Some(leo)) = (waits, v.log_end_offset) {
                    hw = hw.min(leo);
                }
            }
        }
        (hw > self.log.high_watermark).then_some(hw)
    }

    /// The leader advances its HW (the model's LeaderAdvanceHw), checkpointed
    /// with it under [`HwCheckpointPolicy::EveryChange`](super::HwCheckpointPolicy).
    pub(super) fn advance_hw(&mut self, now: u64) -> Result<Ready> {
        let Some(hw) = self.advanced_hw(now) else {
            return Err(Error::not_enabled(format!(
                "leader {} cannot advance its HW",
                self.id
            )));
        };
        let checkpoint = self.checkpoint_every_hw();
        Ok(self.persist(
            StorageOp::SetHighWatermark { hw, checkpoint },
            Pending::AdvanceHw,
        ))
    }

    /// The HW moved: the acks=all producers it passed are answered, with
    /// success while the ISR has min.insync.replicas, else
    /// NotEnoughReplicasAfterAppend.
    pub(super) fn hw_advanced(&mut self) -> Ready {
        let hw = self.log.high_watermark;
        let epoch = self.leader_epoch.unwrap_or(-1);
        let min_isr = self.config.min_insync_replicas;
        let mut out = Vec::new();
        if let RoleState::Leader(l) = &mut self.role {
            let isr_ok = l.isr.len() >= min_isr;
            let (done, waiting): (Vec<Waiter>, Vec<Waiter>) =
                l.waiters.drain(..).partition(|w| w.last_offset < hw);
            l.waiters = waiting;
            for w in done {
                out.push(Output::Produce(ProduceResponse {
                    request_id: w.request_id,
                    result: if isr_ok {
                        Ok((w.base_offset, epoch))
                    } else {
                        Err(ApiError::NotEnoughReplicasAfterAppend)
                    },
                }));
            }
        }
        Ready::Send(out)
    }

    // --- ISR changes ------------------------------------------------------------------

    /// Whether `follower` is out of sync at `now` (Kafka's
    /// `Partition.getOutOfSyncReplicas` and `Replica.isCaughtUp`): its LEO,
    /// as this leader knows it, is not the leader's LEO, and has not been
    /// since more than `replica.lag.time.max.ms`. A follower whose LEO
    /// equals the leader's is never removed for lag, even one that stopped
    /// fetching (a broker that died leaves through the controller).
    pub fn is_out_of_sync(&self, follower: ReplicaId, now: u64) -> bool {
        let RoleState::Leader(l) = &self.role else {
            return false;
        };
        l.followers
            .get(&follower)
            .is_some_and(|v| !self.is_caught_up(v, now))
    }

    /// Kafka's `ReplicaState.isCaughtUp` at `now`, for a follower this
    /// leader views as `v`: its LEO, as the leader knows it, is the
    /// leader's LEO, or was within `replica.lag.time.max.ms` (its last
    /// caught-up time).
    fn is_caught_up(&self, v: &FollowerView, now: u64) -> bool {
        let caught_up = v.log_end_offset == Some(self.log.log_end_offset);
        let lag_passed =
            now.saturating_sub(v.last_caught_up_ms) > self.config.replica_lag_time_max_ms;
        caught_up || !lag_passed
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
        let hw = self.log.high_watermark;
        let epoch_ok = !self.config.fencing
            || match self.config.isr_join {
                IsrJoinRule::FollowerReachedEpochStart => leo >= l.epoch_start_offset,
                IsrJoinRule::LeaderHwReachedEpochStart => hw >= l.epoch_start_offset,
                IsrJoinRule::HwOnly => true,
            };
        leo >= hw && !v.stale_fetch && epoch_ok
    }

    /// The leader asks to drop an out-of-sync follower (the leader's half of
    /// the model's LeaderShrinkIsr): an AlterPartition to send.
    pub(super) fn shrink_isr(&mut self, follower: ReplicaId, now: u64) -> Result<Ready> {
        self.check_isr_change(follower, true)?;
        if !self.is_out_of_sync(follower, now) {
            return Err(Error::not_enabled(format!(
                "follower {follower} is in sync with leader {}",
                self.id
            )));
        }
        Ok(self.start_isr_change(IsrChange::Remove(follower)))
    }

    /// The leader asks to take a caught-up follower back (the leader's half
    /// of the model's LeaderExpandIsr); the controller refuses a follower
    /// already in its ISR.
    pub(super) fn expand_isr(&mut self, follower: ReplicaId) -> Result<Ready> {
        self.check_isr_change(follower, false)?;
        if !self.is_caught_up_for_isr(follower) {
            return Err(Error::not_enabled(format!(
                "follower {follower} has not caught up with leader {} for the ISR",
                self.id
            )));
        }
        Ok(self.start_isr_change(IsrChange::Add(follower)))
    }

    fn check_isr_change(&self, follower: ReplicaId, remove: bool) -> Result<()> {
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
        // Kafka's `Partition.maybeShrinkIsr` and `maybeExpandIsr` propose
        // nothing while `partitionState.isInflight`: the change in flight
        // is answered by the controller, however late (the driver's
        // controller answers every request), never replaced.
        if l.pending_isr.is_some() {
            return Err(Error::not_enabled("an ISR change is in flight"));
        }
        Ok(())
    }

    fn start_isr_change(&mut self, change: IsrChange) -> Ready {
        if let RoleState::Leader(l) = &mut self.role {
            l.pending_isr = Some(change);
        }
        Ready::Send(vec![Output::AlterPartition(AlterPartitionRequest {
            leader: self.id,
            leader_epoch: self.leader_epoch.unwrap_or(-1),
            change,
        })])
    }

    /// The controller's answer to an ISR change: on success the leader takes
    /// the ISR it returns and its partition epoch. Kafka's
    /// `Partition.handleAlterPartitionUpdate` also ignores an answer older
    /// than the partition epoch held; here none can be, since no update is
    /// taken while a change is in flight (`on_isr_update`).
    pub(super) fn on_alter_partition_response(&mut self, resp: &AlterPartitionResponse) {
        let epoch = self.leader_epoch;
        let RoleState::Leader(l) = &mut self.role else {
            return;
        };
        if epoch != Some(resp.leader_epoch) || l.pending_isr != Some(resp.change) {
            return;
        }
        l.pending_isr = None;
        if let Ok(isr) = &resp.result {
            l.isr = isr.iter().copied().collect();
            l.partition_epoch = resp.partition_epoch;
        }
    }

    /// The controller changed the ISR without a new leader epoch (it
    /// removed a failed broker): Kafka's leader learns this from the
    /// metadata (`Partition.makeLeader`, which skips a partition epoch
    /// older than its own), the model by LeaderLearnsIsr. Applied only by
    /// the leader of `leader_epoch` with no ISR change of its own in
    /// flight, only to an ISR that still holds it, and only when newer
    /// than the ISR it holds.
    pub(super) fn on_isr_update(
        &mut self,
        leader_epoch: LeaderEpoch,
        partition_epoch: u32,
        isr: &[ReplicaId],
    ) {
        if self.leader_epoch != Some(leader_epoch) {
            return;
        }
        let RoleState::Leader(l) = &mut self.role else {
            return;
        };
        if l.pending_isr.is_some()
            || !isr.contains(&self.id)
            || partition_epoch <= l.partition_epoch
        {
            return;
        }
        l.isr = isr.iter().copied().collect();
        l.partition_epoch = partition_epoch;
    }
}
