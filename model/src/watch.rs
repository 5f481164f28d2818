//! The always-properties of a run's successive states, each checked at the
//! cost of what changed since the state before it (trace validation checks
//! every event's state, and reading every record and log entry of a long
//! run at every event made its work per event grow with the run).
//!
//! The properties are [`properties`](crate::properties)' own functions; a
//! [`Watch`] only chooses what they read again. Where the state before met
//! a property and what the property ranges over is unchanged (the presumed
//! leaders and their epochs, the ISR, who is down after an unclean crash),
//! what held there still holds for every record and log entry that did not
//! change, so only the changed ones are read:
//!
//! - *records survive*: a record can go missing on a leader only if its
//!   history changed or that leader's log changed at its offset. A marked
//!   record that held before sat at its offset in the leader's log then, so
//!   the records to read again are the changed ones and those the leader's
//!   old log held from the first offset where its log changed.
//! - *strong ISR* and *logs agree below the HW*: two logs that agreed below
//!   `n` before still agree below the first offset where either changed
//!   (capped at `n`); only the entries from there up to today's bound are
//!   compared.
//!
//! A records property broken before keeps the records that broke it: a
//! record's verdict reads only its history and the presumed leaders' logs
//! at its offset, so with the frame unchanged only the changed records,
//! and the broken ones at or past where a leader's log changed, are read
//! again; every other keeps its verdict. (Under a historical rule set a
//! record once lost stays lost to the run's end, and checking the whole
//! property at every event was most of validating such a run.)
//!
//! Anything else (another leader, an ISR change, any other property broken
//! before) is checked whole.
//!
//! In the model's own steps a property of these breaks only where its frame
//! changes (a presumed leader's log only grows while it leads, and a record
//! is marked by a leader that holds it), so the random walks of
//! `model/tests/watch.rs` catch a watch blind to a new leader but not one
//! blind to changed records or logs. Trace validation gives the watch the
//! implementation's states, which a faulty implementation can make
//! anything: the same tests catch those blind watches on states the model
//! never reaches (a leader's log cut under it, a record marked where its
//! leader does not hold it). The verdicts are [`properties::broken`]'s: the model's
//! random-walk test compares them at every step, and trace validation's
//! cross-check at every event.

use crate::properties::{
    self, presumed_leader_set, record_survives, replica_pairs, strong_isr_pairs,
    ACKNOWLEDGED_RECORDS_SURVIVE, ALWAYS, COMMITTED_RECORDS_SURVIVE, NO_DIVERGENCE_BELOW_HW,
    STRONG_ISR,
};
use std::collections::BTreeSet;

use crate::state::{LogStore, Num, RecordHistory, RecordTable, ReplicaId, Shape, State};

/// Deliberately wrong ways of watching, to show the random-walk test
/// catches them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFault {
    /// A new leader, epoch or ISR not noticed: only what changed is read.
    FrameUnseen,
    /// The records whose histories changed are not read again.
    RecordChangesUnseen,
    /// Every log taken as unchanged, entries and length.
    LogChangesUnseen,
    /// The records that broke a property before are forgotten.
    BrokenRecordsUnseen,
}

/// See the module's documentation.
pub struct Watch<S: Shape> {
    last: Option<(State<S>, Vec<&'static str>)>,
    /// For each records property the last state broke, the records that
    /// broke it there.
    breaking: Vec<(&'static str, Breaking)>,
    fault: Option<WatchFault>,
}

impl<S: Shape> Default for Watch<S> {
    fn default() -> Self {
        Watch {
            last: None,
            breaking: Vec::new(),
            fault: None,
        }
    }
}

impl<S: Shape> Watch<S> {
    /// A watch with `fault` (tests only: its verdicts are wrong).
    pub fn with_fault(fault: WatchFault) -> Watch<S> {
        Watch {
            last: None,
            breaking: Vec::new(),
            fault: Some(fault),
        }
    }

    /// The always-properties `s` breaks ([`properties::broken`]), read
    /// from what changed since the state this watch was last given.
    pub fn broken(&mut self, s: &State<S>) -> Vec<&'static str> {
        let mut was = std::mem::take(&mut self.breaking);
        let last = self.last.take().filter(|(p, _)| p.n == s.n);
        let since = last
            .as_ref()
            .map(|(p, before)| (p, before, Changes::between(p, s, self.fault)));
        let mut broken = Vec::new();
        for name in ALWAYS {
            let held = match (records_marked_by(name), &since) {
                (Some(epoch_of), _) => {
                    let was = was
                        .iter_mut()
                        .find(|(n, _)| *n == name)
                        .map(|(_, ids)| std::mem::take(ids));
                    let now = records_breaking_after(name, s, since.as_ref(), was, epoch_of);
                    let held = now.is_empty();
                    if !held {
                        self.breaking.push((name, now));
                    }
                    held
                }
                (None, Some((p, before, changes))) if !before.contains(&name) => {
                    holds_since(name, p, s, changes)
                }
                // Checked whole: it may heal.
                (None, _) => properties::holds(name, s),
            };
            if !held {
                broken.push(name);
            }
        }
        self.last = Some((s.clone(), broken.clone()));
        broken
    }
}

/// The state a watch was last given, what it broke there, and what changed
/// since.
type Since<'a, S> = (&'a State<S>, &'a Vec<&'static str>, Changes);

/// The records that break records property `name` in `s`: where the state
/// before met it, none unless it breaks now; where it broke there (`was`:
/// the records that broke it), those of them still breaking it and the
/// changed ones that do; else read whole.
fn records_breaking_after<S: Shape>(
    name: &'static str,
    s: &State<S>,
    since: Option<&Since<'_, S>>,
    was: Option<Breaking>,
    epoch_of: fn(&RecordHistory<S>) -> Option<S::Epoch>,
) -> Breaking {
    match (since, was) {
        (Some((p, before, changes)), _) if !before.contains(&name) => {
            match holds_since(name, p, s, changes) {
                true => Breaking::new(),
                false => records_breaking(s, epoch_of),
            }
        }
        (Some((p, _, changes)), Some(was)) => records_breaking_since(p, s, changes, epoch_of, was),
        _ => records_breaking(s, epoch_of),
    }
}

/// What changed between two states with as many replicas.
struct Changes {
    /// Per replica, how many entries from offset 0 its log kept.
    kept: Vec<usize>,
    /// The records, among those produced, whose histories changed.
    records: Vec<usize>,
    fault: Option<WatchFault>,
}

impl Changes {
    fn between<S: Shape>(p: &State<S>, s: &State<S>, fault: Option<WatchFault>) -> Changes {
        let kept = s
            .ids()
            .map(|r| {
                let (a, b) = (&p.replica(r).log, &s.replica(r).log);
                match fault {
                    Some(WatchFault::LogChangesUnseen) => a.len(),
                    _ => a.common_prefix(b),
                }
            })
            .collect();
        let records = match fault {
            Some(WatchFault::RecordChangesUnseen) => Vec::new(),
            _ => s
                .records
                .changed_since(&p.records, s.produced_records().len()),
        };
        Changes {
            kept,
            records,
            fault,
        }
    }
    /// Whether what a property ranges over is the same in both.
    fn same_frame<T: PartialEq>(&self, before: T, now: T) -> bool {
        self.fault == Some(WatchFault::FrameUnseen) || before == now
    }
    fn kept(&self, r: ReplicaId) -> usize {
        self.kept[r as usize]
    }
}

/// Whether `s` meets `name`, given that `p` met it.
fn holds_since<S: Shape>(name: &str, p: &State<S>, s: &State<S>, changes: &Changes) -> bool {
    match name {
        COMMITTED_RECORDS_SURVIVE => records_survive_since(p, s, changes, |h| h.visible),
        ACKNOWLEDGED_RECORDS_SURVIVE => records_survive_since(p, s, changes, |h| h.acked),
        STRONG_ISR => strong_isr_since(p, s, changes),
        NO_DIVERGENCE_BELOW_HW => logs_agree_since(p, s, changes),
        _ => properties::holds(name, s),
    }
}

/// The presumed leaders and their epochs.
fn leaders<S: Shape>(s: &State<S>) -> Vec<(ReplicaId, Option<S::Epoch>)> {
    s.presumed_leaders()
        .map(|l| (l, s.replica(l).epoch))
        .collect()
}

/// The history mark a records property reads, if `name` is one.
#[allow(clippy::type_complexity)]
fn records_marked_by<S: Shape>(name: &str) -> Option<fn(&RecordHistory<S>) -> Option<S::Epoch>> {
    match name {
        COMMITTED_RECORDS_SURVIVE => Some(|h| h.visible),
        ACKNOWLEDGED_RECORDS_SURVIVE => Some(|h| h.acked),
        _ => None,
    }
}

/// The records that do not survive in `s` (read whole).
fn records_breaking<S: Shape>(
    s: &State<S>,
    epoch_of: fn(&RecordHistory<S>) -> Option<S::Epoch>,
) -> Breaking {
    let set = presumed_leader_set(s);
    s.produced_records()
        .iter()
        .enumerate()
        .filter(|&(id, h)| !record_survives(s, set, id, h, epoch_of))
        .map(|(id, h)| (h.offset.idx(), id))
        .collect()
}

/// Records that break a property, as (offset, id): those at or past an
/// offset are found without reading the others.
type Breaking = BTreeSet<(usize, usize)>;

/// [`records_breaking`], given that in `p` the records `before` did not
/// survive and every other did. A record's verdict reads only its history
/// and the presumed leaders' logs at its offset, so with the frame
/// unchanged only the changed records and those at the offsets where a
/// presumed leader's log changed (one too short for a record may have
/// grown to it) are read again: a run that lost data keeps
/// thousands lost, and reading them all at every event was most of
/// validating it.
fn records_breaking_since<S: Shape>(
    p: &State<S>,
    s: &State<S>,
    changes: &Changes,
    epoch_of: fn(&RecordHistory<S>) -> Option<S::Epoch>,
    before: Breaking,
) -> Breaking {
    let produced = s.produced_records();
    if !changes.same_frame(leaders(p), leaders(s)) || produced.len() < p.produced_records().len() {
        return records_breaking(s, epoch_of);
    }
    let mut now = match changes.fault {
        Some(WatchFault::BrokenRecordsUnseen) => Breaking::new(),
        _ => before,
    };
    // Where a presumed leader's log changed: from the first changed offset
    // to the end of the longer of its two logs (past both, a record missing
    // for want of an entry still is).
    let mut again: Vec<usize> = Vec::new();
    for l in s.presumed_leaders() {
        let end = p.replica(l).leo().max(s.replica(l).leo()).idx();
        let changed = now.range((changes.kept(l), 0)..(end, 0));
        again.extend(changed.map(|&(_, id)| id));
    }
    again.extend(changed_record_ids(p, s, changes));
    let (old, set) = (p.produced_records(), presumed_leader_set(s));
    for id in again {
        if let Some(h) = old.get(id) {
            now.remove(&(h.offset.idx(), id));
        }
        if let Some(h) = produced.get(id) {
            now.remove(&(h.offset.idx(), id));
            if !record_survives(s, set, id, h, epoch_of) {
                now.insert((h.offset.idx(), id));
            }
        }
    }
    now
}

/// The records whose histories changed, and those a presumed leader's old
/// log held from where its log changed.
fn changed_record_ids<'a, S: Shape>(
    p: &'a State<S>,
    s: &'a State<S>,
    changes: &'a Changes,
) -> impl Iterator<Item = usize> + 'a {
    let in_changed_logs = s.presumed_leaders().flat_map(move |l| {
        let old = &p.replica(l).log;
        old.iter_from(changes.kept(l)).map(|e| e.id.idx())
    });
    changes.records.iter().copied().chain(in_changed_logs)
}

fn records_survive_since<S: Shape>(
    p: &State<S>,
    s: &State<S>,
    changes: &Changes,
    epoch_of: fn(&RecordHistory<S>) -> Option<S::Epoch>,
) -> bool {
    let produced = s.produced_records();
    if !changes.same_frame(leaders(p), leaders(s)) || produced.len() < p.produced_records().len() {
        return properties::records_survive(s, epoch_of);
    }
    let set = presumed_leader_set(s);
    let mut ids = changed_record_ids(p, s, changes);
    ids.all(|id| {
        produced
            .get(id)
            .is_none_or(|h| record_survives(s, set, id, h, epoch_of))
    })
}

/// Whether the logs of `a` and `b` agree below `now` in `s`, given that
/// they agreed below `before` in `p`.
fn pair_agrees_since<S: Shape>(
    s: &State<S>,
    changes: &Changes,
    (a, b): (ReplicaId, ReplicaId),
    before: S::Offset,
    now: S::Offset,
) -> bool {
    let from = before.idx().min(changes.kept(a)).min(changes.kept(b));
    s.replica(a).log.agrees_from(&s.replica(b).log, from, now)
}

fn strong_isr_since<S: Shape>(p: &State<S>, s: &State<S>, changes: &Changes) -> bool {
    let pairs: Vec<_> = strong_isr_pairs(s).collect();
    if !changes.same_frame(strong_isr_pairs(p).collect::<Vec<_>>(), pairs.clone()) {
        return properties::strong_isr(s);
    }
    pairs.into_iter().all(|(l, r)| {
        let (before, now) = (p.replica(l).hw, s.replica(l).hw);
        pair_agrees_since(s, changes, (l, r), before, now)
    })
}

fn logs_agree_since<S: Shape>(p: &State<S>, s: &State<S>, changes: &Changes) -> bool {
    replica_pairs(s).all(|(a, b)| {
        let bound = |x: &State<S>| x.replica(a).hw.min(x.replica(b).hw);
        pair_agrees_since(s, changes, (a, b), bound(p), bound(s))
    })
}
