//! The trace the concurrent driver records: every protocol event, in a
//! global order consistent with causality (an event that sends a message
//! comes before the event that receives it), with the state of the actor
//! after it. Serializable, for trace checking against the model.

use serde::{Deserialize, Serialize};

use crate::replication::Error;
use crate::replication::{
    ApiError, ControllerState, Election, IsrChange, LeaderEpoch, PartitionState, RecordId,
    ReplicaId,
};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// Who did something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Actor {
    Replica(ReplicaId),
    Controller,
    /// A consumer, by its index: it reads, and changes no replica's state.
    Consumer(u32),
}

/// One protocol event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    // Controller.
    ControllerElectLeader {
        replica: ReplicaId,
        election: Election,
        epoch: LeaderEpoch,
    },
    ControllerShrinkIsr {
        replica: ReplicaId,
    },
    /// AlterPartition from `leader`: applied (the new ISR) or refused.
    ControllerAlterPartition {
        leader: ReplicaId,
        change: IsrChange,
        result: Result<Vec<ReplicaId>, ApiError>,
    },
    BrokerStopped {
        replica: ReplicaId,
    },
    BrokerRegistered {
        replica: ReplicaId,
        unclean: bool,
    },
    // Replica: LeaderAndIsr.
    BecomeLeader {
        epoch: LeaderEpoch,
    },
    /// Took the LeaderAndIsr of `epoch` as a follower of `leader` (or of
    /// no one); truncation by OffsetsForLeaderEpoch may follow.
    BecomeFollower {
        epoch: LeaderEpoch,
        leader: Option<ReplicaId>,
    },
    LeaderAndIsrRefused {
        epoch: LeaderEpoch,
    },
    /// A follower took an OffsetsForLeaderEpoch answer: its LEO after, and
    /// whether truncation is complete.
    Truncated {
        leader: ReplicaId,
        log_end_offset: u64,
        done: bool,
    },
    // Fetch.
    /// The leader answered a fetch (the leader's half of FollowerFetch).
    FetchServed {
        follower: ReplicaId,
        fetch_offset: u64,
        follower_epoch: LeaderEpoch,
        error: Option<ApiError>,
        /// The leader's LEO and HW sent.
        log_end_offset: u64,
        high_watermark: u64,
        /// The response named a diverging epoch (KIP-320): it carries no
        /// records, and the follower truncates instead of appending.
        #[serde(default)]
        diverging: bool,
        /// Where the records it carries end (the fetch offset when it
        /// carries none): below the leader's LEO when
        /// `replica.fetch.max.bytes` cut it short. Absent in traces
        /// written before it was traced: taken as the leader's LEO.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        served_end: Option<u64>,
    },
    /// The follower took a fetch response (the follower's half).
    FetchApplied {
        leader: ReplicaId,
        fetch_offset: u64,
        error: Option<ApiError>,
        log_end_offset: u64,
        high_watermark: u64,
    },
    // Produce and HW.
    Produce {
        request_id: u64,
        records: Vec<RecordId>,
        result: Result<(u64, LeaderEpoch), ApiError>,
    },
    LeaderAdvanceHw {
        high_watermark: u64,
    },
    ProduceAnswered {
        request_id: u64,
        result: Result<(u64, LeaderEpoch), ApiError>,
    },
    // ISR.
    AlterPartitionSent {
        change: IsrChange,
    },
    AlterPartitionAnswered {
        change: IsrChange,
        result: Result<Vec<ReplicaId>, ApiError>,
    },
    /// A peer said whom it now fetches from (its fetch session moved).
    FollowingNoticed {
        follower: ReplicaId,
        leader: Option<(ReplicaId, LeaderEpoch)>,
    },
    /// A peer's connections dropped: it crashed.
    PeerCrashNoticed {
        peer: ReplicaId,
    },
    /// The leader learnt an ISR the controller changed without a new epoch
    /// (Kafka's partition epoch; not a model action).
    IsrUpdated {
        isr: Vec<ReplicaId>,
    },
    // Durability and faults.
    Flush {
        recovery_point: u64,
    },
    /// The periodic HW checkpoint wrote a new HW (the model's
    /// CheckpointHw; `ReplicaManager.checkpointHighWatermarks`).
    CheckpointHw {
        high_watermark: u64,
    },
    Crash {
        clean: bool,
    },
    Restart {
        log_end_offset: u64,
        high_watermark: u64,
        recovery_point: u64,
    },
    // Consumers.
    /// A consumer read `records` (one per offset from `from`; `None` for an
    /// entry without a record id) from `leader`'s log, below the HW
    /// `high_watermark` that leader published while leading in `epoch`.
    /// Traced once the read is done and the leader still led in `epoch`,
    /// so after the event that set that HW: a read above the HW, or of a
    /// record no leader had below its HW, is a misfit.
    ConsumerRead {
        leader: ReplicaId,
        epoch: LeaderEpoch,
        high_watermark: u64,
        from: u64,
        records: Vec<Option<RecordId>>,
    },
}

/// One trace entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceEntry {
    /// Position in the global order.
    pub seq: u64,
    /// Microseconds since the run began.
    pub micros: u64,
    pub actor: Actor,
    pub event: Event,
    /// The replica's state after the event (`None` for the controller, or
    /// for a replica that is down).
    pub replica: Option<PartitionState>,
    /// The controller's state after a controller event.
    pub controller: Option<ControllerState>,
}

/// A whole trace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    pub entries: Vec<TraceEntry>,
}

impl Trace {
    /// The entries of one actor, in order.
    pub fn of(&self, actor: Actor) -> impl Iterator<Item = &TraceEntry> {
        self.entries.iter().filter(move |e| e.actor == actor)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Entries are pushed whole: a poisoned lock still holds a valid trace.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One line of a trace file: a [`TraceEntry`] less what the reader can
/// restore. Its position is its line (no `seq`), and of an actor's state
/// only the fields that changed since the actor's last line are written:
/// `r` (replica) and `c` (controller) are absent when nothing changed,
/// `null` when the state is gone (a replica down), and otherwise an object
/// of the changed top-level fields (all of them after a gap).
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    /// Microseconds since the run began.
    t: u64,
    a: Actor,
    e: Event,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    r: Option<serde_json::Value>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    c: Option<serde_json::Value>,
}

/// A field that is present (`null` included) is `Some`; an absent one is
/// `None` (by `default`).
fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

/// The last states of each actor, as written or read: what a line's
/// changes are relative to.
#[derive(Debug, Default)]
struct LastStates {
    replica: std::collections::HashMap<Actor, Option<serde_json::Value>>,
    controller: std::collections::HashMap<Actor, Option<serde_json::Value>>,
}

/// What to write for a state that was `last` and is `now`.
fn change(
    last: &mut Option<serde_json::Value>,
    now: Option<serde_json::Value>,
) -> Option<serde_json::Value> {
    use serde_json::Value;
    if *last == now {
        return None;
    }
    let written = match (&*last, &now) {
        (_, None) => Value::Null,
        (Some(Value::Object(old)), Some(Value::Object(new))) => Value::Object(
            new.iter()
                .filter(|(k, v)| old.get(*k) != Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        (_, Some(v)) => v.clone(),
    };
    *last = now;
    Some(written)
}

/// The state after a line's change `written` to `last`.
fn changed(
    last: &mut Option<serde_json::Value>,
    written: Option<serde_json::Value>,
) -> Option<serde_json::Value> {
    use serde_json::Value;
    match written {
        None => {}
        Some(Value::Null) => *last = None,
        Some(Value::Object(fields)) => {
            let mut base = match last.take() {
                Some(Value::Object(m)) => m,
                _ => serde_json::Map::new(),
            };
            base.extend(fields);
            *last = Some(Value::Object(base));
        }
        Some(other) => *last = Some(other),
    }
    last.clone()
}

/// Where entries go: kept in memory, or streamed to a file one line an
/// entry (memory stays bounded; the first write error is kept and writing
/// stops).
#[derive(Debug)]
enum Sink {
    Memory(Vec<TraceEntry>),
    File {
        out: BufWriter<File>,
        written: u64,
        last: LastStates,
        error: Option<String>,
    },
}

/// Collects entries from many threads. The global order is the order in
/// which entries are appended: each actor appends an event before it sends
/// the messages the event produced, so a receive always follows its send.
#[derive(Debug)]
pub(crate) struct Tracer {
    enabled: bool,
    start: std::time::Instant,
    sink: Mutex<Sink>,
}

impl Tracer {
    pub(crate) fn new(enabled: bool) -> Tracer {
        Tracer {
            enabled,
            start: std::time::Instant::now(),
            sink: Mutex::new(Sink::Memory(Vec::new())),
        }
    }

    /// A tracer that streams to `path` (created or truncated).
    pub(crate) fn to_file(path: &Path) -> crate::replication::Result<Tracer> {
        let file = File::create(path).map_err(|e| {
            Error::InvalidConfig(format!("cannot create trace file {}: {e}", path.display()))
        })?;
        Ok(Tracer {
            enabled: true,
            start: std::time::Instant::now(),
            sink: Mutex::new(Sink::File {
                out: BufWriter::new(file),
                written: 0,
                last: LastStates::default(),
                error: None,
            }),
        })
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    pub(crate) fn record(
        &self,
        actor: Actor,
        event: Event,
        replica: Option<PartitionState>,
        controller: Option<ControllerState>,
    ) {
        if !self.enabled {
            return;
        }
        let micros = self.start.elapsed().as_micros() as u64;
        let mut sink = lock(&self.sink);
        match &mut *sink {
            Sink::Memory(entries) => {
                let seq = entries.len() as u64;
                entries.push(TraceEntry {
                    seq,
                    micros,
                    actor,
                    event,
                    replica,
                    controller,
                });
            }
            Sink::File {
                out,
                written,
                last,
                error,
            } => {
                if error.is_some() {
                    return;
                }
                *written += 1;
                let line = (|| {
                    let r = replica.map(serde_json::to_value).transpose()?;
                    let c = controller.map(serde_json::to_value).transpose()?;
                    let line = Line {
                        t: micros,
                        a: actor,
                        e: event,
                        r: change(last.replica.entry(actor).or_default(), r),
                        c: change(last.controller.entry(actor).or_default(), c),
                    };
                    serde_json::to_writer(&mut *out, &line)
                })()
                .map_err(|e| e.to_string())
                .and_then(|()| out.write_all(b"\n").map_err(|e| e.to_string()));
                if let Err(e) = line {
                    *error = Some(e);
                }
            }
        }
    }

    /// The entries kept in memory (none when streaming to a file).
    pub(crate) fn take(&self) -> Trace {
        match &mut *lock(&self.sink) {
            Sink::Memory(entries) => Trace {
                entries: std::mem::take(entries),
            },
            Sink::File { .. } => Trace::default(),
        }
    }

    /// Flushes a trace file; the first error writing it, if any.
    pub(crate) fn finish(&self) -> Option<String> {
        match &mut *lock(&self.sink) {
            Sink::Memory(_) => None,
            Sink::File { out, error, .. } => {
                if error.is_none() {
                    if let Err(e) = out.flush() {
                        *error = Some(e.to_string());
                    }
                }
                error.clone()
            }
        }
    }
}

/// Reads a trace file entry by entry, in order, without holding it whole
/// (only each actor's last state). A line that is not an entry is an
/// error naming its line number.
pub fn read_trace_file(
    path: &Path,
) -> std::io::Result<impl Iterator<Item = std::result::Result<TraceEntry, String>>> {
    let file = BufReader::new(File::open(path)?);
    let mut last = LastStates::default();
    Ok(file.lines().enumerate().map(move |(i, line)| {
        let at = |e: &dyn std::fmt::Display| format!("line {}: {e}", i + 1);
        let line = line.map_err(|e| at(&e))?;
        let line: Line = serde_json::from_str(&line).map_err(|e| at(&e))?;
        let replica = changed(last.replica.entry(line.a).or_default(), line.r)
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| at(&e))?;
        let controller = changed(last.controller.entry(line.a).or_default(), line.c)
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| at(&e))?;
        Ok(TraceEntry {
            seq: i as u64,
            micros: line.t,
            actor: line.a,
            event: line.e,
            replica,
            controller,
        })
    }))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::replication::{MemoryLog, Replica, ReplicationConfig};

    fn state(hw: u64) -> PartitionState {
        let p = Replica::new(
            0,
            vec![0, 1],
            ReplicationConfig::default(),
            MemoryLog::new(),
            None,
        )
        .expect("a replica");
        PartitionState {
            high_watermark: hw,
            ..p.core().state()
        }
    }

    /// Entries streamed to a file (states unchanged, changed in one field,
    /// gone, back, of several actors) read back as they were recorded.
    #[test]
    fn a_streamed_trace_reads_back_as_recorded() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("trace.jsonl");
        let ctl = |leader| ControllerState {
            leader,
            ..ControllerState::default()
        };
        let crash = || Event::Crash { clean: true };
        let steps: Vec<(Actor, Option<PartitionState>, Option<ControllerState>)> = vec![
            (Actor::Replica(0), Some(state(0)), None),
            (Actor::Replica(0), Some(state(0)), None),
            (Actor::Replica(1), Some(state(0)), None),
            (Actor::Controller, None, Some(ctl(Some(1)))),
            (Actor::Replica(0), Some(state(3)), None),
            (Actor::Controller, None, Some(ctl(Some(1)))),
            (Actor::Replica(0), None, None),
            (Actor::Controller, None, Some(ctl(None))),
            (Actor::Replica(0), Some(state(3)), None),
            (Actor::Replica(1), Some(state(2)), None),
        ];
        let tracer = Tracer::to_file(&path).expect("a trace file");
        for (a, r, c) in &steps {
            tracer.record(*a, crash(), r.clone(), c.clone());
        }
        assert_eq!(tracer.finish(), None);
        let back: Vec<TraceEntry> = read_trace_file(&path)
            .expect("the file")
            .collect::<std::result::Result<_, _>>()
            .expect("every line");
        assert_eq!(back.len(), steps.len());
        for (i, (e, (a, r, c))) in back.iter().zip(&steps).enumerate() {
            assert_eq!(e.seq, i as u64);
            assert_eq!(
                (&e.actor, &e.replica, &e.controller),
                (a, r, c),
                "entry {i}"
            );
        }
        // Unchanged states are not written again.
        let text = std::fs::read_to_string(&path).expect("the file");
        let lines: Vec<&str> = text.lines().collect();
        assert!(!lines[1].contains("\"r\""), "{}", lines[1]);
        assert!(lines[4].contains("high_watermark") && !lines[4].contains("leader_epoch"));
    }
}
