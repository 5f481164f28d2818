//! What a whole check says, whichever engine ran it: the single-process
//! search and progress check over one state graph ([`Outcome::of_graph`]),
//! or the distributed one (`distributed/`), whose workers each hold part
//! of the graph. A report built from an outcome is the same for both.

use crate::graph::Graph;
use crate::memory::{Budget, Footprint, OverBudget, Step};
use crate::progress::{self, ProgressReport};
use crate::search::{Completion, SearchProgress};
use crate::{Checkable, Goal, Trace, Verdict};
use stateright::Property;

/// A check's answers.
pub struct Outcome<M: Checkable> {
    /// The properties evaluated, in the order of `first` and `verdicts`.
    pub properties: Vec<Property<M>>,
    /// The progress goals recorded.
    pub goals: Vec<Goal<M>>,
    /// Per property: the path to the first state in search order that
    /// breaks it (always) or satisfies it (sometimes).
    pub first: Vec<Option<Trace<M>>>,
    pub verdicts: Vec<Verdict>,
    pub completion: Completion,
    /// The search's figures at its end.
    pub progress: SearchProgress,
    /// The progress check, when the search kept its fault-free edges and
    /// saw every state.
    pub check: Option<ProgressReport<M>>,
    /// Bytes held by the state graph (by every worker, added up).
    pub graph_bytes: u64,
    /// The most the single-process engine held, part by part, the progress
    /// check's buffers counted as queue (None: the distributed engine,
    /// which does not count its parts).
    pub footprint: Option<Footprint>,
    /// The most it held at one moment, by its count.
    pub counted_peak: Option<u64>,
    /// Why the run stopped for its memory budget, if it did: the search
    /// ([`Completion::OverBudget`]), or the progress check after a
    /// complete search (which then has no `check`).
    pub over_budget: Option<OverBudget>,
}

impl<M: Checkable> Outcome<M> {
    /// The outcome of a single-process search: its paths, and the progress
    /// check when the graph is complete and kept its edges
    /// (`before_check` is called just before it starts) and, under a
    /// `budget`, when what the check allocates fits beside the graph. The
    /// graph's index is released before the check, which needs none
    /// ([`Graph::release_index`]): the check's buffers take its place.
    pub fn of_graph(
        g: &mut Graph<M>,
        budget: Option<Budget>,
        before_check: impl FnOnce(),
    ) -> Outcome<M> {
        let first = g.first.iter().map(|f| f.map(|n| g.path_to(n))).collect();
        let graph_bytes = g.memory_bytes() as u64;
        let mut over_budget = g.over_budget;
        let held = g.footprint(&g.index);
        let mut footprint = g.peak.max(held);
        let mut counted_peak = g.peak_total.max(held.total());
        let wanted = g.keeps_progress && g.completion == Completion::Exhaustive;
        let check = if wanted {
            let with_check = Footprint {
                index: 0,
                queue: progress::check_bytes(g),
                ..held
            };
            match budget.filter(|b| !b.admits(with_check.total())) {
                Some(b) => {
                    over_budget = Some(OverBudget {
                        budget: b.bytes,
                        held,
                        next_step: with_check.total(),
                        next_step_budget: Budget::needed_for(with_check.total()),
                        step: Step::ProgressCheck,
                    });
                    None
                }
                None => {
                    g.release_index();
                    footprint = footprint.max(with_check);
                    counted_peak = counted_peak.max(with_check.total());
                    before_check();
                    Some(progress::check(g))
                }
            }
        } else {
            None
        };
        Outcome {
            properties: g.properties.clone(),
            goals: g.goals.clone(),
            first,
            verdicts: g.verdicts(),
            completion: g.completion,
            progress: g.progress,
            check,
            graph_bytes,
            footprint: Some(footprint),
            counted_peak: Some(counted_peak),
            over_budget,
        }
    }
}
