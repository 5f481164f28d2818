//! One worker of the distributed check (`mod.rs` says how the work is
//! split and why the answers are the single-process engine's).

use super::exchange::Rounds;
use super::reach::{self, Predecessors};
use super::{Flaw, Shared};
use crate::graph::{self, all_goals, flag, replay_chain};
use crate::outcome::Outcome;
use crate::progress::{self, ProgressReport, ProgressResult, Stuck};
use crate::recovery_walk::{self, RecoveryWalk, WalkMemo};
use crate::search::{noteworthy_properties, progress_flags, Completion, SearchProgress};
use crate::{fingerprint, fingerprint_of_representative, verdict, Checkable, Trace};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use stateright::Expectation;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use timely::worker::Worker;

mod expand;
mod paths;
mod progress_check;
mod recovery;
mod store;

use expand::{expand, Phase, Scratch, Successor};
use progress_check::stuck_report;
use store::Store;

type Index = HashMap<u64, u32, ahash::RandomState>;

/// A path through the graph: each node's fingerprint, and whether it is a
/// state of the bounded model.
type Chain = Vec<(u64, bool)>;

/// A successor, to its owner: the state (its class's representative), its
/// parent, and its key: the parent's rank in its level and the index of
/// the action in the parent's list.
#[derive(Clone, Serialize, Deserialize)]
#[serde(bound(serialize = "S: Serialize", deserialize = "S: DeserializeOwned"))]
struct StateMsg<S> {
    fp: u64,
    parent: u64,
    key: (u32, u32),
    in_bounds: bool,
    state: S,
}

/// A state new to its owner in this level: the least key (and its parent)
/// by which it was reached within the bounds, and beyond them, and where
/// the state is kept.
struct Arrival {
    bounded: Option<((u32, u32), u64)>,
    recovery: Option<((u32, u32), u64)>,
    state: u32,
}

/// The states new to a worker in a level, each kept once: the map holds
/// what orders them, the states lie in one array that becomes the next
/// level's as it is (a level's states are the search's largest cost after
/// the graph; moved from map to list to level they were held two and three
/// times over).
struct Pending<S> {
    arrivals: HashMap<u64, Arrival, ahash::RandomState>,
    states: Vec<S>,
}

/// Takes in a successor sent to its owner: kept once per state new to the
/// owner, with the least key that reached it (within the bounds, and
/// beyond them). True when it reaches a recovery state within the bounds
/// (not supported).
fn arrive<S>(store: &Store, pending: &mut Pending<S>, m: StateMsg<S>, flaw: Flaw) -> bool {
    if let Some(&known) = store.index.get(&m.fp) {
        return m.in_bounds && !store.in_bounds(known);
    }
    let states = &mut pending.states;
    let arrival = pending.arrivals.entry(m.fp).or_insert_with(|| {
        states.push(m.state);
        Arrival {
            bounded: None,
            recovery: None,
            state: u32::try_from(states.len() - 1).expect("fewer than 2^32 a level"),
        }
    });
    let slot = if m.in_bounds {
        &mut arrival.bounded
    } else {
        &mut arrival.recovery
    };
    // The single-process merge's order: the parent's place in the queue,
    // then the action's in its list (the planted flaw: the last wins).
    let better = match slot {
        None => true,
        Some((key, _)) => (m.key < *key) != (flaw == Flaw::LastParentWins),
    };
    if better {
        *slot = Some((m.key, m.parent));
    }
    false
}

/// Successors this worker sent to other workers lately, so that it sends
/// each about once (`safe` reaches a state ~9 times). A successor is left
/// unsent when the same state, as the same kind (within the bounds or
/// beyond), went to its owner before it: in an earlier level the owner
/// holds it already, and an arrival of a known state changes nothing
/// (`arrive`); in this level it went with a smaller key, since a worker
/// expands its level in the order of rank and a state's actions in their
/// order, and the least key wins. Lossy: a slot holds the last
/// fingerprint that mapped to it, and a state not found is sent again.
/// On `safe-min-isr-3` as 2 processes of 1 worker it cut the run from
/// 22.2 s to 14.9 s (one run each, idle machine; reports identical).
struct SentCache {
    bounded: Vec<u64>,
    recovery: Vec<u64>,
}

impl SentCache {
    /// 2^20 slots a kind: 16 MiB a worker.
    const SLOTS: usize = 1 << 20;

    fn new() -> Self {
        SentCache {
            bounded: vec![0; Self::SLOTS],
            recovery: vec![0; Self::SLOTS],
        }
    }

    /// Whether `fp`, of this kind, was sent lately; remembers it if not.
    /// Fingerprint 0 (the empty slot) is always sent.
    fn already(&mut self, fp: u64, in_bounds: bool) -> bool {
        let slots = if in_bounds {
            &mut self.bounded
        } else {
            &mut self.recovery
        };
        // The owner is chosen by the low bits: the slot by the high ones.
        let slot = &mut slots[(fp >> 44) as usize & (Self::SLOTS - 1)];
        let hit = *slot == fp && fp != 0;
        *slot = fp;
        hit
    }
}

/// The rounds that `most` items a worker take, `slice` a round.
fn rounds(most: u64, slice: usize) -> usize {
    (most as usize).div_ceil(slice.max(1)).max(1)
}

/// What the workers send each other, but states.
#[derive(Clone, Serialize, Deserialize)]
enum Msg {
    /// A new state's key, to the worker that ranks this range of parents'
    /// ranks.
    Key {
        parent_rank: u32,
        action: u32,
        owner: u32,
        local: u32,
    },
    /// A new state's rank, back to its owner.
    Rank { local: u32, rank: u32 },
    /// One worker's figures, to every worker.
    Summary(Box<Summary>),
    /// The way back to an initial state, to the owner of `at`.
    Chase {
        query: u32,
        at: u64,
        chain: Vec<(u64, bool)>,
    },
    /// A chain found, to worker 0.
    Chain { query: u32, chain: Vec<(u64, bool)> },
}

/// One worker's figures of a level, or of the progress check.
#[derive(Clone, Default, Serialize, Deserialize)]
struct Summary {
    from: u32,
    /// Keys this worker ranks (states new in the next level).
    keys: u64,
    /// States this worker holds in the next level.
    frontier: u64,
    transitions: u64,
    unique: u64,
    recovery: u64,
    walked: u64,
    /// Per property: (rank, fingerprint) of this worker's first state of
    /// the level breaking (satisfying) it.
    first: Vec<Option<(u32, u64)>>,
    /// A recovery state the bounded model reached (not supported).
    converted: bool,
    stop: bool,
    /// Progress check: per goal, stuck and exempt states and the first
    /// stuck one as (depth, rank, fingerprint); the first exempt state.
    stuck: Vec<u64>,
    exempt: Vec<u64>,
    first_stuck: Vec<Option<(u8, u32, u64)>>,
    first_exempt: Option<(u8, u32, u64)>,
    edges: u64,
    bytes: u64,
}

/// The search's figures, the same in every worker.
#[derive(Default)]
struct Figures {
    progress: SearchProgress,
    /// Per property: (depth, fingerprint) of its first state.
    first: Vec<Option<(u8, u64)>>,
}

struct Run<'a, M>
where
    M: Checkable + 'static,
    M::State: Serialize + DeserializeOwned + 'static,
{
    sh: &'a Shared<M>,
    me: usize,
    peers: usize,
    rounds: Rounds<Msg>,
    states: Rounds<StateMsg<M::State>>,
    /// Fault-free edges (target, source), to the target's owner.
    edges: Rounds<(u64, u64)>,
    store: Store,
    sent: SentCache,
    fig: Figures,
    stop: &'a AtomicBool,
    tx: Sender<SearchProgress>,
    reports: bool,
}

pub(crate) fn run<M>(
    worker: &mut Worker,
    sh: &Shared<M>,
    stop: &AtomicBool,
    tx: Sender<SearchProgress>,
) -> Result<Option<Outcome<M>>, String>
where
    M: Checkable + 'static,
    M::State: Serialize + DeserializeOwned + 'static,
{
    let me = worker.index();
    let peers = worker.peers();
    let rounds = Rounds::new(worker);
    let states = Rounds::new(worker);
    let edges = Rounds::new(worker);
    let mut run = Run {
        sh,
        me,
        peers,
        rounds,
        states,
        edges,
        store: Store::default(),
        sent: SentCache::new(),
        fig: Figures {
            first: vec![None; sh.properties.len()],
            ..Figures::default()
        },
        stop,
        tx,
        reports: me.is_multiple_of(sh.workers),
    };
    run.search(worker)
}

impl<M> Run<'_, M>
where
    M: Checkable + 'static,
    M::State: Serialize + DeserializeOwned + 'static,
{
    fn owner(&self, fp: u64) -> usize {
        (fp % self.peers as u64) as usize
    }

    fn report(&mut self) {
        self.fig.progress.seconds = self.sh.start.elapsed().as_secs_f64();
        if self.reports {
            let _ = self.tx.send(self.fig.progress);
        }
    }

    /// Every worker's summary, in worker order.
    fn all_gather(&mut self, worker: &mut Worker, mut s: Summary) -> Vec<Summary> {
        s.from = self.me as u32;
        for w in 0..self.peers {
            self.rounds.send(w, Msg::Summary(Box::new(s.clone())));
        }
        let mut out: Vec<Summary> = self
            .rounds
            .finish(worker)
            .into_iter()
            .filter_map(|m| match m {
                Msg::Summary(s) => Some(*s),
                _ => None,
            })
            .collect();
        out.sort_by_key(|s| s.from);
        out
    }

    /// Whether the planted flaw loses this successor on its way to `to`.
    fn lost(&self, fp: u64) -> bool {
        self.sh.flaw == Flaw::DropSomeSent && self.owner(fp) != self.me && fp.is_multiple_of(5)
    }

    /// Phase 1: the bounded model, level by level. Its completion, the
    /// recovery states it reached (beyond the bounds), and the depth a
    /// counterexample ends the search at.
    #[allow(clippy::type_complexity)]
    fn bounded_levels(
        &mut self,
        worker: &mut Worker,
    ) -> Result<(Completion, Vec<(u32, M::State)>, Option<u8>), String> {
        let sh = self.sh;
        let model = &sh.model;
        // The initial states, in order, each class once: every worker
        // ranks them alike and keeps its own.
        let mut seen = std::collections::HashSet::new();
        // The level: (node, rank, where its state lies in `states`).
        let mut frontier: Vec<(u32, u32, u32)> = Vec::new();
        let mut states: Vec<M::State> = Vec::new();
        let mut level_size = 0u32;
        for init in model.init_states() {
            let rep = model.representative(&init);
            let fp = fingerprint_of_representative(&rep);
            if !seen.insert(fp) {
                continue;
            }
            if self.owner(fp) == self.me {
                let n = self.store.add(fp, fp, 0, flag::IN_BOUNDS);
                self.store.rank[n as usize] = level_size;
                frontier.push((n, level_size, states.len() as u32));
                states.push(rep);
            }
            level_size += 1;
        }
        self.fig.progress.unique_states = u64::from(level_size);
        // The most states any worker has in the level.
        let mut widest = u64::from(level_size);
        let mut completion = Completion::Exhaustive;
        let mut recovery_states: Vec<(u32, M::State)> = Vec::new();
        let mut stop_depth: Option<u8> = None;
        let mut depth: u8 = 0;
        let mut scratch = Scratch::default();
        while level_size > 0 {
            if stop_depth.is_some_and(|d| depth > d) {
                completion = Completion::StoppedAtCounterexample;
                break;
            }
            let mut first: Vec<Option<(u32, u64)>> = vec![None; sh.properties.len()];
            let mut transitions = 0u64;
            // The level goes out in slices, each one round, so that only a
            // slice's successors are on their way at once; what arrives is
            // kept once per state, with the least key that reached it.
            let mut pending = Pending {
                arrivals: HashMap::default(),
                states: Vec::new(),
            };
            let mut converted = false;
            let mut level = std::mem::take(&mut frontier).into_iter();
            for _ in 0..rounds(widest, sh.slices.states) {
                for (n, rank, at) in level.by_ref().take(sh.slices.states) {
                    let fp = self.store.fps[n as usize];
                    let s = &states[at as usize];
                    let e = expand(sh, Phase::Bounded, s, true, &mut scratch);
                    self.store.flags[n as usize] |= e.flags | flag::EXPANDED;
                    for (i, f) in first.iter_mut().enumerate() {
                        if e.properties & (1 << i) != 0 && f.is_none() {
                            *f = Some((rank, fp));
                        }
                    }
                    transitions += self.route(n, rank, e.successors, |store, msg| {
                        converted |= arrive(store, &mut pending, msg, sh.flaw);
                    });
                }
                for m in self.states.finish(worker) {
                    converted |= arrive(&self.store, &mut pending, m, sh.flaw);
                }
            }
            drop(level);
            drop(std::mem::take(&mut states));
            let Pending {
                arrivals,
                states: next_states,
            } = pending;
            let mut arrived: Vec<(u64, Arrival)> = arrivals.into_iter().collect();
            arrived.sort_unstable_by_key(|(_, a)| a.bounded.or(a.recovery).map(|k| k.0));
            let mut next: Vec<(u32, u32)> = Vec::new();
            let mut keys: Vec<(u32, u32, u32)> = Vec::new();
            let (mut unique, mut recovery) = (0u64, 0u64);
            for (fp, a) in arrived {
                match (a.bounded, a.recovery) {
                    (Some((key, parent)), recovery_key) => {
                        // Reached beyond the bounds first, then within: the
                        // single-process engine would turn a recovery state
                        // into a bounded one.
                        converted |= recovery_key.is_some_and(|(k, _)| k < key);
                        let n =
                            self.store
                                .add(fp, parent, depth.saturating_add(1), flag::IN_BOUNDS);
                        unique += 1;
                        next.push((n, a.state));
                        keys.push((key.0, key.1, n));
                    }
                    (None, Some((_, parent))) => {
                        let n = self.store.add(fp, parent, depth.saturating_add(1), 0);
                        recovery += 1;
                        recovery_states.push((n, next_states[a.state as usize].clone()));
                    }
                    (None, None) => unreachable!("an arrival has a key"),
                }
            }
            // Rank the next level: each key to the worker of its range of
            // parents' ranks.
            for &(parent_rank, action, local) in &keys {
                let to =
                    (u64::from(parent_rank) * self.peers as u64 / u64::from(level_size)) as usize;
                self.rounds.send(
                    to,
                    Msg::Key {
                        parent_rank,
                        action,
                        owner: self.me as u32,
                        local,
                    },
                );
            }
            let mut ranked: Vec<(u32, u32, u32, u32)> = self
                .rounds
                .finish(worker)
                .into_iter()
                .filter_map(|m| match m {
                    Msg::Key {
                        parent_rank,
                        action,
                        owner,
                        local,
                    } => Some((parent_rank, action, owner, local)),
                    _ => None,
                })
                .collect();
            ranked.sort_unstable();
            let summaries = self.all_gather(
                worker,
                Summary {
                    keys: ranked.len() as u64,
                    frontier: next.len() as u64,
                    transitions,
                    unique,
                    recovery,
                    first,
                    converted,
                    stop: self.stop.load(Ordering::Relaxed),
                    ..Summary::default()
                },
            );
            if summaries.iter().any(|s| s.converted) {
                return Err(
                    "the distributed search does not support a model whose bounded states \
                     include one first found as a recovery state (beyond the bounds); \
                     run it in one process"
                        .to_string(),
                );
            }
            let p = &mut self.fig.progress;
            p.transitions += summaries.iter().map(|s| s.transitions).sum::<u64>();
            p.unique_states += summaries.iter().map(|s| s.unique).sum::<u64>();
            p.recovery_states += summaries.iter().map(|s| s.recovery).sum::<u64>();
            for i in 0..sh.properties.len() {
                if self.fig.first[i].is_none() {
                    self.fig.first[i] = summaries
                        .iter()
                        .filter_map(|s| s.first[i])
                        .min()
                        .map(|(_, fp)| (depth, fp));
                }
            }
            widest = summaries.iter().map(|s| s.frontier).max().unwrap_or(0);
            let offset: u64 = summaries[..self.me].iter().map(|s| s.keys).sum();
            let next_size: u64 = summaries.iter().map(|s| s.keys).sum();
            for (pos, &(_, _, owner, local)) in ranked.iter().enumerate() {
                let rank = u32::try_from(offset + pos as u64).expect("fewer than 2^32 a level");
                self.rounds.send(owner as usize, Msg::Rank { local, rank });
            }
            let mut ranks: HashMap<u32, u32> = HashMap::new();
            for m in self.rounds.finish(worker) {
                if let Msg::Rank { local, rank } = m {
                    ranks.insert(local, rank);
                }
            }
            frontier = next
                .into_iter()
                .map(|(n, at)| {
                    let rank = ranks[&n];
                    self.store.rank[n as usize] = rank;
                    (n, rank, at)
                })
                .collect();
            states = next_states;
            frontier.sort_unstable_by_key(|f| f.1);
            level_size = u32::try_from(next_size).expect("fewer than 2^32 a level");
            if level_size > 0 {
                let p = &mut self.fig.progress;
                p.max_depth = p.max_depth.max(u64::from(depth) + 1);
            }
            if stop_depth.is_none() && !sh.until.is_empty() {
                let depths = sh.until.iter().map(|&i| self.fig.first[i].map(|f| f.0));
                stop_depth = if sh.until_all {
                    depths
                        .collect::<Option<Vec<u8>>>()
                        .and_then(|d| d.into_iter().max())
                } else {
                    depths.flatten().min()
                };
            }
            self.report();
            if summaries.iter().any(|s| s.stop) {
                completion = Completion::Interrupted;
                break;
            }
            depth = depth.saturating_add(1);
        }
        Ok((completion, recovery_states, stop_depth))
    }

    /// Sends each successor of node `n` (of rank `rank` in its level) to
    /// its owner, handing this worker's own to `own` (they need no round),
    /// and keeps the fault-free edges when the progress check needs them.
    /// Returns the transitions within the bounds.
    fn route(
        &mut self,
        n: u32,
        rank: u32,
        successors: Vec<Successor<M::State>>,
        mut own: impl FnMut(&mut Store, StateMsg<M::State>),
    ) -> u64 {
        let parent = self.store.fps[n as usize];
        let edge_start = self.store.edges.len() as u32;
        let mut edge_len = 0u16;
        let mut transitions = 0;
        for succ in successors {
            if self.lost(succ.fp) {
                continue;
            }
            if succ.in_bounds {
                transitions += 1;
            }
            if self.sh.keeps_progress && !succ.fault {
                self.store.edges.push(succ.fp);
                edge_len += 1;
            }
            let to = self.owner(succ.fp);
            if to != self.me && self.sent.already(succ.fp, succ.in_bounds) {
                continue;
            }
            let msg = StateMsg {
                fp: succ.fp,
                parent,
                key: (rank, succ.action),
                in_bounds: succ.in_bounds,
                state: succ.rep,
            };
            if to == self.me {
                own(&mut self.store, msg);
            } else {
                self.states.send(to, msg);
            }
        }
        self.store.edge_start[n as usize] = edge_start;
        self.store.edge_len[n as usize] = edge_len;
        transitions
    }

    fn search(&mut self, worker: &mut Worker) -> Result<Option<Outcome<M>>, String> {
        let sh = self.sh;
        let (mut completion, recovery_states, stop_depth) = self.bounded_levels(worker)?;
        if sh.keeps_progress
            && completion == Completion::Exhaustive
            && !self.recovery_levels(worker, recovery_states)
        {
            completion = Completion::Interrupted;
        }
        if let (Some(d), Completion::StoppedAtCounterexample) = (stop_depth, completion) {
            for f in &mut self.fig.first {
                if f.is_some_and(|(depth, _)| depth > d) {
                    *f = None;
                }
            }
        }
        self.fig.progress.seconds = self.sh.start.elapsed().as_secs_f64();
        let search_progress = self.fig.progress;
        // The progress check.
        let check_start = std::time::Instant::now();
        let checked = if sh.keeps_progress && completion == Completion::Exhaustive {
            Some(self.progress_check(worker))
        } else {
            None
        };
        let bytes = self.store.bytes();
        let totals = self.all_gather(
            worker,
            Summary {
                bytes,
                edges: self.store.edge_count(),
                ..Summary::default()
            },
        );
        // The paths, chased from owner to owner back to an initial state.
        let mut targets: Vec<Option<u64>> = self.fig.first.iter().map(|f| f.map(|f| f.1)).collect();
        if let Some(c) = &checked {
            targets.extend(c.first_stuck.iter().map(|f| f.map(|f| f.2)));
            targets.push(c.first_exempt.map(|f| f.2));
        }
        let chains = self.chase(worker, &targets);
        if self.me != 0 {
            return Ok(None);
        }
        let chains = chains.expect("worker 0 collects the chains");
        let trace_of = |q: usize| {
            chains[q]
                .as_ref()
                .map(|c| replay_chain(&sh.model, &sh.recovery, c))
        };
        let nprops = sh.properties.len();
        let first: Vec<Option<Trace<M>>> = (0..nprops).map(trace_of).collect();
        let check = checked.map(|c| {
            let properties = sh
                .goals
                .iter()
                .enumerate()
                .map(|(g, goal)| ProgressResult {
                    name: goal.name,
                    stuck_states: c.stuck[g],
                    exempt_states: c.exempt[g],
                    counterexample: trace_of(nprops + g).map(|trace| stuck_report(sh, trace)),
                })
                .collect();
            ProgressReport {
                properties,
                exempt_example: trace_of(nprops + sh.goals.len()),
                edges: totals.iter().map(|s| s.edges).sum(),
                recovery_states: search_progress.recovery_states,
                recovery_walked: search_progress.recovery_walked,
                seconds: check_start.elapsed().as_secs_f64(),
            }
        });
        let verdicts = sh
            .properties
            .iter()
            .zip(&first)
            .map(|(p, f)| {
                verdict::of_search(
                    p.expectation == Expectation::Always,
                    f.is_some(),
                    completion,
                )
            })
            .collect();
        Ok(Some(Outcome {
            properties: sh.properties.clone(),
            goals: sh.goals.clone(),
            first,
            verdicts,
            completion,
            progress: search_progress,
            check,
            graph_bytes: totals.iter().map(|s| s.bytes).sum(),
            footprint: None,
            counted_peak: None,
            over_budget: None,
        }))
    }
}
