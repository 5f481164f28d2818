//! Round trips, lookups, truncation, retention and the epoch cache on real
//! files.

mod common;

use common::*;
use highwater::storage::{Error, LoadParams, Log, LogConfig, LogDir, Record, TopicPartition};

#[test]
fn round_trip_across_segments_and_clean_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let (mut log, report) = open(&dir, small_config(), LoadParams::default());
    assert_eq!(report.log_end_offset, 0);
    let expected = fill(&mut log, 200);
    assert!(log.segments().len() > 10, "small segments roll often");
    assert_eq!(read_all(&log, 0), expected);
    let leo = log.log_end_offset();
    log.set_high_watermark(leo).unwrap();
    log.close().unwrap();

    // Clean reopen: nothing re-read, same contents.
    let params = LoadParams {
        recovery_point: leo,
        high_watermark: leo,
        log_start_offset: 0,
        clean_shutdown: true,
    };
    let (log, report) = open(&dir, small_config(), params);
    assert!(report.segments_recovered.is_empty(), "{report}");
    assert!(report.repairs.is_empty(), "{report}");
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(read_all(&log, 0), expected);
    // Segment files are Kafka-named and every non-active index is trimmed
    // to whole entries.
    for s in log.segments() {
        let name = s.log_path.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(name, format!("{:020}.log", s.base_offset));
        let idx = std::fs::metadata(s.log_path.with_extension("index"))
            .unwrap()
            .len();
        assert_eq!(idx % 8, 0);
        assert_eq!(idx as usize / 8, s.index_entries);
    }

    // Unclean reopen from the start recovers everything to the same state.
    drop(log);
    let (log, report) = open(&dir, small_config(), LoadParams::default());
    assert_eq!(report.problem, None);
    assert_eq!(report.log_end_offset, leo);
    assert!(report.segments_recovered.len() > 10);
    assert_eq!(read_all(&log, 0), expected);
}

#[test]
fn lookup_and_read_at_every_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(
        &tmp.path().join("t-0"),
        small_config(),
        LoadParams::default(),
    );
    let expected = fill(&mut log, 120);
    let reader = log.reader();
    for (offset, rec) in &expected {
        let pos = reader.lookup(*offset).unwrap();
        assert!(pos.batch_base_offset <= *offset && *offset <= pos.batch_last_offset);
        let data = reader.read(*offset, 1, u64::MAX).unwrap();
        let batch = data.batches().next().expect("one batch at least");
        assert_eq!(batch.header.base_offset, pos.batch_base_offset);
        let recs = batch.decode_records().unwrap();
        assert!(recs.iter().any(|(o, r)| o == offset && r == rec));
    }
    let leo = log.log_end_offset();
    assert!(matches!(
        reader.lookup(leo),
        Err(Error::OffsetOutOfRange { .. })
    ));
    assert!(matches!(
        reader.read(leo + 1, 10, u64::MAX),
        Err(Error::OffsetOutOfRange { .. })
    ));
    assert!(reader.read(leo, 10, u64::MAX).unwrap().records.is_empty());
}

#[test]
fn reads_respect_the_upper_bound_and_max_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(
        &tmp.path().join("t-0"),
        LogConfig::default(),
        LoadParams::default(),
    );
    fill(&mut log, 50);
    log.set_high_watermark(20).unwrap();
    let hw = log.high_watermark();
    let data = log.reader().read(0, 1 << 20, hw).unwrap();
    let last = data.batches().last().unwrap().header.last_offset();
    assert!(last < hw);
    assert_eq!(data.next_offset, last + 1);
    // max_bytes bounds all but the first batch.
    let data = log.reader().read(0, 200, u64::MAX).unwrap();
    assert!(data.records.len() <= 200 || data.batches().count() == 1);
    assert!(matches!(
        log.set_high_watermark(log.log_end_offset() + 1),
        Err(Error::HighWatermarkBeyondLeo { .. })
    ));
}

#[test]
fn truncation_at_every_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src-0");
    let (mut log, _) = open(&src, small_config(), LoadParams::default());
    let expected = fill(&mut log, 40);
    let leo = log.log_end_offset();
    log.close().unwrap();
    for target in 0..=leo {
        let dir = tmp.path().join(format!("t{target}-0"));
        copy_dir(&src, &dir);
        let (mut log, _) = open(&dir, small_config(), LoadParams::default());
        log.set_high_watermark(leo).unwrap();
        log.truncate_to(target).unwrap();
        // Truncation keeps whole batches: the end is the start of the batch
        // holding `target` (or `target` itself at a boundary).
        let end = log.log_end_offset();
        assert!(end <= target);
        let kept: Vec<_> = expected.iter().filter(|(o, _)| *o < end).cloned().collect();
        assert!(
            expected
                .iter()
                .filter(|(o, _)| *o >= end && *o < target)
                .count()
                < 4
        );
        assert_eq!(read_all(&log, 0), kept);
        assert!(log.high_watermark() <= end);
        assert!(log.recovery_point() <= end);
        if let Some(e) = log.epoch_entries().last() {
            assert!(e.start_offset < end);
        }
        // The log keeps working and survives an unclean reopen.
        log.append(&[Record::new(5, "after")], 10).unwrap();
        let end2 = log.log_end_offset();
        drop(log);
        let (log, report) = open(&dir, small_config(), LoadParams::default());
        assert_eq!(report.problem, None, "{report}");
        assert_eq!(log.log_end_offset(), end2);
        assert_eq!(read_all(&log, 0).len(), kept.len() + 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn epoch_cache_answers_end_offsets() {
    let (_tmp, dir, mut log) = fresh_log();
    for (epoch, n) in [(1, 3), (2, 2), (5, 4)] {
        for _ in 0..n {
            log.append(&[Record::new(1, "v")], epoch).unwrap();
        }
    }
    let q = |log: &Log, e| log.end_offset_for_epoch(e).map(|r| (r.epoch, r.end_offset));
    assert_eq!(q(&log, 1), Some((1, 3)));
    assert_eq!(q(&log, 3), Some((2, 5)));
    assert_eq!(q(&log, 5), Some((5, 9)));
    assert_eq!(q(&log, 0), Some((0, 0)));
    assert_eq!(q(&log, 6), None);
    let text = std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(text, "0\n3\n1 0\n2 3\n5 5\n");
    // A lower epoch is appended as Kafka appends it: the cache drops the
    // entries the new one does not strictly follow (here epoch 5).
    log.append(&[Record::new(1, "v")], 4).unwrap();
    assert_eq!(q(&log, 4), Some((4, 10)));
    assert_eq!(q(&log, 5), None, "epoch 5 is gone");
    let text = std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(text, "0\n3\n1 0\n2 3\n4 9\n");
    log.truncate_to(4).unwrap();
    assert_eq!(q(&log, 2), Some((2, 4)));
    let text = std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(text, "0\n2\n1 0\n2 3\n");
    // A lost checkpoint is rebuilt from the batches.
    drop(log);
    std::fs::remove_file(dir.join("leader-epoch-checkpoint")).unwrap();
    let (log, report) = open(&dir, small_config(), LoadParams::default());
    assert!(!report.repairs.is_empty());
    assert_eq!(q(&log, 2), Some((2, 4)));
}

#[test]
fn retention_by_size_time_and_start_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = small_config();
    config.retention_bytes = Some(6000);
    let (mut log, _) = open(
        &tmp.path().join("t-0"),
        config.clone(),
        LoadParams::default(),
    );
    let expected = fill(&mut log, 150);
    let before = log.size_in_bytes();
    // Nothing goes above the high watermark.
    assert!(log.apply_retention(0).unwrap().deleted_segments.is_empty());
    log.set_high_watermark(log.log_end_offset()).unwrap();
    let r = log.apply_retention(0).unwrap();
    assert!(!r.deleted_segments.is_empty());
    assert!(log.size_in_bytes() >= 6000 && log.size_in_bytes() < before);
    assert_eq!(log.log_start_offset(), log.segments()[0].base_offset);
    for path in r
        .deleted_segments
        .iter()
        .map(|b| tmp.path().join("t-0").join(format!("{b:020}.log")))
    {
        assert!(!path.exists());
    }
    let lso = log.log_start_offset();
    let rest: Vec<_> = expected
        .iter()
        .filter(|(o, _)| *o >= lso)
        .cloned()
        .collect();
    assert_eq!(read_all(&log, lso), rest);
    assert!(matches!(
        log.reader().read(lso - 1, 10, u64::MAX),
        Err(Error::OffsetOutOfRange { .. })
    ));

    // Time: record timestamps are ~1000..2600 ms.
    config.retention_bytes = None;
    config.retention_ms = Some(100);
    let (mut log2, _) = open(&tmp.path().join("u-0"), config, LoadParams::default());
    fill(&mut log2, 150);
    log2.set_high_watermark(log2.log_end_offset()).unwrap();
    let n = log2.segments().len();
    let r = log2.apply_retention(2_000).unwrap();
    assert!(!r.deleted_segments.is_empty() && r.deleted_segments.len() < n - 1);
    for s in log2.segments().iter().take(1) {
        assert!(2_000 - s.max_timestamp <= 100);
    }
    // Start offset: delete records before an offset in the middle.
    let mid = log2.log_end_offset() / 2 + 50;
    let r = log2.delete_records_before(mid).unwrap();
    assert_eq!(r.log_start_offset, mid);
    assert!(log2.segments()[0].base_offset <= mid);
    assert!(log2.segments()[0].next_offset > mid);
    assert_eq!(log2.epoch_entries()[0].start_offset, mid);
}

#[test]
fn replicated_appends_keep_offsets_and_epochs() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut leader, _) = open(
        &tmp.path().join("l-0"),
        small_config(),
        LoadParams::default(),
    );
    let expected = fill(&mut leader, 60);
    let (mut follower, _) = open(
        &tmp.path().join("f-0"),
        small_config(),
        LoadParams::default(),
    );
    let reader = leader.reader();
    while follower.log_end_offset() < leader.log_end_offset() {
        let data = reader
            .read(follower.log_end_offset(), 700, u64::MAX)
            .unwrap();
        follower.append_replicated(&data.records).unwrap();
    }
    assert_eq!(read_all(&follower, 0), expected);
    assert_eq!(follower.epoch_entries(), leader.epoch_entries());
    // A batch that does not start at the log end is refused.
    let data = reader.read(0, 1, u64::MAX).unwrap();
    assert!(matches!(
        follower.append_replicated(&data.records),
        Err(Error::NonMonotonicAppend { .. })
    ));
}

#[test]
fn offset_for_timestamp_finds_first_at_or_after() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(
        &tmp.path().join("t-0"),
        small_config(),
        LoadParams::default(),
    );
    let expected = fill(&mut log, 100);
    let reader = log.reader();
    for ts in [0, 1000, 1001, 1255, 1500, 1991, 1993] {
        let want = expected
            .iter()
            .find(|(_, r)| r.timestamp >= ts)
            .map(|(o, r)| (*o, r.timestamp));
        let got = reader
            .offset_for_timestamp(ts)
            .unwrap()
            .map(|t| (t.offset, t.timestamp));
        assert_eq!(got, want, "timestamp {ts}");
    }
    assert_eq!(reader.offset_for_timestamp(1_000_000).unwrap(), None);
}

#[test]
fn an_hw_change_rewrites_only_the_hw_checkpoint() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("orders", 0).unwrap();
    let mut ld = LogDir::open(tmp.path()).unwrap();
    let (mut log, _) = ld.open_log(&tp, small_config()).unwrap();
    fill(&mut log, 10);
    log.flush(10).unwrap();
    ld.checkpoint([(&tp, &log)]).unwrap();
    // Each write is a new file renamed into place: a new inode.
    let inode = |name: &str| std::fs::metadata(tmp.path().join(name)).unwrap().ino();
    let names = [
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
    ];
    ld.checkpoint_high_watermarks([(&tp, &log)]).unwrap();
    let before: Vec<u64> = names.iter().map(|n| inode(n)).collect();
    log.set_high_watermark(5).unwrap();
    // The other checkpoints never carry the HW (Kafka writes it only from
    // `ReplicaManager.checkpointHighWatermarks`).
    ld.checkpoint([(&tp, &log)]).unwrap();
    assert_eq!(
        names.iter().map(|n| inode(n)).collect::<Vec<_>>(),
        before,
        "nothing but the HW changed: the other checkpoints write nothing"
    );
    assert_eq!(ld.checkpoints(&tp).high_watermark, Some(0));
    ld.checkpoint_high_watermarks([(&tp, &log)]).unwrap();
    let after: Vec<u64> = names.iter().map(|n| inode(n)).collect();
    assert_eq!(
        after[0], before[0],
        "recovery point unchanged, not rewritten"
    );
    assert_ne!(after[1], before[1], "the HW file is rewritten");
    assert_eq!(after[2], before[2], "log start unchanged, not rewritten");
    let hw = std::fs::read_to_string(tmp.path().join(names[1])).unwrap();
    assert_eq!(hw, "0\n1\norders 0 5\n");
    ld.checkpoint_high_watermarks([(&tp, &log)]).unwrap();
    assert_eq!(
        inode(names[1]),
        after[1],
        "nothing changed, nothing written"
    );
}

#[test]
fn log_dir_checkpoints_and_clean_shutdown() {
    let tmp = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("orders", 2).unwrap();
    let mut ld = LogDir::open(tmp.path()).unwrap();
    assert!(!ld.had_clean_shutdown());
    let (mut log, _) = ld.open_log(&tp, small_config()).unwrap();
    fill(&mut log, 30);
    log.set_high_watermark(20).unwrap();
    log.flush(25).unwrap();
    ld.checkpoint([(&tp, &log)]).unwrap();
    ld.checkpoint_high_watermarks([(&tp, &log)]).unwrap();
    let rp = std::fs::read_to_string(tmp.path().join("recovery-point-offset-checkpoint")).unwrap();
    assert_eq!(rp, format!("0\n1\norders 2 {}\n", log.recovery_point()));
    let hw = std::fs::read_to_string(tmp.path().join("replication-offset-checkpoint")).unwrap();
    assert_eq!(hw, "0\n1\norders 2 20\n");
    let leo = log.log_end_offset();
    ld.close(vec![(tp.clone(), log)]).unwrap();
    assert!(tmp.path().join(".kafka_cleanshutdown").exists());

    let marker = std::fs::read_to_string(tmp.path().join(".kafka_cleanshutdown")).unwrap();
    assert_eq!(marker, r#"{"version":"0","broker_epoch":"-1"}"#);
    let ld = LogDir::open(tmp.path()).unwrap();
    assert!(ld.had_clean_shutdown());
    assert_eq!(ld.clean_shutdown_broker_epoch(), Some(-1));
    assert!(
        !tmp.path().join(".kafka_cleanshutdown").exists(),
        "consumed on open"
    );
    assert_eq!(ld.partitions().unwrap(), vec![tp.clone()]);
    let (log, report) = ld.open_log(&tp, small_config()).unwrap();
    assert!(report.segments_recovered.is_empty());
    assert_eq!(
        (
            log.log_end_offset(),
            log.high_watermark(),
            log.recovery_point()
        ),
        (leo, 20, leo)
    );
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn rolls_on_full_index_and_on_relative_offset_overflow() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let config = LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 100,
        segment_index_bytes: 24, // 3 offset entries, 2 time entries
        retention_bytes: None,
        retention_ms: None,
        truncate_below_recovery_point: false,
        compression_type: highwater::storage::CompressionType::Producer,
        mutation: None,
    };
    let (mut log, _) = open(&dir, config.clone(), LoadParams::default());
    let expected = fill(&mut log, 60);
    let segs = log.segments();
    assert!(segs.len() > 5, "rolled {} times", segs.len());
    assert!(segs
        .iter()
        .all(|s| s.index_entries <= 3 && s.time_index_entries <= 2));
    assert_eq!(read_all(&log, 0), expected);

    // A batch whose last offset is 2^31 past the segment base must go to a
    // new segment (relative offsets are 32-bit).
    let (mut log, _) = open(
        &tmp.path().join("u-0"),
        LogConfig::default(),
        LoadParams::default(),
    );
    log.append(&[Record::new(1, "a")], 0).unwrap();
    let mut b = Vec::new();
    highwater::storage::batch::encode_batch(
        &mut b,
        1,
        0,
        highwater::storage::ProducerInfo::NONE,
        &[Record::new(2, "b")],
    )
    .unwrap();
    b[23..27].copy_from_slice(&i32::MAX.to_be_bytes()); // lastOffsetDelta
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    log.append_replicated(&b).unwrap();
    let segs = log.segments();
    assert_eq!(
        segs.iter().map(|s| s.base_offset).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(log.log_end_offset(), 1 + (1u64 << 31));
    drop(log);
    let (log, report) = open(
        &tmp.path().join("u-0"),
        LogConfig::default(),
        LoadParams::default(),
    );
    assert_eq!(report.problem, None, "{report}");
    assert_eq!(log.log_end_offset(), 1 + (1u64 << 31));
}

#[test]
fn unparsable_broker_checkpoint_is_reset_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("recovery-point-offset-checkpoint"),
        "0\n1\norders 0\n",
    )
    .unwrap();
    let dir = LogDir::open(tmp.path()).expect("opens, as Kafka's LogManager does");
    assert_eq!(dir.repairs().len(), 1);
    assert!(
        dir.repairs()[0].contains("recovery-point-offset-checkpoint: line 3"),
        "{:?}",
        dir.repairs()
    );
    let tp = TopicPartition::new("orders", 0).unwrap();
    assert_eq!(dir.load_params(&tp).recovery_point, 0);
}

#[test]
fn indexes_after_a_clean_reopen_match_a_rebuild() {
    // Appends after a clean reopen must index exactly as recovery would.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut config = small_config();
    config.segment_bytes = 1 << 20;
    let (mut log, _) = open(&dir, config.clone(), LoadParams::default());
    fill(&mut log, 30);
    log.close().unwrap();
    let clean = LoadParams {
        recovery_point: u64::MAX,
        clean_shutdown: true,
        ..LoadParams::default()
    };
    let (mut log, _) = open(&dir, config.clone(), clean);
    for i in 0..30 {
        log.append(&records_for(i), 5).unwrap();
    }
    log.close().unwrap();
    let check = highwater::storage::check_segment(&dir, 0, &config, None).unwrap();
    assert_eq!(
        check.index,
        highwater::storage::IndexCheck::Valid {
            entries: match check.index {
                highwater::storage::IndexCheck::Valid { entries, .. } => entries,
                _ => 0,
            },
            matches_rebuilt: true,
            preallocated: 0,
        }
    );
}

/// Finding 2 of issue 10: when the target equals a time index timestamp
/// that earlier records of the same batch also carry, the answer is the
/// first of them (Kafka's `LogSegment.findOffsetByTimestamp` filters only by
/// the log start offset), not a later offset or none. Timestamps here never
/// go down, so Kafka's answer is the first record at or after the target;
/// every timestamp and its neighbours are probed, on CreateTime batches and
/// on LogAppendTime batches (every record carries the batch's max).
#[test]
fn offset_for_timestamp_with_repeated_timestamps_matches_kafka() {
    use highwater::storage::batch::{encode_batch, ProducerInfo};
    for log_append_time in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let (mut log, _) = open(
            &tmp.path().join("t-0"),
            small_config(),
            LoadParams::default(),
        );
        let mut expected: Vec<(u64, i64)> = Vec::new();
        let mut ts = 1_000;
        for i in 0..120u64 {
            let n = 1 + (i % 5) as usize;
            let recs: Vec<Record> = (0..n)
                .map(|j| {
                    // Runs of equal timestamps inside and across batches.
                    if (i + j as u64).is_multiple_of(3) {
                        ts += 1;
                    }
                    Record::new(ts, format!("v{i}-{j}-{}", "y".repeat((i % 40) as usize)))
                })
                .collect();
            let mut b = Vec::new();
            encode_batch(&mut b, 0, 0, ProducerInfo::NONE, &recs).unwrap();
            if log_append_time {
                b[22] |= 0x08; // attributes: LogAppendTime
                let crc = crc32c::crc32c(&b[21..]);
                b[17..21].copy_from_slice(&crc.to_be_bytes());
            }
            let info = log.append_batch(&mut b, 0).unwrap();
            let max = recs.iter().map(|r| r.timestamp).max().unwrap();
            for (k, r) in recs.iter().enumerate() {
                let t = if log_append_time { max } else { r.timestamp };
                expected.push((info.first_offset + k as u64, t));
            }
        }
        assert!(log.segments().len() > 5);
        let reader = log.reader();
        let mut probes: Vec<i64> = expected
            .iter()
            .flat_map(|&(_, t)| [t - 1, t, t + 1])
            .collect();
        probes.dedup();
        for target in probes {
            let want = expected.iter().find(|(_, t)| *t >= target).copied();
            let got = reader
                .offset_for_timestamp(target)
                .unwrap()
                .map(|t| (t.offset, t.timestamp));
            assert_eq!(
                got, want,
                "LogAppendTime {log_append_time}, target {target}"
            );
        }
    }
}
