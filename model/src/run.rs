//! One checker run: the chosen search, progress while it runs, a verdict per
//! property, the shortest counterexample of each broken property, and whether
//! all of that is what the preset expects.

use crate::actions::Action;
use crate::config::Config;
use crate::model::PartitionModel;
use crate::presets::Expect;
use crate::render;
use crate::shortest::{self, Trace};
use crate::state::State;
use serde::Serialize;
use stateright::{Checker, Expectation, HasDiscoveries, Model, UniformChooser};
use std::time::{Duration, Instant};

/// How to search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Search {
    /// Exhaustive depth-first search with symmetry reduction (the default).
    Dfs,
    /// stateright's exhaustive breadth-first search (no symmetry reduction).
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
    /// An always-property held in every reachable state.
    Holds,
    /// An always-property failed: a counterexample exists.
    Counterexample,
    /// A sometimes-property was seen.
    Reached,
    /// A sometimes-property was never seen.
    NotReached,
    /// A non-exhaustive search saw no counterexample.
    NoneFound,
    /// The run stopped at an earlier counterexample before deciding this one.
    NotChecked,
}

#[derive(Clone, Debug, Serialize)]
pub struct PropertyResult {
    pub name: &'static str,
    pub kind: &'static str,
    pub verdict: Verdict,
    /// For a broken always-property, the shortest path to a state breaking it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counterexample: Option<Vec<Step>>,
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

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub preset: Option<&'static str>,
    pub config: Config,
    pub search: Search,
    pub threads: usize,
    pub progress: Progress,
    /// Seconds spent after the search finding shortest counterexamples.
    pub shortest_seconds: f64,
    pub states_per_second: f64,
    pub peak_memory_mib: Option<f64>,
    pub properties: Vec<PropertyResult>,
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
    let model = PartitionModel::new(cfg);
    let start = Instant::now();
    let mut builder = model.clone().checker().threads(opts.threads.max(1));
    if opts.stop_at_first {
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    let (progress, found) = match opts.search {
        Search::Dfs => watch(
            builder.symmetry().spawn_dfs(),
            start,
            opts,
            &mut on_progress,
        ),
        Search::Bfs => watch(builder.spawn_bfs(), start, opts, &mut on_progress),
        Search::Simulate { seed, max_depth } => watch(
            builder
                .target_max_depth(max_depth)
                .spawn_simulation(seed, UniformChooser),
            start,
            opts,
            &mut on_progress,
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
            PropertyResult {
                name: p.name,
                kind,
                verdict,
                counterexample: None,
            }
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
    let mismatches = expect
        .map(|e| mismatches(e, &properties, opts.search))
        .unwrap_or_default();
    Report {
        preset,
        config: cfg,
        search: opts.search,
        threads: opts.threads,
        progress,
        shortest_seconds: shortest_start.elapsed().as_secs_f64(),
        states_per_second: progress.states_per_second(),
        peak_memory_mib: peak_memory_mib(),
        properties,
        expected: None,
        mismatches,
    }
}

/// Polls a running checker until it is done (or out of time); returns the
/// final figures and the names of the properties it has discoveries for.
fn watch<C: Checker<PartitionModel>>(
    checker: C,
    start: Instant,
    opts: &RunOptions,
    on_progress: &mut impl FnMut(Progress),
) -> (Progress, Vec<&'static str>) {
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
    (progress, found)
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
