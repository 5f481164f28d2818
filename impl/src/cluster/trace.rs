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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Actor {
    Replica(ReplicaId),
    Controller,
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
    Crash {
        clean: bool,
    },
    Restart {
        log_end_offset: u64,
        high_watermark: u64,
        recovery_point: u64,
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

/// Where entries go: kept in memory, or streamed to a file one JSON entry a
/// line (memory stays bounded; the first write error is kept and writing
/// stops).
#[derive(Debug)]
enum Sink {
    Memory(Vec<TraceEntry>),
    File {
        out: BufWriter<File>,
        written: u64,
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
                error,
            } => {
                if error.is_some() {
                    return;
                }
                let entry = TraceEntry {
                    seq: *written,
                    micros,
                    actor,
                    event,
                    replica,
                    controller,
                };
                *written += 1;
                let line = serde_json::to_writer(&mut *out, &entry)
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

/// Reads a trace file entry by entry, in order, without holding it whole.
/// A line that is not an entry is an error naming its line number.
pub fn read_trace_file(
    path: &Path,
) -> std::io::Result<impl Iterator<Item = std::result::Result<TraceEntry, String>>> {
    let file = BufReader::new(File::open(path)?);
    Ok(file.lines().enumerate().map(|(i, line)| {
        let line = line.map_err(|e| format!("line {}: {e}", i + 1))?;
        serde_json::from_str(&line).map_err(|e| format!("line {}: {e}", i + 1))
    }))
}
