//! Today's rules, one entry per guard or effect clause of the model's
//! actions (`actions.rs`), controller (`controller.rs`) and truncation on
//! fetch (`truncation.rs`), each with a knock-out: [`Config::knock_out`]
//! drops the rule, or moves a bound of it by one, so that a test can show
//! which property needs it (`model/tests/rules.rs`, which names for each
//! the configuration and the property that breaks). A rule no property
//! needs at any bound checked is explained in `spec/differences.md`.
//!
//! Knock-outs are test switches, not rules anyone ran: `highwater check
//! --knock-out <rule>` runs one. A few rules were knocked out by a
//! [`Mutation`] before this list existed; those keep their mutation
//! ([`Rule::mutation`]), and `Config::knock_out` refuses them.
//!
//! Not listed: the bounds (records, epochs, crashes, leader moves), and
//! what the model forgets to keep its state space small
//! (`forget_what_no_longer_matters`, `controller::fence_matters`), which
//! are argued in `spec/differences.md` rather than knocked out; and rules
//! of the historical modes only (the OffsetsForLeaderEpoch exchange and
//! `follow_enabled`, which `on-fetch` never runs).

use crate::config::{Config, Mutation};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One guard or effect clause of today's rules. Each variant's first line
/// says what the rule does, the second what its knock-out does instead.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    // --- The controller (`PartitionChangeBuilder`, `ReplicationControlManager`)
    /// ControllerElectLeader picks a live replica (`controller::election_kind`;
    /// Kafka: `PartitionChangeBuilder.isAcceptableLeader`, which is
    /// `ClusterControlManager.isActive`). Knocked out: a down broker the controller still counts as acceptable
    /// (in the ISR, death unnoticed) may be elected, as Kafka may before its
    /// session times out.
    ElectLiveReplica,
    /// A clean election picks an ISR member (`PartitionChangeBuilder.isValidNewLeader`).
    /// Knocked out: any acceptable replica is a valid new leader.
    CleanLeaderFromIsr,
    /// An ELR member is a valid leader only while the ISR is empty
    /// (`PartitionChangeBuilder.isValidNewLeader`).
    /// Knocked out: ELR members are valid leaders beside the ISR.
    ElrLeaderOnlyWithEmptyIsr,
    /// A change keeps a leader that is still valid (`PartitionChangeBuilder.electAnyLeader`,
    /// `electPreferredLeader`: "the current leader meets all the constraints").
    /// Knocked out: a change that elects no one else leaves the partition leaderless.
    KeepValidLeader,
    /// While the ISR is empty the controller elects from the ELR (KIP-966,
    /// `PartitionChangeBuilder.electAnyLeader` through `isValidNewLeader`).
    /// Knocked out by `--mutation no-elr-election`.
    ElrElection,
    /// A leader elected from the ELR becomes the ISR alone and leaves the ELR
    /// (`PartitionChangeBuilder.tryElection`).
    /// Knocked out: the ISR stays empty and the leader stays in the ELR.
    ElrLeaderBecomesIsr,
    /// With ISR and ELR empty, the last known leader is elected
    /// (`PartitionChangeBuilder.canElectLastKnownLeader`).
    /// Knocked out: it never is (the controller still remembers it).
    LastKnownLeaderElection,
    /// The last known leader is elected only while the ELR is empty
    /// (`canElectLastKnownLeader`: `targetElr.isEmpty()`).
    /// Knocked out: also while the ELR holds replicas that are down.
    LastKnownLeaderWaitsForElr,
    /// The last known leader must be an acceptable leader
    /// (`canElectLastKnownLeader`, `isAcceptableLeader`).
    /// Knocked out: a fenced last known leader may be elected too.
    LastKnownLeaderAcceptable,
    /// An unclean (last-known-leader) election makes the ISR the leader alone
    /// (`PartitionChangeBuilder.tryElection`: "forcibly set the ISR").
    /// Knocked out: the ISR is left as it was (empty).
    UncleanLeaderBecomesIsr,
    /// An unclean (last-known-leader) election makes the partition RECOVERING
    /// (`tryElection`, KIP-704) until the leader's next AlterPartition.
    /// Knocked out: it stays RECOVERED.
    UncleanElectionRecovering,
    /// An unclean (last-known-leader) election empties the ELR
    /// (`PartitionChangeBuilder.maybeUpdateRecordElr`).
    /// Knocked out: the ELR is kept.
    UncleanElectionEmptiesElr,
    /// Below min.insync.replicas every replica leaving the ISR enters the ELR
    /// (`PartitionChangeBuilder.maybePopulateTargetElr`).
    /// Knocked out: no replica enters the ELR.
    LeavingIsrEntersElr,
    /// An ISR at min.insync.replicas or more empties the ELR
    /// (`maybePopulateTargetElr`: `targetIsr.size() >= minISR`).
    /// Knocked out: the ELR keeps its members (less those back in the ISR).
    ElrEmptiesAtMinIsr,
    /// The boundary of the rule above: an ISR of exactly min.insync.replicas
    /// empties the ELR. Knocked out: it takes one more (at exactly
    /// min.insync.replicas, replicas leaving the ISR enter the ELR).
    ElrEmptiesAtExactlyMinIsr,
    /// A broker re-registering after an unclean shutdown leaves the ELR and
    /// may not enter it (KIP-966; `ReplicationControlManager.handleBrokerShutdown`,
    /// `setUncleanShutdownReplicas`).
    /// Knocked out: it is handled as after a clean shutdown.
    UncleanShutdownLeavesElr,
    /// A restarted broker leaves the ISR: it registers fenced
    /// (`ReplicationControlManager.handleBrokerShutdown`).
    /// Knocked out: it stays in the ISR.
    RestartLeavesIsr,
    /// When a change leaves a led partition leaderless the controller remembers
    /// its leader (`PartitionChangeBuilder.maybeUpdateLastKnownLeader`).
    /// Knocked out: it remembers no one.
    LastLeaderRemembered,
    /// An election forgets the last known leader (`maybeUpdateLastKnownLeader`).
    /// Knocked out: it is kept.
    LastLeaderForgotten,
    /// A live broker the controller fenced is no acceptable leader nor ISR
    /// member (`ClusterControlManager.isActive`).
    /// Knocked out by `--mutation fenced-still-acceptable`.
    FencedNotAcceptable,
    /// The controller refuses an ISR naming a fenced broker (KIP-841,
    /// `ReplicationControlManager.validateAlterPartitionData`).
    /// Knocked out: it takes it.
    AlterPartitionRefusesFenced,
    /// A broker whose death the controller has not noticed (the leader it
    /// names, an ISR member) still counts as acceptable (`controller::unfenced`;
    /// Kafka fences it only when its session times out,
    /// `ReplicationControlManager.maybeFenceOneStaleBroker`, `handleBrokerFenced`).
    /// Knocked out: a down broker never counts.
    DeathNoticedByRemovalOnly,

    // --- LeaderAndIsr ---------------------------------------------------------
    /// A replica takes a LeaderAndIsr only of a newer epoch than its own
    /// (`Partition.makeLeader`/`makeFollower`, `ReplicaManager.becomeLeaderOrFollower`).
    /// Knocked out: also of an older one.
    TakesOnlyNewerEpoch,
    /// A restarted replica takes the current epoch's LeaderAndIsr again: it
    /// has no state for the partition yet (a new `Partition` starts at leader
    /// epoch -1, so `Partition.makeFollower`/`makeLeader` see a newer epoch).
    /// Knocked out: it waits for a newer epoch.
    RestartedTakesCurrentEpoch,
    /// A new leader forgets its followers' states from any earlier leadership
    /// (`Partition.makeLeader`, `Replica.resetReplicaState`).
    /// Knocked out: it keeps the LEOs it knew.
    NewLeaderForgetsFollowers,
    /// A replica that follows forgets its leadership state (`Partition.makeFollower`).
    /// Knocked out: it keeps it.
    FollowerForgetsLeadership,

    // --- Produce --------------------------------------------------------------
    /// An acks=all write is refused while the leader's ISR is below
    /// min.insync.replicas (`Partition.appendRecordsToLeader`, NotEnoughReplicas).
    /// Knocked out: it is appended.
    ProduceNeedsMinIsr,
    /// The boundary of the rule above: an ISR of exactly min.insync.replicas
    /// takes the write. Knocked out: it takes one more.
    ProduceAtExactlyMinIsr,

    // --- Fetch ----------------------------------------------------------------
    /// A follower fetches only from a leader in its own epoch (KIP-320:
    /// `Partition.localLogWithEpochOrThrow`, FENCED_LEADER_EPOCH).
    /// Knocked out: from a leader in any epoch.
    FetchFromLeaderEpoch,
    /// A follower fetches only from a replica that leads
    /// (`Partition.localLogWithEpochOrThrow`, NOT_LEADER_OR_FOLLOWER).
    /// Knocked out: from any live replica it believes leads.
    FetchFromLeader,
    /// The leader checks the fetch's last fetched epoch for a divergence
    /// (`Partition.readRecords`).
    /// Knocked out by `--mutation no-last-fetched-epoch`.
    LastFetchedEpochChecked,
    /// A diverging follower truncates to the end of its own epoch at or below
    /// the leader's, capped by the leader's end offset
    /// (`AbstractFetcherThread.getOffsetTruncationState`).
    /// Knocked out: to the leader's end offset.
    DivergenceTruncatesToOwnEnd,
    /// The leader's epoch cache holds its own epoch from where it began
    /// leading (`Partition.makeLeader`, `UnifiedLog.maybeAssignEpochStartOffset`).
    /// Knocked out: only the epochs of its records.
    LeaderCachesOwnEpoch,
    /// An epoch the leader knows no end for is answered OffsetOutOfRange
    /// (`AbstractFetcherThread.handleOutOfRangeError`).
    /// Knocked out: the fetch copies as if the logs agreed.
    UnknownEpochOutOfRange,
    /// A follower ahead of its leader truncates to the leader's LEO
    /// (OffsetOutOfRange, `AbstractFetcherThread.fetchOffsetAndTruncate`).
    /// Knocked out: it copies nothing and keeps its log.
    AheadOfLeaderTruncates,
    /// The leader learns the follower's LEO from the fetch offset, before the
    /// response's records are appended (`Partition.updateFollowerFetchState`).
    /// Knocked out: it learns the LEO after the append.
    LeaderLearnsFetchOffset,
    /// A follower's HW is the leader's, within its own log
    /// (`ReplicaFetcherThread.processPartitionData`, `UnifiedLog.updateHighWatermark`).
    /// Knocked out: the leader's, even above its LEO.
    FollowerHwWithinLog,
    /// A fetch from the follower's current incarnation clears KIP-903's stale
    /// mark (`Replica.updateFetchStateOrThrow`, the broker epoch).
    /// Knocked out: the mark stays.
    FetchClearsStale,

    // --- High watermark -------------------------------------------------------
    /// The HW does not move while the leader's ISR is below min.insync.replicas
    /// (`Partition.maybeIncrementLeaderHW`, `isUnderMinIsr`, KAFKA-15583).
    /// Knocked out: it moves with any ISR.
    HwWaitsForMinIsr,
    /// The boundary of the rule above: an ISR of exactly min.insync.replicas
    /// moves the HW. Knocked out: it takes one more.
    HwAtExactlyMinIsr,
    /// The HW is the lowest LEO over the ISR (`maybeIncrementLeaderHW`).
    /// Knocked out: the leader's LEO.
    HwOverIsr,
    /// An ISR member whose LEO the leader does not know yet holds the HW
    /// (`Replica.resetReplicaState`: an unknown offset).
    /// Knocked out: it is skipped.
    HwWaitsForUnknownMember,
    /// The HW also waits for a caught-up follower outside the ISR
    /// (`shouldWaitForReplicaToJoinIsr`).
    /// Knocked out by `--mutation hw-over-isr-only`.
    HwWaitsForCaughtUpFollower,
    /// A follower whose last fetch is from a crashed incarnation is not waited
    /// for (`isReplicaIsrEligible`). Knocked out: it is.
    HwSkipsStaleFollower,
    /// An acks=all write is acknowledged only while the ISR has
    /// min.insync.replicas (`Partition.checkEnoughReplicasReachOffset`,
    /// NotEnoughReplicasAfterAppend). Knocked out: always.
    AckNeedsMinIsr,

    // --- ISR changes by the leader --------------------------------------------
    /// Only the leader the controller names, in its epoch, changes the ISR
    /// (`ReplicationControlManager.alterPartition`: leader epoch and partition
    /// epoch checked). Knocked out: any replica presuming leadership.
    IsrChangeByTrueLeader,
    /// AlterPartition's ISR is computed from the controller's, not the leader's
    /// copy (the partition epoch, INVALID_UPDATE_VERSION otherwise).
    /// Knocked out: from the leader's copy.
    AlterPartitionFromControllerIsr,
    /// Only a follower not caught up leaves the ISR for lag
    /// (`Partition.getOutOfSyncReplicas`). Knocked out: any follower.
    ShrinkOnlyLagging,
    /// A follower joins the ISR only after a fetch in this leadership
    /// (`Partition.updateFollowerFetchState` triggers `maybeExpandIsr`).
    /// Knocked out: a follower the leader has no fetch from counts as at offset 0.
    ExpandNeedsFetch,
    /// A fetch from a crashed incarnation does not bring the follower back
    /// (KIP-903, `Partition.isReplicaIsrEligible`). Knocked out: it does.
    ExpandNotStale,
    /// A follower joins the ISR only once its LEO has reached the leader's HW
    /// (`Partition.isFollowerInSync`). Knocked out: at any LEO.
    ExpandAtLeaderHw,
    /// The boundary of the rule above: a follower exactly at the HW joins.
    /// Knocked out: it must be beyond it.
    ExpandAtExactlyLeaderHw,
    /// A follower joins the ISR only once its LEO has reached the leader's
    /// epoch start (KIP-320, KAFKA-7128, `Partition.isFollowerInSync`).
    /// Knocked out by `--mutation expand-at-hw`.
    ExpandAtEpochStart,
    /// The boundary of the rule above: a follower exactly at the epoch start
    /// joins. Knocked out: it must be beyond it.
    ExpandAtExactlyEpochStart,
    /// The other side of that boundary: a follower one record short of the
    /// epoch start does not join. Knocked out: it does.
    ExpandNotShortOfEpochStart,
    /// The leader learns the controller's own ISR removals (the metadata
    /// update, `Partition.makeLeader` with a newer partition epoch).
    /// Knocked out: it never does (only its own AlterPartition answers).
    LeaderLearnsIsr,

    // --- Crash and restart ----------------------------------------------------
    /// A crashed broker restarts only once the controller no longer names it
    /// leader (re-registration, `ReplicationControlManager.handleBrokerShutdown`).
    /// Knocked out: at any time.
    RestartWaitsForNewLeader,
}

impl Rule {
    /// Every rule, in the order above.
    pub fn all() -> &'static [Rule] {
        <Rule as clap::ValueEnum>::value_variants()
    }

    /// The kebab-case name (`--knock-out`'s value).
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    /// The mutation that knocks out a rule a mutation already covered.
    pub fn mutation(self) -> Option<Mutation> {
        match self {
            Rule::ElrElection => Some(Mutation::NoElrElection),
            Rule::FencedNotAcceptable => Some(Mutation::FencedStillAcceptable),
            Rule::LastFetchedEpochChecked => Some(Mutation::NoLastFetchedEpoch),
            Rule::HwWaitsForCaughtUpFollower => Some(Mutation::HwOverIsrOnly),
            Rule::ExpandAtEpochStart => Some(Mutation::ExpandAtHw),
            _ => None,
        }
    }

    /// `cfg` with this rule knocked out (by its mutation, if it has one).
    pub fn knocked_out(self, cfg: Config) -> Config {
        match self.mutation() {
            Some(m) => Config {
                mutation: Some(m),
                ..cfg
            },
            None => Config {
                knock_out: Some(self),
                ..cfg
            },
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}
