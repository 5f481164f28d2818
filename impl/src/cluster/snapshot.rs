//! A read-only picture of a whole cluster, shaped to map onto the model's
//! `State`: per replica its log as (offset, epoch, record id), HW, LEO,
//! recovery point, epoch, leader and ISR; the controller; the LeaderAndIsr
//! requests sent; and what happened to each record.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::replication::{
    ControllerState, LeaderAndIsr, LeaderEpoch, LeaderView, LogEntry, RecordId, ReplicaId,
};

/// The safety properties, by the names the model gives them.
pub const COMMITTED_RECORDS_SURVIVE: &str = "committed records survive";
pub const ACKNOWLEDGED_RECORDS_SURVIVE: &str = "acknowledged records survive";
pub const STRONG_ISR: &str = "strong ISR";
pub const LEADER_IN_ISR: &str = "leader in ISR";
pub const HW_WITHIN_LOG: &str = "HW <= LEO";
pub const NO_DIVERGENCE_BELOW_HW: &str = "logs agree below the HW";

/// A safety property a cluster breaks, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenProperty {
    pub property: &'static str,
    pub detail: String,
}

/// One replica, as the model's `Replica`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaSnapshot {
    pub id: ReplicaId,
    pub alive: bool,
    pub log: Vec<LogEntry>,
    pub high_watermark: u64,
    pub log_end_offset: u64,
    pub recovery_point: u64,
    /// The HW `replication-offset-checkpoint` holds (the model's
    /// `hw_checkpoint`).
    #[serde(default)]
    pub hw_checkpoint: u64,
    /// The latest leader epoch it accepted (`None` while down).
    pub leader_epoch: Option<LeaderEpoch>,
    pub leader: LeaderView,
    /// The ISR it knows; empty unless it leads.
    pub isr: Vec<ReplicaId>,
    /// As leader: each follower's LEO learnt from its fetches.
    pub follower_leo: BTreeMap<ReplicaId, Option<u64>>,
    /// As leader: followers whose last fetch came from a crashed incarnation.
    pub stale_fetch: Vec<ReplicaId>,
    /// As leader: acks=all records waiting for the HW.
    pub pending_acks: Vec<RecordId>,
    /// Down after an unclean crash, until it restarts.
    pub unclean_down: bool,
    /// Following, but still finding where to truncate (never seen between
    /// steps of the step driver).
    pub truncating: bool,
}

impl ReplicaSnapshot {
    /// A replica that is down: its files' log, HW and recovery point, and
    /// none of a running replica's state.
    pub fn down(
        id: ReplicaId,
        log: Vec<LogEntry>,
        log_end_offset: u64,
        high_watermark: u64,
        recovery_point: u64,
        hw_checkpoint: u64,
        unclean_down: bool,
    ) -> ReplicaSnapshot {
        ReplicaSnapshot {
            id,
            alive: false,
            log,
            high_watermark,
            log_end_offset,
            recovery_point,
            hw_checkpoint,
            leader_epoch: None,
            leader: LeaderView::Unknown,
            isr: Vec::new(),
            follower_leo: BTreeMap::new(),
            stale_fetch: Vec::new(),
            pending_acks: Vec::new(),
            unclean_down,
            truncating: false,
        }
    }

    /// Alive and believing it leads (the model's `presumes_leadership`).
    pub fn presumes_leadership(&self) -> bool {
        self.alive && self.leader == LeaderView::Replica(self.id)
    }
}

/// What happened to one record, as the model's `RecordHistory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RecordHistory {
    /// Where the leader appended it.
    pub offset: u64,
    /// The lowest leader epoch at which the producer was told it is written.
    pub acked: Option<LeaderEpoch>,
    /// The lowest leader epoch at which it was below a presumed leader's HW
    /// (visible to consumers).
    pub visible: Option<LeaderEpoch>,
}

/// The whole cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSnapshot {
    pub replicas: Vec<ReplicaSnapshot>,
    pub controller: ControllerState,
    /// Every LeaderAndIsr the controller sent, by epoch. Shared, as
    /// `records` is: both grow with a run.
    pub requests: std::sync::Arc<BTreeMap<LeaderEpoch, LeaderAndIsr>>,
    /// Every ISR the controller held in each epoch, oldest first (the
    /// request's first): the updates the epoch's leader applies in order,
    /// from which the model's `Request::later_isrs` is read. Absent in
    /// snapshots written before it was kept.
    #[serde(default)]
    pub epoch_isrs: std::sync::Arc<BTreeMap<LeaderEpoch, Vec<Vec<ReplicaId>>>>,
    /// Records produced (appended), by id.
    /// Shared: a snapshot taken at every event of a long trace would
    /// otherwise copy every record's history each time.
    pub records: std::sync::Arc<BTreeMap<RecordId, RecordHistory>>,
    pub clean_crashes: u32,
    pub unclean_crashes: u32,
    /// Elections that moved leadership from a named leader (alive or not).
    pub leader_moves: u32,
}

impl ClusterSnapshot {
    pub fn replica(&self, id: ReplicaId) -> Option<&ReplicaSnapshot> {
        self.replicas.iter().find(|r| r.id == id)
    }

    /// The record ids of a replica's log, in offset order.
    pub fn record_ids(&self, id: ReplicaId) -> Vec<Option<RecordId>> {
        self.replica(id)
            .map(|r| r.log.iter().map(|e| e.record_id).collect())
            .unwrap_or_default()
    }

    /// Every record marked by `epoch_of` (acknowledged or visible at some
    /// epoch) is at its offset on every replica that presumes leadership
    /// with an epoch at or above that one (the model's `records_survive`).
    /// Returns the records that are not.
    pub fn lost_records(
        &self,
        epoch_of: impl Fn(&RecordHistory) -> Option<LeaderEpoch>,
    ) -> Vec<RecordId> {
        let mut lost = Vec::new();
        for (&id, h) in self.records.iter() {
            let Some(since) = epoch_of(h) else { continue };
            let ok = self
                .replicas
                .iter()
                .filter(|r| r.presumes_leadership())
                .all(|r| {
                    r.leader_epoch < Some(since)
                        || r.log
                            .iter()
                            .find(|e| e.offset == h.offset)
                            .is_some_and(|e| e.record_id == Some(id))
                });
            if !ok {
                lost.push(id);
            }
        }
        lost
    }

    /// No two replicas disagree below both of their HWs (the model's
    /// `logs_agree_below_hw`). Returns the first pair that does.
    pub fn divergence_below_hw(&self) -> Option<(ReplicaId, ReplicaId)> {
        for (i, a) in self.replicas.iter().enumerate() {
            for b in &self.replicas[i + 1..] {
                let n = a.high_watermark.min(b.high_watermark) as usize;
                let agree = a.log.len() >= n && b.log.len() >= n && a.log[..n] == b.log[..n];
                if !agree {
                    return Some((a.id, b.id));
                }
            }
        }
        None
    }

    /// The safety properties (named as the model names them) that this
    /// cluster breaks, each with what breaks it; empty when all hold.
    pub fn broken_properties(&self) -> Vec<BrokenProperty> {
        let mut out = Vec::new();
        let mut broken = |property, detail| out.push(BrokenProperty { property, detail });
        if let Some(l) = self.lost_records(|h| h.visible).first() {
            broken(
                COMMITTED_RECORDS_SURVIVE,
                format!("committed record {l} lost"),
            );
        }
        if let Some(l) = self.lost_records(|h| h.acked).first() {
            broken(
                ACKNOWLEDGED_RECORDS_SURVIVE,
                format!("acknowledged record {l} lost"),
            );
        }
        if let Some((l, m)) = self.strong_isr_violation() {
            broken(
                STRONG_ISR,
                format!("ISR member {m} lacks leader {l}'s records below its HW"),
            );
        }
        if let Some(l) = self.controller.leader {
            if !self.controller.isr.contains(&l) {
                broken(LEADER_IN_ISR, format!("leader {l} is not in the ISR"));
            }
        }
        for r in &self.replicas {
            if r.high_watermark > r.log_end_offset {
                broken(HW_WITHIN_LOG, format!("replica {}: HW above LEO", r.id));
            }
        }
        if let Some((a, b)) = self.divergence_below_hw() {
            broken(
                NO_DIVERGENCE_BELOW_HW,
                format!("replicas {a} and {b} disagree below their HWs"),
            );
        }
        out
    }

    /// Strong ISR: below a presumed leader's HW, every quorum ISR member
    /// (except one down after an unclean crash, until it restarts) holds the
    /// leader's records. Returns the first (leader, member) that does not.
    pub fn strong_isr_violation(&self) -> Option<(ReplicaId, ReplicaId)> {
        for l in self.replicas.iter().filter(|r| r.presumes_leadership()) {
            let hw = l.high_watermark as usize;
            for &m in &self.controller.isr {
                let Some(r) = self.replica(m) else { continue };
                if r.unclean_down {
                    continue;
                }
                if r.log.len() < hw || l.log.len() < hw || r.log[..hw] != l.log[..hw] {
                    return Some((l.id, m));
                }
            }
        }
        None
    }
}
