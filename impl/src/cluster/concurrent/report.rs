//! What a concurrent run reports: what producers were told, what consumers
//! read, the final logs and states, and the trace; and the checks of the
//! final logs against them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::super::trace::Trace;
use crate::replication::{
    ControllerState, LeaderEpoch, LogEntry, PartitionState, RecordId, ReplicaId,
};

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
    /// From the first produce request sent to the last answer a producer
    /// took in (`None` without both): the time a throughput is over.
    #[serde(default)]
    pub produce_span: Option<Duration>,
    /// Goals of `ConcurrentConfig::until` (and the fault schedule's first
    /// round) not met when the goal timeout passed: the run stopped at its
    /// hang guard, and what it was to show did not happen.
    #[serde(default)]
    pub unmet_goals: Vec<String>,
    pub requests_sent: u64,
    pub records_sent: u64,
    /// Records acknowledged (acks=1 or all), with where and in which epoch.
    pub acked: Vec<AckedRecord>,
    /// Produce answers that were errors, by error.
    pub produce_errors: BTreeMap<String, u64>,
    /// Produce requests never answered within the produce timeout.
    pub produce_timeouts: u64,
    /// Requests a producer sent sooner than its retry backoff after an
    /// error answer (0 unless producers spin on errors).
    #[serde(default)]
    pub sent_within_backoff: u64,
    /// Passes of a leader's thread that ended with a fetch still held
    /// although records for it had arrived: a lost wake-up (0 unless the
    /// driver loses them).
    #[serde(default)]
    pub lost_wakeups: u64,
    /// Acknowledgement latency of every acknowledged request, in
    /// microseconds, sorted.
    pub ack_latencies_us: Vec<u64>,
    pub consumed: Vec<ConsumedRecord>,
    /// Consumer read errors, by error (a leader's log closing under a
    /// reader, a failed read), counted.
    #[serde(default)]
    pub consumer_errors: BTreeMap<String, u64>,
    /// Faults injected: (replica, clean).
    pub crashes: Vec<(ReplicaId, bool)>,
    /// Faults the nemesis injected, by kind.
    #[serde(default)]
    pub nemesis_faults: BTreeMap<String, u64>,
    /// Every replica came back, caught up and rejoined the ISR in time.
    pub settled: bool,
    /// When it did not: followers behind the leader whose log end and HW
    /// never moved in the whole settle phase.
    #[serde(default)]
    pub stalled_followers: Vec<ReplicaId>,
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
