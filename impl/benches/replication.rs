//! Replication benchmark: `cargo bench -p highwater --bench replication`.
//!
//! The concurrent driver with 3 replicas, acks=all and 1 KiB records, no
//! faults: produce throughput (records/s, MB/s of record values) and the
//! p50/p99 acknowledgement latency, beside the storage layer's own append
//! throughput for the same batches in the same run (`Log::append`, one
//! thread, no flush), and their ratio: the cost of replication.
//!
//! Two runs of the cluster: with the HW checkpointed on every change (the
//! model's `every-change` assumption, still selectable) and once every 5 s
//! (Kafka's `replica.high.watermark.checkpoint.interval.ms`, the default:
//! `HwCheckpointPolicy::KAFKA_DEFAULT`). No run flushes the log
//! (Kafka's default leaves that to the OS), nor does the storage baseline.
//!
//! Settings: `HIGHWATER_BENCH_SECS` (default 5) per cluster run,
//! `HIGHWATER_BENCH_PRODUCERS` (4), `HIGHWATER_BENCH_IN_FLIGHT` (8 requests
//! per producer), `HIGHWATER_BENCH_BATCH` (16 records per request),
//! `HIGHWATER_BENCH_DIR` (default: a temporary directory). MB = 2^20 bytes.

use std::time::{Duration, Instant};

use highwater::cluster::concurrent::{self, ConcurrentConfig};
use highwater::replication::{Acks, HwCheckpointPolicy};
use highwater::storage::{LoadParams, Log, LogConfig, Record};

const RECORD_BYTES: usize = 1024;
const MIB: f64 = 1024.0 * 1024.0;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The storage layer alone: the same batches appended by one thread.
fn storage_append(root: &std::path::Path, batch: usize, secs: f64) -> f64 {
    let dir = root.join("storage-baseline");
    let (mut log, _) = Log::open(&dir, LogConfig::default(), LoadParams::default()).expect("open");
    let records: Vec<Record> = (0..batch)
        .map(|i| Record {
            key: Some((i as u64).to_be_bytes().to_vec()),
            ..Record::new(1_700_000_000_000, vec![b'x'; RECORD_BYTES])
        })
        .collect();
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..64 {
            log.append(&records, 0).expect("append");
            n += batch as u64;
        }
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
    rate
}

fn cluster(root: &std::path::Path, name: &str, policy: HwCheckpointPolicy) -> (f64, f64, f64, u64) {
    let dir = root.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench directory");
    let mut config = ConcurrentConfig::new(3);
    config.acks = Acks::All;
    config.producers = env_u64("HIGHWATER_BENCH_PRODUCERS", 4) as usize;
    config.max_in_flight = env_u64("HIGHWATER_BENCH_IN_FLIGHT", 8) as usize;
    config.records_per_request = env_u64("HIGHWATER_BENCH_BATCH", 16) as usize;
    config.record_bytes = RECORD_BYTES;
    config.duration = Duration::from_secs(env_u64("HIGHWATER_BENCH_SECS", 5));
    config.replication.hw_checkpoint = policy;
    config.replication.replica_lag_time_max_ms = 30_000;
    config.replication.replica_fetch_max_bytes = 1 << 20;
    config.fetch_max_wait = Duration::from_millis(500);
    config.request_timeout = Duration::from_secs(30);
    config.produce_timeout = Duration::from_secs(30);
    let report = concurrent::run(&dir, config).expect("run");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.lost_acknowledged().is_empty());
    let secs = report.produce_elapsed.as_secs_f64();
    let rate = report.acked.len() as f64 / secs;
    let p = |q| {
        report
            .latency_percentile(q)
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
    };
    let _ = std::fs::remove_dir_all(&dir);
    (rate, p(50.0), p(99.0), report.produce_timeouts)
}

fn main() {
    // `cargo test --benches` runs benches with `--bench`; a plain test run
    // passes nothing: run only when asked to benchmark.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let tmp;
    let root = match std::env::var("HIGHWATER_BENCH_DIR") {
        Ok(d) => std::path::PathBuf::from(d),
        Err(_) => {
            tmp = tempfile::tempdir().expect("temporary directory");
            tmp.path().to_path_buf()
        }
    };
    let secs = env_u64("HIGHWATER_BENCH_SECS", 5);
    let batch = env_u64("HIGHWATER_BENCH_BATCH", 16) as usize;
    println!(
        "highwater replication benchmark: 3 replicas, acks=all, {RECORD_BYTES} B records, \
         {} producers x {} requests in flight x {batch} records; {secs} s per run; dir {}",
        env_u64("HIGHWATER_BENCH_PRODUCERS", 4),
        env_u64("HIGHWATER_BENCH_IN_FLIGHT", 8),
        root.display()
    );
    let base = storage_append(&root, batch, 2.0);
    let mb = |r: f64| r * RECORD_BYTES as f64 / MIB;
    println!(
        "storage alone:            Log::append {base:10.0} records/s {:8.1} MB/s",
        mb(base)
    );
    for (name, policy) in [
        (
            "HW checkpoint every change",
            HwCheckpointPolicy::EveryChange,
        ),
        ("HW checkpoint every 5 s", HwCheckpointPolicy::KAFKA_DEFAULT),
    ] {
        let (rate, p50, p99, timeouts) = cluster(&root, "cluster", policy);
        println!(
            "replicated ({name}): {rate:10.0} records/s {:8.1} MB/s   ack latency p50 {p50:.2} ms   p99 {p99:.2} ms   \
             ratio to storage {:.3}   timeouts {timeouts}",
            mb(rate),
            rate / base
        );
    }
}
