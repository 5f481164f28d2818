//! Storage: one partition's log in Kafka's on-disk format.
//!
//! A partition directory `<topic>-<partition>/` holds segments named by
//! their base offset in 20 digits: `<base>.log` (record batches, magic v2,
//! CRC-32C; [`batch`]), `<base>.index` ([`offset_index`]) and
//! `<base>.timeindex` ([`time_index`]), plus the partition's
//! `leader-epoch-checkpoint` ([`epoch_cache`]). The log directory above it
//! holds the broker-level checkpoints and the clean-shutdown marker
//! ([`LogDir`]); every checkpoint is a Kafka text checkpoint
//! ([`checkpoint`]).
//!
//! - [`Log`] is the one writer of a partition log: append, roll, flush,
//!   truncate, retention ([`retention`]), the leader epoch cache. Opening
//!   it loads and, after an unclean shutdown, recovers the directory
//!   ([`recovery`], which reports what it did in a [`RecoveryReport`]).
//! - [`LogReader`] is a cheap, cloneable read handle: reads of whole
//!   checked batches, offset and timestamp lookups, waiting for new data.
//!   Readers never see past the published log end offset; what the writer
//!   and readers share about progress is in `publish.rs`, small enough for
//!   loom to check.
//!
//! Every malformed input gives a typed [`Error`] naming the file and byte
//! position, or a repair recorded in the [`RecoveryReport`]; nothing here
//! panics on file contents.
//!
//! # Where this differs from Kafka, and why
//!
//! The bytes on disk are Kafka's; some rules are stricter:
//! - Index files are never preallocated: a file is exactly its entries, so
//!   a crash cannot leave zero-filled slots that look like entries (Kafka
//!   derives the entry count from the length, so it reads ours). The zero
//!   tail Kafka leaves in its active segment's indexes is read as room, not
//!   entries ([`offset_index::preallocated_slots`]).
//! - Recovery refuses to cut data below the recovery point (data once
//!   acknowledged as flushed) unless configured to
//!   ([`LogConfig::truncate_below_recovery_point`]); Kafka cuts silently.
//! - Recovery also requires offsets to be contiguous (no compaction here)
//!   and leader epochs of -1 or more. What breaks these but Kafka's loader
//!   keeps (a gap between segments, an epoch below -1) is refused, never
//!   cut; a batch whose base offset does not follow (a torn write of a
//!   field outside the CRC) is cut above the recovery point, as a corrupt
//!   batch is. `spec/differences.md` lists each rule with its case.
//! - The `leader-epoch-checkpoint` never decides what is kept: its entries
//!   are checked against the batches and rebuilt from them if one differs.
//! - Reads check every batch's CRC before serving it, and that offsets
//!   follow one another wherever they walk a segment; an offset index entry
//!   naming the wrong batch is worked around and reported
//!   ([`LogReader::index_notes`]).
//! - A roll syncs the old segment before the new one gets data; truncation
//!   deletes later segments (newest first) before it cuts, and is fsynced
//!   before it returns, as segment deletion is: a crash never leaves a gap,
//!   and cut data cannot come back.
//! - Transactions' indexes (`.txnindex`), producer snapshots and
//!   compaction are not implemented. Compressed batches (Kafka's four
//!   codecs, [`compression`]) are read everywhere and written as
//!   `compression.type` asks ([`LogConfig::compression_type`]).
//!
//! ```
//! use highwater::storage::{Log, LogConfig, LoadParams, Record};
//! let dir = tempfile::tempdir().unwrap();
//! let (mut log, _report) =
//!     Log::open(&dir.path().join("orders-0"), LogConfig::default(), LoadParams::default()).unwrap();
//! let info = log.append(&[Record::new(1_700_000_000_000, "hello")], 0).unwrap();
//! assert_eq!((info.first_offset, log.log_end_offset()), (0, 1));
//! log.flush(log.log_end_offset()).unwrap();
//! let data = log.reader().read(0, 1 << 20, u64::MAX).unwrap();
//! let batch = data.batches().next().unwrap();
//! assert_eq!(batch.decode_records().unwrap()[0].1.value.as_deref(), Some(&b"hello"[..]));
//! ```

pub mod batch;
pub mod checkpoint;
pub mod compression;
pub mod config;
pub mod epoch_cache;
pub mod error;
pub mod fs;
pub mod image;
pub mod log;
pub mod log_dir;
pub mod mutation;
pub mod offset_index;
mod publish;
pub mod recovery;
pub mod retention;
pub(crate) mod segment;
pub mod time_index;
pub mod topic_partition;
mod varint;

pub use batch::{BatchHeader, BatchOptions, Header, ProducerInfo, Record, RecordBatch};
pub use compression::Codec;
pub use config::CompressionType;
pub use config::LogConfig;
pub use epoch_cache::{EpochCache, EpochEndOffset};
pub use error::{BatchError, Error, Result};
pub use log::{
    AppendInfo, FetchData, Log, LogReader, OffsetPosition, SegmentInfo, TimestampAndOffset,
};
pub use log_dir::{LogDir, PartitionCheckpoints};
pub use mutation::Mutation;
pub use recovery::{
    check_segment, segment_bases, IndexCheck, LoadParams, RecoveryReport, ScanProblem, SegmentCheck,
};
pub use retention::RetentionReport;
pub use segment::{file_name, parse_base_offset};
pub use topic_partition::TopicPartition;
