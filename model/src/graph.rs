//! The state graph: highwater's own exhaustive search of the model.
//!
//! A breadth-first search over the symmetry-reduced state space (each state
//! stored as its representative's 64-bit fingerprint, with a parent pointer
//! and its depth). In one pass it evaluates every property, so the first
//! state found breaking one is at the least depth and its path is a shortest
//! counterexample; and it keeps the graph's fault-free edges, which the
//! progress check (`progress.rs`) walks backwards. stateright's own checkers
//! keep neither shortest paths (0.31 overwrites a property's path with each
//! later discovery) nor the graph.
//!
//! The progress check asks what the partition can still do from each state
//! if no further fault happens. A run's epoch bound would make every state
//! whose last epoch is spent look stuck, so recovery may use
//! [`RECOVERY_EPOCHS`] more: the search's first phase explores the bounded
//! model (every action, epochs within `--max-epoch`); fault-free steps that
//! go beyond the bound lead to *recovery states*, which a second phase
//! walks (`witness.rs`) or, where one walk does not show them to heal,
//! expands with fault-free actions only. Recovery states are never checked
//! themselves: only the bounded model's states must satisfy the properties.
//!
//! The expansion of a batch of states (enabled actions, successors, their
//! representatives and fingerprints, the properties of the states expanded)
//! runs on several threads; merging the results into the graph is
//! sequential, in queue order, so the graph and every answer are the same
//! whatever the thread count. The merge of one batch runs while the next
//! batch expands (`fptable.rs` lets the expansion read the index the merge
//! writes): the merge is a fifth of the work, and two cores would otherwise
//! wait for it.

use crate::actions::{self, Action};
use crate::config::Config;
use crate::fptable::FingerprintTable;
use crate::model::PartitionModel;
use crate::state::{State, RECOVERY_EPOCHS};
use crate::witness::{self, RecoveryWalk};
use stateright::{Expectation, Model, Property, Representative};
use std::time::Instant;

/// A path: the initial state, then each action with the state it leads to.
pub type Trace = Vec<(State, Option<Action>)>;

/// Index of a state in the graph.
pub type NodeId = u32;

/// A stable 64-bit fingerprint of a state's class.
pub fn fingerprint(s: &State) -> u64 {
    fingerprint_of_representative(&s.representative())
}

fn fingerprint_of_representative(rep: &State) -> u64 {
    // Fixed keys: the same state has the same fingerprint in every run.
    ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(rep)
}

/// The index's value for a node: its id, with [`IN_BOUNDS_TAG`] set once the
/// bounded model reaches it (expansion threads read the tag, not the flags
/// the merge is writing).
const IN_BOUNDS_TAG: u32 = 1 << 31;

fn index_value(n: NodeId, in_bounds: bool) -> u32 {
    if in_bounds {
        n | IN_BOUNDS_TAG
    } else {
        n
    }
}

/// The configuration recovery runs under: the run's, with `extra` more
/// leader epochs ([`RECOVERY_EPOCHS`] by default).
pub fn recovery_config(cfg: &Config, extra: u8) -> Config {
    Config {
        max_epoch: cfg.max_epoch + extra.min(RECOVERY_EPOCHS),
        ..*cfg
    }
}

/// Facts about a state that the progress check needs, kept per node.
pub mod flag {
    /// Reachable in the bounded model (not a recovery state).
    pub const IN_BOUNDS: u8 = 1;
    /// Expanded: its successors and edges are known.
    pub const EXPANDED: u8 = 2;
    /// The partition is healthy (`progress::healthy`).
    pub const HEALTHY: u8 = 4;
    /// Offline by KIP-966's design (`progress::offline_by_design`).
    pub const OFFLINE: u8 = 8;
    /// Every acknowledged record is on every live replica below its HW.
    pub const ACKED_REPLICATED: u8 = 16;
    /// A recovery state a fault-free walk took to a healthy state
    /// (`witness.rs`).
    pub const REACHES_HEALTHY: u8 = 32;
    /// A recovery state a fault-free walk took to a state with every
    /// acknowledged record replicated.
    pub const REACHES_ACKED_REPLICATED: u8 = 64;
}

/// The state predicates the search records per node (as [`flag`] bits).
#[derive(Clone, Copy)]
pub struct NodePredicates {
    pub healthy: fn(&Config, &State) -> bool,
    pub offline: fn(&Config, &State) -> bool,
    pub acked_replicated: fn(&Config, &State) -> bool,
}

/// What to search, and when to stop.
pub struct SearchOptions<'a> {
    pub threads: usize,
    /// Keep the fault-free edges and explore recovery states (the progress
    /// check needs them; a run that stops early does not).
    pub progress: Option<NodePredicates>,
    /// The properties to evaluate (None: the model's own); `Graph::first`
    /// follows their order.
    pub properties: Option<Vec<Property<PartitionModel>>>,
    /// Leader epochs recovery may use beyond the bound (at most
    /// [`RECOVERY_EPOCHS`]; fewer only to show why they are needed).
    pub recovery_epochs: u8,
    /// How recovery states are shown to heal (`witness.rs`).
    pub recovery_walk: RecoveryWalk,
    /// When to stop early: once the level at which these always-properties
    /// have broken is finished; only properties broken within that depth
    /// are then reported.
    pub until: Until<'a>,
    /// Asked between batches: true stops the search (time or state limit,
    /// Ctrl-C); the graph is then incomplete.
    pub stop: &'a (dyn Fn(&SearchProgress) -> bool + Sync),
    /// Called about once a second.
    pub on_progress: &'a mut dyn FnMut(&SearchProgress),
}

/// When a search stops before it has seen everything.
#[derive(Clone, Copy, Debug)]
pub enum Until<'a> {
    /// Never: search every state.
    Exhausted,
    /// Once every one of these always-properties has broken.
    AllBroken(&'a [&'a str]),
    /// Once any always-property has broken.
    AnyBroken,
}

/// A snapshot of the search.
#[derive(Clone, Copy, Debug, Default)]
pub struct SearchProgress {
    /// Transitions followed within the bounded model (stateright's "states").
    pub transitions: u64,
    /// Distinct states of the bounded model found so far.
    pub unique_states: u64,
    /// Recovery states found so far (beyond the epoch bound, fault-free).
    pub recovery_states: u64,
    /// Recovery states a walk showed to heal, so not expanded
    /// (`witness.rs`).
    pub recovery_walked: u64,
    pub max_depth: u64,
    pub seconds: f64,
    /// Second phase: expanding recovery states.
    pub recovery_phase: bool,
}

/// How the search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// Every reachable state was expanded.
    Exhaustive,
    /// Stopped after the level where the `until` property broke.
    StoppedAtCounterexample,
    /// Stopped by `stop` (a limit or an interrupt).
    Interrupted,
}

/// The searched graph and what the properties said about it.
pub struct Graph {
    pub cfg: Config,
    /// The configuration recovery states run under ([`recovery_config`]).
    pub recovery: Config,
    fps: Vec<u64>,
    parent: Vec<NodeId>,
    depth: Vec<u8>,
    flags: Vec<u8>,
    /// Fault-free successors of node n: `edges[edge_start[n]..][..edge_len[n]]`.
    edge_start: Vec<u32>,
    edge_len: Vec<u16>,
    edges: Vec<NodeId>,
    index: FingerprintTable,
    /// Per property (in `properties()` order): the first state in search
    /// order that breaks it (always) or satisfies it (sometimes).
    pub first: Vec<Option<NodeId>>,
    pub completion: Completion,
    pub progress: SearchProgress,
    /// Whether the search kept the fault-free edges and the progress
    /// predicates ([`SearchOptions::progress`]).
    pub keeps_progress: bool,
}

/// One successor, as a worker computed it. The worker looks its
/// fingerprint up in the index (which the previous batch's merge may be
/// writing: what it finds is a hint, and the merge looks an unknown state up
/// again) and keeps the state itself only where the merge may need it: a
/// new state, or one the bounded model reaches only now.
struct Successor {
    fp: u64,
    /// The node it already is, or [`UNKNOWN`].
    node: NodeId,
    /// Index into the batch's states, or [`UNKNOWN`].
    state: u32,
    fault: bool,
    in_bounds: bool,
}

const UNKNOWN: u32 = u32::MAX;

/// One expanded state, as a worker computed it.
struct Expansion {
    node: NodeId,
    /// Bit i: property i broken (always) or satisfied (sometimes).
    properties: u64,
    flags: u8,
    successors: std::ops::Range<usize>,
}

/// A batch's expansions, in batch order.
#[derive(Default)]
struct Expanded {
    /// Recovery states a walk showed to heal (not expanded).
    walked: u64,
    expansions: Vec<Expansion>,
    successors: Vec<Successor>,
    states: Vec<State>,
}

impl Expanded {
    /// Empty, with its buffers kept for the next batch.
    fn clear(&mut self) {
        self.walked = 0;
        self.expansions.clear();
        self.successors.clear();
        self.states.clear();
    }
}

const BATCH: usize = 4096;

impl Graph {
    /// Whether the progress check follows `a` from `s` to `next` (the
    /// graph's fault-free edges): a fault-free step within the bound, or a
    /// healing step beyond it or from a recovery state.
    pub fn is_edge(&self, s: &State, a: Action, next: &State) -> bool {
        fault_free_edge(self.cfg.max_epoch, s, a, next)
    }

    pub fn len(&self) -> usize {
        self.fps.len()
    }
    pub fn is_empty(&self) -> bool {
        self.fps.is_empty()
    }
    pub fn flags(&self, n: NodeId) -> u8 {
        self.flags[n as usize]
    }
    pub fn depth(&self, n: NodeId) -> u8 {
        self.depth[n as usize]
    }
    pub fn in_bounds(&self, n: NodeId) -> bool {
        self.flags(n) & flag::IN_BOUNDS != 0
    }
    pub fn edges(&self, n: NodeId) -> &[NodeId] {
        let start = self.edge_start[n as usize] as usize;
        &self.edges[start..start + self.edge_len[n as usize] as usize]
    }
    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }
    /// The node of a state of the bounded model, or of a recovery state.
    pub fn node_of(&self, s: &State) -> Option<NodeId> {
        let beyond = s.controller.epoch.is_some_and(|e| e > self.cfg.max_epoch);
        let seen = if beyond {
            recovery_view(self.cfg, *s)
        } else {
            *s
        };
        self.index
            .get(fingerprint(&seen))
            .map(|v| v & !IN_BOUNDS_TAG)
    }
    /// Bytes held by the graph (index, per-node arrays and edges).
    pub fn memory_bytes(&self) -> usize {
        let per_node = 8 + 4 + 1 + 1 + 4 + 2;
        self.fps.capacity() * per_node + self.index.memory_bytes() + self.edges.capacity() * 4
    }

    /// The path from the initial state to node `n`, on concrete states: at
    /// each step the first enabled action whose successor is in the next
    /// state's class. A recovery state's path ends with fault-free steps
    /// beyond the epoch bound.
    pub fn path_to(&self, n: NodeId) -> Trace {
        let mut chain = vec![n];
        while let Some(&last) = chain.last() {
            let p = self.parent[last as usize];
            if p == last {
                break;
            }
            chain.push(p);
        }
        chain.reverse();
        let model = PartitionModel::new(self.cfg);
        let recovery = PartitionModel::new(self.recovery);
        let mut state = model.init_state();
        let mut trace = vec![(state, None)];
        for &want in &chain[1..] {
            let bounded = self.in_bounds(want);
            let m = if bounded { &model } else { &recovery };
            let want_fp = self.fps[want as usize];
            let mut enabled = Vec::new();
            m.actions(&state, &mut enabled);
            let (action, next) = enabled
                .into_iter()
                .find_map(|a| {
                    let next = actions::apply(&m.cfg, &state, a)?;
                    let seen = if bounded {
                        next
                    } else {
                        recovery_view(self.cfg, next)
                    };
                    (fingerprint(&seen) == want_fp).then_some((a, next))
                })
                .expect("every node on a parent chain has an action from its parent");
            trace.push((next, Some(action)));
            state = next;
        }
        trace
    }
}

/// Searches the model under `cfg`.
pub fn search(cfg: Config, opts: SearchOptions<'_>) -> Graph {
    let model = PartitionModel::new(cfg);
    let recovery = recovery_config(&cfg, opts.recovery_epochs);
    let properties = opts.properties.unwrap_or_else(|| model.properties());
    assert!(properties.len() <= 64, "property bits fit a u64");
    let index_of = |name: &str| {
        properties
            .iter()
            .position(|p| p.name == name && p.expectation == Expectation::Always)
            .unwrap_or_else(|| panic!("no always-property named {name:?}"))
    };
    // The properties that end the search, and whether all must break.
    let (until, all): (Vec<usize>, bool) = match opts.until {
        Until::Exhausted => (vec![], true),
        Until::AllBroken(names) => (names.iter().map(|n| index_of(n)).collect(), true),
        Until::AnyBroken => (
            (0..properties.len())
                .filter(|&i| properties[i].expectation == Expectation::Always)
                .collect(),
            false,
        ),
    };
    let start = Instant::now();
    let mut g = Graph {
        cfg,
        recovery,
        fps: Vec::new(),
        parent: Vec::new(),
        depth: Vec::new(),
        flags: Vec::new(),
        edge_start: Vec::new(),
        edge_len: Vec::new(),
        edges: Vec::new(),
        index: FingerprintTable::default(),
        first: vec![None; properties.len()],
        completion: Completion::Exhaustive,
        progress: SearchProgress::default(),
        keeps_progress: opts.progress.is_some(),
    };
    let init = model.init_state().representative();
    let index = std::mem::take(&mut g.index);
    let root = g.add_node(
        &index,
        fingerprint_of_representative(&init),
        None,
        flag::IN_BOUNDS,
    );
    g.index = index;
    let ctx = Ctx {
        model: &model,
        recovery_walk: opts.recovery_walk,
        recovery: &recovery,
        properties: &properties,
        predicates: opts.progress,
    };
    let mut run = Run {
        threads: opts.threads.max(1),
        start,
        last_report: Instant::now(),
        stop: opts.stop,
        on_progress: opts.on_progress,
    };
    // Phase 1, the bounded model, level by level.
    let mut level = vec![(root, init)];
    let mut recovery_states = Vec::new();
    // The depth at which the search may stop, once known.
    let mut stop_depth: Option<u8> = None;
    while let Some(&(first, _)) = level.first() {
        if stop_depth.is_some_and(|d| g.depth(first) > d) {
            g.completion = Completion::StoppedAtCounterexample;
            break;
        }
        let mut next = Vec::new();
        if !run.expand(
            &ctx,
            &mut g,
            Phase::Bounded,
            &level,
            &mut next,
            &mut recovery_states,
        ) {
            break;
        }
        if stop_depth.is_none() && !until.is_empty() {
            let depths = until.iter().map(|&i| g.first[i].map(|n| g.depth(n)));
            stop_depth = if all {
                depths
                    .collect::<Option<Vec<u8>>>()
                    .and_then(|d| d.into_iter().max())
            } else {
                depths.flatten().min()
            };
        }
        level = next;
    }
    // Phase 2, recovery states (those phase 1 reached within bounds after
    // all were expanded there).
    if opts.progress.is_some() && g.completion == Completion::Exhaustive {
        g.progress.recovery_phase = true;
        let mut level: Vec<_> = recovery_states
            .into_iter()
            .filter(|(n, _)| !g.in_bounds(*n))
            .collect();
        while !level.is_empty() {
            let mut next = Vec::new();
            if !run.expand(
                &ctx,
                &mut g,
                Phase::Recovery,
                &level,
                &mut next,
                &mut Vec::new(),
            ) {
                break;
            }
            level = next;
        }
    }
    if let (Some(d), Completion::StoppedAtCounterexample) = (stop_depth, g.completion) {
        // Report only what broke within that depth.
        for f in &mut g.first {
            if f.is_some_and(|n| g.depth[n as usize] > d) {
                *f = None;
            }
        }
    }
    g.progress.seconds = start.elapsed().as_secs_f64();
    (run.on_progress)(&g.progress);
    g
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Bounded,
    Recovery,
}

struct Ctx<'a> {
    model: &'a PartitionModel,
    recovery_walk: RecoveryWalk,
    recovery: &'a Config,
    properties: &'a [Property<PartitionModel>],
    predicates: Option<NodePredicates>,
}

/// The search's threads, limits and reporting.
struct Run<'a> {
    threads: usize,
    start: Instant,
    last_report: Instant,
    stop: &'a (dyn Fn(&SearchProgress) -> bool + Sync),
    on_progress: &'a mut dyn FnMut(&SearchProgress),
}

impl Run<'_> {
    /// Expands `level` batch by batch into the graph; new states go to
    /// `next` (or, beyond the epoch bound in phase 1, to `recovery`).
    /// False when stopped by a limit.
    fn expand(
        &mut self,
        ctx: &Ctx<'_>,
        g: &mut Graph,
        phase: Phase,
        level: &[(NodeId, State)],
        next: &mut Vec<(NodeId, State)>,
        recovery: &mut Vec<(NodeId, State)>,
    ) -> bool {
        // The index leaves the graph while the level runs: the expansion
        // threads read it while the merge writes it and the rest of the graph.
        let mut index = std::mem::take(&mut g.index);
        // Merged parts go back to `spare`, so that their buffers are
        // reused: fresh ones cost a page fault per page, batch after batch.
        let mut spare: Vec<Expanded> = Vec::new();
        let mut merge = |g: &mut Graph,
                         index: &FingerprintTable,
                         parts: Vec<Expanded>,
                         spare: &mut Vec<Expanded>| {
            for mut part in parts {
                g.merge(ctx, index, phase, &part, next, recovery);
                part.clear();
                spare.push(part);
            }
        };
        // Expanded, not yet merged: merged while the next batch expands.
        let mut pending: Vec<Expanded> = Vec::new();
        let mut completed = true;
        for batch in level.chunks(BATCH * self.threads) {
            g.progress.seconds = self.start.elapsed().as_secs_f64();
            if (self.stop)(&g.progress) {
                g.completion = Completion::Interrupted;
                completed = false;
                break;
            }
            if self.last_report.elapsed().as_secs_f64() >= 1.0 {
                self.last_report = Instant::now();
                (self.on_progress)(&g.progress);
            }
            // Room for every state the pending merge may add, made while no
            // thread reads the index.
            index.reserve(pending.iter().map(|p| p.successors.len()).sum());
            let index = &index;
            pending = if self.threads == 1 {
                merge(g, index, std::mem::take(&mut pending), &mut spare);
                let out = spare.pop().unwrap_or_default();
                vec![expand_chunk(ctx, index, phase, batch, out)]
            } else {
                let chunk = batch.len().div_ceil(self.threads).max(1);
                std::thread::scope(|scope| {
                    let workers: Vec<_> = batch
                        .chunks(chunk)
                        .map(|c| {
                            let out = spare.pop().unwrap_or_default();
                            scope.spawn(move || expand_chunk(ctx, index, phase, c, out))
                        })
                        .collect();
                    merge(g, index, std::mem::take(&mut pending), &mut spare);
                    workers
                        .into_iter()
                        .map(|w| w.join().expect("an expansion thread panicked"))
                        .collect()
                })
            };
        }
        index.reserve(pending.iter().map(|p| p.successors.len()).sum());
        merge(g, &index, pending, &mut spare);
        g.index = index;
        completed
    }
}

fn expand_chunk(
    ctx: &Ctx<'_>,
    index: &FingerprintTable,
    phase: Phase,
    chunk: &[(NodeId, State)],
    mut out: Expanded,
) -> Expanded {
    let bound = ctx.model.cfg.max_epoch;
    let mut enabled = Vec::new();
    let mut local: Vec<(u64, State, bool, bool)> = Vec::new();
    let mut known: Vec<NodeId> = Vec::new();
    for (node, s) in chunk {
        let mut properties = 0u64;
        if phase == Phase::Bounded {
            for (i, p) in ctx.properties.iter().enumerate() {
                let holds = (p.condition)(ctx.model, s);
                let noteworthy = match p.expectation {
                    Expectation::Always => !holds,
                    _ => holds,
                };
                if noteworthy {
                    properties |= 1 << i;
                }
            }
        }
        let mut flags = 0;
        if let Some(pr) = &ctx.predicates {
            let cfg = &ctx.model.cfg;
            flags = witness::goals_of(cfg, pr, s);
            if (pr.offline)(cfg, s) {
                flags |= flag::OFFLINE;
            }
        }
        let first = out.successors.len();
        if phase == Phase::Recovery {
            if let Some(pr) = &ctx.predicates {
                // A walk that meets every goal spares the expansion.
                let every = flag::HEALTHY | flag::ACKED_REPLICATED;
                let goals = match ctx.recovery_walk {
                    RecoveryWalk::Greedy => {
                        witness::goals_reached(&ctx.model.cfg, ctx.recovery, pr, s)
                    }
                    RecoveryWalk::Off => 0,
                    RecoveryWalk::ClaimsEveryGoal => every,
                };
                flags |= reaches(goals);
                if goals == every {
                    out.walked += 1;
                    out.expansions.push(Expansion {
                        node: *node,
                        properties,
                        flags,
                        successors: first..first,
                    });
                    continue;
                }
            }
        }
        enabled.clear();
        // The recovery configuration lists every action the bounded one
        // does, and those that need an epoch beyond the bound.
        let cfg = if ctx.predicates.is_some() {
            ctx.recovery
        } else {
            &ctx.model.cfg
        };
        actions::enabled(cfg, s, &mut enabled);
        for &a in &enabled {
            let fault = a.is_fault(s);
            if phase == Phase::Recovery && !heals(s, a) {
                continue;
            }
            let next = actions::successor(cfg, s, a);
            let in_bounds = phase == Phase::Bounded && within(bound, &next);
            if !in_bounds && !heals(s, a) {
                continue;
            }
            let next = if in_bounds {
                next
            } else {
                recovery_view(ctx.model.cfg, next)
            };
            let rep = next.representative();
            let fp = fingerprint_of_representative(&rep);
            index.prefetch(fp);
            local.push((fp, rep, fault, in_bounds));
        }
        // Looked up together, so that the memory accesses overlap.
        known.clear();
        known.extend(
            local
                .iter()
                .map(|(fp, ..)| index.get(*fp).unwrap_or(UNKNOWN)),
        );
        for ((fp, rep, fault, in_bounds), &node) in local.drain(..).zip(&known) {
            let needs_state = node == UNKNOWN || (in_bounds && node & IN_BOUNDS_TAG == 0);
            let node = if node == UNKNOWN {
                node
            } else {
                node & !IN_BOUNDS_TAG
            };
            let state = if needs_state {
                out.states.push(rep);
                out.states.len() as u32 - 1
            } else {
                UNKNOWN
            };
            out.successors.push(Successor {
                fp,
                node,
                state,
                fault,
                in_bounds,
            });
        }
        out.expansions.push(Expansion {
            node: *node,
            properties,
            flags,
            successors: first..out.successors.len(),
        });
    }
    out
}

/// The `REACHES_*` flags of goals a walk met.
fn reaches(goals: u8) -> u8 {
    let mut f = 0;
    if goals & flag::HEALTHY != 0 {
        f |= flag::REACHES_HEALTHY;
    }
    if goals & flag::ACKED_REPLICATED != 0 {
        f |= flag::REACHES_ACKED_REPLICATED;
    }
    f
}

/// Whether the progress check follows `a` from `s` to `next` under an epoch
/// bound of `bound` ([`Graph::is_edge`]; `lasso.rs` walks the same edges).
pub fn fault_free_edge(bound: u8, s: &State, a: Action, next: &State) -> bool {
    if within(bound, s) && within(bound, next) {
        !a.is_fault(s)
    } else {
        heals(s, a)
    }
}

/// Whether a state is within the run's epoch bound.
fn within(bound: u8, s: &State) -> bool {
    s.controller.epoch.is_none_or(|e| e <= bound)
}

/// The steps recovery beyond the epoch bound takes: every fault-free step
/// but new writes, flushes, ISR shrinks and leader moves (a clean election
/// while the controller still names a leader), none of which a partition
/// needs to heal. A path through them is a real fault-free path, so a state
/// shown to heal this way does heal.
pub fn heals(s: &State, a: Action) -> bool {
    if a.is_fault(s) {
        return false;
    }
    match a {
        Action::Produce { .. }
        | Action::Flush { .. }
        | Action::CheckpointHw { .. }
        | Action::LeaderShrinkIsr { .. } => false,
        Action::ControllerElectLeader { .. } => s.controller.leader.is_none(),
        _ => true,
    }
}

/// A recovery state as recovery sees it: what no healing step reads and no
/// goal asks about is dropped (which records were ever visible, recovery
/// points, the fault and leader-move counters, set as spent), so that
/// recovery states differing only there are one. Healing steps take no
/// fault, no flush and no leader move, and publishing visibility only
/// writes history.
pub fn recovery_view(cfg: Config, mut s: State) -> State {
    for h in &mut s.records {
        h.visible = None;
    }
    for r in 0..s.n {
        s.replica_mut(r).recovery_point = 0;
        s.replica_mut(r).hw_checkpoint = 0;
    }
    s.clean_crashes = cfg.clean_crashes;
    s.unclean_crashes = cfg.unclean_crashes;
    s.leader_moves = cfg.leader_moves;
    s
}

impl Graph {
    fn add_node(
        &mut self,
        index: &FingerprintTable,
        fp: u64,
        parent: Option<NodeId>,
        flags: u8,
    ) -> NodeId {
        let n = NodeId::try_from(self.fps.len())
            .ok()
            .filter(|n| n & IN_BOUNDS_TAG == 0)
            .expect("fewer than 2^31 states");
        self.fps.push(fp);
        self.parent.push(parent.unwrap_or(n));
        self.depth
            .push(parent.map_or(0, |p| self.depth[p as usize].saturating_add(1)));
        self.flags.push(flags);
        self.edge_start.push(0);
        self.edge_len.push(0);
        index.insert(fp, index_value(n, flags & flag::IN_BOUNDS != 0));
        if flags & flag::IN_BOUNDS != 0 {
            self.progress.unique_states += 1;
            self.progress.max_depth = self
                .progress
                .max_depth
                .max(u64::from(self.depth[n as usize]));
        } else {
            self.progress.recovery_states += 1;
        }
        n
    }

    fn merge(
        &mut self,
        ctx: &Ctx<'_>,
        index: &FingerprintTable,
        phase: Phase,
        batch: &Expanded,
        next: &mut Vec<(NodeId, State)>,
        recovery: &mut Vec<(NodeId, State)>,
    ) {
        let keep_edges = ctx.predicates.is_some();
        self.progress.recovery_walked += batch.walked;
        for (i, e) in batch.expansions.iter().enumerate() {
            let n = e.node;
            self.flags[n as usize] |= e.flags | flag::EXPANDED;
            for (i, first) in self.first.iter_mut().enumerate() {
                if e.properties & (1 << i) != 0 && first.is_none() {
                    *first = Some(n);
                }
            }
            let edge_start = u32::try_from(self.edges.len()).expect("fewer than 2^32 edges");
            let mut edge_len = 0u16;
            let successors = &batch.successors[e.successors.clone()];
            // The lookups of the next state's new successors start now.
            if let Some(next) = batch.expansions.get(i + 1) {
                for s in &batch.successors[next.successors.clone()] {
                    if s.node == UNKNOWN {
                        index.prefetch(s.fp);
                    }
                }
            }
            for s in successors {
                if s.in_bounds {
                    self.progress.transitions += 1;
                }
                // A state new to the worker may have been added since, by
                // an earlier state of this batch.
                let known = match s.node {
                    UNKNOWN => index.get(s.fp).map(|v| v & !IN_BOUNDS_TAG),
                    m => Some(m),
                };
                let target = match known {
                    Some(m) => {
                        if s.in_bounds && !self.in_bounds(m) {
                            // A recovery state the bounded model reaches
                            // after all (phase 1 never expands them).
                            self.flags[m as usize] |= flag::IN_BOUNDS;
                            index.insert(s.fp, index_value(m, true));
                            self.parent[m as usize] = n;
                            self.depth[m as usize] = self.depth[n as usize].saturating_add(1);
                            self.progress.unique_states += 1;
                            self.progress.recovery_states -= 1;
                            next.push((m, batch.states[s.state as usize]));
                        }
                        m
                    }
                    None => {
                        let flags = if s.in_bounds { flag::IN_BOUNDS } else { 0 };
                        let m = self.add_node(index, s.fp, Some(n), flags);
                        let state = batch.states[s.state as usize];
                        if s.in_bounds || phase == Phase::Recovery {
                            next.push((m, state));
                        } else {
                            recovery.push((m, state));
                        }
                        m
                    }
                };
                if keep_edges && !s.fault {
                    self.edges.push(target);
                    edge_len += 1;
                }
            }
            self.edge_start[n as usize] = edge_start;
            self.edge_len[n as usize] = edge_len;
        }
    }
}
