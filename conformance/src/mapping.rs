//! The model's configuration and actions in the implementation's terms.

use highwater::cluster::{StepAction, StepConfig};
use highwater::replication::{self as imp, ReplicationConfig};
use highwater_model::config::{HwCheckpoint, Mutation};
use highwater_model::controller::Election;
use highwater_model::{Acks, Action, Config, Truncation};

/// The step-driver configuration that runs the protocol `cfg` describes.
/// Bounds (records, epochs, crashes) are not the implementation's business:
/// the model's enabled actions keep within them.
pub fn step_config(cfg: &Config) -> StepConfig {
    let mut step = StepConfig::new(u32::from(cfg.replicas));
    step.replication = ReplicationConfig {
        min_insync_replicas: usize::from(cfg.min_isr),
        truncation: truncation(cfg.truncation),
        fencing: cfg.fencing,
        elr: cfg.elr,
        isr_join: isr_join(cfg.mutation),
        hw_waits_for_caught_up: cfg.mutation != Some(Mutation::HwOverIsrOnly),
        hw_checkpoint: match cfg.hw_checkpoint {
            HwCheckpoint::EveryChange => imp::HwCheckpointPolicy::EveryChange,
            // Every CheckpointHw step writes it: the model chooses when.
            HwCheckpoint::Periodic => imp::HwCheckpointPolicy::IntervalMs(0),
        },
        ..step.replication
    };
    step.unclean_leader_election = cfg.unclean_election;
    step.acks = acks(cfg.acks);
    // Two one-record batches a segment, and an index entry for each: runs
    // roll, truncate across segments and recover trusted segments.
    step.log.segment_bytes = SEGMENT_BYTES;
    step.log.index_interval_bytes = 1;
    step
}

/// `segment.bytes` of the implementation's logs in lockstep: a batch of one
/// record takes 84 bytes, so a segment holds two.
pub const SEGMENT_BYTES: u32 = 200;

/// The implementation's ISR-join rule: Kafka's, or the old one the
/// `expand-on-leader-hw` mutation stands for. (`hw-over-isr-only` is the
/// step config's `hw_waits_for_caught_up`; `no-elr-election` and
/// `elr-election-settles` are mutations of the model's controller: the first
/// for the progress check, the second for the differential test against
/// Kafka's controller, which perturbs the implementation's controller
/// through `Controller::set_mutation` itself; `no-last-fetched-epoch` is one
/// of the model's fetch, and the implementation running the rule before
/// truncation on fetch is noticed by `lockstep_notices_the_rule_before_truncation_on_fetch`;
/// `fenced-still-acceptable` is one of the model's controller, noticed by
/// trace validation of the unclean rule set; `no-restart` removes a model
/// action, for the progress check; `never-acknowledge` is one of the
/// model's leader, for its sometimes-properties; `hw-past-leo` breaks "HW
/// <= LEO" in the model only, for the checker's reports and traces;
/// `only-true-leader-learns-isr` and `zombie-learns-only-last-isr` remove
/// behaviour of the model's leader, noticed by trace validation of a paced
/// soak's zombie leader.)
pub fn isr_join(m: Option<Mutation>) -> imp::IsrJoinRule {
    match m {
        Some(Mutation::ExpandOnLeaderHw) => imp::IsrJoinRule::LeaderHwReachedEpochStart,
        Some(Mutation::ExpandAtHw) => imp::IsrJoinRule::HwOnly,
        Some(
            Mutation::NoElrElection
            | Mutation::ElrElectionSettles
            | Mutation::HwOverIsrOnly
            | Mutation::NoLastFetchedEpoch
            | Mutation::FencedStillAcceptable
            | Mutation::NoRestart
            | Mutation::NeverAcknowledge
            | Mutation::HwPastLeo
            | Mutation::OnlyTrueLeaderLearnsIsr
            | Mutation::ZombieLearnsOnlyLastIsr,
        )
        | None => imp::IsrJoinRule::FollowerReachedEpochStart,
    }
}

pub fn truncation(t: Truncation) -> imp::TruncationMode {
    match t {
        Truncation::Hw => imp::TruncationMode::Hw,
        Truncation::Epoch => imp::TruncationMode::Epoch,
        Truncation::EpochIterative => imp::TruncationMode::EpochIterative,
        Truncation::OnFetch => imp::TruncationMode::OnFetch,
    }
}

pub fn acks(a: Acks) -> imp::Acks {
    match a {
        Acks::None => imp::Acks::None,
        Acks::Leader => imp::Acks::Leader,
        Acks::All => imp::Acks::All,
    }
}

pub fn election(e: Election) -> imp::Election {
    match e {
        Election::Clean => imp::Election::Clean,
        Election::Elr => imp::Election::Elr,
        Election::LastKnownLeader => imp::Election::LastKnownLeader,
        Election::Unclean => imp::Election::Unclean,
    }
}

/// The model's action as one step of the step driver.
pub fn step_action(a: Action) -> StepAction {
    let id = u32::from;
    match a {
        Action::ControllerElectLeader {
            replica,
            election: e,
        } => StepAction::ControllerElectLeader {
            replica: id(replica),
            election: election(e),
        },
        Action::ControllerShrinkIsr { replica } => StepAction::ControllerShrinkIsr {
            replica: id(replica),
        },
        Action::ControllerUnfence { replica } => StepAction::ControllerUnfence {
            replica: id(replica),
        },
        Action::BecomeLeader { replica, epoch } => StepAction::BecomeLeader {
            replica: id(replica),
            epoch: i32::from(epoch),
        },
        Action::BecomeFollower { replica, epoch } => StepAction::BecomeFollower {
            replica: id(replica),
            epoch: i32::from(epoch),
        },
        Action::Produce { leader, record } => StepAction::Produce {
            leader: id(leader),
            record: u64::from(record),
        },
        Action::FollowerFetchOne { follower, leader } => StepAction::FollowerFetchOne {
            follower: id(follower),
            leader: id(leader),
        },
        Action::FollowerFetchPart {
            follower,
            leader,
            records,
        } => StepAction::FollowerFetchPart {
            follower: id(follower),
            leader: id(leader),
            records: u64::from(records),
        },
        Action::FollowerFetch { follower, leader } => StepAction::FollowerFetch {
            follower: id(follower),
            leader: id(leader),
        },
        Action::LeaderAdvanceHw { leader, hw } => StepAction::LeaderAdvanceHw {
            leader: id(leader),
            hw: u64::from(hw),
        },
        Action::LeaderShrinkIsr { leader, follower } => StepAction::LeaderShrinkIsr {
            leader: id(leader),
            follower: id(follower),
        },
        Action::LeaderExpandIsr { leader, follower } => StepAction::LeaderExpandIsr {
            leader: id(leader),
            follower: id(follower),
        },
        Action::LeaderLearnsIsr { leader } => StepAction::LeaderLearnsIsr { leader: id(leader) },
        Action::Flush { replica } => StepAction::Flush {
            replica: id(replica),
        },
        Action::CheckpointHw { replica } => StepAction::CheckpointHw {
            replica: id(replica),
        },
        Action::Crash { replica, clean } => StepAction::Crash {
            replica: id(replica),
            clean,
        },
        Action::Restart { replica } => StepAction::Restart {
            replica: id(replica),
        },
    }
}
