//! The deterministic step driver: N replicas, each with its own data
//! directory, and a controller, in one thread. Each call performs exactly
//! one protocol action, named as the model's actions, so a test or the
//! conformance crate chooses the interleaving. A request and its response
//! (a fetch, an OffsetsForLeaderEpoch exchange, an AlterPartition) travel
//! within the one step, as the model's actions are atomic.
//!
//! An action that is not enabled returns [`Error::NotEnabled`] and changes
//! nothing.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::snapshot::{ClusterSnapshot, RecordHistory, ReplicaSnapshot};
use crate::replication::log::{read_entries, record_key};
use crate::replication::{
    Acks, Controller, ControllerConfig, DiskLog, DiskLogConfig, Election, Error, LeaderEpoch,
    LeaderView, LogEntry, Output, Partition, ProduceRequest, RecordId, ReplicaId, ReplicaLog,
    ReplicationConfig, Result,
};
use crate::storage::{LogConfig, Record, RecoveryReport, TopicPartition};

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
    Crash {
        replica: ReplicaId,
        clean: bool,
    },
    Restart {
        replica: ReplicaId,
    },
}

/// A replica that is down: what its files hold.
#[derive(Debug, Clone)]
struct DownImage {
    log: Vec<LogEntry>,
    high_watermark: u64,
    recovery_point: u64,
    unclean: bool,
}

#[derive(Debug)]
enum NodeState {
    Up(Box<Partition<DiskLog>>),
    Down(DownImage),
}

#[derive(Debug)]
struct Node {
    id: ReplicaId,
    dir: PathBuf,
    state: NodeState,
}

/// An in-process cluster driven one action at a time.
#[derive(Debug)]
pub struct StepCluster {
    config: StepConfig,
    disk: DiskLogConfig,
    nodes: Vec<Node>,
    controller: Controller,
    /// Logical milliseconds; every step advances it.
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

impl StepCluster {
    /// A cluster whose replica `i` keeps its log directory in
    /// `root/broker-<i>`; every replica is alive with an empty log, no
    /// leader is elected yet, and every replica is in the ISR.
    pub fn new(root: &Path, config: StepConfig) -> Result<StepCluster> {
        if config.replicas == 0 {
            return Err(Error::InvalidConfig("a cluster needs a replica".into()));
        }
        let ids: Vec<ReplicaId> = (0..config.replicas).collect();
        let controller = Controller::new(ids.clone(), config.controller_config())?;
        let disk = DiskLogConfig {
            log: config.log.clone(),
            ..DiskLogConfig::new(config.topic_partition.clone())
        };
        let mut nodes = Vec::new();
        for &id in &ids {
            let dir = root.join(format!("broker-{id}"));
            fs::create_dir_all(&dir)
                .map_err(|e| crate::storage::Error::io(&dir, "create directory", e))?;
            let (log, _) = DiskLog::open(&dir, &disk)?;
            let p = Partition::new(id, ids.clone(), config.replication.clone(), log, None)?;
            nodes.push(Node {
                id,
                dir,
                state: NodeState::Up(Box::new(p)),
            });
        }
        Ok(StepCluster {
            config,
            disk,
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
    /// A running replica's partition.
    pub fn partition(&self, r: ReplicaId) -> Option<&Partition<DiskLog>> {
        match &self.nodes.get(r as usize)?.state {
            NodeState::Up(p) => Some(p),
            NodeState::Down(_) => None,
        }
    }
    pub fn is_alive(&self, r: ReplicaId) -> bool {
        self.partition(r).is_some()
    }
    /// The replica's log directory.
    pub fn data_dir(&self, r: ReplicaId) -> Option<&Path> {
        self.nodes.get(r as usize).map(|n| n.dir.as_path())
    }
    /// What happened to each record produced so far.
    pub fn records(&self) -> &BTreeMap<RecordId, RecordHistory> {
        &self.records
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn node(&self, r: ReplicaId) -> Result<&Node> {
        self.nodes.get(r as usize).ok_or(Error::UnknownReplica(r))
    }

    fn up(&self, r: ReplicaId) -> Result<&Partition<DiskLog>> {
        match &self.node(r)?.state {
            NodeState::Up(p) => Ok(p),
            NodeState::Down(_) => not_enabled(format!("replica {r} is down")),
        }
    }

    fn up_mut(&mut self, r: ReplicaId) -> Result<&mut Partition<DiskLog>> {
        match self.nodes.get_mut(r as usize) {
            None => Err(Error::UnknownReplica(r)),
            Some(Node {
                state: NodeState::Up(p),
                ..
            }) => Ok(p),
            Some(_) => not_enabled(format!("replica {r} is down")),
        }
    }

    /// Delivers what replica `from` asked to be sent outside a request and
    /// response: fetch-session notices to its peers and producer answers.
    fn route(&mut self, from: ReplicaId) -> Result<()> {
        let outputs = self.up_mut(from)?.take_outputs();
        for out in outputs {
            match out {
                Output::Following { leader } => {
                    for n in &mut self.nodes {
                        if let NodeState::Up(p) = &mut n.state {
                            if n.id != from {
                                p.handle_following(from, leader);
                            }
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
                // Requests are carried by the steps that make them.
                Output::Fetch { .. }
                | Output::OffsetsForLeaderEpoch { .. }
                | Output::AlterPartition(_) => {}
            }
        }
        Ok(())
    }

    /// Records below a leader's HW are visible to consumers: remember the
    /// lowest epoch at which each was.
    fn publish_visible(&mut self, leader: ReplicaId) -> Result<()> {
        let p = self.up(leader)?;
        let Some(epoch) = p.leader_epoch() else {
            return Ok(());
        };
        let log = p.log();
        let entries = read_entries(&log.reader(), log.log_start_offset(), log.high_watermark())?;
        for e in entries {
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
        self.tick();
        let moving = self.controller.leader().is_some();
        let (kind, _) = self.controller.elect_leader(replica)?;
        if moving {
            self.leader_moves += 1;
        }
        Ok(kind)
    }

    /// ControllerShrinkIsr: the controller sees `replica` fail and removes
    /// it from the ISR.
    pub fn controller_shrink_isr(&mut self, replica: ReplicaId) -> Result<()> {
        self.tick();
        self.controller.shrink_isr_on_failure(replica)?;
        Ok(())
    }

    // --- LeaderAndIsr ---------------------------------------------------------

    fn request_for(
        &self,
        replica: ReplicaId,
        epoch: LeaderEpoch,
    ) -> Result<crate::replication::LeaderAndIsr> {
        let p = self.up(replica)?;
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
        let now = self.tick();
        self.up_mut(replica)?.handle_leader_and_isr(&req, now)?;
        self.route(replica)?;
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
                        && (!self.config.replication.truncation.is_fenced()
                            || lp.leader_epoch() == Some(epoch))
                });
                if !ready {
                    return not_enabled(format!(
                        "leader {l} cannot answer OffsetsForLeaderEpoch in epoch {epoch}"
                    ));
                }
            }
        }
        let now = self.tick();
        self.up_mut(replica)?.handle_leader_and_isr(&req, now)?;
        self.route(replica)?;
        // KIP-101/279: ask until the follower knows where to truncate.
        while let Some((to, q)) = self.up_mut(replica)?.offsets_for_leader_epoch_request(now) {
            let resp = self.up(to)?.handle_offsets_for_leader_epoch_request(&q);
            if let Some(e) = resp.error {
                // Ruled out above; reported rather than looped on.
                return Err(Error::Api(e));
            }
            self.up_mut(replica)?
                .handle_offsets_for_leader_epoch_response(&resp)?;
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
        self.tick();
        let record = Record {
            key: Some(record_key(id)),
            ..Record::new(self.clock as i64, format!("record-{id}"))
        };
        let appended = self
            .up_mut(leader)?
            .produce(ProduceRequest {
                request_id: id,
                acks,
                records: vec![record],
            })
            .map_err(Error::Api)?;
        self.next_record += 1;
        self.records.insert(
            id,
            RecordHistory {
                offset: appended.base_offset,
                acked: (acks == Acks::Leader).then_some(appended.leader_epoch),
                visible: None,
            },
        );
        Ok(id)
    }

    /// FollowerFetch: `follower` fetches from its leader. Returns the leader.
    pub fn follower_fetch(&mut self, follower: ReplicaId) -> Result<ReplicaId> {
        let f = self.up(follower)?;
        let Some(leader) = f.fetching_from() else {
            return not_enabled(format!("replica {follower} is not fetching"));
        };
        let epoch = f.leader_epoch();
        let ready = self.partition(leader).is_some_and(|l| {
            l.is_leader()
                && (!self.config.replication.truncation.is_fenced() || l.leader_epoch() == epoch)
        });
        if leader == follower || !ready {
            return not_enabled(format!("leader {leader} does not serve {follower}'s fetch"));
        }
        let now = self.tick();
        let Some((to, q)) = self.up_mut(follower)?.fetch_request(now) else {
            return not_enabled(format!("replica {follower} has a fetch in flight"));
        };
        let resp = self.up_mut(to)?.handle_fetch_request(&q, now);
        self.up_mut(follower)?.handle_fetch_response(&resp)?;
        Ok(leader)
    }

    /// LeaderAdvanceHw: the leader moves its HW to the lowest LEO in its ISR
    /// and answers the acks=all producers it passed. Returns the new HW.
    pub fn leader_advance_hw(&mut self, leader: ReplicaId) -> Result<u64> {
        self.tick();
        let Some(hw) = self.up_mut(leader)?.leader_advance_hw()? else {
            return not_enabled(format!("leader {leader} cannot advance its HW"));
        };
        self.route(leader)?;
        self.publish_visible(leader)?;
        Ok(hw)
    }

    // --- ISR changes -------------------------------------------------------------------

    /// LeaderShrinkIsr: replica.lag.time.max.ms passes, and the leader drops
    /// `follower` if it is out of sync; the controller must accept.
    pub fn leader_shrink_isr(&mut self, leader: ReplicaId, follower: ReplicaId) -> Result<()> {
        self.clock += self.config.replication.replica_lag_time_max_ms + 1;
        let now = self.tick();
        let req = self.up_mut(leader)?.leader_shrink_isr(follower, now)?;
        self.alter_partition(leader, req)
    }

    /// LeaderExpandIsr: the leader takes caught-up `follower` back; the
    /// controller must accept.
    pub fn leader_expand_isr(&mut self, leader: ReplicaId, follower: ReplicaId) -> Result<()> {
        let now = self.tick();
        let req = self.up_mut(leader)?.leader_expand_isr(follower, now)?;
        self.alter_partition(leader, req)
    }

    /// LeaderLearnsIsr: the leader of the controller's current epoch learns
    /// the ISR the controller shrank on its own (Kafka's metadata update).
    pub fn leader_learns_isr(&mut self, leader: ReplicaId) -> Result<()> {
        let (epoch, isr) = match (self.controller.leader(), self.controller.leader_epoch()) {
            (Some(l), Some(e)) if l == leader => (e, self.controller.isr()),
            _ => {
                return not_enabled(format!(
                    "the controller does not name replica {leader} leader"
                ))
            }
        };
        self.tick();
        if !self.up_mut(leader)?.handle_isr_update(epoch, &isr) {
            return not_enabled(format!("leader {leader} has nothing to learn"));
        }
        Ok(())
    }

    fn alter_partition(
        &mut self,
        leader: ReplicaId,
        req: crate::replication::AlterPartitionRequest,
    ) -> Result<()> {
        let resp = self.controller.alter_partition(&req);
        self.up_mut(leader)?.handle_alter_partition_response(&resp);
        match resp.result {
            Ok(_) => Ok(()),
            Err(e) => not_enabled(format!(
                "the controller refused leader {leader}'s ISR change: {e}"
            )),
        }
    }

    // --- Durability, crash, restart ---------------------------------------------------

    /// Flush: the replica fsyncs its log; its recovery point moves to its LEO.
    pub fn flush(&mut self, replica: ReplicaId) -> Result<()> {
        self.tick();
        self.up_mut(replica)?.flush()
    }

    /// Crash: the broker stops. Clean: its log is flushed and closed with
    /// the clean-shutdown marker. Unclean: its in-memory state is dropped
    /// and every file is cut back to the recovery point. Its peers see its
    /// connections drop; the controller sees its registration lapse.
    pub fn crash(&mut self, replica: ReplicaId, clean: bool) -> Result<()> {
        self.up(replica)?;
        self.tick();
        let node = &mut self.nodes[replica as usize];
        let placeholder = NodeState::Down(DownImage {
            log: Vec::new(),
            high_watermark: 0,
            recovery_point: 0,
            unclean: !clean,
        });
        let NodeState::Up(p) = std::mem::replace(&mut node.state, placeholder) else {
            unreachable!("checked above");
        };
        let log = p.into_log();
        let mut entries = log.entries()?;
        let (hw, rp) = (log.high_watermark(), log.recovery_point());
        let image = if clean {
            log.close()?;
            DownImage {
                high_watermark: hw,
                recovery_point: entries.len() as u64 + log_start(&entries),
                log: entries,
                unclean: false,
            }
        } else {
            log.crash()?;
            entries.retain(|e| e.offset < rp);
            DownImage {
                high_watermark: hw.min(rp),
                recovery_point: rp,
                log: entries,
                unclean: true,
            }
        };
        node.state = NodeState::Down(image);
        for n in &mut self.nodes {
            if let NodeState::Up(p) = &mut n.state {
                p.handle_peer_crashed(replica);
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
        let node = self.node(replica)?;
        let NodeState::Down(image) = &node.state else {
            return not_enabled(format!("replica {replica} is running"));
        };
        if self.controller.leader() == Some(replica) {
            return not_enabled(format!(
                "the controller still names replica {replica} leader"
            ));
        }
        let unclean = image.unclean;
        let dir = node.dir.clone();
        self.tick();
        let (log, report) = DiskLog::open(&dir, &self.disk)?;
        let p = Partition::new(
            replica,
            self.controller.replicas().to_vec(),
            self.config.replication.clone(),
            log,
            self.controller.leader_epoch(),
        )?;
        self.nodes[replica as usize].state = NodeState::Up(Box::new(p));
        self.controller.broker_registered(replica, unclean)?;
        Ok(report)
    }

    // --- Model-shaped access -------------------------------------------------------------

    /// Performs one action given as the model names it; the parameters the
    /// model's action carries beyond the replicas (election kind, HW) must
    /// match what the implementation does, else nothing happens.
    pub fn apply(&mut self, action: StepAction) -> Result<()> {
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
                if self.up(follower)?.fetching_from() != Some(leader) {
                    return not_enabled(format!("replica {follower} does not fetch from {leader}"));
                }
                self.follower_fetch(follower).map(drop)
            }
            StepAction::LeaderAdvanceHw { leader, hw } => {
                if self.up(leader)?.advanced_hw() != Some(hw) {
                    return not_enabled(format!("leader {leader} cannot move its HW to {hw}"));
                }
                self.leader_advance_hw(leader).map(drop)
            }
            StepAction::LeaderShrinkIsr { leader, follower } => {
                self.leader_shrink_isr(leader, follower)
            }
            StepAction::LeaderExpandIsr { leader, follower } => {
                self.leader_expand_isr(leader, follower)
            }
            StepAction::LeaderLearnsIsr { leader } => self.leader_learns_isr(leader),
            StepAction::Flush { replica } => self.flush(replica),
            StepAction::Crash { replica, clean } => self.crash(replica, clean),
            StepAction::Restart { replica } => self.restart(replica).map(drop),
        }
    }

    /// The whole cluster, read from the replicas' state and files.
    pub fn snapshot(&self) -> Result<ClusterSnapshot> {
        let mut replicas = Vec::new();
        for n in &self.nodes {
            replicas.push(match &n.state {
                NodeState::Up(p) => {
                    let s = p.state();
                    ReplicaSnapshot {
                        id: n.id,
                        alive: true,
                        log: p.log().entries()?,
                        high_watermark: s.high_watermark,
                        log_end_offset: s.log_end_offset,
                        recovery_point: s.recovery_point,
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
                        truncating: p.is_truncating(),
                    }
                }
                NodeState::Down(img) => ReplicaSnapshot {
                    id: n.id,
                    alive: false,
                    log_end_offset: img.log.len() as u64 + log_start(&img.log),
                    log: img.log.clone(),
                    high_watermark: img.high_watermark,
                    recovery_point: img.recovery_point,
                    leader_epoch: None,
                    leader: LeaderView::Unknown,
                    isr: Vec::new(),
                    follower_leo: BTreeMap::new(),
                    stale_fetch: Vec::new(),
                    pending_acks: Vec::new(),
                    unclean_down: img.unclean,
                    truncating: false,
                },
            });
        }
        Ok(ClusterSnapshot {
            replicas,
            controller: self.controller.state(),
            requests: self.controller.requests().clone(),
            records: self.records.clone(),
            clean_crashes: self.clean_crashes,
            unclean_crashes: self.unclean_crashes,
            leader_moves: self.leader_moves,
        })
    }
}

/// The first offset of a log given as entries (no retention here: 0 when empty).
fn log_start(entries: &[LogEntry]) -> u64 {
    entries.first().map_or(0, |e| e.offset)
}
