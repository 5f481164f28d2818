//! The search: a breadth-first search of a model into its state graph
//! (`graph.rs`).
//!
//! It runs over the symmetry-reduced state space (each state stored as its
//! representative's fingerprint, with a parent pointer and its depth). In
//! one pass it evaluates every property, so the first state found breaking
//! one is at the least depth and its path is a shortest counterexample; and
//! it keeps the graph's fault-free edges, which the progress check
//! (`progress.rs`) walks backwards.
//!
//! The progress check asks what the system can still do from each state
//! if no further fault happens. A model's bounds would make every state
//! whose counter is spent look stuck, so recovery runs under a model with
//! the bounds relaxed ([`Checkable::recovery_model`]): the search's first
//! phase explores the bounded model (every action, states within the
//! bounds); fault-free steps that go beyond them lead to *recovery states*,
//! which a second phase walks (`recovery_walk.rs`) or, where one walk does
//! not show them to reach every goal, expands with healing steps only
//! ([`Checkable::heals`]). Recovery states are never checked themselves:
//! only the bounded model's states must satisfy the properties.
//!
//! The expansion of a batch of states (enabled actions, successors, their
//! representatives and fingerprints, the properties of the states expanded)
//! runs on several threads; merging the results into the graph is
//! sequential, in queue order, so the graph and every answer are the same
//! whatever the thread count. The merge of one batch runs while the next
//! batch expands (`fingerprint_table.rs` lets the expansion read the index
//! the merge writes): the merge is a fifth of the work, and two cores would
//! otherwise wait for it.

use crate::fingerprint_table::FingerprintTable;
use crate::graph::{self, flag, index_value, Graph, NodeId, IN_BOUNDS_TAG, MAX_GOALS, NODE_BYTES};
use crate::memory::{bytes_of, Budget, Footprint, OverBudget, Step};
use crate::queue::{Queue, Slice, States};
use crate::recovery_walk::{self, RecoveryWalk, WalkMemo};
use crate::{fingerprint_of_representative, Checkable, Goal};
use stateright::{Expectation, Property};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// What to search, and when to stop.
pub struct SearchOptions<'a, M: Checkable> {
    pub threads: usize,
    /// Keep the fault-free edges and explore recovery states (the progress
    /// check needs them; a run that stops early does not).
    pub progress: Option<ProgressOptions<M>>,
    /// The properties to evaluate (None: the model's own); `Graph::first`
    /// follows their order.
    pub properties: Option<Vec<Property<M>>>,
    /// When to stop early: once the level at which these always-properties
    /// have broken is finished; only properties broken within that depth
    /// are then reported.
    pub until: Until<'a>,
    /// Asked between batches: true stops the search (time or state limit,
    /// Ctrl-C); the graph is then incomplete.
    pub stop: &'a (dyn Fn(&SearchProgress) -> bool + Sync),
    /// Called about once a second.
    pub on_progress: &'a mut dyn FnMut(&SearchProgress),
    /// The memory the run may use: the search stops before a step that
    /// would not fit (`memory.rs`). None: no limit.
    pub budget: Option<Budget>,
    /// How many states the search is expected to find (a hint, from an
    /// earlier run): its index is sized for them from the start, sparing
    /// the growths on the way (each copies every entry while the threads
    /// wait) and the peak of the last (old and new index held together).
    /// A wrong hint costs memory or a growth, never an answer; ignored
    /// when the sized index would not fit the budget.
    pub expected_states: Option<u64>,
}

/// What the search records for the progress check.
pub struct ProgressOptions<M: Checkable> {
    /// The model recovery states run under.
    pub recovery: M,
    /// The goals recorded per state (at most [`MAX_GOALS`]).
    pub goals: Vec<Goal<M>>,
    /// How recovery states are shown to reach the goals.
    pub walk: RecoveryWalk,
}

impl<M: Checkable> ProgressOptions<M> {
    /// The model's own: its recovery model and goals, and greedy walks.
    pub fn of(model: &M) -> Self {
        ProgressOptions {
            recovery: model.recovery_model(),
            goals: model.progress_goals(),
            walk: RecoveryWalk::default(),
        }
    }
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
    /// Transitions followed within the bounded model (stateright's "states",
    /// less the initial ones).
    pub transitions: u64,
    /// Distinct states of the bounded model found so far.
    pub unique_states: u64,
    /// Recovery states found so far (beyond the bounds, fault-free).
    pub recovery_states: u64,
    /// Recovery states a walk showed to reach every goal, so not expanded
    /// (`recovery_walk.rs`).
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
    /// Stopped before a step that would not fit the memory budget
    /// ([`Graph::over_budget`] says which).
    OverBudget,
}

/// One successor, as a worker computed it. The worker looks its
/// fingerprint up in the index (which the previous batch's merge may be
/// writing: what it finds is a hint, and the merge looks an unknown state up
/// again) and keeps the state itself (packed, when the model packs) only
/// where the merge may need it: a new state, or one the bounded model
/// reaches only now.
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
struct Expanded<S> {
    /// Recovery states a walk showed to reach every goal (not expanded).
    walked: u64,
    expansions: Vec<Expansion>,
    successors: Vec<Successor>,
    states: States<S>,
    /// What this part's thread learnt from its walks, kept across batches
    /// (`clear` leaves it).
    memo: WalkMemo,
}

impl<S> Default for Expanded<S> {
    fn default() -> Self {
        Expanded {
            walked: 0,
            expansions: Vec::new(),
            successors: Vec::new(),
            states: States::default(),
            memo: WalkMemo::default(),
        }
    }
}

impl<S> Expanded<S> {
    fn bytes(&self) -> u64 {
        bytes_of::<Expansion>(self.expansions.capacity())
            + bytes_of::<Successor>(self.successors.capacity())
            + self.states.capacity_bytes()
            + self.memo.bytes()
    }

    /// Empty, with its buffers kept for the next batch.
    fn clear(&mut self) {
        self.walked = 0;
        self.expansions.clear();
        self.successors.clear();
        self.states.clear();
    }
}

const BATCH: usize = 4096;

/// The parts each thread's batch is cut into in the bounded phase.
const PARTS_PER_THREAD: usize = 16;

/// Searches `model`.
pub fn search<M: Checkable>(model: &M, opts: SearchOptions<'_, M>) -> Graph<M> {
    let properties = opts.properties.unwrap_or_else(|| model.properties());
    assert!(properties.len() <= 64, "property bits fit a u64");
    if let Some(p) = &opts.progress {
        assert!(p.goals.len() <= MAX_GOALS, "goal bits fit a node's flags");
    }
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
    let keeps_progress = opts.progress.is_some();
    let (recovery, goals, walk) = match opts.progress {
        Some(p) => (p.recovery, p.goals, p.walk),
        None => (model.clone(), Vec::new(), RecoveryWalk::default()),
    };
    let mut g = Graph {
        model: model.clone(),
        recovery: recovery.clone(),
        properties: properties.clone(),
        goals: goals.clone(),
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
        keeps_progress,
        peak: Footprint::default(),
        peak_total: 0,
        over_budget: None,
    };
    // The initial states, each a root at depth 0 (stateright's checkers
    // also leave out those outside the model's boundary).
    let mut index = std::mem::take(&mut g.index);
    if let Some(n) = opts.expected_states.and_then(|n| usize::try_from(n).ok()) {
        let fits = opts
            .budget
            .is_none_or(|b| b.admits(index.growth_bytes(n) as u64 + n as u64 * NODE_BYTES));
        if fits {
            index.reserve(n);
        }
    }
    // A level is expanded a block at a time, a batch of each thread's
    // `BATCH` states (`queue.rs`).
    let threads = opts.threads.max(1);
    let block = BATCH * threads;
    let mut level = Queue::new(block);
    for init in model.init_states() {
        if !model.within_boundary(&init) {
            continue;
        }
        let rep = model.representative(&init);
        let mut packed = States::default();
        let fp = packed.push_representative(model, &init);
        assert_eq!(
            fp,
            fingerprint_of_representative(&rep),
            "a packed state's fingerprint is its representative's Hash's \
             (Checkable::pack, Checkable::pack_representative)"
        );
        if index.get(fp).is_none() {
            index.reserve(1);
            let root = g.add_node(&index, fp, None, flag::IN_BOUNDS);
            level.push(root, packed.drain().next().expect("one state"));
        }
    }
    g.index = index;
    let ctx = Ctx {
        model,
        recovery: &recovery,
        properties: &properties,
        goals: &goals,
        keeps_progress,
        walk,
    };
    let mut run = Run {
        threads,
        start,
        last_report: Instant::now(),
        stop: opts.stop,
        on_progress: opts.on_progress,
        budget: opts.budget,
    };
    // Phase 1, the bounded model, level by level.
    let mut recovery_states = Queue::new(block);
    // The depth at which the search may stop, once known.
    let mut stop_depth: Option<u8> = None;
    while let Some(first) = level.first_node() {
        if stop_depth.is_some_and(|d| g.depth(first) > d) {
            g.completion = Completion::StoppedAtCounterexample;
            break;
        }
        let mut next = Queue::new(block);
        if !run.expand(
            &ctx,
            &mut g,
            Phase::Bounded,
            &mut level,
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
        crate::queue::release_freed();
    }
    // Phase 2, recovery states (those phase 1 reached within bounds after
    // all were expanded there).
    if keeps_progress && g.completion == Completion::Exhaustive {
        g.progress.recovery_phase = true;
        let mut level = recovery_states.retain(block, |n| !g.in_bounds(n));
        while !level.is_empty() {
            let mut next = Queue::new(block);
            if !run.expand(
                &ctx,
                &mut g,
                Phase::Recovery,
                &mut level,
                &mut next,
                &mut Queue::new(block),
            ) {
                break;
            }
            level = next;
            crate::queue::release_freed();
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

/// What every expansion thread reads.
struct Ctx<'a, M: Checkable> {
    model: &'a M,
    recovery: &'a M,
    properties: &'a [Property<M>],
    goals: &'a [Goal<M>],
    /// Record goals, keep fault-free edges, and list actions under the
    /// recovery model (which lists every action the bounded one does, and
    /// those that lead beyond the bounds).
    keeps_progress: bool,
    walk: RecoveryWalk,
}

/// The search's threads, limits and reporting.
struct Run<'a> {
    threads: usize,
    start: Instant,
    last_report: Instant,
    stop: &'a (dyn Fn(&SearchProgress) -> bool + Sync),
    on_progress: &'a mut dyn FnMut(&SearchProgress),
    budget: Option<Budget>,
}

/// The queues a level's expansion holds: the states being expanded (those
/// of the level's blocks not yet freed), those found for the next level
/// and for recovery (by their length, as the graph's arrays), and the
/// expansion's buffers (by their capacity: they are filled, cleared and
/// filled again).
struct Queues<'q, S> {
    level: &'q Queue<S>,
    next: &'q Queue<S>,
    recovery: &'q Queue<S>,
    pending: &'q [Expanded<S>],
    spare: &'q [Expanded<S>],
}

impl<S> Queues<'_, S> {
    /// What the next batch's expansion adds to the buffers: it fills the
    /// spare ones, and is taken to be as large as the pending one (batches
    /// of a level are alike).
    fn buffer_growth(&self) -> u64 {
        let bytes = |parts: &[Expanded<S>]| parts.iter().map(Expanded::bytes).sum::<u64>();
        bytes(self.pending).saturating_sub(bytes(self.spare))
    }

    /// What the pending merge may add to the queues: every state it holds.
    fn queue_growth(&self) -> u64 {
        self.pending
            .iter()
            .map(|p| Queue::bytes_for(&p.states))
            .sum()
    }

    fn bytes(&self) -> u64 {
        self.level.bytes()
            + self.next.bytes()
            + self.recovery.bytes()
            + self
                .pending
                .iter()
                .chain(self.spare)
                .map(Expanded::bytes)
                .sum::<u64>()
    }
}

impl Run<'_> {
    /// Makes room in the index for the pending merge, which adds at most
    /// `adding` states and edges, if what the search would then hold (the
    /// index, grown; the graph and the queues with those states; the next
    /// batch's buffers) fits the budget. If it does not, nothing grows: the
    /// search is marked [`Completion::OverBudget`] and false is returned
    /// (the pending merge must then be dropped: it has no room, so the
    /// search stops as if before that batch).
    fn make_room<M: Checkable>(
        &mut self,
        g: &mut Graph<M>,
        index: &mut FingerprintTable,
        queues: Queues<'_, M::State>,
    ) -> bool {
        // Every successor of the pending merge may be a new state.
        let adding: usize = queues.pending.iter().map(|p| p.successors.len()).sum();
        let held = Footprint {
            queue: queues.bytes(),
            ..g.footprint(index)
        };
        g.peak = g.peak.max(held);
        g.peak_total = g.peak_total.max(held.total());
        let edges = if g.keeps_progress { adding } else { 0 };
        // The grown index is allocated, and zeroed, while the old one is
        // still held; each new state takes a node and a place in a queue
        // (the merge queues only states the expansion kept).
        let grown = Footprint {
            index: index.growth_bytes(adding) as u64,
            nodes: adding as u64 * NODE_BYTES,
            edges: bytes_of::<NodeId>(edges),
            queue: queues.queue_growth() + queues.buffer_growth(),
        };
        let at_most = held.total() + grown.total();
        if let Some(budget) = self.budget.filter(|b| !b.admits(at_most)) {
            g.completion = Completion::OverBudget;
            g.over_budget = Some(OverBudget {
                budget: budget.bytes,
                held,
                next_step: at_most,
                next_step_budget: Budget::needed_for(at_most),
                step: Step::Search,
            });
            return false;
        }
        index.reserve(adding);
        true
    }

    /// Expands `level` batch by batch (block by block, each freed once
    /// expanded) into the graph; new states go to `next` (or, beyond the
    /// bounds in phase 1, to `recovery`). False when stopped by a limit.
    fn expand<M: Checkable>(
        &mut self,
        ctx: &Ctx<'_, M>,
        g: &mut Graph<M>,
        phase: Phase,
        level: &mut Queue<M::State>,
        next: &mut Queue<M::State>,
        recovery: &mut Queue<M::State>,
    ) -> bool {
        // The index leaves the graph while the level runs: the expansion
        // threads read it while the merge writes it and the rest of the graph.
        let mut index = std::mem::take(&mut g.index);
        // Merged parts go back to `spare`, so that their buffers are
        // reused: fresh ones cost a page fault per page, batch after batch.
        let mut spare: Vec<Expanded<M::State>> = Vec::new();
        let merge = |g: &mut Graph<M>,
                     index: &FingerprintTable,
                     parts: Vec<Expanded<M::State>>,
                     spare: &mut Vec<Expanded<M::State>>,
                     next: &mut Queue<M::State>,
                     recovery: &mut Queue<M::State>| {
            for mut part in parts {
                merge_part(g, ctx, index, phase, &mut part, next, recovery);
                part.clear();
                spare.push(part);
            }
        };
        // Expanded, not yet merged: merged while the next batch expands.
        let mut pending: Vec<Expanded<M::State>> = Vec::new();
        let mut completed = true;
        while let Some(block) = level.front() {
            let batch = block.slice();
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
            let queues = Queues {
                level,
                next,
                recovery,
                pending: &pending,
                spare: &spare,
            };
            if !self.make_room(g, &mut index, queues) {
                pending.clear();
                completed = false;
                break;
            }
            let index = &index;
            pending = if self.threads == 1 {
                merge(
                    g,
                    index,
                    std::mem::take(&mut pending),
                    &mut spare,
                    next,
                    recovery,
                );
                let out = spare.pop().unwrap_or_default();
                vec![expand_chunk(ctx, index, phase, batch, out)]
            } else {
                // Bounded states: small parts, taken in turn by the threads
                // and by this one once its merge is done, so that no core
                // waits for the slowest of a few large parts. Recovery
                // states: a part per thread, so that each walk memo (kept
                // by its part) meets the same states whatever the timing,
                // and the walks' answers do not depend on it. Parts are
                // merged in batch order, whoever expanded them.
                let taken_in_turn = phase == Phase::Bounded;
                let per_thread = if taken_in_turn { PARTS_PER_THREAD } else { 1 };
                let size = batch.len().div_ceil(self.threads * per_thread);
                let parts = batch.chunks(size);
                let outs: Vec<_> = parts
                    .iter()
                    .map(|_| Mutex::new(spare.pop().unwrap_or_default()))
                    .collect();
                let expand_part = |i: usize| {
                    let mut out = outs[i].lock().expect("no expansion thread panicked");
                    let part = parts[i].clone();
                    *out = expand_chunk(ctx, index, phase, part, std::mem::take(&mut *out));
                };
                let taken = AtomicUsize::new(0);
                let work = || loop {
                    let i = taken.fetch_add(1, Ordering::Relaxed);
                    if i >= parts.len() {
                        break;
                    }
                    expand_part(i);
                };
                std::thread::scope(|scope| {
                    let workers: Vec<_> = if taken_in_turn {
                        (1..self.threads).map(|_| scope.spawn(work)).collect()
                    } else {
                        (0..parts.len())
                            .map(|i| scope.spawn(move || expand_part(i)))
                            .collect()
                    };
                    merge(
                        g,
                        index,
                        std::mem::take(&mut pending),
                        &mut spare,
                        next,
                        recovery,
                    );
                    if taken_in_turn {
                        work();
                    }
                    for w in workers {
                        w.join().expect("an expansion thread panicked");
                    }
                });
                outs.into_iter()
                    .map(|m| m.into_inner().expect("no expansion thread panicked"))
                    .collect()
            };
            // Expanded: what the merge needs is in `pending`.
            level.pop_front();
        }
        let queues = Queues {
            level,
            next,
            recovery,
            pending: &pending,
            spare: &spare,
        };
        if g.completion == Completion::OverBudget || self.make_room(g, &mut index, queues) {
            merge(g, &index, pending, &mut spare, next, recovery);
        } else {
            completed = false;
        }
        g.index = index;
        completed
    }
}

fn expand_chunk<M: Checkable>(
    ctx: &Ctx<'_, M>,
    index: &FingerprintTable,
    phase: Phase,
    chunk: Slice<'_, M::State>,
    mut out: Expanded<M::State>,
) -> Expanded<M::State> {
    let model = ctx.model;
    // Actions are listed under the recovery model when progress is kept.
    let lister = if ctx.keeps_progress {
        ctx.recovery
    } else {
        model
    };
    let every = graph::all_goals(ctx.goals.len());
    let mut enabled = Vec::new();
    // A state's successors: fingerprint, fault, in bounds; and their
    // representatives, packed when the model packs. They are looked up in
    // the index one state later, once the next state's successors are
    // built, so that their prefetches have had that long to arrive (on one
    // thread, `safe` in 75.1 and 68.8 s against 78.7 and 71.6 s).
    let mut built = Built::default();
    let mut waiting: Option<(Expansion, Built<M::State>)> = None;
    let mut known: Vec<NodeId> = Vec::new();
    for (node, s) in chunk.iter(model) {
        let s: &M::State = &s;
        let properties = if phase == Phase::Bounded {
            noteworthy_properties(model, ctx.properties, s)
        } else {
            0
        };
        let mut flags = 0;
        if ctx.keeps_progress {
            flags = progress_flags(model, ctx.goals, s);
        }
        if phase == Phase::Recovery {
            // A walk that meets every goal spares the expansion.
            let goals = match ctx.walk {
                RecoveryWalk::Greedy | RecoveryWalk::MemoOfWholeWalk => {
                    recovery_walk::goals_reached(
                        model,
                        ctx.recovery,
                        ctx.goals,
                        s,
                        &mut out.memo,
                        ctx.walk,
                        &mut enabled,
                    )
                }
                RecoveryWalk::Off => 0,
                RecoveryWalk::ClaimsEveryGoal => every,
            };
            flags |= goals;
            if goals == every {
                if let Some((e, b)) = waiting.take() {
                    built = look_up(index, &mut out, &mut known, e, b);
                }
                out.walked += 1;
                let first = out.successors.len();
                out.expansions.push(Expansion {
                    node,
                    properties,
                    flags,
                    successors: first..first,
                });
                continue;
            }
        }
        enabled.clear();
        lister.actions(s, &mut enabled);
        for a in &enabled {
            let fault = model.is_fault(s, a);
            if phase == Phase::Recovery && !model.heals(s, a) {
                continue;
            }
            // Borrowed, not moved out: a state is large, and most are
            // only read here (their representative is what is kept).
            let successor = lister.successor(s, a.clone());
            let Some(next) = successor.as_ref() else {
                continue;
            };
            // stateright's checkers skip a step out of the boundary too.
            if !model.within_boundary(next) {
                continue;
            }
            let in_bounds = phase == Phase::Bounded && model.within_bounds(next);
            if !in_bounds && !model.heals(s, a) {
                continue;
            }
            let fp = if in_bounds {
                built.reps.push_representative(model, next)
            } else {
                built
                    .reps
                    .push_representative(model, &model.recovery_view(next.clone()))
            };
            index.prefetch(fp);
            built.local.push((fp, fault, in_bounds));
        }
        let expansion = Expansion {
            node,
            properties,
            flags,
            successors: 0..0,
        };
        let spare = match waiting.replace((expansion, built)) {
            Some((e, b)) => look_up(index, &mut out, &mut known, e, b),
            None => Built::default(),
        };
        built = spare;
    }
    if let Some((e, b)) = waiting.take() {
        look_up(index, &mut out, &mut known, e, b);
    }
    out
}

/// One state's successors, built and prefetched, not yet looked up.
struct Built<S> {
    /// Fingerprint, fault, in bounds.
    local: Vec<(u64, bool, bool)>,
    reps: States<S>,
}

impl<S> Default for Built<S> {
    fn default() -> Self {
        Built {
            local: Vec::new(),
            reps: States::default(),
        }
    }
}

/// Looks one state's successors up and appends them, and its expansion,
/// to `out`; gives back `built`, emptied, for reuse.
fn look_up<S>(
    index: &FingerprintTable,
    out: &mut Expanded<S>,
    known: &mut Vec<NodeId>,
    mut e: Expansion,
    mut built: Built<S>,
) -> Built<S> {
    let first = out.successors.len();
    // Looked up together, so that the memory accesses overlap.
    known.clear();
    known.extend(
        built
            .local
            .iter()
            .map(|(fp, ..)| index.get(*fp).unwrap_or(UNKNOWN)),
    );
    let successors = built
        .local
        .drain(..)
        .zip(known.iter())
        .zip(built.reps.drain());
    for (((fp, fault, in_bounds), &node), rep) in successors {
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
    built.reps.clear();
    e.successors = first..out.successors.len();
    out.expansions.push(e);
    built
}

/// Merges one expanded part into the graph, in batch order.
fn merge_part<M: Checkable>(
    g: &mut Graph<M>,
    ctx: &Ctx<'_, M>,
    index: &FingerprintTable,
    phase: Phase,
    batch: &mut Expanded<M::State>,
    next: &mut Queue<M::State>,
    recovery: &mut Queue<M::State>,
) {
    g.progress.recovery_walked += batch.walked;
    // The states the merge keeps are moved out (or their packed bytes
    // copied), not cloned. Successors number their states in the order the
    // merge meets them, so one pass over the batch's states finds each
    // (those the merge does not need, found meanwhile by an earlier state
    // of the batch, are passed over).
    let mut states = batch.states.drain().enumerate();
    let mut take = |i: u32| {
        states
            .find(|(j, _)| *j == i as usize)
            .map(|(_, s)| s)
            .expect("successors' states are merged in the order they were found")
    };
    for (i, e) in batch.expansions.iter().enumerate() {
        let n = e.node;
        g.flags[n as usize] |= e.flags | flag::EXPANDED;
        for (i, first) in g.first.iter_mut().enumerate() {
            if e.properties & (1 << i) != 0 && first.is_none() {
                *first = Some(n);
            }
        }
        let edge_start = u32::try_from(g.edges.len()).expect("fewer than 2^32 edges");
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
                g.progress.transitions += 1;
            }
            // A state new to the worker may have been added since, by
            // an earlier state of this batch.
            let known = match s.node {
                UNKNOWN => index.get(s.fp).map(|v| v & !IN_BOUNDS_TAG),
                m => Some(m),
            };
            let target = match known {
                Some(m) => {
                    if s.in_bounds && !g.in_bounds(m) {
                        // A recovery state the bounded model reaches
                        // after all (phase 1 never expands them).
                        g.flags[m as usize] |= flag::IN_BOUNDS;
                        index.insert(s.fp, index_value(m, true));
                        g.parent[m as usize] = n;
                        g.depth[m as usize] = g.depth[n as usize].saturating_add(1);
                        g.progress.unique_states += 1;
                        g.progress.recovery_states -= 1;
                        next.push(m, take(s.state));
                    }
                    m
                }
                None => {
                    let flags = if s.in_bounds { flag::IN_BOUNDS } else { 0 };
                    let m = g.add_node(index, s.fp, Some(n), flags);
                    let state = take(s.state);
                    if s.in_bounds || phase == Phase::Recovery {
                        next.push(m, state);
                    } else {
                        recovery.push(m, state);
                    }
                    m
                }
            };
            if ctx.keeps_progress && !s.fault {
                g.edges.push(target);
                edge_len += 1;
            }
        }
        g.edge_start[n as usize] = edge_start;
        g.edge_len[n as usize] = edge_len;
    }
}

/// The bits of the properties noteworthy in `s`: an always-property that
/// breaks, a sometimes-property that is reached.
pub(crate) fn noteworthy_properties<M: Checkable>(
    model: &M,
    properties: &[Property<M>],
    s: &M::State,
) -> u64 {
    let mut bits = 0u64;
    for (i, p) in properties.iter().enumerate() {
        let holds = (p.condition)(model, s);
        let noteworthy = match p.expectation {
            Expectation::Always => !holds,
            _ => holds,
        };
        if noteworthy {
            bits |= 1 << i;
        }
    }
    bits
}

/// A node's progress flags: the goals `s` meets, and whether it is exempt.
pub(crate) fn progress_flags<M: Checkable>(model: &M, goals: &[Goal<M>], s: &M::State) -> u8 {
    let mut flags = recovery_walk::goals_of(model, goals, s);
    if model.exempt(s) {
        flags |= flag::EXEMPT;
    }
    flags
}
