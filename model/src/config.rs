//! The bounds and protocol switches of one model run.

use crate::rules::Rule;
use crate::state::{MAX_EPOCH, MAX_RECORDS, MAX_REPLICAS};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Producer acknowledgement level.
/// Spelled as on the command line (and in Kafka's producer config), also in
/// JSON: "0", "1", "all".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
pub enum Acks {
    /// Fire and forget: never acknowledged.
    #[value(name = "0")]
    #[serde(rename = "0")]
    None,
    /// Acknowledged once the leader has appended the record.
    #[value(name = "1")]
    #[serde(rename = "1")]
    Leader,
    /// Acknowledged once the HW passes the record; refused with
    /// NotEnoughReplicas when |ISR| < min.insync.replicas.
    #[value(name = "all")]
    #[serde(rename = "all")]
    All,
}

impl fmt::Display for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        })
    }
}

/// How a follower finds where to truncate when it follows a new leader epoch:
/// one rule per Kafka version. Fencing (KIP-320) is a separate
/// switch, [`Config::fencing`], so that each historical preset changes one
/// rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Truncation {
    /// Truncate to the local HW (Kafka before KIP-101).
    Hw,
    /// KIP-101: ask the leader for the end offset of the follower's latest epoch.
    Epoch,
    /// KIP-279: repeat the epoch lookup until the logs agree.
    EpochIterative,
    /// Today (Kafka >= 2.7, `isTruncationOnFetchSupported`): no lookup when
    /// following; each fetch carries the follower's last fetched epoch, and
    /// a leader whose log diverges from it answers with a diverging epoch
    /// instead of records, which the follower truncates by
    /// (`AbstractFetcherThread.truncateOnFetchResponse`).
    OnFetch,
}

impl Truncation {
    /// Whether a follower asks the leader (OffsetsForLeaderEpoch) when it
    /// follows a new epoch, and so waits for the leader to lead.
    pub fn looks_up_when_following(self) -> bool {
        matches!(self, Truncation::Epoch | Truncation::EpochIterative)
    }
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Truncation::Hw => "hw",
            Truncation::Epoch => "epoch",
            Truncation::EpochIterative => "epoch-iterative",
            Truncation::OnFetch => "on-fetch",
        })
    }
}

/// When a replica writes its HW to `replication-offset-checkpoint`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HwCheckpoint {
    /// With every HW change: an unclean crash brings back the HW the replica
    /// had (within its recovered log). Simpler than Kafka, and 4.75 times
    /// fewer states for `safe`'s bounds.
    EveryChange,
    /// As Kafka: every `replica.high.watermark.checkpoint.interval.ms`
    /// (`ReplicaManager.checkpointHighWatermarks`, a `CheckpointHw` step that
    /// may come at any time) and on a clean shutdown; an unclean crash
    /// brings back the last checkpointed HW, which may be older.
    Periodic,
}

impl fmt::Display for HwCheckpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HwCheckpoint::EveryChange => "every-change",
            HwCheckpoint::Periodic => "periodic",
        })
    }
}

/// A deliberately broken rule, to show that a check can fail: each is a
/// rule highwater once had or a plausible slip, never one Kafka runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mutation {
    /// A follower rejoins the ISR only once the leader's HW has reached the
    /// start of the leader's epoch (highwater's rule before it followed
    /// Kafka's `Partition.isFollowerInSync`): the partition can stall.
    ExpandOnLeaderHw,
    /// A follower rejoins the ISR once its LEO reaches the leader's HW,
    /// without also reaching the start of the leader's epoch (the rule
    /// before KAFKA-7128): a new ISR member can miss a record an earlier
    /// leader committed.
    ExpandAtHw,
    /// The controller never elects a leader from the ELR (KIP-966's ELR kept
    /// without its election): once the ISR empties, a partition with live
    /// eligible replicas waits forever. Safe, but not live.
    NoElrElection,
    /// After an ELR election the rest of the ELR empties when the new ISR
    /// is at min.insync.replicas (highwater's rule before it followed
    /// Kafka's `PartitionChangeBuilder`, which keeps them until the next
    /// change): the differential test against Kafka's controller must
    /// notice it.
    ElrElectionSettles,
    /// The leader's HW counts its ISR only, never a caught-up follower
    /// waiting to join it (Kafka's `shouldWaitForReplicaToJoinIsr` dropped):
    /// the HW only moves sooner, so no property breaks; the model's action
    /// tests and lockstep against the implementation notice it.
    HwOverIsrOnly,
    /// Under truncation on fetch, the follower's fetch carries no last
    /// fetched epoch, so the leader never checks it for divergence (Kafka's
    /// `Partition.readRecords` checks only when it is present): a follower
    /// appends the leader's records onto a suffix the leader does not have.
    NoLastFetchedEpoch,
    /// A live broker the controller fenced still counts as an acceptable
    /// leader and ISR member (highwater's rule before it modelled fencing):
    /// while a fenced live broker is the ISR's only member, no unclean
    /// election is enabled. Safe; trace validation of the concurrent driver
    /// under the unclean rule set notices it.
    FencedStillAcceptable,
    /// A crashed broker never restarts. Safe (fewer behaviours), but the
    /// partition never heals: the progress properties must notice that a
    /// broker is missing, not count only the live ones.
    NoRestart,
    /// A leader answers every acks=all write with an error
    /// (NotEnoughReplicasAfterAppend), never acknowledging one. Every
    /// guarantee about acknowledged records then holds vacuously: the
    /// sometimes-properties that a write is acknowledged, and outlives its
    /// leader, must notice.
    NeverAcknowledge,
    /// The leader's HW is one past the lowest LEO it knows (the last offset
    /// taken for the end offset): the HW passes the leader's own LEO and
    /// "HW <= LEO" breaks. A slip no Kafka version made, kept so that the
    /// check, its report and its trace are shown on a state whose offsets
    /// are out of order.
    HwPastLeo,
    /// Only the controller's current leader learns the ISR (highwater's
    /// rule before it modelled a leader left behind): a leader of an epoch
    /// the controller has left never takes that epoch's last ISR. Safe
    /// (fewer behaviours); trace validation of the concurrent driver
    /// notices it, on a paced soak's zombie leader.
    OnlyTrueLeaderLearnsIsr,
    /// A leader of an epoch the controller has left learns only the ISR
    /// that epoch ended with, not the changes before it it had not applied
    /// (highwater's rule before it kept the chain, `Request::later_isrs`).
    /// Trace validation of the concurrent driver notices it, on a paced
    /// soak's zombie leader applying an intermediate ISR.
    ZombieLearnsOnlyLastIsr,
}

impl fmt::Display for Mutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mutation::ExpandOnLeaderHw => "expand-on-leader-hw",
            Mutation::ExpandAtHw => "expand-at-hw",
            Mutation::NoElrElection => "no-elr-election",
            Mutation::ElrElectionSettles => "elr-election-settles",
            Mutation::HwOverIsrOnly => "hw-over-isr-only",
            Mutation::NoLastFetchedEpoch => "no-last-fetched-epoch",
            Mutation::FencedStillAcceptable => "fenced-still-acceptable",
            Mutation::NoRestart => "no-restart",
            Mutation::NeverAcknowledge => "never-acknowledge",
            Mutation::HwPastLeo => "hw-past-leo",
            Mutation::OnlyTrueLeaderLearnsIsr => "only-true-leader-learns-isr",
            Mutation::ZombieLearnsOnlyLastIsr => "zombie-learns-only-last-isr",
        })
    }
}

/// Bounds and switches of a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub replicas: u8,
    pub records: u8,
    /// Highest leader epoch the controller may assign (the first is 0).
    pub max_epoch: u8,
    pub min_isr: u8,
    pub acks: Acks,
    pub truncation: Truncation,
    /// KIP-320: fetch and truncation are fenced by the current leader epoch
    /// (a follower reports its LEO only to a leader of its own epoch), and a
    /// follower rejoins the ISR only once its LEO has reached the start of
    /// the leader's epoch (KAFKA-7128, `Partition.isFollowerInSync`).
    pub fencing: bool,
    /// KIP-966 eligible leader replicas.
    pub elr: bool,
    /// KIP-966's last-known-leader election: with the ELR on, when ISR and
    /// ELR are both empty the controller elects the last leader if it is
    /// unfenced (Kafka counts it as unclean; the partition is RECOVERING).
    /// Kafka 4.x always does (`PartitionChangeBuilder`'s
    /// `useLastKnownLeaderInBalancedRecovery`, true by default, is never
    /// turned off by `ReplicationControlManager`), so it is on by default.
    pub last_known_leader: bool,
    pub unclean_election: bool,
    /// When the HW is checkpointed (what an unclean crash brings back).
    pub hw_checkpoint: HwCheckpoint,
    pub clean_crashes: u8,
    pub unclean_crashes: u8,
    /// Clean elections while the controller still names a leader (controlled
    /// shutdown, preferred-leader election, or failover from a leader not yet
    /// removed) allowed in a run.
    pub leader_moves: u8,
    /// A deliberately broken rule (None: the rules as named above).
    pub mutation: Option<Mutation>,
    /// One of today's rules knocked out, for a test (`rules.rs`); absent
    /// from JSON when None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knock_out: Option<Rule>,
}

/// An impossible configuration, explained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Whether `rule` is knocked out: a byte compared, as the checker asks
    /// it in its hottest paths.
    #[inline]
    pub fn drops(&self, rule: Rule) -> bool {
        self.knock_out == Some(rule)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |m: String| Err(ConfigError(m));
        if !(2..=MAX_REPLICAS as u8).contains(&self.replicas) {
            return err(format!(
                "--replicas {} is out of range: the model has 2 to {MAX_REPLICAS} replicas",
                self.replicas
            ));
        }
        if !(1..=MAX_RECORDS as u8).contains(&self.records) {
            return err(format!(
                "--records {} is out of range: the producer writes 1 to {MAX_RECORDS} records",
                self.records
            ));
        }
        if self.max_epoch > MAX_EPOCH {
            return err(format!(
                "--max-epoch {} is out of range: leader epochs go from 0 to at most {MAX_EPOCH}",
                self.max_epoch
            ));
        }
        if self.min_isr < 1 || self.min_isr > self.replicas {
            return err(format!(
                "--min-isr {} is impossible with {} replicas: min.insync.replicas must be between 1 and the replica count",
                self.min_isr, self.replicas
            ));
        }
        if let Some(m) = self.knock_out.and_then(Rule::mutation) {
            return err(format!(
                "--knock-out {} is the mutation {m}: use --mutation {m}",
                self.knock_out.expect("some")
            ));
        }
        Ok(())
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "replicas={} records={} max-epoch={} min-isr={} acks={} truncation={} fencing={} elr={} last-known-leader={} unclean-election={} hw-checkpoint={} clean-crashes={} unclean-crashes={} leader-moves={}",
            self.replicas,
            self.records,
            self.max_epoch,
            self.min_isr,
            self.acks,
            self.truncation,
            on_off(self.fencing),
            on_off(self.elr),
            on_off(self.last_known_leader),
            on_off(self.unclean_election),
            self.hw_checkpoint,
            self.clean_crashes,
            self.unclean_crashes,
            self.leader_moves
        )?;
        if let Some(m) = self.mutation {
            write!(f, " mutation={m}")?;
        }
        if let Some(r) = self.knock_out {
            write!(f, " knock-out={r}")?;
        }
        Ok(())
    }
}

pub fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}
