//! The partition state machine on its own: one input at a time, checked
//! through its state, its answers and its log. The tests run on the
//! in-memory log; those marked `_on_files` run the same body on Kafka-format
//! files too.

use highwater::replication::log::record_key;
use highwater::replication::{
    Acks, AlterPartitionResponse, ApiError, DiskLog, DiskLogConfig, Error, FetchRequest,
    FetchResponse, HwCheckpointPolicy, Input, LeaderAndIsr, MemoryLog, Output, ProduceRequest,
    Replica, ReplicaLog, ReplicationConfig, Tick, TruncationMode,
};
use highwater::storage::{checkpoint, Record, TopicPartition};

const LAG: u64 = 30_000;

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0).unwrap()
}

/// `mode`'s lookup, fenced as today.
fn config(mode: TruncationMode) -> ReplicationConfig {
    ReplicationConfig {
        truncation: mode,
        replica_lag_time_max_ms: LAG,
        ..ReplicationConfig::default()
    }
}

fn replica<L: ReplicaLog>(log: L, id: u32, mode: TruncationMode) -> Replica<L> {
    Replica::new(id, vec![0, 1], config(mode), log, None).unwrap()
}

/// Kafka-format logs, broker `b<id>` under `dir`.
fn disk(dir: &std::path::Path, id: u32) -> DiskLog {
    DiskLog::open(&dir.join(format!("b{id}")), &DiskLogConfig::new(tp()))
        .unwrap()
        .0
}

fn lai(epoch: i32, leader: Option<u32>) -> LeaderAndIsr {
    LeaderAndIsr {
        leader_epoch: epoch,
        partition_epoch: epoch as u32,
        leader,
        isr: vec![0, 1],
        replicas: vec![0, 1],
    }
}

fn take<L: ReplicaLog>(p: &mut Replica<L>, now: u64, input: Input) -> Vec<Output> {
    p.handle(now, input).unwrap()
}

/// The leader's answer to a produce: the batch's offset, or the error.
fn produce<L: ReplicaLog>(p: &mut Replica<L>, id: u64, acks: Acks) -> Result<u64, ApiError> {
    let rec = Record {
        key: Some(record_key(id)),
        ..Record::new(0, "v")
    };
    let req = ProduceRequest {
        request_id: id,
        acks,
        records: vec![rec],
    };
    let out = take(p, 0, Input::Produce(req));
    for o in &out {
        match o {
            Output::Appended { base_offset, .. } => return Ok(*base_offset),
            Output::Produce(r) if r.result.is_err() => return Err(r.result.unwrap_err()),
            _ => {}
        }
    }
    panic!("no answer: {out:?}")
}

fn fetch_request<L: ReplicaLog>(f: &mut Replica<L>, now: u64) -> Option<FetchRequest> {
    let out = f.handle(now, Input::Tick(Tick::SendRequest)).ok()?;
    out.into_iter().find_map(|o| match o {
        Output::Fetch { request, .. } => Some(request),
        _ => None,
    })
}

fn serve<L: ReplicaLog>(l: &mut Replica<L>, req: FetchRequest, now: u64) -> FetchResponse {
    take(l, now, Input::Fetch(req))
        .into_iter()
        .find_map(|o| match o {
            Output::FetchResponse { response, .. } => Some(response),
            _ => None,
        })
        .expect("an answer")
}

/// One full fetch exchange from follower `f` to leader `l` at `now`.
fn fetch<L: ReplicaLog>(f: &mut Replica<L>, l: &mut Replica<L>, now: u64) {
    let req = fetch_request(f, now).expect("fetching");
    let resp = serve(l, req, now);
    take(f, now, Input::FetchResponse(resp));
}

/// 0 leads epoch 0, 1 follows.
fn pair<L: ReplicaLog>(a: L, b: L, mode: TruncationMode) -> (Replica<L>, Replica<L>) {
    pair_with(a, b, config(mode))
}

fn pair_with<L: ReplicaLog>(a: L, b: L, cfg: ReplicationConfig) -> (Replica<L>, Replica<L>) {
    let mut l = Replica::new(0, vec![0, 1], cfg.clone(), a, None).unwrap();
    let mut f = Replica::new(1, vec![0, 1], cfg, b, None).unwrap();
    take(&mut l, 0, Input::LeaderAndIsr(lai(0, Some(0))));
    take(&mut f, 0, Input::LeaderAndIsr(lai(0, Some(0))));
    (l, f)
}

fn memory_pair(mode: TruncationMode) -> (Replica<MemoryLog>, Replica<MemoryLog>) {
    pair(MemoryLog::new(), MemoryLog::new(), mode)
}

fn leo<L: ReplicaLog>(p: &Replica<L>) -> u64 {
    p.log().state().log_end_offset
}

#[test]
fn lag_is_measured_from_the_last_caught_up_fetch() {
    let (mut l, mut f) = memory_pair(TruncationMode::EpochIterative);
    produce(&mut l, 0, Acks::Leader).unwrap();
    fetch(&mut f, &mut l, 20); // fetch offset 0 < LEO 1: not caught up
    let out_of_sync = |l: &Replica<MemoryLog>, now| l.core().is_out_of_sync(1, now);
    assert!(
        !out_of_sync(&l, LAG),
        "caught up at 0, when it became leader"
    );
    assert!(out_of_sync(&l, LAG + 1));
    fetch(&mut f, &mut l, LAG + 2); // offset 1 = LEO: caught up
    assert!(
        !out_of_sync(&l, 10 * LAG),
        "caught up and fetching: in sync"
    );
    produce(&mut l, 1, Acks::Leader).unwrap();
    assert!(!out_of_sync(&l, 2 * LAG + 2));
    assert!(
        out_of_sync(&l, 2 * LAG + 3),
        "lagging for longer than the lag time"
    );
    // Kafka's second rule: reaching the LEO the leader had at the previous
    // fetch counts as caught up at that fetch's time.
    fetch(&mut f, &mut l, 3 * LAG); // offset 1 < LEO 2; the leader's LEO then: 2
    produce(&mut l, 2, Acks::Leader).unwrap();
    fetch(&mut f, &mut l, 3 * LAG + 50); // offset 2 >= 2
    assert!(!out_of_sync(&l, 4 * LAG));
    assert!(out_of_sync(&l, 4 * LAG + 1));
}

#[test]
fn a_caught_up_follower_stays_in_sync_even_when_it_stops_fetching_here() {
    // Kafka's Replica.isCaughtUp: a follower whose LEO is the leader's is in
    // sync however long ago it fetched; a dead broker leaves through the
    // controller.
    let (mut l, mut f) = memory_pair(TruncationMode::EpochIterative);
    fetch(&mut f, &mut l, 10);
    assert!(!l.core().is_out_of_sync(1, 10 * LAG));
    // It is told of epoch 1 (led by 0 too); 0 has not heard yet.
    for out in take(&mut f, 20, Input::LeaderAndIsr(lai(1, Some(0)))) {
        if let Output::Following { leader } = out {
            let notice = Input::Following {
                follower: 1,
                leader,
            };
            take(&mut l, 20, notice);
        }
    }
    assert!(!l.core().is_out_of_sync(1, 10 + LAG + 1));
    // The same after a crash.
    let (mut l, mut f) = memory_pair(TruncationMode::EpochIterative);
    fetch(&mut f, &mut l, 10);
    take(&mut l, 11, Input::PeerCrashed(1));
    assert!(!l.core().is_out_of_sync(1, 10 + LAG + 1));
    assert!(
        !l.core().is_caught_up_for_isr(1),
        "KIP-903: that fetch no longer counts"
    );
}

#[test]
fn fenced_requests_carry_the_leader_epoch() {
    for fenced in [true, false] {
        let mut l = Replica::new(
            0,
            vec![0, 1],
            ReplicationConfig {
                fencing: fenced,
                ..config(TruncationMode::EpochIterative)
            },
            MemoryLog::new(),
            None,
        )
        .unwrap();
        take(&mut l, 0, Input::LeaderAndIsr(lai(0, Some(0))));
        let req = |epoch| FetchRequest {
            correlation_id: 1,
            replica_id: 1,
            fetch_offset: 0,
            current_leader_epoch: epoch,
            max_bytes: 1 << 20,
            last_fetched_epoch: None,
        };
        take(&mut l, 0, Input::LeaderAndIsr(lai(3, Some(0))));
        let old = serve(&mut l, req(2), 1).error;
        let new = serve(&mut l, req(4), 1).error;
        if fenced {
            assert_eq!(old, Some(ApiError::FencedLeaderEpoch));
            assert_eq!(new, Some(ApiError::UnknownLeaderEpoch));
        } else {
            assert_eq!((old, new), (None, None), "unfenced fetches are served");
        }
        assert_eq!(serve(&mut l, req(3), 1).error, None);
    }
}

fn late_responses_are_ignored_on<L: ReplicaLog>(mut logs: impl FnMut() -> L) {
    let (mut l, mut f) = pair(logs(), logs(), TruncationMode::EpochIterative);
    produce(&mut l, 0, Acks::Leader).unwrap();
    let req = fetch_request(&mut f, 5).unwrap();
    let resp = serve(&mut l, req, 5);
    // The follower moves on to epoch 1 before the response arrives.
    take(&mut f, 6, Input::LeaderAndIsr(lai(1, None)));
    take(&mut f, 6, Input::FetchResponse(resp));
    assert_eq!(leo(&f), 0);
    // A duplicate of an answered response is ignored too.
    let (mut l, mut f) = pair(logs(), logs(), TruncationMode::EpochIterative);
    produce(&mut l, 0, Acks::Leader).unwrap();
    let req = fetch_request(&mut f, 5).unwrap();
    let resp = serve(&mut l, req, 5);
    take(&mut f, 5, Input::FetchResponse(resp.clone()));
    take(&mut f, 5, Input::FetchResponse(resp));
    assert_eq!(leo(&f), 1);
    assert!(
        fetch_request(&mut f, 6).is_some(),
        "nothing in flight after the answer"
    );
}

#[test]
fn late_responses_are_ignored() {
    late_responses_are_ignored_on(MemoryLog::new);
}

#[test]
fn late_responses_are_ignored_on_files() {
    let d = tempfile::tempdir().unwrap();
    let mut id = 0;
    late_responses_are_ignored_on(|| {
        id += 1;
        disk(d.path(), id)
    });
}

/// A restarted follower numbers its requests apart from its last
/// incarnation's (`Replica::set_correlation_base`, as the concurrent driver
/// does per incarnation, standing for Kafka's new connection): a late
/// answer to the old incarnation's fetch is not taken for the answer to the
/// new one's first fetch. Numbered from the same start, as the driver did
/// before, the late answer is applied.
#[test]
fn a_restarted_follower_drops_its_last_incarnations_late_answer() {
    for (base, applied) in [(Some(1u64 << 32), 0), (None, 1)] {
        let (mut l, mut f) = memory_pair(TruncationMode::OnFetch);
        produce(&mut l, 0, Acks::Leader).unwrap();
        let old = fetch_request(&mut f, 5).unwrap();
        let late = serve(&mut l, old, 5);
        // The follower crashes before the answer and comes back empty.
        let mut f = replica(MemoryLog::new(), 1, TruncationMode::OnFetch);
        if let Some(base) = base {
            f.set_correlation_base(base);
        }
        take(&mut f, 6, Input::LeaderAndIsr(lai(0, Some(0))));
        let new = fetch_request(&mut f, 6).unwrap();
        take(&mut f, 6, Input::FetchResponse(late.clone()));
        assert_eq!(leo(&f), applied, "base {base:?}");
        if base.is_some() {
            // Its own answer is still taken.
            let own = serve(&mut l, new, 6);
            assert_ne!(own.correlation_id, late.correlation_id);
            take(&mut f, 6, Input::FetchResponse(own));
            assert_eq!(leo(&f), 1);
        }
    }
}

fn a_follower_ahead_of_its_leader_cuts_back_on<L: ReplicaLog>(a: L, b: L) {
    let mut a = replica(a, 0, TruncationMode::Hw);
    let config = ReplicationConfig {
        truncation: TruncationMode::Hw,
        min_insync_replicas: 1,
        ..ReplicationConfig::default()
    };
    let mut b = Replica::new(1, vec![0, 1], config, b, None).unwrap();
    // 1 leads epoch 0 alone and commits two records.
    let alone = LeaderAndIsr {
        isr: vec![1],
        ..lai(0, Some(1))
    };
    take(&mut b, 0, Input::LeaderAndIsr(alone));
    produce(&mut b, 0, Acks::Leader).unwrap();
    produce(&mut b, 1, Acks::Leader).unwrap();
    take(&mut b, 0, Input::Tick(Tick::AdvanceHw));
    assert_eq!(b.log().state().high_watermark, 2);
    // 0, with nothing, leads epoch 1 (an unclean election); 1 follows and,
    // under `hw`, keeps everything below its HW.
    take(&mut a, 1, Input::LeaderAndIsr(lai(1, Some(0))));
    take(&mut b, 2, Input::LeaderAndIsr(lai(1, Some(0))));
    assert_eq!(leo(&b), 2);
    // Its fetch at 2 is out of the leader's range: it cuts back to 0, and
    // the leader learns nothing from it.
    let req = fetch_request(&mut b, 3).unwrap();
    let resp = serve(&mut a, req, 3);
    assert_eq!(resp.error, Some(ApiError::OffsetOutOfRange));
    assert!(a.core().state().followers[&1].log_end_offset.is_none());
    take(&mut b, 3, Input::FetchResponse(resp));
    let s = b.log().state();
    assert_eq!((s.log_end_offset, s.high_watermark), (0, 0));
}

#[test]
fn a_follower_ahead_of_its_leader_cuts_back_to_the_leaders_leo() {
    a_follower_ahead_of_its_leader_cuts_back_on(MemoryLog::new(), MemoryLog::new());
}

#[test]
fn a_follower_ahead_of_its_leader_cuts_back_to_the_leaders_leo_on_files() {
    let d = tempfile::tempdir().unwrap();
    a_follower_ahead_of_its_leader_cuts_back_on(disk(d.path(), 0), disk(d.path(), 1));
}

#[test]
fn produce_refusals_and_waiters_on_leadership_loss() {
    let (mut l, mut f) = memory_pair(TruncationMode::EpochIterative);
    assert_eq!(
        produce(&mut f, 0, Acks::All),
        Err(ApiError::NotLeaderOrFollower)
    );
    let empty = ProduceRequest {
        request_id: 9,
        acks: Acks::All,
        records: vec![],
    };
    let out = take(&mut l, 0, Input::Produce(empty));
    assert!(matches!(&out[..], [Output::Produce(r)] if r.result == Err(ApiError::InvalidRequest)));
    produce(&mut l, 0, Acks::All).unwrap();
    assert_eq!(l.core().state().waiting_acks, vec![0]);
    // Leadership moves on: the waiting producer is told to retry.
    let answers: Vec<_> = take(&mut l, 5, Input::LeaderAndIsr(lai(1, Some(1))))
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
    let mut p = replica(MemoryLog::new(), 0, TruncationMode::EpochIterative);
    take(&mut p, 0, Input::LeaderAndIsr(lai(2, None)));
    let before = p.clone();
    for stale in [lai(2, Some(0)), lai(1, Some(0))] {
        assert!(matches!(
            p.handle(1, Input::LeaderAndIsr(stale)),
            Err(Error::StaleLeaderAndIsr { .. })
        ));
        assert_eq!(p, before, "a refusal changes nothing");
    }
    // A restarted replica registered at epoch 2 takes epoch 2 once.
    let log = p.into_log();
    let mut p = Replica::new(0, vec![0, 1], ReplicationConfig::default(), log, Some(2)).unwrap();
    assert!(p.core().accepts_leader_and_isr(2));
    take(&mut p, 1, Input::LeaderAndIsr(lai(2, Some(0))));
    assert!(!p.core().accepts_leader_and_isr(2));
}

#[test]
fn a_tick_with_nothing_to_do_is_refused_and_changes_nothing() {
    let (mut l, mut f) = memory_pair(TruncationMode::EpochIterative);
    for (leader, tick) in [
        (true, Tick::AdvanceHw),
        (true, Tick::ShrinkIsr(1)),
        (true, Tick::SendRequest),
        (false, Tick::AdvanceHw),
        (false, Tick::ExpandIsr(0)),
    ] {
        let p = if leader { &mut l } else { &mut f };
        let before = p.clone();
        assert!(p.handle(1, Input::Tick(tick)).is_err(), "{tick:?}");
        assert_eq!(*p, before, "{tick:?}");
    }
    // A request in flight refuses another.
    fetch_request(&mut f, 1).unwrap();
    let in_flight = f.clone();
    assert!(f.handle(2, Input::Tick(Tick::SendRequest)).is_err());
    assert_eq!(f, in_flight);
}

fn the_hw_is_checkpointed_on_every_change_on<L: ReplicaLog>(
    a: L,
    b: L,
    checkpointed: impl Fn(&Replica<L>) -> u64,
) -> (L::Stopped, L::Stopped) {
    let every_change = ReplicationConfig {
        hw_checkpoint: HwCheckpointPolicy::EveryChange,
        ..config(TruncationMode::EpochIterative)
    };
    let (mut l, mut f) = pair_with(a, b, every_change);
    produce(&mut l, 0, Acks::All).unwrap();
    fetch(&mut f, &mut l, 1);
    fetch(&mut f, &mut l, 2);
    let answered = take(&mut l, 3, Input::Tick(Tick::AdvanceHw));
    assert_eq!(l.log().state().high_watermark, 1);
    assert!(answered
        .iter()
        .any(|o| matches!(o, Output::Produce(r) if r.result == Ok((0, 0)))));
    assert_eq!(
        checkpointed(&l),
        1,
        "checkpointed before the producer's answer"
    );
    // Reopened after a clean shutdown, the log has that HW; after an
    // unclean crash that lost the unflushed record, the HW is clamped.
    let l = l.into_log().close().unwrap();
    let (log, _) = L::restart(&l).unwrap();
    assert_eq!(log.state().high_watermark, 1);
    let f = f.into_log().crash().unwrap();
    let (log, report) = L::restart(&f).unwrap();
    assert!(!report.clean_shutdown);
    let s = log.state();
    assert_eq!((s.log_end_offset, s.high_watermark), (0, 0));
    (l, f)
}

#[test]
fn the_hw_is_checkpointed_on_every_change() {
    let (_, f) = the_hw_is_checkpointed_on_every_change_on(
        MemoryLog::new(),
        MemoryLog::new(),
        |l: &Replica<MemoryLog>| l.log().checkpointed_high_watermark(),
    );
    let image = MemoryLog::read_stopped(&f).unwrap().unwrap();
    assert_eq!((image.log.len(), image.high_watermark), (0, 0));
}

#[test]
fn the_hw_is_checkpointed_on_every_change_on_files() {
    let d = tempfile::tempdir().unwrap();
    let read = |l: &Replica<DiskLog>| {
        let path = l.log().path().join("replication-offset-checkpoint");
        checkpoint::read_offsets(&path).unwrap().unwrap()[&tp()]
    };
    the_hw_is_checkpointed_on_every_change_on(disk(d.path(), 0), disk(d.path(), 1), read);
}

#[test]
fn with_the_interval_policy_the_hw_reaches_the_checkpoint_on_its_tick() {
    let cfg = ReplicationConfig {
        hw_checkpoint: HwCheckpointPolicy::IntervalMs(100),
        ..config(TruncationMode::EpochIterative)
    };
    let mk = |id| Replica::new(id, vec![0, 1], cfg.clone(), MemoryLog::new(), None).unwrap();
    let (mut l, mut f) = (mk(0), mk(1));
    take(&mut l, 0, Input::LeaderAndIsr(lai(0, Some(0))));
    take(&mut f, 0, Input::LeaderAndIsr(lai(0, Some(0))));
    produce(&mut l, 0, Acks::All).unwrap();
    fetch(&mut f, &mut l, 1);
    fetch(&mut f, &mut l, 2);
    take(&mut l, 3, Input::Tick(Tick::AdvanceHw));
    assert_eq!(l.log().state().high_watermark, 1);
    assert_eq!(l.log().checkpointed_high_watermark(), 0, "not yet");
    // A flush writes the recovery point's checkpoint, not the HW's.
    take(&mut l, 4, Input::Tick(Tick::Flush));
    assert_eq!(l.log().state().recovery_point, 1);
    assert_eq!(l.log().checkpointed_high_watermark(), 0, "not with a flush");
    take(&mut l, 50, Input::Tick(Tick::CheckpointHw));
    assert_eq!(
        l.log().checkpointed_high_watermark(),
        0,
        "within the interval"
    );
    take(&mut l, 100, Input::Tick(Tick::CheckpointHw));
    assert_eq!(l.log().checkpointed_high_watermark(), 1);
    // A crash before the checkpoint tick finds the older HW, as in Kafka.
    take(&mut f, 101, Input::Tick(Tick::Flush));
    fetch(&mut f, &mut l, 102);
    assert_eq!(f.log().state().high_watermark, 1);
    let stopped = f.into_log().crash().unwrap();
    let (log, _) = MemoryLog::restart(&stopped).unwrap();
    assert_eq!(
        (log.state().log_end_offset, log.state().high_watermark),
        (1, 0)
    );
}

/// Truncation on fetch (`on-fetch`): a new follower keeps its log and fetches
/// at once with its last fetched epoch; the leader answers a divergence with
/// a diverging epoch and no records, learning nothing; the follower cuts its
/// log by it and its next fetch copies (the model's `fetch_divergence`).
#[test]
fn a_diverging_epoch_in_the_fetch_response_truncates_the_follower() {
    use highwater::replication::DivergingEpoch;
    let (mut l, mut f) = memory_pair(TruncationMode::OnFetch);
    produce(&mut l, 0, Acks::Leader).unwrap();
    fetch(&mut f, &mut l, 1);
    // 1 leads epoch 1 and writes r1, which 0 never gets; 0 leads epoch 2
    // and writes r2 at the same offset; 1 follows it.
    take(&mut f, 2, Input::LeaderAndIsr(lai(1, Some(1))));
    assert_eq!(produce(&mut f, 1, Acks::Leader), Ok(1));
    take(&mut l, 3, Input::LeaderAndIsr(lai(2, Some(0))));
    assert_eq!(produce(&mut l, 2, Acks::Leader), Ok(1));
    take(&mut f, 4, Input::LeaderAndIsr(lai(2, Some(0))));
    assert_eq!(leo(&f), 2, "no truncation on following");
    assert!(!f.core().is_truncating());

    let req = fetch_request(&mut f, 5).expect("fetching at once");
    assert_eq!((req.fetch_offset, req.last_fetched_epoch), (2, Some(1)));
    let resp = serve(&mut l, req, 5);
    assert_eq!(
        resp.diverging_epoch,
        Some(DivergingEpoch {
            epoch: 0,
            end_offset: 1
        }),
        "epoch 1 is unknown to the leader; epoch 0 ends at 1 there"
    );
    assert!(resp.records.is_empty());
    assert_eq!(
        l.core().state().followers[&1].log_end_offset,
        None,
        "a diverging fetch teaches the leader nothing"
    );
    take(&mut f, 5, Input::FetchResponse(resp));
    assert_eq!(leo(&f), 1);

    fetch(&mut f, &mut l, 6);
    let epochs: Vec<i32> = f.log().state().epochs.iter().map(|e| e.epoch).collect();
    assert_eq!(epochs, vec![0, 2]);
    assert_eq!(leo(&f), 2);
    assert_eq!(l.core().state().followers[&1].log_end_offset, Some(1));
}

/// The rules before truncation on fetch send no last fetched epoch.
#[test]
fn only_on_fetch_sends_the_last_fetched_epoch() {
    for (mode, expected) in [
        (TruncationMode::EpochIterative, None),
        (TruncationMode::OnFetch, Some(0)),
    ] {
        let (mut l, mut f) = memory_pair(mode);
        produce(&mut l, 0, Acks::Leader).unwrap();
        fetch(&mut f, &mut l, 1);
        let req = fetch_request(&mut f, 2).expect("fetching");
        assert_eq!(req.last_fetched_epoch, expected, "{mode}");
    }
}

/// Kafka's partition epoch orders the ISRs a leader hears within one leader
/// epoch (`Partition.makeLeader` skips an older one, as
/// `handleAlterPartitionUpdate` does an older answer): an update or answer
/// overtaken by a newer one is ignored. An unclean soak (seed 18) saw a
/// leader take an ISR older than its own AlterPartition answer.
#[test]
fn an_isr_older_than_the_one_the_leader_holds_is_ignored() {
    let three = vec![0, 1, 2];
    let config = config(TruncationMode::EpochIterative);
    let mut a = Replica::new(0, three.clone(), config, MemoryLog::new(), None).unwrap();
    let leads = LeaderAndIsr {
        isr: three.clone(),
        replicas: three,
        ..lai(0, Some(0))
    };
    take(&mut a, 0, Input::LeaderAndIsr(leads));
    let update = |partition_epoch, isr: &[u32]| Input::IsrUpdate {
        leader_epoch: 0,
        partition_epoch,
        isr: isr.to_vec(),
    };
    take(&mut a, 1, update(2, &[0, 2]));
    assert_eq!(a.core().isr(), vec![0, 2], "a newer ISR is taken");
    take(&mut a, 2, update(1, &[0, 1, 2]));
    assert_eq!(a.core().isr(), vec![0, 2], "an older one is not");
    take(&mut a, 3, update(2, &[0, 1, 2]));
    assert_eq!(a.core().isr(), vec![0, 2], "nor one of the same epoch");

    // The leader removes 2; before the answer, the controller's later
    // change (partition epoch 4) reaches it, then the answer (epoch 3).
    let out = take(&mut a, LAG + 10, Input::Tick(Tick::ShrinkIsr(2)));
    let change = out
        .iter()
        .find_map(|o| match o {
            Output::AlterPartition(req) => Some(req.change),
            _ => None,
        })
        .expect("the leader asks to remove 2");
    let answer = |partition_epoch, isr: Vec<u32>| {
        Input::AlterPartitionResponse(AlterPartitionResponse {
            leader_epoch: 0,
            partition_epoch,
            change,
            result: Ok(isr),
        })
    };
    take(&mut a, LAG + 11, answer(3, vec![0]));
    assert_eq!(a.core().isr(), vec![0], "an answer newer than the ISR held");
    take(&mut a, LAG + 12, update(2, &[0, 2]));
    assert_eq!(
        a.core().isr(),
        vec![0],
        "an update older than the answer is not"
    );
    take(&mut a, LAG + 13, update(4, &[0, 1]));
    assert_eq!(a.core().isr(), vec![0, 1], "a newer one is");
}

/// Issue 24, item 7: `replication-offset-checkpoint` has no checksum, and a
/// bit flip can raise a replica's HW above the true one (347 -> 351 was
/// seen). On open the HW is clamped to the log end offset (as Kafka's
/// `UnifiedLog.updateHighWatermark` bounds it by the log end), and a
/// follower's is brought down to its leader's by its first fetch (as
/// Kafka's `ReplicaFetcherThread` sets the follower's HW from the leader's,
/// bounded by its own log end, lowering it if need be). Every single-bit
/// flip of the follower's checkpointed HW is tried.
#[test]
fn a_raised_hw_checkpoint_is_clamped_on_open_and_by_the_first_fetch() {
    use highwater::replication::DiskLog;
    let mut raised = 0;
    for bit in 0..8 {
        let tmp = tempfile::tempdir().unwrap();
        let (mut l, mut f) = pair(
            disk(tmp.path(), 0),
            disk(tmp.path(), 1),
            TruncationMode::OnFetch,
        );
        for id in 0..8 {
            produce(&mut l, id, Acks::Leader).unwrap();
        }
        fetch(&mut f, &mut l, 1);
        fetch(&mut f, &mut l, 1);
        take(&mut l, 1, Input::Tick(Tick::AdvanceHw));
        fetch(&mut f, &mut l, 2);
        for id in 8..12 {
            produce(&mut l, id, Acks::Leader).unwrap();
        }
        fetch(&mut f, &mut l, 3);
        let true_hw = l.log().state().high_watermark;
        let f_leo = leo(&f);
        assert_eq!((true_hw, f_leo, f.log().state().high_watermark), (8, 12, 8));
        let stopped = f.into_log().close().unwrap();
        let flipped = true_hw ^ (1 << bit);
        raised += usize::from(flipped > true_hw);
        let path = stopped.dir.join("replication-offset-checkpoint");
        checkpoint::write_offsets(&path, &[(tp(), flipped)].into_iter().collect()).unwrap();

        let (log, report) = DiskLog::restart(&stopped).unwrap();
        let opened = log.state().high_watermark;
        assert_eq!(opened, flipped.min(f_leo), "bit {bit}: {report}");
        if flipped > f_leo {
            assert!(
                report.repairs.iter().any(|r| r.contains("clamped")),
                "bit {bit}: {report}"
            );
        }
        let mut f = replica(log, 1, TruncationMode::OnFetch);
        take(&mut f, 4, Input::LeaderAndIsr(lai(0, Some(0))));
        fetch(&mut f, &mut l, 5);
        let leader_hw = l.log().state().high_watermark;
        assert_eq!(
            f.log().state().high_watermark,
            leader_hw.min(leo(&f)),
            "bit {bit}: HW {flipped} on disk, opened at {opened}"
        );
    }
    assert!(raised >= 6, "{raised} flips raised the HW");
}

/// An ISR change in flight is never replaced, however late its answer
/// (Kafka's `Partition` proposes nothing while `isInflight`): the leader
/// once proposed a new change after `request_timeout`, and the answer to
/// the first, which the controller had applied, was then ignored.
#[test]
fn an_isr_change_in_flight_is_never_replaced() {
    let (mut l, _f) = memory_pair(TruncationMode::EpochIterative);
    produce(&mut l, 0, Acks::Leader).unwrap();
    let out = l
        .handle(LAG + 1, Input::Tick(Tick::ShrinkIsr(1)))
        .expect("a lagging follower is dropped");
    assert!(
        out.iter().any(|o| matches!(o, Output::AlterPartition(_))),
        "{out:?}"
    );
    let in_flight = l.clone();
    let much_later = LAG + 1 + 10 * 30_000;
    assert!(l
        .handle(much_later, Input::Tick(Tick::ShrinkIsr(1)))
        .is_err());
    assert_eq!(l, in_flight);
}
