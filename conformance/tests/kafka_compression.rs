//! Compression, transactions and LogAppendTime against Apache Kafka itself.
//!
//! 1. [`we_read_kafkas_fixtures`]: Kafka's `UnifiedLog` writes an idempotent
//!    producer's batches in each of its four codecs and uncompressed,
//!    transactional batches of mixed codecs with a COMMIT and an ABORT
//!    marker, and a LogAppendTime topic (`kafka.sh fixtures`). Our storage
//!    layer recovers each partition from offset 0 and reads back every
//!    batch (header fields, flags, producer fields) and every record equal
//!    to Kafka's own reading, and answers the timestamp lookup of every
//!    record's timestamp (and one on each side) as Kafka's
//!    `fetchOffsetByTimestamp` does.
//! 2. [`kafka_reads_our_compression`]: logs we write with each
//!    `compression.type`, and Kafka's fixture batches re-encoded by our
//!    `append_batch` into each codec, are read back equal by Kafka's log
//!    loader (after an unclean stop, from offset 0) and pass
//!    `DumpLogSegments --deep-iteration` with every batch valid.
//!
//! Skips outside CI when Java or Maven is missing, as `kafka_interop` does.

mod kafka;

use std::path::Path;

use highwater::storage::{
    Codec, CompressionType, Header, LogConfig, LogDir, Record, TopicPartition,
};
use kafka::*;

fn config(compression_type: CompressionType) -> LogConfig {
    LogConfig {
        index_interval_bytes: 256,
        retention_ms: None,
        compression_type,
        ..LogConfig::default()
    }
}

/// Every batch of a partition as our reader serves it: (header fields as
/// Kafka prints them, records).
fn our_batches(log: &highwater::storage::Log) -> Vec<(String, Vec<KRecord>)> {
    let mut out = Vec::new();
    let mut from = log.log_start_offset();
    while from < log.log_end_offset() {
        let data = log.read(from, 1 << 20, u64::MAX).expect("our read");
        assert!(data.next_offset > from);
        for b in data.batches() {
            let h = &b.header;
            let records = b
                .decode_records()
                .unwrap_or_else(|e| panic!("our decode of batch {}: {e}", h.base_offset));
            out.push((
                describe(
                    h.base_offset,
                    h.last_offset(),
                    h.partition_leader_epoch,
                    h.crc,
                    h.max_timestamp,
                    if h.is_log_append_time() {
                        "LogAppendTime"
                    } else {
                        "CreateTime"
                    },
                    h.codec().map_or("unknown", |c| c.name()),
                    (h.producer_id, h.producer_epoch, h.base_sequence),
                    (h.is_transactional(), h.is_control()),
                    h.records_count,
                ),
                records.iter().map(|(o, r)| to_krecord(*o, r)).collect(),
            ));
        }
        from = data.next_offset;
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn describe(
    base: u64,
    last: u64,
    epoch: i32,
    crc: u32,
    max_ts: i64,
    ts_type: &str,
    codec: &str,
    producer: (i64, i16, i32),
    flags: (bool, bool),
    count: i32,
) -> String {
    format!(
        "{base}..{last} epoch {epoch} crc {crc:#x} max {max_ts} {ts_type} {codec} producer {producer:?} \
         transactional/control {flags:?} count {count}"
    )
}

fn kafka_batches(view: &KView) -> Vec<(String, Vec<KRecord>)> {
    view.batches()
        .map(|b| {
            (
                describe(
                    b.base_offset,
                    b.last_offset,
                    b.partition_leader_epoch,
                    b.crc,
                    b.max_timestamp,
                    &b.timestamp_type,
                    &b.compression,
                    (b.producer_id, b.producer_epoch, b.base_sequence),
                    (b.is_transactional, b.is_control),
                    b.record_count,
                ),
                b.records.clone(),
            )
        })
        .collect()
}

#[test]
fn we_read_kafkas_fixtures() {
    let Some(kafka) = kafka("kafka_compression::we_read_kafkas_fixtures") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let fixtures: KFixtures = kafka.json(&["fixtures", "--log-dir", path_str(tmp.path())]);
    let cases: Vec<&str> = fixtures
        .partitions
        .iter()
        .map(|p| p.case.as_str())
        .collect();
    assert_eq!(
        cases,
        [
            "idempotent-none",
            "idempotent-gzip",
            "idempotent-snappy",
            "idempotent-lz4",
            "idempotent-zstd",
            "transactional",
            "log-append-time"
        ]
    );
    let dir = LogDir::open(tmp.path()).expect("our LogDir::open");
    let (mut records, mut lookups) = (0, 0);
    for p in &fixtures.partitions {
        let tp = TopicPartition::new("fixture", p.partition).unwrap();
        let (log, report) = dir
            .open_log(&tp, config(CompressionType::Producer))
            .unwrap_or_else(|e| panic!("{}: {e}", p.case));
        assert_eq!(report.problem, None, "{}: {report}", p.case);
        assert!(report.segments_recovered.contains(&0), "recovered from 0");
        let ours = our_batches(&log);
        let theirs = kafka_batches(&p.view);
        assert_eq!(ours.len(), theirs.len(), "{}: batch count", p.case);
        for (o, k) in ours.iter().zip(&theirs) {
            assert_eq!(o, k, "{}: batch", p.case);
            records += o.1.len();
        }
        assert_eq!(log.log_end_offset(), p.view.log_end_offset, "{}", p.case);
        let epochs: Vec<KEpoch> = log
            .epoch_entries()
            .iter()
            .map(|e| KEpoch {
                epoch: e.epoch,
                start_offset: e.start_offset,
            })
            .collect();
        assert_eq!(epochs, p.view.leader_epochs, "{}: leader epochs", p.case);
        let reader = log.reader();
        for l in &p.lookups {
            let got = reader
                .offset_for_timestamp(l.target)
                .unwrap_or_else(|e| panic!("{}: lookup {}: {e}", p.case, l.target));
            assert_eq!(
                got.map(|t| (t.offset, t.timestamp)),
                l.offset.zip(l.timestamp),
                "{}: offset for timestamp {}",
                p.case,
                l.target
            );
            lookups += 1;
        }
    }
    let kinds = |f: fn(&KBatch) -> bool| {
        fixtures
            .partitions
            .iter()
            .flat_map(|p| p.view.batches())
            .filter(|b| f(b))
            .count()
    };
    assert_eq!(kinds(|b| b.is_control), 2, "a COMMIT and an ABORT marker");
    assert!(kinds(|b| b.timestamp_type == "LogAppendTime") > 0);
    eprintln!(
        "kafka_compression: {records} records in {} Kafka-written partitions read back equal; \
         {lookups} timestamp lookups answered as Kafka's",
        fixtures.partitions.len()
    );
}

/// The workload of [`kafka_reads_our_compression`]: record `i`.
fn record(i: usize) -> Record {
    Record {
        timestamp: 1_700_000_000_000 + (i / 3) as i64 * 7,
        key: (i % 4 != 3).then(|| format!("k{}", i % 6).into_bytes()),
        value: (i % 10 != 9).then(|| format!("value {i} {}", "xyz".repeat(i % 40)).into_bytes()),
        headers: if i.is_multiple_of(2) {
            vec![Header {
                key: "h".into(),
                value: Some(vec![i as u8]),
            }]
        } else {
            Vec::new()
        },
    }
}

#[test]
fn kafka_reads_our_compression() {
    let Some(kafka) = kafka("kafka_compression::kafka_reads_our_compression") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let fixtures_dir = tmp.path().join("fixtures");
    let fixtures: KFixtures = kafka.json(&["fixtures", "--log-dir", path_str(&fixtures_dir)]);
    let ours_dir = tmp.path().join("ours");
    let ld = LogDir::open(&ours_dir).unwrap();
    let mut logs = Vec::new();
    let mut expected = Vec::new();
    // Partition c: our appends with compression.type = codec c.
    for codec in Codec::ALL {
        let tp = TopicPartition::new("interop", u32::from(codec.id())).unwrap();
        let (mut log, _) = ld
            .open_log(&tp, config(CompressionType::Codec(codec)))
            .unwrap();
        let mut want = Vec::new();
        let mut i = 0;
        for b in 0..20 {
            if b == 10 {
                log.roll().unwrap();
            }
            let recs: Vec<Record> = (i..i + 1 + b % 6).map(record).collect();
            let info = log.append(&recs, (b / 7) as i32).unwrap();
            want.extend(
                recs.iter()
                    .enumerate()
                    .map(|(k, r)| to_krecord(info.first_offset + k as u64, r)),
            );
            i += recs.len();
        }
        logs.push((tp, log, codec));
        expected.push(want);
    }
    // Partitions 5..: Kafka's fixture batches (idempotent, transactional,
    // markers, LogAppendTime) given to our append_batch, re-encoded into
    // each codec.
    let theirs = LogDir::open(&fixtures_dir).unwrap();
    for (k, codec) in Codec::ALL.into_iter().enumerate() {
        let tp = TopicPartition::new("interop", 5 + k as u32).unwrap();
        let (mut log, _) = ld
            .open_log(&tp, config(CompressionType::Codec(codec)))
            .unwrap();
        let mut want = Vec::new();
        for p in [1, 5, 6] {
            let src = TopicPartition::new("fixture", p).unwrap();
            let (kafka_log, _) = theirs
                .open_log(&src, config(CompressionType::Producer))
                .unwrap();
            let mut from = 0;
            while from < kafka_log.log_end_offset() {
                let data = kafka_log.read(from, 1 << 20, u64::MAX).unwrap();
                for b in data.batches() {
                    let mut bytes = b.as_bytes().to_vec();
                    let epoch = b.header.partition_leader_epoch;
                    let info = log.append_batch(&mut bytes, epoch).unwrap();
                    for (j, (_, r)) in b.decode_records().unwrap().iter().enumerate() {
                        want.push(to_krecord(info.first_offset + j as u64, r));
                    }
                }
                from = data.next_offset;
            }
        }
        logs.push((tp, log, codec));
        expected.push(want);
    }
    assert!(fixtures.partitions.len() == 7);
    let codecs: Vec<Codec> = logs.iter().map(|l| l.2).collect();
    ld.close(logs.into_iter().map(|(tp, log, _)| (tp, log)).collect())
        .unwrap();
    std::fs::remove_file(ours_dir.join(".kafka_cleanshutdown")).unwrap();

    let mut records = 0;
    for (p, (want, codec)) in expected.iter().zip(&codecs).enumerate() {
        let part = p.to_string();
        let view: KView = kafka.json(&[
            "recover",
            "--log-dir",
            path_str(&ours_dir),
            "--partition",
            &part,
            "--records",
            "--recovery-point",
            "0",
        ]);
        let got: Vec<KRecord> = view.records().into_iter().map(|(_, r)| r).collect();
        assert_eq!(
            &got, want,
            "partition {p}: Kafka's reading of our {codec} batches"
        );
        assert!(
            view.batches()
                .all(|b| b.is_valid && b.compression == codec.name()),
            "partition {p}: every batch valid and {codec}"
        );
        records += got.len();
        let logs = files(&ours_dir.join(format!("interop-{p}")));
        let ran = kafka.run(&["dump", "--deep-iteration", "--files", &join_paths(&logs)]);
        assert!(ran.status.success(), "DumpLogSegments: {}", ran.stderr);
        assert_clean_dump_stderr(&ran.stderr, &ours_dir);
        assert!(!ran.stdout.contains("isvalid: false"), "{}", ran.stdout);
    }
    eprintln!(
        "kafka_compression: Kafka read back {records} records we wrote in {} partitions, every codec",
        codecs.len()
    );
}

fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    files_with_suffix(dir, "log")
}
