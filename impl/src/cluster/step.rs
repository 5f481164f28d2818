//! The deterministic step driver: N replicas, each a [`Replica`] on its own
//! log (a data directory in Kafka's format, or a [`MemoryLog`]), and a
//! controller, in one thread. Each call performs exactly one protocol
//! action, named as the model's actions, so a test or the conformance crate
//! chooses the interleaving. A request and its response (a fetch, an
//! OffsetsForLeaderEpoch exchange, an AlterPartition) travel within the one
//! step, as the model's actions are atomic.
//!
//! An action that is not enabled returns [`Error::NotEnabled`] (or, for a
//! refused produce, [`Error::Api`]) and changes nothing: every check comes
//! before the first input, and the clock moves only with a step taken.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::snapshot::{ClusterSnapshot, RecordHistory, ReplicaSnapshot};
use crate::replication::log::record_key;
use crate::replication::{
    Acks, AlterPartitionRequest, Controller, ControllerConfig, DiskLog, DiskLogConfig, Election,
    Error, HwCheckpointPolicy, Input, LeaderAndIsr, LeaderEpoch, LogEntry, MemoryLog, Output,
    Partition, ProduceRequest, RecordId, Replica, ReplicaId, ReplicaLog, ReplicationConfig, Result,
    StoppedImage, Tick,
};
use crate::storage::{EpochCache, LogConfig, Record, RecoveryReport, TopicPartition};

/// How a step cluster is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepConfig {
    /// Replica ids are `0..replicas`.
    pub replicas: u32,
    pub replication: ReplicationConfig,
    /// `unclean.leader.election.enable`.
    pub unclean_leader_election: bool,
    /// The producer's acks.
    pub acks: Acks,
    pub log: LogConfig,
    pub topic_partition: TopicPartition,
    /// How a down replica's image (its log, HW and recovery point in
    /// [`StepCluster::snapshot`]) is taken: read back from what it left
    /// (for a [`DiskLog`], a copy of its files opened and recovered as a
    /// restart would), or, when `false`, predicted from what its log held
    /// when it stopped. Prediction is how the step driver worked before it
    /// read files back; conformance keeps it to show what reading catches.
    pub read_back_stopped: bool,
}

impl StepConfig {
    /// Today's rules (the model's `safe` preset) on `replicas` replicas.
    pub fn new(replicas: u32) -> StepConfig {
        StepConfig {
            replicas,
            replication: ReplicationConfig {
                // The model's fetch takes everything the leader has.
                replica_fetch_max_bytes: usize::MAX,
                ..ReplicationConfig::default()
            },
            unclean_leader_election: false,
            acks: Acks::All,
            log: LogConfig::default(),
            topic_partition: TopicPartition::new("highwater", 0).expect("a valid name"),
            read_back_stopped: true,
        }
    }

    pub fn controller_config(&self) -> ControllerConfig {
        ControllerConfig {
            min_insync_replicas: self.replication.min_insync_replicas,
            elr: self.replication.elr,
            unclean_leader_election: self.unclean_leader_election,
        }
    }
}

/// One step, named and shaped as the model's `Action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StepAction {
    ControllerElectLeader {
        replica: ReplicaId,
        election: Election,
    },
    ControllerShrinkIsr {
        replica: ReplicaId,
    },
    ControllerUnfence {
        replica: ReplicaId,
    },
    BecomeLeader {
        replica: ReplicaId,
        epoch: LeaderEpoch,
    },
    BecomeFollower {
        replica: ReplicaId,
        epoch: LeaderEpoch,
    },
    Produce {
        leader: ReplicaId,
        record: RecordId,
    },
    FollowerFetch {
        follower: ReplicaId,
        leader: ReplicaId,
    },
    /// A fetch cut to one batch by the follower's `replica.fetch.max.bytes`.
    FollowerFetchOne {
        follower: ReplicaId,
        leader: ReplicaId,
    },
    /// A fetch cut at `records` records: the model's trace validation
    /// takes it from a trace; the checker never lists it, and these steps
    /// do not take it (no byte limit cuts at a given record here).
    FollowerFetchPart {
        follower: ReplicaId,
        leader: ReplicaId,
        records: u64,
    },
    LeaderAdvanceHw {
        leader: ReplicaId,
        hw: u64,
    },
    LeaderShrinkIsr {
        leader: ReplicaId,
        follower: ReplicaId,
    },
    LeaderExpandIsr {
        leader: ReplicaId,
        follower: ReplicaId,
    },
    LeaderLearnsIsr {
        leader: ReplicaId,
    },
    Flush {
        replica: ReplicaId,
    },
    CheckpointHw {
        replica: ReplicaId,
    },
    Crash {
        replica: ReplicaId,
        clean: bool,
    },
    Restart {
        replica: ReplicaId,
    },
}

/// A replica that is down: what its log holds, and what it restarts from.
#[derive(Debug)]
struct Down<S> {
    /// Or why it could not be read back (its files would not recover).
    image: std::result::Result<StoppedImage, String>,
    unclean: bool,
    /// `None` when the log failed to stop: there is nothing to restart from.
    stopped: Option<S>,
}

#[derive(Debug)]
enum NodeState<L: ReplicaLog> {
    Up(Box<Replica<L>>),
    Down(Down<L::Stopped>),
}

/// An in-process cluster driven one action at a time, on logs of type `L`
/// ([`DiskLog`] by default).
#[derive(Debug)]
pub struct StepCluster<L: ReplicaLog = DiskLog> {
    config: StepConfig,
    nodes: Vec<NodeState<L>>,
    controller: Controller,
    /// Logical milliseconds; every step taken advances it.
    clock: u64,
    records: BTreeMap<RecordId, RecordHistory>,
    next_record: RecordId,
    clean_crashes: u32,
    unclean_crashes: u32,
    leader_moves: u32,
}

fn not_enabled<T>(why: String) -> Result<T> {
    Err(Error::NotEnabled(why))
}

impl StepCluster<DiskLog> {
    /// A cluster whose replica `i` keeps its log directory in
    /// `root/broker-<i>`; every replica is alive with an empty log, no
    /// leader is elected yet, and every replica is in the ISR.
    pub fn new(root: &Path, config: StepConfig) -> Result<StepCluster<DiskLog>> {
        let disk = DiskLogConfig {
            log: config.log.clone(),
            ..DiskLogConfig::new(config.topic_partition.clone())
        };
        let mut logs = Vec::new();
        for id in 0..config.replicas {
            let dir = root.join(format!("broker-{id}"));
            fs::create_dir_all(&dir)
                .map_err(|e| crate::storage::Error::io(&dir, "create directory", e))?;
            logs.push(DiskLog::open(&dir, &disk)?.0);
        }
        StepCluster::with_logs(config, logs)
    }

    /// The replica's log directory.
    pub fn data_dir(&self, r: ReplicaId) -> Option<PathBuf> {
        match self.nodes.get(r as usize)? {
            NodeState::Up(p) => Some(p.log().path().to_path_buf()),
            NodeState::Down(d) => d.stopped.as_ref().map(|s| s.dir.clone()),
        }
    }
}

impl StepCluster<MemoryLog> {
    /// As [`StepCluster::new`], every log in memory.
    pub fn in_memory(config: StepConfig) -> Result<StepCluster<MemoryLog>> {
        let logs = (0..config.replicas).map(|_| MemoryLog::new()).collect();
        StepCluster::with_logs(config, logs)
    }
}

impl<L: ReplicaLog> StepCluster<L> {
    /// A cluster on `logs` (replica `i` on `logs[i]`), with no leader yet
    /// and every replica in the ISR.
    pub fn with_logs(config: StepConfig, logs: Vec<L>) -> Result<StepCluster<L>> {
        if config.replicas == 0 || logs.len() != config.replicas as usize {
            return Err(Error::InvalidConfig(format!(
                "{} replicas on {} logs",
                config.replicas,
                logs.len()
            )));
        }
        let ids: Vec<ReplicaId> = (0..config.replicas).collect();
        let controller = Controller::new(ids.clone(), config.controller_config())?;
        let mut nodes = Vec::new();
        for (id, log) in ids.iter().zip(logs) {
            let r = Replica::new(*id, ids.clone(), config.replication.clone(), log, None)?;
            nodes.push(NodeState::Up(Box::new(r)));
        }
        Ok(StepCluster {
            config,
            nodes,
            controller,
            clock: 0,
            records: BTreeMap::new(),
            next_record: 0,
            clean_crashes: 0,
            unclean_crashes: 0,
            leader_moves: 0,
        })
    }

    pub fn config(&self) -> &StepConfig {
        &self.config
    }
    pub fn controller(&self) -> &Controller {
        &self.controller
    }
    /// The logical time in milliseconds.
    pub fn now(&self) -> u64 {
        self.clock
    }
    /// A running replica.
    pub fn replica(&self, r: ReplicaId) -> Option<&Replica<L>> {
        match self.nodes.get(r as usize)? {
            NodeState::Up(p) => Some(p),
            NodeState::Down(_) => None,
        }
    }
    /// A down replica's image: what it would restart with (see
    /// [`StepConfig::read_back_stopped`]), or why its files would not
    /// recover; `None` for a running replica.
    pub fn stopped_image(&self, r: ReplicaId) -> Option<std::result::Result<&StoppedImage, &str>> {
        match self.nodes.get(r as usize)? {
            NodeState::Up(_) => None,
            NodeState::Down(d) => Some(d.image.as_ref().map_err(|e| e.as_str())),
        }
    }
    /// A running replica's state machine.
    pub fn partition(&self, r: ReplicaId) -> Option<&Partition> {
        self.replica(r).map(|p| p.core())
    }
    pub fn is_alive(&self, r: ReplicaId) -> bool {
        self.replica(r).is_some()
    }
    /// What happened to each record produced so far.
    pub fn records(&self) -> &BTreeMap<RecordId, RecordHistory> {
        &self.records
    }

    fn up(&self, r: ReplicaId) -> Result<&Replica<L>> {
        match self.nodes.get(r as usize) {
            None => Err(Error::UnknownReplica(r)),
            Some(NodeState::Up(p)) => Ok(p),
            Some(NodeState::Down(_)) => not_enabled(format!("replica {r} is down")),
        }
    }

    fn up_mut(&mut self, r: ReplicaId) -> Result<&mut Replica<L>> {
        match self.nodes.get_mut(r as usize) {
            None => Err(Error::UnknownReplica(r)),
            Some(NodeState::Up(p)) => Ok(p),
            Some(NodeState::Down(_)) => not_enabled(format!("replica {r} is down")),
        }
    }

    /// Gives replica `r` one input at `now`.
    fn input(&mut self, r: ReplicaId, now: u64, input: Input) -> Result<Vec<Output>> {
        self.up_mut(r)?.handle(now, input)
    }

    /// Delivers what replica `from` said outside a request and response:
    /// fetch-session notices to its peers, and producer answers.
    fn route(&mut self, from: ReplicaId, now: u64, outputs: Vec<Output>) -> Result<()> {
        for out in outputs {
            match out {
                Output::Following { leader } => {
                    for n in 0..self.nodes.len() as ReplicaId {
                        if n != from && self.is_alive(n) {
                            let notice = Input::Following {
                                follower: from,
                                leader,
                            };
                            self.input(n, now, notice)?;
                        }
                    }
                }
                Output::Produce(resp) => {
                    if let (Ok((_, epoch)), Some(h)) =
                        (resp.result, self.records.get_mut(&resp.request_id))
                    {
                        h.acked = Some(h.acked.map_or(epoch, |a| a.min(epoch)));
                    }
                }
                // Requests and their answers are carried by the steps that
                // make them; appends are recorded by `produce`.
                Output::Appended { .. }
                | Output::Fetch { .. }
                | Output::FetchResponse { .. }
                | Output::OffsetsForLeaderEpoch { .. }
                | Output::OffsetsForLeaderEpochResponse { .. }
                | Output::AlterPartition(_) => {}
            }
        }
        Ok(())
    }

    /// Records below a leader's HW are visible to consumers: remember the
    /// lowest epoch at which each was.
    fn publish_visible(&mut self, leader: ReplicaId) -> Result<()> {
        let p = self.up(leader)?;
        let Some(epoch) = p.core().leader_epoch() else {
            return Ok(());
        };
        let hw = p.log().state().high_watermark;
        let entries = p.log().entries()?;
        for e in entries.iter().filter(|e| e.offset < hw) {
            if let Some(h) = e.record_id.and_then(|id| self.records.get_mut(&id)) {
                h.visible = Some(h.visible.map_or(epoch, |v| v.min(epoch)));
            }
        }
        Ok(())
    }

    // --- Controller ---------------------------------------------------------

    /// ControllerElectLeader: the controller makes `replica` the leader in a
    /// new epoch (the LeaderAndIsr is delivered by later steps). A clean
    /// election may move leadership while a leader is named (counted in the
    /// snapshot's `leader_moves`).
    pub fn controller_elect_leader(&mut self, replica: ReplicaId) -> Result<Election> {
        let moving = self.controller.leader().is_some();
        let (kind, _) = self.controller.elect_leader(replica)?;
        self.clock += 1;
        if moving {
            self.leader_moves += 1;
        }
        Ok(kind)
    }

    /// ControllerShrinkIsr: the controller sees `replica` fail, or believes
    /// a running one did (missed heartbeats): it fences a running broker
    /// (until [`controller_unfence`](Self::controller_unfence)) and removes
    /// it from the ISR. Refused when that changes nothing.
    pub fn controller_shrink_isr(&mut self, replica: ReplicaId) -> Result<()> {
        let fences = self.is_alive(replica) && self.controller.is_alive(replica);
        let shrinks = self.controller.may_shrink_isr(replica);
        let fences_to_effect = fences && self.controller.fence_matters(replica);
        if !(shrinks || fences_to_effect) {
            return not_enabled(format!(
                "the controller can neither fence replica {replica} to any effect nor remove \
                 it from the ISR"
            ));
        }
        if fences {
            self.controller.broker_stopped(replica)?;
        }
        if shrinks {
            self.controller.shrink_isr_on_failure(replica)?;
        }
        self.clock += 1;
        self.unfence_where_it_unblocks_nothing()
    }

    /// Unfences every running broker whose fence unblocks no election
    /// (`Controller::fence_matters`), as the model forgets such a fence: it
    /// only holds the broker back until its unfence, which may come at once.
    fn unfence_where_it_unblocks_nothing(&mut self) -> Result<()> {
        for r in 0..self.nodes.len() as ReplicaId {
            if self.is_alive(r) && !self.controller.is_alive(r) && !self.controller.fence_matters(r)
            {
                self.controller.broker_unfenced(r)?;
            }
        }
        Ok(())
    }

    /// ControllerUnfence: a running broker the controller fenced heartbeats
    /// again and is unfenced.
    pub fn controller_unfence(&mut self, replica: ReplicaId) -> Result<()> {
        if !self.is_alive(replica) {
            return not_enabled(format!("replica {replica} is down"));
        }
        self.controller.broker_unfenced(replica)?;
        self.clock += 1;
        Ok(())
    }

    // --- LeaderAndIsr ---------------------------------------------------------

    fn request_for(&self, replica: ReplicaId, epoch: LeaderEpoch) -> Result<LeaderAndIsr> {
        let p = self.up(replica)?.core();
        let Some(req) = self.controller.request(epoch) else {
            return not_enabled(format!("no LeaderAndIsr was sent for epoch {epoch}"));
        };
        if !p.accepts_leader_and_isr(epoch) {
            return not_enabled(format!(
                "replica {replica} does not take epoch {epoch} (it is at {:?})",
                p.leader_epoch()
            ));
        }
        Ok(req.clone())
    }

    /// BecomeLeader: `replica`, named leader by the LeaderAndIsr of `epoch`,
    /// takes over.
    pub fn become_leader(&mut self, replica: ReplicaId, epoch: LeaderEpoch) -> Result<()> {
        let req = self.request_for(replica, epoch)?;
        if req.leader != Some(replica) {
            return not_enabled(format!(
                "epoch {epoch} does not name replica {replica} leader"
            ));
        }
        let now = self.clock + 1;
        let out = self.input(replica, now, Input::LeaderAndIsr(req))?;
        self.clock = now;
        self.route(replica, now, out)?;
        self.publish_visible(replica)
    }

    /// BecomeFollower: `replica` follows the LeaderAndIsr of `epoch` and
    /// truncates: to its HW (`hw`), or where OffsetsForLeaderEpoch exchanges
    /// with the leader say. The exchanges need the leader leading (under
    /// `fenced`, in that epoch); until then the step is not enabled.
    pub fn become_follower(&mut self, replica: ReplicaId, epoch: LeaderEpoch) -> Result<()> {
        let req = self.request_for(replica, epoch)?;
        if req.leader == Some(replica) {
            return not_enabled(format!("epoch {epoch} names replica {replica} leader"));
        }
        if let Some(l) = req.leader {
            if self.config.replication.truncation.asks_leader() {
                let ready = self.partition(l).is_some_and(|lp| {
                    lp.is_leader()
                        && (!self.config.replication.fencing || lp.leader_epoch() == Some(epoch))
                });
                if !ready {
                    return not_enabled(format!(
                        "leader {l} cannot answer OffsetsForLeaderEpoch in epoch {epoch}"
                    ));
                }
            }
        }
        let now = self.clock + 1;
        let out = self.input(replica, now, Input::LeaderAndIsr(req))?;
        self.clock = now;
        self.route(replica, now, out)?;
        // KIP-101/279: ask until the follower knows where to truncate.
        while self.up(replica)?.core().is_truncating() {
            let Ok(out) = self.input(replica, now, Input::Tick(Tick::SendRequest)) else {
                break;
            };
            for o in out {
                let Output::OffsetsForLeaderEpoch { to, request } = o else {
                    continue;
                };
                for answer in self.input(to, now, Input::OffsetsForLeaderEpoch(request))? {
                    let Output::OffsetsForLeaderEpochResponse { response, .. } = answer else {
                        continue;
                    };
                    if let Some(e) = response.error {
                        // Ruled out above; reported rather than looped on.
                        return Err(Error::Api(e));
                    }
                    self.input(replica, now, Input::OffsetsForLeaderEpochResponse(response))?;
                }
            }
        }
        Ok(())
    }

    // --- Produce, fetch, HW ----------------------------------------------------------

    /// Produce: the next record (id = number of records produced so far)
    /// goes to `leader` with the configured acks. Refusals (not the leader,
    /// NotEnoughReplicas) change nothing.
    pub fn produce(&mut self, leader: ReplicaId) -> Result<RecordId> {
        let id = self.next_record;
        let acks = self.config.acks;
        let now = self.clock + 1;
        let record = Record {
            key: Some(record_key(id)),
            ..Record::new(now as i64, format!("record-{id}"))
        };
        let req = ProduceRequest {
            request_id: id,
            acks,
            records: vec![record],
        };
        let out = self.input(leader, now, Input::Produce(req))?;
        let appended = out.iter().find_map(|o| match *o {
            Output::Appended {
                base_offset,
                leader_epoch,
                ..
            } => Some((base_offset, leader_epoch)),
            _ => None,
        });
        let Some((offset, _)) = appended else {
            let refusal = out.iter().find_map(|o| match o {
                Output::Produce(r) => r.result.err(),
                _ => None,
            });
            return Err(refusal.map_or_else(
                || Error::not_enabled(format!("replica {leader} did not append")),
                Error::Api,
            ));
        };
        self.clock = now;
        self.next_record += 1;
        self.records.insert(
            id,
            RecordHistory {
                offset,
                acked: None,
                visible: None,
            },
        );
        self.route(leader, now, out)?;
        Ok(id)
    }

    /// FollowerFetch: `follower` fetches from its leader. Returns the leader.
    pub fn follower_fetch(&mut self, follower: ReplicaId) -> Result<ReplicaId> {
        self.follower_fetch_limited(follower, None)
    }

    /// A fetch whose response carries at most `max_bytes` (at least one
    /// batch, as Kafka's KIP-74): the follower's `replica.fetch.max.bytes`
    /// for this fetch (None: as configured).
    pub fn follower_fetch_limited(
        &mut self,
        follower: ReplicaId,
        max_bytes: Option<usize>,
    ) -> Result<ReplicaId> {
        let f = self.up(follower)?.core();
        let Some(leader) = f.fetching_from() else {
            return not_enabled(format!("replica {follower} is not fetching"));
        };
        let epoch = f.leader_epoch();
        let ready = self.partition(leader).is_some_and(|l| {
            l.is_leader() && (!self.config.replication.fencing || l.leader_epoch() == epoch)
        });
        if leader == follower || !ready {
            return not_enabled(format!("leader {leader} does not serve {follower}'s fetch"));
        }
        let now = self.clock + 1;
        let Ok(out) = self.input(follower, now, Input::Tick(Tick::SendRequest)) else {
            return not_enabled(format!("replica {follower} has a fetch in flight"));
        };
        self.clock = now;
        for o in out {
            let Output::Fetch { to, mut request } = o else {
                continue;
            };
            if let Some(max) = max_bytes {
                request.max_bytes = max;
            }
            for answer in self.input(to, now, Input::Fetch(request))? {
                if let Output::FetchResponse { response, .. } = answer {
                    self.input(follower, now, Input::FetchResponse(response))?;
                }
            }
        }
        Ok(leader)
    }

    /// LeaderAdvanceHw: the leader moves its HW as far as it may now
    /// (Kafka's `Partition.maybeIncrementLeaderHW`): to the lowest LEO over
    /// its ISR and the caught-up followers waiting to join it, or, when
    /// that does not move it, after `replica.lag.time.max.ms` (see
    /// [`StepCluster::lag_passed`]), over its ISR alone. It answers the
    /// acks=all producers it passed. Returns the new HW.
    pub fn leader_advance_hw(&mut self, leader: ReplicaId) -> Result<u64> {
        let p = self.up(leader)?.core();
        let (soon, later) = (self.clock + 1, self.lag_passed());
        let at = if p.advanced_hw(soon).is_some() {
            soon
        } else {
            later
        };
        self.advance_hw_at(leader, at)
    }

    /// LeaderAdvanceHw to `hw`, the HW the leader moves to either now,
    /// waiting for caught-up followers outside its ISR, or once
    /// `replica.lag.time.max.ms` has passed for them (the model offers
    /// both).
    pub fn leader_advance_hw_to(&mut self, leader: ReplicaId, hw: u64) -> Result<()> {
        let p = self.up(leader)?.core();
        let (soon, later) = (self.clock + 1, self.lag_passed());
        let at = if p.advanced_hw(soon) == Some(hw) {
            soon
        } else if p.advanced_hw(later) == Some(hw) {
            later
        } else {
            return not_enabled(format!("leader {leader} cannot move its HW to {hw}"));
        };
        self.advance_hw_at(leader, at).map(drop)
    }

    /// The leader's HW step at time `at` (the step's time, or one where the
    /// lag has passed); the clock then goes on from the step's time.
    fn advance_hw_at(&mut self, leader: ReplicaId, at: u64) -> Result<u64> {
        let out = self.input(leader, at, Input::Tick(Tick::AdvanceHw))?;
        self.clock += 1;
        self.route(leader, at, out)?;
        self.publish_visible(leader)?;
        Ok(self.up(leader)?.core().log_state().high_watermark)
    }

    /// A time at which `replica.lag.time.max.ms` has passed since every
    /// follower last caught up, for a step that asks whether it has (a
    /// shrink, an HW that stops waiting for a follower outside the ISR).
    /// The clock does not stay there: the model has no clock, and lets the
    /// lag time pass, or not, anew at each step; a follower timed out for
    /// one step counts as caught up again at the next, as in the model.
    /// (Runs are far shorter than the lag time, in steps of 1 ms.)
    fn lag_passed(&self) -> u64 {
        self.clock + self.config.replication.replica_lag_time_max_ms + 2
    }

    // --- ISR changes -------------------------------------------------------------------

    /// LeaderShrinkIsr: replica.lag.time.max.ms passes, and the leader drops
    /// `follower` if it is out of sync; the controller must accept.
    pub fn leader_shrink_isr(&mut self, leader: ReplicaId, follower: ReplicaId) -> Result<()> {
        let now = self.lag_passed();
        self.leader_changes_isr(leader, now, Tick::ShrinkIsr(follower))?;
        // The lag passed for this step only (see `lag_passed`).
        self.clock -= self.config.replication.replica_lag_time_max_ms + 1;
        Ok(())
    }

    /// LeaderExpandIsr: the leader takes caught-up `follower` back; the
    /// controller must accept.
    pub fn leader_expand_isr(&mut self, leader: ReplicaId, follower: ReplicaId) -> Result<()> {
        let now = self.clock + 1;
        self.leader_changes_isr(leader, now, Tick::ExpandIsr(follower))
    }

    /// The leader asks, the controller answers, the leader takes the
    /// answer; a refusal by the controller leaves both as they were.
    fn leader_changes_isr(&mut self, leader: ReplicaId, now: u64, tick: Tick) -> Result<()> {
        let out = self.input(leader, now, Input::Tick(tick))?;
        let req: Option<AlterPartitionRequest> = out.into_iter().find_map(|o| match o {
            Output::AlterPartition(r) => Some(r),
            _ => None,
        });
        let Some(req) = req else {
            return not_enabled(format!("leader {leader} asked for no ISR change"));
        };
        // A refusal leaves the controller as it was.
        let resp = self.controller.alter_partition(&req);
        self.input(leader, now, Input::AlterPartitionResponse(resp.clone()))?;
        match resp.result {
            Ok(_) => {
                self.clock = now;
                Ok(())
            }
            Err(e) => not_enabled(format!(
                "the controller refused leader {leader}'s ISR change: {e}"
            )),
        }
    }

    /// LeaderLearnsIsr: the leader of the controller's current epoch learns
    /// the ISR the controller shrank on its own (Kafka's metadata update).
    pub fn leader_learns_isr(&mut self, leader: ReplicaId) -> Result<()> {
        // The controller's ISR, if it names `leader` in the epoch `leader`
        // leads; else, if `leader` still leads an epoch the controller has
        // left (even one whose successor names it again), the next ISR
        // update of that epoch it has not applied (a broker applies the
        // metadata in order).
        let own = self.up(leader)?.core();
        let current = match (self.controller.leader(), self.controller.leader_epoch()) {
            (Some(l), Some(e)) if l == leader && own.leader_epoch() == Some(e) => {
                Some((e, self.controller.isr(), None))
            }
            _ => None,
        };
        let left_behind = own
            .leader_epoch()
            .filter(|_| own.is_leader())
            .and_then(|e| {
                let later = self.controller.left_epoch_isrs_after(e, &own.isr());
                // One that does not name it the model has it skip.
                let (isr, pe) = later.iter().find(|(isr, _)| isr.contains(&leader))?;
                Some((e, isr.clone(), Some(*pe)))
            });
        let Some((epoch, isr, partition_epoch)) = current.or(left_behind) else {
            return not_enabled(format!(
                "the controller does not name replica {leader} leader, nor has it left an \
                 epoch replica {leader} leads"
            ));
        };
        let before = self.up(leader)?.core().isr();
        // Checked before the update is given: one of a newer partition
        // epoch with the same ISR (an ELR or recovery change) is taken, and
        // moves the leader's partition epoch, but is nothing to learn.
        if before == isr {
            return not_enabled(format!("leader {leader} has nothing to learn"));
        }
        let now = self.clock + 1;
        let update = Input::IsrUpdate {
            leader_epoch: epoch,
            partition_epoch: partition_epoch.unwrap_or(self.controller.partition_epoch()),
            isr,
        };
        self.input(leader, now, update)?;
        if self.up(leader)?.core().isr() == before {
            return not_enabled(format!("leader {leader} has nothing to learn"));
        }
        self.clock = now;
        Ok(())
    }

    // --- Durability, crash, restart ---------------------------------------------------

    /// Flush: the replica fsyncs its log; its recovery point moves to its LEO.
    pub fn flush(&mut self, replica: ReplicaId) -> Result<()> {
        let now = self.clock + 1;
        self.input(replica, now, Input::Tick(Tick::Flush))?;
        self.clock = now;
        Ok(())
    }

    /// CheckpointHw: the replica writes its HW to
    /// `replication-offset-checkpoint`, as Kafka's periodic task does
    /// (refused unless the HW is checkpointed periodically).
    pub fn checkpoint_hw(&mut self, replica: ReplicaId) -> Result<()> {
        if self.config.replication.hw_checkpoint == HwCheckpointPolicy::EveryChange {
            return not_enabled(format!(
                "replica {replica} checkpoints its HW with every change"
            ));
        }
        let now = self.clock + 1;
        self.input(replica, now, Input::Tick(Tick::CheckpointHw))?;
        self.clock = now;
        Ok(())
    }

    /// Crash: the broker stops. Clean: its log is flushed and closed (with
    /// the clean-shutdown marker on disk). Unclean: its in-memory state is
    /// dropped and everything above the recovery point is lost. Its peers
    /// see its connections drop; the controller sees its registration lapse.
    pub fn crash(&mut self, replica: ReplicaId, clean: bool) -> Result<()> {
        let p = self.up(replica)?;
        let mut log = p.log().entries()?;
        let state = p.log().state();
        let at_crash = if clean {
            // A clean shutdown checkpoints the HW.
            StoppedImage {
                high_watermark: state.high_watermark,
                recovery_point: state.log_end_offset,
                hw_checkpoint: state.high_watermark,
                log,
                epochs: state.epochs,
                files: None,
            }
        } else {
            log.retain(|e| e.offset < state.recovery_point);
            let end = log.last().map_or(state.log_start_offset, |e| e.offset + 1);
            let mut epochs = EpochCache::new(Path::new(""), state.epochs);
            epochs.truncate_from_end(end);
            // The HW comes back from its last checkpoint, within the log.
            StoppedImage {
                high_watermark: state.hw_checkpoint.min(end),
                recovery_point: state.recovery_point,
                hw_checkpoint: state.hw_checkpoint,
                log,
                epochs: epochs.entries().to_vec(),
                files: None,
            }
        };
        let i = replica as usize;
        let gone = NodeState::Down(Down {
            image: Ok(at_crash.clone()),
            unclean: !clean,
            stopped: None,
        });
        let NodeState::Up(p) = std::mem::replace(&mut self.nodes[i], gone) else {
            unreachable!("checked above");
        };
        // A log that fails to stop stays down with nothing to restart from.
        let log = p.into_log();
        let stopped = if clean { log.close()? } else { log.crash()? };
        // What the stopped log holds, read back when the log can be (else
        // what it held when it stopped). Files that would not recover are
        // reported by the snapshot: the broker did stop.
        let read = self
            .config
            .read_back_stopped
            .then(|| L::read_stopped(&stopped))
            .flatten();
        let image = match read {
            Some(read) => read.map_err(|e| e.to_string()),
            None => Ok(at_crash),
        };
        self.nodes[i] = NodeState::Down(Down {
            image,
            unclean: !clean,
            stopped: Some(stopped),
        });
        self.clock += 1;
        let now = self.clock;
        for n in 0..self.nodes.len() as ReplicaId {
            if self.is_alive(n) {
                self.input(n, now, Input::PeerCrashed(replica))?;
            }
        }
        self.controller.broker_stopped(replica)?;
        if clean {
            self.clean_crashes += 1;
        } else {
            self.unclean_crashes += 1;
        }
        Ok(())
    }

    /// Restart: a stopped broker opens its log (through recovery after an
    /// unclean crash) and registers with the controller, taking the
    /// controller's epoch; it waits for a LeaderAndIsr. Not while the
    /// controller still names it leader.
    pub fn restart(&mut self, replica: ReplicaId) -> Result<RecoveryReport> {
        let down = match self.nodes.get(replica as usize) {
            None => return Err(Error::UnknownReplica(replica)),
            Some(NodeState::Up(_)) => return not_enabled(format!("replica {replica} is running")),
            Some(NodeState::Down(d)) => d,
        };
        if self.controller.leader() == Some(replica) {
            return not_enabled(format!(
                "the controller still names replica {replica} leader"
            ));
        }
        let Some(stopped) = &down.stopped else {
            return not_enabled(format!("replica {replica}'s log did not stop cleanly"));
        };
        let unclean = down.unclean;
        let (log, report) = L::restart(stopped)?;
        let p = Replica::new(
            replica,
            self.controller.replicas().to_vec(),
            self.config.replication.clone(),
            log,
            self.controller.leader_epoch(),
        )?;
        self.nodes[replica as usize] = NodeState::Up(Box::new(p));
        self.controller.broker_registered(replica, unclean)?;
        self.clock += 1;
        Ok(report)
    }

    // --- Model-shaped access -------------------------------------------------------------

    /// Performs one action given as the model names it; the parameters the
    /// model's action carries beyond the replicas (election kind, HW) must
    /// match what the implementation does, else nothing happens.
    pub fn apply(&mut self, action: StepAction) -> Result<()> {
        let done = self.apply_step(action);
        // A step that changes the ISR, ELR or last known leader may leave a
        // fence that no longer unblocks anything.
        self.unfence_where_it_unblocks_nothing()?;
        done
    }

    fn apply_step(&mut self, action: StepAction) -> Result<()> {
        match action {
            StepAction::ControllerElectLeader { replica, election } => {
                match self.controller.election_kind(replica) {
                    Some(k) if k == election => self.controller_elect_leader(replica).map(drop),
                    k => not_enabled(format!(
                        "replica {replica} would be elected {k:?}, not {election:?}"
                    )),
                }
            }
            StepAction::ControllerShrinkIsr { replica } => self.controller_shrink_isr(replica),
            StepAction::ControllerUnfence { replica } => self.controller_unfence(replica),
            StepAction::BecomeLeader { replica, epoch } => self.become_leader(replica, epoch),
            StepAction::BecomeFollower { replica, epoch } => self.become_follower(replica, epoch),
            StepAction::Produce { leader, record } => {
                if record != self.next_record {
                    return not_enabled(format!(
                        "the next record is {}, not {record}",
                        self.next_record
                    ));
                }
                self.produce(leader).map(drop)
            }
            StepAction::FollowerFetch { follower, leader } => {
                if self.up(follower)?.core().fetching_from() != Some(leader) {
                    return not_enabled(format!("replica {follower} does not fetch from {leader}"));
                }
                self.follower_fetch(follower).map(drop)
            }
            StepAction::FollowerFetchOne { follower, leader } => {
                if self.up(follower)?.core().fetching_from() != Some(leader) {
                    return not_enabled(format!("replica {follower} does not fetch from {leader}"));
                }
                // A fetch is cut short only when there is more than one
                // record to copy (one batch a record, as producers send
                // them here); otherwise it is a whole fetch.
                let leo = |r| self.up(r).map(|p| p.core().state().log_end_offset);
                let lacking = leo(leader)?.saturating_sub(leo(follower)?);
                if lacking < 2 {
                    return not_enabled(format!(
                        "replica {follower} lacks {lacking} record(s): nothing to cut short"
                    ));
                }
                self.follower_fetch_limited(follower, Some(1)).map(drop)
            }
            StepAction::FollowerFetchPart { records, .. } => not_enabled(format!(
                "a fetch cut at {records} records is not a step here (the checker never takes one)"
            )),
            StepAction::LeaderAdvanceHw { leader, hw } => self.leader_advance_hw_to(leader, hw),
            StepAction::LeaderShrinkIsr { leader, follower } => {
                self.leader_shrink_isr(leader, follower)
            }
            StepAction::LeaderExpandIsr { leader, follower } => {
                self.leader_expand_isr(leader, follower)
            }
            StepAction::LeaderLearnsIsr { leader } => self.leader_learns_isr(leader),
            StepAction::Flush { replica } => self.flush(replica),
            StepAction::CheckpointHw { replica } => self.checkpoint_hw(replica),
            StepAction::Crash { replica, clean } => self.crash(replica, clean),
            StepAction::Restart { replica } => self.restart(replica).map(drop),
        }
    }

    /// The whole cluster: each running replica's log, HW, LEO and recovery
    /// point read from its log (its files, for a [`DiskLog`]) and checked
    /// against what its state machine believes; a stopped one's as its log
    /// holds it.
    pub fn snapshot(&self) -> Result<ClusterSnapshot> {
        let mut replicas = Vec::new();
        for (id, n) in self.nodes.iter().enumerate() {
            let id = id as ReplicaId;
            replicas.push(match n {
                NodeState::Up(p) => up_snapshot(id, p)?,
                NodeState::Down(d) => {
                    let image = d.image.as_ref().map_err(|e| {
                        Error::Inconsistent(format!(
                            "replica {id} is down, and its files would not recover: {e}"
                        ))
                    })?;
                    ReplicaSnapshot::down(
                        id,
                        image.log.clone(),
                        image.log.len() as u64 + log_start(&image.log),
                        image.high_watermark,
                        image.recovery_point,
                        image.hw_checkpoint,
                        d.unclean,
                    )
                }
            });
        }
        Ok(ClusterSnapshot {
            replicas,
            controller: self.controller.state(),
            requests: std::sync::Arc::new(self.controller.requests().clone()),
            epoch_isrs: std::sync::Arc::new(self.controller.epoch_isrs()),
            records: std::sync::Arc::new(self.records.clone()),
            clean_crashes: self.clean_crashes,
            unclean_crashes: self.unclean_crashes,
            leader_moves: self.leader_moves,
        })
    }
}

/// A running replica as the snapshot shows it.
fn up_snapshot<L: ReplicaLog>(id: ReplicaId, p: &Replica<L>) -> Result<ReplicaSnapshot> {
    let held = p.log().state();
    if &held != p.core().log_state() {
        return Err(Error::Inconsistent(format!(
            "replica {id} believes its log is {:?}, but it is {held:?}",
            p.core().log_state()
        )));
    }
    let s = p.core().state();
    Ok(ReplicaSnapshot {
        id,
        alive: true,
        log: p.log().entries()?,
        high_watermark: held.high_watermark,
        log_end_offset: held.log_end_offset,
        recovery_point: held.recovery_point,
        hw_checkpoint: held.hw_checkpoint,
        leader_epoch: s.leader_epoch,
        leader: s.leader,
        isr: s.isr,
        follower_leo: s
            .followers
            .iter()
            .map(|(&r, v)| (r, v.log_end_offset))
            .collect(),
        stale_fetch: s
            .followers
            .iter()
            .filter(|(_, v)| v.stale_fetch)
            .map(|(&r, _)| r)
            .collect(),
        pending_acks: s.waiting_acks,
        unclean_down: false,
        truncating: p.core().is_truncating(),
    })
}

/// The first offset of a log given as entries (no retention here: 0 when empty).
fn log_start(entries: &[LogEntry]) -> u64 {
    entries.first().map_or(0, |e| e.offset)
}

impl<L> Clone for StepCluster<L>
where
    L: ReplicaLog + Clone,
    L::Stopped: Clone,
{
    fn clone(&self) -> Self {
        StepCluster {
            config: self.config.clone(),
            nodes: self
                .nodes
                .iter()
                .map(|n| match n {
                    NodeState::Up(p) => NodeState::Up(p.clone()),
                    NodeState::Down(d) => NodeState::Down(Down {
                        image: d.image.clone(),
                        unclean: d.unclean,
                        stopped: d.stopped.clone(),
                    }),
                })
                .collect(),
            controller: self.controller.clone(),
            clock: self.clock,
            records: self.records.clone(),
            next_record: self.next_record,
            clean_crashes: self.clean_crashes,
            unclean_crashes: self.unclean_crashes,
            leader_moves: self.leader_moves,
        }
    }
}

impl<L> PartialEq for StepCluster<L>
where
    L: ReplicaLog + PartialEq,
    L::Stopped: PartialEq,
{
    /// Equal in every part, hidden state included (the clock, the
    /// replicas' correlation ids and timers): what "changed nothing" means.
    fn eq(&self, other: &Self) -> bool {
        let nodes_eq = self.nodes.len() == other.nodes.len()
            && self
                .nodes
                .iter()
                .zip(&other.nodes)
                .all(|(a, b)| match (a, b) {
                    (NodeState::Up(x), NodeState::Up(y)) => x == y,
                    (NodeState::Down(x), NodeState::Down(y)) => {
                        x.image == y.image && x.unclean == y.unclean && x.stopped == y.stopped
                    }
                    _ => false,
                });
        nodes_eq
            && self.config == other.config
            && self.controller.state() == other.controller.state()
            && self.controller.requests() == other.controller.requests()
            && self.controller.epoch_isrs() == other.controller.epoch_isrs()
            && self.clock == other.clock
            && self.records == other.records
            && self.next_record == other.next_record
            && self.clean_crashes == other.clean_crashes
            && self.unclean_crashes == other.unclean_crashes
            && self.leader_moves == other.leader_moves
    }
}
