//! Per-log configuration, named after Kafka's topic configs.

use super::compression::Codec;
use super::error::{Error, Result};
use super::mutation::Mutation;

/// `compression.type`: how the log stores what producers send (Kafka's
/// `BrokerCompressionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompressionType {
    /// Keep each producer batch as it came (`producer`, Kafka's default);
    /// records appended through [`Log::append`](super::Log::append) are
    /// stored uncompressed.
    #[default]
    Producer,
    /// Store every batch with this codec (`uncompressed`, `gzip`,
    /// `snappy`, `lz4`, `zstd`), re-encoding producer batches of another
    /// codec, as Kafka's `LogValidator` does.
    Codec(Codec),
}

impl CompressionType {
    /// Parses Kafka's names: `producer`, `uncompressed`, `gzip`, `snappy`,
    /// `lz4`, `zstd`.
    pub fn parse(name: &str) -> Option<CompressionType> {
        Some(match name {
            "producer" => CompressionType::Producer,
            "uncompressed" => CompressionType::Codec(Codec::None),
            other => CompressionType::Codec(
                Codec::ALL
                    .into_iter()
                    .find(|c| c.id() != 0 && c.name() == other)?,
            ),
        })
    }

    /// The codec a batch written with `producer_codec` is stored with.
    pub fn target(self, producer_codec: Codec) -> Codec {
        match self {
            CompressionType::Producer => producer_codec,
            CompressionType::Codec(c) => c,
        }
    }
}

/// Configuration of one partition log. Field names follow Kafka's topic
/// configs (`segment.bytes` is `segment_bytes`, and so on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll to a new segment before the active one would
    /// grow past this. Default 1 GiB; at most `i32::MAX` because index
    /// positions are 32-bit.
    pub segment_bytes: u32,
    /// `index.interval.bytes`: bytes between offset index entries.
    /// Default 4096.
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`: the largest an index may grow; a full index
    /// rolls the segment. Default 10 MiB.
    pub segment_index_bytes: u32,
    /// `retention.bytes`: delete old segments while the log is larger than
    /// this. `None` (Kafka's -1, the default) keeps any size.
    pub retention_bytes: Option<u64>,
    /// `retention.ms`: delete segments whose newest record is older than
    /// this. Default 7 days; `None` (Kafka's -1) keeps any age.
    pub retention_ms: Option<i64>,
    /// Whether recovery may cut corrupt data below the recovery point
    /// (data once acknowledged as flushed), and data Kafka's loader would
    /// keep (a gap between segments, a leader epoch below -1). Kafka cuts
    /// the first silently and keeps the second; this implementation refuses
    /// both by default ([`Error::CorruptBelowRecoveryPoint`],
    /// [`Error::RefusedToCut`]), so the loss is a decision an operator
    /// takes, not a surprise.
    pub truncate_below_recovery_point: bool,
    /// `compression.type`: default `producer`.
    pub compression_type: CompressionType,
    /// A fixed bug put back, for mutation tests only; `None` (the default)
    /// everywhere else.
    pub mutation: Option<Mutation>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 << 20,
            retention_bytes: None,
            retention_ms: Some(7 * 24 * 60 * 60 * 1000),
            truncate_below_recovery_point: false,
            compression_type: CompressionType::Producer,
            mutation: None,
        }
    }
}

impl LogConfig {
    /// Checks ranges as Kafka's `LogConfig` does.
    pub fn validate(&self) -> Result<()> {
        if self.segment_bytes < 14 || self.segment_bytes > i32::MAX as u32 {
            return Err(Error::InvalidConfig(format!(
                "segment.bytes {} is outside [14, {}]",
                self.segment_bytes,
                i32::MAX
            )));
        }
        if self.segment_index_bytes < 24 || self.segment_index_bytes > i32::MAX as u32 {
            return Err(Error::InvalidConfig(format!(
                "segment.index.bytes {} is outside [24, {}]",
                self.segment_index_bytes,
                i32::MAX
            )));
        }
        if self.index_interval_bytes > i32::MAX as u32 {
            return Err(Error::InvalidConfig(format!(
                "index.interval.bytes {} is too large",
                self.index_interval_bytes
            )));
        }
        if matches!(self.retention_ms, Some(ms) if ms < 0) {
            return Err(Error::InvalidConfig(
                "retention.ms must be non-negative (None means unlimited)".into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn max_index_entries(&self) -> usize {
        self.segment_index_bytes as usize / super::offset_index::ENTRY_SIZE
    }

    pub(crate) fn max_time_index_entries(&self) -> usize {
        self.segment_index_bytes as usize / super::time_index::ENTRY_SIZE
    }
}
