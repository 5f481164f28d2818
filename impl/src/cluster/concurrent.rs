//! The concurrent driver: each replica and the controller on a thread of
//! its own, exchanging messages through channels (so requests, responses
//! and LeaderAndIsr notices interleave as they will), with producers and
//! consumers running and faults (clean and unclean crashes, restarts)
//! injected on a schedule. It records a [`Trace`] of every protocol event
//! with the state after it, and a [`RunReport`] of what producers were told
//! and consumers read, against which the final logs are checked.
//!
//! Differences from the step driver, all of them Kafka's: a fetch is two
//! events (the leader serves it, later the follower applies the response);
//! a leader holds a fetch with nothing to return until data arrives or
//! `fetch_max_wait` passes (Kafka's DelayedFetch); the HW advances, and the
//! ISR shrinks and expands, as soon as their conditions hold (on every
//! event, and the shrink check on a timer); the controller removes a
//! crashed broker from the ISR when its registration lapses and elects a
//! leader whenever the partition has none.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, RwLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::trace::{Actor, Event, Trace, Tracer};
use crate::replication::log::{read_entries, record_id, record_key};
use crate::replication::{
    Acks, AlterPartitionRequest, AlterPartitionResponse, ApiError, Controller, ControllerConfig,
    ControllerState, DiskLog, DiskLogConfig, Error, FetchRequest, FetchResponse,
    HwCheckpointPolicy, LeaderAndIsr, LeaderEpoch, LogEntry, OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse, Output, Partition, PartitionState, ProduceRequest,
    ProduceResponse, RecordId, ReplicaId, ReplicaLog, ReplicationConfig, Result,
};
use crate::storage::{LogConfig, LogReader, Record, TopicPartition};

/// A fault the schedule injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// The broker the controller names leader crashes.
    CrashLeader { clean: bool },
    /// A broker that is not the leader crashes (the lowest such id).
    CrashFollower { clean: bool },
}

/// When faults happen: the first after `first_after`, then one every
/// `every`, cycling through `faults`; each crashed broker restarts after
/// `down_for`. A fault waits until every replica is back in the ISR, so
/// that no fault hits a partition still repairing the last one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSchedule {
    pub first_after: Duration,
    pub every: Duration,
    pub down_for: Duration,
    pub faults: Vec<Fault>,
}

/// How a concurrent run is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConcurrentConfig {
    pub replicas: u32,
    pub replication: ReplicationConfig,
    pub unclean_leader_election: bool,
    pub log: LogConfig,
    pub hw_checkpoint: HwCheckpointPolicy,
    pub topic_partition: TopicPartition,
    pub acks: Acks,
    /// Producer threads.
    pub producers: usize,
    /// Produce requests each producer keeps in flight.
    pub max_in_flight: usize,
    pub records_per_request: usize,
    /// Bytes of each record's value.
    pub record_bytes: usize,
    /// Consumer threads, each reading the whole log from the leader below
    /// its HW.
    pub consumers: usize,
    /// How long producers run.
    pub duration: Duration,
    pub faults: Option<FaultSchedule>,
    /// Each replica flushes its log this often (`None`: only on a clean
    /// shutdown, as Kafka's default leaves flushing to the OS).
    pub flush_interval: Option<Duration>,
    /// A leader holds a fetch with nothing new this long at most.
    pub fetch_max_wait: Duration,
    /// A request with no answer is sent again after this long.
    pub request_timeout: Duration,
    /// A producer gives up on an answer after this long.
    pub produce_timeout: Duration,
    /// After producers stop: how long to wait for every replica to come
    /// back, catch up and rejoin the ISR.
    pub settle_timeout: Duration,
    /// Record a trace of every event (costly: a state copy per event).
    pub trace: bool,
}

impl ConcurrentConfig {
    /// Today's rules on 3 replicas: acks=all, min.insync.replicas=2,
    /// KIP-320 fencing, KIP-966 ELR; one producer, no faults, no trace.
    pub fn new(replicas: u32) -> ConcurrentConfig {
        ConcurrentConfig {
            replicas,
            replication: ReplicationConfig {
                replica_lag_time_max_ms: 1_000,
                ..ReplicationConfig::default()
            },
            unclean_leader_election: false,
            log: LogConfig::default(),
            hw_checkpoint: HwCheckpointPolicy::EveryChange,
            topic_partition: TopicPartition::new("highwater", 0).expect("a valid name"),
            acks: Acks::All,
            producers: 1,
            max_in_flight: 4,
            records_per_request: 1,
            record_bytes: 100,
            consumers: 0,
            duration: Duration::from_secs(1),
            faults: None,
            flush_interval: None,
            fetch_max_wait: Duration::from_millis(100),
            request_timeout: Duration::from_millis(300),
            produce_timeout: Duration::from_secs(2),
            settle_timeout: Duration::from_secs(20),
            trace: false,
        }
    }
}

/// A record a producer was told is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckedRecord {
    pub id: RecordId,
    pub offset: u64,
    pub epoch: LeaderEpoch,
}

/// A record a consumer read below a leader's HW.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumedRecord {
    pub consumer: usize,
    pub offset: u64,
    pub epoch: LeaderEpoch,
    pub id: Option<RecordId>,
}

/// What a run did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    /// How long producers ran.
    pub produce_elapsed: Duration,
    pub requests_sent: u64,
    pub records_sent: u64,
    /// Records acknowledged (acks=1 or all), with where and in which epoch.
    pub acked: Vec<AckedRecord>,
    /// Produce answers that were errors, by error.
    pub produce_errors: BTreeMap<String, u64>,
    /// Produce requests never answered within the produce timeout.
    pub produce_timeouts: u64,
    /// Acknowledgement latency of every acknowledged request, in
    /// microseconds, sorted.
    pub ack_latencies_us: Vec<u64>,
    pub consumed: Vec<ConsumedRecord>,
    /// Faults injected: (replica, clean).
    pub crashes: Vec<(ReplicaId, bool)>,
    /// Every replica came back, caught up and rejoined the ISR in time.
    pub settled: bool,
    /// Each replica's log at the end.
    pub final_logs: Vec<Vec<LogEntry>>,
    /// Each replica's state at the end (`None` if it never came back).
    pub final_states: Vec<Option<PartitionState>>,
    pub controller: ControllerState,
    /// Unexpected errors replicas met (storage failures and the like).
    pub errors: Vec<String>,
    pub trace: Trace,
}

impl RunReport {
    /// The log of the controller's leader at the end (replica 0's when
    /// there is none).
    pub fn final_leader_log(&self) -> &[LogEntry] {
        let l = self.controller.leader.unwrap_or(0) as usize;
        self.final_logs.get(l).map_or(&[], |v| v.as_slice())
    }

    /// Acknowledged records that are not at their offset in the final
    /// leader's log.
    pub fn lost_acknowledged(&self) -> Vec<AckedRecord> {
        let log = self.final_leader_log();
        self.acked
            .iter()
            .filter(|a| {
                log.get(a.offset as usize)
                    .is_none_or(|e| e.record_id != Some(a.id) || e.offset != a.offset)
            })
            .copied()
            .collect()
    }

    /// Consumed records that the final leader's log does not hold where
    /// they were read (a committed record lost or rewritten).
    pub fn consumed_not_in_final_log(&self) -> Vec<ConsumedRecord> {
        let log = self.final_leader_log();
        self.consumed
            .iter()
            .filter(|c| {
                log.get(c.offset as usize)
                    .is_none_or(|e| e.record_id != c.id || e.epoch != c.epoch)
            })
            .copied()
            .collect()
    }

    /// The acknowledgement latency at percentile `p` (0 to 100).
    pub fn latency_percentile(&self, p: f64) -> Option<Duration> {
        let v = &self.ack_latencies_us;
        if v.is_empty() {
            return None;
        }
        let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
        Some(Duration::from_micros(v[i.min(v.len() - 1)]))
    }
}

// --- Messages ------------------------------------------------------------------

enum Msg {
    LeaderAndIsr(LeaderAndIsr),
    Fetch {
        from: ReplicaId,
        req: FetchRequest,
    },
    FetchResponse(FetchResponse),
    OffsetsForLeaderEpoch {
        from: ReplicaId,
        req: OffsetsForLeaderEpochRequest,
    },
    OffsetsForLeaderEpochResponse(OffsetsForLeaderEpochResponse),
    AlterPartitionResponse(AlterPartitionResponse),
    Following {
        from: ReplicaId,
        leader: Option<(ReplicaId, LeaderEpoch)>,
    },
    PeerCrashed(ReplicaId),
    /// The controller changed the ISR within the leader epoch.
    IsrUpdate {
        leader_epoch: LeaderEpoch,
        isr: Vec<ReplicaId>,
    },
    Produce {
        producer: usize,
        req: ProduceRequest,
    },
    Crash {
        clean: bool,
    },
    Restart,
    Stop,
}

enum CtlMsg {
    AlterPartition {
        from: ReplicaId,
        req: AlterPartitionRequest,
    },
    BrokerStopped(ReplicaId),
    BrokerRegistered {
        replica: ReplicaId,
        unclean: bool,
        reply: Sender<Option<LeaderEpoch>>,
    },
    Stop,
}

/// What clients learn from the controller (Kafka's metadata).
#[derive(Debug, Clone, Default)]
struct Metadata {
    leader: Option<ReplicaId>,
    isr: Vec<ReplicaId>,
}

struct Shared {
    start: Instant,
    metadata: RwLock<Metadata>,
    readers: RwLock<Vec<Option<LogReader>>>,
    tracer: Tracer,
    errors: std::sync::Mutex<Vec<String>>,
    crashes: std::sync::Mutex<Vec<(ReplicaId, bool)>>,
    /// Producers, consumers and faults stop.
    stop_clients: AtomicBool,
}

impl Shared {
    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
    fn metadata(&self) -> Metadata {
        self.metadata
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    fn reader(&self, r: ReplicaId) -> Option<LogReader> {
        self.readers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(r as usize)
            .cloned()
            .flatten()
    }
    fn set_reader(&self, r: ReplicaId, reader: Option<LogReader>) {
        let mut g = self.readers.write().unwrap_or_else(|e| e.into_inner());
        g[r as usize] = reader;
    }
}

/// What a replica thread hands back: its partition (if up) and the errors
/// it met.
type ReplicaOutcome = (Option<Partition<DiskLog>>, Vec<String>);

/// Producer index carried in the top bits of a request id.
const PRODUCER_SHIFT: u32 = 48;

// --- Replica threads -------------------------------------------------------------

struct ReplicaNode {
    id: ReplicaId,
    dir: PathBuf,
    disk: DiskLogConfig,
    config: ConcurrentConfig,
    replicas: Vec<ReplicaId>,
    partition: Option<Partition<DiskLog>>,
    down_unclean: bool,
    peers: Vec<Sender<Msg>>,
    controller: Sender<CtlMsg>,
    producers: Vec<Sender<ProduceResponse>>,
    shared: Arc<Shared>,
    /// Fetches held until data arrives: (from, request, held since).
    parked: Vec<(ReplicaId, FetchRequest, u64)>,
    backoff_until: u64,
    last_flush: u64,
    last_isr_check: u64,
}

impl ReplicaNode {
    fn trace(&self, event: Event) {
        if self.shared.tracer.enabled() {
            let state = self.partition.as_ref().map(|p| p.state());
            self.shared
                .tracer
                .record(Actor::Replica(self.id), event, state, None);
        }
    }

    fn send(&self, to: ReplicaId, msg: Msg) {
        if let Some(s) = self.peers.get(to as usize) {
            let _ = s.send(msg);
        }
    }

    fn answer_producer(&self, resp: ProduceResponse) {
        let producer = (resp.request_id >> PRODUCER_SHIFT) as usize;
        if let Some(s) = self.producers.get(producer) {
            let _ = s.send(resp);
        }
    }

    fn open(&mut self) -> Result<()> {
        let (log, report) = DiskLog::open(&self.dir, &self.disk)?;
        let (tx, rx) = mpsc::channel();
        let _ = self.controller.send(CtlMsg::BrokerRegistered {
            replica: self.id,
            unclean: self.down_unclean,
            reply: tx,
        });
        // The model's restart: the broker takes the controller's epoch.
        let epoch = rx.recv().ok().flatten();
        let mut p = Partition::new(
            self.id,
            self.replicas.clone(),
            self.config.replication.clone(),
            log,
            epoch,
        )?;
        p.set_request_timeout_ms(self.config.request_timeout.as_millis() as u64);
        self.shared.set_reader(self.id, Some(p.log().reader()));
        self.partition = Some(p);
        self.down_unclean = false;
        self.trace(Event::Restart {
            log_end_offset: report.log_end_offset,
            high_watermark: report.high_watermark,
            recovery_point: report.recovery_point,
        });
        Ok(())
    }

    fn crash(&mut self, clean: bool) -> Result<()> {
        let Some(mut p) = self.partition.take() else {
            return Ok(());
        };
        // Waiting producers see the connection drop.
        for request_id in p.state().waiting_acks {
            self.answer_producer(ProduceResponse {
                request_id,
                result: Err(ApiError::NotLeaderOrFollower),
            });
        }
        p.take_outputs();
        self.shared.set_reader(self.id, None);
        self.parked.clear();
        let log = p.into_log();
        if clean {
            log.close()?;
        } else {
            log.crash()?;
        }
        self.down_unclean = !clean;
        self.trace(Event::Crash { clean });
        let _ = self.controller.send(CtlMsg::BrokerStopped(self.id));
        for &r in &self.replicas {
            if r != self.id {
                self.send(r, Msg::PeerCrashed(self.id));
            }
        }
        Ok(())
    }

    /// Delivers what the partition asked to be sent.
    fn route(&mut self) {
        let outputs = match self.partition.as_mut() {
            Some(p) => p.take_outputs(),
            None => return,
        };
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
                Output::AlterPartition(req) => {
                    let _ = self
                        .controller
                        .send(CtlMsg::AlterPartition { from: self.id, req });
                }
                Output::Fetch { to, request } => self.send(
                    to,
                    Msg::Fetch {
                        from: self.id,
                        req: request,
                    },
                ),
                Output::OffsetsForLeaderEpoch { to, request } => self.send(
                    to,
                    Msg::OffsetsForLeaderEpoch {
                        from: self.id,
                        req: request,
                    },
                ),
            }
        }
    }

    /// Handles one message; returns false on Stop.
    fn handle(&mut self, msg: Msg) -> Result<bool> {
        let now = self.shared.now();
        match msg {
            Msg::Stop => return Ok(false),
            Msg::Crash { clean } => self.crash(clean)?,
            Msg::Restart => {
                if self.partition.is_none() {
                    self.open()?;
                }
            }
            Msg::Produce { producer, req } => {
                let request_id = req.request_id;
                let Some(p) = self.partition.as_mut() else {
                    let _ = self.producers.get(producer).map(|s| {
                        s.send(ProduceResponse {
                            request_id,
                            result: Err(ApiError::NotLeaderOrFollower),
                        })
                    });
                    return Ok(true);
                };
                let ids: Vec<RecordId> = req.records.iter().filter_map(record_id).collect();
                let acks = req.acks;
                let result = p.produce(req).map(|a| (a.base_offset, a.leader_epoch));
                self.trace(Event::Produce {
                    request_id,
                    records: ids,
                    result,
                });
                if result.is_err() || acks == Acks::Leader {
                    self.answer_producer(ProduceResponse { request_id, result });
                }
            }
            other => {
                let Some(p) = self.partition.as_mut() else {
                    // A down broker hears nothing.
                    return Ok(true);
                };
                match other {
                    Msg::LeaderAndIsr(req) => match p.handle_leader_and_isr(&req, now) {
                        Ok(()) => {
                            self.parked.clear();
                            let event = if req.leader == Some(self.id) {
                                Event::BecomeLeader {
                                    epoch: req.leader_epoch,
                                }
                            } else {
                                Event::BecomeFollower {
                                    epoch: req.leader_epoch,
                                    leader: req.leader,
                                }
                            };
                            self.trace(event);
                        }
                        Err(Error::StaleLeaderAndIsr { .. }) => {
                            self.trace(Event::LeaderAndIsrRefused {
                                epoch: req.leader_epoch,
                            });
                        }
                        Err(e) => return Err(e),
                    },
                    Msg::Fetch { from, req } => self.serve_fetch(from, req, now),
                    Msg::FetchResponse(resp) => {
                        let p = self.partition.as_mut().expect("checked above");
                        let leader = resp.leader_id;
                        let expected = p.fetching_from() == Some(leader);
                        p.handle_fetch_response(&resp)?;
                        if resp.error.is_some() {
                            self.backoff_until = now + 10;
                        }
                        if expected {
                            let log = p.log();
                            let (leo, hw) = (log.log_end_offset(), log.high_watermark());
                            self.trace(Event::FetchApplied {
                                leader,
                                fetch_offset: resp.fetch_offset,
                                error: resp.error,
                                log_end_offset: leo,
                                high_watermark: hw,
                            });
                        }
                    }
                    Msg::OffsetsForLeaderEpoch { from, req } => {
                        let resp = p.handle_offsets_for_leader_epoch_request(&req);
                        self.send(from, Msg::OffsetsForLeaderEpochResponse(resp));
                    }
                    Msg::OffsetsForLeaderEpochResponse(resp) => {
                        let was_truncating = p.is_truncating();
                        p.handle_offsets_for_leader_epoch_response(&resp)?;
                        if resp.error.is_some() {
                            self.backoff_until = now + 10;
                        } else if was_truncating {
                            let leo = p.log().log_end_offset();
                            let done = !p.is_truncating();
                            self.trace(Event::Truncated {
                                leader: resp.leader_id,
                                log_end_offset: leo,
                                done,
                            });
                        }
                    }
                    Msg::AlterPartitionResponse(resp) => {
                        p.handle_alter_partition_response(&resp);
                        self.trace(Event::AlterPartitionAnswered {
                            change: resp.change,
                            result: resp.result,
                        });
                    }
                    Msg::Following { from, leader } => {
                        p.handle_following(from, leader);
                        self.trace(Event::FollowingNoticed {
                            follower: from,
                            leader,
                        });
                    }
                    Msg::PeerCrashed(r) => {
                        p.handle_peer_crashed(r);
                        self.trace(Event::PeerCrashNoticed { peer: r });
                    }
                    Msg::IsrUpdate { leader_epoch, isr } => {
                        if p.handle_isr_update(leader_epoch, &isr) {
                            self.trace(Event::IsrUpdated { isr });
                        }
                    }
                    Msg::Stop | Msg::Crash { .. } | Msg::Restart | Msg::Produce { .. } => {
                        unreachable!("handled above")
                    }
                }
            }
        }
        Ok(true)
    }

    /// The leader serves a fetch, or holds it while there is nothing to send.
    fn serve_fetch(&mut self, from: ReplicaId, req: FetchRequest, now: u64) {
        let Some(p) = self.partition.as_mut() else {
            return;
        };
        let resp = p.handle_fetch_request(&req, now);
        let hold = resp.error.is_none()
            && resp.records.is_empty()
            && !self
                .parked
                .iter()
                .any(|(f, q, _)| *f == from && q.correlation_id == req.correlation_id);
        self.trace(Event::FetchServed {
            follower: from,
            fetch_offset: req.fetch_offset,
            follower_epoch: req.current_leader_epoch,
            error: resp.error,
            log_end_offset: resp.log_end_offset,
            high_watermark: resp.high_watermark,
        });
        // Kafka expands the ISR while serving a fetch.
        self.maybe_expand(from, now);
        if hold {
            self.parked.push((from, req, now));
        } else {
            self.send(from, Msg::FetchResponse(resp));
        }
    }

    fn maybe_expand(&mut self, follower: ReplicaId, now: u64) {
        let Some(p) = self.partition.as_mut() else {
            return;
        };
        if p.is_leader() && !p.isr().contains(&follower) && p.is_caught_up_for_isr(follower) {
            if let Ok(req) = p.leader_expand_isr(follower, now) {
                // Recorded before it is sent: the trace keeps sends before receives.
                self.trace(Event::AlterPartitionSent { change: req.change });
                let _ = self
                    .controller
                    .send(CtlMsg::AlterPartition { from: self.id, req });
            }
        }
    }

    /// What a replica does on its own after each batch of messages.
    fn drive(&mut self) -> Result<()> {
        let now = self.shared.now();
        let Some(p) = self.partition.as_mut() else {
            return Ok(());
        };
        if p.is_leader() {
            if let Some(hw) = p.leader_advance_hw()? {
                self.trace(Event::LeaderAdvanceHw { high_watermark: hw });
                self.route();
            }
            // Held fetches go out once there is data or they waited enough.
            let p = self.partition.as_ref().expect("up");
            let leo = p.log().log_end_offset();
            let wait = self.config.fetch_max_wait.as_millis() as u64;
            let (ready, held): (Vec<_>, Vec<_>) = std::mem::take(&mut self.parked)
                .into_iter()
                .partition(|(_, q, since)| leo > q.fetch_offset || now >= since + wait);
            self.parked = held;
            for (from, req, _) in ready {
                let p = self.partition.as_mut().expect("up");
                let resp = p.handle_fetch_request(&req, now);
                self.trace(Event::FetchServed {
                    follower: from,
                    fetch_offset: req.fetch_offset,
                    follower_epoch: req.current_leader_epoch,
                    error: resp.error,
                    log_end_offset: resp.log_end_offset,
                    high_watermark: resp.high_watermark,
                });
                self.send(from, Msg::FetchResponse(resp));
            }
            let lag = self.config.replication.replica_lag_time_max_ms;
            if now >= self.last_isr_check + (lag / 4).max(1) {
                self.last_isr_check = now;
                let p = self.partition.as_mut().expect("up");
                for f in p.isr() {
                    if f != self.id && p.is_out_of_sync(f, now) {
                        if let Ok(req) = p.leader_shrink_isr(f, now) {
                            // Recorded before it is sent: the trace keeps sends before receives.
                            self.trace(Event::AlterPartitionSent { change: req.change });
                            let _ = self
                                .controller
                                .send(CtlMsg::AlterPartition { from: self.id, req });
                        }
                        break;
                    }
                }
            }
        } else if now >= self.backoff_until {
            if let Some((to, req)) = p.offsets_for_leader_epoch_request(now) {
                self.send(to, Msg::OffsetsForLeaderEpoch { from: self.id, req });
            } else if let Some((to, req)) = p.fetch_request(now) {
                self.send(to, Msg::Fetch { from: self.id, req });
            }
        }
        if let Some(every) = self.config.flush_interval {
            if now >= self.last_flush + every.as_millis() as u64 {
                self.last_flush = now;
                let p = self.partition.as_mut().expect("up");
                let before = p.log().recovery_point();
                p.flush()?;
                let rp = p.log().recovery_point();
                if rp != before {
                    self.trace(Event::Flush { recovery_point: rp });
                }
            }
        }
        let p = self.partition.as_mut().expect("up");
        p.log_mut().maybe_checkpoint(now)?;
        self.route();
        Ok(())
    }

    fn run(mut self, inbox: Receiver<Msg>) -> ReplicaOutcome {
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
                    Err(e) => errors.push(format!("replica {}: {e}", self.id)),
                }
                self.route();
            }
            if let Err(e) = self.drive() {
                errors.push(format!("replica {}: {e}", self.id));
            }
        }
        (self.partition, errors)
    }
}

// --- Controller thread -------------------------------------------------------------

struct ControllerNode {
    controller: Controller,
    replicas: Vec<Sender<Msg>>,
    shared: Arc<Shared>,
}

impl ControllerNode {
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
                    isr: self.controller.isr(),
                });
            }
        }
    }

    fn publish(&self) {
        let mut m = self
            .shared
            .metadata
            .write()
            .unwrap_or_else(|e| e.into_inner());
        m.leader = self.controller.leader();
        m.isr = self.controller.isr();
    }

    fn run(mut self, inbox: Receiver<CtlMsg>) -> Controller {
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
                    if let Some(s) = self.replicas.get(from as usize) {
                        let _ = s.send(Msg::AlterPartitionResponse(resp));
                    }
                }
                Ok(CtlMsg::BrokerStopped(r)) => {
                    let _ = self.controller.broker_stopped(r);
                    self.trace(Event::BrokerStopped { replica: r });
                    if self.controller.may_shrink_isr(r) {
                        if let Ok(sent) = self.controller.shrink_isr_on_failure(r) {
                            self.trace(Event::ControllerShrinkIsr { replica: r });
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
                }) => {
                    let isr_before = self.controller.isr();
                    match self.controller.broker_registered(replica, unclean) {
                        Ok(Some(req)) => self.broadcast(&req),
                        Ok(None) if self.controller.isr() != isr_before => self.send_isr_update(),
                        _ => {}
                    }
                    self.trace(Event::BrokerRegistered { replica, unclean });
                    let _ = reply.send(self.controller.leader_epoch());
                    // The restarted broker learns the current state.
                    if let Some(req) = self.controller.latest_request() {
                        if let Some(s) = self.replicas.get(replica as usize) {
                            let _ = s.send(Msg::LeaderAndIsr(req.clone()));
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if let Some((r, _)) = self.controller.candidate() {
                if let Ok((election, req)) = self.controller.elect_leader(r) {
                    self.trace(Event::ControllerElectLeader {
                        replica: r,
                        election,
                        epoch: req.leader_epoch,
                    });
                    self.broadcast(&req);
                }
            }
            self.publish();
        }
        self.controller
    }
}

// --- Clients -------------------------------------------------------------------------

#[derive(Default)]
struct ProducerResult {
    requests: u64,
    records: u64,
    acked: Vec<AckedRecord>,
    errors: BTreeMap<String, u64>,
    timeouts: u64,
    latencies_us: Vec<u64>,
}

/// Files a produce answer under its request: latency and acknowledged
/// records, or the error. Answers to requests already timed out are dropped.
fn record_answer(
    resp: ProduceResponse,
    in_flight: &mut HashMap<u64, (Instant, Vec<RecordId>)>,
    out: &mut ProducerResult,
) {
    let Some((sent, ids)) = in_flight.remove(&resp.request_id) else {
        return;
    };
    match resp.result {
        Ok((base, epoch)) => {
            out.latencies_us.push(sent.elapsed().as_micros() as u64);
            for (i, id) in ids.into_iter().enumerate() {
                out.acked.push(AckedRecord {
                    id,
                    offset: base + i as u64,
                    epoch,
                });
            }
        }
        Err(e) => *out.errors.entry(e.to_string()).or_default() += 1,
    }
}

fn run_producer(
    k: usize,
    config: ConcurrentConfig,
    shared: Arc<Shared>,
    replicas: Vec<Sender<Msg>>,
    answers: Receiver<ProduceResponse>,
) -> ProducerResult {
    let mut out = ProducerResult::default();
    let mut seq: u64 = 0;
    let mut in_flight: HashMap<u64, (Instant, Vec<RecordId>)> = HashMap::new();
    let value = vec![b'x'; config.record_bytes];
    let timeout = config.produce_timeout;
    while !shared.stop_clients.load(Ordering::Relaxed) {
        while in_flight.len() < config.max_in_flight {
            let Some(leader) = shared.metadata().leader else {
                break;
            };
            let request_id = ((k as u64) << PRODUCER_SHIFT) | seq;
            let ids: Vec<RecordId> = (0..config.records_per_request as u64)
                .map(|i| request_id * config.records_per_request as u64 + i)
                .collect();
            seq += 1;
            let records = ids
                .iter()
                .map(|&id| Record {
                    key: Some(record_key(id)),
                    ..Record::new(shared.start.elapsed().as_millis() as i64, value.clone())
                })
                .collect();
            let req = ProduceRequest {
                request_id,
                acks: config.acks,
                records,
            };
            out.requests += 1;
            out.records += ids.len() as u64;
            if replicas[leader as usize]
                .send(Msg::Produce { producer: k, req })
                .is_err()
            {
                break;
            }
            if config.acks != Acks::None {
                in_flight.insert(request_id, (Instant::now(), ids));
            } else if seq.is_multiple_of(config.max_in_flight as u64) {
                // No answers to wait for: pace the requests instead.
                thread::sleep(Duration::from_millis(1));
                break;
            }
        }
        match answers.recv_timeout(Duration::from_millis(5)) {
            Ok(resp) => record_answer(resp, &mut in_flight, &mut out),
            Err(RecvTimeoutError::Timeout) => {
                if in_flight.len() >= config.max_in_flight || shared.metadata().leader.is_none() {
                    thread::sleep(Duration::from_micros(200));
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let before = in_flight.len();
        in_flight.retain(|_, (sent, _)| sent.elapsed() < timeout);
        out.timeouts += (before - in_flight.len()) as u64;
    }
    // Answers still in the channel count; the rest time out.
    let deadline = Instant::now() + timeout;
    while !in_flight.is_empty() && Instant::now() < deadline {
        if let Ok(resp) = answers.recv_timeout(Duration::from_millis(10)) {
            record_answer(resp, &mut in_flight, &mut out);
        }
    }
    out.timeouts += in_flight.len() as u64;
    out
}

fn run_consumer(k: usize, shared: Arc<Shared>) -> Vec<ConsumedRecord> {
    let mut out = Vec::new();
    let mut pos = 0u64;
    while !shared.stop_clients.load(Ordering::Relaxed) {
        let reader = shared.metadata().leader.and_then(|l| shared.reader(l));
        let Some(reader) = reader else {
            thread::sleep(Duration::from_millis(1));
            continue;
        };
        match read_entries_once(&reader, pos) {
            Some(entries) if !entries.is_empty() => {
                for e in entries {
                    pos = e.offset + 1;
                    out.push(ConsumedRecord {
                        consumer: k,
                        offset: e.offset,
                        epoch: e.epoch,
                        id: e.record_id,
                    });
                }
            }
            _ => {
                reader.wait_for_high_watermark(pos, Duration::from_millis(5));
            }
        }
    }
    out
}

/// Records from `pos` below the reader's HW, in one read.
fn read_entries_once(reader: &LogReader, pos: u64) -> Option<Vec<LogEntry>> {
    let hw = reader.high_watermark();
    if pos >= hw {
        return None;
    }
    read_entries(reader, pos, hw).ok()
}

fn run_faults(schedule: FaultSchedule, shared: Arc<Shared>, replicas: Vec<Sender<Msg>>) {
    let n = replicas.len() as ReplicaId;
    let stopping = |shared: &Shared| shared.stop_clients.load(Ordering::Relaxed);
    let sleep = |d: Duration, shared: &Shared| {
        let until = Instant::now() + d;
        while Instant::now() < until && !stopping(shared) {
            thread::sleep(Duration::from_millis(2));
        }
    };
    sleep(schedule.first_after, &shared);
    let mut i = 0;
    let mut hits = vec![0u32; n as usize];
    while !stopping(&shared) && !schedule.faults.is_empty() {
        let m = shared.metadata();
        let full = m.isr.len() == n as usize && m.leader.is_some();
        if !full {
            thread::sleep(Duration::from_millis(5));
            continue;
        }
        let fault = schedule.faults[i % schedule.faults.len()];
        i += 1;
        let (victim, clean) = match fault {
            Fault::CrashLeader { clean } => (m.leader.expect("checked"), clean),
            Fault::CrashFollower { clean } => {
                // The follower crashed least so far.
                let l = m.leader.expect("checked");
                let r = (0..n)
                    .filter(|&r| r != l)
                    .min_by_key(|&r| (hits[r as usize], std::cmp::Reverse(r)))
                    .unwrap_or(l);
                (r, clean)
            }
        };
        hits[victim as usize] += 1;
        let _ = replicas[victim as usize].send(Msg::Crash { clean });
        shared
            .crashes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((victim, clean));
        // Restart even when the run is stopping: the settle phase needs it.
        thread::sleep(schedule.down_for);
        let _ = replicas[victim as usize].send(Msg::Restart);
        sleep(schedule.every, &shared);
    }
}

// --- The run -------------------------------------------------------------------------

/// Runs a concurrent cluster in `root` (one log directory per replica) and
/// reports what happened.
pub fn run(root: &Path, config: ConcurrentConfig) -> Result<RunReport> {
    if config.replicas == 0 || config.producers == 0 || config.max_in_flight == 0 {
        return Err(Error::InvalidConfig(
            "a run needs a replica, a producer and room for a request in flight".into(),
        ));
    }
    if config.records_per_request == 0 {
        return Err(Error::InvalidConfig(
            "a produce request needs a record".into(),
        ));
    }
    let ids: Vec<ReplicaId> = (0..config.replicas).collect();
    let controller = Controller::new(
        ids.clone(),
        ControllerConfig {
            min_insync_replicas: config.replication.min_insync_replicas,
            elr: config.replication.elr,
            unclean_leader_election: config.unclean_leader_election,
        },
    )?;
    let shared = Arc::new(Shared {
        start: Instant::now(),
        metadata: RwLock::new(Metadata::default()),
        readers: RwLock::new(vec![None; ids.len()]),
        tracer: Tracer::new(config.trace),
        errors: std::sync::Mutex::new(Vec::new()),
        crashes: std::sync::Mutex::new(Vec::new()),
        stop_clients: AtomicBool::new(false),
    });
    let disk = DiskLogConfig {
        topic_partition: config.topic_partition.clone(),
        log: config.log.clone(),
        hw_checkpoint: config.hw_checkpoint,
    };

    let (replica_tx, replica_rx): (Vec<Sender<Msg>>, Vec<Receiver<Msg>>) =
        ids.iter().map(|_| mpsc::channel()).unzip();
    let (ctl_tx, ctl_rx) = mpsc::channel();
    let (producer_tx, producer_rx): (Vec<_>, Vec<_>) =
        (0..config.producers).map(|_| mpsc::channel()).unzip();

    // Replicas open their logs before the controller starts, and register
    // then; the controller answers registrations once it runs.
    let mut replica_threads: Vec<JoinHandle<ReplicaOutcome>> = Vec::new();
    for (&id, inbox) in ids.iter().zip(replica_rx) {
        let dir = root.join(format!("broker-{id}"));
        let mut node = ReplicaNode {
            id,
            dir,
            disk: disk.clone(),
            config: config.clone(),
            replicas: ids.clone(),
            partition: None,
            down_unclean: false,
            peers: replica_tx.clone(),
            controller: ctl_tx.clone(),
            producers: producer_tx.clone(),
            shared: shared.clone(),
            parked: Vec::new(),
            backoff_until: 0,
            last_flush: 0,
            last_isr_check: 0,
        };
        replica_threads.push(thread::spawn(move || {
            if let Err(e) = node.open() {
                return (None, vec![format!("replica {}: open: {e}", node.id)]);
            }
            node.run(inbox)
        }));
    }
    let ctl_node = ControllerNode {
        controller,
        replicas: replica_tx.clone(),
        shared: shared.clone(),
    };
    let controller_thread = thread::spawn(move || ctl_node.run(ctl_rx));

    let mut producer_threads = Vec::new();
    for (k, answers) in producer_rx.into_iter().enumerate() {
        let (cfg, sh, rt) = (config.clone(), shared.clone(), replica_tx.clone());
        producer_threads.push(thread::spawn(move || run_producer(k, cfg, sh, rt, answers)));
    }
    let consumer_threads: Vec<_> = (0..config.consumers)
        .map(|k| {
            let sh = shared.clone();
            thread::spawn(move || run_consumer(k, sh))
        })
        .collect();
    let fault_thread = config.faults.clone().map(|f| {
        let (sh, rt) = (shared.clone(), replica_tx.clone());
        thread::spawn(move || run_faults(f, sh, rt))
    });

    let started = Instant::now();
    thread::sleep(config.duration);
    shared.stop_clients.store(true, Ordering::Relaxed);
    let produce_elapsed = started.elapsed();
    if let Some(t) = fault_thread {
        let _ = t.join();
    }
    let mut report = RunReport {
        produce_elapsed,
        requests_sent: 0,
        records_sent: 0,
        acked: Vec::new(),
        produce_errors: BTreeMap::new(),
        produce_timeouts: 0,
        ack_latencies_us: Vec::new(),
        consumed: Vec::new(),
        crashes: Vec::new(),
        settled: false,
        final_logs: Vec::new(),
        final_states: Vec::new(),
        controller: ControllerState {
            leader: None,
            leader_epoch: None,
            isr: vec![],
            elr: vec![],
            alive: vec![],
            ..ControllerState::default()
        },
        errors: Vec::new(),
        trace: Trace::default(),
    };
    for t in producer_threads {
        let p = t.join().unwrap_or_default();
        report.requests_sent += p.requests;
        report.records_sent += p.records;
        report.acked.extend(p.acked);
        for (e, n) in p.errors {
            *report.produce_errors.entry(e).or_default() += n;
        }
        report.produce_timeouts += p.timeouts;
        report.ack_latencies_us.extend(p.latencies_us);
    }
    report.ack_latencies_us.sort_unstable();
    for t in consumer_threads {
        report.consumed.extend(t.join().unwrap_or_default());
    }

    // Settle: every replica back, in the ISR, with the leader's log and HW.
    for tx in &replica_tx {
        let _ = tx.send(Msg::Restart);
    }
    let deadline = Instant::now() + config.settle_timeout;
    while Instant::now() < deadline {
        let m = shared.metadata();
        let settled = m.leader.is_some_and(|l| {
            let lr = shared.reader(l);
            m.isr.len() == ids.len()
                && lr.is_some_and(|lr| {
                    let leo = lr.log_end_offset();
                    lr.high_watermark() == leo
                        && ids.iter().all(|&r| {
                            shared.reader(r).is_some_and(|x| {
                                x.log_end_offset() == leo && x.high_watermark() == leo
                            })
                        })
                })
        });
        if settled {
            report.settled = true;
            break;
        }
        thread::sleep(Duration::from_millis(5));
    }

    for tx in &replica_tx {
        let _ = tx.send(Msg::Stop);
    }
    let mut partitions = Vec::new();
    for t in replica_threads {
        let (p, errors) = t
            .join()
            .unwrap_or_else(|_| (None, vec!["a replica thread panicked".into()]));
        report.errors.extend(errors);
        partitions.push(p);
    }
    let _ = ctl_tx.send(CtlMsg::Stop);
    let controller = controller_thread
        .join()
        .map_err(|_| Error::InvalidConfig("the controller thread panicked".into()))?;
    report.controller = controller.state();
    for p in partitions {
        match p {
            Some(p) => {
                report.final_logs.push(p.log().entries()?);
                report.final_states.push(Some(p.state()));
                p.into_log().close()?;
            }
            None => {
                report.final_logs.push(Vec::new());
                report.final_states.push(None);
            }
        }
    }
    report.errors.extend(
        shared
            .errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..),
    );
    report.crashes = shared
        .crashes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    report.trace = shared.tracer.take();
    Ok(report)
}
