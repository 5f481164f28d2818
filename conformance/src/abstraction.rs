//! The abstraction function: a snapshot of the implementation's cluster as
//! the model's `State`, in either of its shapes (`model/src/shape.rs`): the
//! checker's compact one for lockstep, the unbounded one for trace
//! validation. Every number must fit the shape's types; a value that does
//! not (an offset gap, a record with no id, an epoch beyond the compact
//! shape's bound) is reported, not wrapped.

use highwater::cluster::{ClusterSnapshot, ReplicaSnapshot};
use highwater::replication::controller::isrs_after;
use highwater::replication::{LeaderView as ImplLeaderView, LogEntry};
use highwater_model::actions::{accepts_request, forget_what_no_longer_matters};
use highwater_model::config::Mutation;
use highwater_model::controller::fence_changes_partition;
use highwater_model::state::{
    Compact, Controller, Entry, IdSet, IsrChain, LeaderView, LogStore, Num, RecordHistory,
    RecordTable, Replica, ReplicaSet, Request, Shape, Table, MAX_REPLICAS,
};
use highwater_model::{Config, HwCheckpoint, State};
use std::fmt::Display;

/// `snap` as a model state, forgetting what the model forgets (see
/// `forget_what_no_longer_matters`) so that equal behaviour means equal
/// states; compare it through [`comparable`].
pub fn abstract_state<S: Shape>(cfg: &Config, snap: &ClusterSnapshot) -> Result<State<S>, String> {
    abstract_state_with(cfg, snap, None)
}

/// The logs and records of a snapshot, already in the model's terms (kept
/// up to date event by event by trace validation,
/// `trace_validation::incremental`, so that an event costs what it
/// changed): [`abstract_state_with`] takes them instead of converting the
/// snapshot's, which it then does not read.
pub struct Converted<S: Shape> {
    /// Each replica's log, in order.
    pub logs: Vec<S::Log>,
    pub records: S::Records,
    /// How many records `records` holds.
    pub produced: usize,
}

/// [`abstract_state`], with the logs and records given already converted
/// (`converted`: each as [`abstract_state`] would convert the snapshot's).
pub fn abstract_state_with<S: Shape>(
    cfg: &Config,
    snap: &ClusterSnapshot,
    converted: Option<Converted<S>>,
) -> Result<State<S>, String> {
    let (mut logs, records) = match converted {
        Some(c) => (
            c.logs.into_iter().map(Some).collect(),
            Some((c.records, c.produced)),
        ),
        None => (Vec::new(), None),
    };
    let mut s = State::<S> {
        n: fit(snap.replicas.len(), "replica count")?,
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
        let log = logs.get_mut(i).and_then(Option::take);
        s.replicas[i] = replica::<S>(r, periodic, log).map_err(|e| format!("replica {i}: {e}"))?;
    }
    let c = &snap.controller;
    s.controller = Controller {
        leader: c.leader.map(|l| fit(l, "leader")).transpose()?,
        epoch: c.leader_epoch.map(|e| fit(e, "epoch")).transpose()?,
        isr: set(&c.isr)?,
        elr: set(&c.elr)?,
        lke: set(&c.last_known_elr)?,
        recovering: c.recovering,
        fenced: ReplicaSet::EMPTY,
    };
    s.controller.fenced = fenced(cfg, &s, &set(&c.alive)?);
    let mut requests = Vec::new();
    for (&epoch, req) in snap.requests.iter() {
        let slot = usize::try_from(epoch).map_err(|_| format!("a request for epoch {epoch}"))?;
        if slot >= requests.len() {
            requests.resize(slot + 1, None);
        }
        let leader = req.leader.map(|l| fit(l, "leader")).transpose()?;
        let isr = set(&req.isr)?;
        let history = snap.epoch_isrs.get(&epoch).map_or(&[][..], Vec::as_slice);
        let e = fit(epoch, "epoch")?;
        let later_isrs = later_isrs::<S>(cfg, &s, e, leader, isr, history)?;
        requests[slot] = Some(Request {
            leader,
            isr,
            later_isrs,
        });
    }
    let epochs = requests.len();
    s.requests = S::Requests::from_vec(requests).ok_or_else(|| {
        format!(
            "requests up to epoch {}, beyond the model's bound",
            epochs - 1
        )
    })?;
    let produced = match records {
        Some((records, produced)) => {
            s.records = records;
            produced
        }
        None => {
            let mut records = Vec::new();
            for (expected, (&id, h)) in snap.records.iter().enumerate() {
                if id != expected as u64 {
                    return Err(format!("record {id} where {expected} was expected"));
                }
                records.push(record_of(h)?);
            }
            s.records = RecordTable::from_vec(records)
                .ok_or_else(|| format!("{} records; the model holds fewer", snap.records.len()))?;
            snap.records.len()
        }
    };
    s.produced = fit(produced, "records produced")?;
    s.clean_crashes = fit(snap.clean_crashes, "clean crashes")?;
    s.unclean_crashes = fit(snap.unclean_crashes, "unclean crashes")?;
    s.leader_moves = fit(snap.leader_moves, "leader moves")?;
    forget_what_no_longer_matters(cfg, &mut s);
    Ok(s)
}

/// The live brokers the controller counts as fenced: up, but not among
/// those it counts registered and unfenced (`alive`). One whose fence has
/// yet to change the partition (the controller stopped counting it and has
/// not yet removed it from the ISR, or taken its leadership away: the
/// concurrent driver traces the two apart) is not fenced yet: the model's
/// ControllerShrinkIsr does both at once.
fn fenced<S: Shape>(cfg: &Config, s: &State<S>, unfenced: &ReplicaSet) -> ReplicaSet {
    s.ids()
        .filter(|&r| s.replica(r).alive && !unfenced.contains(r))
        .filter(|&r| !fence_changes_partition(cfg, s, r))
        .fold(ReplicaSet::EMPTY, ReplicaSet::with)
}

/// `s` without what only the model's history decides: the ISR of a request
/// whose leader can no longer take it (the model keeps part of the current
/// one for a sometimes-property, as an intersection over the epoch's past
/// ISRs, which no snapshot holds).
pub fn comparable<S: Shape>(s: &State<S>) -> State<S> {
    normalised(s).into_owned()
}

/// `comparable(s) == *target`, without a copy of `s` where it holds no
/// request to normalise (most states: trace validation's search compares
/// every successor it makes, and the copies were a tenth of its time).
pub fn comparable_to<S: Shape>(s: &State<S>, target: &State<S>) -> bool {
    *normalised(s) == *target
}

/// [`comparable`], borrowed where nothing changes.
fn normalised<S: Shape>(s: &State<S>) -> std::borrow::Cow<'_, State<S>> {
    let mut out = std::borrow::Cow::Borrowed(s);
    for epoch in s.request_epochs() {
        if let Some(req) = s.request(epoch) {
            let takeable = req.leader.is_some_and(|l| accepts_request(s, l, epoch));
            if !takeable && !req.isr.is_empty() {
                out.to_mut().set_request(
                    epoch,
                    Request {
                        isr: ReplicaSet::EMPTY,
                        ..req
                    },
                );
            }
        }
    }
    out
}

/// One record's history as the model's.
pub fn record_of<S: Shape>(
    h: &highwater::cluster::RecordHistory,
) -> Result<RecordHistory<S>, String> {
    Ok(RecordHistory {
        offset: fit(h.offset, "record offset")?,
        acked: h.acked.map(|e| fit(e, "ack epoch")).transpose()?,
        visible: h.visible.map(|e| fit(e, "visible epoch")).transpose()?,
    })
}

fn replica<S: Shape>(
    r: &ReplicaSnapshot,
    periodic: bool,
    converted: Option<S::Log>,
) -> Result<Replica<S>, String> {
    let log = match converted {
        Some(log) => log,
        None => log::<S>(&r.log)?,
    };
    if log.leo().idx() as u64 != r.log_end_offset {
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
        *slot = leo.map(|o| fit(o, "follower LEO")).transpose()?;
    }
    let mut pending_acks = S::Pending::default();
    for &id in &r.pending_acks {
        let id: S::RecordId = fit(id, "waiting record")?;
        // The compact shape's set is a byte of bits.
        if S::BOUNDED && id.idx() >= MAX_WAITING {
            return Err(format!("waiting record {id} beyond the model's records"));
        }
        pending_acks.insert(id);
    }
    Ok(Replica {
        alive: r.alive,
        log,
        hw: fit(r.high_watermark, "HW")?,
        recovery_point: fit(r.recovery_point, "recovery point")?,
        // Kept at 0 by the model unless the HW is checkpointed periodically
        // (with every change, the file is the HW).
        hw_checkpoint: if periodic {
            fit(r.hw_checkpoint, "HW checkpoint")?
        } else {
            S::Offset::ZERO
        },
        epoch: r.leader_epoch.map(|e| fit(e, "epoch")).transpose()?,
        leader: match r.leader {
            ImplLeaderView::Unknown => LeaderView::Unknown,
            ImplLeaderView::NoLeader => LeaderView::NoLeader,
            ImplLeaderView::Replica(l) => LeaderView::Replica(fit(l, "leader")?),
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
fn log<S: Shape>(entries: &[LogEntry]) -> Result<S::Log, String> {
    let mut model = Vec::with_capacity(entries.len());
    for (expected, e) in entries.iter().enumerate() {
        if e.offset != expected as u64 {
            return Err(format!("offset {} where {expected} was expected", e.offset));
        }
        model.push(entry_of::<S>(e)?);
    }
    S::Log::from_entries(model)
        .ok_or_else(|| format!("{} entries; the model holds fewer", entries.len()))
}

/// One record as the model's log entry: its record id, written in an epoch.
pub fn model_entry(e: &LogEntry) -> Result<Entry, String> {
    entry_of::<Compact>(e)
}

pub fn entry_of<S: Shape>(e: &LogEntry) -> Result<Entry<S>, String> {
    let id = e
        .record_id
        .ok_or_else(|| format!("the record at offset {} has no record id", e.offset))?;
    Ok(Entry {
        id: fit(id, "record id")?,
        epoch: fit(e.epoch, "entry epoch")?,
    })
}

/// The model's `Request::later_isrs` of epoch `e`, from every ISR the
/// controller held in it (`history`, oldest first): those after the one its
/// leader applied last (its copy, once it leads in the epoch; else the
/// request's, the first it will hold) that name it, the controller's
/// current ISR left out while the epoch is current (the model reads that
/// from the controller). Under `zombie-learns-only-last-isr`, only a left
/// epoch's last.
fn later_isrs<S: Shape>(
    cfg: &Config,
    s: &State<S>,
    e: S::Epoch,
    leader: Option<u8>,
    request_isr: ReplicaSet,
    history: &[Vec<u32>],
) -> Result<IsrChain, String> {
    let Some(l) = leader else {
        return Ok(IsrChain::EMPTY);
    };
    let r = s.replica(l);
    let leads = r.epoch == Some(e) && r.presumes_leadership(l);
    // Where no leader can learn from it, the model keeps none
    // (`forget_what_no_longer_matters`); nor is it then bounded.
    if !leads && !accepts_request(s, l, e) {
        return Ok(IsrChain::EMPTY);
    }
    let holds = match leads {
        true => r.isr,
        false => request_isr,
    };
    let history = history
        .iter()
        .map(|x| set(x))
        .collect::<Result<Vec<_>, _>>()?;
    let mut later: Vec<ReplicaSet> = isrs_after(&history, |&x| x == holds).to_vec();
    later.retain(|x| x.contains(l));
    let current = s.controller.epoch == Some(e);
    if current && later.last() == Some(&s.controller.isr) {
        later.pop();
    }
    if cfg.mutation == Some(Mutation::ZombieLearnsOnlyLastIsr) {
        later = match current {
            true => Vec::new(),
            false => later.last().copied().into_iter().collect(),
        };
    }
    IsrChain::of(&later).ok_or_else(|| {
        format!("epoch {e:?}'s ISRs {later:?} still to apply: beyond the model's bound")
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

/// Record ids the compact shape's set of waiting producers can hold.
const MAX_WAITING: usize = 8;

/// `v` as one of the shape's numbers.
fn fit<N: Num, T: Copy + Display + TryInto<usize>>(v: T, what: &str) -> Result<N, String> {
    v.try_into()
        .ok()
        .and_then(N::try_at)
        .ok_or_else(|| format!("{what} {v} does not fit the model"))
}

/// A state in any shape, for a reader: the compact shape's table where the
/// state fits it, else each replica's and the controller's state in a line
/// (the last entries of each log only).
pub fn show<S: Shape>(s: &State<S>) -> String {
    if let Some(c) = s.reshape::<Compact>() {
        return highwater_model::render::state_table(&c);
    }
    let mut out = String::new();
    for r in s.ids() {
        let x = s.replica(r);
        let tail: Vec<_> = x.log.iter_from(x.log.len().saturating_sub(4)).collect();
        out.push_str(&format!(
            "{}: {} epoch {:?} leader {:?} LEO {} HW {} recovery point {} HW checkpoint {} \
             ISR {:?} follower LEOs {:?} last entries {:?}\n",
            highwater_model::state::replica_name(r),
            if x.alive { "up" } else { "down" },
            x.epoch,
            x.leader,
            x.leo(),
            x.hw,
            x.recovery_point,
            x.hw_checkpoint,
            x.isr,
            &x.follower_leo[..usize::from(s.n)],
            tail
        ));
    }
    out.push_str(&format!(
        "controller: {:?}; {} records produced\n",
        s.controller, s.produced
    ));
    out
}
