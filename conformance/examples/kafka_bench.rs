//! Side-by-side benchmark: the same append workload through Apache Kafka's
//! log (`UnifiedLog.appendAsLeader`, run by `conformance/kafka/kafka.sh`) and
//! through ours (`Log::append_batch`), then recovery of the same unflushed
//! data after an unclean stop, in one run. Run it with
//! `conformance/kafka/bench.sh` (a benchmark, not a test).
//!
//! Workload, on both sides: `--total-bytes` (default 1 GiB) of record values,
//! `--record-bytes` (1024) each, `--batch-bytes` (16384) of values per batch,
//! uncompressed CreateTime batches with no key, leader epoch 0, default
//! segment size (1 GiB), no flush. A pool of 64 batches is encoded before the
//! clock starts (building batches is the producer's work); each append
//! checks the batch's CRC, stamps offsets and epoch, and writes it. The
//! append phase then stops without closing or flushing (the process exits),
//! and a fresh process times opening the log with no clean-shutdown marker
//! and recovery point 0, which re-reads and checks every batch and rebuilds
//! the indexes. Each phase runs in its own process.
//!
//! With `--compression CODEC` (none, gzip, snappy, lz4, zstd, or `all`),
//! the producer batches stay uncompressed and the topic's
//! `compression.type` names the codec, so each append re-encodes its batch
//! (Kafka's `LogValidator`, our `append_batch`); a third phase then times
//! reading every record back, decompressing (Kafka's `FileRecords` batches
//! and records, our `LogReader::read` and `decode_records`).
//!
//! ```text
//! kafka_bench [--dir DIR] [--total-bytes N] [--record-bytes N] [--batch-bytes N]
//!             [--compression none|gzip|snappy|lz4|zstd|all] [--keep]
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use highwater::storage::batch::encode_batch;
use highwater::storage::{
    Codec, CompressionType, LoadParams, Log, LogConfig, ProducerInfo, Record,
};
use serde_json::{json, Value};

const BASE_TIMESTAMP: i64 = 1_700_000_000_000;
const POOL: usize = 64;

struct Workload {
    total_bytes: u64,
    record_bytes: usize,
    batch_bytes: usize,
    codec: Codec,
}

impl Workload {
    fn per_batch(&self) -> usize {
        self.batch_bytes / self.record_bytes
    }
    fn records(&self) -> u64 {
        self.total_bytes / self.record_bytes as u64
    }
    fn batches(&self) -> u64 {
        self.records() / self.per_batch() as u64
    }
}

fn config(codec: Codec) -> LogConfig {
    LogConfig {
        // The records carry fixed 2023 timestamps: no time retention.
        retention_ms: None,
        compression_type: if codec == Codec::None {
            CompressionType::Producer
        } else {
            CompressionType::Codec(codec)
        },
        ..LogConfig::default()
    }
}

fn partition_dir(base: &Path) -> PathBuf {
    base.join("bench-0")
}

/// Our append phase: prints one JSON line, then exits without closing.
fn ours_append(base: &Path, w: &Workload) -> ! {
    let dir = partition_dir(base);
    assert!(!dir.exists(), "{} already exists", dir.display());
    let mut pool: Vec<Vec<u8>> = (0..POOL)
        .map(|p| {
            let records: Vec<Record> = (0..w.per_batch())
                .map(|r| {
                    let value: Vec<u8> = (0..w.record_bytes)
                        .map(|k| b'a' + ((p * 31 + r * 7 + k) % 26) as u8)
                        .collect();
                    Record::new(BASE_TIMESTAMP + p as i64, value)
                })
                .collect();
            let mut out = Vec::new();
            encode_batch(&mut out, 0, 0, ProducerInfo::NONE, &records).expect("encode");
            out
        })
        .collect();
    let (mut log, _) = Log::open(&dir, config(w.codec), LoadParams::default()).expect("open");
    let start = Instant::now();
    for b in 0..w.batches() {
        let batch = &mut pool[(b % POOL as u64) as usize];
        log.append_batch(batch, 0).expect("append");
    }
    let seconds = start.elapsed().as_secs_f64();
    let out = json!({
        "implementation": "highwater",
        "phase": "append",
        "compression": w.codec.name(),
        "records": w.records(),
        "batches": w.batches(),
        "value_bytes": w.records() * w.record_bytes as u64,
        "log_bytes": log.size_in_bytes(),
        "segments": log.segments().len(),
        "log_end_offset": log.log_end_offset(),
        "seconds": seconds,
    });
    println!("{out}");
    // Unclean stop: no flush, no close, no checkpoint, no destructor.
    std::process::exit(0);
}

/// Our recovery phase: prints one JSON line.
fn ours_recover(base: &Path) {
    let dir = partition_dir(base);
    assert!(dir.is_dir(), "{} is not a directory", dir.display());
    let start = Instant::now();
    let (log, report) =
        Log::open(&dir, config(Codec::None), LoadParams::default()).expect("recover");
    let seconds = start.elapsed().as_secs_f64();
    let out = json!({
        "implementation": "highwater",
        "phase": "recover",
        "segments_recovered": report.segments_recovered.len(),
        "bytes_recovered": report.bytes_recovered,
        "bytes_truncated": report.bytes_truncated,
        "log_bytes": log.size_in_bytes(),
        "segments": log.segments().len(),
        "log_end_offset": log.log_end_offset(),
        "seconds": seconds,
    });
    println!("{out}");
    std::process::exit(0);
}

/// Our read phase: opens the log (untimed), then times reading every
/// record, decompressing; prints one JSON line.
fn ours_read(base: &Path) {
    let dir = partition_dir(base);
    let (log, _) = Log::open(&dir, config(Codec::None), LoadParams::default()).expect("open");
    let start = Instant::now();
    let (mut records, mut value_bytes) = (0u64, 0u64);
    let mut from = 0;
    while from < log.log_end_offset() {
        let data = log.read(from, 1 << 20, u64::MAX).expect("read");
        for b in data.batches() {
            for r in b.records() {
                let (_, r) = r.expect("record");
                records += 1;
                value_bytes += r.value.map_or(0, |v| v.len() as u64);
            }
        }
        from = data.next_offset;
    }
    let seconds = start.elapsed().as_secs_f64();
    let out = json!({
        "implementation": "highwater",
        "phase": "read",
        "records": records,
        "value_bytes": value_bytes,
        "seconds": seconds,
    });
    println!("{out}");
}

fn kafka_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kafka")
}

/// Runs one phase in a child process and returns the JSON it printed.
fn run_phase(mut cmd: Command, what: &str) -> Value {
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what} failed ({})", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{what} printed {text:?}: {e}"))
}

fn self_phase(phase: &str, dir: &Path, args: &[String]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("current exe"));
    cmd.arg("--phase")
        .arg(phase)
        .arg("--dir")
        .arg(dir)
        .args(args);
    cmd
}

fn kafka_phase(phase: &str, dir: &Path, args: &[String]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(kafka_dir().join("kafka.sh"))
        .arg(phase)
        .arg("--dir")
        .arg(dir)
        .args(args);
    cmd
}

fn seconds(v: &Value) -> f64 {
    v["seconds"].as_f64().expect("seconds")
}

fn mib_per_s(bytes: u64, s: f64) -> f64 {
    bytes as f64 / (1 << 20) as f64 / s
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut dir = std::env::temp_dir().join("highwater-kafka-bench");
    let mut phase = None;
    let mut keep = false;
    let mut w = Workload {
        total_bytes: 1 << 30,
        record_bytes: 1024,
        batch_bytes: 16384,
        codec: Codec::None,
    };
    let mut all_codecs = false;
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).cloned().expect("option needs a value");
        match args[i].as_str() {
            "--dir" => dir = PathBuf::from(value()),
            "--phase" => phase = Some(value()),
            "--total-bytes" => w.total_bytes = value().parse().expect("--total-bytes"),
            "--record-bytes" => w.record_bytes = value().parse().expect("--record-bytes"),
            "--batch-bytes" => w.batch_bytes = value().parse().expect("--batch-bytes"),
            "--compression" => match value().as_str() {
                "all" => all_codecs = true,
                name => {
                    w.codec = Codec::ALL
                        .into_iter()
                        .find(|c| c.name() == name)
                        .unwrap_or_else(|| panic!("unknown codec {name}"))
                }
            },
            "--keep" => {
                keep = true;
                i += 1;
                continue;
            }
            other => panic!("unknown option {other}"),
        }
        i += 2;
    }
    assert!(
        w.per_batch() >= 1,
        "--batch-bytes must hold at least one record"
    );
    match phase.as_deref() {
        Some("ours-append") => ours_append(&dir, &w),
        Some("ours-recover") => return ours_recover(&dir),
        Some("ours-read") => return ours_read(&dir),
        Some(other) => panic!("unknown phase {other}"),
        None => {}
    }

    let codecs: Vec<Codec> = if all_codecs {
        Codec::ALL.to_vec()
    } else {
        vec![w.codec]
    };
    let mut table = Vec::new();
    for codec in codecs {
        w.codec = codec;
        table.extend(compare(&dir, &w, keep));
    }
    println!();
    println!(
        "{:<8} {:<10} {:>12} {:>12} {:>12} {:>12} {:>22}",
        "codec", "phase", "highwater s", "MiB/s", "kafka s", "MiB/s", "ratio highwater/kafka"
    );
    for (codec, name, bytes, ours, theirs) in table {
        println!(
            "{:<8} {:<10} {:>12.3} {:>12.1} {:>12.3} {:>12.1} {:>22}",
            codec,
            name,
            ours,
            mib_per_s(bytes, ours),
            theirs,
            mib_per_s(bytes, theirs),
            format!("{:.2}x time", ours / theirs),
        );
    }
    println!("(MiB/s of record values; ratio < 1: highwater took less time than Kafka)");
}

/// One side-by-side run of `w`; returns (codec, phase, value bytes, our
/// seconds, Kafka's seconds) for each phase.
fn compare(
    dir: &Path,
    w: &Workload,
    keep: bool,
) -> Vec<(&'static str, &'static str, u64, f64, f64)> {
    let workload_args = vec![
        "--compression".to_string(),
        w.codec.name().to_string(),
        "--total-bytes".to_string(),
        w.total_bytes.to_string(),
        "--record-bytes".to_string(),
        w.record_bytes.to_string(),
        "--batch-bytes".to_string(),
        w.batch_bytes.to_string(),
    ];
    let (ours_dir, kafka_base) = (dir.join("highwater"), dir.join("kafka"));
    for d in [&ours_dir, &kafka_base] {
        if d.exists() {
            std::fs::remove_dir_all(d).expect("clear bench directory");
        }
        std::fs::create_dir_all(d).expect("bench directory");
    }
    println!(
        "workload: {} records of {} B values in {} batches of {} ({} MiB of values), \
         compression.type {}, no flush; data under {}",
        w.records(),
        w.record_bytes,
        w.batches(),
        w.per_batch(),
        (w.records() * w.record_bytes as u64) >> 20,
        w.codec,
        dir.display()
    );

    let ours_a = run_phase(
        self_phase("ours-append", &ours_dir, &workload_args),
        "our append",
    );
    println!("highwater append:  {ours_a}");
    let ours_r = run_phase(self_phase("ours-recover", &ours_dir, &[]), "our recovery");
    println!("highwater recover: {ours_r}");
    let ours_rd = run_phase(self_phase("ours-read", &ours_dir, &[]), "our read");
    println!("highwater read:    {ours_rd}");
    if !keep {
        std::fs::remove_dir_all(&ours_dir).expect("remove our bench data");
    }
    let kafka_a = run_phase(
        kafka_phase("bench-append", &kafka_base, &workload_args),
        "Kafka append",
    );
    println!("kafka append:      {}", compact(&kafka_a));
    let kafka_r = run_phase(
        kafka_phase("bench-recover", &kafka_base, &[]),
        "Kafka recovery",
    );
    println!("kafka recover:     {}", compact(&kafka_r));
    let kafka_rd = run_phase(kafka_phase("bench-read", &kafka_base, &[]), "Kafka read");
    println!("kafka read:        {}", compact(&kafka_rd));
    if !keep {
        std::fs::remove_dir_all(&kafka_base).expect("remove Kafka bench data");
    }

    // Same work on both sides, or the figures mean nothing. Compressed
    // sizes differ between compressors; offsets and values may not.
    let mut same = vec![
        (
            "log end offset after append",
            &ours_a["log_end_offset"],
            &kafka_a["log_end_offset"],
        ),
        (
            "log end offset after recovery",
            &ours_r["log_end_offset"],
            &kafka_r["log_end_offset"],
        ),
        ("records read", &ours_rd["records"], &kafka_rd["records"]),
        (
            "value bytes read",
            &ours_rd["value_bytes"],
            &kafka_rd["value_bytes"],
        ),
    ];
    if w.codec == Codec::None {
        same.push((
            "appended log bytes",
            &ours_a["log_bytes"],
            &kafka_a["log_bytes"],
        ));
    }
    for (what, a, b) in same {
        assert_eq!(a, b, "{what} differ between highwater and Kafka");
    }
    let bytes = w.records() * w.record_bytes as u64;
    vec![
        (
            w.codec.name(),
            "append",
            bytes,
            seconds(&ours_a),
            seconds(&kafka_a),
        ),
        (
            w.codec.name(),
            "recovery",
            bytes,
            seconds(&ours_r),
            seconds(&kafka_r),
        ),
        (
            w.codec.name(),
            "read",
            bytes,
            seconds(&ours_rd),
            seconds(&kafka_rd),
        ),
    ]
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).expect("json")
}
