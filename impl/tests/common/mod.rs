//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use highwater::storage::{LoadParams, Log, LogConfig, Record, RecoveryReport};

/// A small configuration so tests cross many segments and index entries.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        segment_index_bytes: 1024,
        retention_bytes: None,
        retention_ms: None,
        truncate_below_recovery_point: false,
        compression_type: highwater::storage::CompressionType::Producer,
        mutation: None,
    }
}

/// Deterministic records for batch `i`: 1 to 4 records, varied sizes.
pub fn records_for(i: u64) -> Vec<Record> {
    let n = 1 + (i % 4) as usize;
    (0..n)
        .map(|j| {
            let mut r = Record::new(
                1_000 + i as i64 * 10 + j as i64,
                format!(
                    "value-{i}-{j}-{}",
                    "x".repeat(((i * 7 + j as u64) % 90) as usize)
                ),
            );
            if j % 2 == 0 {
                r.key = Some(format!("key-{i}").into_bytes());
            }
            if i.is_multiple_of(3) {
                r.headers.push(highwater::storage::Header {
                    key: "h".into(),
                    value: Some(vec![i as u8]),
                });
            }
            r
        })
        .collect()
}

/// A new log (`small_config`) in `t-0` of a temporary directory, which
/// lives as long as the first value.
pub fn fresh_log() -> (tempfile::TempDir, PathBuf, Log) {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("t-0");
    let (log, _) = open(&dir, small_config(), LoadParams::default());
    (tmp, dir, log)
}

pub fn open(dir: &Path, config: LogConfig, params: LoadParams) -> (Log, RecoveryReport) {
    Log::open(dir, config, params).expect("open")
}

/// Every record from `from` to the log end, read through a reader in small
/// reads, as (offset, record).
pub fn read_all(log: &Log, from: u64) -> Vec<(u64, Record)> {
    let reader = log.reader();
    let mut out = Vec::new();
    let mut next = from;
    loop {
        let data = reader.read(next, 300, u64::MAX).expect("read");
        if data.records.is_empty() {
            break;
        }
        for b in data.batches() {
            for r in b.decode_records().expect("decode") {
                if r.0 >= from {
                    out.push(r);
                }
            }
        }
        assert!(data.next_offset > next, "reads make progress");
        next = data.next_offset;
    }
    out
}

/// Appends batches `0..n` with epochs rising every 10 batches; returns
/// the expected records.
pub fn fill(log: &mut Log, n: u64) -> Vec<(u64, Record)> {
    let mut expected = Vec::new();
    for i in 0..n {
        let recs = records_for(i);
        let info = log.append(&recs, (i / 10) as i32).expect("append");
        for (k, r) in recs.into_iter().enumerate() {
            expected.push((info.first_offset + k as u64, r));
        }
    }
    expected
}

/// Cuts the file at `path` to `len` bytes, as a crash leaves a write that
/// did not reach the disk (0: the file's contents lost).
pub fn cut_file(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open to cut")
        .set_len(len)
        .expect("cut");
}
