//! Storage: one partition's log in Kafka's on-disk format.

pub mod batch;
pub mod checkpoint;
pub mod epoch_cache;
pub mod error;
pub mod offset_index;
pub mod time_index;
pub mod topic_partition;
mod varint;

pub use batch::{BatchHeader, Header, ProducerInfo, Record, RecordBatch};
pub use epoch_cache::{EpochCache, EpochEndOffset};
pub use error::{BatchError, Error, Result};
pub use topic_partition::TopicPartition;
