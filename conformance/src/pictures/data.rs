//! What a picture is drawn from: a run's acknowledgements, faults, losses
//! and misfits over time ([`Timeline`]) and its partition's leader, epoch,
//! ISR, ELR and HW over time ([`Partition`]). Built from a concurrent
//! run's trace ([`from_trace`]) or from a Kafka run's observations
//! ([`super::kafka`]); every time is in seconds since the run began.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use highwater::cluster::concurrent::read_trace_file;
use highwater::cluster::{Actor, Event, TraceEntry};
use highwater::replication::{RecordId, ReplicaId};

/// One acknowledged produce request.
#[derive(Debug, Clone, PartialEq)]
pub struct Ack {
    /// When the producer was answered.
    pub at: f64,
    /// Records it acknowledged.
    pub records: u64,
    /// From the request to its answer, in milliseconds (when known).
    pub latency_ms: Option<f64>,
}

/// A fault, from its start to its end (the run's end when it never ended).
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// Its kind, as the band's label says it (`crash`, `fence`, ...).
    pub kind: String,
    /// The broker it struck.
    pub broker: Option<u32>,
    pub start: f64,
    pub end: f64,
}

/// Something marked at a time: a loss, a misfit.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub at: f64,
    pub label: String,
}

/// What `timeline.svg` shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub title: String,
    /// The run's length (at least the last time anything else holds).
    pub end: f64,
    pub acks: Vec<Ack>,
    pub faults: Vec<Fault>,
    /// Acknowledged records lost, at the time they were acknowledged.
    pub losses: Vec<Mark>,
    /// Records a consumer read that the final log does not hold there, at
    /// the time they were read (a real Kafka run's reader).
    pub vanished: Vec<Mark>,
    /// Events that did not fit the model, at their time.
    pub misfits: Vec<Mark>,
    /// Model properties broken at a validated step, at its time (where
    /// the model breaks them too: not misfits).
    pub broken: Vec<Mark>,
    /// A note under the title (what the picture leaves out).
    pub note: Option<String>,
}

/// What `partition.svg` shows: each series a step function, one point per
/// change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Partition {
    pub title: String,
    pub end: f64,
    /// The brokers, in lane order.
    pub brokers: Vec<u32>,
    /// The leader the controller names (`None`: no leader).
    pub leader: Vec<(f64, Option<u32>)>,
    /// Elections, with the epoch each began.
    pub elections: Vec<(f64, i64)>,
    pub epoch: Vec<(f64, i64)>,
    pub isr: Vec<(f64, Vec<u32>)>,
    pub elr: Vec<(f64, Vec<u32>)>,
    /// The leader's high watermark.
    pub hw: Vec<(f64, u64)>,
    /// A note under the title (what a series is, where the source says
    /// less than a trace).
    pub note: Option<String>,
}

/// Both pictures' data for one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    pub timeline: Timeline,
    pub partition: Partition,
}

/// A point appended only when the value changed.
pub(crate) fn push_changed<T: PartialEq>(series: &mut Vec<(f64, T)>, at: f64, v: T) {
    if series.last().is_none_or(|(_, last)| *last != v) {
        series.push((at, v));
    }
}

fn seconds(micros: u64) -> f64 {
    micros as f64 / 1e6
}

/// The pictures of a concurrent run from its trace file: `lost` are the
/// acknowledged records the run lost, `misfits` the positions of the
/// events that did not fit the model.
pub fn from_trace_file(
    path: &Path,
    title: &str,
    lost: &[RecordId],
    misfits: &[u64],
) -> Result<Run, String> {
    let entries = read_trace_file(path)
        .map_err(|e| format!("cannot read the trace {}: {e}", path.display()))?;
    let entries: Vec<TraceEntry> = entries
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(from_trace(&entries, title, lost, misfits))
}

/// The pictures of a concurrent run from its trace entries.
///
/// Acknowledgements are the leaders' successful produce answers: an
/// acks=all answer's latency is measured from the leader's append of the
/// request to its answer, and an answer given at the append (acks=1) has
/// none (the trace does not see the producer's send); faults are
/// crashes (from a replica's `Crash` to its `Restart`) and fences of a live
/// broker (from the controller's `BrokerStopped` of a broker that did not
/// crash to its `BrokerRegistered`); a follower's pause is not traced. The
/// leader, epoch, ISR and ELR are the controller's; the HW is that of the
/// replica the controller names leader.
pub fn from_trace(entries: &[TraceEntry], title: &str, lost: &[RecordId], misfits: &[u64]) -> Run {
    let mut t = Timeline {
        title: title.to_string(),
        ..Timeline::default()
    };
    let mut p = Partition {
        title: title.to_string(),
        ..Partition::default()
    };
    let mut brokers = std::collections::BTreeSet::new();
    // (replica, request) -> (append time, records).
    let mut produced: HashMap<(ReplicaId, u64), (u64, Vec<RecordId>)> = HashMap::new();
    let mut acked_at: HashMap<RecordId, f64> = HashMap::new();
    // Open faults, by broker: crash (kind, start) and fence start.
    let mut crashed: BTreeMap<ReplicaId, (String, f64)> = BTreeMap::new();
    let mut fenced: BTreeMap<ReplicaId, f64> = BTreeMap::new();
    // Crashed brokers whose crash the controller has not yet heard of: the
    // first `BrokerStopped` after a crash is the crash's own, a fence
    // otherwise.
    let mut unheard = std::collections::BTreeSet::new();
    let mut hw_of: BTreeMap<ReplicaId, u64> = BTreeMap::new();
    let mut leader: Option<ReplicaId> = None;
    let mut end = 0.0f64;
    for e in entries {
        let at = seconds(e.micros);
        end = end.max(at);
        if let Actor::Replica(r) = e.actor {
            brokers.insert(r);
            match &e.replica {
                Some(s) => {
                    hw_of.insert(r, s.high_watermark);
                }
                None => {
                    hw_of.remove(&r);
                }
            }
        }
        match (&e.actor, &e.event) {
            (
                Actor::Replica(r),
                Event::Produce {
                    request_id,
                    records,
                    result: Ok(_),
                },
            ) => {
                let waits = e
                    .replica
                    .as_ref()
                    .is_some_and(|s| s.waiting_acks.contains(request_id));
                if waits {
                    // Answered by its ProduceAnswered.
                    produced.insert((*r, *request_id), (e.micros, records.clone()));
                } else {
                    // Answered at once (acks=1, or the HW already past
                    // it), not traced again.
                    for id in records {
                        acked_at.entry(*id).or_insert(at);
                    }
                    t.acks.push(Ack {
                        at,
                        records: records.len() as u64,
                        latency_ms: None,
                    });
                }
            }
            (
                Actor::Replica(r),
                Event::ProduceAnswered {
                    request_id,
                    result: Ok(_),
                },
            ) => {
                let (from, records) = produced
                    .get(&(*r, *request_id))
                    .cloned()
                    .unwrap_or((e.micros, Vec::new()));
                for id in &records {
                    acked_at.entry(*id).or_insert(at);
                }
                t.acks.push(Ack {
                    at,
                    records: records.len().max(1) as u64,
                    latency_ms: Some(e.micros.saturating_sub(from) as f64 / 1e3),
                });
            }
            (Actor::Replica(r), Event::Crash { clean }) => {
                let kind = if *clean { "crash" } else { "unclean crash" };
                crashed.entry(*r).or_insert((kind.to_string(), at));
                unheard.insert(*r);
            }
            (Actor::Replica(r), Event::Restart { .. }) => {
                if let Some((kind, start)) = crashed.remove(r) {
                    t.faults.push(Fault {
                        kind,
                        broker: Some(*r),
                        start,
                        end: at,
                    });
                }
            }
            (Actor::Controller, Event::BrokerStopped { replica }) if !unheard.remove(replica) => {
                fenced.entry(*replica).or_insert(at);
            }
            (Actor::Controller, Event::BrokerRegistered { replica, .. }) => {
                if let Some(start) = fenced.remove(replica) {
                    t.faults.push(Fault {
                        kind: "fence".to_string(),
                        broker: Some(*replica),
                        start,
                        end: at,
                    });
                }
            }
            (Actor::Controller, Event::ControllerElectLeader { epoch, .. }) => {
                p.elections.push((at, i64::from(*epoch)));
            }
            _ => {}
        }
        if let Some(c) = &e.controller {
            leader = c.leader;
            push_changed(&mut p.leader, at, c.leader);
            push_changed(&mut p.epoch, at, c.leader_epoch.map_or(-1, i64::from));
            push_changed(&mut p.isr, at, c.isr.clone());
            push_changed(&mut p.elr, at, c.elr.clone());
        }
        if let Some(hw) = leader.and_then(|l| hw_of.get(&l)) {
            push_changed(&mut p.hw, at, *hw);
        }
    }
    // Faults still open at the end last to it.
    for (r, (kind, start)) in crashed {
        t.faults.push(Fault {
            kind,
            broker: Some(r),
            start,
            end,
        });
    }
    for (r, start) in fenced {
        t.faults.push(Fault {
            kind: "fence".to_string(),
            broker: Some(r),
            start,
            end,
        });
    }
    t.faults
        .sort_by(|a, b| a.start.total_cmp(&b.start).then(a.broker.cmp(&b.broker)));
    t.losses = lost
        .iter()
        .map(|id| Mark {
            at: acked_at.get(id).copied().unwrap_or(end),
            label: format!("record {id} lost"),
        })
        .collect();
    t.misfits = misfits
        .iter()
        .map(|&seq| Mark {
            at: entries
                .iter()
                .find(|e| e.seq == seq)
                .map_or(end, |e| seconds(e.micros)),
            label: format!("event {seq} does not fit"),
        })
        .collect();
    t.end = end;
    p.end = end;
    p.brokers = brokers.into_iter().collect();
    Run {
        timeline: t,
        partition: p,
    }
}
