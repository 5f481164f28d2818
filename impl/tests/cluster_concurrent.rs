//! The concurrent driver: a workload with faults for a bounded time; no
//! acknowledged acks=all record may be lost, and nothing a consumer read
//! below a HW may change.

use std::time::Duration;

use highwater::cluster::concurrent::{self, ConcurrentConfig, Fault, FaultSchedule};
use highwater::cluster::{Actor, Event};
use highwater::replication::Acks;

#[test]
fn acks_all_survives_crashes_and_failovers() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ConcurrentConfig::new(3);
    config.producers = 2;
    config.consumers = 1;
    config.max_in_flight = 4;
    config.records_per_request = 2;
    config.duration = Duration::from_secs(4);
    config.flush_interval = Some(Duration::from_millis(50));
    config.replication.replica_lag_time_max_ms = 300;
    config.trace = true;
    config.faults = Some(FaultSchedule {
        first_after: Duration::from_millis(300),
        every: Duration::from_millis(250),
        down_for: Duration::from_millis(150),
        faults: vec![
            Fault::CrashLeader { clean: false },
            Fault::CrashFollower { clean: false },
            Fault::CrashLeader { clean: true },
            Fault::CrashFollower { clean: true },
        ],
    });
    let report = concurrent::run(dir.path(), config).unwrap();
    eprintln!(
        "acked {} of {} records, {} consumed, crashes {:?}, errors {:?}, timeouts {}, settled {}, trace {} events",
        report.acked.len(),
        report.records_sent,
        report.consumed.len(),
        report.crashes,
        report.produce_errors,
        report.produce_timeouts,
        report.settled,
        report.trace.entries.len()
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    if !report.settled {
        eprintln!("{:#?}\n{:#?}", report.controller, report.final_states);
        for e in report.trace.entries.iter().rev().take(40).rev() {
            eprintln!("{} {:?} {:?}", e.seq, e.actor, e.event);
        }
    }
    assert!(report.settled, "every replica came back and caught up");
    assert!(
        report.crashes.len() >= 4,
        "faults happened: {:?}",
        report.crashes
    );
    assert!(report.acked.len() > 100, "the workload made progress");
    assert!(
        report.crashes.iter().any(|&(_, clean)| !clean),
        "an unclean crash happened"
    );
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
    let epochs: Vec<_> = report
        .trace
        .of(Actor::Controller)
        .filter_map(|e| match e.event {
            Event::ControllerElectLeader { epoch, .. } => Some(epoch),
            _ => None,
        })
        .collect();
    assert!(epochs.len() >= 2, "{epochs:?}");
    // The trace's order keeps every send before its receive.
    let mut served = std::collections::HashSet::new();
    let mut sent = std::collections::HashMap::<_, usize>::new();
    for (i, e) in report.trace.entries.iter().enumerate() {
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
    // The trace is serializable, with the state after each event.
    let json = serde_json::to_string(&report.trace).unwrap();
    let back: highwater::cluster::Trace = serde_json::from_str(&json).unwrap();
    assert_eq!(back, report.trace);
}

#[test]
fn acks_1_without_faults_loses_nothing_and_acks_0_gets_no_answers() {
    for acks in [Acks::Leader, Acks::None] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = ConcurrentConfig::new(3);
        config.acks = acks;
        config.duration = Duration::from_millis(300);
        let report = concurrent::run(dir.path(), config).unwrap();
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert!(report.settled);
        assert_eq!(report.lost_acknowledged(), vec![]);
        if acks == Acks::None {
            assert!(report.acked.is_empty());
            assert!(report.final_logs[0].len() as u64 >= 1);
        } else {
            assert!(!report.acked.is_empty());
        }
    }
}

/// After crashes of leaders and followers: the leader's ISR copy converges
/// to the controller's (it learns from the metadata, not from one message
/// that can be lost), and producers back off after error answers instead
/// of spinning on NotLeaderOrFollower.
#[test]
fn the_leaders_isr_copy_converges_and_producers_back_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ConcurrentConfig::new(3);
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
    let report = concurrent::run(dir.path(), config.clone()).unwrap();
    let errors: u64 = report.produce_errors.values().sum();
    eprintln!(
        "{} requests, {errors} error answers {:?}, consumer errors {:?}, crashes {:?}",
        report.requests_sent, report.produce_errors, report.consumer_errors, report.crashes
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.settled, "the partition healed");
    let leader = report.controller.leader.expect("a leader at the end");
    let copy = report.final_states[leader as usize]
        .as_ref()
        .expect("the leader is up")
        .isr
        .clone();
    assert_eq!(copy, report.controller.isr, "the leader's ISR copy");
    // One error answer per request in flight per backoff period, at most.
    let periods = config.duration.as_millis() as u64 / 10 + 1;
    let bound = periods * config.max_in_flight as u64 + report.crashes.len() as u64 * 4;
    assert!(errors <= bound, "{errors} error answers, more than {bound}");
}
