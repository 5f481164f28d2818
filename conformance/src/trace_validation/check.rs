//! The model side of trace validation: after each event, the abstracted
//! implementation state must be the model's (a stutter) or reachable from
//! it by a few enabled actions (an event that completes one of the model's
//! atomic actions may complete another in passing: a fetch served after
//! which the leader's HW moves is two). The search is bounded, so the check
//! costs at most a constant per event.

use std::collections::{BTreeMap, HashMap, VecDeque};

use highwater::cluster::ClusterSnapshot;
use highwater_model::actions::{apply, enabled};
use highwater_model::properties::{
    explain, logs_agree_below_hw, records_survive, strong_isr, ACKNOWLEDGED_RECORDS_SURVIVE,
    COMMITTED_RECORDS_SURVIVE, HW_WITHIN_LOG, LEADER_IN_ISR, NO_DIVERGENCE_BELOW_HW, STRONG_ISR,
};
use highwater_model::state::{Replica, MAX_REPLICAS};
use highwater_model::{Action, Config, PartitionModel, State};

use super::rebuild::Gap;
use super::{MisfitKind, Summary};
use crate::abstraction::{abstract_state, comparable};

/// Model actions one event may complete, at most.
const MAX_ACTIONS_PER_EVENT: usize = 4;
/// Model states the search for one event may visit, at most.
const MAX_SEARCH: usize = 50_000;

pub struct Checker {
    cfg: Config,
    model: State,
    summary: Summary,
    /// The last steps taken, each with the model state before it.
    recent: VecDeque<(State, Taken)>,
}

/// A step the checker took: a model action, or, at a gap, the followers
/// that lost a served response set to the implementation's (`Resync`).
/// A resync touches only those followers, so an event of another replica
/// may still be placed before it (`Checker::reorder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Taken {
    Act(Action),
    Resync([Option<Replica>; MAX_REPLICAS]),
}

/// The state after `step` from `s`, if the step may be taken there (an
/// action must be enabled).
fn take(cfg: &Config, s: &State, step: Taken) -> Option<State> {
    match step {
        Taken::Act(a) => {
            let mut en = Vec::new();
            enabled(cfg, s, &mut en);
            en.contains(&a).then(|| apply(cfg, s, a)).flatten()
        }
        Taken::Resync(set) => {
            let mut next = *s;
            for (r, rep) in set.iter().enumerate() {
                if let Some(rep) = rep {
                    *next.replica_mut(r as u8) = *rep;
                }
            }
            Some(next)
        }
    }
}

/// Steps any action may be placed before ([`Checker::reorder`]).
const RECENT: usize = 8;
/// Steps back a follower's own Flush or CheckpointHw may be placed, just
/// before its fetch: it records the LEO or HW of its moment, so between the
/// serve of its fetch (where the model's FollowerFetch is placed) and the
/// apply it belongs before the serve, and other actors' events, any number
/// (a crash, an election and their steps), may come between.
const RECENT_DURABILITY: usize = 32;

/// `a` is `follower`'s own write of what it holds (the recovery point, the
/// HW checkpoint), and `before` its fetch: it reads no other replica's
/// state, and no other replica's action reads what it writes.
fn durability_before_fetch(a: &Action, before: &Taken) -> bool {
    let Taken::Act(
        Action::FollowerFetch { follower, .. } | Action::FollowerFetchOne { follower, .. },
    ) = before
    else {
        return false;
    };
    matches!(a, Action::Flush { replica } | Action::CheckpointHw { replica } if replica == follower)
}

type StepError = (MisfitKind, String, Option<Box<State>>);

/// The always-properties (model/src/properties.rs) that `s` breaks.
pub fn broken_properties(s: &State) -> Vec<String> {
    let checks: [(&str, bool); 6] = [
        (COMMITTED_RECORDS_SURVIVE, records_survive(s, |h| h.visible)),
        (
            ACKNOWLEDGED_RECORDS_SURVIVE,
            records_survive(s, |h| h.acked),
        ),
        (STRONG_ISR, strong_isr(s)),
        (
            LEADER_IN_ISR,
            s.controller
                .leader
                .is_none_or(|l| s.controller.isr.contains(l)),
        ),
        (
            HW_WITHIN_LOG,
            s.ids().all(|r| s.replica(r).hw <= s.replica(r).leo()),
        ),
        (NO_DIVERGENCE_BELOW_HW, logs_agree_below_hw(s)),
    ];
    checks
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(name, _)| {
            let why = explain(name, s).unwrap_or_default();
            format!("{name}: {why}")
        })
        .collect()
}

fn action_name(a: &Action) -> String {
    let s = a.to_string();
    s.split('(').next().unwrap_or(&s).to_string()
}

impl Checker {
    pub fn new(cfg: Config) -> Checker {
        Checker {
            cfg,
            model: PartitionModel::new(cfg).init_state(),
            summary: Summary::default(),
            recent: VecDeque::new(),
        }
    }

    pub fn model(&self) -> &State {
        &self.model
    }

    pub fn into_summary(self) -> Summary {
        self.summary
    }

    /// Takes the cluster after one event. `gap` names a step the model has
    /// no action for, if one happened since the last event: then, and only
    /// then, a state the model cannot reach is taken as it is (counted).
    pub fn step(&mut self, snap: &ClusterSnapshot, gap: Option<Gap>) -> Result<(), StepError> {
        self.summary.events += 1;
        let imp = match abstract_state(&self.cfg, snap) {
            Ok(s) => s,
            Err(why) => return Err((MisfitKind::BeyondModel, why, None)),
        };
        let broken = broken_properties(&imp);
        if !broken.is_empty() {
            return Err((
                MisfitKind::DoesNotFit,
                format!("always-properties broken: {}", broken.join("; ")),
                Some(Box::new(imp)),
            ));
        }
        let target = comparable(&imp);
        if comparable(&self.model) == target {
            self.summary.stutters += 1;
            return Ok(());
        }
        let model = self.model;
        let acts = |p: Vec<Action>| p.into_iter().map(Taken::Act).collect::<Vec<_>>();
        let found = self
            .search(&model, &target)
            .map(|(p, e)| (model, acts(p), e));
        let found = found.or_else(|| {
            // Only the followers that lost a served response are taken as
            // the implementation has them; everything else must still fit.
            let gap = gap.as_ref()?;
            let mut set = [None; MAX_REPLICAS];
            for &f in &gap.followers {
                set[f as usize] = Some(*imp.replica(f as u8));
            }
            let resync = Taken::Resync(set);
            let from = take(&self.cfg, &model, resync)?;
            let found = if comparable(&from) == target {
                Some((Vec::new(), from))
            } else {
                self.search(&from, &target)
            };
            if found.is_some() {
                self.summary.resyncs += 1;
                if self.summary.resync_reasons.len() < 8 {
                    self.summary.resync_reasons.push(gap.why.clone());
                }
            }
            found.map(|(p, e)| {
                let mut path = vec![resync];
                path.extend(acts(p));
                (model, path, e)
            })
        });
        let found = found.or_else(|| self.reorder(&target));
        match found {
            Some((start, path, state)) => {
                let mut at = start;
                for step in &path {
                    if let Taken::Act(a) = step {
                        *self.summary.actions.entry(action_name(a)).or_default() += 1;
                    }
                    self.recent.push_back((at, *step));
                    at = take(&self.cfg, &at, *step).unwrap_or(at);
                    if self.recent.len() > RECENT_DURABILITY {
                        self.recent.pop_front();
                    }
                }
                self.model = state;
                Ok(())
            }
            None => Err((
                MisfitKind::DoesNotFit,
                format!(
                    "no sequence of at most {MAX_ACTIONS_PER_EVENT} enabled model actions \
                         leads to the implementation's state; enabled now: {}",
                    self.enabled_now()
                ),
                Some(Box::new(imp)),
            )),
        }
    }

    /// An event of one actor may have happened, in the model's order,
    /// before an action already taken that it commutes with (a follower's
    /// flush between the leader serving its fetch, where the model's
    /// FollowerFetch is placed, and the follower applying it). Tries one
    /// action inserted into the last few actions taken, the rest replayed
    /// (each must still be enabled), then a short search; the new path
    /// replaces the old (counted as a reordering). A follower's Flush or
    /// CheckpointHw may go further back, to just before its fetch
    /// (`RECENT_DURABILITY`).
    fn reorder(&mut self, target: &State) -> Option<(State, Vec<Taken>, State)> {
        let n = self.recent.len();
        let near = (n.saturating_sub(RECENT)..n).rev().map(|i| (i, false));
        let far = (0..n.saturating_sub(RECENT)).rev().map(|i| (i, true));
        let mut acts = Vec::new();
        for (i, only_before_fetch) in near.chain(far) {
            let (base, step) = self.recent[i];
            acts.clear();
            enabled(&self.cfg, &base, &mut acts);
            if only_before_fetch {
                acts.retain(|a| durability_before_fetch(a, &step));
            }
            for &a in &acts {
                let Some(mut s) = apply(&self.cfg, &base, a) else {
                    continue;
                };
                let mut path = vec![Taken::Act(a)];
                let replayed = self.recent.iter().skip(i).all(|&(_, b)| {
                    // Only an enabled action may be applied.
                    match take(&self.cfg, &s, b) {
                        Some(next) => {
                            s = next;
                            path.push(b);
                            true
                        }
                        None => false,
                    }
                });
                if !replayed {
                    continue;
                }
                let tail = if comparable(&s) == *target {
                    Some((Vec::new(), s))
                } else {
                    self.search_depth(&s, target, 2)
                };
                if let Some((more, end)) = tail {
                    // Re-rooted: the path from `base` replaces the actions
                    // taken since.
                    self.summary.reorderings += 1;
                    self.recent.truncate(i);
                    path.extend(more.into_iter().map(Taken::Act));
                    return Some((base, path, end));
                }
            }
        }
        None
    }

    fn enabled_now(&self) -> String {
        let mut acts = Vec::new();
        enabled(&self.cfg, &self.model, &mut acts);
        acts.iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Breadth-first from the model's state: the shortest path of enabled
    /// actions to a state equal to `target` (as `comparable` sees it).
    fn search(&self, from: &State, target: &State) -> Option<(Vec<Action>, State)> {
        self.search_depth(from, target, MAX_ACTIONS_PER_EVENT)
    }

    fn search_depth(
        &self,
        from: &State,
        target: &State,
        max_depth: usize,
    ) -> Option<(Vec<Action>, State)> {
        let mut parent: HashMap<State, Option<(State, Action)>> = HashMap::new();
        let mut queue = VecDeque::new();
        parent.insert(*from, None);
        queue.push_back((*from, 0usize));
        let mut acts = Vec::new();
        while let Some((s, depth)) = queue.pop_front() {
            if depth == max_depth {
                continue;
            }
            acts.clear();
            enabled(&self.cfg, &s, &mut acts);
            for &a in &acts {
                let Some(next) = apply(&self.cfg, &s, a) else {
                    continue;
                };
                if parent.contains_key(&next) {
                    continue;
                }
                parent.insert(next, Some((s, a)));
                if comparable(&next) == *target {
                    let mut path = vec![a];
                    let mut at = s;
                    while let Some(Some((p, pa))) = parent.get(&at) {
                        path.push(*pa);
                        at = *p;
                    }
                    path.reverse();
                    return Some((path, next));
                }
                if parent.len() > MAX_SEARCH {
                    return None;
                }
                queue.push_back((next, depth + 1));
            }
        }
        None
    }
}

/// Model actions taken, by name, summed over summaries.
pub fn merge_actions(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}
