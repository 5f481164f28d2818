//! The implementation heals where the model says a partition can: the
//! stall that highwater's old ISR-join rule allowed (a leader elected with
//! its ISR below min.insync.replicas and its HW below its epoch start)
//! clears under Kafka's rule, `Partition.isFollowerInSync`, and stays under
//! the old one.

use highwater::cluster::{StepCluster, StepConfig};
use highwater::replication::{ApiError, Error, IsrJoinRule};

fn cluster(rule: IsrJoinRule) -> (tempfile::TempDir, StepCluster) {
    let mut config = StepConfig::new(3);
    config.replication.isr_join = rule;
    let dir = tempfile::tempdir().unwrap();
    let c = StepCluster::new(dir.path(), config).unwrap();
    (dir, c)
}

/// The stall's prefix: A leads epoch 0 and takes a write; B copies it; A
/// drops C; the controller removes A (epoch 1, leaderless; A enters the
/// ELR); B is elected from the ISR (epoch 2) and leads with ISR {B}, its HW
/// at 0 and its epoch starting at 1; C follows. KIP-966 holds the HW while
/// the ISR is below min.insync.replicas.
fn stall_prefix(c: &mut StepCluster) {
    c.controller_elect_leader(0).unwrap();
    c.become_leader(0, 0).unwrap();
    c.become_follower(1, 0).unwrap();
    c.become_follower(2, 0).unwrap();
    c.produce(0).unwrap();
    c.follower_fetch(1).unwrap();
    c.leader_shrink_isr(0, 2).unwrap();
    c.controller_shrink_isr(0).unwrap();
    c.controller_elect_leader(1).unwrap();
    c.become_leader(1, 2).unwrap();
    c.become_follower(2, 2).unwrap();
    let s = c.snapshot().unwrap();
    let b = s.replica(1).unwrap();
    assert_eq!((b.log_end_offset, b.high_watermark), (1, 0));
    assert_eq!(c.controller().state().isr.len(), 1);
}

/// Every follower fetches twice (so the leader learns what it copied).
fn fetch_rounds(c: &mut StepCluster) {
    for _ in 0..2 {
        for f in [0, 2] {
            let _ = c.follower_fetch(f);
        }
    }
}

#[test]
fn kafkas_rule_takes_the_caught_up_followers_back_and_the_hw_moves() {
    let (_d, mut c) = cluster(IsrJoinRule::FollowerReachedEpochStart);
    stall_prefix(&mut c);
    // A left the ISR as a live broker, fenced: it heartbeats again (a
    // fenced broker may not join the ISR, KIP-841) and follows B too.
    c.controller_unfence(0).unwrap();
    c.become_follower(0, 2).unwrap();
    fetch_rounds(&mut c);
    c.leader_expand_isr(1, 2).unwrap();
    c.leader_expand_isr(1, 0).unwrap();
    assert_eq!(c.controller().state().isr.len(), 3, "a full ISR");
    assert_eq!(c.leader_advance_hw(1).unwrap(), 1, "the HW moves");
    // And writes are taken again.
    let b = c.produce(1).unwrap();
    fetch_rounds(&mut c);
    assert_eq!(c.leader_advance_hw(1).unwrap(), 2);
    let s = c.snapshot().unwrap();
    assert_eq!(
        s.records[&b].acked,
        Some(2),
        "an acks=all write is acknowledged"
    );
}

#[test]
fn the_old_rule_keeps_them_out_and_the_partition_stalls() {
    let (_d, mut c) = cluster(IsrJoinRule::LeaderHwReachedEpochStart);
    stall_prefix(&mut c);
    // Unfenced as above, so that only the join rule keeps A out.
    c.controller_unfence(0).unwrap();
    c.become_follower(0, 2).unwrap();
    fetch_rounds(&mut c);
    let s = c.snapshot().unwrap();
    for r in [0, 2] {
        assert_eq!(s.replica(r).unwrap().log_end_offset, 1, "{r} caught up");
    }
    for f in [0, 2] {
        assert!(
            matches!(c.leader_expand_isr(1, f), Err(Error::NotEnabled(_))),
            "the old rule refuses {f}"
        );
    }
    assert!(c.leader_advance_hw(1).is_err(), "the HW cannot move");
    assert!(
        matches!(c.produce(1), Err(Error::Api(ApiError::NotEnoughReplicas))),
        "acks=all writes are refused"
    );
}
