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
//! - [`hw`]: each broker's `partition.log`: every HW it published as
//!   leader, with the host's wall-clock time;
//! - the producer's lines: every acknowledged offset, with the host's
//!   wall-clock time of the acknowledgement, which the metadata log's batch
//!   times share;
//! - each broker's `server.log`: its fetcher's truncations, its log's cuts
//!   and its loads at start-up;
//! - the consumer's lines (`reads.jsonl`): every record read during the
//!   run, with the wall-clock time of its read: a record visible then.
//!
//! They are validated in three halves: [`controller`] explains every
//! metadata batch as a step of the model's controller (a misfit names the
//! first batch no model step explains); [`brokers`] holds what each broker
//! applied against those steps, and checks the model's properties where a
//! broker's line shows its log (an election's new leader holds every record
//! acknowledged before it); [`leaders`] replays each leader's tenure
//! (its recorded fetches, HW moves and ISR expansions, `partition_log`)
//! through the model's own steps, searching the appends and fetches no
//! line shows; [`truncations`] holds each follower's truncation (its
//! `server.log`) against the leader epochs' starts and its next fetch; and
//! [`log_ends`] follows each broker's log end offset across its tenures,
//! down only where a cut or a load at start-up says so.

pub mod brokers;
pub mod controller;
pub mod hw;
pub mod leaders;
pub mod log_ends;
pub mod metadata;
pub mod partition_log;
pub mod state_change;
pub mod truncations;

use std::fmt;
use std::path::Path;

use crate::kafka_cluster::checker::Outcome;
use crate::kafka_cluster::client::{self, Produced};
use crate::kafka_cluster::nemesis::{FaultKind, FaultSpan};
use crate::kafka_cluster::programs::Programs;
use crate::kafka_cluster::Result;
use brokers::{Ack, Broken, BrokerValidation, Visible};
use controller::ControllerValidation;
use leaders::LeaderValidation;
use log_ends::LogEndValidation;
use truncations::TruncationValidation;

/// Both halves' results for one run.
#[derive(Clone, Debug)]
pub struct KafkaValidation {
    pub controller: ControllerValidation,
    pub brokers: BrokerValidation,
    /// The leaders' half; None for runs kept without their `partition.log`.
    pub leaders: Option<LeaderValidation>,
    /// The followers' truncations; None for runs kept without their
    /// `server.log` lines or their leaders' steps.
    pub truncations: Option<TruncationValidation>,
    /// The brokers' log end offsets followed; None for runs kept without
    /// their `server.log` lines.
    pub log_ends: Option<LogEndValidation>,
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
        self.first_misfit().map(|(why, _)| why)
    }

    /// When the misfit [`Self::misfit`] names was written (ms since the
    /// epoch), if the observations say.
    pub fn misfit_ms(&self) -> Option<u64> {
        self.first_misfit().and_then(|(_, ms)| ms)
    }

    /// The first misfit and when it was written, the halves asked in this
    /// order; then a property broken where the model never breaks it.
    fn first_misfit(&self) -> Option<(String, Option<u64>)> {
        let halves = [
            (&self.controller.misfit, self.controller.misfit_ms),
            (&self.brokers.misfit, self.brokers.misfit_ms),
        ]
        .into_iter()
        .chain(self.leaders.as_ref().map(|l| (&l.misfit, l.misfit_ms)))
        .chain(self.truncations.as_ref().map(|t| (&t.misfit, t.misfit_ms)))
        .chain(self.log_ends.as_ref().map(|e| (&e.misfit, e.misfit_ms)));
        for (misfit, ms) in halves {
            if let Some(why) = misfit {
                return Some((why.clone(), ms));
            }
        }
        self.brokers
            .broken
            .first()
            .filter(|_| self.model_holds)
            .map(|b| {
                (
                    format!("{b}; under these rules the model never breaks it"),
                    Some(b.at_ms),
                )
            })
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
        match b.hw_moves_before_elections {
            Some(n) => writeln!(f, "  and against {n} HW moves published before them")?,
            None => writeln!(f, "  HW moves not checked (no partition.log kept)")?,
        }
        if let Some(n) = b.reads_before_elections {
            writeln!(f, "  and against {n} records the consumer read before them")?;
        }
        match &self.leaders {
            Some(l) => writeln!(f, "  {l}")?,
            None => writeln!(f, "  leaders' steps not replayed (no partition.log kept)")?,
        }
        match &self.truncations {
            Some(t) => writeln!(f, "  {t}")?,
            None => writeln!(
                f,
                "  followers' truncations not checked (no server.log kept)"
            )?,
        }
        if let Some(e) = &self.log_ends {
            writeln!(f, "  {e}")?;
        }
        for broken in &b.broken {
            writeln!(f, "  property broken at a validated step: {broken}")?;
        }
        match self.misfit() {
            Some(m) => writeln!(f, "  MISFIT: {m}"),
            None => writeln!(f, "  fits the model"),
        }
    }
}

/// What the nemesis did to the brokers' JVMs: its pauses (SIGSTOP to
/// SIGCONT, `FaultKind::PauseShort` and `PauseLong`; other faults stop
/// followers, not the leader whose lines are replayed) and its kills.
fn jvms(faults: &[FaultSpan]) -> leaders::Jvms {
    let pauses = [FaultKind::PauseShort.name(), FaultKind::PauseLong.name()];
    leaders::Jvms {
        frozen: faults
            .iter()
            .filter(|f| pauses.contains(&f.kind.as_str()))
            .map(|f| leaders::Frozen {
                broker: f.broker,
                from_ms: f.began_ms,
                to_ms: f.ended_ms,
            })
            .collect(),
        killed: faults
            .iter()
            .flat_map(FaultSpan::kills)
            .map(|k| leaders::Killed {
                broker: k.broker,
                at_ms: k.at_ms,
            })
            .collect(),
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

/// The records in the consumer's lines, with when each was read.
pub fn reads(lines: &[String]) -> Result<Vec<Visible>> {
    Ok(client::parse_reads(lines)?
        .reads
        .into_iter()
        .map(|r| Visible {
            offset: r.offset,
            value: r.value,
            at_ms: r.ms,
        })
        .collect())
}

/// What a run left, read: the inputs of [`validate`].
#[derive(Clone, Debug, Default)]
pub struct Observations {
    /// `DumpLogSegments --cluster-metadata-decoder` of the controller's log.
    pub metadata: String,
    /// Each broker's `state-change.log`.
    pub state_change_logs: Vec<(metadata::BrokerId, String)>,
    /// Each broker's `partition.log`; None for runs made before it was kept.
    pub partition_logs: Option<Vec<(metadata::BrokerId, String)>>,
    /// Whether `partition_logs` hold every leader step (fetches recorded,
    /// ISR changes, HW moves), as a fresh run's do; runs kept before the
    /// leaders' half kept only their HW moves (`broker-N.hw-moves.log`).
    pub leader_steps: bool,
    /// Each broker's `server.log`, or the lines kept of it (truncations,
    /// loads); None for runs kept without them.
    pub server_logs: Option<Vec<(metadata::BrokerId, String)>>,
    /// The producer's lines.
    pub producer: Vec<String>,
    /// The consumer's lines (`reads.jsonl`); None for runs made before
    /// a consumer read beside the producer.
    pub reads: Option<Vec<String>>,
    /// The controller's rules from its `server.properties`.
    pub rules: controller::ClusterRules,
    /// The faults the nemesis applied (`faults.jsonl`); None for runs kept
    /// without it.
    pub faults: Option<Vec<FaultSpan>>,
}

impl Observations {
    /// Reads what a run left in `run_dir` (the layout `kafka_cluster::soak`
    /// writes). With `programs`, the controller's metadata log is dumped by
    /// Kafka's own tool (`DumpLogSegments`) and the dump kept beside it as
    /// `metadata.txt`; without, the `metadata.txt` an earlier validation
    /// wrote is read (no Java needed).
    pub fn read(programs: Option<&Programs>, run_dir: &Path) -> Result<Observations> {
        let cluster = run_dir.join("cluster");
        let read = |path: &Path| {
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        let kept = run_dir.join("metadata.txt");
        let metadata = match programs {
            Some(programs) => {
                let dump = metadata::dump(
                    programs,
                    &cluster.join("controller/data/__cluster_metadata-0"),
                )?;
                std::fs::write(&kept, &dump)
                    .map_err(|e| format!("cannot write {}: {e}", kept.display()))?;
                dump
            }
            None => read(&kept)?,
        };
        let mut brokers = Vec::new();
        for entry in std::fs::read_dir(&cluster)
            .map_err(|e| format!("cannot list {}: {e}", cluster.display()))?
        {
            let path = entry.map_err(|e| e.to_string())?.path();
            if let Some(id) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("broker-"))
                .and_then(|n| n.parse().ok())
            {
                brokers.push((id, path));
            }
        }
        brokers.sort();
        let mut state_change_logs = Vec::new();
        let mut partition_logs = Some(Vec::new());
        let mut server_logs = Vec::new();
        for (id, path) in &brokers {
            state_change_logs.push((*id, read(&path.join("state-change.log"))?));
            server_logs.push((*id, read(&path.join("server.log"))?));
            let partition = path.join("partition.log");
            match (&mut partition_logs, partition.exists()) {
                (Some(logs), true) => logs.push((*id, read(&partition)?)),
                _ => partition_logs = None,
            }
        }
        Ok(Observations {
            metadata,
            state_change_logs,
            leader_steps: partition_logs.is_some(),
            partition_logs,
            server_logs: Some(server_logs),
            producer: read(&run_dir.join("producer.jsonl"))?
                .lines()
                .map(str::to_string)
                .collect(),
            reads: match run_dir.join("reads.jsonl") {
                p if p.exists() => Some(read(&p)?.lines().map(str::to_string).collect()),
                _ => None,
            },
            rules: controller::ClusterRules::from_properties(&read(
                &cluster.join("controller/server.properties"),
            )?)?,
            faults: match run_dir.join("faults.jsonl") {
                p if p.exists() => Some(FaultSpan::parse_lines(&read(&p)?)?),
                _ => None,
            },
        })
    }
}

impl Observations {
    /// Reads a run kept as a flat directory (`tests/kafka_runs/`):
    /// `metadata.txt`, `broker-N.state-change.log` and (when kept)
    /// `broker-N.partition.log` (its leader steps) or
    /// `broker-N.hw-moves.log` (its HW moves only), and (when kept)
    /// `broker-N.server.log` (its truncation and load lines) for
    /// N = 1..=3, `producer.jsonl`,
    /// `controller.server.properties`.
    pub fn read_kept(dir: &Path) -> Result<Observations> {
        let read = |file: &str| {
            let path = dir.join(file);
            std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        let per_broker = |file: &str| -> Result<Option<Vec<(metadata::BrokerId, String)>>> {
            if !dir.join(format!("broker-1.{file}")).exists() {
                return Ok(None);
            }
            (1..=3)
                .map(|b| Ok((b, read(&format!("broker-{b}.{file}"))?)))
                .collect::<Result<Vec<_>>>()
                .map(Some)
        };
        Ok(Observations {
            metadata: read("metadata.txt")?,
            state_change_logs: per_broker("state-change.log")?
                .ok_or_else(|| format!("{} holds no broker-1.state-change.log", dir.display()))?,
            leader_steps: dir.join("broker-1.partition.log").exists(),
            partition_logs: match per_broker("partition.log")? {
                Some(logs) => Some(logs),
                None => per_broker("hw-moves.log")?,
            },
            server_logs: per_broker("server.log")?,
            producer: match read("producer.jsonl") {
                Ok(text) => text.lines().map(str::to_string).collect(),
                Err(_) if !dir.join("producer.jsonl").exists() => Vec::new(),
                Err(e) => return Err(e),
            },
            reads: match read("reads.jsonl") {
                Ok(text) => Some(text.lines().map(str::to_string).collect()),
                Err(_) if !dir.join("reads.jsonl").exists() => None,
                Err(e) => return Err(e),
            },
            rules: controller::ClusterRules::from_properties(&read(
                "controller.server.properties",
            )?)?,
            faults: match read("faults.jsonl") {
                Ok(text) => Some(FaultSpan::parse_lines(&text)?),
                Err(_) if !dir.join("faults.jsonl").exists() => None,
                Err(e) => return Err(e),
            },
        })
    }
}

/// Validates the observations a run left in `run_dir` for `topic`'s
/// partition 0 ([`Observations::read`]). `acks_all`: the producer's acks
/// (not in any broker's records).
pub fn validate_run(
    programs: Option<&Programs>,
    run_dir: &Path,
    topic: &str,
    acks_all: bool,
) -> Result<KafkaValidation> {
    validate(&Observations::read(programs, run_dir)?, topic, acks_all)
}

/// Validates observations already read.
pub fn validate(o: &Observations, topic: &str, acks_all: bool) -> Result<KafkaValidation> {
    let batches = metadata::parse(&o.metadata)?;
    let controller = controller::validate(&batches, topic, o.rules);
    let partition = format!("{topic}-0");
    let mut applied = Vec::new();
    for (id, log) in &o.state_change_logs {
        applied.extend(state_change::parse(*id, &partition, log)?);
    }
    // Each broker's leader steps, read once: the brokers' half takes their
    // HW moves, the leaders' half all of them.
    let partition_lines = match &o.partition_logs {
        Some(logs) => {
            let mut lines = Vec::new();
            for (id, log) in logs {
                lines.extend(partition_log::parse(*id, &partition, log)?);
            }
            Some(lines)
        }
        None => None,
    };
    let hw_moves = partition_lines.as_deref().map(hw::moves);
    let leader_lines = match partition_lines {
        Some(lines) if o.leader_steps => {
            let mut learnt = Vec::new();
            for (id, log) in &o.state_change_logs {
                learnt.extend(state_change::parse_isr_learnt(*id, &partition, log)?);
            }
            Some((lines, learnt))
        }
        _ => None,
    };
    let acks = acks(&o.producer)?;
    let reads = o.reads.as_deref().map(reads).transpose()?;
    let brokers = brokers::validate(
        &applied,
        &controller.registrations,
        acks.as_deref(),
        hw_moves.as_deref(),
        reads.as_deref(),
    );
    let r = controller.rules;
    let (mut truncations, mut log_ends) = (None, None);
    if let Some(logs) = &o.server_logs {
        let (mut cuts, mut resets) = (Vec::new(), Vec::new());
        for (id, log) in logs {
            cuts.extend(truncations::parse(*id, &partition, log)?);
            resets.extend(log_ends::parse(*id, &partition, log)?);
        }
        if let Some((lines, _)) = &leader_lines {
            truncations = Some(truncations::validate(&cuts, &applied, lines));
        }
        let lines = leader_lines
            .as_ref()
            .map_or(&[][..], |(lines, _)| &lines[..]);
        log_ends = Some(log_ends::validate(&applied, &resets, lines));
    }
    let leaders = leader_lines.map(|(lines, learnt)| {
        let cfg = leaders::model_config(r, acks_all);
        let jvms = o.faults.as_deref().map(jvms).unwrap_or_default();
        leaders::validate(&cfg, &controller.replicas, &applied, &learnt, &lines, &jvms)
    });
    let model_holds = acks_all && r.min_isr >= 2 && r.elr && !r.unclean;
    Ok(KafkaValidation {
        controller,
        brokers,
        leaders,
        truncations,
        log_ends,
        model_holds,
        applied,
    })
}
