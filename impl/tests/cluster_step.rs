//! Scenario tests of the step driver: each a script of model-named steps
//! on real files, checked through the cluster snapshot.

use highwater::cluster::{ClusterSnapshot, StepCluster, StepConfig};
use highwater::replication::log::read_entries;
use highwater::replication::{Acks, ApiError, Election, Error, TruncationMode};
use highwater::storage::LogConfig;

fn cluster(config: StepConfig) -> (tempfile::TempDir, StepCluster) {
    let dir = tempfile::tempdir().unwrap();
    let c = StepCluster::new(dir.path(), config).unwrap();
    (dir, c)
}

fn safe() -> StepConfig {
    StepConfig::new(3)
}

/// Record ids of a replica's log, in offset order.
fn ids(s: &ClusterSnapshot, r: u32) -> Vec<u64> {
    s.record_ids(r).into_iter().map(|i| i.unwrap()).collect()
}

fn epochs(s: &ClusterSnapshot, r: u32) -> Vec<i32> {
    s.replica(r).unwrap().log.iter().map(|e| e.epoch).collect()
}

fn not_enabled<T: std::fmt::Debug>(r: Result<T, Error>) -> bool {
    matches!(r, Err(Error::NotEnabled(_)))
}

/// Elects 0 in epoch 0 and delivers the LeaderAndIsr to everyone.
fn start(c: &mut StepCluster) {
    assert_eq!(c.controller_elect_leader(0).unwrap(), Election::Clean);
    c.become_leader(0, 0).unwrap();
    for f in 1..c.config().replicas {
        c.become_follower(f, 0).unwrap();
    }
}

/// One fetch by each follower.
fn fetch_round(c: &mut StepCluster, followers: &[u32]) {
    for &f in followers {
        c.follower_fetch(f).unwrap();
    }
}

#[test]
fn committed_record_is_read_from_the_new_leader_after_failover() {
    let (_d, mut c) = cluster(safe());
    start(&mut c);
    let a = c.produce(0).unwrap();
    fetch_round(&mut c, &[1, 2]); // followers copy a
    fetch_round(&mut c, &[1, 2]); // the leader learns their LEOs
    assert_eq!(c.leader_advance_hw(0).unwrap(), 1);
    fetch_round(&mut c, &[1, 2]); // the HW reaches the followers
    let s = c.snapshot().unwrap();
    assert_eq!(s.records[&a].acked, Some(0), "acks=all answered at epoch 0");
    assert_eq!(s.records[&a].visible, Some(0));
    assert_eq!(s.replica(1).unwrap().high_watermark, 1);

    // The leader fails; the controller moves leadership to 1.
    c.crash(0, true).unwrap();
    c.controller_shrink_isr(0).unwrap(); // epoch 1: no leader
    assert_eq!(c.controller_elect_leader(1).unwrap(), Election::Clean);
    c.become_leader(1, 2).unwrap();
    c.become_follower(2, 2).unwrap();

    // A consumer reads a from the new leader, below its HW.
    let log = c.replica(1).unwrap().log().log();
    let read = read_entries(&log.reader(), 0, log.high_watermark()).unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(
        (read[0].offset, read[0].epoch, read[0].record_id),
        (0, 0, Some(a))
    );
    let s = c.snapshot().unwrap();
    assert!(s.lost_records(|h| h.acked).is_empty());
    assert!(s.lost_records(|h| h.visible).is_empty());
    assert_eq!(s.divergence_below_hw(), None);
}

#[test]
fn acks_1_write_is_lost_when_the_leader_changes() {
    let (_d, mut c) = cluster(StepConfig {
        acks: Acks::Leader,
        ..safe()
    });
    start(&mut c);
    let a = c.produce(0).unwrap();
    let s = c.snapshot().unwrap();
    assert_eq!(
        s.records[&a].acked,
        Some(0),
        "acknowledged by the leader alone"
    );
    // Before any follower fetches, the leader crashes.
    c.crash(0, true).unwrap();
    c.controller_shrink_isr(0).unwrap();
    c.controller_elect_leader(1).unwrap();
    c.become_leader(1, 2).unwrap();
    let s = c.snapshot().unwrap();
    assert_eq!(
        s.lost_records(|h| h.acked),
        vec![a],
        "the acknowledged write is gone"
    );
    // The old leader comes back and truncates it away: its first fetch is
    // answered with a diverging epoch (truncation on fetch).
    c.restart(0).unwrap();
    c.become_follower(0, 2).unwrap();
    assert_eq!(ids(&c.snapshot().unwrap(), 0), vec![a]);
    c.follower_fetch(0).unwrap();
    assert!(ids(&c.snapshot().unwrap(), 0).is_empty());
}

#[test]
fn acks_all_is_refused_below_min_insync_replicas() {
    let (_d, mut c) = cluster(safe());
    start(&mut c);
    // No follower fetches: after replica.lag.time.max.ms both are out.
    c.leader_shrink_isr(0, 1).unwrap();
    let a = c.produce(0).unwrap(); // ISR {0,2}: still 2
    c.leader_shrink_isr(0, 2).unwrap();
    assert_eq!(c.controller().isr(), vec![0]);
    let before = c.snapshot().unwrap();
    assert!(matches!(
        c.produce(0),
        Err(Error::Api(ApiError::NotEnoughReplicas))
    ));
    let after = c.snapshot().unwrap();
    assert_eq!(before, after, "a refused write changes nothing");
    assert_eq!(after.records[&a].acked, None);
    // With the ELR the HW does not move while |ISR| < min.insync.replicas.
    assert!(not_enabled(c.leader_advance_hw(0)));
}

#[test]
fn the_leader_learns_the_isr_the_controller_shrank() {
    let (_d, mut c) = cluster(safe());
    start(&mut c);
    assert!(not_enabled(c.leader_learns_isr(0)), "nothing to learn yet");
    // Brokers 1 and 2 fail; the controller drops them on its own.
    c.crash(1, true).unwrap();
    c.controller_shrink_isr(1).unwrap();
    c.crash(2, false).unwrap();
    c.controller_shrink_isr(2).unwrap();
    assert_eq!(c.controller().isr(), vec![0]);
    // The leader's copy still has all three, so it takes acks=all writes.
    let a = c.produce(0).unwrap();
    c.leader_learns_isr(0).unwrap();
    assert_eq!(c.snapshot().unwrap().replica(0).unwrap().isr, vec![0]);
    assert!(matches!(
        c.produce(0),
        Err(Error::Api(ApiError::NotEnoughReplicas))
    ));
    assert!(not_enabled(c.leader_learns_isr(0)), "learnt once");
    assert!(
        not_enabled(c.leader_learns_isr(1)),
        "only the leader learns"
    );
    assert_eq!(c.snapshot().unwrap().records[&a].acked, None);
}

#[test]
fn acks_all_appended_then_isr_too_small_is_not_acknowledged() {
    let (_d, mut c) = cluster(StepConfig {
        replication: highwater::replication::ReplicationConfig {
            elr: false,
            ..safe().replication
        },
        ..safe()
    });
    start(&mut c);
    c.leader_shrink_isr(0, 2).unwrap();
    let a = c.produce(0).unwrap(); // ISR {0,1}
    c.leader_shrink_isr(0, 1).unwrap(); // ISR {0}
                                        // Without the ELR the HW moves on the leader alone; the waiting
                                        // producer gets NotEnoughReplicasAfterAppend, not an acknowledgement.
    assert_eq!(c.leader_advance_hw(0).unwrap(), 1);
    let s = c.snapshot().unwrap();
    assert_eq!(s.records[&a].acked, None);
    assert_eq!(s.records[&a].visible, Some(0));
    assert!(s.replica(0).unwrap().pending_acks.is_empty());
}

/// Leader 0 has a (replicated, HW 0 everywhere) and b (its own); it fails,
/// 1 leads in epoch 2 and writes c; 0 comes back and follows.
fn divergent_suffix(mode: TruncationMode, fencing: bool) -> (tempfile::TempDir, StepCluster) {
    let mut config = safe();
    config.replication.truncation = mode;
    config.replication.fencing = fencing;
    config.acks = Acks::Leader;
    let (d, mut c) = cluster(config);
    start(&mut c);
    c.produce(0).unwrap(); // a
    fetch_round(&mut c, &[1, 2]);
    c.produce(0).unwrap(); // b, on 0 only
    c.crash(0, true).unwrap();
    c.controller_shrink_isr(0).unwrap();
    c.controller_elect_leader(1).unwrap();
    c.become_leader(1, 2).unwrap();
    c.produce(1).unwrap(); // c
    c.restart(0).unwrap();
    (d, c)
}

#[test]
fn follower_truncates_a_divergent_suffix_in_each_mode() {
    // Each lookup, unfenced as it first ran and fenced as today.
    for (mode, fencing, kept) in [
        // The HW (0) is all the old rule trusts.
        (TruncationMode::Hw, false, vec![]),
        (TruncationMode::Hw, true, vec![]),
        // The epoch lookups keep a, which the new leader also has.
        (TruncationMode::Epoch, false, vec![0]),
        (TruncationMode::Epoch, true, vec![0]),
        (TruncationMode::EpochIterative, false, vec![0]),
        (TruncationMode::EpochIterative, true, vec![0]),
    ] {
        let (_d, mut c) = divergent_suffix(mode, fencing);
        let s = c.snapshot().unwrap();
        assert_eq!(ids(&s, 0), vec![0, 1], "{mode}: a and b before");
        assert_eq!((ids(&s, 1), epochs(&s, 1)), (vec![0, 2], vec![0, 2]));
        c.become_follower(0, 2).unwrap();
        assert_eq!(
            ids(&c.snapshot().unwrap(), 0),
            kept,
            "{mode}: after truncation"
        );
        c.follower_fetch(0).unwrap();
        let s = c.snapshot().unwrap();
        assert_eq!(
            s.replica(0).unwrap().log,
            s.replica(1).unwrap().log,
            "{mode}"
        );
    }
}

#[test]
fn kip101_misses_a_divergence_inside_an_older_epoch_and_kip279_finds_it() {
    // Follower 2 ends with [a0, b2] and leader 1 with [a0, d0, e4]: the
    // leader's first epoch after 2 starts at offset 2, past the divergence
    // at offset 1, so KIP-101 keeps b2 (the model's
    // `kip101_misses_a_divergence_within_an_older_epoch`).
    for (mode, divergent_kept) in [
        (TruncationMode::Epoch, true),
        (TruncationMode::EpochIterative, false),
    ] {
        let mut config = safe();
        config.replication.truncation = mode;
        config.replication.fencing = false;
        config.replication.min_insync_replicas = 1;
        config.replication.elr = false;
        config.acks = Acks::Leader;
        let (_d, mut c) = cluster(config);
        start(&mut c); // 0 leads epoch 0
        c.produce(0).unwrap(); // a0
        fetch_round(&mut c, &[1, 2]);
        fetch_round(&mut c, &[1, 2]);
        c.leader_advance_hw(0).unwrap();
        fetch_round(&mut c, &[1, 2]); // HW 1 everywhere
                                      // 0 writes d0 which only 1 copies; then 2 leads epoch 2 and writes b2.
        c.produce(0).unwrap(); // d0 at offset 1
        c.follower_fetch(1).unwrap();
        c.crash(0, true).unwrap();
        c.controller_shrink_isr(0).unwrap(); // epoch 1
        c.controller_elect_leader(2).unwrap(); // epoch 2
        c.become_leader(2, 2).unwrap();
        c.produce(2).unwrap(); // b2 at offset 1
                               // 1 now leads epoch 4 without hearing of epoch 2 (it still has d0
                               // at offset 1), and writes e4.
        c.crash(2, true).unwrap();
        c.controller_shrink_isr(2).unwrap(); // epoch 3
        c.controller_elect_leader(1).unwrap(); // epoch 4
        c.become_leader(1, 4).unwrap();
        c.produce(1).unwrap(); // e4 at offset 2
        c.restart(2).unwrap();
        let s = c.snapshot().unwrap();
        assert_eq!(epochs(&s, 1), vec![0, 0, 4]);
        assert_eq!(epochs(&s, 2), vec![0, 2]);
        // 2 asks for epoch 2: leader 1's first epoch after 2 is 4, at 2.
        c.become_follower(2, 4).unwrap();
        let s = c.snapshot().unwrap();
        let kept = ids(&s, 2);
        assert_eq!(kept.len() == 2, divergent_kept, "{mode}: {kept:?}");
        if divergent_kept {
            // KIP-101 kept b2; the fetch appends e4 after it: below the
            // leader's HW the logs now disagree once the HW passes.
            assert_ne!(s.replica(2).unwrap().log[1], s.replica(1).unwrap().log[1]);
        } else {
            assert_eq!(kept, vec![0]);
        }
    }
}

#[test]
fn isr_shrinks_on_lag_and_expands_on_catch_up() {
    let (_d, mut c) = cluster(safe());
    start(&mut c);
    c.produce(0).unwrap();
    c.follower_fetch(1).unwrap();
    c.follower_fetch(1).unwrap(); // the leader knows 1 has LEO 1 = its own
                                  // 1 is caught up: not out of sync however long it waits.
    assert!(not_enabled(c.leader_shrink_isr(0, 1)));
    // 2 never fetched: out after replica.lag.time.max.ms.
    c.leader_shrink_isr(0, 2).unwrap();
    assert_eq!(c.controller().isr(), vec![0, 1]);
    assert_eq!(c.partition(0).unwrap().isr(), vec![0, 1]);
    assert_eq!(c.leader_advance_hw(0).unwrap(), 1);
    // 2 is not caught up to the HW yet.
    assert!(not_enabled(c.leader_expand_isr(0, 2)));
    c.follower_fetch(2).unwrap(); // fetch offset 0 < HW 1
    assert!(not_enabled(c.leader_expand_isr(0, 2)));
    c.follower_fetch(2).unwrap(); // fetch offset 1 = HW
    c.leader_expand_isr(0, 2).unwrap();
    assert_eq!(c.controller().isr(), vec![0, 1, 2]);
    assert_eq!(c.partition(0).unwrap().isr(), vec![0, 1, 2]);
    // A follower that stops following this leader (here: crashes) stays in
    // the ISR while it is caught up (Kafka's Replica.isCaughtUp); the
    // controller removes the dead broker.
    c.crash(1, true).unwrap();
    assert!(not_enabled(c.leader_shrink_isr(0, 1)));
    c.controller_shrink_isr(1).unwrap();
    c.leader_learns_isr(0).unwrap();
    assert_eq!(c.controller().isr(), vec![0, 2]);
    // It restarts and follows again in the same epoch; its fetch before
    // the crash does not count (KIP-903) until it fetches again.
    c.restart(1).unwrap();
    c.become_follower(1, 0).unwrap();
    assert!(not_enabled(c.leader_expand_isr(0, 1)));
    c.follower_fetch(1).unwrap();
    c.leader_expand_isr(0, 1).unwrap();
    assert_eq!(c.controller().isr(), vec![0, 1, 2]);
}

#[test]
fn stale_leader_cannot_change_the_isr() {
    let (_d, mut c) = cluster(safe());
    start(&mut c);
    // The controller moves leadership to 1 (clean); 0 has not heard yet.
    c.controller_elect_leader(1).unwrap();
    assert_eq!(c.snapshot().unwrap().leader_moves, 1);
    assert!(c.partition(0).unwrap().is_leader());
    assert!(not_enabled(c.leader_shrink_isr(0, 2)));
    assert_eq!(c.controller().isr(), vec![0, 1, 2]);
    assert_eq!(c.partition(0).unwrap().isr(), vec![0, 1, 2]);
}

/// Started, then 0 crashes and the controller elects 1 in epoch 2.
fn leader_0_crashes_and_1_is_elected(c: &mut StepCluster) {
    start(c);
    c.crash(0, true).unwrap();
    c.controller_shrink_isr(0).unwrap();
    c.controller_elect_leader(1).unwrap();
}

#[test]
fn fenced_fetch_waits_for_the_leader_epoch() {
    let (_d, mut c) = cluster(safe());
    leader_0_crashes_and_1_is_elected(&mut c);
    // Under truncation on fetch 2 follows epoch 2 at once (it asks nothing
    // when following), but its fetch waits until 1 leads in it (KIP-320).
    c.become_follower(2, 2).unwrap();
    assert!(not_enabled(c.follower_fetch(2)));
    c.become_leader(1, 2).unwrap();
    c.follower_fetch(2).unwrap();
    // A stale LeaderAndIsr is refused.
    assert!(not_enabled(c.become_follower(2, 0)));
}

#[test]
fn fenced_offsets_for_leader_epoch_waits_for_the_leader_epoch() {
    let mut config = safe();
    config.replication.truncation = TruncationMode::EpochIterative;
    let (_d, mut c) = cluster(config);
    leader_0_crashes_and_1_is_elected(&mut c);
    // KIP-279's follower asks the leader of epoch 2 first: it cannot follow
    // until 1 leads in it (KIP-320).
    assert!(not_enabled(c.become_follower(2, 2)));
    c.become_leader(1, 2).unwrap();
    c.become_follower(2, 2).unwrap();
    c.follower_fetch(2).unwrap();
    assert!(not_enabled(c.become_follower(2, 0)));
}

#[test]
fn restart_after_an_unclean_crash_recovers_the_flushed_prefix() {
    let mut config = safe();
    config.acks = Acks::Leader;
    // Small segments: the unflushed suffix spans several.
    config.log = LogConfig {
        segment_bytes: 300,
        index_interval_bytes: 64,
        ..LogConfig::default()
    };
    let (_d, mut c) = cluster(config);
    start(&mut c);
    for _ in 0..4 {
        c.produce(0).unwrap();
    }
    c.flush(0).unwrap(); // recovery point 4
    for _ in 0..6 {
        c.produce(0).unwrap();
    }
    let log = c.replica(0).unwrap().log().log();
    assert_eq!(log.recovery_point(), 4);
    assert!(log.segments().len() >= 3, "several segments");
    c.crash(0, false).unwrap();
    let image = c.snapshot().unwrap().replica(0).unwrap().clone();
    assert_eq!(image.log.len(), 4, "the page cache held the rest");
    assert!(image.unclean_down);
    // The controller still names 0 leader: it cannot come back yet.
    assert!(not_enabled(c.restart(0)));
    c.controller_shrink_isr(0).unwrap();
    let report = c.restart(0).unwrap();
    assert!(!report.clean_shutdown);
    let s = c.snapshot().unwrap();
    let r = s.replica(0).unwrap();
    assert_eq!(
        r.log, image.log,
        "recovery finds exactly the flushed records"
    );
    assert_eq!((r.log_end_offset, r.recovery_point), (4, 4));
    // KIP-966: an unclean restart leaves the ISR and the ELR.
    assert!(!s.controller.isr.contains(&0));
    assert!(!s.controller.elr.contains(&0));
    // It follows the new leader and gets the records back that 1 has.
    c.controller_elect_leader(1).unwrap();
    let epoch = c.controller().leader_epoch().unwrap();
    c.become_leader(1, epoch).unwrap();
    c.become_follower(0, epoch).unwrap();
    c.follower_fetch(0).unwrap();
    let s = c.snapshot().unwrap();
    assert_eq!(s.replica(0).unwrap().log, s.replica(1).unwrap().log);
}

#[test]
fn expand_is_checked_against_the_controllers_isr() {
    let (_d, mut c) = cluster(safe());
    start(&mut c);
    c.produce(0).unwrap();
    fetch_round(&mut c, &[1, 2]);
    fetch_round(&mut c, &[1, 2]);
    c.leader_advance_hw(0).unwrap();
    // 2 fails; the controller drops it without a new epoch, so leader 0
    // still lists it.
    c.crash(2, true).unwrap();
    c.controller_shrink_isr(2).unwrap();
    assert_eq!(c.controller().isr(), vec![0, 1]);
    assert_eq!(c.partition(0).unwrap().isr(), vec![0, 1, 2]);
    c.restart(2).unwrap();
    c.become_follower(2, 0).unwrap();
    // Its fetch from before the crash does not count (KIP-903).
    assert!(not_enabled(c.leader_expand_isr(0, 2)));
    c.follower_fetch(2).unwrap();
    c.leader_expand_isr(0, 2).unwrap();
    assert_eq!(c.controller().isr(), vec![0, 1, 2]);
    // Adding a member again is not enabled.
    assert!(not_enabled(c.leader_expand_isr(0, 1)));
}

/// Kafka's `Partition.maybeIncrementLeaderHW` also waits for a follower
/// outside the ISR that is caught up (`ReplicaState.isCaughtUp`: within
/// replica.lag.time.max.ms of reaching the leader's LEO) and eligible
/// (`shouldWaitForReplicaToJoinIsr`): now, the HW stops at its LEO, and it
/// may join; once the lag has passed, the HW goes over the ISR alone. With
/// `hw_waits_for_caught_up` off (the model's `hw-over-isr-only` mutation)
/// it never waits, and this test notices.
#[test]
fn hw_waits_for_a_caught_up_follower_outside_the_isr_until_the_lag_passes() {
    for waits in [true, false] {
        let mut config = safe();
        config.replication.hw_waits_for_caught_up = waits;
        let lag = config.replication.replica_lag_time_max_ms;
        let (_d, mut c) = cluster(config);
        start(&mut c);
        c.leader_shrink_isr(0, 2).unwrap(); // 2 never fetched: ISR {0,1}
        c.produce(0).unwrap();
        fetch_round(&mut c, &[2, 2]); // the leader knows 2 holds a: its LEO
        c.produce(0).unwrap();
        fetch_round(&mut c, &[1, 1]); // 1 holds a and b
        assert_eq!(c.partition(0).unwrap().isr(), vec![0, 1]);
        let p = c.partition(0).unwrap();
        let now = c.now() + 1;
        let (held, over_isr) = (p.advanced_hw(now), p.advanced_hw(now + lag + 1));
        if waits {
            assert_eq!(held, Some(1), "2 caught up a moment ago: the HW waits");
        } else {
            assert_eq!(held, Some(2), "the ISR alone");
        }
        assert_eq!(over_isr, Some(2), "the lag passed: 2 no longer counts");
        assert_eq!(c.leader_advance_hw(0).unwrap(), if waits { 1 } else { 2 });
        if waits {
            // 2 is at the HW and may join; the HW then waits for it in the ISR.
            c.leader_expand_isr(0, 2).unwrap();
            assert!(not_enabled(c.leader_advance_hw(0)));
            c.follower_fetch(2).unwrap();
            c.follower_fetch(2).unwrap();
            assert_eq!(c.leader_advance_hw(0).unwrap(), 2);
        }
    }
}

/// The step driver offers both HWs the model does: waiting for the
/// caught-up follower, or over the ISR once the lag has passed; any other
/// is refused.
#[test]
fn the_hw_step_takes_either_hw_the_model_offers() {
    let (_d, mut c) = cluster(safe());
    start(&mut c);
    c.leader_shrink_isr(0, 2).unwrap();
    c.produce(0).unwrap();
    fetch_round(&mut c, &[2, 2]);
    c.produce(0).unwrap();
    fetch_round(&mut c, &[1, 1]);
    assert!(not_enabled(c.leader_advance_hw_to(0, 3)));
    let before = c.now();
    c.leader_advance_hw_to(0, 2).unwrap();
    assert_eq!(c.partition(0).unwrap().log_state().high_watermark, 2);
    assert_eq!(c.now(), before + 1, "the lag passed for that step only");
    assert!(not_enabled(c.leader_advance_hw_to(0, 1)), "never backwards");
}
