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
//!
//! Each replica is a [`Replica`](crate::replication::Replica) on a
//! [`DiskLog`](crate::replication::DiskLog): its thread turns messages and
//! timers into inputs, and delivers the outputs. The parts, one a file:
//! `nodes.rs` (the replica and controller threads), `clients.rs`
//! (producers and consumers), `faults.rs` (the fault schedule), `report.rs`
//! (what a run reports), and here the configuration, the messages between
//! threads, and [`run`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, RwLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::trace::{Trace, Tracer};
use crate::replication::{
    Acks, AlterPartitionRequest, AlterPartitionResponse, Controller, ControllerConfig,
    ControllerState, DiskLogConfig, Error, FetchRequest, FetchResponse, LeaderAndIsr, LeaderEpoch,
    OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse, ProduceRequest, ReplicaId,
    ReplicaLog, ReplicationConfig, Result,
};
use crate::storage::{LogConfig, LogReader, TopicPartition};

mod clients;
mod disk;
mod faults;
mod nemesis;
mod nodes;
mod published;
mod report;
mod settle;
mod soak;

pub use super::trace::read_trace_file;
pub use faults::{Fault, FaultSchedule};
pub use nemesis::{Nemesis, NemesisFault};
pub use report::{AckedRecord, ConsumedRecord, RunReport};
pub use soak::{pace_for_validation, soak_config, RuleSet, SoakFigures};

use clients::{run_consumer, run_producer};
use faults::run_faults;
use nemesis::run_nemesis;
use nodes::{ControllerNode, ReplicaNode, ReplicaOutcome};

/// How a concurrent run is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConcurrentConfig {
    pub replicas: u32,
    pub replication: ReplicationConfig,
    pub unclean_leader_election: bool,
    pub log: LogConfig,
    pub topic_partition: TopicPartition,
    pub acks: Acks,
    /// Producer threads.
    pub producers: usize,
    /// Produce requests each producer keeps in flight.
    pub max_in_flight: usize,
    /// Producers send in bursts (`None`: without pause).
    pub bursts: Option<Bursts>,
    pub records_per_request: usize,
    /// Bytes of each record's value.
    pub record_bytes: usize,
    /// Consumer threads, each reading the whole log from the leader below
    /// its HW.
    pub consumers: usize,
    /// How long producers run at least (then on until `until`'s goals
    /// and the fault schedule's first round are met).
    pub duration: Duration,
    /// What producers run until, past `duration`: counts of what happened,
    /// so that a test's verdict rests on events, not on how much a machine
    /// got done in a time.
    pub until: RunUntil,
    /// How long after `duration` the run waits for `until` and the fault
    /// schedule's first round at most: a hang guard; a goal not met by
    /// then is named in the report (`RunReport::unmet_goals`).
    pub goal_timeout: Duration,
    pub faults: Option<FaultSchedule>,
    /// Faults chosen by seed, overlapping (in addition to `faults`).
    pub nemesis: Option<Nemesis>,
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
    /// With `trace`: stream the trace to this file, one JSON line an entry
    /// (each actor's state as the fields that changed),
    /// instead of keeping it in memory (memory stays bounded however long
    /// the run; the report's trace is then empty).
    pub trace_file: Option<std::path::PathBuf>,
    /// Producers stop after this many records in all (`None`: no limit).
    /// Small runs fit the model's bounds, so that their traces can be
    /// validated against it.
    pub max_records: Option<u64>,
    /// A deliberately broken rule of the driver (test-only switch), to show
    /// that trace validation catches concurrency bugs; `None` in real runs.
    pub inject: Option<InjectedFault>,
    /// Fault injection: while producers run, every write of a leader's HW
    /// with its checkpoint fails after the storage layer set the HW (as
    /// `DiskLog` does when the checkpoint write fails: set, fail, set
    /// back); the replica goes offline. Off in real runs.
    pub hw_checkpoints_fail: bool,
    /// A fault issue 12 found in the driver, brought back (test-only
    /// switch), to show that the test asserting its fix catches it; `None`
    /// in real runs.
    pub regress: Option<Regression>,
    /// Fault injection: every IsrUpdate the controller sends a leader is
    /// lost, as the one-shot update was while the leader was down or had
    /// its own ISR change in flight. Off in real runs.
    pub isr_updates_lost: bool,
    /// Fault injection: this broker's disk fills when the run stops its
    /// replicas, so that its final close fails (a full disk at the end of
    /// a run, where the report must survive). `None` in real runs.
    pub disk_full_at_stop: Option<ReplicaId>,
    /// Fault injection: every other read of every consumer fails, as a
    /// failing read does. Off in real runs.
    pub consumer_reads_fail: bool,
    /// Fault injection: these brokers start this much later than the
    /// run, each by its delay, as threads of a busy machine may. Empty in
    /// real runs.
    pub slow_start: Vec<(ReplicaId, Duration)>,
    /// Fault injection: the controller sends its first leader's
    /// LeaderAndIsr this much after it published the election (which
    /// clients read), as the thread of a busy machine may be held between
    /// the two. `None` in real runs.
    pub late_first_announcement: Option<Duration>,
}

/// Goals a run's producers run until (each `None`: not waited for).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunUntil {
    /// Records acknowledged (acks=0, which has no answers: records in the
    /// leader's log).
    pub acknowledged: Option<u64>,
    /// Records sent (with `max_records`, its whole budget).
    pub sent: Option<u64>,
    /// Records consumers read.
    pub consumed: Option<u64>,
    /// Faults the nemesis injected.
    pub nemesis_faults: Option<u64>,
    /// HW checkpoint writes that failed (`hw_checkpoints_fail`).
    pub checkpoint_failures: Option<u64>,
}

/// Paced producers: each sends `records` records, waits for every answer
/// and for every replica that is up to have flushed and checkpointed its
/// HW at the leader's log end (20 pauses at most, for a replica that does
/// not catch up), then pauses, so that the partition settles between
/// bursts however slow the machine (trace validation resumes only where
/// the records past a settled prefix fit the model's 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bursts {
    pub records: u64,
    pub pause: Duration,
}

/// The faults of the driver that issue 12 (and issue 21, for a busy
/// machine) fixed, each of which can be brought back by
/// `ConcurrentConfig::regress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Regression {
    /// `crash()` returns at once when the log's close or crash fails: the
    /// controller and the peers never hear of it, the trace does not
    /// either, and the broker comes back as after a clean shutdown.
    CrashReturnsEarlyOnError,
    /// Producers send again at once after an error answer.
    NoProducerBackoff,
    /// The leader learns the controller's own ISR changes only from the
    /// one-shot IsrUpdate, not from the metadata (`learn_isr` off): an
    /// update it misses leaves its ISR copy stale for good.
    IsrFromOneShotUpdateOnly,
    /// `run()` returns the first error of a final close (a full disk) and
    /// the report is lost.
    ReportLostOnCloseError,
    /// Consumers drop their read errors instead of counting them.
    ConsumerErrorsDropped,
    /// A held fetch is released only when its wait ends, not when records
    /// arrive: the wake-up by new data is lost.
    HeldFetchWakesOnTimerOnly,
    /// A follower traces as applied a late fetch response it dropped (one
    /// answering a fetch it has since sent again): the validator then
    /// forgets the response the follower will apply.
    LateFetchResponseTraced,
    /// The fault schedule takes a crash as done once it sent it, and a
    /// restart once sent: a broker slow to read its messages (paused,
    /// loaded) is restarted as soon as it crashes, and the next fault hits
    /// while it is still down.
    FaultDoneWhenSent,
    /// Faults begin as soon as the run does, not once every broker has
    /// started: a broker slow to start may be fenced or crashed before it
    /// ever registered.
    FaultsBeforeStart,
    /// Producers send to the leader the metadata names at once, before it
    /// has taken its leadership: the records it refuses are lost from a
    /// run's budget (`max_records`).
    ProduceBeforeLeaderServes,
}

/// A concurrency bug the driver can be told to have, each in the driver
/// (`nodes.rs`), none in the replication core that lockstep checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InjectedFault {
    /// A follower applies a fetch response from a leader of an older epoch
    /// (the driver relabels it as from its current leader).
    StaleEpochFetchResponse,
    /// A leader shrinks its own ISR copy as soon as it asks the controller,
    /// and advances its HW from that copy before the answer.
    HwFromUnconfirmedIsr,
    /// A follower takes the leader's LEO as its HW: an HW published to its
    /// readers before the leader's HW made it safe.
    HwPublishedEarly,
    /// `HwPublishedEarly`, only once the follower fetches from `offset` on
    /// (a bug that shows only in a long run: beyond the model's 4 records
    /// it is caught only because trace validation's window moves).
    HwPublishedEarlyFrom { offset: u64 },
    /// The leader applies an ISR change twice: the controller's last ISR
    /// update (a removal) is taken again after the leader's next accepted
    /// AlterPartition.
    IsrChangeAppliedTwice,
    /// The order the driver once had: consumers read below the HW the
    /// storage layer publishes as soon as it is set, before the checkpoint
    /// that may fail (and set it back), instead of the HW the replica
    /// publishes once the operation completed.
    HwPublishedBeforeCheckpoint,
    /// A follower ignores a diverging epoch in its leader's answer (takes
    /// it as an empty answer): it never truncates, and its log never joins
    /// the leader's again.
    DivergingEpochIgnored,
    /// A consumer reads the record at the HW too (an off-by-one in the
    /// read's bound): it may read a record before it is committed.
    ConsumerReadsPastHw,
    /// A leader publishes to consumers the HW a fetch would let it reach
    /// before it checks the fetch (a fenced or refused fetch then makes
    /// uncommitted records visible) and before its HW advance is traced.
    HwPublishedBeforeFetchChecked,
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
            topic_partition: TopicPartition::new("highwater", 0).expect("a valid name"),
            acks: Acks::All,
            producers: 1,
            max_in_flight: 4,
            records_per_request: 1,
            record_bytes: 100,
            consumers: 0,
            duration: Duration::from_secs(1),
            until: RunUntil::default(),
            goal_timeout: Duration::from_secs(120),
            faults: None,
            nemesis: None,
            flush_interval: None,
            fetch_max_wait: Duration::from_millis(100),
            request_timeout: Duration::from_millis(300),
            produce_timeout: Duration::from_secs(2),
            settle_timeout: Duration::from_secs(20),
            trace: false,
            trace_file: None,
            max_records: None,
            bursts: None,
            inject: None,
            hw_checkpoints_fail: false,
            regress: None,
            isr_updates_lost: false,
            disk_full_at_stop: None,
            consumer_reads_fail: false,
            slow_start: Vec::new(),
            late_first_announcement: None,
        }
    }
}

// --- Messages ------------------------------------------------------------------

pub(super) enum Msg {
    LeaderAndIsr(LeaderAndIsr),
    Fetch {
        from: ReplicaId,
        req: FetchRequest,
    },
    FetchResponse(FetchResponse),
    OffsetsForLeaderEpoch(OffsetsForLeaderEpochRequest),
    OffsetsForLeaderEpochResponse(OffsetsForLeaderEpochResponse),
    AlterPartitionResponse(AlterPartitionResponse),
    Following {
        from: ReplicaId,
        leader: Option<(ReplicaId, LeaderEpoch)>,
    },
    PeerCrashed(ReplicaId),
    /// A message from a peer's incarnation: dropped if that incarnation
    /// has crashed since (its connections are gone; nothing it sent before
    /// the crash arrives after it, as over TCP).
    Peer {
        from: ReplicaId,
        incarnation: u64,
        msg: Box<Msg>,
    },
    /// The controller changed the ISR within the leader epoch.
    IsrUpdate {
        leader_epoch: LeaderEpoch,
        partition_epoch: u32,
        isr: Vec<ReplicaId>,
    },
    Produce {
        producer: usize,
        req: ProduceRequest,
    },
    Crash {
        clean: bool,
    },
    /// The broker's disk fills, then it shuts down cleanly: the shutdown
    /// fails (its checkpoints cannot be written).
    CrashOnFullDisk,
    Restart,
    /// The nemesis's fence ends: the broker, if it is up, is heard from
    /// again (`CtlMsg::BrokerHeartbeat`). Sent through the broker's own
    /// thread, so that it is never heard from while down: a restart still
    /// queued, or a crash, comes first.
    Unfence,
    /// The broker stops handling messages this long (a pause).
    Pause(Duration),
    /// The broker says on `held` that it stopped handling messages, and
    /// handles none until `release` is dropped (the nemesis's strand).
    Hold {
        held: Sender<()>,
        release: Receiver<()>,
    },
    /// Answered once the broker has handled every message sent before it
    /// (the fault schedule waits for its crash or restart to take effect).
    Barrier(Sender<()>),
    Stop,
}

pub(super) enum CtlMsg {
    AlterPartition {
        from: ReplicaId,
        req: AlterPartitionRequest,
    },
    BrokerStopped(ReplicaId),
    /// A broker that is up is heard from (the nemesis's fence ended); it
    /// waits for the answer, so that nothing it does (a crash) comes
    /// between its heartbeat and the controller taking it.
    BrokerHeartbeat {
        replica: ReplicaId,
        reply: Sender<Option<LeaderEpoch>>,
    },
    BrokerRegistered {
        replica: ReplicaId,
        unclean: bool,
        reply: Sender<Option<LeaderEpoch>>,
    },
    Stop,
}

/// What clients learn from the controller (Kafka's metadata).
#[derive(Debug, Clone, Default)]
pub(super) struct Metadata {
    pub(super) leader: Option<ReplicaId>,
    pub(super) leader_epoch: Option<LeaderEpoch>,
    pub(super) partition_epoch: u32,
    pub(super) isr: Vec<ReplicaId>,
}

pub(super) struct Shared {
    pub(super) start: Instant,
    pub(super) metadata: published::MetadataCell,
    pub(super) readers: RwLock<Vec<Option<LogReader>>>,
    /// Each replica's HW as published to consumers.
    pub(super) hws: Vec<published::PublishedHw>,
    /// HW checkpoints fail (`ConcurrentConfig::hw_checkpoints_fail`) until
    /// producers stop.
    pub(super) checkpoints_fail: Arc<AtomicBool>,
    pub(super) tracer: Tracer,
    pub(super) errors: std::sync::Mutex<Vec<String>>,
    pub(super) crashes: std::sync::Mutex<Vec<(ReplicaId, bool)>>,
    /// Producers, consumers and faults stop.
    pub(super) stop_clients: AtomicBool,
    /// Records producers sent so far (for `max_records`).
    pub(super) records_sent: crate::sync::AtomicU64,
    /// What `RunUntil` counts: records acknowledged, records consumed,
    /// faults the nemesis injected, HW checkpoint writes that failed.
    pub(super) records_acked: std::sync::atomic::AtomicU64,
    pub(super) checkpoint_failures: std::sync::atomic::AtomicU64,
    pub(super) records_consumed: std::sync::atomic::AtomicU64,
    pub(super) nemesis_injected: std::sync::atomic::AtomicU64,
    /// Passes of a leader's thread that left a fetch held although records
    /// for it had arrived (`RunReport::lost_wakeups`).
    pub(super) lost_wakeups: std::sync::atomic::AtomicU64,
    /// With `bursts`: each replica's settled end, the offset below which
    /// its log is flushed and its HW checkpointed (the least of its HW,
    /// recovery point and HW checkpoint), for paced producers to wait on.
    pub(super) settled: Vec<std::sync::atomic::AtomicU64>,
    /// Each replica's disk is full (set by the nemesis).
    pub(super) disk_full: Vec<Arc<std::sync::atomic::AtomicBool>>,
    /// Each replica's incarnation: how many times it crashed.
    pub(super) incarnations: Vec<std::sync::atomic::AtomicU64>,
    /// Acknowledgements of records no follower holds (the nemesis's
    /// strand watches for them).
    pub(super) stranded: nemesis::StrandWatch,
}

impl Shared {
    pub(super) fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
    pub(super) fn metadata(&self) -> Metadata {
        self.metadata.get()
    }
    pub(super) fn incarnation(&self, r: ReplicaId) -> u64 {
        self.incarnations
            .get(r as usize)
            .map_or(0, |i| i.load(Ordering::SeqCst))
    }
    pub(super) fn reader(&self, r: ReplicaId) -> Option<LogReader> {
        self.readers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(r as usize)
            .cloned()
            .flatten()
    }
    /// The HW replica `r` published to consumers.
    pub(super) fn published_hw(&self, r: ReplicaId) -> Option<&published::PublishedHw> {
        self.hws.get(r as usize)
    }
    pub(super) fn set_reader(&self, r: ReplicaId, reader: Option<LogReader>) {
        let mut g = self.readers.write().unwrap_or_else(|e| e.into_inner());
        g[r as usize] = reader;
    }
}

/// Producer index carried in the top bits of a request id.
pub(super) const PRODUCER_SHIFT: u32 = 48;

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
        metadata: published::MetadataCell::default(),
        readers: RwLock::new(vec![None; ids.len()]),
        hws: ids
            .iter()
            .map(|_| published::PublishedHw::default())
            .collect(),
        checkpoints_fail: Arc::new(AtomicBool::new(config.hw_checkpoints_fail)),
        tracer: match (&config.trace_file, config.trace) {
            (Some(path), true) => Tracer::to_file(path)?,
            _ => Tracer::new(config.trace),
        },
        records_sent: crate::sync::AtomicU64::new(0),
        records_acked: std::sync::atomic::AtomicU64::new(0),
        checkpoint_failures: std::sync::atomic::AtomicU64::new(0),
        records_consumed: std::sync::atomic::AtomicU64::new(0),
        nemesis_injected: std::sync::atomic::AtomicU64::new(0),
        lost_wakeups: std::sync::atomic::AtomicU64::new(0),
        settled: ids
            .iter()
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect(),
        disk_full: ids
            .iter()
            .map(|_| Arc::new(AtomicBool::new(false)))
            .collect(),
        stranded: nemesis::StrandWatch::default(),
        incarnations: ids
            .iter()
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect(),
        errors: std::sync::Mutex::new(Vec::new()),
        crashes: std::sync::Mutex::new(Vec::new()),
        stop_clients: AtomicBool::new(false),
    });
    let disk = DiskLogConfig {
        topic_partition: config.topic_partition.clone(),
        log: config.log.clone(),
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
        let mut node = ReplicaNode::new(
            id,
            dir,
            disk.clone(),
            config.clone(),
            ids.clone(),
            replica_tx.clone(),
            ctl_tx.clone(),
            producer_tx.clone(),
            shared.clone(),
        );
        let late = config
            .slow_start
            .iter()
            .find(|&&(r, _)| r == id)
            .map(|&(_, d)| d);
        replica_threads.push(thread::spawn(move || {
            if let Some(d) = late {
                thread::sleep(d);
            }
            if let Err(e) = node.open() {
                return (None, vec![format!("replica {id}: open: {e}")]);
            }
            node.run(inbox)
        }));
    }
    let ctl_node = ControllerNode::new(
        controller,
        replica_tx.clone(),
        shared.clone(),
        config.late_first_announcement,
    );
    let controller_thread = thread::spawn(move || ctl_node.run(ctl_rx));

    let mut producer_threads = Vec::new();
    for (k, answers) in producer_rx.into_iter().enumerate() {
        let (cfg, sh, rt) = (config.clone(), shared.clone(), replica_tx.clone());
        producer_threads.push(thread::spawn(move || run_producer(k, cfg, sh, rt, answers)));
    }
    let consumer_threads: Vec<_> = (0..config.consumers)
        .map(|k| {
            let sh = shared.clone();
            let how = clients::ConsumerRules {
                storage_hw: config.inject == Some(InjectedFault::HwPublishedBeforeCheckpoint),
                reads_fail: config.consumer_reads_fail,
                drop_errors: config.regress == Some(Regression::ConsumerErrorsDropped),
                past_hw: config.inject == Some(InjectedFault::ConsumerReadsPastHw),
            };
            thread::spawn(move || run_consumer(k, sh, how))
        })
        .collect();
    // Faults begin once every broker has started (the controller elects
    // its first leader only then): on a busy machine a broker's start once
    // came after the nemesis had fenced it, a start the model has no step
    // for (min.insync.replicas=1 soak, seed 4, under a load of 20).
    let deadline = Instant::now() + config.goal_timeout;
    let wait_for_start = config.regress != Some(Regression::FaultsBeforeStart);
    while wait_for_start && shared.metadata().leader.is_none() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    let started_unmet = (wait_for_start && shared.metadata().leader.is_none()).then(|| {
        format!(
            "the cluster's start (a first leader) within the goal timeout of {:?}",
            config.goal_timeout
        )
    });
    // The schedule says when its first round of faults is done.
    let (round_done, first_round) = mpsc::channel();
    let fault_thread = config.faults.clone().map(|f| {
        let (sh, rt) = (shared.clone(), replica_tx.clone());
        let when_sent = config.regress == Some(Regression::FaultDoneWhenSent);
        thread::spawn(move || run_faults(f, sh, rt, when_sent, round_done))
    });

    let nemesis_thread = config.nemesis.clone().map(|n| {
        let (sh, rt, ct) = (shared.clone(), replica_tx.clone(), ctl_tx.clone());
        let paced = config.bursts.is_some();
        thread::spawn(move || run_nemesis(n, sh, rt, ct, paced))
    });

    let started = Instant::now();
    thread::sleep(config.duration);
    // Producers run on until each goal is met (however slow the machine),
    // or the goal timeout passes (a partition that never heals).
    let mut unmet_goals: Vec<String> = started_unmet.into_iter().collect();
    unmet_goals.extend(wait_for_goals(
        &config,
        &shared,
        fault_thread.is_some(),
        &first_round,
    ));
    shared.stop_clients.store(true, Ordering::Relaxed);
    shared.checkpoints_fail.store(false, Ordering::SeqCst);
    let produce_elapsed = started.elapsed();
    if let Some(t) = fault_thread {
        let _ = t.join();
    }
    let nemesis_faults = nemesis_thread
        .map(|t| t.join().unwrap_or_default())
        .unwrap_or_default();
    let mut report = RunReport {
        produce_elapsed,
        produce_span: None,
        unmet_goals,
        requests_sent: 0,
        records_sent: 0,
        acked: Vec::new(),
        produce_errors: BTreeMap::new(),
        produce_timeouts: 0,
        ack_latencies_us: Vec::new(),
        lost_wakeups: 0,
        sent_within_backoff: 0,
        consumed: Vec::new(),
        consumer_errors: BTreeMap::new(),
        crashes: Vec::new(),
        nemesis_faults,
        settled: false,
        stalled_followers: Vec::new(),
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
    let (mut first_send, mut last_answer) = (None::<Instant>, None::<Instant>);
    for t in producer_threads {
        let p = t.join().unwrap_or_default();
        first_send = first_send.into_iter().chain(p.first_send).min();
        last_answer = last_answer.into_iter().chain(p.last_answer).max();
        report.requests_sent += p.requests;
        report.records_sent += p.records;
        report.acked.extend(p.acked);
        for (e, n) in p.errors {
            *report.produce_errors.entry(e).or_default() += n;
        }
        report.produce_timeouts += p.timeouts;
        report.sent_within_backoff += p.sent_within_backoff;
        report.ack_latencies_us.extend(p.latencies_us);
    }
    report.ack_latencies_us.sort_unstable();
    report.produce_span = first_send
        .zip(last_answer)
        .map(|(a, b)| b.saturating_duration_since(a));
    for t in consumer_threads {
        let c = t.join().unwrap_or_default();
        report.consumed.extend(c.consumed);
        for (e, n) in c.errors {
            *report.consumer_errors.entry(e).or_default() += n;
        }
    }

    // Settle: every replica back, in the ISR, with the leader's log and HW.
    for tx in &replica_tx {
        let _ = tx.send(Msg::Restart);
    }
    let settled = settle::settle(&shared, &ids, config.settle_timeout);
    report.settled = settled.healed;
    report.stalled_followers = settled.stalled;

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
    if let Some(full) = config
        .disk_full_at_stop
        .and_then(|r| shared.disk_full.get(r as usize))
    {
        full.store(true, Ordering::SeqCst);
    }
    // A log that cannot be read or closed (a full disk) is an error in the
    // report, not the loss of the report.
    for (r, p) in partitions.into_iter().enumerate() {
        match p {
            Some(p) => {
                match p.log().entries() {
                    Ok(entries) => report.final_logs.push(entries),
                    Err(e) => {
                        report.errors.push(format!("replica {r}: final log: {e}"));
                        report.final_logs.push(Vec::new());
                    }
                }
                report.final_states.push(Some(p.core().state()));
                if let Err(e) = p.into_log().close() {
                    if config.regress == Some(Regression::ReportLostOnCloseError) {
                        return Err(e);
                    }
                    report.errors.push(format!("replica {r}: close: {e}"));
                }
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
    report.lost_wakeups = shared.lost_wakeups.load(Ordering::SeqCst);
    report.crashes = shared
        .crashes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    report.trace = shared.tracer.take();
    if let Some(e) = shared.tracer.finish() {
        report.errors.push(format!("trace file: {e}"));
    }
    Ok(report)
}

/// Waits until the fault schedule's first round (`scheduled`: there is a
/// schedule; `first_round` says when it is done) and each of
/// `config.until`'s goals are met, or `config.goal_timeout` passes; returns
/// the goals not met, each with how far it got.
fn wait_for_goals(
    config: &ConcurrentConfig,
    shared: &Shared,
    scheduled: bool,
    first_round: &Receiver<()>,
) -> Vec<String> {
    let deadline = Instant::now() + config.goal_timeout;
    let mut round_done = !scheduled;
    loop {
        round_done = round_done || first_round.try_recv().is_ok();
        let u = &config.until;
        let acknowledged = if config.acks == Acks::None {
            let m = shared.metadata();
            m.leader
                .and_then(|l| shared.reader(l))
                .map_or(0, |r| r.log_end_offset())
        } else {
            shared.records_acked.load(Ordering::SeqCst)
        };
        let goals = [
            ("records acknowledged", u.acknowledged, acknowledged),
            (
                "records sent",
                u.sent,
                shared.records_sent.load(Ordering::SeqCst),
            ),
            (
                "records consumed",
                u.consumed,
                shared.records_consumed.load(Ordering::SeqCst),
            ),
            (
                "nemesis faults",
                u.nemesis_faults,
                shared.nemesis_injected.load(Ordering::SeqCst),
            ),
            (
                "HW checkpoints failed",
                u.checkpoint_failures,
                shared.checkpoint_failures.load(Ordering::SeqCst),
            ),
        ];
        let mut unmet: Vec<String> = goals
            .iter()
            .filter_map(|&(what, goal, got)| {
                goal.filter(|&g| got < g)
                    .map(|g| format!("{what}: {got} of {g}"))
            })
            .collect();
        if !round_done {
            unmet.push("the fault schedule's first round".into());
        }
        if unmet.is_empty() {
            return unmet;
        }
        if Instant::now() >= deadline {
            return unmet
                .into_iter()
                .map(|u| format!("{u} within the goal timeout of {:?}", config.goal_timeout))
                .collect();
        }
        thread::sleep(Duration::from_millis(2));
    }
}
