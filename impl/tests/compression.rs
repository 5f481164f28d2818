//! Compressed batches on real files: every `compression.type` written,
//! recovered and read back; producer batches re-encoded between every pair
//! of codecs; replicated batches kept byte for byte; timestamp lookups
//! inside compressed batches.

mod common;

use common::*;
use highwater::storage::batch::{encode_batch_with, BatchOptions, ProducerInfo, RecordBatch};
use highwater::storage::{Codec, CompressionType, LoadParams, Log, LogConfig};

fn config(c: CompressionType) -> LogConfig {
    LogConfig {
        compression_type: c,
        ..small_config()
    }
}

#[test]
fn every_codec_is_written_recovered_and_read_back() {
    for codec in Codec::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        let c = config(CompressionType::Codec(codec));
        let (mut log, _) = open(&dir, c.clone(), LoadParams::default());
        let expected = fill(&mut log, 80);
        let data = log.reader().read(0, 1 << 20, u64::MAX).unwrap();
        for b in data.batches() {
            assert_eq!(b.header.codec(), Some(codec));
        }
        assert_eq!(read_all(&log, 0), expected, "{codec}");
        // Timestamp lookups see inside compressed batches.
        for (o, r) in expected.iter().step_by(7) {
            let t = log
                .reader()
                .offset_for_timestamp(r.timestamp)
                .unwrap()
                .unwrap();
            assert!(t.offset <= *o && t.timestamp >= r.timestamp, "{codec}");
        }
        drop(log);
        let (log, report) = Log::open(&dir, c, LoadParams::default()).unwrap();
        assert_eq!(report.problem, None);
        assert_eq!(read_all(&log, 0), expected, "{codec} after recovery");
    }
}

#[test]
fn producer_batches_are_reencoded_as_compression_type_says() {
    let recs = records_for(3);
    for source in Codec::ALL {
        let options = BatchOptions {
            codec: source,
            producer: ProducerInfo {
                producer_id: 9,
                producer_epoch: 1,
                base_sequence: 4,
            },
            transactional: true,
            log_append_time: Some(77),
            ..BatchOptions::PLAIN
        };
        let mut batch = Vec::new();
        encode_batch_with(&mut batch, 0, -1, &options, &recs).unwrap();
        let want: Vec<_> = RecordBatch::new(&batch).unwrap().decode_records().unwrap();
        let mut types = vec![CompressionType::Producer];
        types.extend(Codec::ALL.map(CompressionType::Codec));
        for ct in types {
            let tmp = tempfile::tempdir().unwrap();
            let (mut log, _) = open(&tmp.path().join("t-0"), config(ct), LoadParams::default());
            log.append(&records_for(1), 0).unwrap();
            let mut b = batch.clone();
            let info = log.append_batch(&mut b, 3).unwrap();
            let data = log
                .reader()
                .read(info.first_offset, 1 << 20, u64::MAX)
                .unwrap();
            let stored = data.batches().next().unwrap();
            assert_eq!(
                stored.header.codec(),
                Some(ct.target(source)),
                "{source} -> {ct:?}"
            );
            if ct.target(source) == source {
                assert_eq!(&stored.as_bytes()[21..], &batch[21..], "kept as sent");
            }
            let h = stored.header;
            assert_eq!(h.producer(), options.producer);
            assert!(h.is_transactional() && h.is_log_append_time());
            assert_eq!((h.partition_leader_epoch, h.max_timestamp), (3, 77));
            let got: Vec<_> = stored.decode_records().unwrap();
            let shifted: Vec<_> = want
                .iter()
                .map(|(o, r)| (o + info.first_offset, r.clone()))
                .collect();
            assert_eq!(got, shifted, "{source} -> {ct:?}");
        }
    }
}

#[test]
fn replicated_compressed_batches_are_kept_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut leader, _) = open(
        &tmp.path().join("l-0"),
        config(CompressionType::Codec(Codec::Zstd)),
        LoadParams::default(),
    );
    fill(&mut leader, 20);
    // The follower's own compression.type does not touch what it fetches.
    let (mut follower, _) = open(
        &tmp.path().join("f-0"),
        config(CompressionType::Codec(Codec::Gzip)),
        LoadParams::default(),
    );
    let mut from = 0;
    while from < leader.log_end_offset() {
        let data = leader.read(from, 1 << 20, u64::MAX).unwrap();
        follower.append_replicated(&data.records).unwrap();
        from = data.next_offset;
    }
    let a = leader.read(0, 1 << 30, u64::MAX).unwrap().records;
    let b = follower.read(0, 1 << 30, u64::MAX).unwrap().records;
    assert_eq!(a, b);
}
