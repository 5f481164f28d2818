//! The search's memory: what the engine holds, part by part, and the
//! budget a run must stay within.
//!
//! The engine counts what it allocates by the state: the fingerprint
//! table, the graph's per-node arrays and edges, the queue of states
//! waiting to be expanded and the expansion's buffers. It counts what is
//! in use, as the system does: the table whole (it is zeroed when
//! allocated), arrays by their length (room a vector reserves is not
//! touched until written, and takes no memory until then). Before each
//! batch of states is merged, and before the table doubles (when memory
//! jumps: the old table and the new are held together while the entries
//! are copied), a run checks that what it would then hold fits the
//! budget; one that would not stops there with a partial answer
//! ([`OverBudget`]) instead of being killed by the system when memory runs
//! out. The budget is for the whole
//! process: a share of it ([`Budget::engine_limit`]) is kept for what the
//! engine does not count.

/// What the engine holds, in bytes, part by part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// The fingerprint table (`fingerprint_table.rs`).
    pub index: u64,
    /// The graph's per-node arrays: fingerprint, parent, depth, flags,
    /// edge start and count.
    pub nodes: u64,
    /// The graph's fault-free edges.
    pub edges: u64,
    /// States waiting to be expanded (packed, when the model packs:
    /// `queue.rs`), and the buffers of the expansion and of the progress
    /// check (a state's own bytes only: heap memory a state points to is
    /// not counted).
    pub queue: u64,
}

impl Footprint {
    pub fn total(&self) -> u64 {
        self.index + self.nodes + self.edges + self.queue
    }

    /// The graph alone (nodes and edges, without the index).
    pub fn graph(&self) -> u64 {
        self.nodes + self.edges
    }

    /// The larger of each part (the parts peak at different moments, so
    /// the total of this is an upper bound of any moment's total).
    pub fn max(self, other: Footprint) -> Footprint {
        Footprint {
            index: self.index.max(other.index),
            nodes: self.nodes.max(other.nodes),
            edges: self.edges.max(other.edges),
            queue: self.queue.max(other.queue),
        }
    }
}

/// How much memory a run may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Bytes the whole process may hold.
    pub bytes: u64,
    /// A mistake planted for the tests: [`BudgetFlaw::Unchecked`] never
    /// stops, so that a test can show its check failing without the
    /// budget.
    pub flaw: BudgetFlaw,
}

/// `Budget::flaw`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BudgetFlaw {
    #[default]
    None,
    /// The budget is never checked.
    Unchecked,
}

/// The share of the budget kept for what the engine does not count: the
/// program and its threads' stacks, the model's own allocations, the
/// allocator's slack. On `safe` the process's peak resident set was 1.05
/// times what the engine counted at its largest (README, "Memory"); an
/// eighth leaves room above that. Below some tens of MiB the program's own memory is most of it,
/// and a budget that small is kept by the engine's count only.
const UNCOUNTED_SHARE: u64 = 8;

impl Budget {
    pub fn new(bytes: u64) -> Budget {
        Budget {
            bytes,
            flaw: BudgetFlaw::None,
        }
    }

    /// What the engine's own count may reach.
    pub fn engine_limit(&self) -> u64 {
        self.bytes - self.bytes / UNCOUNTED_SHARE
    }

    /// Whether the engine may hold `counted` bytes (by its own count).
    pub fn admits(&self, counted: u64) -> bool {
        self.flaw == BudgetFlaw::Unchecked || counted <= self.engine_limit()
    }

    /// Whether a run estimated to need `estimate` bytes at its peak (whole
    /// process, [`estimate`]) is refused before it starts.
    pub fn refuses(&self, estimate: u64) -> bool {
        self.flaw != BudgetFlaw::Unchecked && estimate > self.bytes
    }

    /// The budget a process needs for the engine to count `counted` bytes:
    /// the inverse of [`engine_limit`](Self::engine_limit).
    pub fn needed_for(counted: u64) -> u64 {
        counted.saturating_mul(UNCOUNTED_SHARE) / (UNCOUNTED_SHARE - 1)
    }
}

/// Why a run stopped for its budget, and what it had reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverBudget {
    /// The budget, in bytes.
    pub budget: u64,
    /// What the engine held when it stopped.
    pub held: Footprint,
    /// What the step it did not take would have held at its largest, by
    /// the engine's count, and the budget that would have let it
    /// ([`Budget::needed_for`]).
    pub next_step: u64,
    pub next_step_budget: u64,
    /// The step not taken.
    pub step: Step,
}

/// The step a run stopped before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Growing the search (the index, the graph, the queue) for the next
    /// batch of states.
    Search,
    /// The progress check over the whole graph.
    ProgressCheck,
}

impl Step {
    pub fn text(self) -> &'static str {
        match self {
            Step::Search => "growing the search for its next batch of states",
            Step::ProgressCheck => "the progress check over the complete graph",
        }
    }
}

/// The bytes a search of `states` unique states is estimated to need at its
/// peak: `base` and `per_state` bytes a state (figures measured on similar
/// runs of the same model: what a run needs whatever its size, and what
/// each state adds).
pub fn estimate(states: u64, base: u64, per_state: u64) -> u64 {
    base.saturating_add(states.saturating_mul(per_state))
}

/// The bytes a vector of `T` holds at capacity `capacity`.
pub(crate) fn bytes_of<T>(capacity: usize) -> u64 {
    (capacity * std::mem::size_of::<T>()) as u64
}

/// The peak resident set of this process, in bytes (Linux's `VmHWM`;
/// None elsewhere).
pub fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_keeps_a_share_of_the_budget_for_what_it_does_not_count() {
        let b = Budget::new(1 << 30);
        assert!(b.admits(b.engine_limit()));
        assert!(!b.admits(b.engine_limit() + 1));
        assert!(Budget::needed_for(b.engine_limit()) <= b.bytes);
        let unchecked = Budget {
            flaw: BudgetFlaw::Unchecked,
            ..b
        };
        assert!(unchecked.admits(u64::MAX));
    }
}
