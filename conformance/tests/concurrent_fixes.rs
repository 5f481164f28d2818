//! The faults issue 12 found in the concurrent driver, each fixed and
//! asserted by a test, and each brought back (`ConcurrentConfig::regress`,
//! a test-only switch) to show that the test's check catches it. Every run
//! is trace-validated (`validated_run`).

mod common;

use std::time::Duration;

use common::concurrent::{caught_in, end_state, run3, schedule};
use highwater::cluster::concurrent::{Fault, Nemesis, NemesisFault, Regression, RunReport};
use highwater::cluster::{Actor, Event, TraceEntry};
use highwater_conformance::trace_validation::ValidatedRun;

// --- A failed clean shutdown reaches the protocol ------------------------------

/// Leaders shut down cleanly on a full disk: the shutdown fails.
fn full_disk_shutdowns(regress: Option<Regression>) -> (ValidatedRun, Vec<Event>) {
    let run = run3(regress, |config| {
        config.duration = Duration::from_millis(800);
        config.consumers = 1;
        // A hang guard: the settle phase ends as soon as it settles.
        config.settle_timeout = Duration::from_secs(60);
        config.replication.replica_lag_time_max_ms = 200;
        config.faults = Some(schedule(100, 150, 100, vec![Fault::CrashLeaderOnFullDisk]));
    })
    .unwrap();
    let events = run.trace().into_iter().map(|e| e.event).collect();
    (run.run, events)
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
        return Err(format!(
            "the partition did not heal: {}",
            end_state(&run.report)
        ));
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
    caught_in(1, "the early return", || {
        let (run, events) = full_disk_shutdowns(Some(Regression::CrashReturnsEarlyOnError));
        failed_shutdowns_reach_the_protocol(&run, &events)
    });
}

// --- The leader's ISR copy converges; producers back off ----------------------

/// Leaders and followers crash, one at a time; with `min_isr` 3 every
/// follower crash leaves the ISR too small, and acks=all requests are
/// refused at once (NotEnoughReplicas) until it is back.
fn crashes(regress: Option<Regression>, min_isr: usize) -> RunReport {
    let faults = vec![
        Fault::CrashFollower { clean: false },
        Fault::CrashLeader { clean: true },
        Fault::CrashFollower { clean: true },
    ];
    let run = run3(regress, |config| {
        config.replication.min_insync_replicas = min_isr;
        config.duration = Duration::from_millis(1500);
        config.consumers = 1;
        config.replication.replica_lag_time_max_ms = 200;
        config.settle_timeout = Duration::from_secs(60);
        config.faults = Some(schedule(100, 150, 100, faults));
    })
    .unwrap();
    run.fitted("crashes")
}

/// No request was sent sooner than the retry backoff after an error
/// answer (`RunReport::sent_within_backoff`: each producer compares the
/// time of each send with that of the last error answer it took in, on
/// the same monotonic clock its backoff waits on, so that the verdict does
/// not depend on how fast the machine spins; a rate bound on the error
/// answers once did, and a loaded machine spun too slowly to break it).
fn producers_backed_off(report: &RunReport) -> Result<(), String> {
    let errors: u64 = report.produce_errors.values().sum();
    eprintln!(
        "{} requests, {errors} error answers {:?}, {} sent within the backoff",
        report.requests_sent, report.produce_errors, report.sent_within_backoff
    );
    if report.sent_within_backoff > 0 {
        return Err(format!(
            "{} requests sent within the backoff after an error answer",
            report.sent_within_backoff
        ));
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
    let report = crashes(None, 2);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(
        report.settled,
        "the partition healed: {}",
        end_state(&report)
    );
    isr_copy_converged(&report).unwrap();
}

/// Producers back off after error answers instead of spinning on them
/// (NotEnoughReplicas while a follower is down under min.insync.replicas
/// 3; NotLeaderOrFollower while leadership moves).
#[test]
fn producers_back_off_after_error_answers() {
    let report = crashes(None, 3);
    assert!(
        report.settled,
        "the partition healed: {}",
        end_state(&report)
    );
    assert!(
        !report.produce_errors.is_empty(),
        "error answers to back off from"
    );
    producers_backed_off(&report).unwrap();
}

/// A producer without backoff sends again as soon as an error answer frees
/// a slot: caught whenever an error answer comes while a leader is known
/// (under min.insync.replicas 3 every follower crash brings them).
#[test]
fn producers_without_backoff_are_caught() {
    caught_in(1, "a spinning producer", || {
        let report = crashes(Some(Regression::NoProducerBackoff), 3);
        producers_backed_off(&report)
    });
}

// --- The leader's ISR copy converges when the IsrUpdate is lost ----------------

/// Followers crash cleanly and come back within replica.lag.time.max.ms
/// (the leader never drops them for lag), and every IsrUpdate the
/// controller sends is lost (`ConcurrentConfig::isr_updates_lost`), as the
/// one-shot update was while the leader was down or had its own ISR change
/// in flight: the controller removes the crashed follower, the leader's
/// copy keeps it.
fn lost_isr_updates(regress: Option<Regression>) -> RunReport {
    run3(regress, |config| {
        config.duration = Duration::from_millis(1000);
        config.consumers = 1;
        // A hang guard for a partition that heals; the regression's never
        // does (its leader never asks to take the follower back), and its
        // verdict, the leader's stale copy, does not wait on the settling.
        config.settle_timeout = Duration::from_secs(match regress {
            None => 60,
            Some(_) => 2,
        });
        config.replication.replica_lag_time_max_ms = 2_000;
        config.isr_updates_lost = true;
        config.faults = Some(schedule(
            100,
            250,
            50,
            vec![Fault::CrashFollower { clean: true }],
        ));
    })
    .unwrap()
    .fitted("lost ISR updates")
}

/// The crashed follower is back in the controller's ISR and the leader's
/// copy is the controller's.
fn every_follower_readded(report: &RunReport) -> Result<(), String> {
    isr_copy_converged(report)?;
    if report.controller.isr.len() != 3 || !report.settled {
        return Err(format!(
            "the controller's ISR at the end is {:?} (settled: {})",
            report.controller.isr, report.settled
        ));
    }
    Ok(())
}

/// Every IsrUpdate lost, the leader still learns the controller's ISR from
/// the metadata (`learn_isr`, the model's LeaderLearnsIsr), then takes the
/// follower back.
#[test]
fn the_leaders_isr_copy_converges_when_every_isr_update_is_lost() {
    let report = lost_isr_updates(None);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(!report.crashes.is_empty(), "followers crashed");
    every_follower_readded(&report).unwrap();
}

/// The one-shot update alone (`Regression::IsrFromOneShotUpdateOnly`):
/// the leader's copy keeps the follower the controller removed, so it
/// never asks to add it back, and the partition never heals.
#[test]
fn a_leader_learning_the_isr_only_from_the_one_shot_update_is_caught() {
    caught_in(1, "the stale copy", || {
        isr_copy_converged(&lost_isr_updates(Some(
            Regression::IsrFromOneShotUpdateOnly,
        )))
    });
}

// --- The report survives a full disk; consumer read errors are reported --------

/// A run whose broker 1 finds its disk full when the run closes the logs
/// (`ConcurrentConfig::disk_full_at_stop`): its final close fails.
fn full_disk_at_stop(regress: Option<Regression>) -> highwater::replication::Result<RunReport> {
    let run = run3(regress, |config| {
        config.duration = Duration::from_millis(300);
        config.until.acknowledged = Some(1);
        config.consumers = 1;
        config.settle_timeout = Duration::from_secs(60);
        config.disk_full_at_stop = Some(1);
    })?;
    Ok(run.fitted("a full disk at the end"))
}

#[test]
fn the_report_survives_a_full_disk_at_the_end_of_a_run() {
    let report = full_disk_at_stop(None).expect("a report despite the full disk");
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.starts_with("replica 1: close") && e.contains("no space left")),
        "the failed close is in the report: {:?}",
        report.errors
    );
    assert!(report.settled, "{}", end_state(&report));
    assert!(!report.acked.is_empty(), "the workload made progress");
    assert_eq!(
        report.final_logs[1], report.final_logs[0],
        "broker 1's log read"
    );
    assert_eq!(report.lost_acknowledged(), vec![]);
}

#[test]
fn a_report_lost_to_a_full_disk_is_caught() {
    let lost = full_disk_at_stop(Some(Regression::ReportLostOnCloseError))
        .expect_err("the run returned a report");
    eprintln!("caught: the run returned {lost}");
}

/// Consumers whose every other read below the HW fails, the first among
/// them (`consumer_reads_fail`), until a record was read: a consumer that
/// read one met a failure first.
fn failing_reads(regress: Option<Regression>) -> RunReport {
    run3(regress, |config| {
        config.duration = Duration::from_millis(100);
        config.until.consumed = Some(1);
        config.consumers = 2;
        config.settle_timeout = Duration::from_secs(60);
        config.consumer_reads_fail = true;
    })
    .unwrap()
    .fitted("failing reads")
}

/// The read errors are in the report, counted, and reading went on.
fn read_errors_reported(report: &RunReport) -> Result<(), String> {
    let n: u64 = report
        .consumer_errors
        .iter()
        .filter(|(e, _)| e.contains("injected read failure"))
        .map(|(_, n)| n)
        .sum();
    eprintln!(
        "{} records read, read errors {:?}",
        report.consumed.len(),
        report.consumer_errors
    );
    if report.consumed.is_empty() {
        return Err("nothing was read".into());
    }
    if n == 0 {
        return Err(format!(
            "no read error in the report: {:?}",
            report.consumer_errors
        ));
    }
    Ok(())
}

#[test]
fn consumer_read_errors_are_reported() {
    read_errors_reported(&failing_reads(None)).unwrap();
}

#[test]
fn dropped_consumer_read_errors_are_caught() {
    caught_in(1, "dropped read errors", || {
        read_errors_reported(&failing_reads(Some(Regression::ConsumerErrorsDropped)))
    });
}

// --- Held fetches are woken by new records --------------------------------------

/// A leader holds fetches with nothing new for 1 s at most, and requests
/// are sent again only after 30 s: a follower waits on its held fetch
/// until the leader releases it. A held fetch is released in the same
/// pass of the leader's thread that appended the records it waits for
/// (`ReplicaNode::drive` runs after every batch of messages); a pass that
/// ends with a fetch still held although records for it arrived is a lost
/// wake-up (`RunReport::lost_wakeups`). One request in flight: each comes
/// while the follower, caught up, waits on a held fetch. The run lasts
/// until 2 records are acknowledged (with a lost wake-up, each waits for
/// the 1 s timer).
fn held_fetches(regress: Option<Regression>) -> RunReport {
    run3(regress, |config| {
        config.duration = Duration::from_millis(100);
        config.until.acknowledged = Some(2);
        config.max_in_flight = 1;
        config.fetch_max_wait = Duration::from_secs(1);
        config.request_timeout = Duration::from_secs(30);
        config.produce_timeout = Duration::from_secs(60);
        config.settle_timeout = Duration::from_secs(60);
    })
    .unwrap()
    .fitted("held fetches")
}

fn no_wakeup_lost(report: &RunReport) -> Result<(), String> {
    eprintln!(
        "{} requests, {} acknowledged records, {} lost wake-ups, latencies (us) {:?}",
        report.requests_sent,
        report.acked.len(),
        report.lost_wakeups,
        report.ack_latencies_us
    );
    if report.lost_wakeups > 0 {
        return Err(format!(
            "{} passes ended with a fetch held although records for it had arrived",
            report.lost_wakeups
        ));
    }
    Ok(())
}

#[test]
fn held_fetches_and_waiting_producers_are_woken_by_new_records() {
    no_wakeup_lost(&held_fetches(None)).unwrap();
}

#[test]
fn a_held_fetch_woken_only_by_its_timer_is_caught() {
    caught_in(1, "the lost wake-up", || {
        no_wakeup_lost(&held_fetches(Some(Regression::HeldFetchWakesOnTimerOnly)))
    });
}

// --- Only the answer to the fetch in flight is traced as applied ---------------

/// Followers send a fetch again after 5 ms while the leader holds the
/// first for up to 100 ms (`fetch_max_wait`): late answers reach them
/// often, and they drop them (`Partition::on_fetch_response`, as Kafka's
/// `AbstractFetcherThread.processFetchRequest`).
fn resent_fetches(regress: Option<Regression>) -> Result<(), String> {
    let run = run3(regress, |config| {
        config.duration = Duration::from_millis(300);
        config.max_records = Some(4);
        config.until.sent = Some(4);
        config.consumers = 1;
        config.request_timeout = Duration::from_millis(5);
        // Only the trace is checked, not whether the partition settled.
        config.settle_timeout = Duration::from_secs(2);
    })
    .unwrap();
    run.run
        .events_validated()
        .map(drop)
        .map_err(|m| m.to_string())
}

#[test]
fn late_fetch_answers_dropped_by_the_follower_fit_the_model() {
    for _ in 0..3 {
        if let Err(m) = resent_fetches(None) {
            panic!("the trace does not fit:\n{m}");
        }
    }
}

/// The switch traces the late answers as applied (the driver before the
/// fix): the validator then forgets the answer the follower takes next,
/// and its HW is seen going back. Caught in one of a few runs.
#[test]
fn late_fetch_answers_traced_as_applied_are_caught() {
    caught_in(5, "late answers traced as applied", || {
        resent_fetches(Some(Regression::LateFetchResponseTraced))
    });
}

// --- A scheduled fault takes effect before the next ----------------------------

/// Followers paused often (a nemesis of pauses only, one every 150 ms on
/// average, each 20 to 220 ms: short of the lag that would drop them from
/// the ISR) while the schedule crashes followers: a crash sent to a paused
/// follower waits in its inbox, and the restart sent `down_for` later
/// waits behind it.
fn faults_on_paused_followers(regress: Option<Regression>) -> (Duration, Vec<TraceEntry>) {
    let faults = vec![
        Fault::CrashFollower { clean: true },
        Fault::CrashFollower { clean: false },
    ];
    let down_for = Duration::from_millis(100);
    let run = run3(regress, |config| {
        config.duration = Duration::from_millis(1000);
        config.consumers = 1;
        config.settle_timeout = Duration::from_secs(60);
        config.faults = Some(schedule(100, 100, down_for.as_millis() as u64, faults));
        config.nemesis = Some(Nemesis {
            seed: 7,
            every: Duration::from_millis(150),
            max_down: Duration::from_millis(200),
            faults: vec![NemesisFault::Pause],
            one_unclean_at_a_time: true,
        });
    })
    .unwrap();
    let trace = run.trace();
    run.fitted("faults on paused followers");
    (down_for, trace)
}

/// What the schedule promises (`FaultSchedule`): each crashed broker stays
/// down `down_for` at least, and no crash comes while another broker is
/// down.
fn one_fault_at_a_time(down_for: Duration, trace: &[TraceEntry]) -> Result<(), String> {
    let mut down: Option<(u32, u64)> = None;
    let mut crashes = 0;
    for e in trace {
        let (Actor::Replica(r), ms) = (e.actor, e.micros / 1000) else {
            continue;
        };
        match (&e.event, down) {
            (Event::Crash { .. }, Some((d, at))) => {
                return Err(format!(
                    "broker {r} crashed at {ms} ms, broker {d} down since {at} ms"
                ))
            }
            (Event::Crash { .. }, None) => {
                crashes += 1;
                down = Some((r, ms));
            }
            (Event::Restart { .. }, Some((d, at))) if d == r => {
                if ms - at < down_for.as_millis() as u64 {
                    return Err(format!(
                        "broker {r} down {} ms (from {at} ms), less than {down_for:?}",
                        ms - at
                    ));
                }
                down = None;
            }
            _ => {}
        }
    }
    eprintln!("{crashes} crashes, one at a time");
    if crashes == 0 {
        return Err("no crash".into());
    }
    Ok(())
}

#[test]
fn scheduled_faults_on_slow_brokers_take_effect_one_at_a_time() {
    let (down_for, trace) = faults_on_paused_followers(None);
    one_fault_at_a_time(down_for, &trace).unwrap();
}

/// Caught in one of a few runs (a crash sent between two pauses takes
/// effect in time).
#[test]
fn faults_taken_as_done_when_sent_are_caught() {
    caught_in(3, "faults taken as done when sent", || {
        let (down_for, trace) = faults_on_paused_followers(Some(Regression::FaultDoneWhenSent));
        one_fault_at_a_time(down_for, &trace)
    });
}

// --- Faults begin once every broker has started -------------------------------

/// Every broker starts late (`slow_start`, as threads of a busy machine
/// may: a soak under a load of 20 had one start after the nemesis fenced
/// it), brokers 0 and 2 after 200 ms and broker 1 after 1 s, under a
/// nemesis that fences a broker every 10 ms on average, the first of them
/// broker 1 (seed 8's first choice), and strikes once at least. A nemesis
/// that does not wait for the cluster's start strikes before any broker
/// registered, however busy the machine (its first fault comes 5 to 15 ms
/// after the run begins).
fn slow_start(regress: Option<Regression>) -> ValidatedRun {
    run3(regress, |config| {
        config.duration = Duration::from_millis(30);
        config.until.nemesis_faults = Some(1);
        config.consumers = 1;
        config.settle_timeout = Duration::from_secs(60);
        config.slow_start = vec![
            (0, Duration::from_millis(200)),
            (1, Duration::from_secs(1)),
            (2, Duration::from_millis(200)),
        ];
        config.nemesis = Some(Nemesis {
            seed: 8,
            every: Duration::from_millis(10),
            max_down: Duration::from_millis(50),
            faults: vec![NemesisFault::Fence],
            one_unclean_at_a_time: true,
        });
    })
    .unwrap()
    .run
}

/// The nemesis waits for the cluster's start (its first leader, elected
/// once every broker registered): the trace fits the model, whose brokers
/// all start together.
#[test]
fn faults_wait_for_a_broker_slow_to_start() {
    let run = slow_start(None);
    eprintln!("{}", run.describe());
    if let Err(m) = run.events_validated() {
        panic!("the trace does not fit:\n{m}");
    }
    assert!(
        run.report
            .nemesis_faults
            .get("Fence")
            .is_some_and(|&n| n > 0),
        "{:?}",
        run.report.nemesis_faults
    );
}

/// Faults from the first moment (`Regression::FaultsBeforeStart`): the
/// slow broker is fenced before any broker registered, and the cluster's
/// start does not fit the model (5 of 5 runs idle; before every broker
/// started late, only broker 1 did, and a run showed it only on a busy
/// machine: 5 of 11 at a load of 4, none of 16 idle).
#[test]
fn faults_before_a_broker_started_are_caught() {
    caught_in(
        2,
        "a broker fenced before it started",
        || match slow_start(Some(Regression::FaultsBeforeStart)).events_validated() {
            Ok(n) => {
                eprintln!("{n} events fit");
                Ok(())
            }
            Err(m) => Err(m.to_string()),
        },
    );
}

// --- Producers send to a leader once it serves ---------------------------------

/// The controller announces its first leader 300 ms after publishing it
/// (`late_first_announcement`, as a busy machine's thread may be held
/// between the two), in a run whose producer has a budget of 8 records and
/// runs until all 8 are acknowledged, with 4 requests in flight. Seen in
/// CI before the fix (and once in 2,000 runs 6 at a time beside 2 busy
/// loops): the first 4 requests refused with NOT_LEADER_OR_FOLLOWER by the
/// first leader, not yet leading, and the run hung until its goal timeout.
/// The hang guard is long for the fixed driver (a busy machine is slow),
/// short for the broken one, which can never meet the goal.
fn first_leader_slow_to_lead(regress: Option<Regression>) -> RunReport {
    let goal_timeout = Duration::from_secs(if regress.is_some() { 3 } else { 120 });
    run3(regress, |config| {
        config.duration = Duration::from_millis(10);
        config.max_records = Some(8);
        config.until.acknowledged = Some(8);
        config.max_in_flight = 4;
        config.replication.replica_lag_time_max_ms = 600_000;
        config.produce_timeout = Duration::from_secs(60);
        config.goal_timeout = goal_timeout;
        config.late_first_announcement = Some(Duration::from_millis(300));
    })
    .unwrap()
    .run
    .report
}

/// Producers wait for the leader the metadata names to lead in its epoch:
/// nothing is refused, and every record of the budget is acknowledged.
#[test]
fn producers_wait_for_a_leader_slow_to_lead() {
    let report = first_leader_slow_to_lead(None);
    assert_eq!(
        report.unmet_goals,
        Vec::<String>::new(),
        "{}",
        end_state(&report)
    );
    assert!(
        report.produce_errors.is_empty(),
        "{:?}",
        report.produce_errors
    );
}

/// Producers that send as soon as the metadata names a leader
/// (`Regression::ProduceBeforeLeaderServes`) are refused, and the run's
/// goal is never met.
#[test]
fn producers_sending_before_the_leader_leads_are_caught() {
    caught_in(2, "records refused before the leader led", || {
        let report = first_leader_slow_to_lead(Some(Regression::ProduceBeforeLeaderServes));
        match report.unmet_goals.is_empty() {
            true => Ok(()),
            false => Err(format!(
                "{:?}; produce errors: {:?}",
                report.unmet_goals, report.produce_errors
            )),
        }
    });
}
