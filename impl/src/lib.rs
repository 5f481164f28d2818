//! The reference implementation: storage, replication and cluster drivers.
//!
//! [`storage`] keeps one partition's log in Kafka's own on-disk format; see
//! its module documentation for the layout, the recovery rules and the
//! concurrency contract.

#![forbid(unsafe_code)]

pub mod cluster;
pub mod replication;
pub mod storage;
pub(crate) mod sync;
