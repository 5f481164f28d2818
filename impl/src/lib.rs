//! The reference implementation: storage, replication and cluster drivers.
