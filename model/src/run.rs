//! One checker run: the chosen search, progress while it runs, a verdict per
//! property (safety, sometimes, and progress), the shortest counterexample of
//! each broken property, and whether all of that is what the preset expects.

use crate::actions::Action;
use crate::config::Config;
use crate::model::{PartitionModel, Trace};
use crate::presets::Expect;
use crate::progress;
use crate::render;
use crate::state::State;
use highwater_checker::distributed::{self, Cluster, DistributedOptions};
use highwater_checker::memory::{self, Budget};
use highwater_checker::search::{self, Completion, ProgressOptions, SearchOptions};
use highwater_checker::search::{SearchProgress, Until};
use highwater_checker::shortest;
use highwater_checker::Outcome as CheckOutcome;
use serde::Serialize;
use stateright::{Checker, Expectation, HasDiscoveries, Model, UniformChooser};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How to search. In JSON an object with a `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Search {
    /// highwater's own exhaustive breadth-first search with symmetry
    /// reduction (the default): safety, shortest counterexamples and the
    /// progress check in one pass (the engine, `checker/`: `search.rs`,
    /// `progress.rs`).
    Graph,
    /// stateright's exhaustive depth-first search with symmetry reduction
    /// (no progress check).
    Dfs,
    /// stateright's exhaustive breadth-first search (no symmetry reduction,
    /// no progress check).
    Bfs,
    /// Random walks: finds counterexamples fast, proves nothing.
    Simulate { seed: u64, max_depth: usize },
}

impl Search {
    pub fn exhaustive(self) -> bool {
        !matches!(self, Search::Simulate { .. })
    }
}

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub threads: usize,
    pub search: Search,
    /// Stop after this long (any search; a simulation never ends by itself).
    pub time_limit: Option<Duration>,
    /// Stop after this many distinct states (any search).
    pub max_states: Option<u64>,
    /// Stop at a counterexample instead of checking every property.
    pub stop_at: StopAt,
    /// Set (by Ctrl-C) to stop and report what was found so far.
    pub interrupt: Option<&'static AtomicBool>,
    /// The memory the run may use (default search, one process): it stops
    /// before a step that would not fit (`checker/src/memory.rs`).
    pub memory_budget: Option<Budget>,
    /// How many states the run is known to find (a preset's measured
    /// count): the search sizes its index for them from the start.
    pub expected_states: Option<u64>,
}

impl RunOptions {
    /// `search` on `threads` threads, to the end, with no limits.
    pub fn new(threads: usize, search: Search) -> RunOptions {
        RunOptions {
            threads,
            search,
            time_limit: None,
            max_states: None,
            stop_at: StopAt::Never,
            interrupt: None,
            memory_budget: None,
            expected_states: None,
        }
    }

    /// Whether a limit or an interrupt says to stop now.
    fn should_stop(&self, seconds: f64, unique_states: u64) -> Option<Ended> {
        if self.interrupt.is_some_and(|i| i.load(Ordering::Relaxed)) {
            Some(Ended::Interrupted)
        } else if self.time_limit.is_some_and(|t| seconds >= t.as_secs_f64())
            || self.max_states.is_some_and(|m| unique_states >= m)
        {
            Some(Ended::Limited)
        } else {
            None
        }
    }
}

/// When a run stops before checking every property.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopAt {
    /// Check every property to the end.
    Never,
    /// Once this always-property has a counterexample (and report every
    /// other broken within as many steps).
    Property(&'static str),
    /// Once any always-property has a counterexample.
    AnyCounterexample,
}

impl StopAt {
    /// The always-properties named to stop at.
    fn names(self) -> Vec<&'static str> {
        match self {
            StopAt::Property(name) => vec![name],
            StopAt::Never | StopAt::AnyCounterexample => Vec::new(),
        }
    }

    /// The engine's end condition; `names` are [`StopAt::names`].
    fn until<'a>(self, names: &'a [&'a str]) -> Until<'a> {
        match self {
            StopAt::Never => Until::Exhausted,
            StopAt::Property(_) => Until::AllBroken(names),
            StopAt::AnyCounterexample => Until::AnyBroken,
        }
    }
}

/// What a run is doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Searching the bounded model.
    #[default]
    Search,
    /// Expanding recovery states beyond the epoch bound.
    RecoveryStates,
    /// Backward search of the state graph for the progress properties.
    ProgressCheck,
    /// Searching for shortest counterexamples (after stateright's search).
    ShortestPaths,
}

impl Phase {
    /// What the run does in this phase, as the progress display says it.
    pub fn heading(self) -> &'static str {
        match self {
            Phase::Search => "searching the bounded model",
            Phase::RecoveryStates => {
                "searching recovery states (fault-free steps beyond the epoch bound)"
            }
            Phase::ProgressCheck => "progress check: backward search of the state graph",
            Phase::ShortestPaths => {
                "shortest counterexamples: breadth-first search, symmetry-reduced"
            }
        }
    }
}

/// A snapshot of a running search.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Progress {
    pub phase: Phase,
    pub states: u64,
    pub unique_states: u64,
    /// Recovery states found (default search, progress check).
    pub recovery_states: u64,
    pub max_depth: u64,
    pub seconds: f64,
}

impl Progress {
    pub fn states_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.states as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// A property's verdict (the engine's, for every search).
pub use highwater_checker::Verdict;

#[derive(Clone, Debug, Serialize)]
pub struct PropertyResult {
    pub name: &'static str,
    /// "always", "sometimes" or "progress".
    pub kind: &'static str,
    pub verdict: Verdict,
    /// For a broken always-property, the shortest path to a state breaking
    /// it; for a broken progress property, to a state that cannot heal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counterexample: Option<Vec<Step>>,
    /// For a reached sometimes-property (default search), a shortest path
    /// to a state that satisfies it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<Vec<Step>>,
    /// Progress: how many states of the bounded model cannot heal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stuck_states: Option<u64>,
    /// Progress: every fault-free action enabled in the stuck state, and
    /// the (also stuck) state it leads to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stuck_exits: Option<Vec<Step>>,
    /// Progress: the shortest fault-free continuation from the stuck state
    /// into a trap (states that lead only to each other, none healthy),
    /// starting with the stuck state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stuck_continuation: Option<Vec<Step>>,
    /// Progress: how many states that trap holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trap_states: Option<u64>,
}

impl PropertyResult {
    fn new(name: &'static str, kind: &'static str, verdict: Verdict) -> PropertyResult {
        PropertyResult {
            name,
            kind,
            verdict,
            counterexample: None,
            example: None,
            stuck_states: None,
            stuck_exits: None,
            stuck_continuation: None,
            trap_states: None,
        }
    }
}

/// The progress check's figures beside its verdicts.
#[derive(Clone, Debug, Serialize)]
pub struct ProgressSummary {
    /// States that can no longer heal but go offline by KIP-966's design.
    pub offline_states: u64,
    /// A shortest path to an offline-by-design state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offline_example: Option<Vec<Step>>,
    /// Fault-free edges kept, and recovery states beyond the epoch bound.
    pub edges: u64,
    pub recovery_states: u64,
    /// Of those, the ones a fault-free walk took to every goal, so never
    /// expanded (`checker/src/recovery_walk.rs`).
    pub recovery_walked: u64,
    /// Bytes held by the state graph at its largest.
    pub graph_bytes: u64,
    /// Seconds spent on the backward search.
    pub seconds: f64,
}

/// One step of a counterexample, for machines.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// The action as the step tables print it.
    pub action: Option<String>,
    /// The action as an object: `kind` and its arguments (`itf::action_json`).
    pub action_detail: Option<serde_json::Value>,
    /// Index of the action among the state's enabled actions (explorer paths).
    pub action_index: Option<usize>,
    pub state: render::StateJson,
    #[serde(skip)]
    pub raw: (State, Option<Action>),
}

/// How a search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ended {
    /// Every reachable state was visited.
    Exhaustive,
    /// Stopped at the level of the first counterexample (historical presets).
    StoppedAtCounterexample,
    /// Stopped by a time or state limit (`--seconds`, `--max-states`).
    Limited,
    /// Stopped by Ctrl-C.
    Interrupted,
    /// A simulation: random walks, never exhaustive.
    Sampled,
    /// Stopped before a step that would not fit `--memory-budget`: the
    /// search, or the progress check after it (`memory.over_budget` says
    /// which).
    OverBudget,
}

/// The run's verdict against what was expected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Every verdict is what was expected.
    AsExpected,
    /// A verdict contradicts the expectation (see `mismatches`).
    NotAsExpected,
    /// The run stopped before it could decide (a limit, Ctrl-C, or a
    /// search that is not exhaustive); nothing seen contradicts it.
    Undecided,
    /// No expectation was given.
    NoExpectation,
}

/// The version of the JSON report's shape (see `Report`); bumped whenever
/// a field changes meaning or goes away (4: the progress properties count
/// crashed brokers, which must come back, and `exit_status` is given).
pub const SCHEMA: &str = "highwater-check-report/4";

/// The report of one run, as `--json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: &'static str,
    pub preset: Option<&'static str>,
    pub config: Config,
    pub search: Search,
    pub threads: usize,
    pub ended: Ended,
    pub progress: Progress,
    /// Seconds spent after the search finding shortest counterexamples.
    pub shortest_seconds: f64,
    pub states_per_second: f64,
    pub peak_memory_mib: Option<f64>,
    /// What the run held, by part and per unique state.
    pub memory: Memory,
    pub properties: Vec<PropertyResult>,
    /// The progress check (default search, complete runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_check: Option<ProgressSummary>,
    pub expected: Option<String>,
    /// The verdict against the expectation.
    pub outcome: Outcome,
    /// Where the run disagrees with the expectation (empty: agrees).
    pub mismatches: Vec<String>,
    /// The process's exit status for this report ([`exit`]).
    pub exit_status: u8,
}

/// What a run held: the engine's own count by part (default search, one
/// process), the process's peak resident set, and each per unique state of
/// the bounded model (recovery states' bytes included). The index, node and
/// edge figures are at the end of the search, when they are largest; the
/// queue's is its largest, the progress check's buffers included.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Memory {
    /// `--memory-budget`, in bytes.
    pub budget_bytes: Option<u64>,
    pub index_bytes: Option<u64>,
    pub node_bytes: Option<u64>,
    pub edge_bytes: Option<u64>,
    pub queue_bytes: Option<u64>,
    /// The most the engine counted at one moment.
    pub counted_peak_bytes: Option<u64>,
    pub peak_resident_bytes: Option<u64>,
    pub index_bytes_per_state: Option<f64>,
    /// Nodes and edges.
    pub graph_bytes_per_state: Option<f64>,
    pub node_bytes_per_state: Option<f64>,
    pub edge_bytes_per_state: Option<f64>,
    pub peak_resident_bytes_per_state: Option<f64>,
    /// Why the run stopped for its budget, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_budget: Option<OverBudget>,
}

/// A run stopped by its memory budget.
#[derive(Clone, Debug, Serialize)]
pub struct OverBudget {
    /// The step it did not take: "search" or "progress-check".
    pub step: &'static str,
    /// What the engine held then, by its own count.
    pub held_bytes: u64,
    /// What that step would have held at its largest, and the budget that
    /// would have let it.
    pub next_step_bytes: u64,
    pub next_step_budget_bytes: u64,
    /// For a preset with a known state count, what the whole run is
    /// estimated to need ([`crate::presets::estimated_peak_bytes`]).
    pub estimated_bytes: Option<u64>,
}

/// `highwater check`'s exit statuses. A property broken that nobody said
/// would break gives TLC's codes (12 a safety violation, 13 a liveness one);
/// any other disagreement with the expectation gives 1.
pub mod exit {
    /// Every verdict is what was expected (or, with no expectation, nothing
    /// broke in a search that ran to its end).
    pub const AS_EXPECTED: u8 = 0;
    /// An expected counterexample was not found, a sometimes-property was
    /// not reached, or one expected to be unreachable was reached.
    pub const NOT_AS_EXPECTED: u8 = 1;
    /// Bad usage: flags, files, or an output that cannot be written.
    pub const USAGE: u8 = 2;
    /// Stopped before it could decide (`--seconds`, `--max-states`, or
    /// random walks asked to prove that nothing breaks); nothing seen
    /// contradicts the expectation.
    pub const UNDECIDED: u8 = 3;
    /// An always-property that was expected to hold has a counterexample
    /// (TLC's `VIOLATION_SAFETY`).
    pub const SAFETY_VIOLATION: u8 = 12;
    /// A progress property that was expected to hold has a stuck state
    /// (TLC's `VIOLATION_LIVENESS`).
    pub const PROGRESS_VIOLATION: u8 = 13;
    /// Stopped by `--memory-budget` before it could decide (during the
    /// search, or before the progress check), or refused at once because
    /// the preset's measured size does not fit it (TLC's
    /// `ERROR_STATESPACE_TOO_LARGE`).
    pub const OVER_BUDGET: u8 = 152;
    /// Stopped by Ctrl-C (128 + SIGINT, as shells report it).
    pub const INTERRUPTED: u8 = 130;
}

/// Runs the checker on `cfg`, calling `on_progress` about once a second
/// (and at each change of phase).
pub fn run(
    cfg: Config,
    preset: Option<&'static str>,
    expect: Option<Expect>,
    opts: &RunOptions,
    mut on_progress: impl FnMut(Progress),
) -> Report {
    let found = match opts.search {
        Search::Graph => run_graph(cfg, opts, &mut on_progress),
        _ => run_stateright(cfg, opts, &mut on_progress),
    };
    report_of(cfg, preset, expect, opts, found)
}

/// Runs the default search distributed over timely dataflow's workers
/// (`checker/src/distributed/`): this process's part of it. Process 0
/// gets the report, the same as [`run`]'s with the default search but for
/// its times and memory; the other processes get None.
pub fn run_distributed(
    cfg: Config,
    preset: Option<&'static str>,
    expect: Option<Expect>,
    opts: &RunOptions,
    cluster: Cluster,
    flaw: distributed::Flaw,
    mut on_progress: impl FnMut(Progress),
) -> Result<Option<Report>, String> {
    if opts.search != Search::Graph {
        return Err(
            "only the default search runs distributed (drop --dfs, --bfs or --simulate)".into(),
        );
    }
    if opts.memory_budget.is_some() {
        return Err(memory_budget_distributed().into());
    }
    let model = PartitionModel::new(cfg);
    let names = opts.stop_at.names();
    let until = opts.stop_at.until(&names);
    let ended = std::sync::Mutex::new(None);
    let stop = |p: &SearchProgress| {
        let why = opts.should_stop(p.seconds, p.unique_states);
        if why.is_some() {
            *ended.lock().expect("not poisoned") = why;
        }
        why.is_some()
    };
    let mut report = |p: &SearchProgress| on_progress(progress_of(p, Phase::Search));
    let outcome = distributed::search(
        &model,
        DistributedOptions {
            cluster,
            progress: Some(ProgressOptions::of(&model)),
            properties: None,
            until,
            stop: &stop,
            on_progress: &mut report,
            flaw,
            slices: highwater_checker::distributed::Slices::default(),
        },
    )?;
    let Some(outcome) = outcome else {
        return Ok(None);
    };
    let limited = *ended.lock().expect("not poisoned");
    let found = found_of(&model, outcome, limited);
    Ok(Some(report_of(cfg, preset, expect, opts, found)))
}

/// Why `--memory-budget` and a distributed run are refused together.
pub fn memory_budget_distributed() -> &'static str {
    "--memory-budget is kept by the single-process search only: the distributed one \
     (--workers, --processes) does not count its memory by part; drop one of them"
}

/// The report of what a search found, held against the expectation.
fn report_of(
    cfg: Config,
    preset: Option<&'static str>,
    expect: Option<Expect>,
    opts: &RunOptions,
    found: Found,
) -> Report {
    let mismatches = expect
        .map(|e| mismatches(e, &found.properties))
        .unwrap_or_default();
    let outcome = match expect {
        None => Outcome::NoExpectation,
        Some(_) if !mismatches.is_empty() => Outcome::NotAsExpected,
        Some(e) if decided(e, found.ended, &found.properties) => Outcome::AsExpected,
        Some(_) => Outcome::Undecided,
    };
    let exit_status = exit_status(expect, outcome, found.ended, &found.properties);
    let memory = memory_of(&found, opts, preset);
    Report {
        schema: SCHEMA,
        preset,
        config: cfg,
        search: opts.search,
        threads: opts.threads,
        ended: found.ended,
        progress: found.progress,
        shortest_seconds: found.shortest_seconds,
        states_per_second: found.progress.states_per_second(),
        peak_memory_mib: peak_memory_mib(),
        memory,
        properties: found.properties,
        progress_check: found.progress_check,
        expected: None,
        outcome,
        mismatches,
        exit_status,
    }
}

/// The exit status of a run ([`exit`]): Ctrl-C first, then a property
/// broken that the expectation does not allow to break (safety before
/// progress), then the verdict against the expectation.
fn exit_status(
    expect: Option<Expect>,
    outcome: Outcome,
    ended: Ended,
    props: &[PropertyResult],
) -> u8 {
    // Expecting a property (or any) to break allows every break: a
    // historical rule usually breaks more than the property it is known for.
    let may_break = matches!(
        expect,
        Some(Expect::Breaks(_)) | Some(Expect::AnyCounterexample)
    );
    let broken = |kind: &str| {
        props
            .iter()
            .any(|p| p.kind == kind && p.verdict == Verdict::Counterexample)
    };
    if ended == Ended::Interrupted {
        exit::INTERRUPTED
    } else if !may_break && broken("always") {
        exit::SAFETY_VIOLATION
    } else if !may_break && broken("progress") {
        exit::PROGRESS_VIOLATION
    } else {
        match outcome {
            Outcome::AsExpected => exit::AS_EXPECTED,
            Outcome::NotAsExpected => exit::NOT_AS_EXPECTED,
            Outcome::Undecided | Outcome::NoExpectation if ended == Ended::OverBudget => {
                exit::OVER_BUDGET
            }
            Outcome::Undecided => exit::UNDECIDED,
            // Nothing broke; a search cut short proved nothing either.
            Outcome::NoExpectation if ended == Ended::Limited => exit::UNDECIDED,
            Outcome::NoExpectation => exit::AS_EXPECTED,
        }
    }
}

/// What a search found, before it is held against the expectation.
struct Found {
    ended: Ended,
    progress: Progress,
    shortest_seconds: f64,
    properties: Vec<PropertyResult>,
    progress_check: Option<ProgressSummary>,
    /// The engine's count by part (default search, one process).
    footprint: Option<memory::Footprint>,
    counted_peak: Option<u64>,
    over_budget: Option<memory::OverBudget>,
}

/// The report's memory figures, from what the search counted.
fn memory_of(found: &Found, opts: &RunOptions, preset: Option<&'static str>) -> Memory {
    let states = found.progress.unique_states.max(1) as f64;
    let per_state = |b: u64| b as f64 / states;
    let peak = memory::peak_resident_bytes();
    let known = preset
        .and_then(crate::presets::Preset::find)
        .and_then(|p| p.known_unique_states());
    let f = found.footprint;
    Memory {
        budget_bytes: opts.memory_budget.map(|b| b.bytes),
        index_bytes: f.map(|f| f.index),
        node_bytes: f.map(|f| f.nodes),
        edge_bytes: f.map(|f| f.edges),
        queue_bytes: f.map(|f| f.queue),
        counted_peak_bytes: found.counted_peak,
        peak_resident_bytes: peak,
        index_bytes_per_state: f.map(|f| per_state(f.index)),
        graph_bytes_per_state: f.map(|f| per_state(f.graph())),
        node_bytes_per_state: f.map(|f| per_state(f.nodes)),
        edge_bytes_per_state: f.map(|f| per_state(f.edges)),
        peak_resident_bytes_per_state: peak.map(per_state),
        over_budget: found.over_budget.map(|o| OverBudget {
            step: match o.step {
                memory::Step::Search => "search",
                memory::Step::ProgressCheck => "progress-check",
            },
            held_bytes: o.held.total(),
            next_step_bytes: o.next_step,
            next_step_budget_bytes: o.next_step_budget,
            estimated_bytes: known.map(crate::presets::estimated_peak_bytes),
        }),
    }
}

/// The default search: the state graph, safety and progress in one pass.
fn run_graph(cfg: Config, opts: &RunOptions, on_progress: &mut impl FnMut(Progress)) -> Found {
    let model = PartitionModel::new(cfg);
    let names = opts.stop_at.names();
    let until = opts.stop_at.until(&names);
    let ended = std::sync::Mutex::new(None);
    let stop = |p: &SearchProgress| {
        let why = opts.should_stop(p.seconds, p.unique_states);
        if why.is_some() {
            *ended.lock().expect("not poisoned") = why;
        }
        why.is_some()
    };
    let mut report = |p: &SearchProgress| on_progress(progress_of(p, Phase::Search));
    let mut g = search::search(
        &model,
        SearchOptions {
            threads: opts.threads,
            properties: None,
            // Kept even by a run that may stop at its first counterexample:
            // when none comes, the search is complete and the progress
            // check needs every fault-free edge (without them every state
            // would look stuck).
            progress: Some(ProgressOptions::of(&model)),
            until,
            stop: &stop,
            on_progress: &mut report,
            budget: opts.memory_budget,
            expected_states: opts.expected_states,
        },
    );
    let searched = g.progress;
    let outcome = CheckOutcome::of_graph(&mut g, opts.memory_budget, || {
        on_progress(progress_of(&searched, Phase::ProgressCheck))
    });
    drop(g);
    let limited = *ended.lock().expect("not poisoned");
    found_of(&model, outcome, limited)
}

/// What the default search found (either engine's outcome), as the
/// report's properties and figures.
fn found_of(
    model: &PartitionModel,
    o: CheckOutcome<PartitionModel>,
    limited: Option<Ended>,
) -> Found {
    let mut properties: Vec<PropertyResult> = o
        .properties
        .iter()
        .zip(&o.first)
        .zip(&o.verdicts)
        .map(|((p, first), &verdict)| {
            let always = p.expectation == Expectation::Always;
            let mut r =
                PropertyResult::new(p.name, if always { "always" } else { "sometimes" }, verdict);
            match (always, first) {
                (true, Some(t)) => r.counterexample = Some(steps(model, t)),
                (false, Some(t)) => r.example = Some(steps(model, t)),
                _ => {}
            }
            r
        })
        .collect();
    let mut progress_check = None;
    if let Some(check) = o.check {
        for p in &check.properties {
            let mut r = PropertyResult::new(p.name, "progress", p.verdict());
            r.stuck_states = Some(p.stuck_states);
            if let Some(stuck) = &p.counterexample {
                r.counterexample = Some(steps(model, &stuck.trace));
                r.stuck_exits = Some(
                    stuck
                        .exits
                        .iter()
                        .map(|&(a, s)| Step::new(s, Some(a), None))
                        .collect(),
                );
                r.stuck_continuation = Some(steps(model, &stuck.continuation));
                r.trap_states = Some(stuck.trap_states);
            }
            properties.push(r);
        }
        progress_check = Some(ProgressSummary {
            // Held against the first goal, the partition healing.
            offline_states: check.properties.first().map_or(0, |p| p.exempt_states),
            offline_example: check.exempt_example.map(|t| steps(model, &t)),
            edges: check.edges,
            recovery_states: check.recovery_states,
            recovery_walked: check.recovery_walked,
            graph_bytes: o.graph_bytes,
            seconds: check.seconds,
        });
    } else {
        for name in [progress::RECOVERABLE, progress::ACKED_REPLICATED] {
            properties.push(PropertyResult::new(name, "progress", Verdict::NotChecked));
        }
    }
    Found {
        ended: match o.completion {
            // A complete search whose progress check did not fit.
            _ if o.over_budget.is_some() => Ended::OverBudget,
            Completion::Exhaustive => Ended::Exhaustive,
            Completion::StoppedAtCounterexample => Ended::StoppedAtCounterexample,
            Completion::Interrupted => limited.unwrap_or(Ended::Limited),
            Completion::OverBudget => Ended::OverBudget,
        },
        progress: progress_of(&o.progress, Phase::Search),
        shortest_seconds: 0.0,
        properties,
        progress_check,
        footprint: o.footprint,
        counted_peak: o.counted_peak,
        over_budget: o.over_budget,
    }
}

fn progress_of(p: &SearchProgress, phase: Phase) -> Progress {
    Progress {
        phase: if p.recovery_phase && phase == Phase::Search {
            Phase::RecoveryStates
        } else {
            phase
        },
        states: p.transitions + 1,
        unique_states: p.unique_states,
        recovery_states: p.recovery_states,
        max_depth: p.max_depth,
        seconds: p.seconds,
    }
}

/// stateright's checkers: safety and sometimes-properties, then our
/// breadth-first search for the shortest counterexamples.
fn run_stateright(cfg: Config, opts: &RunOptions, on_progress: &mut impl FnMut(Progress)) -> Found {
    let model = PartitionModel::new(cfg);
    let start = Instant::now();
    let mut builder = model.clone().checker().threads(opts.threads.max(1));
    if opts.stop_at != StopAt::Never {
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    if let Some(m) = opts.max_states {
        builder = builder.target_state_count(m as usize);
    }
    let (progress, found, why) = match opts.search {
        Search::Dfs | Search::Graph => {
            watch(builder.symmetry().spawn_dfs(), start, opts, on_progress)
        }
        Search::Bfs => watch(builder.spawn_bfs(), start, opts, on_progress),
        Search::Simulate { seed, max_depth } => watch(
            builder
                .target_max_depth(max_depth)
                .spawn_simulation(seed, UniformChooser),
            start,
            opts,
            on_progress,
        ),
    };
    let stopped_early = opts.stop_at != StopAt::Never
        && model
            .properties()
            .iter()
            .any(|p| p.expectation == Expectation::Always && found.contains(&p.name));
    let complete = why.is_none() && opts.search.exhaustive() && !stopped_early;
    let mut properties: Vec<PropertyResult> = model
        .properties()
        .iter()
        .map(|p| {
            let seen = found.contains(&p.name);
            let (kind, verdict) = match (p.expectation.clone(), seen) {
                (Expectation::Always, true) => ("always", Verdict::Counterexample),
                (Expectation::Always, false) if stopped_early => ("always", Verdict::NotChecked),
                (Expectation::Always, false) if complete => ("always", Verdict::Holds),
                (Expectation::Always, false) => ("always", Verdict::NoneFound),
                (_, true) => ("sometimes", Verdict::Reached),
                (_, false) if complete => ("sometimes", Verdict::NotReached),
                (_, false) => ("sometimes", Verdict::NotChecked),
            };
            PropertyResult::new(p.name, kind, verdict)
        })
        .collect();
    let shortest_start = Instant::now();
    on_progress(Progress {
        phase: Phase::ShortestPaths,
        ..progress
    });
    match opts.stop_at {
        // Which other properties the stopped search had stumbled on depends
        // on its threads' timing; report instead, the same in every run,
        // those broken within as many steps as the first one.
        StopAt::Property(name) if stopped_early => {
            for p in &mut properties {
                p.verdict = Verdict::NotChecked;
            }
            attach_shortest_until(&model, &mut properties, Until::AllBroken(&[name]));
        }
        StopAt::AnyCounterexample if stopped_early => {
            for p in &mut properties {
                p.verdict = Verdict::NotChecked;
            }
            attach_shortest_until(&model, &mut properties, Until::AnyBroken);
        }
        _ => {
            // The shortest counterexample of each broken property, and of the
            // one the run stops for even if a simulation missed it.
            let mut targets: Vec<&str> = properties
                .iter()
                .filter(|p| p.verdict == Verdict::Counterexample)
                .map(|p| p.name)
                .collect();
            if let StopAt::Property(name) = opts.stop_at {
                if !targets.contains(&name) && !opts.search.exhaustive() {
                    targets.push(name);
                }
            }
            attach_shortest(&model, &mut properties, &targets);
        }
    }
    for name in [progress::RECOVERABLE, progress::ACKED_REPLICATED] {
        properties.push(PropertyResult::new(name, "progress", Verdict::NotChecked));
    }
    Found {
        ended: match opts.search {
            Search::Simulate { .. } if why != Some(Ended::Interrupted) => Ended::Sampled,
            _ if stopped_early => Ended::StoppedAtCounterexample,
            _ => why.unwrap_or(Ended::Exhaustive),
        },
        progress,
        shortest_seconds: shortest_start.elapsed().as_secs_f64(),
        properties,
        progress_check: None,
        footprint: None,
        counted_peak: None,
        over_budget: None,
    }
}

/// Polls a running checker until it is done, out of time, or interrupted;
/// returns the final figures, the names of the properties it has
/// discoveries for, and why it stopped early (None: it finished).
fn watch<C: Checker<PartitionModel>>(
    checker: C,
    start: Instant,
    opts: &RunOptions,
    on_progress: &mut dyn FnMut(Progress),
) -> (Progress, Vec<&'static str>, Option<Ended>) {
    let snapshot = |c: &C| Progress {
        phase: Phase::Search,
        states: c.state_count() as u64,
        unique_states: c.unique_state_count() as u64,
        recovery_states: 0,
        max_depth: c.max_depth() as u64,
        seconds: start.elapsed().as_secs_f64(),
    };
    let mut last = Instant::now();
    let mut why = None;
    while !checker.is_done() {
        let p = snapshot(&checker);
        why = opts.should_stop(p.seconds, p.unique_states);
        if why.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            on_progress(p);
        }
    }
    let done = checker.is_done();
    let progress = snapshot(&checker);
    let found = checker.discoveries().into_keys().collect();
    if done {
        // All worker threads have finished; joining returns at once.
        let _ = checker.join();
        // A state limit ends stateright's search as if it were done.
        if opts.max_states.is_some_and(|m| progress.unique_states >= m) {
            why = Some(Ended::Limited);
        }
    }
    // A stopped search keeps running in its threads until the process
    // exits; its figures are final as taken above.
    (progress, found, why)
}

/// Finds the shortest counterexample of each named always-property; one
/// found for a property the run had not decided makes it broken.
fn attach_shortest(model: &PartitionModel, properties: &mut [PropertyResult], names: &[&str]) {
    let targets: Vec<_> = model
        .properties()
        .into_iter()
        .filter(|p| names.contains(&p.name))
        .collect();
    if targets.is_empty() {
        return;
    }
    attach(
        model,
        properties,
        shortest::shortest_counterexamples(model, &targets),
    );
}

/// Finds the shortest counterexamples of every always-property broken
/// within the depth at which the search may stop.
fn attach_shortest_until(
    model: &PartitionModel,
    properties: &mut [PropertyResult],
    until: Until<'_>,
) {
    let targets: Vec<_> = model
        .properties()
        .into_iter()
        .filter(|p| p.expectation == Expectation::Always)
        .collect();
    let found = shortest::shortest_counterexamples_until(model, &targets, until);
    attach(model, properties, found);
}

fn attach(
    model: &PartitionModel,
    properties: &mut [PropertyResult],
    found: Vec<(&'static str, Option<Trace>)>,
) {
    for (name, trace) in found {
        if let (Some(p), Some(trace)) = (properties.iter_mut().find(|p| p.name == name), trace) {
            p.verdict = Verdict::Counterexample;
            p.counterexample = Some(steps(model, &trace));
        }
    }
}

impl Step {
    pub fn new(state: State, action: Option<Action>, action_index: Option<usize>) -> Step {
        Step {
            action: action.map(|a| a.to_string()),
            action_detail: action.as_ref().map(crate::itf::action_json),
            action_index,
            state: render::state_json(&state),
            raw: (state, action),
        }
    }
}

/// A trace with each action's index among its state's enabled actions.
pub fn steps(model: &PartitionModel, trace: &Trace) -> Vec<Step> {
    let mut out = Vec::with_capacity(trace.len());
    let mut prev: Option<State> = None;
    for &(state, action) in trace {
        let action_index = match (prev, action) {
            (Some(p), Some(a)) => {
                let mut actions = Vec::new();
                model.actions(&p, &mut actions);
                actions.iter().position(|x| *x == a)
            }
            _ => None,
        };
        out.push(Step::new(state, action, action_index));
        prev = Some(state);
    }
    out
}

/// The explorer's URL fragment for a counterexample: `#/steps/0/3/1...`.
pub fn explorer_fragment(steps: &[Step]) -> String {
    let mut s = String::from("#/steps/0");
    for i in steps.iter().filter_map(|s| s.action_index) {
        s.push_str(&format!("/{i}"));
    }
    s
}

/// Where the verdicts contradict the expectation. A run that stopped early
/// contradicts nothing it did not decide.
fn mismatches(expect: Expect, props: &[PropertyResult]) -> Vec<String> {
    let mut out = Vec::new();
    let broken = |p: &PropertyResult| p.verdict == Verdict::Counterexample;
    match expect {
        Expect::Holds { unreachable } => {
            for p in props {
                match p.verdict {
                    Verdict::Counterexample => out.push(format!(
                        "\"{}\" was expected to hold but has a counterexample",
                        p.name
                    )),
                    Verdict::NotReached if !unreachable.contains(&p.name) => out.push(format!(
                        "\"{}\" was expected to be reached but never was",
                        p.name
                    )),
                    Verdict::Reached if unreachable.contains(&p.name) => out.push(format!(
                        "\"{}\" was expected to be unreachable but was reached",
                        p.name
                    )),
                    _ => {}
                }
            }
        }
        Expect::NoCounterexample => {
            for p in props.iter().filter(|p| broken(p)) {
                out.push(format!(
                    "\"{}\" was expected to hold but has a counterexample",
                    p.name
                ));
            }
        }
        Expect::Breaks(name) => {
            if props
                .iter()
                .any(|p| p.name == name && p.verdict == Verdict::Holds)
            {
                out.push(format!(
                    "\"{name}\" was expected to break but no counterexample was found"
                ));
            }
        }
        Expect::AnyCounterexample => {
            let all_hold = props
                .iter()
                .filter(|p| p.kind != "sometimes")
                .all(|p| p.verdict == Verdict::Holds);
            if all_hold {
                out.push("a counterexample was expected but every property holds".to_string());
            }
        }
    }
    out
}

/// Whether a run with no contradiction decided its expectation.
fn decided(expect: Expect, ended: Ended, props: &[PropertyResult]) -> bool {
    let broken = |name: &str| {
        props
            .iter()
            .any(|p| p.name == name && p.verdict == Verdict::Counterexample)
    };
    match expect {
        Expect::Holds { .. } | Expect::NoCounterexample => ended == Ended::Exhaustive,
        Expect::Breaks(name) => broken(name),
        Expect::AnyCounterexample => props.iter().any(|p| p.verdict == Verdict::Counterexample),
    }
}

/// Peak resident memory of this process (Linux), in MiB.
pub fn peak_memory_mib() -> Option<f64> {
    memory::peak_resident_bytes().map(|b| b as f64 / (1024.0 * 1024.0))
}
