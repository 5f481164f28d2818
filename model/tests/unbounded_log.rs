//! The unbounded log (`shape.rs`) holds its entries in shared chunks and
//! keeps where each epoch's run begins. Random appends and truncations,
//! on a log and on copies of it that share its chunks, must leave it
//! behaving as a plain list of entries: the same entries, the same runs as
//! read from the entries, the same common prefix and agreement with another
//! log, equal exactly when the lists are, and the same least and greatest
//! record id in each chunk; and the records table's chunk summaries never
//! pass over a record that is not visible.

use highwater_model::shape::UnboundedLog;
use highwater_model::state::{Entry, LogStore, Unbounded};
use proptest::prelude::*;

/// The runs of `entries`, read from them.
fn runs(entries: &[Entry<Unbounded>]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if i == 0 || entries[i - 1].epoch != e.epoch {
            out.push((e.epoch, i as u32));
        }
    }
    out
}

/// A log that forgets to drop its runs when it is truncated: the check
/// below must tell it apart.
#[derive(Clone, Default, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct StaleRuns {
    log: UnboundedLog,
    runs: Vec<(u32, u32)>,
}

impl LogStore<Unbounded> for StaleRuns {
    fn len(&self) -> usize {
        self.log.len()
    }
    fn get(&self, offset: u32) -> Option<Entry<Unbounded>> {
        self.log.get(offset)
    }
    fn iter_from(&self, from: usize) -> impl Iterator<Item = Entry<Unbounded>> + '_ {
        self.log.iter_from(from)
    }
    fn append(&mut self, entry: Entry<Unbounded>) {
        self.log.append(entry);
        self.runs = self.log.epoch_starts().collect();
    }
    fn truncate(&mut self, offset: u32) {
        self.log.truncate(offset);
    }
    fn from_entries(entries: Vec<Entry<Unbounded>>) -> Option<Self> {
        let log = UnboundedLog::from_entries(entries)?;
        let runs = log.epoch_starts().collect();
        Some(StaleRuns { log, runs })
    }
    fn epoch_starts(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.runs.iter().copied()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Append {
        epoch: u32,
        id: u32,
    },
    Truncate(u32),
    /// Goes on with a copy of the log (sharing its chunks), the original
    /// kept to compare with.
    Fork,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        8 => (0..4u32, 0..3u32).prop_map(|(epoch, id)| Op::Append { epoch, id }),
        1 => (0..300u32).prop_map(Op::Truncate),
        1 => Just(Op::Fork),
    ];
    prop::collection::vec(op, 0..600)
}

/// Runs `ops` on a log of type `L` and on a plain list side by side; the
/// first way they differ.
fn differs<L: LogStore<Unbounded>>(ops: &[Op]) -> Option<String> {
    let mut log = L::default();
    let mut list: Vec<Entry<Unbounded>> = Vec::new();
    let mut kept: Vec<(L, Vec<Entry<Unbounded>>)> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            // Any epoch: without KIP-320's fencing a log's epochs can fall.
            Op::Append { epoch, id } => {
                let e = Entry { id, epoch };
                log.append(e);
                list.push(e);
            }
            Op::Truncate(offset) => {
                log.truncate(offset);
                list.truncate(offset as usize);
            }
            Op::Fork => kept.push((log.clone(), list.clone())),
        }
        if log.iter().collect::<Vec<_>>() != list
            || log.len() != list.len()
            || log.last() != list.last().copied()
        {
            return Some(format!("step {step}: the entries differ"));
        }
        if log.epoch_starts().collect::<Vec<_>>() != runs(&list) {
            return Some(format!("step {step}: the runs differ from the entries'"));
        }
        // Read after every step, so that each span is worked out, then
        // written over.
        if let Some(why) = spans_differ(&log, &list) {
            return Some(format!("step {step}: {why}"));
        }
        for (other, other_list) in &kept {
            if let Some(why) = spans_differ(other, other_list) {
                return Some(format!("step {step}, a kept copy: {why}"));
            }
            let same = list
                .iter()
                .zip(other_list)
                .take_while(|(a, b)| a == b)
                .count();
            if log.common_prefix(other) != same {
                return Some(format!("step {step}: the common prefix differs"));
            }
            if (log == *other) != (list == *other_list) {
                return Some(format!("step {step}: equality differs"));
            }
            let n = list.len().min(other_list.len()) as u32;
            let agree = list[..n as usize] == other_list[..n as usize];
            if log.agrees_below(other, n) != agree || log.agrees_from(other, same, n) != agree {
                return Some(format!("step {step}: agreement below {n} differs"));
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_unbounded_log_behaves_as_a_list(ops in ops()) {
        if let Some(why) = differs::<UnboundedLog>(&ops) {
            prop_assert!(false, "{why}");
        }
    }

    #[test]
    fn record_spans_never_pass_an_unseen_record(
        writes in prop::collection::vec((0..300u16, prop::option::of(0..4u32)), 1..400),
        asks in prop::collection::vec((0..300u16, 0..300u16, 0..4u32), 1..20),
    ) {
        if let Some(why) = records_differ(&writes, &asks) {
            prop_assert!(false, "{why}");
        }
    }
}

/// The same check tells apart a log that keeps its runs past a truncation.
#[test]
fn a_log_that_keeps_its_runs_past_a_truncation_is_caught() {
    let ops = [
        Op::Append { epoch: 0, id: 0 },
        Op::Append { epoch: 1, id: 1 },
        Op::Truncate(1),
    ];
    assert!(differs::<UnboundedLog>(&ops).is_none());
    assert!(differs::<StaleRuns>(&ops).is_some());
}

// --- Chunk spans ------------------------------------------------------------------

/// Each run of the log (`LogStore::RUN` entries) says the least and
/// greatest record id it holds (`ids_in_run`) as the list does
/// (checked by `differs`).
/// A log that keeps no summaries (one run) has nothing to compare.
fn spans_differ<L: LogStore<Unbounded>>(log: &L, list: &[Entry<Unbounded>]) -> Option<String> {
    let run = L::RUN;
    if run == usize::MAX {
        return None;
    }
    for (r, chunk) in list.chunks(run).enumerate() {
        let lo = chunk.iter().map(|e| e.id as u64).min();
        let hi = chunk.iter().map(|e| e.id as u64).max();
        if log.ids_in_run(r) != lo.zip(hi) {
            return Some(format!(
                "run {r}: ids {:?}, the list's {:?}",
                log.ids_in_run(r),
                lo.zip(hi)
            ));
        }
    }
    None
}

/// The records' table: each record's visible epoch set at random, on a
/// table and a copy sharing its chunks; `keys_at_most` over random ranges
/// must never say yes where a record in the range is not visible at or
/// before the bound (it may say no: it reads only the chunks' spans).
fn records_differ(writes: &[(u16, Option<u32>)], asks: &[(u16, u16, u32)]) -> Option<String> {
    use highwater_model::shape::{RecordTable, UnboundedRecords};
    use highwater_model::state::RecordHistory;
    let mut table = UnboundedRecords::<RecordHistory<Unbounded>>::default();
    let mut list: Vec<Option<u32>> = Vec::new();
    let mut kept = Vec::new();
    for (i, &(id, visible)) in writes.iter().enumerate() {
        let id = id as usize;
        if list.len() <= id {
            list.resize(id + 1, None);
        }
        table.slot(id).visible = visible;
        list[id] = visible;
        if i % 7 == 0 {
            kept.push((table.clone(), list.clone()));
        }
        let (a, b, most) = asks[i % asks.len()];
        let (lo, hi) = (a.min(b) as usize, a.max(b) as usize);
        for (t, l) in std::iter::once((&table, &list)).chain(kept.iter().map(|(t, l)| (t, l))) {
            let truly = hi < l.len() && l[lo..=hi].iter().all(|v| v.is_some_and(|v| v <= most));
            if t.keys_at_most(lo..=hi, most as u64) && !truly {
                return Some(format!(
                    "write {i}: ids {lo}..={hi} said visible by {most}, they are not"
                ));
            }
        }
    }
    None
}

/// Chunks that keep their span when written (`keep_stale_spans`): the
/// same checks catch both tables.
#[test]
fn chunks_that_keep_a_stale_span_are_caught() {
    let ops = [
        Op::Append { epoch: 0, id: 5 },
        Op::Append { epoch: 0, id: 9 },
        Op::Truncate(1),
    ];
    let writes = [(0, Some(0)), (1, Some(0)), (1, None)];
    let asks = [(0, 1, 0)];
    assert!(differs::<UnboundedLog>(&ops).is_none());
    assert!(records_differ(&writes, &asks).is_none());
    highwater_model::shape::keep_stale_spans(true);
    let (log, records) = (
        differs::<UnboundedLog>(&ops),
        records_differ(&writes, &asks),
    );
    highwater_model::shape::keep_stale_spans(false);
    assert!(log.is_some(), "a stale log span went unnoticed");
    assert!(records.is_some(), "a stale record span went unnoticed");
    eprintln!("caught: {}; {}", log.unwrap(), records.unwrap());
}
