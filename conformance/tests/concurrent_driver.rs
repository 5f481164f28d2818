//! The concurrent driver: a workload with faults for a bounded time; no
//! acknowledged acks=all record may be lost, and nothing a consumer read
//! below a HW may change. Every run's trace is validated against the model
//! (`validated_run`), and a test below checks that every concurrent run in
//! the test suites goes through it.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::concurrent::{caught_in, end_state, run3, schedule};
use highwater::cluster::concurrent::{ConcurrentConfig, Fault, InjectedFault, RunReport};
use highwater::cluster::{Actor, Event};
use highwater::replication::{Acks, HwCheckpointPolicy};
use highwater_conformance::trace_validation::MisfitKind;

#[test]
fn acks_all_survives_crashes_and_failovers() {
    let faults = vec![
        Fault::CrashLeader { clean: false },
        Fault::CrashFollower { clean: false },
        Fault::CrashLeader { clean: true },
        Fault::CrashFollower { clean: true },
    ];
    let run = run3(None, |config| {
        config.producers = 2;
        config.consumers = 1;
        config.max_in_flight = 4;
        config.records_per_request = 2;
        config.duration = Duration::from_secs(2);
        // Producers run on until the schedule's first round was injected
        // and more than 100 records were acknowledged, however slow the
        // machine (producers once ran 21 s instead of 4 on 2 busy cores).
        config.until.acknowledged = Some(101);
        config.flush_interval = Some(Duration::from_millis(50));
        config.replication.replica_lag_time_max_ms = 300;
        // A hang guard: the settle phase ends as soon as it settles.
        config.settle_timeout = Duration::from_secs(60);
        config.faults = Some(schedule(300, 250, 150, faults));
    })
    .unwrap();
    let trace = run.trace();
    let report = run.fitted("acks=all with crashes");
    eprintln!(
        "acked {} of {} records in {:?}, {} consumed, crashes {:?}, errors {:?}, timeouts {}, settled {}, trace {} events",
        report.acked.len(),
        report.records_sent,
        report.produce_elapsed,
        report.consumed.len(),
        report.crashes,
        report.produce_errors,
        report.produce_timeouts,
        report.settled,
        trace.len()
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    if !report.settled {
        eprintln!("{:#?}\n{:#?}", report.controller, report.final_states);
        for e in trace.iter().rev().take(40).rev() {
            eprintln!("{} {:?} {:?}", e.seq, e.actor, e.event);
        }
    }
    assert!(
        report.settled,
        "every replica came back and caught up: {}",
        end_state(&report)
    );
    // The run lasts until each scheduled fault took effect once, in the
    // schedule's order (more follow if time allows): unclean and clean
    // crashes, of the leader and of a follower.
    let kinds: Vec<bool> = report.crashes.iter().map(|&(_, clean)| clean).collect();
    assert_eq!(
        kinds[..kinds.len().min(4)],
        [false, false, true, true],
        "the schedule's faults happened: {:?}",
        report.crashes
    );
    assert!(report.acked.len() > 100, "the workload made progress");
    assert_eq!(
        report.lost_acknowledged(),
        vec![],
        "acknowledged records lost"
    );
    assert_eq!(
        report.consumed_not_in_final_log(),
        vec![],
        "committed records rewritten"
    );
    // Every replica ends with the same log.
    for log in &report.final_logs[1..] {
        assert_eq!(log, &report.final_logs[0]);
    }
    // Leadership changed, and the trace saw it.
    let epochs: Vec<_> = trace
        .iter()
        .filter(|e| e.actor == Actor::Controller)
        .filter_map(|e| match e.event {
            Event::ControllerElectLeader { epoch, .. } => Some(epoch),
            _ => None,
        })
        .collect();
    assert!(epochs.len() >= 2, "{epochs:?}");
    // The trace's order keeps every send before its receive.
    let mut served = std::collections::HashSet::new();
    let mut sent = std::collections::HashMap::<_, usize>::new();
    for (i, e) in trace.iter().enumerate() {
        assert_eq!(e.seq, i as u64);
        match (e.actor, &e.event) {
            (
                Actor::Replica(l),
                Event::FetchServed {
                    follower,
                    fetch_offset,
                    ..
                },
            ) => {
                served.insert((l, *follower, *fetch_offset));
            }
            (
                Actor::Replica(f),
                Event::FetchApplied {
                    leader,
                    fetch_offset,
                    ..
                },
            ) => {
                assert!(served.contains(&(*leader, f, *fetch_offset)), "{e:?}");
            }
            (Actor::Replica(l), Event::AlterPartitionSent { change }) => {
                *sent.entry((l, *change)).or_default() += 1;
            }
            (Actor::Controller, Event::ControllerAlterPartition { leader, change, .. }) => {
                let n = sent.entry((*leader, *change)).or_default();
                assert!(*n > 0, "{e:?}");
                *n -= 1;
            }
            _ => {}
        }
        if let Actor::Replica(_) = e.actor {
            assert!(e.controller.is_none());
        }
    }
    // The streamed trace read back whole, with the state after each event.
    assert!(trace.iter().any(|e| e.replica.is_some()));
}

/// A run shorter than its fault schedule still injects each of the
/// schedule's faults once, in order: producers run until the first round
/// is done (here 0.1 s of producing asked for, the first fault at 0.3 s).
/// Before, the run ended when its duration did, with the faults a loaded
/// machine had time for.
#[test]
fn a_run_lasts_until_each_scheduled_fault_was_injected() {
    let faults = vec![
        Fault::CrashLeader { clean: true },
        Fault::CrashFollower { clean: false },
    ];
    let report = run3(None, |config| {
        config.duration = Duration::from_millis(100);
        config.consumers = 1;
        // A light load, so that a restarted broker catches up soon however
        // loaded the machine: the test is about the schedule.
        config.max_records = Some(200);
        config.settle_timeout = Duration::from_secs(60);
        config.faults = Some(schedule(300, 100, 50, faults));
    })
    .unwrap()
    .fitted("a run shorter than its schedule");
    let kinds: Vec<bool> = report.crashes.iter().map(|&(_, clean)| clean).collect();
    assert_eq!(
        kinds[..kinds.len().min(2)],
        [true, false],
        "{:?}",
        report.crashes
    );
    assert!(report.produce_elapsed >= Duration::from_millis(300));
    assert!(
        report.settled,
        "every replica came back and caught up: {}",
        end_state(&report)
    );
    assert_eq!(
        report.lost_acknowledged(),
        vec![],
        "acknowledged records lost"
    );
}

#[test]
fn acks_1_without_faults_loses_nothing_and_acks_0_gets_no_answers() {
    for acks in [Acks::Leader, Acks::None] {
        let report = run3(None, |config| {
            config.acks = acks;
            config.duration = Duration::from_millis(100);
            // Until 10 records are acknowledged (acks=0: in the leader's
            // log), however slow the machine.
            config.until.acknowledged = Some(10);
            config.settle_timeout = Duration::from_secs(60);
        })
        .unwrap()
        .fitted(&format!("{acks:?} without faults"));
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert!(report.settled, "{}", end_state(&report));
        assert_eq!(report.lost_acknowledged(), vec![]);
        if acks == Acks::None {
            assert!(report.acked.is_empty());
            // Every replica settled at the leader's log, which held 10.
            assert!(report.final_logs[0].len() >= 10, "{:?}", report.final_logs);
        } else {
            assert!(report.acked.len() >= 10, "{}", report.acked.len());
        }
    }
}

// --- An HW whose checkpoint failed is never published ---------------------------

/// A run in which every HW checkpoint fails while producers run (fault
/// injection: the storage layer sets the HW, the write fails, the HW is
/// set back, as `DiskLog` does), so every leader that tries to advance its
/// HW goes offline; `inject` may bring back the old order. The HW is
/// checkpointed with every change (`HwCheckpointPolicy::EveryChange`: the
/// HW and its checkpoint one operation); under the periodic default no
/// checkpoint comes within the run.
fn failing_checkpoints(inject: Option<InjectedFault>) -> RunReport {
    let report = run3(None, |config| checkpoints_fail(config, inject))
        .unwrap()
        .fitted("failing HW checkpoints");
    let failures = report
        .errors
        .iter()
        .filter(|e| e.contains("injected checkpoint failure"))
        .count();
    eprintln!(
        "{failures} failed checkpoints, {} records consumed, logs of {:?} records",
        report.consumed.len(),
        report.final_logs.iter().map(Vec::len).collect::<Vec<_>>()
    );
    assert!(failures >= 1, "a checkpoint failed: {:?}", report.errors);
    assert!(
        report.final_logs.iter().any(|l| !l.is_empty()),
        "records were written, to be read below an HW"
    );
    report
}

/// [`failing_checkpoints`]' configuration.
fn checkpoints_fail(config: &mut ConcurrentConfig, inject: Option<InjectedFault>) {
    config.replication.hw_checkpoint = HwCheckpointPolicy::EveryChange;
    // At least until a leader set an HW and its checkpoint failed,
    // however slow the machine (a fixed 400 ms once set none, 2 tries
    // in 10 under a load of 5); 1.5 s for the chances of more.
    config.duration = Duration::from_millis(1500);
    config.until.checkpoint_failures = Some(1);
    config.consumers = 2;
    config.hw_checkpoints_fail = true;
    config.settle_timeout = Duration::from_secs(60);
    config.inject = inject;
}

/// Every HW a leader set while producers ran failed its checkpoint: no
/// consumer read anything (a consumer reads below the HW the replica
/// publishes once the operation, checkpoint included, completed).
#[test]
fn consumers_never_see_an_hw_whose_checkpoint_failed() {
    let report = failing_checkpoints(None);
    assert_eq!(
        report.consumed,
        vec![],
        "read below a failed checkpoint's HW"
    );
    assert!(
        report.settled,
        "the partition healed once checkpoints worked: {}",
        end_state(&report)
    );
}

/// The old order (consumers read the HW the storage layer publishes as it
/// is set, before the checkpoint): the check above catches it.
#[test]
fn reading_the_hw_before_its_checkpoint_is_caught() {
    let fault = Some(InjectedFault::HwPublishedBeforeCheckpoint);
    caught_in(5, "a read below a failed checkpoint's HW", || {
        let run = run3(None, |c| checkpoints_fail(c, fault)).unwrap();
        match run.run.report.consumed.len() {
            0 => Ok(()),
            n => Err(format!("{n} records read below a failed checkpoint's HW")),
        }
    });
    // Trace validation catches it too, on its own: the read is of records
    // below an HW no traced event set (`Event::ConsumerRead`).
    caught_in(
        5,
        "a read below a failed checkpoint's HW, by trace validation",
        || {
            let run = run3(None, |c| checkpoints_fail(c, fault)).unwrap();
            match run.run.validation {
                Err(m) if m.kind == MisfitKind::DoesNotFit => Err(m.to_string()),
                _ => Ok(()),
            }
        },
    );
}

// --- Every concurrent run in the test suites is validated ----------------------

/// Where a test could start a concurrent run without validating it: a call
/// of (or an import of) `concurrent::run`, or of `run_and_validate`, which
/// validates only a trace the caller asked for. Every run goes through
/// `validated_run` instead, which streams and validates the trace whatever
/// the configuration said.
fn unvalidated_runs(files: &[(PathBuf, String)]) -> Vec<String> {
    // Spelt in pieces, so that this file does not find itself.
    let (direct, unchecked) = (
        concat!("concurrent::", "run"),
        concat!("run_and_", "validate("),
    );
    let mut found = Vec::new();
    for (path, text) in files {
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let imports_run = code.contains("concurrent::{")
                && code
                    .split(['{', '}', ',', ' '])
                    .any(|w| w.trim() == "run" || w.trim() == "self");
            if code.contains(direct) || code.contains(unchecked) || imports_run {
                found.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
        }
    }
}

/// The test suites of every crate (and the unit tests in the sources): no
/// concurrent run in them escapes trace validation. The driver itself and
/// the validation helpers are the only places allowed (the soak binary,
/// conformance/src/bin/highwater-soak.rs, and the bench validate every
/// trace they make).
#[test]
fn every_concurrent_run_in_the_tests_is_validated() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["impl", "conformance", "model"] {
        rust_files(&root.join(dir).join("tests"), &mut files);
        rust_files(&root.join(dir).join("src"), &mut files);
    }
    assert!(files.len() > 50, "the sources were found: {}", files.len());
    let allowed = [
        "impl/src/cluster/concurrent/",
        "conformance/src/trace_validation/mod.rs",
    ];
    files.retain(|(p, _)| {
        let p = p.to_string_lossy().replace('\\', "/");
        !allowed.iter().any(|a| p.contains(a))
    });
    assert_eq!(unvalidated_runs(&files), Vec::<String>::new());
}

/// The check above finds a direct run, an imported one, and a run whose
/// trace validation depends on its configuration.
#[test]
fn a_concurrent_run_that_escapes_validation_is_found() {
    // Spelt in pieces, so that the check does not find this file.
    let file = |a: &str, b: &str| vec![(PathBuf::from("t.rs"), format!("{a}{b}"))];
    let found = |a, b| unvalidated_runs(&file(a, b)).len();
    assert_eq!(found("let r = concurrent::", "run(dir, config);"), 1);
    assert_eq!(
        found("use highwater::cluster::concurrent::", "{self, Fault};"),
        1
    );
    assert_eq!(
        found("use highwater::cluster::concurrent::", "{run, Fault};"),
        1
    );
    assert_eq!(found("let r = run_and_", "validate(&config, dir);"), 1);
    assert_eq!(found("let r = validated_", "run(config, dir);"), 0);
    assert_eq!(found("// concurrent::", "run(dir, config)"), 0);
}
