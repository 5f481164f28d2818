//! Apache Kafka 4.4 itself, a real cluster (1 KRaft controller, 3
//! brokers as local `java` processes), under a fixed fault schedule, its
//! acknowledged records checked from the client side
//! (spec/kafka-cluster.md) and its observations validated against the
//! model (spec/kafka-trace.md), with a consumer reading beside the
//! producer whose reads must not vanish: today's rules keep everything,
//! nothing read vanishes, and the run fits; an unclean election loses
//! records the consumer had read;
//! acks=1, unclean election and min.insync.replicas=1 each lose
//! acknowledged records, and the model's property breaks at an election
//! validation checked; a leader cut from the controller is replaced and
//! loses nothing; a leader partitioned from its followers, and a follower
//! from the leader, leave the ISR and lose nothing. Long tier: each test starts a cluster (about 10 s)
//! and produces for 20-30 s. Outside CI a test skips when Java or Maven
//! is missing; under CI=true that fails.

#[path = "../../testkit/long_tier.rs"]
mod long_tier;

use std::time::{Duration, Instant};

use highwater_conformance::kafka_cluster::nemesis::{FaultKind, Schedule, Step, Target};
use highwater_conformance::kafka_cluster::programs::{Programs, Setup};
use highwater_conformance::kafka_cluster::soak::{self, SoakConfig};
use highwater_conformance::kafka_cluster::summary::Summary;
use highwater_conformance::kafka_cluster::Rules;
use highwater_model::properties::{ACKNOWLEDGED_RECORDS_SURVIVE, COMMITTED_RECORDS_SURVIVE};

fn in_ci() -> bool {
    matches!(std::env::var("CI"), Ok(v) if !v.is_empty() && v != "false" && v != "0")
}

/// The built programs, or None (a skip, said past the harness's capture) outside CI.
fn programs(test: &str) -> Option<Programs> {
    match Programs::setup() {
        Ok(Setup::Ready(p)) => Some(p),
        Ok(Setup::Missing(why)) if !in_ci() => {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIPPED {test}: {why} (outside CI only; under CI=true this fails)"
            );
            None
        }
        Ok(Setup::Missing(why)) => panic!("CI=true and Kafka cannot run: {why}"),
        Err(e) => panic!("{e}"),
    }
}

/// The programs a long-tier cluster test needs, or None when it skips
/// (the long tier off, or Java missing outside CI); `cost` is said on a skip.
fn cluster_test(test: &str, cost: &str) -> Option<Programs> {
    if !long_tier::enabled(cost) {
        return None;
    }
    programs(test)
}

fn step(at_s: f64, kind: FaultKind, hold_s: f64) -> Step {
    Step {
        at: Duration::from_secs_f64(at_s),
        kind,
        target: Target::Leader,
        hold: Duration::from_secs_f64(hold_s),
    }
}

fn step_on(at_s: f64, kind: FaultKind, target: Target, hold_s: f64) -> Step {
    Step {
        target,
        ..step(at_s, kind, hold_s)
    }
}

/// A run's directory: removed when the test passes, kept (its path in the
/// failure message) when it fails.
struct RunDir(std::path::PathBuf);

impl Drop for RunDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("observations kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// One cluster at a time: two clusters' eight JVMs on two cores would slow
/// both past their timeouts.
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the schedule in a fresh directory; a harness failure fails the test.
fn run(programs: &Programs, rules: Rules, seconds: u64, steps: Vec<Step>) -> (Summary, RunDir) {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let dir = RunDir(
        tempfile::Builder::new()
            .prefix("kafka-cluster-test-")
            .tempdir()
            .unwrap()
            .keep(),
    );
    let config = SoakConfig {
        rules,
        seconds,
        schedule: Schedule::fixed(steps),
        run_dir: dir.0.join("run"),
        heal_timeout: Duration::from_secs(90),
    };
    let began = Instant::now();
    match soak::run(programs, &config) {
        Ok(summary) => {
            eprintln!("{summary}(in {:.1}s)", began.elapsed().as_secs_f64());
            (summary, dir)
        }
        Err(e) => panic!("harness failure: {e}"),
    }
}

/// A historical rule set's run: its one fault applied, acknowledged records
/// lost (the client's check), the rest fitting the model, and one of
/// `properties` broken at an election validation checked.
fn assert_loss_seen_by_the_model(summary: &Summary, properties: &[&str]) {
    assert_eq!(summary.faults.len(), 1, "the fault applied:\n{summary}");
    assert!(
        summary.lost(),
        "nothing acknowledged was lost, so the checker was not shown failing:\n{summary}"
    );
    assert_eq!(summary.misfit(), None, "the run fits the model:\n{summary}");
    let v = summary.validation.as_ref().expect("validated");
    assert!(
        v.broken().iter().any(|b| properties.contains(&b.property)),
        "the loss breaks none of {properties:?} at a validated election:\n{summary}"
    );
    assert_leaders_replayed(summary);
}

#[test]
fn kafka_keeps_every_acknowledged_record_through_a_leader_kill_and_a_long_pause() {
    let Some(programs) = cluster_test(
        "kafka_keeps_every_acknowledged_record_through_a_leader_kill_and_a_long_pause",
        "starts a Kafka cluster, about 55 s",
    ) else {
        return;
    };
    // kill -9 of the leader, down 2 s; then a SIGSTOP of the (new) leader for
    // 9 s, past the 6 s broker session: the controller fences it and moves
    // the leadership.
    let (summary, _dir) = run(
        &programs,
        Rules::Today,
        30,
        vec![
            step(3.0, FaultKind::Kill, 2.0),
            step(10.0, FaultKind::PauseLong, 9.0),
        ],
    );
    assert_eq!(summary.faults.len(), 2, "both faults applied:\n{summary}");
    assert!(
        summary.leader_changed(),
        "the faults moved the leadership:\n{summary}"
    );
    assert!(
        summary.verdict.acknowledged > 0,
        "records were acknowledged:\n{summary}"
    );
    assert!(summary.healed, "the cluster healed (full ISR):\n{summary}");
    assert!(
        !summary.lost(),
        "acks=all, min.insync.replicas=2 lost acknowledged records, or a read vanished:\n{summary}"
    );
    // The consumer beside the producer read through both faults, and
    // nothing it read vanished.
    let reads = summary.verdict.reads.as_ref().expect("a consumer ran");
    assert!(
        reads.done && reads.distinct > 0 && reads.vanished.is_empty(),
        "the consumer read, and nothing it read vanished:\n{summary}"
    );
    assert_eq!(summary.misfit(), None, "the run fits the model:\n{summary}");
    let v = summary.validation.as_ref().expect("validated");
    assert!(
        v.controller.elections >= 2 && v.brokers.elections_checked >= 1,
        "the elections were validated:\n{summary}"
    );
    assert_leaders_replayed(&summary);
}

/// The leaders' half ran on a fresh run: every tenure's fetches and HW
/// moves were the model's steps.
fn assert_leaders_replayed(summary: &Summary) {
    let l = summary
        .validation
        .as_ref()
        .ok()
        .and_then(|v| v.leaders.as_ref())
        .expect("a fresh run keeps every partition.log");
    assert!(
        l.tenures >= 1 && l.fetches > 0 && l.hw_moves > 0 && l.hidden_appends > 0,
        "the leaders' steps were replayed:\n{summary}"
    );
    // Every follower's start truncates (to its HW, or at its leader's
    // diverging epoch), and each was checked against its next fetch.
    let t = summary
        .validation
        .as_ref()
        .ok()
        .and_then(|v| v.truncations.as_ref())
        .expect("a fresh run keeps every server.log");
    assert!(
        t.truncations >= 1 && t.resumed_checked >= 1,
        "the followers' truncations were checked:\n{summary}"
    );
}

#[test]
fn the_checker_sees_kafka_lose_records_acknowledged_with_acks_1() {
    let Some(programs) = cluster_test(
        "the_checker_sees_kafka_lose_records_acknowledged_with_acks_1",
        "starts a Kafka cluster, about 50 s",
    ) else {
        return;
    };
    // acks=1: the leader acknowledges alone while both followers are stopped
    // (3 s, still in the ISR), is killed, and a follower without those
    // records is elected.
    let (summary, _dir) = run(
        &programs,
        Rules::Acks1,
        20,
        vec![step(4.0, FaultKind::StallFollowersKillLeader, 3.0)],
    );
    assert!(summary.leader_changed(), "the leadership moved:\n{summary}");
    // The model sees the same loss: its property breaks at an election it
    // validated, and the rest of the run fits.
    assert_loss_seen_by_the_model(&summary, &[ACKNOWLEDGED_RECORDS_SURVIVE]);
}

#[test]
fn an_unclean_election_on_kafka_loses_committed_records_and_breaks_the_models_property() {
    let Some(programs) = cluster_test(
        "an_unclean_election_on_kafka_loses_committed_records_and_breaks_the_models_property",
        "starts a Kafka cluster, about 60 s",
    ) else {
        return;
    };
    // A follower stopped past the ISR lag and the session (it leaves the
    // ISR), then the other two killed: with unclean election on, the
    // controller elects the lagging follower alone.
    let (summary, _dir) = run(
        &programs,
        Rules::Unclean,
        25,
        vec![step_on(
            3.0,
            FaultKind::LagThenKillOthers,
            Target::Follower(0),
            9.0,
        )],
    );
    assert_loss_seen_by_the_model(
        &summary,
        &[COMMITTED_RECORDS_SURVIVE, ACKNOWLEDGED_RECORDS_SURVIVE],
    );
    // Committed means read: the consumer beside the producer read records
    // the two killed replicas committed while the lagging one was out, and
    // they vanished with the unclean election (1,631 of them in the first
    // run). Its position then lay past the new leader's log end, and Kafka
    // told it so (OffsetOutOfRange, or LogTruncationException from its
    // last fetched epoch): an error line, and a new session that reads only
    // if the producer still writes after the election (in one run of
    // 2026-12-04 it did not).
    let reads = summary.verdict.reads.as_ref().expect("a consumer ran");
    assert!(
        !reads.vanished.is_empty() && (reads.sessions >= 2 || reads.errors >= 1),
        "the consumer saw committed records that the unclean election lost:\n{summary}"
    );
    // The validation takes those reads as evidence of visibility too.
    let v = summary.validation.as_ref().expect("validated");
    assert!(
        v.broken()
            .iter()
            .any(|b| b.property == COMMITTED_RECORDS_SURVIVE
                && b.why.contains("the consumer had read")),
        "the reads break committed records survive at the unclean election:\n{summary}"
    );
}

#[test]
fn a_leader_acknowledging_alone_under_min_isr_1_loses_records_to_a_power_loss_on_kafka() {
    let Some(programs) = cluster_test(
        "a_leader_acknowledging_alone_under_min_isr_1_loses_records_to_a_power_loss_on_kafka",
        "starts a Kafka cluster, about 60 s",
    ) else {
        return;
    };
    // Both followers stopped past the ISR lag: the leader, alone in the ISR,
    // acknowledges alone (min.insync.replicas=1); its power is lost, and its
    // unflushed tail with it, before anyone else has those records.
    let (summary, _dir) = run(
        &programs,
        Rules::MinIsr1,
        25,
        vec![step(3.0, FaultKind::StrandThenPowerLoss, 9.0)],
    );
    assert_loss_seen_by_the_model(
        &summary,
        &[COMMITTED_RECORDS_SURVIVE, ACKNOWLEDGED_RECORDS_SURVIVE],
    );
    // Alone in the ISR, the leader moved its HW alone: the consumer read
    // the records the power loss then cut (431 and 1,780 in two runs).
    let reads = summary.verdict.reads.as_ref().expect("a consumer ran");
    assert!(
        !reads.vanished.is_empty(),
        "the consumer read records that the power loss then cut:\n{summary}"
    );
}

#[test]
fn a_leader_isolated_from_its_followers_then_killed_loses_what_it_acknowledged_alone_with_acks_1() {
    let Some(programs) = cluster_test(
        "a_leader_isolated_from_its_followers_then_killed_loses_what_it_acknowledged_alone_with_acks_1",
        "starts a Kafka cluster, about 60 s",
    ) else {
        return;
    };
    // The leader cut from both followers for 9 s, past the 6 s ISR lag: a
    // network partition, not stopped processes. It shrinks the ISR to
    // itself (the followers it removes enter the ELR, the ISR being below
    // min.insync.replicas) and, with acks=1, still acknowledges alone;
    // then it is killed, and once the controller fences it an ELR member
    // that never had those records is elected. (Under acks=all the same
    // fault loses nothing: nothing is acknowledged below
    // min.insync.replicas; with unclean election on, a first run elected
    // from the ELR too and lost nothing.)
    let (summary, _dir) = run(
        &programs,
        Rules::Acks1,
        25,
        vec![step(3.0, FaultKind::IsolateThenKillLeader, 9.0)],
    );
    assert!(summary.leader_changed(), "the leadership moved:\n{summary}");
    assert_loss_seen_by_the_model(&summary, &[ACKNOWLEDGED_RECORDS_SURVIVE]);
}

#[test]
fn a_leader_cut_from_the_controller_is_replaced_and_nothing_is_lost() {
    let Some(programs) = cluster_test(
        "a_leader_cut_from_the_controller_is_replaced_and_nothing_is_lost",
        "starts a Kafka cluster, about 50 s",
    ) else {
        return;
    };
    // The leader's link to the controller cut for 9 s, past the 6 s session:
    // it still serves the producer, the controller fences it and elects a
    // follower, and the cut-off leader learns of it only when the link opens.
    let (summary, _dir) = run(
        &programs,
        Rules::Today,
        25,
        vec![step(3.0, FaultKind::CutFromController, 9.0)],
    );
    assert_eq!(summary.faults.len(), 1, "the fault applied:\n{summary}");
    assert!(
        summary.leader_changed(),
        "the controller moved the leadership:\n{summary}"
    );
    assert!(summary.healed, "the cluster healed (full ISR):\n{summary}");
    assert!(
        !summary.lost(),
        "a leader cut from the controller lost acknowledged records:\n{summary}"
    );
    assert_eq!(summary.misfit(), None, "the run fits the model:\n{summary}");
    assert_leaders_replayed(&summary);
}

#[test]
fn a_leader_partitioned_from_its_followers_shrinks_the_isr_and_nothing_is_lost() {
    let Some(programs) = cluster_test(
        "a_leader_partitioned_from_its_followers_shrinks_the_isr_and_nothing_is_lost",
        "starts a Kafka cluster, about 75 s",
    ) else {
        return;
    };
    // The links between the leader and its followers held for 10 s, both
    // directions, past the 6 s replica.lag.time.max.ms: the followers'
    // fetches stop, and the leader, still heartbeating to the controller,
    // shrinks the ISR to itself (below min.insync.replicas: its HW stops,
    // acks=all sends fail) until the links open. Then one follower's links
    // to its peers cut for 9 s (one direction: it cannot fetch from the
    // leader): the leader drops it alone, and the ISR keeps two.
    let (summary, _dir) = run(
        &programs,
        Rules::Today,
        35,
        vec![
            step(3.0, FaultKind::HoldFromPeers, 10.0),
            step_on(20.0, FaultKind::CutPeersOut, Target::Follower(0), 9.0),
        ],
    );
    assert_eq!(summary.faults.len(), 2, "both faults applied:\n{summary}");
    let [held, cut] = &summary.faults[..] else {
        unreachable!()
    };
    // The link rule is not a no-op: the held followers left the ISR.
    assert_eq!(
        held.leader_during, held.leader_before,
        "the controller kept the partitioned leader:\n{summary}"
    );
    assert_eq!(
        held.isr_during,
        vec![held.broker],
        "the held followers are still in the ISR (their fetches went on?):\n{summary}"
    );
    assert!(
        cut.isr_during.len() == 2 && !cut.isr_during.contains(&cut.broker),
        "the cut follower, alone, left the ISR:\n{summary}"
    );
    assert!(
        summary.verdict.acknowledged > 0,
        "records were acknowledged:\n{summary}"
    );
    assert!(summary.healed, "the cluster healed (full ISR):\n{summary}");
    assert!(
        !summary.lost(),
        "a partition between brokers lost acknowledged records:\n{summary}"
    );
    assert_eq!(summary.misfit(), None, "the run fits the model:\n{summary}");
    assert_leaders_replayed(&summary);
}
