//! The search and the progress check on timely dataflow's workers: threads
//! of one process, processes of one host, or hosts (timely's `-w`, `-n`,
//! `-p`, `-h`), with the same answers as the single-process engine
//! (`search.rs`, `progress.rs`).
//!
//! Each worker owns the states whose fingerprint is its index modulo the
//! number of workers: it keeps their nodes (fingerprint, parent's
//! fingerprint, depth, flags, rank, fault-free edges as fingerprints) and
//! expands them. The search is breadth-first and level-synchronous: a
//! worker expands its states of the level, sends each successor to its
//! owner, and the owners merge what they receive into their nodes
//! ([`Rounds`](exchange::Rounds): a timely dataflow whose probe ends each
//! round).
//!
//! The single-process engine merges a level in queue order, so a state's
//! parent is the first in that order to reach it, and the first state
//! found breaking a property is the first in that order; its paths are the
//! least in the order of action indices among the shortest ones. Here each
//! state of a level has a *rank*, its place in that queue order: an owner
//! merges what it receives sorted by (parent's rank, index of the action
//! in the parent's list), which is the order the single-process merge
//! meets them in; and the states new in the next level are ranked by that
//! same key across all workers (each key goes to the worker that holds
//! that range of parents' ranks, which sorts them and learns from every
//! other how many keys lie below its range). So every node has the parent
//! it has in the single-process graph, every property's first state is the
//! one of least rank at the least depth, and the paths, replayed from an
//! initial state by [`graph::replay_chain`], are the same steps.
//!
//! The progress check is backward reachability over the fault-free edges,
//! as a timely loop (`reach.rs`): each worker holds its states' edges,
//! sends each edge to its target's owner once, and then goal bits flow
//! backwards round by round until none is new. A stuck state is chosen as
//! the single-process check chooses it (least depth, then least rank), and
//! its trap is found by process 0 walking forward from it, expanding
//! states as the search did, so that the continuation is the same.
//!
//! Not supported (refused with an error rather than answered differently):
//! a recovery state that the bounded model reaches at a later level (the
//! single-process engine turns it into a state of the bounded model; node
//! order would then differ). Limits (`stop`) are obeyed between levels,
//! not between batches, so a limited run's figures differ from the
//! single-process engine's.

mod exchange;
mod lost_peer;
pub mod net;
mod reach;
mod worker;

pub use net::{read_hostfile, Cluster};

use crate::outcome::Outcome;
use crate::search::{ProgressOptions, SearchProgress, Until};
use crate::Checkable;
use serde::de::DeserializeOwned;
use serde::Serialize;
use stateright::{Expectation, Property};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A mistake planted in the distributed engine, to show that the tests
/// comparing it with the single-process engine notice one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flaw {
    #[default]
    None,
    /// Owners merge what they receive in reverse order: a state's parent
    /// is the last to reach it, not the first, and paths change.
    LastParentWins,
    /// A state sent from one worker to another is dropped when its
    /// fingerprint is a multiple of 5: states go missing.
    DropSomeSent,
    /// The progress check's last edge of every round is not sent: edges
    /// go missing at the ends of slices.
    DropSliceEnds,
}

/// How much each worker sends in one round: a level's states, and the
/// progress check's edges, go out in slices of these, so that only a
/// slice is on its way at once (memory) at the cost of a round each
/// (time). The answers do not depend on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slices {
    pub states: usize,
    pub edges: usize,
}

impl Default for Slices {
    fn default() -> Self {
        Slices {
            states: 8192,
            edges: 1 << 20,
        }
    }
}

/// What to search, where, and when to stop.
pub struct DistributedOptions<'a, M: Checkable> {
    pub cluster: Cluster,
    /// As [`SearchOptions::progress`](crate::SearchOptions::progress).
    pub progress: Option<ProgressOptions<M>>,
    /// The properties to evaluate (None: the model's own).
    pub properties: Option<Vec<Property<M>>>,
    pub until: Until<'a>,
    /// Asked about once every 100 ms, in the calling thread of each
    /// process (with the search's figures in process 0, whose workers
    /// report them): true stops the search at the end of a level.
    pub stop: &'a (dyn Fn(&SearchProgress) -> bool + Sync),
    /// Called in process 0 after each level.
    pub on_progress: &'a mut dyn FnMut(&SearchProgress),
    pub flaw: Flaw,
    pub slices: Slices,
}

/// What every worker reads.
pub(crate) struct Shared<M: Checkable> {
    pub model: M,
    pub recovery: M,
    pub properties: Vec<Property<M>>,
    pub goals: Vec<crate::Goal<M>>,
    pub keeps_progress: bool,
    pub walk: crate::recovery_walk::RecoveryWalk,
    /// The always-properties that end the search, and whether all must
    /// break ([`Until`]).
    pub until: Vec<usize>,
    pub until_all: bool,
    pub flaw: Flaw,
    pub slices: Slices,
    /// Workers per process.
    pub workers: usize,
    pub start: Instant,
}

/// Runs the check on this process's workers. Process 0 gets the outcome;
/// the others get None once their part is done.
pub fn search<M>(model: &M, opts: DistributedOptions<'_, M>) -> Result<Option<Outcome<M>>, String>
where
    M: Checkable + 'static,
    M::State: Serialize + DeserializeOwned + 'static,
    M::Action: 'static,
{
    let properties = opts.properties.unwrap_or_else(|| model.properties());
    assert!(properties.len() <= 64, "property bits fit a u64");
    let index_of = |name: &str| {
        properties
            .iter()
            .position(|p| p.name == name && p.expectation == Expectation::Always)
            .ok_or_else(|| format!("no always-property named {name:?}"))
    };
    let (until, until_all): (Vec<usize>, bool) = match opts.until {
        Until::Exhausted => (vec![], true),
        Until::AllBroken(names) => (
            names
                .iter()
                .map(|n| index_of(n))
                .collect::<Result<_, _>>()?,
            true,
        ),
        Until::AnyBroken => (
            (0..properties.len())
                .filter(|&i| properties[i].expectation == Expectation::Always)
                .collect(),
            false,
        ),
    };
    let keeps_progress = opts.progress.is_some();
    let (recovery, goals, walk) = match opts.progress {
        Some(p) => (p.recovery, p.goals, p.walk),
        None => (model.clone(), Vec::new(), Default::default()),
    };
    assert!(goals.len() <= crate::graph::MAX_GOALS);
    let cluster = opts.cluster.clone();
    let started = Instant::now();
    let shared = Arc::new(Shared {
        model: model.clone(),
        recovery,
        properties,
        goals,
        keeps_progress,
        walk,
        until,
        until_all,
        flaw: opts.flaw,
        slices: opts.slices,
        workers: cluster.workers,
        start: Instant::now(),
    });
    let (builders, others) = net::allocators(&cluster)?;
    // A process that goes away makes timely's threads panic: said as an
    // error instead (`lost_peer.rs`).
    lost_peer::install();
    let _ = lost_peer::take();
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_workers(
            builders,
            others,
            shared,
            opts.stop,
            opts.on_progress,
            started,
        )
    }));
    if let Some(failure) = lost_peer::take() {
        return Err(format!(
            "the connection to another process of the distributed check failed ({failure}): \
             a process went away or the network between them failed; the check cannot go on \
             (start every process again)"
        ));
    }
    match ran {
        Ok(result) => result,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Runs the workers of this process to the end, relaying their figures.
fn run_workers<M>(
    builders: Vec<timely::communication::AllocatorBuilder>,
    others: Box<dyn std::any::Any + Send>,
    shared: Arc<Shared<M>>,
    stop_when: &(dyn Fn(&SearchProgress) -> bool + Sync),
    on_progress: &mut dyn FnMut(&SearchProgress),
    started: Instant,
) -> Result<Option<Outcome<M>>, String>
where
    M: Checkable + 'static,
    M::State: Serialize + DeserializeOwned + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel::<SearchProgress>();
    let worker_stop = Arc::clone(&stop);
    let tx = std::sync::Mutex::new(tx);
    let guards = timely::execute::execute_from(
        builders,
        others,
        timely::WorkerConfig::default(),
        move |w| {
            let tx = tx.lock().expect("not poisoned").clone();
            worker::run(w, &shared, &worker_stop, tx)
        },
    )?;
    // Relay the workers' figures and ask `stop` until they are done.
    let mut last = SearchProgress::default();
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(p) => {
                last = p;
                on_progress(&p);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
        // Time goes on between the workers' reports.
        let mut now = last;
        now.seconds = now.seconds.max(started.elapsed().as_secs_f64());
        if stop_when(&now) {
            stop.store(true, Ordering::Relaxed);
        }
        if guards.guards().iter().all(|g| g.is_finished()) {
            while let Ok(p) = rx.try_recv() {
                on_progress(&p);
            }
            break;
        }
    }
    let mut outcome = None;
    for result in guards.join() {
        match result {
            Ok(Ok(Some(o))) => outcome = Some(o),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => return Err(e),
            Err(panic) => return Err(format!("a worker panicked: {panic}")),
        }
    }
    Ok(outcome)
}
