//! The threads of a concurrent run that speak the protocol: one per
//! replica (a [`Replica`] on a [`DiskLog`], its messages and timers turned
//! into inputs and its outputs delivered), and the controller's.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use super::super::trace::{Actor, Event};
use super::disk::NemesisDisk;
use super::published::Published;
use super::{ConcurrentConfig, CtlMsg, Msg, Shared, PRODUCER_SHIFT};
use super::{InjectedFault, Regression};
use crate::replication::log::record_id;
use crate::replication::{
    ApiError, Controller, DiskLogConfig, Error, FetchRequest, FetchResponse, Input, IsrChange,
    LeaderAndIsr, Output, ProduceResponse, RecordId, Replica, ReplicaId, ReplicaLog, Result, Tick,
};

/// What a replica thread hands back: its replica (if up) and the errors
/// it met.
pub(super) type ReplicaOutcome = (Option<Replica<NemesisDisk>>, Vec<String>);

// --- Replica threads -------------------------------------------------------------

pub(super) struct ReplicaNode {
    id: ReplicaId,
    dir: PathBuf,
    disk: DiskLogConfig,
    config: ConcurrentConfig,
    replicas: Vec<ReplicaId>,
    partition: Option<Replica<NemesisDisk>>,
    down_unclean: bool,
    peers: Vec<Sender<Msg>>,
    controller: Sender<CtlMsg>,
    producers: Vec<Sender<ProduceResponse>>,
    shared: Arc<Shared>,
    /// Fetches held until data arrives: (from, request, held since).
    parked: Vec<(ReplicaId, FetchRequest, u64, u64)>,
    /// The sender incarnation of the message being handled.
    msg_incarnation: u64,
    backoff_until: u64,
    last_flush: u64,
    last_isr_check: u64,
    /// Only with an injected fault: the last fetch response taken in an
    /// older epoch, and the last ISR update from the controller.
    stale_response: Option<FetchResponse>,
    last_isr_update: Option<(crate::replication::LeaderEpoch, Vec<ReplicaId>)>,
}

/// Where the records a fetch response carries end: after its last batch,
/// or at the fetch offset when it carries none (or cannot be read: the
/// follower then appends nothing either).
fn served_end(req: &FetchRequest, response: &FetchResponse) -> u64 {
    crate::storage::batch::batches(&response.records)
        .map_while(|b| b.ok())
        .last()
        .map_or(req.fetch_offset, |b| b.header.last_offset() + 1)
}

/// Whether a leader answers a follower's fetch at once rather than holding
/// it until there is data or fetch.max.wait.ms passed (Kafka's
/// `ReplicaManager.fetchMessages` answers at once on an error, on data to
/// send, and on a diverging epoch (`hasDivergingEpoch`): the follower must truncate before it can
/// take anything, and held it would only wait).
fn answered_at_once(response: &FetchResponse) -> bool {
    response.error.is_some() || !response.records.is_empty() || response.diverging_epoch.is_some()
}

/// A refusal (a tick with nothing to do) rather than a failure.
fn refused<T>(r: &Result<T>) -> bool {
    matches!(r, Err(Error::NotEnabled(_)))
}

impl ReplicaNode {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        id: ReplicaId,
        dir: PathBuf,
        disk: DiskLogConfig,
        config: ConcurrentConfig,
        replicas: Vec<ReplicaId>,
        peers: Vec<Sender<Msg>>,
        controller: Sender<CtlMsg>,
        producers: Vec<Sender<ProduceResponse>>,
        shared: Arc<Shared>,
    ) -> ReplicaNode {
        ReplicaNode {
            id,
            dir,
            disk,
            config,
            replicas,
            partition: None,
            down_unclean: false,
            peers,
            controller,
            producers,
            shared,
            parked: Vec::new(),
            msg_incarnation: 0,
            backoff_until: 0,
            last_flush: 0,
            last_isr_check: 0,
            stale_response: None,
            last_isr_update: None,
        }
    }

    fn trace(&self, event: Event) {
        if self.shared.tracer.enabled() {
            let state = self.partition.as_ref().map(|p| p.core().state());
            self.shared
                .tracer
                .record(Actor::Replica(self.id), event, state, None);
            // Only now that the event which set it is in the trace: a
            // consumer's read, traced after it, follows it.
            self.publish_hw();
        }
    }

    /// Publishes to consumers the HW this replica holds, while it leads
    /// (`PublishedHw`). Called once an operation completed, its checkpoint
    /// included: after its event is traced (`trace`), or at once when
    /// nothing is traced (`try_input`).
    fn publish_hw(&self) {
        let Some(cell) = self.shared.published_hw(self.id) else {
            return;
        };
        let leading = self
            .partition
            .as_ref()
            .map(|p| p.core())
            .filter(|c| c.is_leader());
        cell.publish(leading.and_then(|c| {
            Some(Published {
                epoch: c.leader_epoch()?,
                hw: c.log_state().high_watermark,
            })
        }));
    }

    /// Takes back what consumers may read, before an operation that may
    /// change the log below the HW (a LeaderAndIsr: truncation as a
    /// follower). Kafka's `Partition.makeFollower` runs under the write
    /// lock of `leaderIsrUpdateLock`, which a fetch's read holds shared;
    /// a consumer here checks the epoch it read in is still published
    /// after its read (`run_consumer`).
    fn withdraw_hw(&self) {
        if let Some(cell) = self.shared.published_hw(self.id) {
            cell.publish(None);
        }
    }

    fn send(&self, to: ReplicaId, msg: Msg) {
        if let Some(s) = self.peers.get(to as usize) {
            let _ = s.send(Msg::Peer {
                from: self.id,
                incarnation: self.shared.incarnation(self.id),
                msg: Box::new(msg),
            });
        }
    }

    fn answer_producer(&self, resp: ProduceResponse) {
        let producer = (resp.request_id >> PRODUCER_SHIFT) as usize;
        if let Some(s) = self.producers.get(producer) {
            let _ = s.send(resp);
        }
    }

    fn send_alter_partition(&self, req: crate::replication::AlterPartitionRequest) {
        // Recorded before it is sent: the trace keeps sends before receives.
        self.trace(Event::AlterPartitionSent { change: req.change });
        let _ = self
            .controller
            .send(CtlMsg::AlterPartition { from: self.id, req });
    }

    /// Gives the replica one input now; a storage failure's answers are
    /// delivered and the failure returned.
    fn input(&mut self, now: u64, input: Input) -> Result<Vec<Output>> {
        self.try_input(now, input).map_err(|(e, answers)| {
            self.route(answers);
            e
        })
    }

    /// [`input`](Self::input), with the fetch answers a failed operation
    /// made handed back with its error instead of sent: a fetch whose read
    /// failed is answered with an error, and traced as served so (sent
    /// untraced, the follower took an answer the trace never showed).
    fn try_input(
        &mut self,
        now: u64,
        input: Input,
    ) -> std::result::Result<Vec<Output>, (Error, Vec<Output>)> {
        let Some(p) = self.partition.as_mut() else {
            return Ok(Vec::new());
        };
        match p.handle(now, input) {
            Ok(out) => {
                // The operation, its checkpoint included, completed: only
                // now may consumers read below its HW (a failed one was
                // set back and is never published). A traced run
                // publishes once the event is traced (`trace`).
                if !self.shared.tracer.enabled() {
                    self.publish_hw();
                }
                Ok(out)
            }
            Err(e) => {
                // Only the fetch answers are handed back; any other is
                // sent as `input` sends it.
                let (fetches, other): (Vec<Output>, Vec<Output>) = p
                    .take_failure_answers()
                    .into_iter()
                    .partition(|o| matches!(o, Output::FetchResponse { .. }));
                self.route(other);
                Err((e, fetches))
            }
        }
    }

    pub(super) fn open(&mut self) -> Result<()> {
        let full = self.shared.disk_full[self.id as usize].clone();
        let failing = self.shared.checkpoints_fail.clone();
        let (log, report) = NemesisDisk::open(&self.dir, &self.disk, full, failing)?;
        let (tx, rx) = mpsc::channel();
        let _ = self.controller.send(CtlMsg::BrokerRegistered {
            replica: self.id,
            unclean: self.down_unclean,
            reply: tx,
        });
        // The model's restart: the broker takes the controller's epoch.
        let epoch = rx.recv().ok().flatten();
        let mut p = Replica::new(
            self.id,
            self.replicas.clone(),
            self.config.replication.clone(),
            log,
            epoch,
        )?;
        p.set_request_timeout_ms(self.config.request_timeout.as_millis() as u64);
        // Answers to the last incarnation's requests may still arrive (a
        // fetch held by the leader, released as this broker crashed).
        p.set_correlation_base(self.shared.incarnation(self.id) << 32);
        self.shared.set_reader(self.id, Some(p.log().reader()));
        self.partition = Some(p);
        self.down_unclean = false;
        self.trace(Event::Restart {
            log_end_offset: report.log_end_offset,
            high_watermark: report.high_watermark,
            recovery_point: report.recovery_point,
        });
        if !self.shared.tracer.enabled() {
            self.publish_hw();
        }
        Ok(())
    }

    fn crash(&mut self, clean: bool) -> Result<()> {
        let Some(p) = self.partition.take() else {
            return Ok(());
        };
        // Waiting producers see the connection drop.
        for request_id in p.core().waiting_acks() {
            self.answer_producer(ProduceResponse {
                request_id,
                result: Err(ApiError::NotLeaderOrFollower),
            });
        }
        self.shared.set_reader(self.id, None);
        self.withdraw_hw();
        self.parked.clear();
        // Its connections drop: what it sent and is still unread is lost.
        if let Some(i) = self.shared.incarnations.get(self.id as usize) {
            i.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let log = p.into_log();
        let stopped = if clean { log.close() } else { log.crash() };
        if self.config.regress == Some(Regression::CrashReturnsEarlyOnError) {
            // Deliberately broken: the protocol never hears of the crash.
            if let Err(e) = stopped {
                return Err(e);
            }
        }
        // Whatever the log did, the broker is down: the protocol hears of
        // it below. A clean shutdown that failed did not complete, so the
        // broker comes back as after an unclean one (KIP-966's rule).
        let clean = clean && stopped.is_ok();
        self.down_unclean = !clean;
        self.trace(Event::Crash { clean });
        let _ = self.controller.send(CtlMsg::BrokerStopped(self.id));
        for &r in &self.replicas {
            if r != self.id {
                self.send(r, Msg::PeerCrashed(self.id));
            }
        }
        stopped.map(drop)
    }

    /// Delivers what the replica asked to be sent.
    fn route(&mut self, outputs: Vec<Output>) {
        for out in outputs {
            match out {
                Output::Following { leader } => {
                    for &r in &self.replicas {
                        if r != self.id {
                            self.send(
                                r,
                                Msg::Following {
                                    from: self.id,
                                    leader,
                                },
                            );
                        }
                    }
                }
                Output::Produce(resp) => {
                    self.trace(Event::ProduceAnswered {
                        request_id: resp.request_id,
                        result: resp.result,
                    });
                    self.answer_producer(resp);
                }
                Output::AlterPartition(req) => self.send_alter_partition(req),
                Output::Fetch { to, request } => self.send(
                    to,
                    Msg::Fetch {
                        from: self.id,
                        req: request,
                    },
                ),
                Output::FetchResponse { to, response } => {
                    self.send(to, Msg::FetchResponse(response))
                }
                Output::OffsetsForLeaderEpoch { to, request } => {
                    self.send(to, Msg::OffsetsForLeaderEpoch(request))
                }
                Output::OffsetsForLeaderEpochResponse { to, response } => {
                    self.send(to, Msg::OffsetsForLeaderEpochResponse(response))
                }
                Output::Appended { .. } => {}
            }
        }
    }

    /// Handles one message; returns false on Stop.
    fn handle(&mut self, msg: Msg) -> Result<bool> {
        let now = self.shared.now();
        match msg {
            Msg::Stop => return Ok(false),
            Msg::Peer {
                from,
                incarnation,
                msg,
            } => {
                if incarnation != self.shared.incarnation(from) {
                    return Ok(true);
                }
                self.msg_incarnation = incarnation;
                return self.handle(*msg);
            }
            Msg::Crash { clean } => self.crash(clean)?,
            Msg::CrashOnFullDisk => {
                if self.partition.is_some() {
                    if let Some(full) = self.shared.disk_full.get(self.id as usize) {
                        full.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                self.crash(true)?
            }
            Msg::Restart => {
                if self.partition.is_none() {
                    self.open()?;
                }
            }
            Msg::Unfence => {
                // Down, it registers when it restarts.
                if self.partition.is_some() {
                    let (reply, answer) = mpsc::channel();
                    let heartbeat = CtlMsg::BrokerHeartbeat {
                        replica: self.id,
                        reply,
                    };
                    if self.controller.send(heartbeat).is_ok() {
                        // Taken before this broker does anything else: a
                        // heartbeat still in flight when the broker
                        // crashed would unfence a broker that is down
                        // (paced soak, seed 30; see spec/differences.md).
                        let _ = answer.recv();
                    }
                }
            }
            Msg::Pause(d) => std::thread::sleep(d),
            Msg::Hold { held, release } => {
                let _ = held.send(());
                let _ = release.recv();
            }
            Msg::Barrier(reply) => {
                let _ = reply.send(());
            }
            Msg::Produce { producer, req } => self.produce(producer, req, now)?,
            other => {
                if self.partition.is_none() {
                    // A down broker hears nothing.
                    return Ok(true);
                }
                self.handle_peer_message(other, now)?;
            }
        }
        Ok(true)
    }

    fn produce(
        &mut self,
        producer: usize,
        req: crate::replication::ProduceRequest,
        now: u64,
    ) -> Result<()> {
        let request_id = req.request_id;
        if self.partition.is_none() {
            let _ = self.producers.get(producer).map(|s| {
                s.send(ProduceResponse {
                    request_id,
                    result: Err(ApiError::NotLeaderOrFollower),
                })
            });
            return Ok(());
        }
        let ids: Vec<RecordId> = req.records.iter().filter_map(record_id).collect();
        let handled = self.input(now, Input::Produce(req));
        let out = match &handled {
            Ok(out) => out.clone(),
            Err(_) => Vec::new(),
        };
        let result = out
            .iter()
            .find_map(|o| match *o {
                Output::Appended {
                    base_offset,
                    leader_epoch,
                    ..
                } => Some(Ok((base_offset, leader_epoch))),
                Output::Produce(ref r) if r.result.is_err() => Some(r.result),
                _ => None,
            })
            .unwrap_or(Err(ApiError::KafkaStorageError));
        self.trace(Event::Produce {
            request_id,
            records: ids,
            result,
        });
        // Immediate answers (acks=1, refusals) go straight back.
        for o in out {
            if let Output::Produce(resp) = o {
                self.answer_producer(resp);
            }
        }
        handled.map(drop)
    }

    fn handle_peer_message(&mut self, msg: Msg, now: u64) -> Result<()> {
        match msg {
            Msg::LeaderAndIsr(req) => self.leader_and_isr(req, now)?,
            Msg::Fetch { from, req } => self.serve_fetch(from, req, now)?,
            Msg::FetchResponse(mut resp) => {
                let early = match self.config.inject {
                    Some(InjectedFault::HwPublishedEarly) => true,
                    Some(InjectedFault::HwPublishedEarlyFrom { offset }) => {
                        resp.fetch_offset >= offset
                    }
                    _ => false,
                };
                if early {
                    // Deliberately broken: the leader's LEO taken as its HW.
                    resp.high_watermark = resp.log_end_offset;
                }
                if self.injected(InjectedFault::StaleEpochFetchResponse) {
                    self.remember_or_replay_stale(&mut resp);
                }
                if self.injected(InjectedFault::DivergingEpochIgnored) {
                    // Deliberately broken: the cut the leader asks for is not made.
                    resp.diverging_epoch = None;
                }
                let leader = resp.leader_id;
                let (fetch_offset, error) = (resp.fetch_offset, resp.error);
                let p = self.partition.as_ref().expect("checked by the caller");
                // Only the answer to the fetch in flight is taken
                // (`Partition::on_fetch_response`, as Kafka's
                // `AbstractFetcherThread.processFetchRequest`); a late
                // answer to a fetch sent again is dropped unseen, and
                // tracing it as applied would take from the validator the
                // response the follower will apply.
                let expected = p.core().fetching_from() == Some(leader)
                    && (p.core().fetch_in_flight() == Some(resp.correlation_id)
                        || self.config.regress == Some(Regression::LateFetchResponseTraced));
                self.input(now, Input::FetchResponse(resp))?;
                if error.is_some() {
                    self.backoff_until = now + 10;
                }
                if expected {
                    let log = self.partition.as_ref().expect("up").core().log_state();
                    let (leo, hw) = (log.log_end_offset, log.high_watermark);
                    self.trace(Event::FetchApplied {
                        leader,
                        fetch_offset,
                        error,
                        log_end_offset: leo,
                        high_watermark: hw,
                    });
                }
            }
            Msg::OffsetsForLeaderEpoch(req) => {
                let out = self.input(now, Input::OffsetsForLeaderEpoch(req))?;
                self.route(out);
            }
            Msg::OffsetsForLeaderEpochResponse(resp) => {
                let p = self.partition.as_ref().expect("checked by the caller");
                let was_truncating = p.core().is_truncating();
                let (leader, error) = (resp.leader_id, resp.error);
                self.input(now, Input::OffsetsForLeaderEpochResponse(resp))?;
                if error.is_some() {
                    self.backoff_until = now + 10;
                } else if was_truncating {
                    let core = self.partition.as_ref().expect("up").core();
                    let leo = core.log_state().log_end_offset;
                    let done = !core.is_truncating();
                    self.trace(Event::Truncated {
                        leader,
                        log_end_offset: leo,
                        done,
                    });
                }
            }
            Msg::AlterPartitionResponse(resp) => {
                let (change, result) = (resp.change, resp.result.clone());
                let epoch = resp.leader_epoch;
                self.input(now, Input::AlterPartitionResponse(resp))?;
                self.trace(Event::AlterPartitionAnswered {
                    change,
                    result: result.clone(),
                });
                if let Ok(isr) = result {
                    self.inject_isr_faults(epoch, change, isr, now)?;
                }
            }
            Msg::Following { from, leader } => {
                let notice = Input::Following {
                    follower: from,
                    leader,
                };
                self.input(now, notice)?;
                self.trace(Event::FollowingNoticed {
                    follower: from,
                    leader,
                });
            }
            Msg::PeerCrashed(r) => {
                self.input(now, Input::PeerCrashed(r))?;
                self.trace(Event::PeerCrashNoticed { peer: r });
            }
            Msg::IsrUpdate { .. } if self.config.isr_updates_lost => {
                // Lost (fault injection), as while down or busy.
            }
            Msg::IsrUpdate {
                leader_epoch,
                partition_epoch,
                isr,
            } => {
                if self.injected(InjectedFault::IsrChangeAppliedTwice) {
                    self.last_isr_update = Some((leader_epoch, isr.clone()));
                }
                let before = self.partition.as_ref().expect("up").core().isr();
                let update = Input::IsrUpdate {
                    leader_epoch,
                    partition_epoch,
                    isr: isr.clone(),
                };
                self.input(now, update)?;
                if self.partition.as_ref().expect("up").core().isr() != before {
                    self.trace(Event::IsrUpdated { isr });
                }
            }
            Msg::Stop
            | Msg::Crash { .. }
            | Msg::CrashOnFullDisk
            | Msg::Restart
            | Msg::Unfence
            | Msg::Pause(_)
            | Msg::Hold { .. }
            | Msg::Barrier(_)
            | Msg::Produce { .. }
            | Msg::Peer { .. } => {
                unreachable!("handled by the caller")
            }
        }
        Ok(())
    }

    fn injected(&self, fault: InjectedFault) -> bool {
        self.config.inject == Some(fault)
    }

    /// `StaleEpochFetchResponse` (deliberately broken): a response taken in
    /// an older epoch is kept, and applied again in a later epoch whenever
    /// the follower fetches from its offset, relabelled as the current
    /// leader's answer to the fetch in flight.
    fn remember_or_replay_stale(&mut self, resp: &mut FetchResponse) {
        let Some(p) = self.partition.as_ref() else {
            return;
        };
        let core = p.core();
        let epoch = core.state().leader_epoch;
        match self.stale_response.take() {
            Some(old) if old.leader_epoch < epoch && core.fetching_from().is_some() => {
                if let Some(c) = core.fetch_in_flight() {
                    if old.fetch_offset == core.log_state().log_end_offset {
                        *resp = FetchResponse {
                            correlation_id: c,
                            leader_id: resp.leader_id,
                            leader_epoch: resp.leader_epoch,
                            ..old.clone()
                        };
                        self.stale_response = Some(old);
                        return;
                    }
                }
                self.stale_response = Some(old);
            }
            Some(old) if old.leader_epoch < epoch => self.stale_response = Some(old),
            _ => self.stale_response = Some(resp.clone()),
        }
    }

    /// `HwFromUnconfirmedIsr` and `IsrChangeAppliedTwice` (deliberately
    /// broken), after an accepted AlterPartition: the leader's ISR copy
    /// drops the member just added (a stale copy it then advances the HW
    /// from), or takes the controller's last ISR update a second time.
    fn inject_isr_faults(
        &mut self,
        epoch: crate::replication::LeaderEpoch,
        change: IsrChange,
        isr: Vec<ReplicaId>,
        now: u64,
    ) -> Result<()> {
        let stale = match (self.config.inject, change) {
            (Some(InjectedFault::HwFromUnconfirmedIsr), IsrChange::Add(f)) => {
                Some(isr.iter().copied().filter(|&r| r != f).collect())
            }
            (Some(InjectedFault::IsrChangeAppliedTwice), _) => self
                .last_isr_update
                .take()
                .filter(|(e, _)| *e == epoch)
                .map(|(_, isr)| isr),
            _ => None,
        };
        let Some(stale) = stale else {
            return Ok(());
        };
        let before = self.partition.as_ref().map(|p| p.core().isr());
        // Taken as newer than the ISR the leader holds: the fault is that
        // it applies at all.
        let newer = self
            .partition
            .as_ref()
            .and_then(|p| p.core().isr_partition_epoch())
            .map_or(0, |e| e + 1);
        let update = Input::IsrUpdate {
            leader_epoch: epoch,
            partition_epoch: newer,
            isr: stale.clone(),
        };
        self.input(now, update)?;
        if self.partition.as_ref().map(|p| p.core().isr()) != before {
            self.trace(Event::IsrUpdated { isr: stale });
        }
        Ok(())
    }

    fn leader_and_isr(&mut self, req: LeaderAndIsr, now: u64) -> Result<()> {
        let (epoch, leader) = (req.leader_epoch, req.leader);
        self.withdraw_hw();
        let taken = self.input(now, Input::LeaderAndIsr(req));
        if !self.shared.tracer.enabled() {
            // Published again whatever the outcome (a refused request left
            // the log as it was).
            self.publish_hw();
        }
        match taken {
            Ok(out) => {
                self.parked.clear();
                let event = if leader == Some(self.id) {
                    Event::BecomeLeader { epoch }
                } else {
                    Event::BecomeFollower { epoch, leader }
                };
                self.trace(event);
                self.route(out);
                Ok(())
            }
            Err(Error::StaleLeaderAndIsr { .. }) => {
                self.trace(Event::LeaderAndIsrRefused { epoch });
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// `HwPublishedBeforeFetchChecked` (deliberately broken): the HW `req`
    /// would let the leader reach, were it accepted (the least of the ISR's
    /// positions, the fetch offset for `from`), published to consumers
    /// before the fetch is checked or its HW advance traced.
    fn publish_hw_of_unchecked_fetch(&self, from: ReplicaId, req: &FetchRequest) {
        let (Some(p), Some(cell)) = (self.partition.as_ref(), self.shared.published_hw(self.id))
        else {
            return;
        };
        let st = p.core().state();
        let (Some(epoch), true) = (st.leader_epoch, p.core().is_leader()) else {
            return;
        };
        let position = |r: ReplicaId| match r {
            r if r == self.id => Some(st.log_end_offset),
            r if r == from => Some(req.fetch_offset),
            r => st.followers.get(&r).and_then(|f| f.log_end_offset),
        };
        let least = st.isr.iter().map(|&r| position(r)).min().flatten();
        if let Some(hw) = least.filter(|&hw| hw > st.high_watermark) {
            cell.publish(Some(Published { epoch, hw }));
        }
    }

    /// The leader serves a fetch, or holds it while there is nothing to send.
    fn serve_fetch(&mut self, from: ReplicaId, req: FetchRequest, now: u64) -> Result<()> {
        if self.injected(InjectedFault::HwPublishedBeforeFetchChecked) {
            self.publish_hw_of_unchecked_fetch(from, &req);
        }
        let (out, failed) = match self.try_input(now, Input::Fetch(req.clone())) {
            Ok(out) => (out, None),
            Err((e, answers)) => (answers, Some(e)),
        };
        for o in out {
            let Output::FetchResponse { to, response } = o else {
                continue;
            };
            let hold = !answered_at_once(&response)
                && !self
                    .parked
                    .iter()
                    .any(|(f, q, _, _)| *f == from && q.correlation_id == req.correlation_id);
            self.trace(Event::FetchServed {
                follower: from,
                fetch_offset: req.fetch_offset,
                follower_epoch: req.current_leader_epoch,
                error: response.error,
                log_end_offset: response.log_end_offset,
                high_watermark: response.high_watermark,
                diverging: response.diverging_epoch.is_some(),
                served_end: Some(served_end(&req, &response)),
            });
            // Kafka expands the ISR while serving a fetch.
            self.maybe_expand(from, now);
            if hold {
                self.parked
                    .push((from, req.clone(), now, self.msg_incarnation));
            } else {
                self.send(to, Msg::FetchResponse(response));
            }
        }
        failed.map_or(Ok(()), Err)
    }

    fn maybe_expand(&mut self, follower: ReplicaId, now: u64) {
        let Some(p) = self.partition.as_ref() else {
            return;
        };
        let core = p.core();
        if core.is_leader()
            && !core.isr().contains(&follower)
            && core.is_caught_up_for_isr(follower)
        {
            if let Ok(out) = self.input(now, Input::Tick(Tick::ExpandIsr(follower))) {
                self.route(out);
            }
        }
    }

    /// What a replica does on its own after each batch of messages.
    fn drive(&mut self) -> Result<()> {
        let now = self.shared.now();
        let Some(p) = self.partition.as_ref() else {
            return Ok(());
        };
        // The first failure, returned once everything else was done.
        let mut failed: Option<Error> = None;
        if p.core().is_leader() {
            self.learn_isr(now);
            let advanced = self.input(now, Input::Tick(Tick::AdvanceHw));
            if !refused(&advanced) {
                match advanced {
                    Ok(out) => {
                        let hw = self.partition.as_ref().expect("up").core().log_state();
                        self.trace(Event::LeaderAdvanceHw {
                            high_watermark: hw.high_watermark,
                        });
                        self.route(out);
                    }
                    // Held fetches, the shrink check and the rest still run.
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
            // Held fetches go out once there is data or they waited enough.
            let leo = self
                .partition
                .as_ref()
                .expect("up")
                .core()
                .log_state()
                .log_end_offset;
            let wait = self.config.fetch_max_wait.as_millis() as u64;
            let woken = self.config.regress != Some(Regression::HeldFetchWakesOnTimerOnly);
            let (ready, held): (Vec<_>, Vec<_>) = std::mem::take(&mut self.parked)
                .into_iter()
                .partition(|(_, q, since, _)| {
                    (woken && leo > q.fetch_offset) || now >= since + wait
                });
            // A fetch still held with records to return: a lost wake-up.
            if held.iter().any(|(_, q, _, _)| leo > q.fetch_offset) {
                self.shared
                    .lost_wakeups
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            self.parked = held;
            for (from, req, _, incarnation) in ready {
                if incarnation != self.shared.incarnation(from) {
                    // Held for a follower that crashed since.
                    continue;
                }
                let served = match self.try_input(now, Input::Fetch(req.clone())) {
                    Ok(out) => out,
                    Err((e, answers)) => {
                        failed = failed.or(Some(e));
                        answers
                    }
                };
                for o in served {
                    let Output::FetchResponse { to, response } = o else {
                        continue;
                    };
                    self.trace(Event::FetchServed {
                        follower: from,
                        fetch_offset: req.fetch_offset,
                        follower_epoch: req.current_leader_epoch,
                        error: response.error,
                        log_end_offset: response.log_end_offset,
                        high_watermark: response.high_watermark,
                        diverging: response.diverging_epoch.is_some(),
                        served_end: Some(served_end(&req, &response)),
                    });
                    self.send(to, Msg::FetchResponse(response));
                }
            }
            let lag = self.config.replication.replica_lag_time_max_ms;
            if now >= self.last_isr_check + (lag / 4).max(1) {
                self.last_isr_check = now;
                let core = self.partition.as_ref().expect("up").core();
                let out_of_sync = core
                    .isr()
                    .into_iter()
                    .find(|&f| f != self.id && core.is_out_of_sync(f, now));
                if let Some(f) = out_of_sync {
                    if let Ok(out) = self.input(now, Input::Tick(Tick::ShrinkIsr(f))) {
                        self.route(out);
                    }
                }
            }
        } else if now >= self.backoff_until {
            if let Ok(out) = self.input(now, Input::Tick(Tick::SendRequest)) {
                self.route(out);
            }
        }
        if let Some(every) = self.config.flush_interval {
            if now >= self.last_flush + every.as_millis() as u64 {
                self.last_flush = now;
                let before = self.rp();
                if let Err(e) = self.input(now, Input::Tick(Tick::Flush)) {
                    failed = failed.or(Some(e));
                }
                let rp = self.rp();
                if rp != before {
                    self.trace(Event::Flush { recovery_point: rp });
                }
            }
        }
        let before = self.hw_checkpoint();
        if let Err(e) = self.input(now, Input::Tick(Tick::CheckpointHw)) {
            failed = failed.or(Some(e));
        }
        let checkpointed = self.hw_checkpoint();
        if checkpointed != before {
            // Traced: an unclean crash brings this HW back, and the crash's
            // entry carries no state to learn it from.
            self.trace(Event::CheckpointHw {
                high_watermark: checkpointed,
            });
        }
        failed.map_or(Ok(()), Err)
    }

    /// Kafka's leaders learn the ISR from the metadata, not from one
    /// message: a leader whose copy differs from the controller's ISR in
    /// its own epoch takes it (the model's LeaderLearnsIsr), so an update
    /// lost while it was down, or ignored while its own change was in
    /// flight, is not lost for good.
    fn learn_isr(&mut self, now: u64) {
        if self.config.regress == Some(Regression::IsrFromOneShotUpdateOnly) {
            return;
        }
        let m = self.shared.metadata();
        let Some(p) = self.partition.as_ref() else {
            return;
        };
        let core = p.core();
        let (Some(epoch), mine) = (core.state().leader_epoch, core.isr()) else {
            return;
        };
        if m.leader != Some(self.id) || m.leader_epoch != Some(epoch) || m.isr == mine {
            return;
        }
        let update = Input::IsrUpdate {
            leader_epoch: epoch,
            partition_epoch: m.partition_epoch,
            isr: m.isr.clone(),
        };
        if self.input(now, update).is_ok() {
            let after = self.partition.as_ref().map(|p| p.core().isr());
            if after.as_ref() != Some(&mine) {
                self.trace(Event::IsrUpdated { isr: m.isr });
            }
        }
    }

    fn hw_checkpoint(&self) -> u64 {
        self.partition
            .as_ref()
            .map_or(0, |p| p.core().log_state().hw_checkpoint)
    }

    fn rp(&self) -> u64 {
        self.partition
            .as_ref()
            .map_or(0, |p| p.core().log_state().recovery_point)
    }

    /// Records a failure; a storage failure takes the replica offline, as
    /// Kafka takes a failed log directory offline: the broker stops as
    /// after an unclean crash (the controller removes it from the ISR, its
    /// peers see it go), and comes back only by a restart.
    fn failed(&mut self, e: Error, errors: &mut Vec<String>) {
        let e_text = e.to_string();
        if e_text.contains(super::disk::CHECKPOINT_FAILURE) {
            self.shared
                .checkpoint_failures
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        errors.push(format!("replica {}: {e_text}", self.id));
        if matches!(e, Error::Storage(_)) && self.partition.is_some() {
            if let Err(e) = self.crash(false) {
                errors.push(format!("replica {}: going offline: {e}", self.id));
            }
        }
    }

    pub(super) fn run(mut self, inbox: Receiver<Msg>) -> ReplicaOutcome {
        let mut errors = Vec::new();
        let tick = Duration::from_millis(2);
        'outer: loop {
            let first = match inbox.recv_timeout(tick) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let mut batch: Vec<Msg> = first.into_iter().collect();
            batch.extend(inbox.try_iter().take(256));
            for msg in batch {
                match self.handle(msg) {
                    Ok(true) => {}
                    Ok(false) => break 'outer,
                    Err(e) => self.failed(e, &mut errors),
                }
            }
            if let Err(e) = self.drive() {
                self.failed(e, &mut errors);
            }
            if let (Some(p), true) = (&self.partition, self.config.bursts.is_some()) {
                let s = p.core().log_state();
                let settled = s.high_watermark.min(s.recovery_point).min(s.hw_checkpoint);
                if let Some(cell) = self.shared.settled.get(self.id as usize) {
                    cell.store(settled, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
        (self.partition, errors)
    }
}

// --- Controller thread -------------------------------------------------------------

pub(super) struct ControllerNode {
    controller: Controller,
    replicas: Vec<Sender<Msg>>,
    shared: Arc<Shared>,
    /// Brokers that registered since the run began. The controller starts
    /// with every broker registered (the model's initial state); a broker's
    /// first registration is its start, not a restart, and no leader is
    /// elected before every broker has started.
    started: Vec<bool>,
    /// `ConcurrentConfig::late_first_announcement`, until taken.
    late_first_announcement: Option<Duration>,
}

impl ControllerNode {
    pub(super) fn new(
        controller: Controller,
        replicas: Vec<Sender<Msg>>,
        shared: Arc<Shared>,
        late_first_announcement: Option<Duration>,
    ) -> ControllerNode {
        let started = vec![false; replicas.len()];
        ControllerNode {
            controller,
            replicas,
            shared,
            started,
            late_first_announcement,
        }
    }

    fn trace(&self, event: Event) {
        if self.shared.tracer.enabled() {
            self.shared.tracer.record(
                Actor::Controller,
                event,
                None,
                Some(self.controller.state()),
            );
        }
    }

    fn broadcast(&self, req: &LeaderAndIsr) {
        for s in &self.replicas {
            let _ = s.send(Msg::LeaderAndIsr(req.clone()));
        }
    }

    /// Tells the leader of an ISR change made within its epoch.
    fn send_isr_update(&self) {
        if let (Some(l), Some(epoch)) = (self.controller.leader(), self.controller.leader_epoch()) {
            if let Some(s) = self.replicas.get(l as usize) {
                let _ = s.send(Msg::IsrUpdate {
                    leader_epoch: epoch,
                    partition_epoch: self.controller.partition_epoch(),
                    isr: self.controller.isr(),
                });
            }
        }
    }

    fn current_metadata(&self) -> super::Metadata {
        super::Metadata {
            leader: self.controller.leader(),
            leader_epoch: self.controller.leader_epoch(),
            partition_epoch: self.controller.partition_epoch(),
            isr: self.controller.isr(),
        }
    }

    fn publish(&self) {
        self.shared.metadata.publish(self.current_metadata());
    }

    /// A broker registered (it started, or a fenced one is heard from
    /// again): the controller takes it back, answers it with the epoch it
    /// holds, and sends it the latest LeaderAndIsr.
    fn broker_registered(
        &mut self,
        replica: ReplicaId,
        unclean: bool,
        reply: Sender<Option<crate::replication::LeaderEpoch>>,
    ) {
        let first = self
            .started
            .get_mut(replica as usize)
            .map(|s| !std::mem::replace(s, true))
            .unwrap_or(false);
        let isr_before = self.controller.isr();
        // A first registration finds the broker already
        // counted in: nothing to change.
        let registered = if first {
            Ok(None)
        } else {
            self.controller.broker_registered(replica, unclean)
        };
        // Traced and published before anyone hears of the
        // change (a leader's IsrUpdated was traced before the
        // registration that caused it, and the leader then
        // took the older ISR still published: unclean soak
        // seed 18).
        self.trace(Event::BrokerRegistered { replica, unclean });
        self.publish();
        match registered {
            Ok(Some(req)) => self.broadcast(&req),
            Ok(None) if self.controller.isr() != isr_before => self.send_isr_update(),
            _ => {}
        }
        let _ = reply.send(self.controller.leader_epoch());
        // The restarted broker learns the current state.
        if let Some(req) = self.controller.latest_request() {
            if let Some(s) = self.replicas.get(replica as usize) {
                let _ = s.send(Msg::LeaderAndIsr(req.clone()));
            }
        }
    }

    pub(super) fn run(mut self, inbox: Receiver<CtlMsg>) -> Controller {
        loop {
            match inbox.recv_timeout(Duration::from_millis(2)) {
                Ok(CtlMsg::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Ok(CtlMsg::AlterPartition { from, req }) => {
                    let resp = self.controller.alter_partition(&req);
                    self.trace(Event::ControllerAlterPartition {
                        leader: from,
                        change: req.change,
                        result: resp.result.clone(),
                    });
                    // Published before anyone hears of the change: a leader
                    // that learns the ISR from the metadata (`learn_isr`)
                    // must never read one older than an answer it holds
                    // (trace validation caught that; loom checks the order).
                    let to = self.replicas.get(from as usize);
                    self.shared
                        .metadata
                        .publish_then(self.current_metadata(), || {
                            if let Some(s) = to {
                                let _ = s.send(Msg::AlterPartitionResponse(resp));
                            }
                        });
                }
                Ok(CtlMsg::BrokerStopped(r)) => {
                    if let Some(s) = self.started.get_mut(r as usize) {
                        // Stopped before it registered: its next
                        // registration is a restart.
                        *s = true;
                    }
                    let _ = self.controller.broker_stopped(r);
                    self.trace(Event::BrokerStopped { replica: r });
                    if self.controller.may_shrink_isr(r) {
                        if let Ok(sent) = self.controller.shrink_isr_on_failure(r) {
                            self.trace(Event::ControllerShrinkIsr { replica: r });
                            self.publish();
                            match sent {
                                Some(req) => self.broadcast(&req),
                                None => self.send_isr_update(),
                            }
                        }
                    }
                }
                Ok(CtlMsg::BrokerRegistered {
                    replica,
                    unclean,
                    reply,
                }) => self.broker_registered(replica, unclean, reply),
                Ok(CtlMsg::BrokerHeartbeat { replica, reply }) => {
                    // A broker the controller fenced is heard from again:
                    // it is unfenced, as after a clean registration
                    // (KRaft's `ReplicationControlManager.
                    // processBrokerHeartbeat`, which unfences a broker
                    // whose heartbeat no longer asks to be fenced). One
                    // the controller holds alive changes nothing.
                    if self.controller.state().alive.contains(&replica) {
                        let _ = reply.send(self.controller.leader_epoch());
                    } else {
                        self.broker_registered(replica, false, reply);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            let all_started = self.started.iter().all(|&s| s);
            if let Some((r, _)) = self.controller.candidate().filter(|_| all_started) {
                if let Ok((election, req)) = self.controller.elect_leader(r) {
                    self.trace(Event::ControllerElectLeader {
                        replica: r,
                        election,
                        epoch: req.leader_epoch,
                    });
                    self.publish();
                    if let Some(d) = self.late_first_announcement.take() {
                        std::thread::sleep(d);
                    }
                    self.broadcast(&req);
                }
            }
            self.publish();
        }
        self.controller
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::DivergingEpoch;

    fn empty_answer() -> FetchResponse {
        FetchResponse {
            correlation_id: 7,
            leader_id: 1,
            leader_epoch: Some(2),
            fetch_offset: 1,
            error: None,
            high_watermark: 0,
            log_end_offset: 0,
            diverging_epoch: None,
            records: Vec::new(),
        }
    }

    /// A diverging epoch is answered at once, as data and errors are; only
    /// an answer with nothing in it waits (seed 137 of the trace
    /// validation: the follower's truncation was held until the leader had
    /// data past the fetch offset).
    #[test]
    fn a_diverging_epoch_is_answered_at_once() {
        let nothing = empty_answer();
        assert!(!answered_at_once(&nothing), "an empty answer waits");
        let diverging = FetchResponse {
            diverging_epoch: Some(DivergingEpoch {
                epoch: 0,
                end_offset: 0,
            }),
            ..empty_answer()
        };
        assert!(answered_at_once(&diverging));
        let error = FetchResponse {
            error: Some(ApiError::FencedLeaderEpoch),
            ..empty_answer()
        };
        assert!(answered_at_once(&error));
        let data = FetchResponse {
            records: vec![0; 8],
            ..empty_answer()
        };
        assert!(answered_at_once(&data));
    }
}
