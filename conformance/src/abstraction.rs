//! The abstraction function: a snapshot of the implementation's cluster as
//! the model's `State`. Every number must fit the model's small types; a
//! value that does not (an offset gap, a record with no id, an epoch beyond
//! the model's bound) is reported, not wrapped.

use highwater::cluster::{ClusterSnapshot, ReplicaSnapshot};
use highwater::replication::{LeaderView as ImplLeaderView, LogEntry};
use highwater_model::actions::{accepts_request, forget_what_no_longer_matters};
use highwater_model::controller::fence_changes_partition;
use highwater_model::state::{
    Controller, Entry, Epoch, LeaderView, Log, RecordHistory, Replica, ReplicaSet, Request,
    MAX_RECORDS, MAX_REPLICAS,
};
use highwater_model::{Config, HwCheckpoint, State};
use std::fmt::Display;

/// `snap` as a model state, forgetting what the model forgets (see
/// `forget_what_no_longer_matters`) so that equal behaviour means equal
/// states; compare it through [`comparable`].
pub fn abstract_state(cfg: &Config, snap: &ClusterSnapshot) -> Result<State, String> {
    let mut s = State {
        n: small(snap.replicas.len(), "replica count")?,
        ..State::default()
    };
    if usize::from(s.n) > MAX_REPLICAS {
        return Err(format!("{} replicas; the model holds {MAX_REPLICAS}", s.n));
    }
    for (i, r) in snap.replicas.iter().enumerate() {
        if r.id as usize != i {
            return Err(format!("replica {} listed at position {i}", r.id));
        }
        if r.truncating {
            return Err(format!("replica {i} is between truncation steps"));
        }
        let periodic = cfg.hw_checkpoint == HwCheckpoint::Periodic;
        s.replicas[i] = replica(r, periodic).map_err(|e| format!("replica {i}: {e}"))?;
    }
    let c = &snap.controller;
    s.controller = Controller {
        leader: c.leader.map(|l| small(l, "leader")).transpose()?,
        epoch: c.leader_epoch.map(|e| small(e, "epoch")).transpose()?,
        isr: set(&c.isr)?,
        elr: set(&c.elr)?,
        lke: set(&c.last_known_elr)?,
        recovering: c.recovering,
        fenced: ReplicaSet::EMPTY,
    };
    s.controller.fenced = fenced(cfg, &s, &set(&c.alive)?);
    for (&epoch, req) in &snap.requests {
        let slot = usize::try_from(epoch)
            .ok()
            .filter(|&e| e < s.requests.len())
            .ok_or_else(|| format!("a request for epoch {epoch}, beyond the model's bound"))?;
        s.requests[slot] = Some(Request {
            leader: req.leader.map(|l| small(l, "leader")).transpose()?,
            isr: set(&req.isr)?,
        });
    }
    if snap.records.len() > MAX_RECORDS {
        return Err(format!(
            "{} records; the model holds {MAX_RECORDS}",
            snap.records.len()
        ));
    }
    for (expected, (&id, h)) in snap.records.iter().enumerate() {
        if id != expected as u64 {
            return Err(format!("record {id} where {expected} was expected"));
        }
        s.records[expected] = RecordHistory {
            offset: small(h.offset, "record offset")?,
            acked: h.acked.map(|e| small(e, "ack epoch")).transpose()?,
            visible: h.visible.map(|e| small(e, "visible epoch")).transpose()?,
        };
    }
    s.produced = small(snap.records.len(), "records produced")?;
    s.clean_crashes = small(snap.clean_crashes, "clean crashes")?;
    s.unclean_crashes = small(snap.unclean_crashes, "unclean crashes")?;
    s.leader_moves = small(snap.leader_moves, "leader moves")?;
    forget_what_no_longer_matters(cfg, &mut s);
    Ok(s)
}

/// The live brokers the controller counts as fenced: up, but not among
/// those it counts registered and unfenced (`alive`). One whose fence has
/// yet to change the partition (the controller stopped counting it and has
/// not yet removed it from the ISR, or taken its leadership away: the
/// concurrent driver traces the two apart) is not fenced yet: the model's
/// ControllerShrinkIsr does both at once.
fn fenced(cfg: &Config, s: &State, unfenced: &ReplicaSet) -> ReplicaSet {
    s.ids()
        .filter(|&r| s.replica(r).alive && !unfenced.contains(r))
        .filter(|&r| !fence_changes_partition(cfg, s, r))
        .fold(ReplicaSet::EMPTY, ReplicaSet::with)
}

/// `s` without what only the model's history decides: the ISR of a request
/// whose leader can no longer take it (the model keeps part of the current
/// one for a sometimes-property, as an intersection over the epoch's past
/// ISRs, which no snapshot holds).
pub fn comparable(s: &State) -> State {
    let mut out = *s;
    for (epoch, slot) in out.requests.iter_mut().enumerate() {
        if let Some(req) = slot {
            let takeable = req
                .leader
                .is_some_and(|l| accepts_request(s, l, epoch as Epoch));
            if !takeable {
                req.isr = ReplicaSet::EMPTY;
            }
        }
    }
    out
}

fn replica(r: &ReplicaSnapshot, periodic: bool) -> Result<Replica, String> {
    let log = log(&r.log)?;
    if u64::from(log.leo()) != r.log_end_offset {
        return Err(format!(
            "LEO {} but {} entries from offset 0",
            r.log_end_offset,
            log.leo()
        ));
    }
    let mut follower_leo = [None; MAX_REPLICAS];
    for (&f, &leo) in &r.follower_leo {
        let slot = follower_leo
            .get_mut(f as usize)
            .ok_or_else(|| format!("a follower {f} beyond the model's replicas"))?;
        *slot = leo.map(|o| small(o, "follower LEO")).transpose()?;
    }
    let mut pending_acks = 0u8;
    for &id in &r.pending_acks {
        let id: u8 = small(id, "waiting record")?;
        if usize::from(id) >= MAX_RECORDS {
            return Err(format!("waiting record {id} beyond the model's records"));
        }
        pending_acks |= 1 << id;
    }
    Ok(Replica {
        alive: r.alive,
        log,
        hw: small(r.high_watermark, "HW")?,
        recovery_point: small(r.recovery_point, "recovery point")?,
        // Kept at 0 by the model unless the HW is checkpointed periodically
        // (with every change, the file is the HW).
        hw_checkpoint: if periodic {
            small(r.hw_checkpoint, "HW checkpoint")?
        } else {
            0
        },
        epoch: r.leader_epoch.map(|e| small(e, "epoch")).transpose()?,
        leader: match r.leader {
            ImplLeaderView::Unknown => LeaderView::Unknown,
            ImplLeaderView::NoLeader => LeaderView::NoLeader,
            ImplLeaderView::Replica(l) => LeaderView::Replica(small(l, "leader")?),
        },
        isr: set(&r.isr)?,
        follower_leo,
        stale_fetch: set(&r.stale_fetch)?,
        pending_acks,
        unclean_down: r.unclean_down,
    })
}

/// A log as the model's: contiguous from offset 0 (the model has no
/// retention), each entry a record id written in an epoch.
fn log(entries: &[LogEntry]) -> Result<Log, String> {
    if entries.len() > MAX_RECORDS {
        return Err(format!(
            "{} entries; the model holds {MAX_RECORDS}",
            entries.len()
        ));
    }
    let mut log = Log::default();
    for (expected, e) in entries.iter().enumerate() {
        if e.offset != expected as u64 {
            return Err(format!("offset {} where {expected} was expected", e.offset));
        }
        log.append(model_entry(e)?);
    }
    Ok(log)
}

/// One record as the model's log entry: its record id, written in an epoch.
pub fn model_entry(e: &LogEntry) -> Result<Entry, String> {
    let id = e
        .record_id
        .ok_or_else(|| format!("the record at offset {} has no record id", e.offset))?;
    Ok(Entry {
        id: small(id, "record id")?,
        epoch: small(e.epoch, "entry epoch")?,
    })
}

fn set(ids: &[u32]) -> Result<ReplicaSet, String> {
    ids.iter().try_fold(ReplicaSet::EMPTY, |acc, &r| {
        if (r as usize) < MAX_REPLICAS {
            Ok(acc.with(r as u8))
        } else {
            Err(format!("replica {r} beyond the model's replicas"))
        }
    })
}

/// `v` as one of the model's one-byte numbers.
fn small<T: Copy + Display + TryInto<u8>>(v: T, what: &str) -> Result<u8, String> {
    v.try_into()
        .map_err(|_| format!("{what} {v} does not fit the model"))
}
