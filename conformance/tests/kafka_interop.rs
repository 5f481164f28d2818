//! Kafka compatibility proven against Apache Kafka itself.
//!
//! Every Kafka-side step runs Apache Kafka 4.4's own classes through the
//! programs in `conformance/kafka/` (built by its `setup.sh`, which Maven
//! feeds from Maven Central):
//!
//! 1. [`kafka_reads_what_we_write`]: a partition directory written by our
//!    storage layer (four segments, five leader epochs, keys, values and
//!    headers, nulls included) passes Kafka's `DumpLogSegments` deep
//!    iteration, index sanity check and index verification with no error,
//!    and every offset, key, value, header key, epoch and timestamp it prints
//!    equals what we wrote. Kafka's checkpoint readers read our checkpoint
//!    files, Kafka's log loader recovers the directory keeping every record
//!    (header values included), and Kafka writing the same workload produces
//!    byte-identical `.log` files.
//! 2. [`we_read_what_kafka_writes`]: directories Kafka's `UnifiedLog` wrote
//!    (closed, and halted mid-flight with preallocated indexes) are opened,
//!    recovered and read back equal by our storage layer; a batch we then
//!    append is read back by Kafka's log loader.
//! 3. [`recovery_agrees_with_kafka`]: the same Kafka-written directory, cut
//!    at a torn tail and with a corrupt batch in the middle, is recovered by
//!    Kafka's log loader and by ours: both keep the same batches, end offset,
//!    leader epochs and high watermark, and leave the same segment files.
//!
//! Outside CI (env `CI` unset) each test skips with a message when Java,
//! Maven or the built jar is missing; under `CI=true` that fails.

mod kafka;

use std::fs;
use std::path::Path;

use highwater::storage::{Header, LogConfig, LogDir, Record, TopicPartition};
use kafka::*;

// ---------------------------------------------------------------------------
// The workload, the same on both sides
// ---------------------------------------------------------------------------

/// CreateTime of record 0 (as in `WritePartition.java`).
const BASE_TIMESTAMP: i64 = 1_700_000_000_000;
const TOPIC: &str = "interop";

/// One row per segment; each pair is (leader epoch, records in the batch).
/// The same plan as `WritePartition.PLAN` on the Java side.
const PLAN: &[&[(i32, usize)]] = &[
    &[(0, 1), (0, 3), (0, 5), (0, 2), (1, 4), (1, 1)],
    &[(1, 3), (1, 6), (3, 2), (3, 2), (3, 7)],
    &[(3, 5), (4, 1), (4, 8), (4, 3), (4, 2)],
    &[(6, 4), (6, 4), (6, 2)],
];

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// Record number `i`, as `WritePartition.record(i)` builds it: ASCII keys,
/// values and headers; every 7th key and every 11th value null; no headers,
/// one header, or three with a repeated key and a null value; CreateTimes
/// one second apart, every fifth stepping 2.5 s back.
fn record(i: usize) -> Record {
    let key = (i % 7 != 6).then(|| format!("key-{i}").into_bytes());
    let value = (i % 11 != 10).then(|| {
        let mut v = format!("value-{i}-").into_bytes();
        let len = (i * 37) % 200;
        v.extend((0..len).map(|k| ALPHABET[(i + k) % ALPHABET.len()]));
        v
    });
    let headers = match i % 3 {
        1 => vec![header("trace", Some(format!("t-{i}").as_bytes()))],
        2 => vec![
            header("a", Some(format!("x{i}").as_bytes())),
            header("b", None),
            header("a", Some(b"dup")),
        ],
        _ => Vec::new(),
    };
    let timestamp = BASE_TIMESTAMP + i as i64 * 1000 - if i % 5 == 3 { 2500 } else { 0 };
    Record {
        timestamp,
        key,
        value,
        headers,
    }
}

fn header(key: &str, value: Option<&[u8]>) -> Header {
    Header {
        key: key.to_string(),
        value: value.map(<[u8]>::to_vec),
    }
}

/// Our log configuration for these tests: Kafka's defaults except the
/// small index interval the Java side also uses, and no time retention (the
/// records are from 2023).
fn our_config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 256,
        retention_ms: None,
        ..LogConfig::default()
    }
}

fn tp() -> TopicPartition {
    TopicPartition::new(TOPIC, 0).expect("topic partition")
}

/// One batch as our storage layer reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OurBatch {
    base_offset: u64,
    last_offset: u64,
    epoch: i32,
    crc: u32,
    max_timestamp: i64,
    records: Vec<KRecord>,
}

/// A log as our storage layer sees it after opening (and maybe recovering) it.
#[derive(Debug)]
struct OurView {
    log_start_offset: u64,
    log_end_offset: u64,
    high_watermark: u64,
    leader_epochs: Vec<KEpoch>,
    segment_bases: Vec<u64>,
    batches: Vec<OurBatch>,
    problem: Option<String>,
    bytes_truncated: u64,
}

impl OurView {
    fn batch_ids(&self) -> Vec<(u64, u64, i32, u32)> {
        self.batches
            .iter()
            .map(|b| (b.base_offset, b.last_offset, b.epoch, b.crc))
            .collect()
    }
}

/// Opens `log_dir`'s partition with our storage layer exactly as a broker
/// would (checkpoints and marker from [`LogDir`]), reads every batch back
/// through [`highwater::storage::LogReader::read`], and closes it again
/// without a clean shutdown. With `append`, appends those records first
/// (as one batch in `append.0`'s epoch).
fn open_with_ours(log_dir: &Path, append: Option<(i32, &[Record])>) -> OurView {
    let dir = LogDir::open(log_dir).expect("our LogDir::open");
    let (mut log, report) = dir.open_log(&tp(), our_config()).unwrap_or_else(|e| {
        panic!(
            "our storage layer could not open {}: {e}",
            log_dir.display()
        )
    });
    if let Some((epoch, records)) = append {
        log.append(records, epoch).expect("our append");
    }
    let mut batches = Vec::new();
    let mut from = log.log_start_offset();
    while from < log.log_end_offset() {
        let data = log
            .read(from, 1 << 20, u64::MAX)
            .unwrap_or_else(|e| panic!("our read at {from}: {e}"));
        assert!(
            data.next_offset > from,
            "our read at {from} made no progress"
        );
        for batch in data.batches() {
            let h = &batch.header;
            let records = batch
                .decode_records()
                .unwrap_or_else(|e| panic!("our decode of batch {}: {e}", h.base_offset));
            batches.push(OurBatch {
                base_offset: h.base_offset,
                last_offset: h.last_offset(),
                epoch: h.partition_leader_epoch,
                crc: h.crc,
                max_timestamp: h.max_timestamp,
                records: records.iter().map(|(o, r)| to_krecord(*o, r)).collect(),
            });
        }
        from = data.next_offset;
    }
    let view = OurView {
        log_start_offset: log.log_start_offset(),
        log_end_offset: log.log_end_offset(),
        high_watermark: log.high_watermark(),
        leader_epochs: log
            .epoch_entries()
            .iter()
            .map(|e| KEpoch {
                epoch: e.epoch,
                start_offset: e.start_offset,
            })
            .collect(),
        segment_bases: log.segments().iter().map(|s| s.base_offset).collect(),
        batches,
        problem: report.problem.clone(),
        bytes_truncated: report.bytes_truncated,
    };
    if append.is_some() {
        // Leave the directory as a crash would after a flush: data durable,
        // no clean-shutdown marker, recovery point checkpointed.
        let mut dir = dir;
        log.flush(log.log_end_offset()).expect("our flush");
        dir.checkpoint([(&tp(), &log)]).expect("our checkpoint");
    }
    drop(log);
    view
}

/// Asserts that our view of a log holds exactly the batches and records of
/// Kafka's view.
fn assert_same_log(ours: &OurView, kafka: &KView, what: &str) {
    let theirs: Vec<OurBatch> = kafka
        .batches()
        .map(|b| OurBatch {
            base_offset: b.base_offset,
            last_offset: b.last_offset,
            epoch: b.partition_leader_epoch,
            crc: b.crc,
            max_timestamp: b.max_timestamp,
            records: b.records.clone(),
        })
        .collect();
    assert_eq!(ours.batches.len(), theirs.len(), "{what}: batch count");
    for (o, k) in ours.batches.iter().zip(&theirs) {
        assert_eq!(o, k, "{what}: batch at offset {}", k.base_offset);
    }
    assert_eq!(
        ours.log_start_offset, kafka.log_start_offset,
        "{what}: log start offset"
    );
    assert_eq!(
        ours.log_end_offset, kafka.log_end_offset,
        "{what}: log end offset"
    );
    assert_eq!(
        ours.leader_epochs, kafka.leader_epochs,
        "{what}: leader epoch cache"
    );
    assert_eq!(
        ours.high_watermark, kafka.high_watermark,
        "{what}: high watermark"
    );
    let kafka_bases: Vec<u64> = kafka.segments.iter().map(|s| s.base_offset).collect();
    assert_eq!(
        ours.segment_bases, kafka_bases,
        "{what}: segment base offsets"
    );
}

// ---------------------------------------------------------------------------
// 1. Files we write are Kafka's
// ---------------------------------------------------------------------------

/// One batch as we appended it.
struct Written {
    epoch: i32,
    segment: u64,
    position: u64,
    first: u64,
    records: Vec<Record>,
}

impl Written {
    fn last(&self) -> u64 {
        self.first + self.records.len() as u64 - 1
    }
}

/// Writes [`PLAN`] with our storage layer into `log_dir` and shuts it down
/// cleanly (flush, checkpoints, marker). Returns the batches written, the
/// leader epoch cache, and the log end offset and high watermark.
fn write_with_ours(log_dir: &Path) -> (Vec<Written>, Vec<KEpoch>, u64, u64) {
    let dir = LogDir::open(log_dir).expect("our LogDir::open");
    let (mut log, _) = dir.open_log(&tp(), our_config()).expect("our open_log");
    let mut written = Vec::new();
    let mut next = 0usize;
    for (s, segment) in PLAN.iter().enumerate() {
        if s > 0 {
            log.roll().expect("our roll");
        }
        for &(epoch, count) in *segment {
            let records: Vec<Record> = (next..next + count).map(record).collect();
            let info = log.append(&records, epoch).expect("our append");
            assert_eq!(
                (info.first_offset, info.last_offset),
                (next as u64, (next + count - 1) as u64),
                "our append assigned unexpected offsets"
            );
            written.push(Written {
                epoch,
                segment: info.segment_base_offset,
                position: info.position,
                first: next as u64,
                records,
            });
            next += count;
        }
    }
    let leo = log.log_end_offset();
    let hw = leo - 3;
    log.set_high_watermark(hw).expect("our high watermark");
    let epochs = log
        .epoch_entries()
        .iter()
        .map(|e| KEpoch {
            epoch: e.epoch,
            start_offset: e.start_offset,
        })
        .collect();
    dir.close(vec![(tp(), log)]).expect("our clean shutdown");
    (written, epochs, leo, hw)
}

fn utf8(bytes: &Option<Vec<u8>>) -> Option<String> {
    bytes
        .as_ref()
        .map(|b| String::from_utf8(b.clone()).expect("ASCII workload"))
}

fn size_field(bytes: &Option<Vec<u8>>) -> i32 {
    bytes.as_ref().map_or(-1, |b| b.len() as i32)
}

#[test]
fn kafka_reads_what_we_write() {
    let Some(kafka) = kafka("kafka_interop::kafka_reads_what_we_write") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ours = tmp.path().join("ours");
    let (written, epochs, leo, hw) = write_with_ours(&ours);
    let part = ours.join(tp().dir_name());
    assert!(
        written.len() > PLAN.len(),
        "the workload has several batches per segment"
    );
    assert!(epochs.len() >= 3, "the workload has several leader epochs");

    // DumpLogSegments --deep-iteration --print-data-log over every segment.
    let logs = files_with_suffix(&part, "log");
    assert_eq!(logs.len(), PLAN.len(), "one .log file per segment");
    let ran = kafka.run(&[
        "dump",
        "--deep-iteration",
        "--print-data-log",
        "--files",
        &join_paths(&logs),
    ]);
    assert!(
        ran.status.success(),
        "DumpLogSegments failed:\n{}",
        ran.stderr
    );
    assert_clean_dump_stderr(&ran.stderr, &part);
    let dumped = parse_log_dump(&ran.stdout);
    assert_eq!(
        dumped.len(),
        logs.len(),
        "DumpLogSegments dumped every file"
    );
    let mut expected = written.iter();
    let mut records_checked = 0;
    for (file, log) in logs.iter().zip(&dumped) {
        let name = file.file_name().unwrap().to_string_lossy();
        assert_eq!(log.file, name);
        let base: u64 = name.trim_end_matches(".log").parse().unwrap();
        assert_eq!(log.starting_offset, base, "{name}: starting offset");
        assert!(!log.batches.is_empty(), "{name}: no batches");
        let mut next_position = 0u64;
        for batch in &log.batches {
            let w = expected.next().unwrap_or_else(|| {
                panic!("{name}: DumpLogSegments printed a batch we did not write")
            });
            let f = &batch.fields;
            let at = format!("{name} batch {}", w.first);
            assert_eq!(w.segment, base, "{at}: segment");
            let max_ts = w.records.iter().map(|r| r.timestamp).max().unwrap();
            for (field, want) in [
                ("baseOffset", w.first.to_string()),
                ("lastOffset", w.last().to_string()),
                ("count", w.records.len().to_string()),
                ("partitionLeaderEpoch", w.epoch.to_string()),
                ("position", w.position.to_string()),
                ("CreateTime", max_ts.to_string()),
                ("magic", "2".to_string()),
                ("compresscodec", "none".to_string()),
                ("isvalid", "true".to_string()),
                ("producerId", "-1".to_string()),
                ("producerEpoch", "-1".to_string()),
                ("baseSequence", "-1".to_string()),
                ("isTransactional", "false".to_string()),
                ("isControl", "false".to_string()),
            ] {
                assert_eq!(f.get(field), Some(&want), "{at}: {field}");
            }
            assert_eq!(w.position, next_position, "{at}: batches are contiguous");
            next_position += f["size"].parse::<u64>().unwrap();
            assert_eq!(batch.records.len(), w.records.len(), "{at}: record count");
            for (k, (got, r)) in batch.records.iter().zip(&w.records).enumerate() {
                let want = DumpedRecord {
                    offset: w.first + k as u64,
                    create_time: r.timestamp,
                    key_size: size_field(&r.key),
                    value_size: size_field(&r.value),
                    header_keys: r.headers.iter().map(|h| h.key.clone()).collect(),
                    key: utf8(&r.key),
                    payload: utf8(&r.value),
                };
                assert_eq!(got, &want, "{at}: record {}", want.offset);
                records_checked += 1;
            }
        }
        let size = fs::metadata(file).unwrap().len();
        assert_eq!(next_position, size, "{name}: batches cover the whole file");
    }
    assert!(
        expected.next().is_none(),
        "DumpLogSegments missed batches we wrote"
    );
    assert_eq!(records_checked, leo, "every record was printed");

    // Index sanity check (what a broker runs at startup) and verification.
    let mut indexes = files_with_suffix(&part, "index");
    indexes.extend(files_with_suffix(&part, "timeindex"));
    assert_eq!(
        indexes.len(),
        2 * PLAN.len(),
        "an offset and a time index per segment"
    );
    let ran = kafka.run(&[
        "dump",
        "--index-sanity-check",
        "--files",
        &join_paths(&indexes),
    ]);
    assert!(
        ran.status.success(),
        "DumpLogSegments --index-sanity-check failed:\n{}\n{}",
        ran.stdout,
        ran.stderr
    );
    assert_clean_dump_stderr(&ran.stderr, &part);
    for index in &indexes {
        let p = path_str(index);
        assert!(
            ran.stdout
                .lines()
                .any(|l| l == format!("{p} passed sanity check.") || l == format!("{p} is empty.")),
            "{p} did not pass the sanity check:\n{}",
            ran.stdout
        );
    }
    let ran = kafka.run(&[
        "dump",
        "--verify-index-only",
        "--files",
        &join_paths(&indexes),
    ]);
    assert!(
        ran.status.success(),
        "DumpLogSegments --verify-index-only failed:\n{}",
        ran.stderr
    );
    assert_clean_dump_stderr(&ran.stderr, &part);
    for line in ran.stdout.lines() {
        assert!(
            line.starts_with("Dumping ") || line.ends_with(" is empty."),
            "unexpected index verification output: {line}"
        );
    }

    // Our checkpoint files, read by Kafka's checkpoint readers.
    let cps = kafka.checkpoints(&ours);
    let entry = |offset| {
        Some(vec![KOffset {
            topic: TOPIC.to_string(),
            partition: 0,
            offset,
        }])
    };
    assert_eq!(
        cps.recovery_point,
        entry(leo),
        "recovery-point-offset-checkpoint"
    );
    assert_eq!(
        cps.replication_offset,
        entry(hw),
        "replication-offset-checkpoint"
    );
    assert_eq!(
        cps.log_start_offset,
        entry(0),
        "log-start-offset-checkpoint"
    );
    assert_eq!(
        cps.leader_epochs.get(&tp().dir_name()),
        Some(&epochs),
        "leader-epoch-checkpoint"
    );
    assert!(
        cps.clean_shutdown.exists,
        "Kafka sees our clean-shutdown marker"
    );

    // Kafka's log loader recovers a copy from offset 0 as after a crash and
    // keeps every record, header values included.
    let copy = tmp.path().join("ours-recovered-by-kafka");
    copy_tree(&ours, &copy);
    fs::remove_file(copy.join(".kafka_cleanshutdown")).expect("marker in the copy");
    let recovered: KView = kafka.json(&[
        "recover",
        "--log-dir",
        path_str(&copy),
        "--records",
        "--recovery-point",
        "0",
    ]);
    let want: Vec<(i32, KRecord)> = written
        .iter()
        .flat_map(|w| {
            w.records
                .iter()
                .enumerate()
                .map(move |(k, r)| (w.epoch, to_krecord(w.first + k as u64, r)))
        })
        .collect();
    assert_eq!(recovered.records(), want, "Kafka's recovery of our log");
    assert_eq!(recovered.log_end_offset, leo);
    assert_eq!(recovered.high_watermark, hw);
    assert_eq!(recovered.leader_epochs, epochs);
    assert!(recovered.batches().all(|b| b.is_valid && b.magic == 2));

    // Kafka's own log, given the same workload, writes the same bytes.
    let theirs = tmp.path().join("kafka");
    let kview = kafka.write(&theirs, "close");
    assert_eq!(
        kview.leader_epochs, epochs,
        "same workload, same leader epoch cache"
    );
    for segment in &kview.segments {
        let ours_bytes = fs::read(part.join(&segment.file)).unwrap_or_default();
        let theirs_bytes = fs::read(theirs.join(tp().dir_name()).join(&segment.file)).unwrap();
        assert_eq!(theirs_bytes.len() as u64, segment.size_bytes);
        assert!(
            ours_bytes == theirs_bytes,
            "{}: our segment ({} bytes) differs from Kafka's ({} bytes) for the same workload",
            segment.file,
            ours_bytes.len(),
            theirs_bytes.len()
        );
    }
}

// ---------------------------------------------------------------------------
// 2. Files Kafka writes are ours
// ---------------------------------------------------------------------------

/// The plan's records with their offsets and epochs, as Kafka prints them.
fn plan_records() -> Vec<(i32, KRecord)> {
    let mut out = Vec::new();
    let mut next = 0;
    for segment in PLAN {
        for &(epoch, count) in *segment {
            for i in next..next + count {
                out.push((epoch, to_krecord(i as u64, &record(i))));
            }
            next += count;
        }
    }
    out
}

#[test]
fn we_read_what_kafka_writes() {
    let Some(kafka) = kafka("kafka_interop::we_read_what_kafka_writes") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan_records();
    for stop in ["close", "crash"] {
        let log_dir = tmp.path().join(stop);
        let written = kafka.write(&log_dir, stop);
        // What Kafka wrote is the workload (Kafka's own reading of it).
        assert_eq!(written.records(), plan, "{stop}: Kafka wrote the plan");
        assert_eq!(
            written.segments.len(),
            PLAN.len(),
            "{stop}: Kafka rolled the plan's segments"
        );
        assert!(
            written.batches().all(|b| b.is_valid
                && b.timestamp_type == "CreateTime"
                && b.compression == "none"
                && b.record_count as usize == b.records.len()),
            "{stop}: Kafka wrote plain CreateTime batches"
        );

        let ours = open_with_ours(&log_dir, None);
        assert_eq!(
            ours.problem, None,
            "{stop}: our recovery found a problem in Kafka's files"
        );
        assert_eq!(
            ours.bytes_truncated, 0,
            "{stop}: our recovery cut Kafka's data"
        );
        assert_same_log(
            &ours,
            &written,
            &format!("Kafka-written log ({stop}), read by us"),
        );
    }

    // Mixed files: we append to the directory Kafka left after a crash, and
    // Kafka's log loader recovers the result from offset 0.
    let log_dir = tmp.path().join("crash");
    let next = plan.len();
    let extra: Vec<Record> = (next..next + 5).map(record).collect();
    let ours = open_with_ours(&log_dir, Some((7, &extra)));
    assert_eq!(ours.log_end_offset, (next + 5) as u64);
    let recovered: KView = kafka.json(&[
        "recover",
        "--log-dir",
        path_str(&log_dir),
        "--records",
        "--recovery-point",
        "0",
    ]);
    let mut want = plan.clone();
    want.extend(
        extra
            .iter()
            .enumerate()
            .map(|(k, r)| (7, to_krecord((next + k) as u64, r))),
    );
    assert_eq!(
        recovered.records(),
        want,
        "Kafka reads the batch we appended to its log"
    );
    assert_eq!(
        recovered.leader_epochs.last(),
        Some(&KEpoch {
            epoch: 7,
            start_offset: next as u64
        })
    );
    assert_eq!(recovered.leader_epochs, ours.leader_epochs);
}

// ---------------------------------------------------------------------------
// 3. Recovery agrees
// ---------------------------------------------------------------------------

/// Damage done to a copy of a Kafka-written directory.
struct Damage {
    name: &'static str,
    /// Flip a byte inside the records of this batch (segment, batch index):
    /// bytes the CRC covers.
    corrupt: Option<(usize, usize)>,
    /// Cut the last segment in the middle of its last batch, as a crash
    /// during a write leaves it.
    torn_tail: bool,
}

const DAMAGES: &[Damage] = &[
    Damage {
        name: "torn-tail",
        corrupt: None,
        torn_tail: true,
    },
    Damage {
        name: "corrupt-middle-segment-and-torn-tail",
        corrupt: Some((1, 2)),
        torn_tail: true,
    },
    Damage {
        name: "corrupt-last-segment-and-torn-tail",
        corrupt: Some((3, 1)),
        torn_tail: true,
    },
    Damage {
        name: "corrupt-first-batch-of-a-segment",
        corrupt: Some((2, 0)),
        torn_tail: false,
    },
];

impl Damage {
    fn apply(&self, view: &KView, part: &Path) {
        if let Some((s, b)) = self.corrupt {
            let segment = &view.segments[s];
            let batch = &segment.batches[b];
            let path = part.join(&segment.file);
            let mut bytes = fs::read(&path).unwrap();
            // Past the 61-byte header: a record byte, covered by the CRC.
            let at = (batch.position + 61 + (batch.size_bytes - 61) / 2) as usize;
            bytes[at] ^= 0xff;
            fs::write(&path, bytes).unwrap();
        }
        if self.torn_tail {
            let segment = view.segments.last().unwrap();
            let batch = segment.batches.last().unwrap();
            let path = part.join(&segment.file);
            let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.set_len(batch.position + batch.size_bytes / 2).unwrap();
        }
    }

    /// The batches a correct recovery keeps: every batch before the first
    /// damaged one.
    fn kept(&self, view: &KView) -> Vec<(u64, u64, i32, u32)> {
        let mut cut = u64::MAX;
        if let Some((s, b)) = self.corrupt {
            cut = cut.min(view.segments[s].batches[b].base_offset);
        }
        if self.torn_tail {
            cut = cut.min(
                view.segments
                    .last()
                    .unwrap()
                    .batches
                    .last()
                    .unwrap()
                    .base_offset,
            );
        }
        view.batch_ids()
            .into_iter()
            .filter(|&(base, ..)| base < cut)
            .collect()
    }
}

/// (file name, size) of the `.log` files left in a partition directory.
fn log_files(part: &Path) -> Vec<(String, u64)> {
    files_with_suffix(part, "log")
        .iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                fs::metadata(p).unwrap().len(),
            )
        })
        .collect()
}

#[test]
fn recovery_agrees_with_kafka() {
    let Some(kafka) = kafka("kafka_interop::recovery_agrees_with_kafka") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let original = tmp.path().join("original");
    let view = kafka.write(&original, "close");
    assert_eq!(view.segments.len(), PLAN.len());
    for damage in DAMAGES {
        let (for_kafka, for_us) = (
            tmp.path().join(damage.name).join("kafka"),
            tmp.path().join(damage.name).join("ours"),
        );
        copy_tree(&original, &for_kafka);
        copy_tree(&original, &for_us);
        damage.apply(&view, &for_kafka.join(tp().dir_name()));
        damage.apply(&view, &for_us.join(tp().dir_name()));

        let theirs = kafka.recover(&for_kafka);
        let ours = open_with_ours(&for_us, None);
        let want = damage.kept(&view);
        let what = damage.name;
        assert!(
            want.len() < view.batch_ids().len(),
            "{what}: the damage removes batches"
        );
        assert_eq!(theirs.batch_ids(), want, "{what}: Kafka's log loader kept");
        assert_eq!(
            ours.batch_ids(),
            theirs.batch_ids(),
            "{what}: we kept what Kafka kept"
        );
        assert!(
            ours.problem.is_some(),
            "{what}: our recovery reports the damage"
        );
        assert_same_log(&ours, &theirs, what);
        assert_eq!(
            log_files(&for_us.join(tp().dir_name())),
            log_files(&for_kafka.join(tp().dir_name())),
            "{what}: segment files left after recovery"
        );
    }
}
