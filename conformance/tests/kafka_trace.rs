//! Real Kafka runs' observations validated against the model
//! (`highwater_conformance::kafka_trace`), from runs kept in
//! `tests/kafka_runs/` (see its README): no Java needed. Each check is
//! also shown failing, on the same observations with one thing changed.

use std::path::Path;

use highwater_conformance::kafka_trace::leaders::{self, LeaderValidation};
use highwater_conformance::kafka_trace::{
    partition_log, state_change, validate, KafkaValidation, Observations,
};
use highwater_model::properties::{ACKNOWLEDGED_RECORDS_SURVIVE, COMMITTED_RECORDS_SURVIVE};
use highwater_model::Config;

/// A kept run's files, which a test may edit before validating.
struct Run(Observations);

fn run(name: &str) -> Run {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kafka_runs")
        .join(name);
    Run(Observations::read_kept(&dir).unwrap_or_else(|e| panic!("{e}")))
}

impl Run {
    fn validate(&self, acks_all: bool) -> KafkaValidation {
        validate(&self.0, "soak", acks_all)
            .unwrap_or_else(|e| panic!("the observations do not read: {e}"))
    }

    /// Replaces `from` (which must be there) by `to` in the metadata dump.
    fn edit_metadata(mut self, from: &str, to: &str) -> Run {
        assert!(self.0.metadata.contains(from), "{from} not in the dump");
        self.0.metadata = self.0.metadata.replacen(from, to, 1);
        self
    }
}

/// The misfit, which must be there and name every one of `parts`.
fn misfit_naming(misfit: Option<String>, parts: &[&str]) -> String {
    let misfit = misfit.expect("a misfit");
    for part in parts {
        assert!(misfit.contains(part), "{part:?} not in: {misfit}");
    }
    misfit
}

#[test]
fn kafka_runs_under_todays_rules_fit_the_model() {
    for name in ["today-clean-restart-kill", "today-elr-at-shutdown"] {
        let v = run(name).validate(true);
        eprintln!("{name}: {v}");
        assert!(v.misfit().is_none(), "{name}: {v}");
        assert!(v.model_holds, "{name} runs under today's rules");
        // Not vacuous: elections, ISR changes and brokers' lines were all held.
        assert!(v.controller.elections >= 2, "{name}: {v}");
        assert!(v.controller.partition_changes >= 4, "{name}: {v}");
        assert!(v.brokers.applied >= 8, "{name}: {v}");
        assert!(v.broken().is_empty(), "{name}: {v}");
    }
    // The run through the ELR: the ISR below min.insync.replicas moved a
    // replica into the ELR, and the last member's shutdown left the
    // partition leaderless with ELR and last known ELR.
    let v = run("today-elr-at-shutdown").validate(true);
    let last = v.controller.registrations.last().unwrap();
    assert_eq!(
        (
            last.leader,
            last.isr.clone(),
            last.elr.clone(),
            last.lke.clone()
        ),
        (None, vec![], vec![2, 3], vec![3]),
        "{v}"
    );
    let v = run("today-clean-restart-kill").validate(true);
    assert!(
        // The fixture keeps one producer line in ten (tests/kafka_runs/README.md).
        v.brokers.elections_checked >= 2 && v.brokers.acks_before_elections > Some(100),
        "acknowledgements were placed before elections: {v}"
    );
}

#[test]
fn kafka_losing_acks_1_records_breaks_the_models_property_at_a_validated_election() {
    let v = run("acks1-stall-kill").validate(false);
    eprintln!("{v}");
    assert!(v.misfit().is_none(), "{v}");
    assert!(!v.model_holds);
    let broken = v
        .broken()
        .iter()
        .find(|b| b.property == ACKNOWLEDGED_RECORDS_SURVIVE)
        .unwrap_or_else(|| panic!("the loss was not seen at an election: {v}"));
    assert!(broken.why.contains("became leader in epoch 1"), "{broken}");
    // Under acks=all the model never loses an acknowledged record: the same
    // observations are then a misfit.
    let v = run("acks1-stall-kill").validate(true);
    let misfit = v.misfit().expect("a loss under today's rules is a misfit");
    assert!(misfit.contains(ACKNOWLEDGED_RECORDS_SURVIVE), "{misfit}");
}

#[test]
fn a_controller_without_the_elr_does_not_explain_kafkas_decisions() {
    // The same log, read as if the ELR feature were off: the model's
    // controller would not have moved broker 2 into the ELR.
    let v = run("today-elr-at-shutdown")
        .edit_metadata(
            r#""name":"eligible.leader.replicas.version","featureLevel":1"#,
            r#""name":"eligible.leader.replicas.version","featureLevel":0"#,
        )
        .validate(true);
    misfit_naming(v.misfit(), &["offset 129"]);
}

#[test]
fn an_edited_partition_change_is_a_misfit() {
    // Broker 2's fence below min.insync.replicas, without its ELR entry.
    let v = run("today-elr-at-shutdown")
        .edit_metadata(r#""isr":[3],"eligibleLeaderReplicas":[2]"#, r#""isr":[3]"#)
        .validate(true);
    misfit_naming(v.misfit(), &["offset 129"]);
    // An election of a replica outside the ISR.
    let v = run("today-elr-at-shutdown")
        .edit_metadata(r#""isr":[1,3],"leader":3"#, r#""isr":[1,3],"leader":2"#)
        .validate(true);
    misfit_naming(v.misfit(), &["batch at offset 101"]);
}

#[test]
fn a_fence_whose_partition_change_is_missing_is_a_misfit() {
    let mut r = run("today-elr-at-shutdown");
    let line =
        r.0.metadata
            .lines()
            .find(|l| l.contains(r#""isr":[2,3]}"#))
            .expect("the fence of broker 1")
            .to_string();
    r.0.metadata = r.0.metadata.replace(&(line + "\n"), "");
    misfit_naming(r.validate(true).misfit(), &["changes nothing in the batch"]);
}

#[test]
fn a_broker_applying_an_epoch_the_controller_never_wrote_is_a_misfit() {
    let mut r = run("today-clean-restart-kill");
    let (_, log) = &mut r.0.state_change_logs[2];
    let from = "starts at leader epoch 2 from offset 2930";
    assert!(log.contains(from));
    *log = log.replace(from, "starts at leader epoch 3 from offset 2930");
    misfit_naming(r.validate(true).misfit(), &["broker 3", "leader epoch 3"]);
}

#[test]
fn kafkas_last_known_leader_election_recovering_fits_the_model() {
    // Under today's rules a follower stopped past the ISR lag, then the
    // other two killed: the ISR empties into the ELR, each killed broker
    // leaves the ELR when it registers again (an unclean shutdown), and the
    // last known leader is elected RECOVERING, then recovers by its
    // AlterPartition (`PartitionChangeBuilder`'s last-known-leader path).
    let v = run("today-lag-kill-recovering").validate(true);
    eprintln!("{v}");
    assert!(v.misfit().is_none(), "{v}");
    let recovering: Vec<_> = v
        .controller
        .registrations
        .iter()
        .filter(|r| r.recovering)
        .collect();
    assert_eq!(recovering.len(), 1, "{v}");
    assert_eq!(
        (recovering[0].leader, recovering[0].isr.clone()),
        (Some(1), vec![1]),
        "{v}"
    );
    assert!(
        v.brokers.hw_moves_before_elections > Some(100),
        "HW moves were placed before elections: {v}"
    );
}

#[test]
fn a_last_known_leader_elected_as_recovered_is_a_misfit() {
    let v = run("today-lag-kill-recovering")
        .edit_metadata(r#""leader":1,"leaderRecoveryState":1,"#, r#""leader":1,"#)
        .validate(true);
    misfit_naming(v.misfit(), &["does not fit the model's controller"]);
}

#[test]
fn an_hw_published_past_a_later_leaders_log_is_a_misfit_under_todays_rules() {
    let mut r = run("today-lag-kill-recovering");
    let logs = r.0.partition_logs.as_mut().expect("partition logs kept");
    let (_, log) = logs.iter_mut().find(|(b, _)| *b == 3).expect("broker 3");
    // A move by broker 3, at the time of its last real one, far past any
    // later leader's log end offset.
    let last = log.lines().last().expect("broker 3 led").to_string();
    let ms = last.split_whitespace().next().unwrap();
    log.push_str(&format!(
        "{ms} DEBUG [Partition soak-0 broker=3] High watermark updated from (offset=1, segment=[0:1]) to (offset=999999, segment=[0:1]) (kafka.cluster.Partition)\n"
    ));
    misfit_naming(
        r.validate(true).misfit(),
        &[COMMITTED_RECORDS_SURVIVE, "999999"],
    );
}

impl Run {
    /// Replaces `from` (which must be there) by `to` in broker `broker`'s
    /// partition.log.
    fn edit_partition_log(mut self, broker: u32, from: &str, to: &str) -> Run {
        let logs = self.0.partition_logs.as_mut().expect("partition logs kept");
        edit(logs, broker, from, to);
        self
    }

    fn leaders(&self, acks_all: bool) -> (KafkaValidation, LeaderValidation) {
        let v = self.validate(acks_all);
        let l = v.leaders.clone().expect("leader steps kept");
        (v, l)
    }
}

/// The leaders' half of kept run `name`, which must fit the model.
fn fitting_leaders(name: &str, acks_all: bool) -> LeaderValidation {
    let (v, l) = run(name).leaders(acks_all);
    eprintln!("{name}: {v}");
    assert!(v.misfit().is_none(), "{name}: {v}");
    l
}

/// The kept runs with every leader step (`partition.log` whole), and
/// whether their producer waited for acks=all.
const LEADER_STEP_RUNS: [(&str, bool); 2] = [
    ("today-stall-lag-kill", true),
    ("unclean-isolate-kill", true),
];

#[test]
fn kafkas_leaders_take_the_models_steps() {
    for (name, acks_all) in LEADER_STEP_RUNS {
        let l = fitting_leaders(name, acks_all);
        // Not vacuous: every tenure replayed, with thousands of steps.
        assert!(l.tenures >= 3, "{name}: {l}");
        assert!(l.fetches >= 250 && l.hw_moves >= 190, "{name}: {l}");
        assert!(l.expansions >= 1, "{name}: {l}");
        assert!(l.hidden_appends >= 2_500, "{name}: {l}");
    }
}

#[test]
fn an_hw_moved_past_what_the_isr_holds_is_a_misfit_of_the_leaders_half() {
    // Broker 3 moved its HW to 3,451 once both followers had fetched from
    // 3,451; one further is more than the ISR holds.
    let from = "High watermark updated from (offset=3449, segment=[0:56950]) to (offset=3451,";
    let (v, l) = run("today-stall-lag-kill")
        .edit_partition_log(3, from, &from.replace("3451,", "3452,"))
        .leaders(true);
    let misfit = misfit_naming(l.misfit, &["to: 3452 }", "LeaderAdvanceHw"]);
    assert_eq!(v.misfit().as_deref(), Some(misfit.as_str()));
}

#[test]
fn an_expansion_of_a_follower_that_never_fetched_is_a_misfit_of_the_leaders_half() {
    // Broker 2 asked to add broker 3, which had fetched; broker 1 (cut
    // off, then killed) had not fetched from it yet.
    let from = "PendingExpandIsr(newInSyncReplicaId=3, sentLeaderAndIsr=LeaderAndIsr(leader=2, leaderEpoch=1";
    let (_, l) = run("unclean-isolate-kill")
        .edit_partition_log(2, from, &from.replace("Id=3", "Id=1"))
        .leaders(true);
    misfit_naming(
        l.misfit,
        &["PendingExpand { follower: 1 }", "LeaderExpandIsr"],
    );
}

#[test]
fn kafkas_leaders_under_a_higher_min_insync_replicas_do_not_fit() {
    // The same steps asked of a model whose leaders need three in-sync
    // replicas to write and to move the HW: the first write with two is
    // refused.
    let r = run("today-stall-lag-kill");
    let v = r.validate(true);
    let cfg = Config {
        min_isr: 3,
        ..leaders::model_config(v.controller.rules, true)
    };
    let o = &r.0;
    let mut lines = Vec::new();
    for (b, log) in o.partition_logs.as_ref().unwrap() {
        lines.extend(partition_log::parse(*b, "soak-0", log).unwrap());
    }
    let mut learnt = Vec::new();
    for (b, log) in &o.state_change_logs {
        learnt.extend(state_change::parse_isr_learnt(*b, "soak-0", log).unwrap());
    }
    let validate = |cfg: &Config| {
        leaders::validate(
            cfg,
            &v.controller.replicas,
            &v.applied,
            &learnt,
            &lines,
            &leaders::Jvms::default(),
        )
    };
    misfit_naming(validate(&cfg).misfit, &["min.insync.replicas 3"]);
    // Under the cluster's own min.insync.replicas the same call fits.
    let l = validate(&leaders::model_config(v.controller.rules, true));
    assert!(l.misfit.is_none(), "{l}");
}

#[test]
fn an_hw_move_from_an_hw_the_leader_never_had_is_a_misfit_of_the_leaders_half() {
    let from = "High watermark updated from (offset=3449, segment=[0:56950]) to (offset=3451,";
    let (_, l) = run("today-stall-lag-kill")
        .edit_partition_log(3, from, &from.replace("=3449,", "=3448,"))
        .leaders(true);
    misfit_naming(
        l.misfit,
        &["the move is from HW 3448, the model's leader is at 3449"],
    );
}

impl Run {
    /// Replaces `from` (which must be there) by `to` in broker `broker`'s
    /// kept server.log lines.
    fn edit_server_log(mut self, broker: u32, from: &str, to: &str) -> Run {
        let logs = self.0.server_logs.as_mut().expect("server.log lines kept");
        edit(logs, broker, from, to);
        self
    }

    /// Replaces `from` (which must be there) by `to` in broker `broker`'s
    /// state-change.log.
    fn edit_state_change(mut self, broker: u32, from: &str, to: &str) -> Run {
        edit(&mut self.0.state_change_logs, broker, from, to);
        self
    }
}

/// Replaces `from` (which must be there) by `to` in broker `broker`'s log.
fn edit(logs: &mut [(u32, String)], broker: u32, from: &str, to: &str) {
    let (_, log) = logs
        .iter_mut()
        .find(|(b, _)| *b == broker)
        .expect("the broker's log");
    assert!(log.contains(from), "{from} not in broker {broker}'s log");
    *log = log.replacen(from, to, 1);
}

/// The kept run with its brokers' server.log lines: broker 1, the leader,
/// stranded, wrote past what the others had, lost its unflushed tail to a
/// power loss, came back with a log ending at 485 and truncated to 473,
/// where broker 3's epoch began.
const SERVER_LOG_RUN: &str = "today-strand-power-loss";

#[test]
fn kafkas_followers_truncate_and_keep_their_logs_as_the_model_says() {
    let v = run(SERVER_LOG_RUN).validate(true);
    eprintln!("{SERVER_LOG_RUN}: {v}");
    assert!(v.misfit().is_none(), "{v}");
    let t = v.truncations.as_ref().expect("server.log lines kept");
    // Not vacuous: the leader's diverging answer was held against the
    // epochs' starts, and every cut against the next fetch.
    assert_eq!((t.truncations, t.answers_checked), (3, 1), "{t}");
    assert_eq!(t.resumed_checked, 3, "{t}");
    let e = v.log_ends.as_ref().expect("server.log lines kept");
    assert_eq!((e.cuts, e.loads), (1, 1), "{e}");
    assert!(e.registrations >= 7 && e.leader_bounds >= 800, "{e}");
}

/// Broker 1's truncation at broker 3's diverging answer.
const DIVERGED: &str = "TruncationState(offset=473, completed=true) due to leader epoch and offset EpochEndOffset(errorCode=0, partition=0, leaderEpoch=0, endOffset=473)";

#[test]
fn an_edited_truncation_is_a_misfit() {
    for (what, from, to, said) in [
        (
            "the leader's answer ending where no epoch began",
            "endOffset=473",
            "endOffset=471",
            "epoch 0 ending at 471, is not in a cache",
        ),
        (
            "a cut past the leader's end offset",
            "offset=473,",
            "offset=480,",
            "past the leader's end offset 473",
        ),
        (
            "a cut below where the follower then fetched from",
            "offset=473,",
            "offset=470,",
            "is from 473, not from the cut",
        ),
    ] {
        let v = run(SERVER_LOG_RUN)
            .edit_server_log(1, DIVERGED, &DIVERGED.replace(from, to))
            .validate(true);
        let misfit = v.misfit().unwrap_or_else(|| panic!("{what}: no misfit"));
        assert!(misfit.contains(said), "{what}: {misfit}");
    }
}

#[test]
fn a_log_end_below_what_the_broker_loaded_is_a_misfit() {
    // Broker 1 loaded its log at 485 and registered at 485.
    let v = run(SERVER_LOG_RUN)
        .edit_server_log(1, "logEndOffset=485)", "logEndOffset=490)")
        .validate(true);
    misfit_naming(
        v.misfit(),
        &["log end offset 485, below the 490 it held before (loaded at start-up"],
    );
}

#[test]
fn a_deposed_leaders_log_below_its_own_hw_is_a_misfit() {
    // Broker 3 led epoch 1 and moved its HW to 3,991; it then followed at
    // 3,991. Had it followed at 3,900 with no cut, its log lost records.
    let line = "from offset 3991 with partition epoch 8";
    let v = run(SERVER_LOG_RUN)
        .edit_state_change(3, line, &line.replace("3991", "3900"))
        .validate(true);
    let log_ends = v.log_ends.as_ref().and_then(|e| e.misfit.clone());
    misfit_naming(
        log_ends,
        &["log end offset 3900, below the 3991", "partition.log line"],
    );
}

#[test]
fn a_leader_stopped_between_its_hw_move_and_the_fetch_that_moved_it_fits_only_as_stopped() {
    // Broker 1 moved its HW to 3,134 at broker 3's fetch from 3,134 and was
    // stopped (pause-short, `faults.jsonl`) 1 ms later, before it logged
    // the fetch: the two lines are 6 s apart on the wall clock, 1 ms apart
    // in the JVM's running time.
    let name = "today-pause-mid-fetch";
    let l = fitting_leaders(name, true);
    assert!(l.tenures >= 3 && l.fetches >= 1_000, "{l}");
    // Without the nemesis's record of the pause, the HW move stands 6 s
    // before any fetch that allows it: a misfit at that line.
    let mut r = run(name);
    r.0.faults = None;
    let (_, l) = r.leaders(true);
    misfit_naming(
        l.misfit,
        &["HighWatermark { from: 3126, to: 3134 }", "LeaderAdvanceHw"],
    );
}

#[test]
fn a_leader_killed_between_its_hw_move_and_the_fetch_that_moved_it_fits_only_as_killed() {
    // Broker 1 moved its HW 597 -> 601 at broker 3's fetch from 601, which
    // broker 2's fetch from 601 (served by another request thread) allowed;
    // the nemesis's kill -9 came in the same ms, before that thread logged
    // broker 2's fetch.
    let name = "today-kill-mid-fetch";
    let l = fitting_leaders(name, true);
    assert_eq!(l.unwritten_fetches, 1, "{l}");
    assert!(l.tenures >= 3 && l.fetches >= 500, "{l}");
    // Without the nemesis's record of the kill, the HW passed broker 2.
    let mut r = run(name);
    r.0.faults = None;
    let (_, l) = r.leaders(true);
    misfit_naming(
        l.misfit,
        &["HighWatermark { from: 597, to: 601 }", "LeaderAdvanceHw"],
    );
}

#[test]
fn a_registration_older_than_the_leaders_partition_epoch_is_skipped() {
    // min.insync.replicas=1: broker 1 acknowledged alone, lost its tail to
    // a power loss, and was elected again. Its AlterPartition answers gave
    // it partition epoch 7 before the metadata's registration of epoch 6
    // reached it, which Kafka logs as skipped and applies nothing of.
    let name = "minisr1-stale-registration";
    let v = run(name).validate(true);
    eprintln!("{name}: {v}");
    assert!(v.misfit().is_none(), "{v}");
    assert!(!v.model_holds);
    assert!(
        v.broken()
            .iter()
            .any(|b| b.property == ACKNOWLEDGED_RECORDS_SURVIVE),
        "the loss was not seen at an election: {v}"
    );
    // A registration skipped as older that is not older is not Kafka's.
    let edited = run(name).edit_state_change(
        1,
        "partitionEpoch=6) and isNew=false since the leader is already at a newer partition epoch 7",
        "partitionEpoch=7) and isNew=false since the leader is already at a newer partition epoch 7",
    );
    let err = validate(&edited.0, "soak", true).unwrap_err();
    assert!(
        err.contains("partition epoch 7 skipped as older than 7"),
        "{err}"
    );
}

#[test]
fn an_hw_move_logged_before_a_burst_of_the_other_followers_fetches_fits() {
    // Broker 2 moved its HW 2,805 -> 2,807 at broker 1's fetch from 2,807
    // (broker 1 caught up, not yet in the ISR, holds the HW back), and
    // logged that fetch 24 ms later, after six other lines.
    let name = "acks1-fetch-burst";
    let l = fitting_leaders(name, false);
    assert!(
        l.tenures >= 2 && l.fetches >= 500 && l.reordered >= 300,
        "{l}"
    );
    // That fetch edited to stop one record short: nothing allows the move.
    let edited = run(name).edit_partition_log(
        2,
        "Recorded replica 1 log end offset (LEO) position 2807 ",
        "Recorded replica 1 log end offset (LEO) position 2806 ",
    );
    let (_, l) = edited.leaders(false);
    misfit_naming(
        l.misfit,
        &["HighWatermark { from: 2805, to: 2807 }", "LeaderAdvanceHw"],
    );
}
