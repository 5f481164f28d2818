//! Exhaustive conformance: every state the model reaches under a
//! configuration, and from each every action, taken by the implementation
//! too.
//!
//! A depth-first search over the model carries, beside each model state on
//! its stack, the implementation's cluster ([`StepCluster`] on
//! [`MemoryLog`]s) that the same path led to. At each state it visits:
//! - every enabled action is taken by a clone of the cluster, whose state,
//!   abstracted ([`abstract_state`]), must equal the model's successor; an
//!   action the model enables but whose successor is the state itself must
//!   be refused or change nothing visible;
//! - every action the model's rules forbid ([`forbidden_actions`]) is
//!   offered to the cluster: refused, it must leave the cluster exactly as
//!   it was (hidden state included: clock, correlation ids, timers);
//!   taken, it must change nothing the model sees.
//!
//! Successors already visited are checked but not expanded again, so the
//! transitions checked are the model's transitions, each once.
//!
//! Each model state is checked with the implementation the first path to
//! reach it left. Implementation states that map to the same model state
//! but differ in what the model does not have (the logical clock, the
//! correlation ids, the leader's lag timers) are not each tried; the random
//! lockstep, which reaches states by other paths, is the check there.
//!
//! **Symmetry.** With [`Options::symmetry`], states are deduplicated by the
//! model's symmetry representative (`State::representative`, replicas
//! renamed), as the model checker does, and, as the model checker does, the
//! search goes on from the state the path reached, not from the
//! representative: the implementation beside it is that path's, and no
//! state is ever renamed. Each class of states is visited once, through one
//! of its members, and every transition of that member is checked: the
//! same states and transitions the model checker explores. This checks the
//! implementation on one member of each class, which stands for the class
//! as far as the implementation, like the model, treats replicas alike
//! (nothing in its rules depends on a replica's id). Without symmetry every
//! state is visited, and that assumption is not needed; it costs up to
//! N! times more (6 with 3 replicas).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use highwater::cluster::{StepCluster, StepConfig};
use highwater::replication::MemoryLog;
use highwater_model::actions::{apply, enabled};
use highwater_model::{Action, Config, PartitionModel, State};
use stateright::Representative;

use crate::abstraction::{abstract_state, comparable};
use crate::lockstep::{differences, forbidden_actions, Divergence};
use crate::mapping::{step_action, step_config};

/// How to search.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub threads: usize,
    /// Visit one state of each symmetry class (see the module docs).
    pub symmetry: bool,
    /// Offer every forbidden action at every state.
    pub refusals: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threads: 2,
            symmetry: true,
            refusals: true,
        }
    }
}

/// What a search checked.
#[derive(Debug, Default)]
pub struct Report {
    /// Model states visited (symmetry classes, with symmetry).
    pub states: u64,
    /// Enabled actions with a successor, each taken by the implementation
    /// and its result compared with the model's.
    pub transitions: u64,
    /// Enabled actions whose successor is the state itself.
    pub unchanged: u64,
    /// Forbidden actions offered to the implementation.
    pub refusals: u64,
    /// Of those, taken without a change the model sees (an idle fetch).
    pub silent: u64,
    pub max_depth: usize,
    pub elapsed: Duration,
    /// The first place the implementation left the model, if any.
    pub divergence: Option<Divergence>,
}

impl Report {
    pub fn transitions_per_second(&self) -> f64 {
        self.transitions as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A progress line's figures.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub states: u64,
    pub transitions: u64,
    pub elapsed: Duration,
}

/// Checks every transition of `cfg`'s state space (see the module docs);
/// `on_progress` is called about once a second.
pub fn check(cfg: &Config, opts: &Options, on_progress: impl FnMut(Progress)) -> Report {
    check_against(cfg, step_config(cfg), opts, on_progress)
}

/// As [`check`], with the implementation configured as `imp` rather than
/// as the model: how mutation tests put an old rule into the
/// implementation against the model's today's.
pub fn check_against(
    cfg: &Config,
    imp: StepConfig,
    opts: &Options,
    mut on_progress: impl FnMut(Progress),
) -> Report {
    let started = Instant::now();
    let model = PartitionModel::new(*cfg).init_state();
    let search = Arc::new(Search::new(*cfg, *opts));
    match StepCluster::in_memory(imp) {
        Ok(imp) => {
            search.visited.insert(search.fingerprint(&model));
            search.queue.lock().expect("not poisoned").jobs.push(Job {
                state: model,
                imp,
                path: None,
                depth: 0,
            });
        }
        Err(e) => search.diverge(Divergence {
            steps: Vec::new(),
            silent: Vec::new(),
            what: format!("the cluster did not start: {e}"),
            model: Box::new(model),
            implementation: None,
        }),
    }
    let threads = opts.threads.max(1);
    search.queue.lock().expect("not poisoned").busy = threads;
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let s = search.clone();
            thread::spawn(move || s.work())
        })
        .collect();
    while !workers.iter().all(|w| w.is_finished()) {
        thread::sleep(Duration::from_millis(50));
        if search.last_progress.swap(false, Ordering::Relaxed) {
            on_progress(Progress {
                states: search.states.load(Ordering::Relaxed),
                transitions: search.transitions.load(Ordering::Relaxed),
                elapsed: started.elapsed(),
            });
        }
    }
    for w in workers {
        w.join().expect("a search thread panicked");
    }
    let s = Arc::try_unwrap(search).unwrap_or_else(|_| unreachable!("every worker joined"));
    Report {
        states: s.states.into_inner(),
        transitions: s.transitions.into_inner(),
        unchanged: s.unchanged.into_inner(),
        refusals: s.refusals.into_inner(),
        silent: s.silent.into_inner(),
        max_depth: s.max_depth.into_inner(),
        elapsed: started.elapsed(),
        divergence: s.divergence.into_inner().unwrap_or_else(|e| e.into_inner()),
    }
}

/// The path to a state, shared by the states below it.
struct PathNode {
    action: Action,
    parent: Option<Arc<PathNode>>,
}

fn actions_of(path: &Option<Arc<PathNode>>) -> Vec<Action> {
    let mut out = Vec::new();
    let mut at = path.clone();
    while let Some(n) = at {
        out.push(n.action);
        at = n.parent.clone();
    }
    out.reverse();
    out
}

/// A state to visit, with the implementation its path led to.
struct Job {
    state: State,
    imp: StepCluster<MemoryLog>,
    path: Option<Arc<PathNode>>,
    depth: usize,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// Workers holding work of their own.
    busy: usize,
}

/// Fingerprints are uniform already: the set uses them as they are.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A set of fingerprints, in shards so that threads rarely wait.
struct Visited {
    shards: Vec<Mutex<HashSet<u64, BuildHasherDefault<Identity>>>>,
}

impl Visited {
    fn new() -> Visited {
        Visited {
            shards: (0..64).map(|_| Mutex::default()).collect(),
        }
    }
    /// Whether `fp` is new.
    fn insert(&self, fp: u64) -> bool {
        lock(&self.shards[(fp >> 58) as usize]).insert(fp)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// States a worker visits before it offers work to idle ones.
const BLOCK: usize = 256;

struct Search {
    cfg: Config,
    opts: Options,
    visited: Visited,
    queue: Mutex<Queue>,
    wake: Condvar,
    stop: AtomicBool,
    states: AtomicU64,
    transitions: AtomicU64,
    unchanged: AtomicU64,
    refusals: AtomicU64,
    silent: AtomicU64,
    max_depth: AtomicUsize,
    last_progress: AtomicBool,
    divergence: Mutex<Option<Divergence>>,
}

impl Search {
    fn new(cfg: Config, opts: Options) -> Search {
        Search {
            cfg,
            opts,
            visited: Visited::new(),
            queue: Mutex::default(),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            states: AtomicU64::new(0),
            transitions: AtomicU64::new(0),
            unchanged: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            silent: AtomicU64::new(0),
            max_depth: AtomicUsize::new(0),
            last_progress: AtomicBool::new(false),
            divergence: Mutex::new(None),
        }
    }

    fn fingerprint(&self, s: &State) -> u64 {
        let mut h = DefaultHasher::new();
        if self.opts.symmetry {
            s.representative().hash(&mut h);
        } else {
            s.hash(&mut h);
        }
        h.finish()
    }

    /// Records the first divergence and stops the search.
    fn diverge(&self, d: Divergence) {
        let mut first = lock(&self.divergence);
        if first.is_none() {
            *first = Some(d);
        }
        self.stop.store(true, Ordering::Relaxed);
        self.wake.notify_all();
    }

    fn work(&self) {
        let mut local: Vec<Job> = Vec::new();
        let mut since_progress = Instant::now();
        loop {
            if local.is_empty() {
                let mut q = lock(&self.queue);
                q.busy -= 1;
                loop {
                    if self.stop.load(Ordering::Relaxed) || (q.jobs.is_empty() && q.busy == 0) {
                        self.wake.notify_all();
                        return;
                    }
                    if let Some(j) = q.jobs.pop() {
                        local.push(j);
                        q.busy += 1;
                        break;
                    }
                    q = self.wake.wait(q).unwrap_or_else(|e| e.into_inner());
                }
            }
            for _ in 0..BLOCK {
                let Some(job) = local.pop() else { break };
                if let Err(d) = self.visit(job, &mut local) {
                    self.diverge(*d);
                }
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
            }
            if since_progress.elapsed() >= Duration::from_secs(1) {
                since_progress = Instant::now();
                self.last_progress.store(true, Ordering::Relaxed);
            }
            // Idle workers get the older half of this one's stack.
            if local.len() > 1 {
                let mut q = lock(&self.queue);
                if q.jobs.len() < self.opts.threads {
                    let half = local.len() / 2;
                    q.jobs.extend(local.drain(..half));
                    self.wake.notify_all();
                }
            }
        }
    }

    /// The implementation's cluster as a comparable model state.
    fn seen(
        &self,
        imp: &StepCluster<MemoryLog>,
        diverged: &dyn Fn(Option<State>, String) -> Box<Divergence>,
    ) -> Result<State, Box<Divergence>> {
        let snap = imp
            .snapshot()
            .map_err(|e| diverged(None, format!("no snapshot: {e}")))?;
        abstract_state(&self.cfg, &snap).map_err(|e| diverged(None, format!("no model state: {e}")))
    }

    fn visit(&self, job: Job, local: &mut Vec<Job>) -> Result<(), Box<Divergence>> {
        let Job {
            state: s,
            imp,
            path,
            depth,
        } = job;
        self.states.fetch_add(1, Ordering::Relaxed);
        self.max_depth.fetch_max(depth, Ordering::Relaxed);
        let diverged_at = |steps: Vec<Action>, model: State| {
            move |implementation: Option<State>, what: String| {
                Box::new(Divergence {
                    steps: steps.clone(),
                    silent: Vec::new(),
                    what,
                    model: Box::new(model),
                    implementation: implementation.map(Box::new),
                })
            }
        };
        if self.opts.refusals {
            self.check_refusals(&s, &imp, &diverged_at(actions_of(&path), s))?;
        }
        let mut actions = Vec::new();
        enabled(&self.cfg, &s, &mut actions);
        for a in actions {
            let Some(next) = apply(&self.cfg, &s, a) else {
                // Enabled, yet the model stays where it is.
                self.unchanged.fetch_add(1, Ordering::Relaxed);
                let mut steps = actions_of(&path);
                steps.push(a);
                let diverged = diverged_at(steps, s);
                let mut work = imp.clone();
                if work.apply(step_action(a)).is_ok() {
                    let seen = self.seen(&work, &diverged)?;
                    if comparable(&seen) != comparable(&s) {
                        let what = format!(
                            "{a} changes nothing in the model, but the implementation: {}",
                            differences(&comparable(&s), &comparable(&seen)).join("; ")
                        );
                        return Err(diverged(Some(seen), what));
                    }
                }
                continue;
            };
            self.transitions.fetch_add(1, Ordering::Relaxed);
            let node = Arc::new(PathNode {
                action: a,
                parent: path.clone(),
            });
            let diverged = |implementation: Option<State>, what: String| {
                diverged_at(actions_of(&Some(node.clone())), next)(implementation, what)
            };
            let mut after = imp.clone();
            if let Err(e) = after.apply(step_action(a)) {
                return Err(diverged(
                    None,
                    format!("the implementation refused {a}: {e}"),
                ));
            }
            let seen = self.seen(&after, &diverged)?;
            if comparable(&seen) != comparable(&next) {
                let what = format!(
                    "states differ: {}",
                    differences(&comparable(&next), &comparable(&seen)).join("; ")
                );
                return Err(diverged(Some(seen), what));
            }
            if self.visited.insert(self.fingerprint(&next)) {
                local.push(Job {
                    state: next,
                    imp: after,
                    path: Some(node),
                    depth: depth + 1,
                });
            }
        }
        Ok(())
    }

    /// Every forbidden action is refused without a trace, or taken without
    /// a change the model sees.
    fn check_refusals(
        &self,
        s: &State,
        imp: &StepCluster<MemoryLog>,
        diverged: &dyn Fn(Option<State>, String) -> Box<Divergence>,
    ) -> Result<(), Box<Divergence>> {
        let mut work = imp.clone();
        let mut refused: Vec<Action> = Vec::new();
        // The kinds the implementation may take without a visible change (an
        // idle fetch, a flush the model has no use for) go first: a silent
        // one makes the refusals before it be checked again, one by one.
        let mut forbidden = forbidden_actions(&self.cfg, s);
        forbidden
            .sort_by_key(|a| !matches!(a, Action::Flush { .. } | Action::FollowerFetch { .. }));
        for a in forbidden {
            self.refusals.fetch_add(1, Ordering::Relaxed);
            if work.apply(step_action(a)).is_err() {
                refused.push(a);
                continue;
            }
            self.silent.fetch_add(1, Ordering::Relaxed);
            let seen = self.seen(&work, diverged)?;
            if comparable(&seen) != comparable(s) {
                let what = format!(
                    "the implementation took {a}, which the model does not enable: {}",
                    differences(&comparable(s), &comparable(&seen)).join("; ")
                );
                return Err(diverged(Some(seen), what));
            }
            // The refusals before this one must have left no trace either.
            self.untouched_by(&refused, imp, diverged)?;
            refused.clear();
            work = imp.clone();
        }
        if work != *imp {
            self.untouched_by(&refused, imp, diverged)?;
        }
        Ok(())
    }

    /// Offers `refused` one by one to a copy of `imp`: each must be refused
    /// and leave it exactly as it was.
    fn untouched_by(
        &self,
        refused: &[Action],
        imp: &StepCluster<MemoryLog>,
        diverged: &dyn Fn(Option<State>, String) -> Box<Divergence>,
    ) -> Result<(), Box<Divergence>> {
        for &a in refused {
            let mut work = imp.clone();
            if work.apply(step_action(a)).is_ok() || work != *imp {
                return Err(diverged(
                    None,
                    format!("the implementation refused {a}, but changed on the way"),
                ));
            }
        }
        Ok(())
    }
}

/// The model checker's own run over the same configuration, with or
/// without its symmetry reduction: its states generated (each
/// transition's successor, and the initial state) and unique states, and
/// how long it took, for the figures beside ours.
pub fn model_checker_run(cfg: &Config, threads: usize, symmetry: bool) -> (u64, u64, Duration) {
    use stateright::{Checker, Model};
    let started = Instant::now();
    let builder = PartitionModel::new(*cfg).checker().threads(threads.max(1));
    let checker = if symmetry {
        builder.symmetry().spawn_dfs().join()
    } else {
        builder.spawn_dfs().join()
    };
    (
        checker.state_count() as u64,
        checker.unique_state_count() as u64,
        started.elapsed(),
    )
}
