//! Storage: one partition's log in Kafka's on-disk format.

pub mod batch;
pub mod error;
mod varint;

pub use batch::{BatchHeader, Header, ProducerInfo, Record, RecordBatch};
pub use error::{BatchError, Error, Result};
