//! One worker of the distributed check (`mod.rs` says how the work is
//! split and why the answers are the single-process engine's).

use super::exchange::Rounds;
use super::reach::{self, Predecessors};
use super::{Flaw, Shared};
use crate::graph::{self, all_goals, flag, replay_chain};
use crate::outcome::Outcome;
use crate::progress::{self, ProgressReport, ProgressResult, Stuck};
use crate::recovery_walk::{self, RecoveryWalk};
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

/// The nodes a worker owns.
#[derive(Default)]
struct Store {
    index: Index,
    fps: Vec<u64>,
    /// The parent's fingerprint (its own for an initial state).
    parent: Vec<u64>,
    depth: Vec<u8>,
    flags: Vec<u8>,
    /// The rank in its level (states of the bounded model).
    rank: Vec<u32>,
    edge_start: Vec<u32>,
    edge_len: Vec<u16>,
    /// Fault-free edges, by target fingerprint.
    edges: Vec<u64>,
    /// The edge count and the store's bytes when the edges were given up
    /// (the progress check holds them at their targets instead).
    dropped: Option<(u64, u64)>,
}

impl Store {
    fn add(&mut self, fp: u64, parent: u64, depth: u8, flags: u8) -> u32 {
        let n = u32::try_from(self.fps.len()).expect("fewer than 2^32 states per worker");
        self.index.insert(fp, n);
        self.fps.push(fp);
        self.parent.push(parent);
        self.depth.push(depth);
        self.flags.push(flags);
        self.rank.push(0);
        self.edge_start.push(0);
        self.edge_len.push(0);
        n
    }
    fn in_bounds(&self, n: u32) -> bool {
        self.flags[n as usize] & flag::IN_BOUNDS != 0
    }
    /// The fault-free edges kept.
    fn edge_count(&self) -> u64 {
        self.dropped
            .map_or(self.edges.len() as u64, |(edges, _)| edges)
    }
    /// Frees the outgoing edges, keeping their figures.
    fn drop_edges(&mut self) {
        self.dropped = Some((self.edge_count(), self.bytes()));
        self.edges = Vec::new();
        self.edge_start = Vec::new();
        self.edge_len = Vec::new();
    }
    fn bytes(&self) -> u64 {
        if let Some((_, bytes)) = self.dropped {
            return bytes;
        }
        let per_node = 8 + 8 + 1 + 1 + 4 + 4 + 2;
        (self.fps.capacity() * per_node + self.index.capacity() * 12 + self.edges.capacity() * 8)
            as u64
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Bounded,
    Recovery,
}

/// One successor of a state, as the single-process expansion computes it.
struct Successor<S> {
    fp: u64,
    action: u32,
    fault: bool,
    in_bounds: bool,
    rep: S,
}

/// A state's expansion: its property bits, flags, and successors (none
/// when a recovery walk spared it).
struct Expansion<S> {
    properties: u64,
    flags: u8,
    walked: bool,
    successors: Vec<Successor<S>>,
}

/// Expands `s` as `search.rs`'s `expand_chunk` does (`walk`: whether a
/// recovery state may be walked instead).
fn expand<M: Checkable>(
    sh: &Shared<M>,
    phase: Phase,
    s: &M::State,
    walk: bool,
    enabled: &mut Vec<M::Action>,
) -> Expansion<M::State> {
    let model = &sh.model;
    let lister = if sh.keeps_progress {
        &sh.recovery
    } else {
        model
    };
    let properties = if phase == Phase::Bounded {
        noteworthy_properties(model, &sh.properties, s)
    } else {
        0
    };
    let mut flags = 0;
    if sh.keeps_progress {
        flags = progress_flags(model, &sh.goals, s);
    }
    let mut out = Expansion {
        properties,
        flags,
        walked: false,
        successors: Vec::new(),
    };
    if phase == Phase::Recovery && walk {
        let every = all_goals(sh.goals.len());
        let goals = match sh.walk {
            RecoveryWalk::Greedy => recovery_walk::goals_reached(model, &sh.recovery, &sh.goals, s),
            RecoveryWalk::Off => 0,
            RecoveryWalk::ClaimsEveryGoal => every,
        };
        out.flags |= goals;
        if goals == every {
            out.walked = true;
            return out;
        }
    }
    enabled.clear();
    lister.actions(s, enabled);
    for (i, a) in enabled.iter().enumerate() {
        let fault = model.is_fault(s, a);
        if phase == Phase::Recovery && !model.heals(s, a) {
            continue;
        }
        let Some(next) = lister.successor(s, a.clone()) else {
            continue;
        };
        if !model.within_boundary(&next) {
            continue;
        }
        let in_bounds = phase == Phase::Bounded && model.within_bounds(&next);
        if !in_bounds && !model.heals(s, a) {
            continue;
        }
        let rep = if in_bounds {
            model.representative(&next)
        } else {
            model.representative(&model.recovery_view(next))
        };
        out.successors.push(Successor {
            fp: fingerprint_of_representative(&rep),
            action: i as u32,
            fault,
            in_bounds,
            rep,
        });
    }
    out
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

    fn search(&mut self, worker: &mut Worker) -> Result<Option<Outcome<M>>, String> {
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
        let mut enabled = Vec::new();
        // Phase 1, the bounded model, level by level.
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
                    let e = expand(sh, Phase::Bounded, s, true, &mut enabled);
                    self.store.flags[n as usize] |= e.flags | flag::EXPANDED;
                    for (i, f) in first.iter_mut().enumerate() {
                        if e.properties & (1 << i) != 0 && f.is_none() {
                            *f = Some((rank, fp));
                        }
                    }
                    let edge_start = self.store.edges.len() as u32;
                    let mut edge_len = 0u16;
                    for succ in e.successors {
                        if self.lost(succ.fp) {
                            continue;
                        }
                        if succ.in_bounds {
                            transitions += 1;
                        }
                        if sh.keeps_progress && !succ.fault {
                            self.store.edges.push(succ.fp);
                            edge_len += 1;
                        }
                        let to = self.owner(succ.fp);
                        let msg = StateMsg {
                            fp: succ.fp,
                            parent: fp,
                            key: (rank, succ.action),
                            in_bounds: succ.in_bounds,
                            state: succ.rep,
                        };
                        // A state of this worker's own needs no round.
                        if to == self.me {
                            converted |= arrive(&self.store, &mut pending, msg, sh.flaw);
                        } else {
                            self.states.send(to, msg);
                        }
                    }
                    self.store.edge_start[n as usize] = edge_start;
                    self.store.edge_len[n as usize] = edge_len;
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
        // Phase 2, recovery states.
        if sh.keeps_progress && completion == Completion::Exhaustive {
            self.fig.progress.recovery_phase = true;
            let mut level = recovery_states;
            let sizes = self.all_gather(
                worker,
                Summary {
                    keys: level.len() as u64,
                    ..Summary::default()
                },
            );
            let mut widest = sizes.iter().map(|s| s.keys).max().unwrap_or(0);
            while widest > 0 {
                let mut walked = 0u64;
                let mut recovery = 0u64;
                let mut states = std::mem::take(&mut level).into_iter();
                for _ in 0..rounds(widest, sh.slices.states) {
                    for (n, s) in states.by_ref().take(sh.slices.states) {
                        let fp = self.store.fps[n as usize];
                        let e = expand(sh, Phase::Recovery, &s, true, &mut enabled);
                        self.store.flags[n as usize] |= e.flags | flag::EXPANDED;
                        if e.walked {
                            walked += 1;
                            continue;
                        }
                        let edge_start = self.store.edges.len() as u32;
                        let mut edge_len = 0u16;
                        for succ in e.successors {
                            if self.lost(succ.fp) {
                                continue;
                            }
                            if !succ.fault {
                                self.store.edges.push(succ.fp);
                                edge_len += 1;
                            }
                            let to = self.owner(succ.fp);
                            let msg = StateMsg {
                                fp: succ.fp,
                                parent: fp,
                                key: (0, succ.action),
                                in_bounds: false,
                                state: succ.rep,
                            };
                            if to != self.me {
                                self.states.send(to, msg);
                            } else if !self.store.index.contains_key(&msg.fp) {
                                let n = self.store.add(msg.fp, msg.parent, 0, 0);
                                recovery += 1;
                                level.push((n, msg.state));
                            }
                        }
                        self.store.edge_start[n as usize] = edge_start;
                        self.store.edge_len[n as usize] = edge_len;
                    }
                    for m in self.states.finish(worker) {
                        if !self.store.index.contains_key(&m.fp) {
                            let n = self.store.add(m.fp, m.parent, 0, 0);
                            recovery += 1;
                            level.push((n, m.state));
                        }
                    }
                }
                let summaries = self.all_gather(
                    worker,
                    Summary {
                        keys: level.len() as u64,
                        recovery,
                        walked,
                        stop: self.stop.load(Ordering::Relaxed),
                        ..Summary::default()
                    },
                );
                let p = &mut self.fig.progress;
                p.recovery_states += summaries.iter().map(|s| s.recovery).sum::<u64>();
                p.recovery_walked += summaries.iter().map(|s| s.walked).sum::<u64>();
                self.report();
                if summaries.iter().any(|s| s.stop) {
                    completion = Completion::Interrupted;
                    break;
                }
                widest = summaries.iter().map(|s| s.keys).max().unwrap_or(0);
            }
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

    /// Sends every fault-free edge (target, source) to its target's owner,
    /// a slice of edges a worker a round, and hands each arrival to
    /// `arrive` with the target's local index. In slices, so that only a
    /// slice's edges are on their way at once: sent all together they were
    /// the distributed check's peak (every edge in flight and delivered
    /// beside the edges kept).
    fn each_edge_at_its_target(&mut self, worker: &mut Worker, mut arrive: impl FnMut(u32, u64)) {
        let counts = self.all_gather(
            worker,
            Summary {
                edges: self.store.edges.len() as u64,
                ..Summary::default()
            },
        );
        let most = counts.iter().map(|s| s.edges).max().unwrap_or(0);
        let slice = self.sh.slices.edges.max(1);
        let (mut n, mut i) = (0usize, 0usize);
        for _ in 0..rounds(most, slice) {
            let mut sent = 0;
            while sent < slice && n < self.store.fps.len() {
                if i == self.store.edge_len[n] as usize {
                    (n, i) = (n + 1, 0);
                    continue;
                }
                let target = self.store.edges[self.store.edge_start[n] as usize + i];
                (i, sent) = (i + 1, sent + 1);
                if self.sh.flaw == Flaw::DropSliceEnds && sent == slice {
                    continue;
                }
                self.edges
                    .send(self.owner(target), (target, self.store.fps[n]));
            }
            for (target, source) in self.edges.finish(worker) {
                arrive(self.store.index[&target], source);
            }
        }
    }

    /// The progress check's figures, the same in every worker.
    fn progress_check(&mut self, worker: &mut Worker) -> Summary {
        let sh = self.sh;
        // Each state's predecessors, kept by its owner: the edges go to
        // their targets' owners twice, to count and then to place them,
        // so that no list of (target, source) pairs is held beside them.
        let nodes = self.store.fps.len();
        let mut start = vec![0u32; nodes + 1];
        self.each_edge_at_its_target(worker, |t, _| start[t as usize + 1] += 1);
        for i in 0..nodes {
            start[i + 1] += start[i];
        }
        let mut sources = vec![0u64; start[nodes] as usize];
        let mut cursor = start.clone();
        self.each_edge_at_its_target(worker, |t, source| {
            sources[cursor[t as usize] as usize] = source;
            cursor[t as usize] += 1;
        });
        drop(cursor);
        // The edges are now held where they lead; the outgoing lists are
        // not needed again (a stuck state's trap is found by expanding).
        self.store.drop_edges();
        let predecessors = Predecessors { start, sources };
        let goal_bits = all_goals(sh.goals.len());
        let seeds: Vec<(u64, u8)> = (0..nodes)
            .filter_map(|n| {
                let bits = self.store.flags[n] & (goal_bits | flag::EXEMPT);
                (bits != 0).then_some((self.store.fps[n], bits))
            })
            .collect();
        let index = Rc::new(std::mem::take(&mut self.store.index));
        let reached = reach::reach(worker, Rc::clone(&index), predecessors, seeds, nodes);
        self.store.index = Rc::try_unwrap(index).unwrap_or_else(|rc| (*rc).clone());
        // Stuck states per goal, and the first of each, as the
        // single-process check orders them: least depth, then rank.
        let key = |n: usize| (self.store.depth[n], self.store.rank[n], self.store.fps[n]);
        let mut s = Summary {
            stuck: vec![0; sh.goals.len()],
            exempt: vec![0; sh.goals.len()],
            first_stuck: vec![None; sh.goals.len()],
            ..Summary::default()
        };
        for n in (0..nodes).filter(|&n| self.store.in_bounds(n as u32)) {
            if self.store.flags[n] & flag::EXEMPT != 0 {
                s.first_exempt = s.first_exempt.min(Some(key(n))).or(Some(key(n)));
            }
            let exempt = reached[n] & flag::EXEMPT != 0;
            for g in 0..sh.goals.len() {
                if reached[n] & (flag::GOAL << g) != 0 {
                    continue;
                }
                if exempt {
                    s.exempt[g] += 1;
                } else {
                    s.stuck[g] += 1;
                    let k = Some(key(n));
                    s.first_stuck[g] = match s.first_stuck[g] {
                        Some(old) if Some(old) < k => Some(old),
                        _ => k,
                    };
                }
            }
        }
        let all = self.all_gather(worker, s);
        let mut out = Summary {
            stuck: vec![0; sh.goals.len()],
            exempt: vec![0; sh.goals.len()],
            first_stuck: vec![None; sh.goals.len()],
            ..Summary::default()
        };
        for w in &all {
            for g in 0..sh.goals.len() {
                out.stuck[g] += w.stuck[g];
                out.exempt[g] += w.exempt[g];
                out.first_stuck[g] = min_some(out.first_stuck[g], w.first_stuck[g]);
            }
            out.first_exempt = min_some(out.first_exempt, w.first_exempt);
        }
        out
    }

    /// Each target's chain of (fingerprint, in bounds) from an initial
    /// state, chased from owner to owner (worker 0 gets them all).
    fn chase(
        &mut self,
        worker: &mut Worker,
        targets: &[Option<u64>],
    ) -> Option<Vec<Option<Chain>>> {
        let mut found: Vec<Option<Chain>> = vec![None; targets.len()];
        if self.me == 0 {
            for (q, t) in targets.iter().enumerate() {
                if let Some(fp) = *t {
                    let to = self.owner(fp);
                    self.rounds.send(
                        to,
                        Msg::Chase {
                            query: q as u32,
                            at: fp,
                            chain: Vec::new(),
                        },
                    );
                }
            }
        }
        // A chain is at most as long as the deepest state; one round more
        // brings the last to worker 0.
        for _ in 0..self.fig.progress.max_depth + 3 {
            for m in self.rounds.finish(worker) {
                match m {
                    Msg::Chase {
                        query,
                        at,
                        mut chain,
                    } => {
                        let n = self.store.index[&at];
                        chain.push((at, self.store.in_bounds(n)));
                        let parent = self.store.parent[n as usize];
                        if parent == at {
                            chain.reverse();
                            self.rounds.send(0, Msg::Chain { query, chain });
                        } else {
                            let to = self.owner(parent);
                            self.rounds.send(
                                to,
                                Msg::Chase {
                                    query,
                                    at: parent,
                                    chain,
                                },
                            );
                        }
                    }
                    Msg::Chain { query, chain } => found[query as usize] = Some(chain),
                    _ => {}
                }
            }
        }
        (self.me == 0).then_some(found)
    }
}

fn min_some<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// The fingerprint `graph.node_of` looks a state up by.
fn node_fp<M: Checkable>(model: &M, s: &M::State) -> u64 {
    if model.within_bounds(s) {
        fingerprint(model, s)
    } else {
        fingerprint(model, &model.recovery_view(s.clone()))
    }
}

/// A stuck state's report, as `progress.rs` makes it: the fault-free
/// exits, and the continuation into a trap, found by walking forward from
/// the stuck state over the edges the search kept (each state expanded
/// again from its representative, as the search expanded it, so that the
/// edges come in the same order).
fn stuck_report<M: Checkable>(sh: &Shared<M>, trace: Trace<M>) -> Stuck<M> {
    let model = &sh.model;
    let recovery = &sh.recovery;
    let last = trace.last().expect("a path has a state").0.clone();
    let mut enabled = Vec::new();
    recovery.actions(&last, &mut enabled);
    let exits = enabled
        .into_iter()
        .filter_map(|a| Some((a.clone(), recovery.next_state(&last, a)?)))
        .filter(|(a, next)| graph::fault_free_edge(model, &last, a, next))
        .collect();
    // The states the stuck one reaches, by node, with their edges.
    let root = model.representative(&last);
    let mut nodes: Vec<(u64, Phase, M::State)> =
        vec![(fingerprint_of_representative(&root), Phase::Bounded, root)];
    let mut index: HashMap<u64, u32> = HashMap::from([(nodes[0].0, 0)]);
    let mut edges: Vec<Vec<u32>> = Vec::new();
    let mut buf = Vec::new();
    let mut i = 0;
    while i < nodes.len() {
        let (_, phase, s) = &nodes[i];
        let e = expand(sh, *phase, s, false, &mut buf);
        let mut out = Vec::new();
        for succ in e.successors {
            if succ.fault {
                continue;
            }
            let next = index.len() as u32;
            let t = *index.entry(succ.fp).or_insert(next);
            if t == next {
                let phase = if succ.in_bounds {
                    Phase::Bounded
                } else {
                    Phase::Recovery
                };
                nodes.push((succ.fp, phase, succ.rep));
            }
            out.push(t);
        }
        edges.push(out);
        i += 1;
    }
    let (chain, trap_states) = progress::trap_chain(0, |m| &edges[m as usize]);
    let continuation = progress::concrete_path(model, recovery, last, &chain, |s, want| {
        node_fp(model, s) == nodes[want as usize].0
    });
    Stuck {
        trace,
        exits,
        continuation,
        trap_states,
    }
}
