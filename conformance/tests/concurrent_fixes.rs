//! The faults issue 12 found in the concurrent driver, each fixed and
//! asserted by a test, and each brought back (`ConcurrentConfig::regress`,
//! a test-only switch) to show that the test's check catches it. Every run
//! is trace-validated (`validated_run`).

use std::time::Duration;

use highwater::cluster::concurrent::{
    read_trace_file, ConcurrentConfig, Fault, FaultSchedule, Regression, RunReport,
};
use highwater::cluster::Event;
use highwater_conformance::trace_validation::{validated_run, ValidatedRun};

// --- A failed clean shutdown reaches the protocol ------------------------------

/// Leaders shut down cleanly on a full disk: the shutdown fails.
fn full_disk_shutdowns(regress: Option<Regression>) -> (ValidatedRun, Vec<Event>) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ConcurrentConfig::new(3);
    config.duration = Duration::from_millis(800);
    config.consumers = 1;
    config.settle_timeout = Duration::from_secs(5);
    config.replication.replica_lag_time_max_ms = 200;
    config.faults = Some(FaultSchedule {
        first_after: Duration::from_millis(100),
        every: Duration::from_millis(150),
        down_for: Duration::from_millis(100),
        faults: vec![Fault::CrashLeaderOnFullDisk],
    });
    config.regress = regress;
    let run = validated_run(config, dir.path()).unwrap();
    let events = read_trace_file(&dir.path().join("trace.jsonl"))
        .unwrap()
        .flatten()
        .map(|e| e.event)
        .collect();
    (run, events)
}

/// What the fix promises: the trace fits the model (the crash is in it,
/// and the controller heard), every failed shutdown came back as an
/// unclean one (KIP-966's rule for a broker that did not shut down
/// cleanly), and the partition healed.
fn failed_shutdowns_reach_the_protocol(run: &ValidatedRun, events: &[Event]) -> Result<(), String> {
    run.events_validated()
        .map_err(|m| format!("the trace does not fit:\n{m}"))?;
    let failed = run
        .report
        .errors
        .iter()
        .filter(|e| e.contains("no space left"))
        .count();
    let unclean = events
        .iter()
        .filter(|e| matches!(e, Event::BrokerRegistered { unclean: true, .. }))
        .count();
    if failed == 0 {
        return Err("no shutdown failed".into());
    }
    if unclean < failed {
        return Err(format!(
            "{failed} shutdowns failed, {unclean} brokers came back unclean"
        ));
    }
    if !run.report.settled {
        return Err("the partition did not heal".into());
    }
    Ok(())
}

#[test]
fn a_clean_shutdown_that_fails_on_a_full_disk_reaches_the_protocol() {
    let (run, events) = full_disk_shutdowns(None);
    eprintln!("errors {:?}", run.report.errors);
    failed_shutdowns_reach_the_protocol(&run, &events).unwrap();
}

#[test]
fn a_crash_returning_early_on_a_failed_shutdown_is_caught() {
    let (run, events) = full_disk_shutdowns(Some(Regression::CrashReturnsEarlyOnError));
    let caught = failed_shutdowns_reach_the_protocol(&run, &events)
        .expect_err("the early return went unnoticed");
    eprintln!(
        "caught: {}",
        caught.lines().take(12).collect::<Vec<_>>().join("\n")
    );
}

// --- The leader's ISR copy converges; producers back off ----------------------

/// Leaders and followers crash, one at a time; with `min_isr` 3 every
/// follower crash leaves the ISR too small, and acks=all requests are
/// refused at once (NotEnoughReplicas) until it is back.
fn crashes(regress: Option<Regression>, min_isr: usize) -> (ConcurrentConfig, RunReport) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ConcurrentConfig::new(3);
    config.replication.min_insync_replicas = min_isr;
    config.duration = Duration::from_millis(1500);
    config.consumers = 1;
    config.replication.replica_lag_time_max_ms = 200;
    config.faults = Some(FaultSchedule {
        first_after: Duration::from_millis(100),
        every: Duration::from_millis(150),
        down_for: Duration::from_millis(100),
        faults: vec![
            Fault::CrashFollower { clean: false },
            Fault::CrashLeader { clean: true },
            Fault::CrashFollower { clean: true },
        ],
    });
    config.regress = regress;
    let report = validated_run(config.clone(), dir.path())
        .unwrap()
        .fitted(&format!("crashes, {regress:?}"));
    (config, report)
}

/// One error answer per request in flight per backoff period, at most
/// (plus a few per crash).
fn producers_backed_off(config: &ConcurrentConfig, report: &RunReport) -> Result<(), String> {
    let errors: u64 = report.produce_errors.values().sum();
    let periods = config.duration.as_millis() as u64 / 10 + 1;
    let bound = periods * config.max_in_flight as u64 + report.crashes.len() as u64 * 4;
    eprintln!(
        "{} requests, {errors} error answers {:?}",
        report.requests_sent, report.produce_errors
    );
    if errors > bound {
        return Err(format!("{errors} error answers, more than {bound}"));
    }
    Ok(())
}

/// The leader's ISR copy at the end is the controller's ISR.
fn isr_copy_converged(report: &RunReport) -> Result<(), String> {
    let leader = report.controller.leader.ok_or("no leader at the end")?;
    let copy = report.final_states[leader as usize]
        .as_ref()
        .ok_or("the leader is down")?
        .isr
        .clone();
    if copy != report.controller.isr {
        return Err(format!(
            "the leader's ISR copy {copy:?}, the controller's {:?}",
            report.controller.isr
        ));
    }
    Ok(())
}

/// After crashes of leaders and followers: the leader's ISR copy converges
/// to the controller's (it learns from the metadata, not from one message
/// that can be lost).
#[test]
fn the_leaders_isr_copy_converges() {
    let (_, report) = crashes(None, 2);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.settled, "the partition healed");
    isr_copy_converged(&report).unwrap();
}

/// Producers back off after error answers instead of spinning on them
/// (NotEnoughReplicas while a follower is down under min.insync.replicas
/// 3; NotLeaderOrFollower while leadership moves).
#[test]
fn producers_back_off_after_error_answers() {
    let (config, report) = crashes(None, 3);
    assert!(report.settled, "the partition healed");
    assert!(
        !report.produce_errors.is_empty(),
        "error answers to back off from"
    );
    producers_backed_off(&config, &report).unwrap();
}

/// Caught in one of a few runs (a run on a loaded machine may make too
/// few requests to spin).
#[test]
fn producers_without_backoff_are_caught() {
    let caught = (0..3).any(|_| {
        let (config, report) = crashes(Some(Regression::NoProducerBackoff), 3);
        producers_backed_off(&config, &report).is_err()
    });
    assert!(caught, "no spinning producer seen");
}
