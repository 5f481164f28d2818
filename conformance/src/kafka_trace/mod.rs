//! A real Kafka run's observations, validated against the model
//! (spec/kafka-trace.md).
//!
//! What a run of `kafka_cluster` leaves is turned into observations, each
//! with its source and what orders it:
//!
//! - [`metadata`]: the controller's metadata log, one total order of every
//!   broker registration and partition change (Kafka's `DumpLogSegments`);
//! - [`state_change`]: each broker's `state-change.log`, in that broker's
//!   order: every registration it applied, with its log end offset and HW;
//! - the producer's lines: every acknowledged offset, with the host's
//!   wall-clock time of the acknowledgement, which the metadata log's batch
//!   times share.
//!
//! They are validated in two halves: [`controller`] explains every
//! metadata batch as a step of the model's controller (a misfit names the
//! first batch no model step explains); [`brokers`] holds what each broker
//! applied against those steps, and checks the model's properties where a
//! broker's line shows its log (an election's new leader holds every record
//! acknowledged before it). Steps the observations cannot see (fetches,
//! appends, HW moves between lines) are not invented: what is checked is
//! what was seen.

pub mod brokers;
pub mod controller;
pub mod metadata;
pub mod state_change;

use std::fmt;
use std::path::Path;

use crate::kafka_cluster::checker::Outcome;
use crate::kafka_cluster::client::{self, Produced};
use crate::kafka_cluster::programs::Programs;
use crate::kafka_cluster::Result;
use brokers::{Ack, Broken, BrokerValidation};
use controller::ControllerValidation;

/// Both halves' results for one run.
#[derive(Clone, Debug)]
pub struct KafkaValidation {
    pub controller: ControllerValidation,
    pub brokers: BrokerValidation,
    /// Whether the model holds every property under the run's rules (its
    /// `safe` preset: acks=all, min.insync.replicas=2, ELR, no unclean
    /// election): then a broken property is a misfit too.
    pub model_holds: bool,
    /// Every registration the brokers' state-change logs show applied (the
    /// pictures draw the leaders' HW from them).
    pub applied: Vec<state_change::Applied>,
}

impl KafkaValidation {
    /// The first observation no model behaviour explains, if any.
    pub fn misfit(&self) -> Option<String> {
        self.controller
            .misfit
            .clone()
            .or_else(|| self.brokers.misfit.clone())
            .or_else(|| {
                self.brokers
                    .broken
                    .first()
                    .filter(|_| self.model_holds)
                    .map(|b| format!("{b}; under these rules the model never breaks it"))
            })
    }

    /// When the misfit [`Self::misfit`] names was written (ms since the
    /// epoch), if the observations say.
    pub fn misfit_ms(&self) -> Option<u64> {
        if self.controller.misfit.is_some() {
            self.controller.misfit_ms
        } else if self.brokers.misfit.is_some() {
            self.brokers.misfit_ms
        } else {
            self.brokers
                .broken
                .first()
                .filter(|_| self.model_holds)
                .map(|b| b.at_ms)
        }
    }

    pub fn broken(&self) -> &[Broken] {
        &self.brokers.broken
    }
}

impl fmt::Display for KafkaValidation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.controller;
        let b = &self.brokers;
        writeln!(
            f,
            "validated against the model: {} metadata batches ({} broker events, {} partition changes, {} elections) under {:?}; {} registrations applied by brokers; {}",
            c.batches,
            c.broker_events,
            c.partition_changes,
            c.elections,
            c.rules,
            b.applied,
            match b.acks_before_elections {
                Some(n) => format!(
                    "{} elections checked against {n} earlier acknowledgements",
                    b.elections_checked
                ),
                None => "acknowledgements not checked (the producer printed no times)".into(),
            }
        )?;
        for broken in &b.broken {
            writeln!(f, "  property broken at a validated step: {broken}")?;
        }
        match self.misfit() {
            Some(m) => writeln!(f, "  MISFIT: {m}"),
            None => writeln!(f, "  fits the model"),
        }
    }
}

/// The acknowledged records in the producer's lines, with their times;
/// None when a line has no times (a producer from before they were
/// printed): then no acknowledgement can be placed before an election.
pub fn acks(lines: &[String]) -> Result<Option<Vec<Ack>>> {
    let mut acks = Vec::new();
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        if let Produced::Outcome(Outcome::Acked { value, offset }, timing) =
            client::parse_produced(line)?
        {
            let Some(t) = timing else {
                return Ok(None);
            };
            acks.push(Ack {
                value,
                offset,
                at_ms: t.at_ms,
            });
        }
    }
    Ok(Some(acks))
}

/// Validates the observations a run left in `run_dir` (the layout
/// `kafka_cluster::soak` writes) for `topic`'s partition 0. `acks_all`:
/// the producer's acks (not in any broker's records). With `programs`,
/// the controller's metadata log is dumped (Kafka's `DumpLogSegments`)
/// into `metadata.txt`; without, the `metadata.txt` an earlier validation
/// wrote is read (no Java needed).
pub fn validate_run(
    programs: Option<&Programs>,
    run_dir: &Path,
    topic: &str,
    acks_all: bool,
) -> Result<KafkaValidation> {
    let cluster = run_dir.join("cluster");
    let kept = run_dir.join("metadata.txt");
    let dump = match programs {
        Some(programs) => {
            let dump = metadata::dump(
                programs,
                &cluster.join("controller/data/__cluster_metadata-0"),
            )?;
            std::fs::write(&kept, &dump)
                .map_err(|e| format!("cannot write {}: {e}", kept.display()))?;
            dump
        }
        None => std::fs::read_to_string(&kept)
            .map_err(|e| format!("cannot read {}: {e}", kept.display()))?,
    };
    let producer = std::fs::read_to_string(run_dir.join("producer.jsonl"))
        .map_err(|e| format!("cannot read producer.jsonl: {e}"))?;
    let lines: Vec<String> = producer.lines().map(str::to_string).collect();
    let properties = cluster.join("controller/server.properties");
    let rules = controller::ClusterRules::from_properties(
        &std::fs::read_to_string(&properties)
            .map_err(|e| format!("cannot read {}: {e}", properties.display()))?,
    )?;
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(&cluster)
        .map_err(|e| format!("cannot list {}: {e}", cluster.display()))?
    {
        let path = entry.map_err(|e| e.to_string())?.path();
        let Some(id) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("broker-"))
            .and_then(|n| n.parse().ok())
        else {
            continue;
        };
        let log = std::fs::read_to_string(path.join("state-change.log")).map_err(|e| {
            format!(
                "cannot read {}: {e}",
                path.join("state-change.log").display()
            )
        })?;
        logs.push((id, log));
    }
    validate(&dump, &logs, &lines, topic, rules, acks_all)
}

/// Validates observations already read: the metadata dump, each broker's
/// state-change.log, the producer's lines, under the controller's static
/// rules (its server.properties).
pub fn validate(
    dump: &str,
    state_change_logs: &[(metadata::BrokerId, String)],
    producer_lines: &[String],
    topic: &str,
    rules: controller::ClusterRules,
    acks_all: bool,
) -> Result<KafkaValidation> {
    let batches = metadata::parse(dump)?;
    let controller = controller::validate(&batches, topic, rules);
    let mut applied = Vec::new();
    for (id, log) in state_change_logs {
        applied.extend(state_change::parse(*id, &format!("{topic}-0"), log)?);
    }
    let acks = acks(producer_lines)?;
    let brokers = brokers::validate(&applied, &controller.registrations, acks.as_deref());
    let r = controller.rules;
    let model_holds = acks_all && r.min_isr >= 2 && r.elr && !r.unclean;
    Ok(KafkaValidation {
        controller,
        brokers,
        model_holds,
        applied,
    })
}
