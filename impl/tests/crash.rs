//! Crash simulation: unflushed data is cut at random byte positions and
//! random bits are flipped in it, indexes and the epoch checkpoint are
//! damaged, then the log is recovered. Every record below the recovery point
//! must survive, and nothing invalid may be served.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use highwater::storage::{Error, LoadParams, Log, Record};
use proptest::prelude::*;

/// Where unflushed data starts: (segment base, byte position) of the first
/// batch not wholly below the recovery point.
fn unflushed_start(log: &Log) -> Option<(u64, u64)> {
    let rp = log.recovery_point();
    if rp >= log.log_end_offset() {
        return None;
    }
    let p = log.reader().lookup(rp).unwrap();
    if p.batch_base_offset < rp {
        // The batch holding the recovery point was fsynced whole.
        let next = p.batch_last_offset + 1;
        if next >= log.log_end_offset() {
            return None;
        }
        let q = log.reader().lookup(next).unwrap();
        return Some((q.segment_base_offset, q.position));
    }
    Some((p.segment_base_offset, p.position))
}

fn seg_path(dir: &Path, base: u64, ext: &str) -> PathBuf {
    dir.join(format!("{base:020}.{ext}"))
}

#[derive(Debug, Clone)]
struct Damage {
    /// Fraction of the unflushed bytes kept before the cut, if cutting.
    cut: Option<f64>,
    /// Bit flips: (fraction into the unflushed bytes, bit).
    flips: Vec<(f64, u8)>,
    /// Per segment, what happens to its index files.
    index: Vec<u8>,
    epoch_checkpoint: u8,
}

fn damage() -> impl Strategy<Value = Damage> {
    (
        proptest::option::of(0.0f64..1.0),
        proptest::collection::vec((0.0f64..1.0, 0u8..8), 0..4),
        proptest::collection::vec(0u8..6, 0..40),
        0u8..4,
    )
        .prop_map(|(cut, flips, index, epoch_checkpoint)| Damage {
            cut,
            flips,
            index,
            epoch_checkpoint,
        })
}

/// Where each batch of an undamaged segment file starts.
fn batch_starts(path: &Path) -> Vec<u64> {
    let bytes = fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + 12 <= bytes.len() {
        out.push(pos as u64);
        let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap());
        pos += 12 + len.max(49) as usize;
    }
    out
}

fn apply(dir: &Path, start: Option<(u64, u64)>, bases: &[u64], d: &Damage) {
    // The unflushed region, as (path, from, to) pieces in log order.
    let mut pieces = Vec::new();
    if let Some((sb, sp)) = start {
        for &b in bases.iter().filter(|&&b| b >= sb) {
            let p = seg_path(dir, b, "log");
            let len = fs::metadata(&p).unwrap().len();
            let from = if b == sb { sp } else { 0 };
            if len > from {
                pieces.push((p, from, len));
            }
        }
    }
    let total: u64 = pieces.iter().map(|(_, f, t)| t - f).sum();
    let locate = |frac: f64| -> Option<(PathBuf, u64)> {
        let mut at = (frac * total as f64) as u64;
        for (p, f, t) in &pieces {
            if at < t - f {
                return Some((p.clone(), f + at));
            }
            at -= t - f;
        }
        None
    };
    for &(frac, bit) in &d.flips {
        if let Some((p, pos)) = locate(frac) {
            // The leader epoch (bytes 12..16 of a batch) lies outside the
            // CRC and Kafka's loader takes whatever it holds; so does ours
            // (`tests/recovery_rules.rs`). Flips land elsewhere here.
            if batch_starts(&p)
                .iter()
                .any(|&s| (s + 12..s + 16).contains(&pos))
            {
                continue;
            }
            let mut b = fs::read(&p).unwrap();
            b[pos as usize] ^= 1 << bit;
            fs::write(&p, b).unwrap();
        }
    }
    if let Some(frac) = d.cut {
        if let Some((p, pos)) = locate(frac) {
            cut_file(&p, pos);
            // A crash loses whole later files' contents too.
            let cut_base: u64 = p.file_stem().unwrap().to_str().unwrap().parse().unwrap();
            for &b in bases.iter().filter(|&&b| b > cut_base) {
                cut_file(&seg_path(dir, b, "log"), 0);
            }
        }
    }
    for (i, &b) in bases.iter().enumerate() {
        let action = d.index.get(i).copied().unwrap_or(0);
        let ext = if i % 2 == 0 { "index" } else { "timeindex" };
        let p = seg_path(dir, b, ext);
        match action {
            1 => drop(fs::remove_file(&p)),
            2 => fs::write(&p, [0u8; 13]).unwrap(),
            3 => fs::write(&p, [0u8; 64]).unwrap(),
            4 => {
                let len = fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
                fs::write(&p, vec![0xa5; len as usize + 8]).unwrap()
            }
            _ => {}
        }
    }
    let ep = dir.join("leader-epoch-checkpoint");
    match d.epoch_checkpoint {
        1 => fs::write(&ep, "0\n7\ngarbage").unwrap(),
        2 => drop(fs::remove_file(&ep)),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn recovery_keeps_everything_below_the_recovery_point(
        n in 10u64..70,
        flush_frac in 0.0f64..1.0,
        d in damage(),
    ) {
        let (_tmp, dir, mut log) = fresh_log();
        let expected = fill(&mut log, n);
        let leo = log.log_end_offset();
        log.flush((flush_frac * leo as f64) as u64).unwrap();
        let rp = log.recovery_point();
        let start = unflushed_start(&log);
        let bases: Vec<u64> = log.segments().iter().map(|s| s.base_offset).collect();
        drop(log); // a crash: no close, no clean-shutdown marker
        apply(&dir, start, &bases, &d);

        let params = LoadParams { recovery_point: rp, high_watermark: leo, ..LoadParams::default() };
        let (mut log, report) = Log::open(&dir, small_config(), params).expect("recovery succeeds");
        prop_assert!(log.log_end_offset() >= rp, "{report}");
        prop_assert!(log.high_watermark() <= log.log_end_offset());
        let got = read_all(&log, 0);
        // Every record below the recovery point survives; everything served
        // is an original record at its original offset.
        let below = expected.iter().filter(|(o, _)| *o < rp).count();
        prop_assert!(got.len() >= below);
        prop_assert_eq!(&got[..], &expected[..got.len()]);
        prop_assert_eq!(got.len() as u64, log.log_end_offset());
        // Epochs too (no flip lands on one): batch i was written with
        // epoch i / 10 (see `fill`), whatever happened to the checkpoint.
        let mut k = 0;
        let mut next = 0;
        while next < log.log_end_offset() {
            let data = log.reader().read(next, 1 << 20, u64::MAX).unwrap();
            for b in data.batches() {
                prop_assert_eq!(b.header.partition_leader_epoch, k / 10);
                k += 1;
            }
            next = data.next_offset;
        }
        for (o, _) in &got {
            log.reader().lookup(*o).unwrap();
        }
        // The epoch cache describes the recovered log.
        for e in log.epoch_entries() {
            prop_assert!(e.start_offset < log.log_end_offset());
        }
        // The log goes on, and recovers again.
        let epoch = log.latest_epoch().unwrap_or(0).max(100);
        log.append(&[Record::new(9, "after")], epoch).unwrap();
        let end = log.log_end_offset();
        drop(log);
        let (log, report) = Log::open(&dir, small_config(), LoadParams::default()).unwrap();
        prop_assert_eq!(report.problem, None);
        prop_assert_eq!(log.log_end_offset(), end);
    }
}

#[test]
fn corruption_below_the_recovery_point_is_refused_not_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut config = small_config();
    config.segment_bytes = 1 << 20;
    let (mut log, _) = open(&dir, config.clone(), LoadParams::default());
    let expected = fill(&mut log, 30);
    log.flush(log.log_end_offset()).unwrap();
    let rp = log.recovery_point();
    let p = log.reader().lookup(40).unwrap();
    drop(log);
    let path = seg_path(&dir, 0, "log");
    let mut bytes = fs::read(&path).unwrap();
    let len = bytes.len();
    bytes[p.position as usize + 70] ^= 0x10; // inside the CRC-covered records
    fs::write(&path, &bytes).unwrap();
    let params = LoadParams {
        recovery_point: rp,
        ..LoadParams::default()
    };
    match Log::open(&dir, config.clone(), params) {
        Err(Error::CorruptBelowRecoveryPoint {
            position, offset, ..
        }) => {
            assert_eq!(position, p.position);
            assert_eq!(offset, p.batch_base_offset);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        fs::metadata(&path).unwrap().len() as usize,
        len,
        "nothing cut"
    );
    // An operator may allow the cut explicitly.
    config.truncate_below_recovery_point = true;
    let (log, report) = Log::open(&dir, config, params).unwrap();
    assert_eq!(log.log_end_offset(), p.batch_base_offset);
    assert!(report.problem.is_some());
    assert!(report
        .repairs
        .iter()
        .any(|r| r.contains("below the recovery point")));
    assert_eq!(read_all(&log, 0), expected[..p.batch_base_offset as usize]);
}

#[test]
fn corrupt_trusted_segment_is_never_served() {
    let (_tmp, dir, mut log) = fresh_log();
    fill(&mut log, 60);
    log.flush(log.log_end_offset()).unwrap();
    let rp = log.recovery_point();
    drop(log);
    // Segment 0 lies wholly below the recovery point: it is not re-read.
    let path = seg_path(&dir, 0, "log");
    let mut bytes = fs::read(&path).unwrap();
    // Inside the first batch's CRC-covered fields (the leader epoch, bytes
    // 12..16, is outside the CRC in Kafka's format).
    bytes[40] ^= 1;
    fs::write(&path, &bytes).unwrap();
    let params = LoadParams {
        recovery_point: rp,
        ..LoadParams::default()
    };
    let (log, report) = Log::open(&dir, small_config(), params).unwrap();
    assert!(!report.segments_recovered.contains(&0));
    match log.reader().read(0, 1 << 20, u64::MAX) {
        Err(Error::CorruptBatch {
            path: p, position, ..
        }) => {
            assert_eq!(p, path);
            assert_eq!(position, 0);
        }
        other => panic!("served corrupt data: {other:?}"),
    }
}

#[test]
fn torn_tail_is_cut_and_reported() {
    let (_tmp, dir, mut log) = fresh_log();
    let expected = fill(&mut log, 12);
    let last = log.segments().last().unwrap().clone();
    let p = log.reader().lookup(log.log_end_offset() - 1).unwrap();
    drop(log);
    cut_file(&last.log_path, p.position + 30);
    let (log, report) = Log::open(&dir, small_config(), LoadParams::default()).unwrap();
    assert_eq!(report.bytes_truncated, 30);
    assert!(
        report.problem.as_deref().unwrap().contains("torn tail"),
        "{report}"
    );
    assert_eq!(log.log_end_offset(), p.batch_base_offset);
    assert_eq!(read_all(&log, 0), expected[..p.batch_base_offset as usize]);
}

#[test]
fn corrupt_batch_removes_later_segments() {
    let (_tmp, dir, mut log) = fresh_log();
    fill(&mut log, 60);
    let segs = log.segments();
    assert!(segs.len() > 4);
    let victim = &segs[2];
    drop(log);
    let mut bytes = fs::read(&victim.log_path).unwrap();
    bytes[200] ^= 0x40;
    fs::write(&victim.log_path, &bytes).unwrap();
    let (log, report) = Log::open(&dir, small_config(), LoadParams::default()).unwrap();
    assert_eq!(report.segments_removed.len(), segs.len() - 3, "{report}");
    assert!(report.bytes_removed > 0 && report.bytes_truncated > 0);
    for s in &segs[3..] {
        assert!(!s.log_path.exists());
    }
    assert!(log.log_end_offset() < victim.next_offset);
    assert_eq!(log.segments().len(), 3);
}
