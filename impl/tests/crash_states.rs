//! Crash-state enumeration of the storage layer (see `enumerate/mod.rs`
//! for the model and the properties checked).
//!
//! The workload: appends in three leader epochs, flushes and broker
//! checkpoints, two rolls, a truncation that deletes a segment and cuts
//! another, more appends, and a retention deletion (DeleteRecords) of the
//! first segment. `flush_every` appends go unflushed between flushes: the
//! more, the more crash states.
//!
//! CI runs every crash state of the workload with 1200-byte segments and
//! 2, 4 and 6 unflushed appends, 4000-byte segments and 8, 8000-byte
//! segments and 10 (85,342 states), then states of the large one
//! (12000-byte segments, 12 unflushed appends: 753,109 states) until at
//! least 100,000 in all, and prints the counts and the time. Every state of
//! the large workload:
//!
//! ```sh
//! cargo test --release -p highwater --test crash_states -- --ignored --nocapture
//! ```

mod enumerate;
#[path = "../../testkit/long_tier.rs"]
mod long_tier;

use enumerate::*;
use highwater::storage::fs::FsOp;
use highwater::storage::{LogConfig, TopicPartition};

fn config(segment_bytes: u32) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 200,
        segment_index_bytes: 1024,
        retention_ms: None,
        ..LogConfig::default()
    }
}

/// The workload, with a flush (and checkpoint) after every `flush_every`
/// appends, rolling at `segment_bytes`.
fn workload(root: &std::path::Path, segment_bytes: u32, flush_every: u64) -> Recorded {
    let mut r = Recorder::open(
        root,
        TopicPartition::new("crash", 0).unwrap(),
        config(segment_bytes),
    );
    let mut i = 0;
    let mut since_flush = 0;
    let mut append = |r: &mut Recorder, epoch: i32| {
        r.step(&format!("append batch {i} in epoch {epoch}"), |r| {
            r.log().append(&batch(i), epoch).expect("append");
        });
        i += 1;
        since_flush += 1;
        if since_flush == flush_every {
            since_flush = 0;
            r.step("flush and checkpoint", |r| {
                let leo = r.log().log_end_offset();
                r.log().flush(leo).expect("flush");
                r.checkpoint();
            });
        }
    };
    while r.log().segments().len() < 3 {
        let epoch = if r.log().segments().len() < 2 { 0 } else { 1 };
        append(&mut r, epoch);
    }
    // Truncate into the middle segment: the last segment is deleted, the
    // middle one cut.
    let middle = r.log().segments()[1].clone();
    let target = r
        .log()
        .reader()
        .lookup(middle.base_offset + 1)
        .map(|p| p.batch_last_offset + 1)
        .unwrap_or(middle.base_offset)
        .min(middle.next_offset - 1);
    r.step(&format!("truncate to {target}"), |r| {
        r.log().truncate_to(target).expect("truncate");
        r.checkpoint();
    });
    for _ in 0..3 {
        append(&mut r, 2);
    }
    r.step("high watermark to the log end, flush, checkpoint", |r| {
        let leo = r.log().log_end_offset();
        r.log().set_high_watermark(leo).unwrap();
        r.log().flush(leo).unwrap();
        r.checkpoint();
    });
    r.step("delete records below the second segment", |r| {
        let second = r.log().segments()[1].base_offset;
        let report = r.log().delete_records_before(second).expect("retention");
        assert_eq!(report.deleted_segments, vec![0]);
        r.checkpoint();
    });
    r.finish()
}

/// [`workload`] recorded in a directory that lives as long as it.
fn recorded(segment_bytes: u32, flush_every: u64) -> (tempfile::TempDir, Recorded) {
    let rec = tempfile::tempdir().unwrap();
    let w = workload(&rec.path().join("broker"), segment_bytes, flush_every);
    (rec, w)
}

/// The small workload: 1200-byte segments, a flush every 2 appends.
fn small_workload() -> (tempfile::TempDir, Recorded) {
    recorded(1200, 2)
}

/// Enumerates every crash state of `w`, a broken variant named `what`,
/// and asserts that some failure carries every one of `marks`.
fn assert_caught(what: &str, w: &Recorded, marks: &[&str]) {
    let scratch = scratch();
    let o = enumerate(w, scratch.path(), 2, None);
    eprintln!("crash_states: {}", summary(what, w, &o));
    assert!(
        o.failures
            .iter()
            .any(|f| marks.iter().all(|m| f.contains(m))),
        "{what} went unnoticed: {:?}",
        o.failures
    );
}

fn summary(name: &str, w: &Recorded, o: &Outcome) -> String {
    format!(
        "{name}: {} file operations, {} steps; {} crash states enumerated, {} distinct recovered and checked, \
         {:.1} s, {:.0} states/s, {:.0} recoveries/s",
        w.ops.len(),
        w.steps.len(),
        o.states,
        o.recovered,
        o.elapsed.as_secs_f64(),
        o.states as f64 / o.elapsed.as_secs_f64(),
        o.recovered as f64 / o.elapsed.as_secs_f64()
    )
}

fn kinds(w: &Recorded) -> [usize; 4] {
    let mut k = [0; 4];
    for op in &w.ops {
        match op {
            FsOp::Write { .. } => k[0] += 1,
            FsOp::Fsync { .. } => k[1] += 1,
            FsOp::Remove { .. } => k[2] += 1,
            FsOp::Rename { .. } => k[3] += 1,
            _ => {}
        }
    }
    k
}

/// The crash states of the workloads in order, each whole until the
/// budget runs out and the last a prefix: 100,000 states in the long tier
/// (five whole, a prefix of the large one), 20,000 in the README's test
/// command (four whole, a prefix of the fifth).
#[test]
fn every_crash_state_recovers() {
    let scratch = scratch();
    let budget: u64 = if long_tier::running() {
        100_000
    } else {
        20_000
    };
    let mut total = 0;
    let mut lines = Vec::new();
    for (segment_bytes, flush_every) in WORKLOADS {
        if total >= budget {
            break;
        }
        let (_rec, w) = recorded(segment_bytes, flush_every);
        let [writes, fsyncs, removes, renames] = kinds(&w);
        assert!(writes > 0 && fsyncs > 0 && removes > 0 && renames > 0);
        let o = enumerate(&w, scratch.path(), 2, Some(budget - total));
        let all = count_states(&w);
        let name = format!(
            "{segment_bytes}-byte segments, flush every {flush_every} appends ({} of {all} states)",
            if o.states == all { "all" } else { "a prefix" }
        );
        lines.push(summary(&name, &w, &o));
        assert!(
            o.failures.is_empty(),
            "{}\n{}",
            lines.join("\n"),
            o.failures.join("\n")
        );
        total += o.states;
    }
    for l in &lines {
        eprintln!("crash_states: {l}");
    }
    assert!(total >= budget, "{total} states");
}

/// The large workload: segment bytes, appends between flushes.
const LARGE: (u32, u64) = (12000, 12);

/// Every workload enumerated, smallest first.
const WORKLOADS: [(u32, u64); 6] = [
    (1200, 2),
    (1200, 4),
    (1200, 6),
    (4000, 8),
    (8000, 10),
    LARGE,
];

/// Every crash state of the large workload.
#[test]
#[ignore = "the full enumeration: minutes; run with --ignored"]
fn every_crash_state_of_the_large_workload_recovers() {
    let scratch = scratch();
    let (_rec, w) = recorded(LARGE.0, LARGE.1);
    let o = enumerate(&w, scratch.path(), 2, None);
    eprintln!(
        "crash_states: {}",
        summary("large workload (all states)", &w, &o)
    );
    assert_eq!(o.states, count_states(&w));
    assert!(o.failures.is_empty(), "{}", o.failures.join("\n"));
}

/// The harness catches finding 1 of issue 10 put back: the same workload
/// with the truncation's operations in the old order (the segment cut and
/// synced first, later segments deleted after) has crash states with a gap,
/// which recovery refuses.
#[test]
fn the_old_truncation_order_is_caught() {
    let (_rec, mut w) = small_workload();
    let t = w
        .steps
        .iter()
        .position(|s| s.name.starts_with("truncate"))
        .unwrap();
    let (from, to) = (w.steps[t - 1].ops_end, w.steps[t].ops_end);
    // The truncation: removes of the later segment, a directory sync, then
    // the cut; move the removes and their sync after the cut.
    let ops: Vec<FsOp> = w.ops[from..to].to_vec();
    let first_cut = ops
        .iter()
        .position(|op| matches!(op, FsOp::SetLen { .. }))
        .expect("a cut");
    let deletion: Vec<FsOp> = ops[..first_cut].to_vec();
    assert!(deletion.iter().any(|op| matches!(op, FsOp::Remove { .. })));
    let mut reordered = ops[first_cut..].to_vec();
    let checkpoint_at = reordered
        .iter()
        .position(
            |op| matches!(op, FsOp::Create { path } if path.to_string_lossy().ends_with(".tmp")),
        )
        .unwrap_or(reordered.len());
    reordered.splice(checkpoint_at..checkpoint_at, deletion);
    w.ops.splice(from..to, reordered);
    assert_caught(
        "the old truncation order",
        &w,
        &["recovery failed", "does not follow"],
    );
}

#[test]
#[ignore = "prints the size of each workload's crash-state space"]
fn state_counts() {
    for (b, f) in WORKLOADS {
        let (_rec, w) = recorded(b, f);
        eprintln!(
            "crash_states: {b}-byte segments, flush every {f}: {} ops, {} states",
            w.ops.len(),
            count_states(&w)
        );
    }
}

/// The harness's own checks can fail: the same recorded workload with its
/// expected states doctored (every batch's epoch shifted, so no recovered
/// record matches any state passed through; everything claimed flushed, so
/// any crash before the end loses "flushed" data) must be reported by
/// checks 3 and 4 of `enumerate/mod.rs`.
#[test]
fn doctored_expectations_are_caught() {
    let (_rec, w) = small_workload();

    let mut shifted = w.clone();
    for s in &mut shifted.steps {
        for e in &mut s.after.entries {
            e.1 += 100;
        }
    }
    assert_caught(
        "shifted epochs",
        &shifted,
        &["is no prefix of a state the workload passed through"],
    );

    let mut all_flushed = w;
    for s in &mut all_flushed.steps {
        s.after.durable = u64::MAX;
    }
    assert_caught(
        "a lost flush",
        &all_flushed,
        &["was flushed before the crash"],
    );
}

/// Enumerates the small workload (1200-byte segments, a flush every 2
/// appends) unbroken and with `doctor`: the unbroken run must pass, the
/// doctored one fail, and every failure must carry `mark`, the message of
/// the check the doctor aims at (no earlier check may fire instead).
fn doctored_run_is_caught(doctor: Doctor, mark: &str) {
    let (_rec, w) = small_workload();
    let scratch = scratch();
    let clean = enumerate(&w, scratch.path(), 2, None);
    assert!(clean.failures.is_empty(), "{:?}", clean.failures);
    let o = enumerate_doctored(&w, scratch.path(), 2, None, doctor);
    eprintln!(
        "crash_states: {doctor:?}: {} of {} recovered states caught",
        o.failed, o.recovered
    );
    if let Some(f) = o.failures.first() {
        eprintln!("crash_states:   e.g. {f}");
    }
    assert!(o.failed > 0, "{doctor:?} went unnoticed");
    assert!(
        o.failures.iter().all(|f| f.contains(mark)),
        "{doctor:?} reported by another check: {:?}",
        o.failures
    );
}

/// Check 5 (indexes consistent) catches an `.index` entry that does not
/// name a batch, left on disk after recovery.
#[test]
fn a_corrupt_index_entry_is_caught() {
    doctored_run_is_caught(Doctor::IndexEntry, "does not name a batch ending at");
}

/// Check 5 also catches, in the loaded index, a bad `.index` entry that
/// recovery does not look at: not the last of a segment below the recovery
/// point.
#[test]
fn a_corrupt_index_entry_recovery_keeps_is_caught() {
    doctored_run_is_caught(Doctor::IndexEntryBeforeRecovery, "lookup of");
}

/// Check 6 (the epoch cache is what the batches say) catches a
/// `leader-epoch-checkpoint` that lost every entry after its first, which
/// recovery keeps where the later epochs' batches are below the recovery
/// point.
#[test]
fn a_missing_epoch_entry_is_caught() {
    doctored_run_is_caught(Doctor::EpochEntry, "but the batches say");
}

/// Check 7 (a second recovery is a no-op) catches a first recovery that
/// leaves a torn tail for the second to cut.
#[test]
fn a_second_recovery_that_cuts_is_caught() {
    doctored_run_is_caught(
        Doctor::TornTailAfterRecovery,
        "the second recovery cut data",
    );
}

/// Check 7's file comparison catches a first recovery that leaves a stray
/// file for the second to delete (no cut, the same records).
#[test]
fn a_second_recovery_that_deletes_is_caught() {
    doctored_run_is_caught(
        Doctor::StrayFileAfterRecovery,
        "the second recovery changed the log",
    );
}
