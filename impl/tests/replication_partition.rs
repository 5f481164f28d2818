//! The partition state machine on its own: one input at a time, checked
//! through its state, its answers and its files.

use highwater::replication::log::record_key;
use highwater::replication::{
    Acks, ApiError, DiskLog, DiskLogConfig, Error, FetchRequest, LeaderAndIsr, Output, Partition,
    ProduceRequest, ReplicaLog, ReplicationConfig, TruncationMode,
};
use highwater::storage::{checkpoint, Record, TopicPartition};

const LAG: u64 = 30_000;

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0).unwrap()
}

fn replica(dir: &std::path::Path, id: u32, mode: TruncationMode) -> Partition<DiskLog> {
    let (log, _) = DiskLog::open(&dir.join(format!("b{id}")), &DiskLogConfig::new(tp())).unwrap();
    let config = ReplicationConfig {
        truncation: mode,
        replica_lag_time_max_ms: LAG,
        ..ReplicationConfig::default()
    };
    Partition::new(id, vec![0, 1], config, log, None).unwrap()
}

fn lai(epoch: i32, leader: Option<u32>) -> LeaderAndIsr {
    LeaderAndIsr {
        leader_epoch: epoch,
        leader,
        isr: vec![0, 1],
        replicas: vec![0, 1],
    }
}

fn produce(p: &mut Partition<DiskLog>, id: u64, acks: Acks) -> Result<u64, ApiError> {
    let rec = Record {
        key: Some(record_key(id)),
        ..Record::new(0, "v")
    };
    p.produce(ProduceRequest {
        request_id: id,
        acks,
        records: vec![rec],
    })
    .map(|a| a.base_offset)
}

/// One full fetch exchange from follower `f` to leader `l` at `now`.
fn fetch(f: &mut Partition<DiskLog>, l: &mut Partition<DiskLog>, now: u64) {
    let (_, req) = f.fetch_request(now).expect("fetching");
    let resp = l.handle_fetch_request(&req, now);
    f.handle_fetch_response(&resp).unwrap();
}

/// 0 leads epoch 0, 1 follows.
fn pair(mode: TruncationMode) -> (tempfile::TempDir, Partition<DiskLog>, Partition<DiskLog>) {
    let d = tempfile::tempdir().unwrap();
    let mut l = replica(d.path(), 0, mode);
    let mut f = replica(d.path(), 1, mode);
    l.handle_leader_and_isr(&lai(0, Some(0)), 0).unwrap();
    f.handle_leader_and_isr(&lai(0, Some(0)), 0).unwrap();
    (d, l, f)
}

#[test]
fn lag_is_measured_from_the_last_caught_up_fetch() {
    let (_d, mut l, mut f) = pair(TruncationMode::Fenced);
    produce(&mut l, 0, Acks::Leader).unwrap();
    fetch(&mut f, &mut l, 20); // fetch offset 0 < LEO 1: not caught up
    assert!(
        !l.is_out_of_sync(1, LAG),
        "caught up at 0, when it became leader"
    );
    assert!(l.is_out_of_sync(1, LAG + 1));
    fetch(&mut f, &mut l, LAG + 2); // offset 1 = LEO: caught up
    assert!(
        !l.is_out_of_sync(1, 10 * LAG),
        "caught up and fetching: in sync"
    );
    produce(&mut l, 1, Acks::Leader).unwrap();
    assert!(!l.is_out_of_sync(1, 2 * LAG + 2));
    assert!(
        l.is_out_of_sync(1, 2 * LAG + 3),
        "lagging for longer than the lag time"
    );
    // Kafka's second rule: reaching the LEO the leader had at the previous
    // fetch counts as caught up at that fetch's time.
    fetch(&mut f, &mut l, 3 * LAG); // offset 1 < LEO 2; the leader's LEO then: 2
    produce(&mut l, 2, Acks::Leader).unwrap();
    fetch(&mut f, &mut l, 3 * LAG + 50); // offset 2 >= 2
    assert!(!l.is_out_of_sync(1, 4 * LAG));
    assert!(l.is_out_of_sync(1, 4 * LAG + 1));
}

#[test]
fn a_follower_that_stops_fetching_here_is_out_even_when_caught_up() {
    let (_d, mut l, mut f) = pair(TruncationMode::Fenced);
    fetch(&mut f, &mut l, 10);
    assert!(!l.is_out_of_sync(1, 10 * LAG));
    // It is told of epoch 1 (led by 0 too); 0 has not heard yet.
    f.handle_leader_and_isr(&lai(1, Some(0)), 20).unwrap();
    for out in f.take_outputs() {
        if let Output::Following { leader } = out {
            l.handle_following(1, leader);
        }
    }
    assert!(l.is_out_of_sync(1, 10 + LAG + 1));
    // The same after a crash.
    let (_d, mut l, mut f) = pair(TruncationMode::Fenced);
    fetch(&mut f, &mut l, 10);
    l.handle_peer_crashed(1);
    assert!(l.is_out_of_sync(1, 10 + LAG + 1));
    assert!(
        !l.is_caught_up_for_isr(1),
        "KIP-903: that fetch no longer counts"
    );
}

#[test]
fn fenced_requests_carry_the_leader_epoch() {
    for (mode, fenced) in [
        (TruncationMode::Fenced, true),
        (TruncationMode::EpochIterative, false),
    ] {
        let (_d, mut l, _f) = pair(mode);
        let req = |epoch| FetchRequest {
            correlation_id: 1,
            replica_id: 1,
            fetch_offset: 0,
            current_leader_epoch: epoch,
            max_bytes: 1 << 20,
        };
        l.handle_leader_and_isr(&lai(3, Some(0)), 0).unwrap();
        let old = l.handle_fetch_request(&req(2), 1).error;
        let new = l.handle_fetch_request(&req(4), 1).error;
        if fenced {
            assert_eq!(old, Some(ApiError::FencedLeaderEpoch));
            assert_eq!(new, Some(ApiError::UnknownLeaderEpoch));
        } else {
            assert_eq!(
                (old, new),
                (None, None),
                "{mode}: unfenced fetches are served"
            );
        }
        assert_eq!(l.handle_fetch_request(&req(3), 1).error, None);
    }
}

#[test]
fn late_responses_are_ignored() {
    let (_d, mut l, mut f) = pair(TruncationMode::Fenced);
    produce(&mut l, 0, Acks::Leader).unwrap();
    let (_, req) = f.fetch_request(5).unwrap();
    let resp = l.handle_fetch_request(&req, 5);
    // The follower moves on to epoch 1 before the response arrives.
    f.handle_leader_and_isr(&lai(1, None), 6).unwrap();
    f.handle_fetch_response(&resp).unwrap();
    assert_eq!(f.log().log_end_offset(), 0);
    // A duplicate of an answered response is ignored too.
    let (_d, mut l, mut f) = pair(TruncationMode::Fenced);
    produce(&mut l, 0, Acks::Leader).unwrap();
    let (_, req) = f.fetch_request(5).unwrap();
    let resp = l.handle_fetch_request(&req, 5);
    f.handle_fetch_response(&resp).unwrap();
    f.handle_fetch_response(&resp).unwrap();
    assert_eq!(f.log().log_end_offset(), 1);
    assert!(
        f.fetch_request(6).is_some(),
        "nothing in flight after the answer"
    );
}

#[test]
fn a_follower_ahead_of_its_leader_cuts_back_to_the_leaders_leo() {
    let d = tempfile::tempdir().unwrap();
    let mut a = replica(d.path(), 0, TruncationMode::Hw);
    let (log, _) = DiskLog::open(&d.path().join("b1"), &DiskLogConfig::new(tp())).unwrap();
    let config = ReplicationConfig {
        truncation: TruncationMode::Hw,
        min_insync_replicas: 1,
        ..ReplicationConfig::default()
    };
    let mut b = Partition::new(1, vec![0, 1], config, log, None).unwrap();
    // 1 leads epoch 0 alone and commits two records.
    let alone = LeaderAndIsr {
        isr: vec![1],
        ..lai(0, Some(1))
    };
    b.handle_leader_and_isr(&alone, 0).unwrap();
    produce(&mut b, 0, Acks::Leader).unwrap();
    produce(&mut b, 1, Acks::Leader).unwrap();
    assert_eq!(b.leader_advance_hw().unwrap(), Some(2));
    // 0, with nothing, leads epoch 1 (an unclean election); 1 follows and,
    // under `hw`, keeps everything below its HW.
    a.handle_leader_and_isr(&lai(1, Some(0)), 1).unwrap();
    b.handle_leader_and_isr(&lai(1, Some(0)), 2).unwrap();
    assert_eq!(b.log().log_end_offset(), 2);
    // Its fetch at 2 is out of the leader's range: it cuts back to 0, and
    // the leader learns nothing from it.
    let (_, req) = b.fetch_request(3).unwrap();
    let resp = a.handle_fetch_request(&req, 3);
    assert_eq!(resp.error, Some(ApiError::OffsetOutOfRange));
    assert!(a.state().followers[&1].log_end_offset.is_none());
    b.handle_fetch_response(&resp).unwrap();
    assert_eq!((b.log().log_end_offset(), b.log().high_watermark()), (0, 0));
}

#[test]
fn produce_refusals_and_waiters_on_leadership_loss() {
    let (_d, mut l, mut f) = pair(TruncationMode::Fenced);
    assert_eq!(
        produce(&mut f, 0, Acks::All),
        Err(ApiError::NotLeaderOrFollower)
    );
    let empty = ProduceRequest {
        request_id: 9,
        acks: Acks::All,
        records: vec![],
    };
    assert_eq!(l.produce(empty).map(|_| ()), Err(ApiError::InvalidRequest));
    produce(&mut l, 0, Acks::All).unwrap();
    assert_eq!(l.state().waiting_acks, vec![0]);
    // Leadership moves on: the waiting producer is told to retry.
    l.handle_leader_and_isr(&lai(1, Some(1)), 5).unwrap();
    let answers: Vec<_> = l
        .take_outputs()
        .into_iter()
        .filter_map(|o| match o {
            Output::Produce(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].result, Err(ApiError::NotLeaderOrFollower));
}

#[test]
fn leader_and_isr_epochs_only_move_forward() {
    let d = tempfile::tempdir().unwrap();
    let mut p = replica(d.path(), 0, TruncationMode::Fenced);
    p.handle_leader_and_isr(&lai(2, None), 0).unwrap();
    assert!(matches!(
        p.handle_leader_and_isr(&lai(2, Some(0)), 1),
        Err(Error::StaleLeaderAndIsr { .. })
    ));
    assert!(matches!(
        p.handle_leader_and_isr(&lai(1, Some(0)), 1),
        Err(Error::StaleLeaderAndIsr { .. })
    ));
    // A restarted replica registered at epoch 2 takes epoch 2 once.
    let log = p.into_log();
    let mut p = Partition::new(0, vec![0, 1], ReplicationConfig::default(), log, Some(2)).unwrap();
    assert!(p.accepts_leader_and_isr(2));
    p.handle_leader_and_isr(&lai(2, Some(0)), 1).unwrap();
    assert!(!p.accepts_leader_and_isr(2));
}

#[test]
fn the_hw_is_checkpointed_on_every_change() {
    let d = tempfile::tempdir().unwrap();
    let (mut l, mut f) = (
        replica(d.path(), 0, TruncationMode::Fenced),
        replica(d.path(), 1, TruncationMode::Fenced),
    );
    l.handle_leader_and_isr(&lai(0, Some(0)), 0).unwrap();
    f.handle_leader_and_isr(&lai(0, Some(0)), 0).unwrap();
    produce(&mut l, 0, Acks::All).unwrap();
    fetch(&mut f, &mut l, 1);
    fetch(&mut f, &mut l, 2);
    assert_eq!(l.leader_advance_hw().unwrap(), Some(1));
    let answered: Vec<_> = l.take_outputs();
    assert!(answered
        .iter()
        .any(|o| matches!(o, Output::Produce(r) if r.result == Ok((0, 0)))));
    let hws = checkpoint::read_offsets(&d.path().join("b0/replication-offset-checkpoint"))
        .unwrap()
        .unwrap();
    assert_eq!(hws[&tp()], 1);
    // Reopened after a clean shutdown, the log has that HW; after an
    // unclean crash that lost the unflushed record, the HW is clamped.
    l.into_log().close().unwrap();
    let (log, _) = DiskLog::open(&d.path().join("b0"), &DiskLogConfig::new(tp())).unwrap();
    assert_eq!(log.high_watermark(), 1);
    f.into_log().crash().unwrap();
    let (log, _) = DiskLog::open(&d.path().join("b1"), &DiskLogConfig::new(tp())).unwrap();
    assert_eq!((log.log_end_offset(), log.high_watermark()), (0, 0));
}
