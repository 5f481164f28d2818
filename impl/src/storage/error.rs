//! Typed errors of the storage layer.
//!
//! Every error that concerns a file names the file, and every error that
//! concerns bytes inside a file names the byte position, so an operator can
//! go straight to the damage with `highwater-dump-log`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why a byte string is not a valid record batch (magic v2).
///
/// These carry no path: the codec works on bytes. [`Error`] adds the file
/// and position when the bytes came from disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// Fewer bytes than a batch header (61) or than the batch claims.
    Truncated { needed: u64, available: u64 },
    /// `batchLength` too small to hold a header, or negative.
    BadLength { length: i32 },
    /// The magic byte is not 2 (older formats are not supported).
    BadMagic { magic: i8 },
    /// The stored CRC-32C does not match the bytes it covers.
    CrcMismatch { stored: u32, computed: u32 },
    /// The base offset is negative.
    NegativeOffset { base_offset: i64 },
    /// `lastOffsetDelta` or `recordsCount` is negative or inconsistent.
    BadCounts {
        last_offset_delta: i32,
        records_count: i32,
    },
    /// The compression codec id (attributes bits 0-2) is not one of Kafka's.
    UnknownCodec { codec: u8 },
    /// The compressed records do not decompress.
    BadCompression { codec: u8, reason: String },
    /// Re-encoding a batch with another codec failed.
    Compression { reason: String },
    /// A record inside the batch does not parse.
    BadRecord { index: u32, reason: String },
    /// An append was given no records.
    Empty,
    /// A leader epoch below -1 ("no epoch").
    NegativeEpoch { epoch: i32 },
    /// The batch would be larger than a segment can address.
    TooLarge { size: u64 },
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Truncated { needed, available } => {
                write!(f, "truncated batch: needs {needed} bytes, {available} available")
            }
            BatchError::BadLength { length } => write!(f, "invalid batch length {length}"),
            BatchError::BadMagic { magic } => {
                write!(f, "unsupported magic {magic} (only magic 2 is supported)")
            }
            BatchError::CrcMismatch { stored, computed } => write!(
                f,
                "CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
            BatchError::NegativeOffset { base_offset } => {
                write!(f, "negative base offset {base_offset}")
            }
            BatchError::BadCounts {
                last_offset_delta,
                records_count,
            } => write!(
                f,
                "inconsistent counts: lastOffsetDelta {last_offset_delta}, recordsCount {records_count}"
            ),
            BatchError::UnknownCodec { codec } => {
                write!(f, "unknown compression codec id {codec}")
            }
            BatchError::BadCompression { codec, reason } => write!(
                f,
                "{} records do not decompress: {reason}",
                codec_name(*codec)
            ),
            BatchError::Compression { reason } => write!(f, "compression failed: {reason}"),
            BatchError::BadRecord { index, reason } => {
                write!(f, "record {index} is malformed: {reason}")
            }
            BatchError::Empty => write!(f, "a batch needs at least one record"),
            BatchError::NegativeEpoch { epoch } => {
                write!(f, "leader epoch {epoch} is below -1 (which means none)")
            }
            BatchError::TooLarge { size } => write!(f, "batch of {size} bytes is too large"),
        }
    }
}

impl std::error::Error for BatchError {}

/// The name Kafka gives a compression codec id (attributes bits 0-2).
pub fn codec_name(codec: u8) -> &'static str {
    super::compression::Codec::from_id(codec).map_or("unknown codec", |c| c.name())
}

/// Errors of the storage layer.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An I/O operation on `path` failed.
    Io {
        path: PathBuf,
        op: &'static str,
        source: io::Error,
    },
    /// A record batch in a file is invalid.
    CorruptBatch {
        path: PathBuf,
        position: u64,
        source: BatchError,
    },
    /// Offsets in a file go backwards, leave a gap or overflow the segment.
    BadOffsets {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    /// Recovery would have to cut data below the recovery point: data that
    /// was acknowledged as flushed. The log refuses to open rather than lose
    /// it silently; see [`LogConfig::truncate_below_recovery_point`].
    ///
    /// [`LogConfig::truncate_below_recovery_point`]: crate::storage::LogConfig::truncate_below_recovery_point
    CorruptBelowRecoveryPoint {
        path: PathBuf,
        position: u64,
        offset: u64,
        recovery_point: u64,
        reason: String,
    },
    /// Recovery would have to cut batches that Kafka's log loader keeps (a
    /// gap between segments, a leader epoch below -1): the log refuses to
    /// open rather than discard them; see
    /// [`LogConfig::truncate_below_recovery_point`].
    ///
    /// [`LogConfig::truncate_below_recovery_point`]: crate::storage::LogConfig::truncate_below_recovery_point
    RefusedToCut {
        path: PathBuf,
        position: u64,
        offset: u64,
        reason: String,
    },
    /// An index file does not match its log (reported by verification;
    /// loading rebuilds such indexes instead).
    CorruptIndex { path: PathBuf, reason: String },
    /// A checkpoint file does not parse.
    Checkpoint {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    /// A file name in a partition directory that should name an offset
    /// but does not, or a name this implementation does not handle.
    BadFileName { path: PathBuf, reason: String },
    /// A partition directory name is not `<topic>-<partition>`, or a topic
    /// name is not one Kafka allows.
    BadTopicPartition { name: String, reason: String },
    /// A record batch given to an append is invalid.
    InvalidBatch(BatchError),
    /// An append whose offsets do not follow the log end offset.
    NonMonotonicAppend { expected: u64, got: u64 },
    /// An offset outside `[log start offset, log end offset]`.
    OffsetOutOfRange {
        offset: u64,
        log_start_offset: u64,
        log_end_offset: u64,
    },
    /// A high watermark above the log end offset.
    HighWatermarkBeyondLeo {
        high_watermark: u64,
        log_end_offset: u64,
    },
    /// A configuration value out of range.
    InvalidConfig(String),
}

impl Error {
    /// An I/O error on `path` during `op`.
    pub fn io(path: &Path, op: &'static str, source: io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    }

    pub(crate) fn corrupt(path: &Path, position: u64, source: BatchError) -> Error {
        Error::CorruptBatch {
            path: path.to_path_buf(),
            position,
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, op, source } => {
                write!(f, "{}: {op} failed: {source}", path.display())
            }
            Error::CorruptBatch {
                path,
                position,
                source,
            } => write!(
                f,
                "{}: corrupt batch at byte {position}: {source}",
                path.display()
            ),
            Error::BadOffsets {
                path,
                position,
                reason,
            } => write!(
                f,
                "{}: bad offsets at byte {position}: {reason}",
                path.display()
            ),
            Error::CorruptBelowRecoveryPoint {
                path,
                position,
                offset,
                recovery_point,
                reason,
            } => write!(
                f,
                "{}: invalid data at byte {position} (offset {offset}) is below the recovery point \
                 {recovery_point}; refusing to truncate flushed data: {reason}",
                path.display()
            ),
            Error::RefusedToCut {
                path,
                position,
                offset,
                reason,
            } => write!(
                f,
                "{}: {reason} (byte {position}, offset {offset}); Kafka's loader keeps this data, \
                 so recovery refuses to cut it",
                path.display()
            ),
            Error::CorruptIndex { path, reason } => {
                write!(f, "{}: corrupt index: {reason}", path.display())
            }
            Error::Checkpoint { path, line, reason } => {
                write!(f, "{}: line {line}: {reason}", path.display())
            }
            Error::BadFileName { path, reason } => write!(f, "{}: {reason}", path.display()),
            Error::BadTopicPartition { name, reason } => {
                write!(f, "invalid topic-partition {name:?}: {reason}")
            }
            Error::InvalidBatch(e) => write!(f, "invalid batch: {e}"),
            Error::NonMonotonicAppend { expected, got } => write!(
                f,
                "append at offset {got} does not follow the log end offset {expected}"
            ),
            Error::OffsetOutOfRange {
                offset,
                log_start_offset,
                log_end_offset,
            } => write!(
                f,
                "offset {offset} is out of range [{log_start_offset}, {log_end_offset}]"
            ),
            Error::HighWatermarkBeyondLeo {
                high_watermark,
                log_end_offset,
            } => write!(
                f,
                "high watermark {high_watermark} is beyond the log end offset {log_end_offset}"
            ),
            Error::InvalidConfig(s) => write!(f, "invalid configuration: {s}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::CorruptBatch { source, .. } => Some(source),
            Error::InvalidBatch(e) => Some(e),
            _ => None,
        }
    }
}

/// The storage layer's result type.
pub type Result<T> = std::result::Result<T, Error>;
