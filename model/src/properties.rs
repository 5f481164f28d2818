//! What must always hold, and what must sometimes happen (so that nothing
//! holds vacuously). Each property is a plain function of the state.

use crate::model::PartitionModel;
use crate::state::{
    replica_name, LogStore, Num, RecordHistory, RecordName, ReplicaId, Shape, State,
};
use stateright::{Model, Property};

pub const COMMITTED_RECORDS_SURVIVE: &str = "committed records survive";
pub const ACKNOWLEDGED_RECORDS_SURVIVE: &str = "acknowledged records survive";
pub const STRONG_ISR: &str = "strong ISR";
pub const LEADER_IN_ISR: &str = "leader in ISR";
pub const HW_WITHIN_LOG: &str = "HW <= LEO";
pub const NO_DIVERGENCE_BELOW_HW: &str = "logs agree below the HW";

/// The always-properties, in the order [`properties`] lists them.
pub const ALWAYS: [&str; 6] = [
    COMMITTED_RECORDS_SURVIVE,
    ACKNOWLEDGED_RECORDS_SURVIVE,
    STRONG_ISR,
    LEADER_IN_ISR,
    HW_WITHIN_LOG,
    NO_DIVERGENCE_BELOW_HW,
];

pub const SOMETIMES_COMMIT: &str = "a record commits";
pub const SOMETIMES_ISR_LEADER_ALONE: &str = "the ISR shrinks to the leader alone";
pub const SOMETIMES_FOLLOWER_REJOINS: &str = "a removed follower rejoins";
pub const SOMETIMES_LEADER_CHANGES: &str = "the leader changes";
pub const SOMETIMES_UNCLEAN_RESTART: &str = "a replica crashes uncleanly and comes back";
pub const SOMETIMES_ACKNOWLEDGED: &str = "a write is acknowledged";
pub const SOMETIMES_ACKED_OUTLIVES_LEADER: &str = "an acknowledged record outlives its leader";

pub fn properties() -> Vec<Property<PartitionModel>> {
    vec![
        Property::always(COMMITTED_RECORDS_SURVIVE, |_, s: &State| {
            records_survive(s, |h| h.visible)
        }),
        Property::always(ACKNOWLEDGED_RECORDS_SURVIVE, |_, s: &State| {
            records_survive(s, |h| h.acked)
        }),
        Property::always(STRONG_ISR, |_, s: &State| strong_isr(s)),
        Property::always(LEADER_IN_ISR, |_, s: &State| leader_in_isr(s)),
        Property::always(HW_WITHIN_LOG, |_, s: &State| hw_within_log(s)),
        Property::always(NO_DIVERGENCE_BELOW_HW, |_, s: &State| {
            logs_agree_below_hw(s)
        }),
        Property::sometimes(SOMETIMES_COMMIT, |_, s: &State| {
            s.records.iter().any(|h| h.visible.is_some())
        }),
        Property::sometimes(SOMETIMES_ISR_LEADER_ALONE, |_, s: &State| {
            let c = &s.controller;
            c.leader
                .is_some_and(|l| c.isr == crate::state::ReplicaSet::single(l))
        }),
        // Only an expand adds to the ISR a leader was elected with (of which
        // the state keeps the members not removed since; see
        // `forget_what_no_longer_matters`).
        Property::sometimes(SOMETIMES_FOLLOWER_REJOINS, |_, s: &State| {
            let c = &s.controller;
            c.epoch
                .and_then(|e| s.request(e))
                .is_some_and(|req| c.isr.iter().any(|r| !req.isr.contains(r)))
        }),
        Property::sometimes(SOMETIMES_LEADER_CHANGES, |_, s: &State| {
            let mut leaders = s.requests.iter().flatten().filter_map(|r| r.leader);
            leaders
                .next()
                .is_some_and(|first| leaders.any(|l| l != first))
        }),
        Property::sometimes(SOMETIMES_UNCLEAN_RESTART, |_, s: &State| {
            s.unclean_crashes > 0 && s.ids().all(|r| !s.replica(r).unclean_down)
        }),
        // Without these, a rule that never acknowledges a write would pass
        // every guarantee about acknowledged records vacuously.
        Property::sometimes(SOMETIMES_ACKNOWLEDGED, |_, s: &State| {
            s.records.iter().any(|h| h.acked.is_some())
        }),
        Property::sometimes(SOMETIMES_ACKED_OUTLIVES_LEADER, |_, s: &State| {
            survives_a_later_leader(s, |h| h.acked)
        }),
    ]
}

/// Some record `epoch_of` marks is held, at its offset, by a presumed
/// leader of a later epoch than the one it was marked in: the survival
/// properties then say something about it.
pub fn survives_a_later_leader<S: Shape>(
    s: &State<S>,
    epoch_of: fn(&RecordHistory<S>) -> Option<S::Epoch>,
) -> bool {
    s.produced_records().iter().enumerate().any(|(id, h)| {
        let Some(since) = epoch_of(h) else {
            return false;
        };
        s.presumed_leaders().any(|l| {
            let r = s.replica(l);
            r.epoch > Some(since) && r.log.get(h.offset).is_some_and(|e| e.id.idx() == id)
        })
    })
}

/// When each always-property says something, as a sometimes-property of
/// the same name: a state where its check is not trivially true (no record
/// marked, no leader, every HW at 0, an ISR of the leader alone). A
/// property whose premise no reachable state meets holds vacuously;
/// `model/tests/sometimes.rs` asks that each is met.
pub fn premises() -> Vec<Property<PartitionModel>> {
    vec![
        // A record committed in one epoch, and a leader of a later one.
        Property::sometimes(COMMITTED_RECORDS_SURVIVE, |_, s: &State| {
            survives_a_later_leader(s, |h| h.visible)
        }),
        Property::sometimes(ACKNOWLEDGED_RECORDS_SURVIVE, |_, s: &State| {
            survives_a_later_leader(s, |h| h.acked)
        }),
        // A leader with an HW above 0 and another ISR member, up.
        Property::sometimes(STRONG_ISR, |_, s: &State| {
            s.presumed_leaders().any(|l| {
                s.replica(l).hw > 0
                    && s.controller
                        .isr
                        .iter()
                        .any(|r| r != l && !s.replica(r).unclean_down)
            })
        }),
        // A leader, one of several in the ISR.
        Property::sometimes(LEADER_IN_ISR, |_, s: &State| {
            s.controller.leader.is_some() && s.controller.isr.len() > 1
        }),
        Property::sometimes(HW_WITHIN_LOG, |_, s: &State| {
            s.ids().any(|r| s.replica(r).hw > 0)
        }),
        // Two replicas with an HW above 0 each.
        Property::sometimes(NO_DIVERGENCE_BELOW_HW, |_, s: &State| {
            s.ids().filter(|&r| s.replica(r).hw > 0).count() > 1
        }),
    ]
}

/// Names of the always-properties, in order.
pub fn safety_names() -> Vec<&'static str> {
    PartitionModel::default()
        .properties()
        .into_iter()
        .filter(|p| p.expectation == stateright::Expectation::Always)
        .map(|p| p.name)
        .collect()
}

/// The always-properties `s` breaks, as both explorers mark a state: each
/// that `explain` finds broken (each property's check says so without
/// writing why; `explain_agrees_with_each_check` below).
pub fn broken<S: Shape>(s: &State<S>) -> Vec<&'static str> {
    ALWAYS.into_iter().filter(|&name| !holds(name, s)).collect()
}

/// Whether `s` meets the always-property `name` (as [`properties`] checks
/// it; any other name holds).
pub fn holds<S: Shape>(name: &str, s: &State<S>) -> bool {
    match name {
        COMMITTED_RECORDS_SURVIVE => records_survive(s, |h| h.visible),
        ACKNOWLEDGED_RECORDS_SURVIVE => records_survive(s, |h| h.acked),
        STRONG_ISR => strong_isr(s),
        LEADER_IN_ISR => leader_in_isr(s),
        HW_WITHIN_LOG => hw_within_log(s),
        NO_DIVERGENCE_BELOW_HW => logs_agree_below_hw(s),
        _ => true,
    }
}

/// Every record that `epoch_of` marks (committed or acknowledged at some
/// epoch) is at its offset on every later leader: every replica presuming
/// leadership with an epoch at or above that one. Stale leaders' marks count.
pub fn records_survive<S: Shape>(
    s: &State<S>,
    epoch_of: fn(&RecordHistory<S>) -> Option<S::Epoch>,
) -> bool {
    // The presumed leaders, found once rather than for every record.
    let leaders = presumed_leader_set(s);
    s.produced_records()
        .iter()
        .enumerate()
        .all(|(id, h)| record_survives(s, leaders, id, h, epoch_of))
}

/// The replicas presuming leadership, as a set.
pub(crate) fn presumed_leader_set<S: Shape>(s: &State<S>) -> crate::state::ReplicaSet {
    s.presumed_leaders().fold(
        crate::state::ReplicaSet::EMPTY,
        crate::state::ReplicaSet::with,
    )
}

/// [`records_survive`] for one record, `id` with history `h`, on the
/// presumed leaders `leaders`.
pub(crate) fn record_survives<S: Shape>(
    s: &State<S>,
    leaders: crate::state::ReplicaSet,
    id: usize,
    h: &RecordHistory<S>,
    epoch_of: fn(&RecordHistory<S>) -> Option<S::Epoch>,
) -> bool {
    let Some(since) = epoch_of(h) else {
        return true;
    };
    leaders.iter().all(|l| {
        let r = s.replica(l);
        r.epoch < Some(since) || r.log.get(h.offset).is_some_and(|e| e.id.idx() == id)
    })
}

/// Below any presumed leader's HW, every quorum ISR member holds the same
/// records as the leader. A replica down after an unclean crash is left out
/// until it restarts, when the controller hears of it.
pub fn strong_isr<S: Shape>(s: &State<S>) -> bool {
    strong_isr_pairs(s).all(|(l, r)| {
        let leader = s.replica(l);
        leader.log.agrees_below(&s.replica(r).log, leader.hw)
    })
}

/// The (leader, ISR member) pairs [`strong_isr`] compares.
pub(crate) fn strong_isr_pairs<S: Shape>(
    s: &State<S>,
) -> impl Iterator<Item = (ReplicaId, ReplicaId)> + '_ {
    s.presumed_leaders().flat_map(move |l| {
        s.controller
            .isr
            .iter()
            .filter(move |&r| !s.replica(r).unclean_down)
            .map(move |r| (l, r))
    })
}

/// The controller's leader is in its ISR.
pub fn leader_in_isr<S: Shape>(s: &State<S>) -> bool {
    s.controller
        .leader
        .is_none_or(|l| s.controller.isr.contains(l))
}

/// No replica's HW is above its log end.
pub fn hw_within_log<S: Shape>(s: &State<S>) -> bool {
    s.ids().all(|r| s.replica(r).hw <= s.replica(r).leo())
}

/// No two replicas disagree below both of their HWs.
pub fn logs_agree_below_hw<S: Shape>(s: &State<S>) -> bool {
    replica_pairs(s).all(|(a, b)| {
        let (ra, rb) = (s.replica(a), s.replica(b));
        ra.log.agrees_below(&rb.log, ra.hw.min(rb.hw))
    })
}

/// Every pair of replicas, each once.
pub(crate) fn replica_pairs<S: Shape>(
    s: &State<S>,
) -> impl Iterator<Item = (ReplicaId, ReplicaId)> + '_ {
    s.ids()
        .flat_map(move |a| s.ids().filter(move |&b| b > a).map(move |b| (a, b)))
}

/// Why `s` breaks the always-property `name`, in words naming the records
/// and replicas involved (None when it does not break it).
pub fn explain<S: Shape>(name: &str, s: &State<S>) -> Option<String> {
    match name {
        COMMITTED_RECORDS_SURVIVE => missing_record(s, |h| h.visible, "committed"),
        ACKNOWLEDGED_RECORDS_SURVIVE => missing_record(s, |h| h.acked, "acknowledged"),
        STRONG_ISR => strong_isr_breach(s),
        LEADER_IN_ISR => {
            let c = &s.controller;
            let l = c.leader.filter(|l| !c.isr.contains(*l))?;
            Some(format!(
                "the controller's leader {} is not in its ISR {:?}",
                replica_name(l),
                c.isr
            ))
        }
        HW_WITHIN_LOG => s
            .ids()
            .find(|&r| s.replica(r).hw > s.replica(r).leo())
            .map(|r| {
                let x = s.replica(r);
                format!(
                    "{}'s HW {} is above its LEO {}",
                    replica_name(r),
                    x.hw,
                    x.leo()
                )
            }),
        NO_DIVERGENCE_BELOW_HW => s.ids().find_map(|a| {
            s.ids().filter(|&b| b > a).find_map(|b| {
                let (ra, rb) = (s.replica(a), s.replica(b));
                let below = ra.hw.min(rb.hw);
                let at = first_difference::<S>(&ra.log, &rb.log, below)?;
                Some(format!(
                    "{} and {} disagree at offset {at}, below both HWs ({} and {}): {}; {}",
                    replica_name(a),
                    replica_name(b),
                    ra.hw,
                    rb.hw,
                    holds_at::<S>(a, &ra.log, at),
                    holds_at::<S>(b, &rb.log, at)
                ))
            })
        }),
        _ => None,
    }
}

/// A record that a presumed leader of its epoch or later lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Missing<S: Shape = crate::state::Compact> {
    pub record: S::RecordId,
    pub offset: S::Offset,
    /// The presumed leader that lacks it.
    pub leader: ReplicaId,
    /// The epoch in which it was acknowledged (or committed).
    pub since: S::Epoch,
}

/// Every record `epoch_of` marks (acknowledged: `|h| h.acked`; committed:
/// `|h| h.visible`) that a presumed leader of that epoch or later lacks.
pub fn missing_records<S: Shape>(
    s: &State<S>,
    epoch_of: fn(&RecordHistory<S>) -> Option<S::Epoch>,
) -> impl Iterator<Item = Missing<S>> + '_ {
    s.produced_records()
        .iter()
        .enumerate()
        .filter_map(move |(id, h)| Some((S::RecordId::at(id), h.offset, epoch_of(h)?)))
        .flat_map(move |(record, offset, since)| {
            s.presumed_leaders().filter_map(move |l| {
                let r = s.replica(l);
                let held = r.log.get(offset).is_some_and(|e| e.id == record);
                (r.epoch >= Some(since) && !held).then_some(Missing {
                    record,
                    offset,
                    leader: l,
                    since,
                })
            })
        })
}

/// A record `epoch_of` marks, missing on a later presumed leader.
fn missing_record<S: Shape>(
    s: &State<S>,
    epoch_of: fn(&RecordHistory<S>) -> Option<S::Epoch>,
    what: &str,
) -> Option<String> {
    let m = missing_records(s, epoch_of).next()?;
    let r = s.replica(m.leader);
    Some(format!(
        "{what} record {}@{} ({what} in epoch {}) is missing on {}, leader of epoch {}: {}",
        RecordName(m.record),
        m.offset,
        m.since,
        replica_name(m.leader),
        r.epoch.map_or("-".to_string(), |e| e.to_string()),
        holds_at::<S>(m.leader, &r.log, m.offset)
    ))
}

fn strong_isr_breach<S: Shape>(s: &State<S>) -> Option<String> {
    s.presumed_leaders().find_map(|l| {
        let leader = s.replica(l);
        s.controller
            .isr
            .iter()
            .filter(|&r| !s.replica(r).unclean_down)
            .find_map(|r| {
                let at = first_difference::<S>(&leader.log, &s.replica(r).log, leader.hw)?;
                Some(format!(
                    "below leader {}'s HW {}, ISR member {} differs at offset {at}: {}; {}",
                    replica_name(l),
                    leader.hw,
                    replica_name(r),
                    holds_at::<S>(l, &leader.log, at),
                    holds_at::<S>(r, &s.replica(r).log, at)
                ))
            })
    })
}

/// The first offset below `below` where the logs differ (or one ends).
fn first_difference<S: Shape>(a: &S::Log, b: &S::Log, below: S::Offset) -> Option<S::Offset> {
    if a.agrees_below(b, below) {
        return None;
    }
    (0..below.idx())
        .map(S::Offset::at)
        .find(|&o| a.get(o) != b.get(o) || a.get(o).is_none())
}

/// What replica `r` holds at `offset`, in words.
fn holds_at<S: Shape>(r: ReplicaId, log: &S::Log, offset: S::Offset) -> String {
    match log.get(offset) {
        Some(e) => format!("{} has {e:?} there", replica_name(r)),
        None => format!("{}'s log ends at {}", replica_name(r), log.leo()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::{apply, enabled};
    use crate::presets::PRESETS;
    use crate::state::Unbounded;
    use std::collections::{HashSet, VecDeque};

    /// `broken` asks each property's check; the explorers and reports ask
    /// `explain`: on every state breadth-first from each preset's initial
    /// one (the first few thousand, historical presets reaching broken
    /// states), in both shapes, they agree.
    #[test]
    fn explain_agrees_with_each_check() {
        let mut broke = 0;
        for preset in PRESETS {
            let cfg = preset.config;
            let init = PartitionModel::new(cfg).init_state();
            let mut seen = HashSet::from([init]);
            let mut queue = VecDeque::from([init]);
            let mut acts = Vec::new();
            while let Some(s) = queue.pop_front() {
                let wide: State<Unbounded> = s.reshape().expect("fits");
                for name in ALWAYS {
                    let held = explain(name, &s).is_none();
                    assert_eq!(holds(name, &s), held, "{}: {name}", preset.name);
                    assert_eq!(holds(name, &wide), held, "{}: {name}", preset.name);
                    assert_eq!(explain(name, &wide).is_none(), held);
                    broke += usize::from(!held);
                }
                if seen.len() > 3000 {
                    continue;
                }
                acts.clear();
                enabled(&cfg, &s, &mut acts);
                for &a in &acts {
                    if let Some(next) = apply(&cfg, &s, a) {
                        if seen.insert(next) {
                            queue.push_back(next);
                        }
                    }
                }
            }
        }
        assert!(broke > 0, "some states break a property");
    }
}
