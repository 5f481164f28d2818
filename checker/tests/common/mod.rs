#![allow(dead_code)]
//! Shared by the engine's tests: the two-phase commit model, and the
//! distributed engine held against the single-process one.

pub mod two_phase;

use highwater_checker::distributed::{self, Cluster, DistributedOptions, Flaw};
use highwater_checker::search::{self, ProgressOptions, SearchOptions, Until};
use highwater_checker::{Checkable, Graph, Outcome};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Write;

/// Everything an outcome says but its time and memory, as text: figures,
/// verdicts, every path step by step, the progress check's counts, stuck
/// states, exits, traps and continuations.
pub fn describe<M: Checkable>(o: &Outcome<M>) -> String {
    let p = &o.progress;
    let mut out = format!(
        "completion {:?}\ntransitions {} unique {} recovery {} walked {} depth {}\n",
        o.completion,
        p.transitions,
        p.unique_states,
        p.recovery_states,
        p.recovery_walked,
        p.max_depth
    );
    for ((prop, verdict), first) in o.properties.iter().zip(&o.verdicts).zip(&o.first) {
        let _ = writeln!(out, "{}: {verdict:?}", prop.name);
        for (s, a) in first.iter().flatten() {
            let _ = writeln!(out, "  {a:?} -> {s:?}");
        }
    }
    if let Some(c) = &o.check {
        let _ = writeln!(
            out,
            "progress check: edges {} recovery {} walked {}",
            c.edges, c.recovery_states, c.recovery_walked
        );
        for r in &c.properties {
            let _ = writeln!(
                out,
                "{}: stuck {} exempt {}",
                r.name, r.stuck_states, r.exempt_states
            );
            if let Some(stuck) = &r.counterexample {
                for (s, a) in &stuck.trace {
                    let _ = writeln!(out, "  {a:?} -> {s:?}");
                }
                for (a, s) in &stuck.exits {
                    let _ = writeln!(out, "  exit {a:?} -> {s:?}");
                }
                for (s, a) in &stuck.continuation {
                    let _ = writeln!(out, "  then {a:?} -> {s:?}");
                }
                let _ = writeln!(out, "  trap of {} states", stuck.trap_states);
            }
        }
        for (s, a) in c.exempt_example.iter().flatten() {
            let _ = writeln!(out, "  exempt: {a:?} -> {s:?}");
        }
    }
    out
}

/// The single-process engine's outcome (two threads).
pub fn single<M: Checkable>(model: &M, progress: bool, until: Until<'_>) -> Outcome<M> {
    let mut g = search::search(
        model,
        SearchOptions {
            threads: 2,
            progress: progress.then(|| ProgressOptions::of(model)),
            properties: None,
            until,
            stop: &|_| false,
            on_progress: &mut |_| {},
            budget: None,
            expected_states: None,
        },
    );
    Outcome::of_graph(&mut g, None, || {})
}

/// The distributed engine's outcome on `workers` threads of this process.
pub fn spread<M>(
    model: &M,
    progress: bool,
    until: Until<'_>,
    workers: usize,
    flaw: Flaw,
) -> Outcome<M>
where
    M: Checkable + 'static,
    M::State: Serialize + DeserializeOwned + 'static,
{
    distributed::search(
        model,
        DistributedOptions {
            cluster: Cluster::threads(workers),
            progress: progress.then(|| ProgressOptions::of(model)),
            properties: None,
            until,
            stop: &|_| false,
            on_progress: &mut |_| {},
            flaw,
            // Small slices: many rounds a level, and for the progress
            // check's edges, even in models this small.
            slices: distributed::Slices {
                states: 7,
                edges: 3,
            },
        },
    )
    .expect("the distributed search runs")
    .expect("one process: it has the outcome")
}

/// A whole search of `model` on `threads` threads, keeping what the
/// progress check needs when `progress` is given: no limit, no budget.
pub fn search_whole<M: Checkable>(
    model: &M,
    threads: usize,
    progress: Option<ProgressOptions<M>>,
) -> Graph<M> {
    search::search(
        model,
        SearchOptions {
            threads,
            progress,
            properties: None,
            until: Until::Exhausted,
            stop: &|_| false,
            on_progress: &mut |_| {},
            budget: None,
            expected_states: None,
        },
    )
}
