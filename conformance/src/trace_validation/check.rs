//! The model side of trace validation: after each event, the abstracted
//! implementation state must be the model's (a stutter) or reachable from
//! it by a few enabled actions (an event that completes one of the model's
//! atomic actions may complete another in passing: a fetch served after
//! which the leader's HW moves is two). The search is bounded, so the check
//! costs at most a constant per event.

use std::collections::{BTreeMap, HashMap, VecDeque};

use highwater::cluster::ClusterSnapshot;
use highwater_model::actions::{allowed, apply, enabled};
use highwater_model::properties::{broken, explain};
use highwater_model::state::{Compact, Num, Replica, Shape, Unbounded, MAX_REPLICAS};
use highwater_model::watch::Watch;
use highwater_model::{Action, Config, PartitionModel, State};

use super::rebuild::Gap;
use super::window::{
    behaves_alike, epochs_settled, offsets_settled, settled, settled_at_most, shift_action,
    shift_state, Shift,
};
use super::{MisfitKind, Summary};
use crate::abstraction::{abstract_state, comparable, comparable_to, show};

/// Model actions one event may complete, at most.
const MAX_ACTIONS_PER_EVENT: usize = 4;
/// Model states the search for one event may visit, at most.
const MAX_SEARCH: usize = 50_000;

/// Validates in either of the model's shapes: the compact one, through the
/// window (`window.rs`), or the unbounded one, at the trace's own size.
pub struct Checker<S: Shape = Compact> {
    cfg: Config,
    model: State<S>,
    summary: Summary,
    /// The last steps taken, each with the model state before it.
    recent: VecDeque<(State<S>, Taken<S>)>,
    /// Why the window did not move when the record budget was last full.
    window_stuck: Option<String>,
    /// The search's visited map, kept between events so that its memory is
    /// allocated once (a fresh map of up to `MAX_SEARCH` states at every
    /// event spent most of validation's time growing and faulting pages).
    #[allow(clippy::type_complexity)]
    visited: std::cell::RefCell<Visited<S>>,
    /// Actions the next event names that `enabled` does not list (a fetch
    /// cut short at its length): tried too, where `allowed`.
    hints: Vec<Action<S>>,
    /// Records produced at which the unbounded shape next tries to drop a
    /// settled prefix (`trim`).
    next_trim: usize,
    /// `window::settled_at_most` when the unbounded shape last tried to
    /// drop a settled prefix (after the move, if it moved).
    trim_bound: usize,
    /// Whether the last try was refused while a follower's answer was
    /// unapplied (`trim`).
    retry_when_applied: bool,
    /// The always-properties the model's state breaks, once computed: an
    /// event that leaves the state as it was (a stutter, half of a run's
    /// events) breaks the same (the properties read nothing `comparable`
    /// drops). Forgotten whenever the model's state is set otherwise.
    last_broken: Option<Vec<String>>,
    /// Checks each event's state from what changed since the last one's
    /// (`highwater_model::watch`): reading every record and log at every
    /// event was a third of validation's time on a long run.
    watch: Watch<S>,
}

/// A step the checker took: a model action, or, at a gap, the followers
/// that lost a served response set to the implementation's (`Resync`).
/// A resync touches only those followers, so an event of another replica
/// may still be placed before it (`Checker::reorder`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Taken<S: Shape> {
    Act(Action<S>),
    Resync([Option<Replica<S>>; MAX_REPLICAS]),
}

/// The state after `step` from `s`, if the step may be taken there (an
/// action must be enabled).
fn take<S: Shape>(cfg: &Config, s: &State<S>, step: &Taken<S>) -> Option<State<S>>
where
    State<S>: std::hash::Hash,
{
    match step {
        Taken::Act(a) => allowed(cfg, s, *a).then(|| apply(cfg, s, *a)).flatten(),
        Taken::Resync(set) => {
            let mut next = s.clone();
            for (r, rep) in set.iter().enumerate() {
                if let Some(rep) = rep {
                    *next.replica_mut(r as u8) = rep.clone();
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
fn durability_before_fetch<S: Shape>(a: &Action<S>, before: &Taken<S>) -> bool {
    let Some(follower) = fetch_of(before) else {
        return false;
    };
    matches!(a, Action::Flush { replica } | Action::CheckpointHw { replica } if *replica == follower)
}

/// The follower whose fetch `step` is, if it is one.
fn fetch_of<S: Shape>(step: &Taken<S>) -> Option<u8> {
    match step {
        Taken::Act(
            Action::FollowerFetch { follower, .. }
            | Action::FollowerFetchOne { follower, .. }
            | Action::FollowerFetchPart { follower, .. },
        ) => Some(*follower),
        _ => None,
    }
}

type StepError = (MisfitKind, String, Option<String>);

/// The search's visited states, in the order it reached them, each with
/// the one it was reached from (its index) and the action taken; and the
/// index of each by its state's hash. A state is held once, where a map
/// from state to parent state held each twice and its parent once more
/// per child (the copies were a fifth of validation's time).
#[derive(Default)]
struct Visited<S: Shape> {
    nodes: Vec<Reached<S>>,
    by_hash: HashMap<u64, u32, ahash::RandomState>,
    hasher: ahash::RandomState,
}

/// A state the search reached: from which (its index) by which action,
/// and how many actions from the first.
struct Reached<S: Shape> {
    state: State<S>,
    from: Option<(u32, Action<S>)>,
    depth: u8,
}

impl<S: Shape> Visited<S>
where
    State<S>: std::hash::Hash,
{
    fn start(&mut self, from: &State<S>) {
        self.nodes.clear();
        self.by_hash.clear();
        self.add(from.clone(), None, 0);
    }

    /// Takes `s` unless it was reached before (a state whose hash is
    /// another's is kept and searched again: a collision costs work, never
    /// a state).
    fn add(&mut self, s: State<S>, parent: Option<(u32, Action<S>)>, depth: u8) -> bool {
        let h = self.hasher.hash_one(&s);
        match self.by_hash.get(&h) {
            Some(&i) if self.nodes[i as usize].state == s => return false,
            Some(_) => {}
            None => {
                self.by_hash.insert(h, self.nodes.len() as u32);
            }
        }
        self.nodes.push(Reached {
            state: s,
            from: parent,
            depth,
        });
        true
    }

    /// The actions from the first state to the one at `i`.
    fn path_to(&self, mut i: usize) -> Vec<Action<S>> {
        let mut path = Vec::new();
        while let Some((p, a)) = self.nodes[i].from {
            path.push(a);
            i = p as usize;
        }
        path.reverse();
        path
    }

    fn len(&self) -> usize {
        self.nodes.len()
    }
}

/// The always-properties (model/src/properties.rs) that `s` breaks, each
/// with the model's explanation.
pub fn broken_properties<S: Shape>(s: &State<S>) -> Vec<String> {
    described(broken(s), s)
}

/// Each always-property `names` says `s` breaks, with the model's
/// explanation.
fn described<S: Shape>(names: Vec<&'static str>, s: &State<S>) -> Vec<String> {
    names.into_iter().map(|name| explained(name, s)).collect()
}

/// Property `name`, which `s` breaks, with the model's explanation.
fn explained<S: Shape>(name: &str, s: &State<S>) -> String {
    format!("{name}: {}", explain(name, s).unwrap_or_default())
}

fn action_name<S: Shape>(a: &Action<S>) -> String {
    let s = a.to_string();
    s.split('(').next().unwrap_or(&s).to_string()
}

impl<S: Shape> Checker<S>
where
    State<S>: std::hash::Hash,
{
    pub fn new(cfg: Config) -> Checker<S> {
        let init = PartitionModel::new(cfg).init_state();
        Checker {
            cfg,
            model: init.reshape().expect("the initial state fits every shape"),
            summary: Summary::default(),
            recent: VecDeque::new(),
            window_stuck: None,
            visited: std::cell::RefCell::new(Visited::default()),
            hints: Vec::new(),
            next_trim: SETTLE_AT,
            trim_bound: 0,
            retry_when_applied: false,
            last_broken: None,
            watch: Watch::default(),
        }
    }

    /// Actions the next event names that `enabled` does not list, to be
    /// tried in its search where the model allows them (`allowed`): a
    /// fetch served cut short, at its length (TLA+ trace validation takes
    /// an action's parameters from the log the same way).
    pub fn hint(&mut self, hints: Vec<Action<S>>) {
        self.hints = hints;
    }

    pub fn model(&self) -> &State<S> {
        &self.model
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn into_summary(self) -> Summary {
        self.summary
    }

    /// Takes the cluster after one event. `gap` names a step the model has
    /// no action for, if one happened since the last event: then, and only
    /// then, a state the model cannot reach is taken as it is (counted).
    /// Returns the always-properties the state breaks: it fits, so the
    /// model breaks them too (under rules the model shows unsafe).
    pub fn step(
        &mut self,
        snap: &ClusterSnapshot,
        gap: Option<Gap>,
    ) -> Result<Vec<String>, StepError> {
        self.step_abstracted(abstract_state::<S>(&self.cfg, snap), gap)
    }

    /// [`Checker::step`], given the abstraction of the cluster after the
    /// event (`abstract_state`'s answer, which may be an error).
    pub fn step_abstracted(
        &mut self,
        imp: Result<State<S>, String>,
        gap: Option<Gap>,
    ) -> Result<Vec<String>, StepError> {
        let stepped = self.step_to(imp, gap);
        self.hints.clear();
        if stepped.is_ok() {
            self.summary.events += 1;
        }
        stepped
    }

    /// Resumes validation from `state`, the abstraction of the
    /// implementation's state after a stretch beyond the model's bounds
    /// (`window::resume_at`): taken as it is, as at a resync, but whole.
    /// Returns the always-properties it breaks (a loss in the stretch,
    /// which the model may or may not have allowed: the caller records it).
    /// The steps kept for `reorder` are forgotten: no event is placed
    /// before the resume.
    pub fn resume(&mut self, state: State<S>) -> Vec<String> {
        let broken = self.broken_now(&state);
        self.model = state;
        self.last_broken = None;
        self.recent.clear();
        self.window_stuck = None;
        self.summary.resumptions += 1;
        broken
    }

    /// [`broken_properties`] of `s`, through the watch; with the
    /// incremental abstraction's cross-check on (the tests), also checked
    /// whole, and the two must agree.
    fn broken_now(&mut self, s: &State<S>) -> Vec<String> {
        let names = self.watch.broken(s);
        if super::incremental::cross_checking() {
            assert_eq!(
                names,
                broken(s),
                "the property watch differs from the properties"
            );
        }
        // Only the first event to break a property keeps its explanation
        // (`Summary::count_broken`): explaining one already broken again at
        // every later event was a sixth of validating a run that lost data.
        names
            .into_iter()
            .map(|name| match self.summary.has_broken(name) {
                true => name.to_string(),
                false => explained(name, s),
            })
            .collect()
    }

    /// Counts an event not validated (beyond the model's bounds).
    pub fn skip(&mut self) {
        self.summary.events_skipped += 1;
    }

    pub fn summary_mut(&mut self) -> &mut Summary {
        &mut self.summary
    }

    fn step_to(
        &mut self,
        imp: Result<State<S>, String>,
        gap: Option<Gap>,
    ) -> Result<Vec<String>, StepError> {
        let imp = match imp {
            Ok(s) => s,
            Err(why) => {
                let why = match &self.window_stuck {
                    Some(stuck) => format!("{why}; the window could not move: {stuck}"),
                    None => why,
                };
                return Err((MisfitKind::BeyondModel, why, None));
            }
        };
        // A state that breaks one is a misfit only if the model cannot
        // reach it: under a historical rule set it can.
        let target = comparable(&imp);
        if comparable_to(&self.model, &target) {
            self.summary.stutters += 1;
            let broken = match self.last_broken.take() {
                Some(b) => b,
                None => self.broken_now(&imp),
            };
            self.last_broken = Some(broken.clone());
            return Ok(broken);
        }
        let broken = self.broken_now(&imp);
        let model = self.model.clone();
        let acts = |p: Vec<Action<S>>| p.into_iter().map(Taken::Act).collect::<Vec<_>>();
        // Only the followers that lost a served response are taken as the
        // implementation has them.
        let resync = gap.as_ref().map(|gap| {
            let mut set: [Option<Replica<S>>; MAX_REPLICAS] = Default::default();
            for &f in &gap.replicas {
                set[f as usize] = Some(imp.replica(f as u8).clone());
            }
            Taken::Resync(set)
        });
        let found = self
            .search(&model, &target)
            .map(|(p, e)| (model.clone(), acts(p), e));
        let found = found.or_else(|| {
            // Only the followers that lost a served response are taken as
            // the implementation has them; everything else must still fit.
            let (gap, resync) = (gap.as_ref()?, resync.clone()?);
            let from = take(&self.cfg, &model, &resync)?;
            let found = if comparable_to(&from, &target) {
                Some((Vec::new(), from))
            } else {
                self.search(&from, &target)
            };
            if found.is_some() {
                self.summary.count_resync(&gap.why);
            }
            found.map(|(p, e)| {
                let mut path = vec![resync];
                path.extend(acts(p));
                (model.clone(), path, e)
            })
        });
        let found = found.or_else(|| {
            // The loss may come after one model action of the event: a
            // follower that crashed with a response served is taken as it
            // is once down (the model's Crash, then the resync).
            let (gap, resync) = (gap.as_ref()?, resync.as_ref()?);
            let mut first = Vec::new();
            enabled(&self.cfg, &model, &mut first);
            let found = first.into_iter().find_map(|a| {
                let from = take(&self.cfg, &apply(&self.cfg, &model, a)?, resync)?;
                let found = if comparable_to(&from, &target) {
                    Some((Vec::new(), from))
                } else {
                    self.search_depth(&from, &target, MAX_ACTIONS_PER_EVENT - 1)
                };
                found.map(|(p, e)| {
                    let mut path = vec![Taken::Act(a), resync.clone()];
                    path.extend(acts(p));
                    (model.clone(), path, e)
                })
            });
            if found.is_some() {
                self.summary.count_resync(&gap.why);
            }
            found
        });
        let found = found.or_else(|| self.reorder(&target));
        match found {
            Some((start, path, state)) => {
                let mut at = start;
                for step in path {
                    if let Taken::Act(a) = &step {
                        *self.summary.actions.entry(action_name(a)).or_default() += 1;
                    }
                    let next = take(&self.cfg, &at, &step);
                    self.recent.push_back((at.clone(), step));
                    at = next.unwrap_or(at);
                    if self.recent.len() > RECENT_DURABILITY {
                        self.recent.pop_front();
                    }
                }
                self.model = state;
                self.last_broken = Some(broken.clone());
                Ok(broken)
            }
            None => {
                let broken = match broken.is_empty() {
                    true => String::new(),
                    false => format!("always-properties broken: {}; ", broken.join("; ")),
                };
                Err((
                    MisfitKind::DoesNotFit,
                    format!(
                        "{broken}no sequence of at most {MAX_ACTIONS_PER_EVENT} enabled model \
                         actions leads to the implementation's state; enabled now: {}",
                        self.enabled_now()
                    ),
                    Some(show(&imp)),
                ))
            }
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
    #[allow(clippy::type_complexity)]
    fn reorder(&mut self, target: &State<S>) -> Option<(State<S>, Vec<Taken<S>>, State<S>)> {
        let n = self.recent.len();
        let near = (n.saturating_sub(RECENT)..n).rev().map(|i| (i, false));
        let far = (0..n.saturating_sub(RECENT)).rev().map(|i| (i, true));
        let mut acts = Vec::new();
        for (i, only_before_fetch) in near.chain(far) {
            let (base, step) = self.recent[i].clone();
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
                let replayed = self.recent.iter().skip(i).all(|(_, b)| {
                    // Only an enabled action may be applied.
                    match take(&self.cfg, &s, b) {
                        Some(next) => {
                            s = next;
                            path.push(b.clone());
                            true
                        }
                        None => false,
                    }
                });
                if !replayed {
                    continue;
                }
                let tail = if comparable_to(&s, target) {
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
    fn search(&self, from: &State<S>, target: &State<S>) -> Option<(Vec<Action<S>>, State<S>)> {
        self.search_depth(from, target, MAX_ACTIONS_PER_EVENT)
    }

    /// The search's first level, without its bookkeeping: `Some(Some(..))`
    /// if one enabled (or hinted) action from `from` leads to `target`
    /// (the first in the search's own order), `Some(None)` if none does
    /// and the search may go no deeper, `None` to search on.
    #[allow(clippy::type_complexity)]
    fn one_step(
        &self,
        from: &State<S>,
        target: &State<S>,
        max_depth: usize,
    ) -> Option<Option<(Vec<Action<S>>, State<S>)>> {
        if max_depth == 0 {
            return Some(None);
        }
        let mut acts = Vec::new();
        enabled(&self.cfg, from, &mut acts);
        acts.extend(self.hints.iter().filter(|&&h| allowed(&self.cfg, from, h)));
        for a in acts {
            if let Some(next) = apply(&self.cfg, from, a) {
                if comparable_to(&next, target) {
                    return Some(Some((vec![a], next)));
                }
            }
        }
        (max_depth == 1).then_some(None)
    }

    fn search_depth(
        &self,
        from: &State<S>,
        target: &State<S>,
        max_depth: usize,
    ) -> Option<(Vec<Action<S>>, State<S>)> {
        // Most events complete one action: its successors are tried first
        // without the bookkeeping of a search (the same answer: the search
        // tries them first, in the same order).
        if let Some(found) = self.one_step(from, target, max_depth) {
            return found;
        }
        let mut visited = self.visited.borrow_mut();
        visited.start(from);
        let mut acts = Vec::new();
        let mut at = 0;
        while at < visited.len() {
            let depth = visited.nodes[at].depth;
            if depth as usize == max_depth {
                at += 1;
                continue;
            }
            acts.clear();
            let s = &visited.nodes[at].state;
            enabled(&self.cfg, s, &mut acts);
            acts.extend(self.hints.iter().filter(|&&h| allowed(&self.cfg, s, h)));
            for &a in &acts {
                let Some(next) = apply(&self.cfg, &visited.nodes[at].state, a) else {
                    continue;
                };
                let found = comparable_to(&next, target);
                if !visited.add(next, Some((at as u32, a)), depth + 1) {
                    continue;
                }
                if found {
                    let last = visited.len() - 1;
                    return Some((visited.path_to(last), visited.nodes[last].state.clone()));
                }
                if visited.len() > MAX_SEARCH {
                    return None;
                }
            }
            at += 1;
        }
        None
    }
}

impl Checker<Compact> {
    /// Moves the window (`window.rs`) once the model's record budget is
    /// full or its last epoch is taken, and a prefix has settled or old
    /// epochs are named no more (see [`Checker::move_window_by`]).
    /// `limit`: the window settles no offset at or above it (the
    /// implementation can still go back there, `Rebuild::unapplied_floor`),
    /// and the follower that can.
    /// `unapplied`: the followers with a fetch answered and not applied.
    pub fn move_window(&mut self, limit: Option<(u8, u32)>, unapplied: &[u8]) -> Option<Shift> {
        let settle = if self.model.produced >= self.cfg.records {
            settled
        } else if self.model.controller.next_epoch() > self.cfg.max_epoch {
            epochs_settled
        } else {
            return None;
        };
        let shift = settle(&self.cfg, &self.model);
        self.move_window_by(shift, limit, unapplied)
    }
}

impl Checker<Unbounded> {
    /// Drops the settled prefix (`window::offsets_settled`) once the model
    /// holds more than `SETTLE_AT` records, so that a long run is validated
    /// with states the size of what has not settled: nothing needs it, as
    /// the unbounded shape holds any size, but the work per event then
    /// grows no more with the run. Where nothing has settled, validation
    /// goes on at full size.
    pub fn trim(
        &mut self,
        limit: Option<(u32, u32)>,
        unapplied: &[u8],
    ) -> Option<Shift<Unbounded>> {
        let produced = self.model.produced as usize;
        if produced < SETTLE_AT {
            return None;
        }
        // A try reads the whole log, so it is made only where it may drop
        // more than the last: the replicas' offsets (a few reads) allow
        // enough more since it (at a flush, a checkpoint), or the state has
        // grown by half again. At full rate with no flush nothing settles,
        // and tries every 64 records were a tenth of validation on a 2 s
        // run; a try only at growth missed the flushes of a paced run.
        let bound = settled_at_most(&self.cfg, &self.model) as usize;
        let rose = bound >= self.trim_bound + SETTLE_AT / 2;
        let answered = self.retry_when_applied && unapplied.is_empty();
        if bound < SETTLE_AT / 2 || !(rose || answered || produced >= self.next_trim) {
            return None;
        }
        // A move that drops few offsets costs more than it saves: seen
        // through a moved window, the implementation's every event is
        // renamed (`Window::view`).
        let shift = offsets_settled(&self.cfg, &self.model, limit).and_then(|shift| {
            match shift.k as usize >= SETTLE_AT / 2 {
                true => Ok(shift),
                false => Err(format!("only {} offsets settled", shift.k)),
            }
        });
        let moved = self.move_window_by(shift, limit, unapplied);
        let held = self.model.produced as usize;
        self.next_trim = held + (held / 2).max(SETTLE_AT / 2);
        self.trim_bound = settled_at_most(&self.cfg, &self.model) as usize;
        // A try refused while answers were unapplied may have been refused
        // for them (`move_window_by`): tried again once they are applied.
        self.retry_when_applied = moved.is_none() && !unapplied.is_empty();
        moved
    }
}

/// Records the unbounded shape holds before it drops a settled prefix: a
/// move costs a few times a state's size (`behaves_alike`), so moves are
/// rare at this size and states stay small.
const SETTLE_AT: usize = 128;

impl<S: Shape> Checker<S>
where
    State<S>: std::hash::Hash,
{
    /// Takes the move `shift` if it is one: the model's state, and the
    /// recent steps kept for `reorder` (those that hold the prefix; older
    /// ones are forgotten), drop the prefix. The move is taken only where
    /// the model behaves alike from the moved state, two steps deep
    /// (`behaves_alike`).
    fn move_window_by(
        &mut self,
        shift: Result<Shift<S>, String>,
        limit: Option<(S::Offset, u32)>,
        unapplied: &[u8],
    ) -> Option<Shift<S>> {
        let shift = match shift {
            Ok(shift) => shift,
            Err(why) => {
                self.window_stuck = Some(why);
                return None;
            }
        };
        if let Some((o, f)) = limit.filter(|&(o, _)| shift.k > o) {
            self.window_stuck = Some(format!(
                "a fetch response served to replica {f} and not yet applied may still be \
                 lost, taking it back to offset {o}"
            ));
            return None;
        }
        if let Err(why) = behaves_alike(&self.cfg, &self.model, &shift, 2) {
            self.summary.window_refused += 1;
            self.window_stuck = Some(format!("the moved state would not behave alike: {why}"));
            return None;
        }
        let model = shift_state(&self.cfg, &self.model, &shift)?;
        let mut recent = VecDeque::new();
        for (s, taken) in self.recent.iter().rev() {
            let step = match taken {
                Taken::Act(a) => shift_action(*a, &shift).map(Taken::Act),
                Taken::Resync(set) => {
                    let mut t = s.clone();
                    for (r, rep) in set.iter().enumerate() {
                        if let Some(rep) = rep {
                            *t.replica_mut(r as u8) = rep.clone();
                        }
                    }
                    shift_state(&self.cfg, &t, &shift).map(|t| {
                        let moved: [Option<Replica<S>>; MAX_REPLICAS] = std::array::from_fn(|r| {
                            set[r].as_ref().map(|_| t.replica(r as u8).clone())
                        });
                        Taken::Resync(moved)
                    })
                }
            };
            match (shift_state(&self.cfg, s, &shift), step) {
                (Some(s), Some(step)) => recent.push_front((s, step)),
                _ => break,
            }
        }
        // The steps that do not hold the prefix are forgotten, and with
        // them the chance to put a follower's own Flush or CheckpointHw
        // before its fetch (`reorder`). While that fetch's answer is still
        // unapplied, such an event may yet come: the move waits.
        let forgotten = self.recent.len() - recent.len();
        if let Some(f) = unapplied.iter().copied().find(|&f| {
            let fetch = |(_, t): &(State<S>, Taken<S>)| fetch_of(t) == Some(f);
            self.recent.iter().take(forgotten).any(fetch) && !recent.iter().any(fetch)
        }) {
            self.window_stuck = Some(format!(
                "replica {f}'s fetch is answered and not yet applied, and the move would forget \
                 the fetch its own flush or HW checkpoint may still have to go before"
            ));
            return None;
        }
        self.recent = recent;
        self.model = model;
        self.last_broken = None;
        self.window_stuck = None;
        self.summary.window_moves += 1;
        self.summary.offsets_dropped += shift.k.idx() as u64;
        self.summary.records_dropped += shift.dropped.idx() as u64;
        self.summary.epochs_dropped += shift.epochs.idx() as u64;
        Some(shift)
    }
}

/// Model actions taken, by name, summed over summaries.
pub fn merge_actions(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}
