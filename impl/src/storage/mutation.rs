//! Fixed storage bugs, kept so that the checks that would find them can be
//! shown to (see `conformance/tests/disk_mutation.rs`). Each names the
//! finding (of issue 10, unless it says otherwise) it puts back. Production code never sets one:
//! [`LogConfig::mutation`](super::LogConfig::mutation) is `None` by default.

/// A fixed bug of the storage layer, put back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// Finding 1: `Log::truncate_to` cuts (and syncs) the segment holding
    /// the target before it deletes the later segments, and loading takes
    /// a trusted segment's end from the next segment's base offset. A kill
    /// between the cut and the deletions leaves a hole that opens without
    /// complaint (or, above the recovery point, a log that will not open).
    HoleAfterTruncation,
    /// Finding 3: recovery refuses a batch whose leader epoch is below the
    /// previous batch's ("leader epoch 1 after epoch 2"), though appends
    /// take such batches as Kafka does.
    RefuseDescendingEpochs,
    /// Finding 4: recovery checks each batch's leader epoch against the
    /// `leader-epoch-checkpoint` (which has no checksum) and cuts, or
    /// refuses to open, where they differ, instead of rebuilding the cache
    /// from the batches.
    TrustEpochCheckpoint,
    /// Issue 9, item 5: every write of the recovery-point or log-start
    /// checkpoint (a flush's, a truncation's, a restart's) also writes the
    /// live HW to `replication-offset-checkpoint`, so with a periodic HW
    /// checkpoint a crash finds a newer HW than the last checkpointed one.
    HwWithEveryCheckpoint,
    /// Issue 24, item 2: recovery rebuilds each segment's time index in
    /// memory but leaves its `.timeindex` file empty, so after the next
    /// clean restart every trusted segment's largest timestamp is unknown
    /// and timestamp lookups skip whole segments.
    EmptyTimeIndexAfterRecovery,
}
