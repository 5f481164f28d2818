//! Fuzzing with proptest: the batch decoder, the index loaders, checkpoint
//! parsing and whole-directory loading get arbitrary bytes and must answer
//! with a value or a typed error, never a panic.

mod common;

use std::fs;

use common::*;
use highwater::storage::batch::{self, check_batch, encode_batch, ProducerInfo, RecordBatch};
use highwater::storage::checkpoint;
use highwater::storage::offset_index::OffsetIndex;
use highwater::storage::time_index::TimeIndex;
use highwater::storage::{Error, LoadParams, Log};
use proptest::prelude::*;

/// Wraps arbitrary record bytes in a valid header and CRC, so the record
/// decoder itself is exercised.
fn framed(records: &[u8], count: i32, last_delta: i32, attributes: i16) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&7i64.to_be_bytes());
    b.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    b.extend_from_slice(&3i32.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&last_delta.to_be_bytes());
    b.extend_from_slice(&100i64.to_be_bytes());
    b.extend_from_slice(&200i64.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&count.to_be_bytes());
    b.extend_from_slice(records);
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn batch_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = check_batch(&bytes);
        for b in batch::batches(&bytes).flatten() {
            let _ = b.decode_records();
        }
    }

    #[test]
    fn record_decoder_never_panics(
        records in proptest::collection::vec(any::<u8>(), 0..300),
        count in -2i32..6,
        last_delta in -2i32..8,
        attributes in 0i16..8,
    ) {
        let b = framed(&records, count, last_delta, attributes);
        if let Ok(batch) = RecordBatch::new(&b) {
            match batch.decode_records() {
                Ok(recs) => {
                    prop_assert_eq!(recs.len() as i32, count);
                    for (o, _) in recs {
                        prop_assert!(o >= 7 && o <= batch.header.last_offset());
                    }
                }
                Err(e) => { let _ = e.to_string(); }
            }
        }
    }

    #[test]
    fn mutated_batches_are_caught(
        flips in proptest::collection::vec((0usize..1000, 0u8..8), 1..4),
        cut in proptest::option::of(0usize..1000),
    ) {
        let mut b = Vec::new();
        encode_batch(&mut b, 5, 1, ProducerInfo::NONE, &records_for(3)).unwrap();
        let original = b.clone();
        for (at, bit) in flips {
            let at = at % b.len();
            b[at] ^= 1 << bit;
        }
        if let Some(c) = cut { b.truncate(c % b.len()); }
        if check_batch(&b).is_ok() {
            // Only the fields outside the CRC can change unnoticed.
            prop_assert!(b.len() == original.len()
                && b.iter().zip(&original).enumerate().all(|(i, (x, y))| x == y || i < 16));
        }
    }

    #[test]
    fn index_loaders_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        base in 0u64..1_000_000,
        log_size in 0u64..100_000,
        next in proptest::option::of(0u64..2_000_000),
        target in any::<u64>(),
    ) {
        if let Ok(i) = OffsetIndex::parse(&bytes, base, 100, log_size, next) {
            for w in i.entries().windows(2) {
                prop_assert!(w[0].relative_offset < w[1].relative_offset && w[0].position < w[1].position);
            }
            prop_assert!(i.entries().iter().all(|e| u64::from(e.position) < log_size));
            let (o, _) = i.lookup(target);
            prop_assert!(o <= target.max(base));
        }
        if let Ok(t) = TimeIndex::parse(&bytes, base, 100, next) {
            for w in t.entries().windows(2) {
                prop_assert!(w[0].timestamp < w[1].timestamp);
            }
            let _ = t.lookup(target as i64);
        }
    }

    #[test]
    fn checkpoints_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("cp");
        fs::write(&p, &bytes).unwrap();
        for r in [checkpoint::read_offsets(&p).map(|_| ()), checkpoint::read_epochs(&p).map(|_| ())] {
            match r {
                Ok(()) | Err(Error::Checkpoint { .. }) => {}
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// A directory holding arbitrary bytes as a segment (and index) loads
    /// or fails with a typed error; what loads serves only valid batches.
    #[test]
    fn loading_arbitrary_segments_never_panics(
        log_bytes in proptest::collection::vec(any::<u8>(), 0..600),
        index_bytes in proptest::collection::vec(any::<u8>(), 0..40),
        prefix_valid in any::<bool>(),
        clean in any::<bool>(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        fs::create_dir_all(&dir).unwrap();
        let mut content = Vec::new();
        if prefix_valid {
            encode_batch(&mut content, 0, 0, ProducerInfo::NONE, &records_for(1)).unwrap();
        }
        content.extend_from_slice(&log_bytes);
        fs::write(dir.join("00000000000000000000.log"), &content).unwrap();
        fs::write(dir.join("00000000000000000000.index"), &index_bytes).unwrap();
        let params = LoadParams { clean_shutdown: clean, ..LoadParams::default() };
        match Log::open(&dir, small_config(), params) {
            Ok((log, _)) => {
                let got = read_all(&log, 0);
                prop_assert_eq!(got.len() as u64, log.log_end_offset());
            }
            Err(Error::RefusedToCut { .. }) => {
                // A leader epoch below -1 that the CRC does not cover:
                // Kafka keeps it, so it is refused, never cut.
            }
            Err(e) => {
                // Otherwise only data acknowledged as flushed may refuse to load.
                prop_assert!(matches!(e, Error::CorruptBelowRecoveryPoint { .. }), "{e}");
                prop_assert!(clean);
            }
        }
    }
}

#[test]
fn bad_file_names_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("12.log"), b"").unwrap();
    match Log::open(&dir, small_config(), LoadParams::default()) {
        Err(Error::BadFileName { path, .. }) => assert!(path.ends_with("12.log")),
        other => panic!("{other:?}"),
    }
    fs::remove_file(dir.join("12.log")).unwrap();
    fs::write(dir.join("00000000000000000000.log.swap"), b"").unwrap();
    assert!(matches!(
        Log::open(&dir, small_config(), LoadParams::default()),
        Err(Error::BadFileName { .. })
    ));
    fs::remove_file(dir.join("00000000000000000000.log.swap")).unwrap();
    // Stray work-in-progress files and orphan indexes are cleaned up.
    fs::write(dir.join("00000000000000000000.log.deleted"), b"x").unwrap();
    fs::write(dir.join("00000000000000000007.index"), b"").unwrap();
    let (_, report) = Log::open(&dir, small_config(), LoadParams::default()).unwrap();
    assert_eq!(report.repairs.len(), 2, "{report}");
    assert!(!dir.join("00000000000000000007.index").exists());
}

#[test]
fn high_watermark_beyond_the_log_end_is_clamped_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let (mut log, _) = Log::open(&dir, small_config(), LoadParams::default()).unwrap();
    fill(&mut log, 5);
    let leo = log.log_end_offset();
    log.close().unwrap();
    let params = LoadParams {
        recovery_point: leo,
        high_watermark: leo + 100,
        log_start_offset: 0,
        clean_shutdown: true,
    };
    let (log, report) = Log::open(&dir, small_config(), params).unwrap();
    assert_eq!(log.high_watermark(), leo);
    assert!(report.repairs.iter().any(|r| r.contains("high watermark")));
}
