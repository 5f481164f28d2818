//! One checker run: the chosen search, progress while it runs, a verdict per
//! property (safety, sometimes, and progress), the shortest counterexample of
//! each broken property, and whether all of that is what the preset expects.

use crate::actions::Action;
use crate::config::Config;
use crate::graph::{self, Completion, SearchOptions, SearchProgress, Trace};
use crate::model::PartitionModel;
use crate::presets::Expect;
use crate::progress;
use crate::render;
use crate::shortest;
use crate::state::State;
use serde::Serialize;
use stateright::{Checker, Expectation, HasDiscoveries, Model, UniformChooser};
use std::time::{Duration, Instant};

/// How to search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Search {
    /// highwater's own exhaustive breadth-first search with symmetry
    /// reduction (the default): safety, shortest counterexamples and the
    /// progress check in one pass (`graph.rs`, `progress.rs`).
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
    /// Stop a simulation after this long (simulations never finish by themselves).
    pub time_limit: Option<Duration>,
    /// Stop at the first counterexample instead of checking every property.
    pub stop_at_first: bool,
}

/// A snapshot of a running search.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Progress {
    pub states: u64,
    pub unique_states: u64,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// An always-property held in every reachable state (a progress
    /// property: every reachable state can heal).
    Holds,
    /// An always-property failed: a counterexample exists (a progress
    /// property: a reachable state cannot heal without a fault).
    Counterexample,
    /// A sometimes-property was seen.
    Reached,
    /// A sometimes-property was never seen.
    NotReached,
    /// A non-exhaustive search saw no counterexample.
    NoneFound,
    /// The run stopped at an earlier counterexample before deciding this one,
    /// or (progress) its search keeps no state graph.
    NotChecked,
}

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
    /// Bytes held by the state graph at its largest.
    pub graph_bytes: u64,
    /// Seconds spent on the backward search.
    pub seconds: f64,
}

/// One step of a counterexample, for machines.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub action: Option<String>,
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
    /// Stopped by a time or state limit.
    Limited,
    /// A simulation: random walks, never exhaustive.
    Sampled,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
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
    pub properties: Vec<PropertyResult>,
    /// The progress check (default search, complete runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_check: Option<ProgressSummary>,
    pub expected: Option<String>,
    /// Where the run disagrees with the preset's expectation (empty: agrees).
    pub mismatches: Vec<String>,
}

/// Runs the checker on `cfg`, calling `on_progress` about once a second.
pub fn run(
    cfg: Config,
    preset: Option<&'static str>,
    expect: Option<Expect>,
    opts: &RunOptions,
    mut on_progress: impl FnMut(Progress),
) -> Report {
    let outcome = match opts.search {
        Search::Graph => run_graph(cfg, expect, opts, &mut on_progress),
        _ => run_stateright(cfg, expect, opts, &mut on_progress),
    };
    let mismatches = expect
        .map(|e| mismatches(e, &outcome.properties, opts.search))
        .unwrap_or_default();
    Report {
        preset,
        config: cfg,
        search: opts.search,
        threads: opts.threads,
        ended: outcome.ended,
        progress: outcome.progress,
        shortest_seconds: outcome.shortest_seconds,
        states_per_second: outcome.progress.states_per_second(),
        peak_memory_mib: peak_memory_mib(),
        properties: outcome.properties,
        progress_check: outcome.progress_check,
        expected: None,
        mismatches,
    }
}

/// What a search found, before it is held against the expectation.
struct Outcome {
    ended: Ended,
    progress: Progress,
    shortest_seconds: f64,
    properties: Vec<PropertyResult>,
    progress_check: Option<ProgressSummary>,
}

/// The default search: the state graph, safety and progress in one pass.
fn run_graph(
    cfg: Config,
    expect: Option<Expect>,
    opts: &RunOptions,
    on_progress: &mut impl FnMut(Progress),
) -> Outcome {
    let model = PartitionModel::new(cfg);
    let until: Vec<&str> = match expect {
        Some(Expect::Breaks(name)) if opts.stop_at_first => vec![name],
        _ => vec![],
    };
    let time_limit = opts.time_limit;
    let stop = move |p: &SearchProgress| time_limit.is_some_and(|t| p.seconds >= t.as_secs_f64());
    let mut report = |p: &SearchProgress| on_progress(progress_of(p));
    let g = graph::search(
        cfg,
        SearchOptions {
            threads: opts.threads,
            progress: until.is_empty().then_some(progress::PREDICATES),
            recovery_epochs: crate::state::RECOVERY_EPOCHS,
            until: &until,
            stop: &stop,
            on_progress: &mut report,
        },
    );
    let complete = g.completion == Completion::Exhaustive;
    let stopped = g.completion == Completion::StoppedAtCounterexample;
    let mut properties: Vec<PropertyResult> = model
        .properties()
        .iter()
        .zip(&g.first)
        .map(|(p, first)| {
            let always = p.expectation == Expectation::Always;
            let verdict = match (always, first.is_some()) {
                (true, true) => Verdict::Counterexample,
                (_, false) if stopped => Verdict::NotChecked,
                (true, false) if complete => Verdict::Holds,
                (true, false) => Verdict::NoneFound,
                (false, true) => Verdict::Reached,
                (false, false) if complete => Verdict::NotReached,
                (false, false) => Verdict::NotChecked,
            };
            let mut r =
                PropertyResult::new(p.name, if always { "always" } else { "sometimes" }, verdict);
            if let (true, Some(n)) = (always, first) {
                r.counterexample = Some(steps(&model, &g.path_to(*n)));
            }
            r
        })
        .collect();
    let mut progress_check = None;
    if complete {
        let check = progress::check(&g);
        for p in &check.properties {
            let verdict = if p.stuck_states == 0 {
                Verdict::Holds
            } else {
                Verdict::Counterexample
            };
            let mut r = PropertyResult::new(p.name, "progress", verdict);
            r.stuck_states = Some(p.stuck_states);
            if let Some(stuck) = &p.counterexample {
                r.counterexample = Some(steps(&model, &stuck.trace));
                r.stuck_exits = Some(
                    stuck
                        .exits
                        .iter()
                        .map(|&(a, s)| Step {
                            action: Some(a.to_string()),
                            action_index: None,
                            state: render::state_json(&s),
                            raw: (s, Some(a)),
                        })
                        .collect(),
                );
                r.stuck_continuation = Some(steps(&model, &stuck.continuation));
                r.trap_states = Some(stuck.trap_states);
            }
            properties.push(r);
        }
        progress_check = Some(ProgressSummary {
            offline_states: check.offline_states,
            offline_example: check.offline_example.map(|t| steps(&model, &t)),
            edges: check.edges,
            recovery_states: check.recovery_states,
            graph_bytes: g.memory_bytes() as u64,
            seconds: check.seconds,
        });
    } else {
        for name in [progress::RECOVERABLE, progress::ACKED_REPLICATED] {
            properties.push(PropertyResult::new(name, "progress", Verdict::NotChecked));
        }
    }
    Outcome {
        ended: match g.completion {
            Completion::Exhaustive => Ended::Exhaustive,
            Completion::StoppedAtCounterexample => Ended::StoppedAtCounterexample,
            Completion::Interrupted => Ended::Limited,
        },
        progress: progress_of(&g.progress),
        shortest_seconds: 0.0,
        properties,
        progress_check,
    }
}

fn progress_of(p: &SearchProgress) -> Progress {
    Progress {
        states: p.transitions + 1,
        unique_states: p.unique_states,
        max_depth: p.max_depth,
        seconds: p.seconds,
    }
}

/// stateright's checkers: safety and sometimes-properties, then our
/// breadth-first search for the shortest counterexamples.
fn run_stateright(
    cfg: Config,
    expect: Option<Expect>,
    opts: &RunOptions,
    on_progress: &mut impl FnMut(Progress),
) -> Outcome {
    let model = PartitionModel::new(cfg);
    let start = Instant::now();
    let mut builder = model.clone().checker().threads(opts.threads.max(1));
    if opts.stop_at_first {
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    let (progress, found, done) = match opts.search {
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
    let stopped_early = opts.stop_at_first
        && model
            .properties()
            .iter()
            .any(|p| p.expectation == Expectation::Always && found.contains(&p.name));
    let mut properties: Vec<PropertyResult> = model
        .properties()
        .iter()
        .map(|p| {
            let seen = found.contains(&p.name);
            let (kind, verdict) = match (p.expectation.clone(), seen) {
                (Expectation::Always, true) => ("always", Verdict::Counterexample),
                (Expectation::Always, false) if stopped_early => ("always", Verdict::NotChecked),
                (Expectation::Always, false) if opts.search.exhaustive() => {
                    ("always", Verdict::Holds)
                }
                (Expectation::Always, false) => ("always", Verdict::NoneFound),
                (_, true) => ("sometimes", Verdict::Reached),
                (_, false) if stopped_early => ("sometimes", Verdict::NotChecked),
                (_, false) => ("sometimes", Verdict::NotReached),
            };
            PropertyResult::new(p.name, kind, verdict)
        })
        .collect();
    let shortest_start = Instant::now();
    match expect {
        // Which other properties the stopped search had stumbled on depends
        // on its threads' timing; report instead, the same in every run,
        // those broken within as many steps as the expected one.
        Some(Expect::Breaks(name)) if stopped_early => {
            for p in &mut properties {
                p.verdict = Verdict::NotChecked;
            }
            attach_shortest_until(&model, &mut properties, name);
        }
        _ => {
            // The shortest counterexample of each broken property, and of the
            // one the preset expects to break even if the search missed it.
            let mut targets: Vec<&str> = properties
                .iter()
                .filter(|p| p.verdict == Verdict::Counterexample)
                .map(|p| p.name)
                .collect();
            if let Some(Expect::Breaks(name)) = expect {
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
    Outcome {
        ended: match opts.search {
            Search::Simulate { .. } => Ended::Sampled,
            _ if stopped_early => Ended::StoppedAtCounterexample,
            _ if done => Ended::Exhaustive,
            _ => Ended::Limited,
        },
        progress,
        shortest_seconds: shortest_start.elapsed().as_secs_f64(),
        properties,
        progress_check: None,
    }
}

/// Polls a running checker until it is done (or out of time); returns the
/// final figures and the names of the properties it has discoveries for.
fn watch<C: Checker<PartitionModel>>(
    checker: C,
    start: Instant,
    opts: &RunOptions,
    on_progress: &mut dyn FnMut(Progress),
) -> (Progress, Vec<&'static str>, bool) {
    let snapshot = |c: &C| Progress {
        states: c.state_count() as u64,
        unique_states: c.unique_state_count() as u64,
        max_depth: c.max_depth() as u64,
        seconds: start.elapsed().as_secs_f64(),
    };
    let mut last = Instant::now();
    while !checker.is_done() {
        if opts.time_limit.is_some_and(|t| start.elapsed() >= t) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            on_progress(snapshot(&checker));
        }
    }
    let done = checker.is_done();
    let progress = snapshot(&checker);
    let found = checker.discoveries().into_keys().collect();
    if done {
        // All worker threads have finished; joining returns at once.
        let _ = checker.join();
    }
    // A time-limited simulation keeps running in its threads until the
    // process exits; its figures are final as taken above.
    (progress, found, done)
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

/// Finds the shortest counterexample of `until`, and of every other
/// always-property broken within as many steps.
fn attach_shortest_until(model: &PartitionModel, properties: &mut [PropertyResult], until: &str) {
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
    found: Vec<(&'static str, Option<shortest::Trace>)>,
) {
    for (name, trace) in found {
        if let (Some(p), Some(trace)) = (properties.iter_mut().find(|p| p.name == name), trace) {
            p.verdict = Verdict::Counterexample;
            p.counterexample = Some(steps(model, &trace));
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
        out.push(Step {
            action: action.map(|a| a.to_string()),
            action_index,
            state: render::state_json(&state),
            raw: (state, action),
        });
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

fn mismatches(expect: Expect, props: &[PropertyResult], search: Search) -> Vec<String> {
    let mut out = Vec::new();
    match expect {
        Expect::Holds { unreachable } => {
            for p in props {
                match p.verdict {
                    Verdict::Counterexample => out.push(format!(
                        "\"{}\" was expected to hold but has a counterexample",
                        p.name
                    )),
                    Verdict::NotReached
                        if search.exhaustive() && !unreachable.contains(&p.name) =>
                    {
                        out.push(format!(
                            "\"{}\" was expected to be reached but never was",
                            p.name
                        ))
                    }
                    Verdict::Reached if unreachable.contains(&p.name) => out.push(format!(
                        "\"{}\" was expected to be unreachable but was reached",
                        p.name
                    )),
                    _ => {}
                }
            }
        }
        Expect::Breaks(name) => {
            let broken = props
                .iter()
                .any(|p| p.name == name && p.verdict == Verdict::Counterexample);
            if !broken {
                out.push(format!(
                    "\"{name}\" was expected to break but no counterexample was found"
                ));
            }
        }
    }
    out
}

/// Peak resident memory of this process (Linux), in MiB.
pub fn peak_memory_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}
