//! Storage benchmark: `cargo bench -p highwater --bench storage`.
//!
//! Prints, in one run, each figure beside a raw baseline measured the same
//! way on the same bytes:
//! - append throughput, 1 KiB records in 16 KiB batches, without and with a
//!   flush after every batch, against sequential `write` of the same bytes
//!   (with `fdatasync` after every batch for the flushed case);
//! - random offset lookup latency (p50, p99) in the log;
//! - recovery throughput against a sequential read plus CRC-32C of the
//!   same files.
//!
//! Sizes: `HIGHWATER_BENCH_BYTES` (default 256 MiB; set 1073741824 for the
//! 1 GiB log), `HIGHWATER_BENCH_FLUSH_BYTES` (default 8 MiB, for the
//! flush-per-batch figures), `HIGHWATER_BENCH_DIR` (default: a temporary
//! directory). Each figure is the median of `HIGHWATER_BENCH_RUNS` (3) runs.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use highwater::storage::batch::{encode_batch, ProducerInfo};
use highwater::storage::{LoadParams, Log, LogConfig, Record};

const RECORD_BYTES: usize = 1024;
const RECORDS_PER_BATCH: usize = 16;
const MIB: f64 = 1024.0 * 1024.0;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn batch_records(i: u64) -> Vec<Record> {
    (0..RECORDS_PER_BATCH)
        .map(|j| {
            let mut value = vec![0u8; RECORD_BYTES];
            value[..8].copy_from_slice(&(i * 16 + j as u64).to_be_bytes());
            Record::new(1_700_000_000_000 + i as i64, value)
        })
        .collect()
}

/// One round of the no-flush append comparison; returns MB/s of
/// (`Log::append`, `Log::append_batch`, raw `write`).
fn interleaved_append(root: &Path, n: usize, recs: &[Record], encoded: &[u8]) -> (f64, f64, f64) {
    let (a_dir, b_dir, raw_path) = (
        root.join("append-0"),
        root.join("batch-0"),
        root.join("raw.bin"),
    );
    for d in [&a_dir, &b_dir] {
        let _ = fs::remove_dir_all(d);
    }
    let (mut a, _) = Log::open(&a_dir, LogConfig::default(), LoadParams::default()).expect("open");
    let (mut b, _) = Log::open(&b_dir, LogConfig::default(), LoadParams::default()).expect("open");
    let mut raw = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&raw_path)
        .unwrap();
    let mut t = [Duration::ZERO; 3];
    let chunk = 64;
    let mut stamped = encoded.to_vec();
    for (c, start) in (0..n).step_by(chunk).enumerate() {
        let end = (start + chunk).min(n);
        for k in 0..3 {
            let which = (c + k) % 3;
            let now = Instant::now();
            match which {
                0 => {
                    for _ in start..end {
                        a.append(recs, 0).expect("append");
                    }
                }
                1 => {
                    for _ in start..end {
                        b.append_batch(&mut stamped, 0).expect("append");
                    }
                }
                _ => {
                    for _ in start..end {
                        raw.write_all(encoded).unwrap();
                    }
                }
            }
            t[which] += now.elapsed();
        }
    }
    let bytes = a.size_in_bytes();
    assert_eq!(bytes, b.size_in_bytes());
    // Untimed: no dirty backlog is left for the next measurement.
    raw.sync_all().unwrap();
    a.close().unwrap();
    b.close().unwrap();
    let _ = fs::remove_dir_all(&b_dir);
    let _ = fs::remove_file(&raw_path);
    let m = |d: Duration| mbps(bytes, d.as_secs_f64());
    (m(t[0]), m(t[1]), m(t[2]))
}

/// One round of the flush-per-batch comparison: `Log::append` + `flush`
/// against `write` + `fdatasync` of the same bytes (the physical limit),
/// interleaved in chunks of 8 batches; returns MB/s of each.
fn interleaved_flush(root: &Path, n: usize, recs: &[Record], encoded: &[u8]) -> (f64, f64) {
    let (dir, raw_path) = (root.join("flush-0"), root.join("raw-flush.bin"));
    let _ = fs::remove_dir_all(&dir);
    let (mut log, _) = Log::open(&dir, LogConfig::default(), LoadParams::default()).expect("open");
    let mut raw = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&raw_path)
        .unwrap();
    let mut t = [Duration::ZERO; 2];
    for (c, start) in (0..n).step_by(8).enumerate() {
        let end = (start + 8).min(n);
        for k in 0..2 {
            let which = (c + k) % 2;
            let now = Instant::now();
            if which == 0 {
                for _ in start..end {
                    log.append(recs, 0).expect("append");
                    log.flush(log.log_end_offset()).expect("flush");
                }
            } else {
                for _ in start..end {
                    raw.write_all(encoded).unwrap();
                    raw.sync_data().unwrap();
                }
            }
            t[which] += now.elapsed();
        }
    }
    let bytes = log.size_in_bytes();
    log.close().unwrap();
    let _ = fs::remove_file(&raw_path);
    (
        mbps(bytes, t[0].as_secs_f64()),
        mbps(bytes, t[1].as_secs_f64()),
    )
}

/// Raw baseline for recovery: read every segment file sequentially and
/// CRC-32C all of its bytes.
fn raw_read_crc(files: &[PathBuf]) -> (u64, f64) {
    let mut buf = vec![0u8; 1 << 20];
    let start = Instant::now();
    let mut bytes = 0u64;
    let mut crc = 0u32;
    for p in files {
        let mut f = File::open(p).unwrap();
        loop {
            let n = f.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            bytes += n as u64;
        }
    }
    std::hint::black_box(crc);
    (bytes, start.elapsed().as_secs_f64())
}

fn mbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / MIB / secs
}

fn main() {
    let total = env_u64("HIGHWATER_BENCH_BYTES", 256 << 20);
    let flush_total = env_u64("HIGHWATER_BENCH_FLUSH_BYTES", 8 << 20);
    let runs = env_u64("HIGHWATER_BENCH_RUNS", 3).max(1) as usize;
    let tmp;
    let root = match std::env::var("HIGHWATER_BENCH_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) => {
            tmp = tempfile::tempdir().unwrap();
            tmp.path().to_path_buf()
        }
    };
    fs::create_dir_all(&root).unwrap();
    let log_dir = root.join("append-0");

    let batch_size = {
        let mut b = Vec::new();
        encode_batch(&mut b, 0, 0, ProducerInfo::NONE, &batch_records(0)).unwrap();
        b.len() as u64
    };
    let n = (total / batch_size).max(1);
    let n_flush = (flush_total / batch_size).max(1);
    println!(
        "highwater storage benchmark: {} records of {} B in batches of {} ({} B encoded); log {:.0} MiB, \
         flushed runs {:.0} MiB, median of {runs} runs; dir {}",
        n * RECORDS_PER_BATCH as u64,
        RECORD_BYTES,
        RECORDS_PER_BATCH,
        batch_size,
        (n * batch_size) as f64 / MIB,
        (n_flush * batch_size) as f64 / MIB,
        root.display()
    );
    // Every batch carries the same records: inputs stay hot in the cache
    // for the log and the raw writer alike, so the ratio measures what the
    // log adds over writing the bytes (encoding, CRC, indexing, publishing).
    let recs = batch_records(0);
    let mut encoded = Vec::new();
    encode_batch(&mut encoded, 0, 0, ProducerInfo::NONE, &recs).unwrap();

    // Append without flush. The machine may be shared, so the three
    // writers are interleaved in chunks of about 1 MiB (rotating who goes
    // first) and each one's time is summed: background load hits all alike.
    let (mut ours, mut pre, mut raw) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let (o, p, r) = interleaved_append(&root, n as usize, &recs, &encoded);
        ours.push(o);
        pre.push(p);
        raw.push(r);
    }
    let (ours, pre, raw) = (median(ours), median(pre), median(raw));
    println!("append, no flush:      Log::append {ours:8.1} MB/s   raw write {raw:8.1} MB/s   ratio {:.2}", ours / raw);
    println!(
        "append, no flush:      append_batch (producer-encoded) {pre:8.1} MB/s   ratio {:.2}",
        pre / raw
    );

    // Append with a flush after every batch, interleaved with the raw
    // write + fdatasync in chunks of 8 batches.
    let (mut ours_f, mut raw_f) = (Vec::new(), Vec::new());
    let flush_dir = root.join("flush-0");
    for _ in 0..runs {
        let (o, r) = interleaved_flush(&root, n_flush as usize, &recs, &encoded);
        ours_f.push(o);
        raw_f.push(r);
    }
    let (ours_f, raw_f) = (median(ours_f), median(raw_f));
    println!(
        "append, flush/batch:   Log::append {ours_f:8.1} MB/s   raw write+fdatasync {raw_f:8.1} MB/s   ratio {:.2}",
        ours_f / raw_f
    );
    let _ = fs::remove_dir_all(&flush_dir);

    // Random offset lookups, in the `Log::append` log of the last no-flush
    // round (it stays for recovery too).
    let (log, _) = Log::open(
        &log_dir,
        LogConfig::default(),
        LoadParams {
            recovery_point: u64::MAX,
            clean_shutdown: true,
            ..LoadParams::default()
        },
    )
    .unwrap();
    let reader = log.reader();
    let leo = reader.log_end_offset();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let lookups = 200_000;
    let mut lat = Vec::with_capacity(lookups);
    for _ in 0..lookups {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = x % leo;
        let t = Instant::now();
        let p = reader.lookup(off).unwrap();
        lat.push(t.elapsed());
        assert!(p.batch_base_offset <= off && off <= p.batch_last_offset);
    }
    lat.sort();
    let q = |f: f64| lat[((lat.len() as f64 * f) as usize).min(lat.len() - 1)];
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "lookup, {:.0} MiB log, {} random offsets: p50 {:.2} us   p99 {:.2} us   p99.9 {:.2} us   max {:.2} us",
        log.size_in_bytes() as f64 / MIB,
        lookups,
        us(q(0.5)),
        us(q(0.99)),
        us(q(0.999)),
        us(*lat.last().unwrap())
    );
    let files: Vec<PathBuf> = log.segments().iter().map(|s| s.log_path.clone()).collect();
    drop(reader);
    drop(log);

    // Recovery of the whole log (recovery point 0, unclean) against a raw
    // read plus CRC of the same files.
    let (mut rec, mut raw_r) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (b, s) = raw_read_crc(&files);
        raw_r.push(mbps(b, s));
        let t = Instant::now();
        let (_, report) = Log::open(&log_dir, LogConfig::default(), LoadParams::default()).unwrap();
        let s = t.elapsed().as_secs_f64();
        assert!(report.problem.is_none());
        rec.push(mbps(report.bytes_recovered, s));
    }
    let (rec, raw_r) = (median(rec), median(raw_r));
    println!(
        "recovery:              {rec:8.1} MB/s   raw read+CRC-32C {raw_r:8.1} MB/s   ratio {:.2}",
        rec / raw_r
    );
    let _ = fs::remove_dir_all(&log_dir);
}
