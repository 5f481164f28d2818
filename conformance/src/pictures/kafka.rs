//! The pictures' data from a real Kafka run's observations (what
//! `kafka_cluster::soak` leaves in its run directory, validated by
//! `kafka_trace`), on one time axis: the host's wall clock, which the
//! producer's lines, the nemesis's fault spans and the metadata log's
//! batch times share, in seconds from the producer's first send.
//!
//! - acknowledgements: the producer's lines, each with its latency from
//!   the send to the acknowledgement (acks=1 too: the producer measures it);
//! - faults: `faults.jsonl` (each fault from its stroke to the broker's
//!   restart or resumption), or for a run kept before it was written its
//!   `summary.txt` and `schedule.txt` (see `nemesis::spans_from_summary`);
//! - losses: the client-side check's (`consumed.jsonl` against the
//!   producer's lines), at each lost record's acknowledgement;
//! - vanished reads: the consumer's reads (`reads.jsonl`) that the log
//!   read back does not hold at their offset, at each one's first read;
//! - misfits and broken properties: the validation's, at the metadata
//!   batch they were found at;
//! - leader, leader epoch, ISR and ELR: the controller's validated
//!   registrations, at their batch's time;
//! - HW: only what is logged: the HW the leader's `state-change.log` line
//!   gives as it applied a registration, and under acks=all each
//!   acknowledgement of offset o (then the leader's HW is past o); the HW's
//!   moves between these are not seen.

use std::path::{Path, PathBuf};

use super::data::{push_changed, Ack, Fault, Mark, Partition, Run, Timeline};
use crate::kafka_cluster::checker::{Outcome, Read};
use crate::kafka_cluster::client::{self, Produced};
use crate::kafka_cluster::nemesis::{self, FaultSpan};
use crate::kafka_cluster::soak;
use crate::kafka_trace::state_change::Role;
use crate::kafka_trace::KafkaValidation;

/// What a Kafka run's pictures are drawn from.
pub struct Sources<'a> {
    pub title: String,
    /// The producer's lines, as printed.
    pub producer: &'a [String],
    pub faults: &'a [FaultSpan],
    /// Where the fault spans came from, when not from `faults.jsonl`.
    pub faults_note: Option<String>,
    /// None: not validated (the partition picture is then empty).
    pub validation: Option<&'a KafkaValidation>,
    /// Values acknowledged and not on the log read back (None: not checked).
    pub lost: Option<&'a [u64]>,
    /// Reads whose record the log read back does not hold at their offset,
    /// each at the time it was first read (None: no reader ran, or the log
    /// was not read back).
    pub vanished: Option<&'a [VanishedRead]>,
    pub acks_all: bool,
}

/// A record a consumer read and the final log does not hold there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VanishedRead {
    pub offset: u64,
    pub value: String,
    /// When it was first read (wall clock, ms since the epoch).
    pub ms: u64,
}

/// The vanished reads of `reads`, each at the first time it was read.
pub fn vanished_reads(
    vanished: &[(u64, String, Option<String>)],
    reads: &[Read],
) -> Vec<VanishedRead> {
    // Each record's first read, found in one pass: a run reads tens of
    // thousands of records, and an unclean one sees thousands vanish.
    let mut first: std::collections::HashMap<(u64, &str), u64> = std::collections::HashMap::new();
    for r in reads {
        let ms = first.entry((r.offset, r.value.as_str())).or_insert(r.ms);
        *ms = (*ms).min(r.ms);
    }
    vanished
        .iter()
        .map(|(offset, value, _)| VanishedRead {
            offset: *offset,
            value: value.clone(),
            ms: first.get(&(*offset, value.as_str())).copied().unwrap_or(0),
        })
        .collect()
}

/// One acknowledgement line's value, offset and times.
struct Acked {
    value: u64,
    offset: u64,
    sent_ms: u64,
    at_ms: u64,
}

/// Both pictures' data. An unparsable producer line is an error; a
/// producer that printed no times gives no acknowledgements to place (said
/// in the note).
pub fn from_sources(o: &Sources) -> Result<Run, String> {
    let mut acked = Vec::new();
    let mut untimed = 0usize;
    for line in o.producer.iter().filter(|l| !l.trim().is_empty()) {
        match client::parse_produced(line)? {
            Produced::Outcome(Outcome::Acked { value, offset }, Some(t)) => acked.push(Acked {
                value,
                offset,
                sent_ms: t.sent_ms,
                at_ms: t.at_ms,
            }),
            Produced::Outcome(Outcome::Acked { .. }, None) => untimed += 1,
            _ => {}
        }
    }
    acked.sort_by_key(|a| a.at_ms);
    let registrations = o
        .validation
        .map_or(&[][..], |v| &v.controller.registrations[..]);
    // The origin: the producer's first send, else the first thing seen.
    let origin = acked
        .iter()
        .map(|a| a.sent_ms)
        .min()
        .or_else(|| o.faults.iter().map(|f| f.began_ms).min())
        .or_else(|| registrations.first().map(|r| r.create_ms))
        .unwrap_or(0);
    // Before the origin (the partition's creation) counts as at it.
    let at = |ms: u64| ms.saturating_sub(origin) as f64 / 1e3;

    let mut t = Timeline {
        title: o.title.clone(),
        ..Timeline::default()
    };
    t.acks = acked
        .iter()
        .map(|a| Ack {
            at: at(a.at_ms),
            records: 1,
            latency_ms: Some(a.at_ms.saturating_sub(a.sent_ms) as f64),
        })
        .collect();
    t.faults = o
        .faults
        .iter()
        .map(|f| Fault {
            kind: f.kind.clone(),
            broker: Some(f.broker),
            start: at(f.began_ms),
            end: at(f.ended_ms.max(f.began_ms)),
        })
        .collect();
    let mut end = t
        .acks
        .iter()
        .map(|a| a.at)
        .chain(t.faults.iter().map(|f| f.end))
        .chain(registrations.iter().map(|r| at(r.create_ms)))
        .fold(0.0, f64::max);
    if let Some(lost) = o.lost {
        let acked_at: std::collections::HashMap<u64, f64> =
            acked.iter().map(|a| (a.value, at(a.at_ms))).collect();
        t.losses = lost
            .iter()
            .map(|v| Mark {
                at: acked_at.get(v).copied().unwrap_or(end),
                label: format!("value {v} lost"),
            })
            .collect();
    }
    if let Some(vanished) = o.vanished {
        t.vanished = vanished
            .iter()
            .map(|v| Mark {
                at: at(v.ms),
                label: format!("value {} read at offset {} vanished", v.value, v.offset),
            })
            .collect();
        end = t.vanished.iter().map(|m| m.at).fold(end, f64::max);
    }
    let mut notes: Vec<String> = o.faults_note.iter().cloned().collect();
    if o.lost.is_none() {
        notes.push("the log was not read back: losses not marked".to_string());
    }
    if untimed > 0 {
        notes.push(format!(
            "{untimed} acknowledgement(s) not shown: the producer printed no times"
        ));
    }
    let mut p = Partition {
        title: o.title.clone(),
        ..Partition::default()
    };
    match o.validation {
        Some(v) => {
            if let Some(m) = v.misfit() {
                t.misfits.push(Mark {
                    at: v.misfit_ms().map_or(end, at),
                    label: m.lines().next().unwrap_or_default().to_string(),
                });
            }
            t.broken = v
                .broken()
                .iter()
                .map(|b| Mark {
                    at: at(b.at_ms),
                    label: format!("{} at {:.1} s", b.property, at(b.at_ms)),
                })
                .collect();
            partition(&mut p, v, &acked, o.acks_all, &at);
        }
        None => notes.push("not validated: no partition history".to_string()),
    }
    end = end.max(p.hw.last().map_or(0.0, |h| h.0));
    t.note = (!notes.is_empty()).then(|| notes.join("; "));
    t.end = end;
    p.end = end;
    Ok(Run {
        timeline: t,
        partition: p,
    })
}

/// The partition's series from the validated registrations and, for the
/// HW, the leaders' state-change lines and (acks=all) the acknowledgements.
fn partition(
    p: &mut Partition,
    v: &KafkaValidation,
    acked: &[Acked],
    acks_all: bool,
    at: &dyn Fn(u64) -> f64,
) {
    let mut brokers = std::collections::BTreeSet::new();
    let mut last_epoch = None;
    for r in &v.controller.registrations {
        let t = at(r.create_ms);
        brokers.extend(r.leader.iter().chain(&r.isr).chain(&r.elr).chain(&r.lke));
        push_changed(&mut p.leader, t, r.leader);
        push_changed(&mut p.epoch, t, r.leader_epoch);
        push_changed(&mut p.isr, t, r.isr.clone());
        push_changed(&mut p.elr, t, r.elr.clone());
        // A new leader epoch is an election (the creation's is not).
        if last_epoch.is_some_and(|e| e != r.leader_epoch) {
            p.elections.push((t, r.leader_epoch));
        }
        last_epoch = Some(r.leader_epoch);
    }
    brokers.extend(v.applied.iter().map(|a| a.broker));
    p.brokers = brokers.into_iter().collect();
    // (time, HW): a leader's line sets it, an acks=all ack raises it.
    let mut points: Vec<(u64, Option<u64>, u64)> = v
        .applied
        .iter()
        .filter(|a| matches!(a.role, Role::Leader { .. }))
        .filter_map(|a| {
            let r = usize::try_from(a.partition_epoch)
                .ok()
                .and_then(|e| v.controller.registrations.get(e))?;
            Some((r.create_ms, Some(a.high_watermark), 0))
        })
        .collect();
    if acks_all {
        points.extend(acked.iter().map(|a| (a.at_ms, None, a.offset + 1)));
    }
    points.sort_by_key(|&(ms, set, _)| (ms, set.is_none()));
    let mut hw = None;
    for (ms, set, past) in points {
        hw = match set {
            Some(h) => Some(h),
            None => Some(hw.unwrap_or(0).max(past)),
        };
        if let Some(h) = hw {
            push_changed(&mut p.hw, at(ms), h);
        }
    }
    p.note = Some(if acks_all {
        "HW: the leader's at each registration it applied (its state-change.log), raised by each acks=all acknowledgement; its moves between are not logged"
    } else {
        "HW: the leader's at each registration it applied (its state-change.log); its moves between are not logged (acks=1 acknowledgements say nothing of it)"
    }
    .to_string());
}

/// Reads a kept run's faults: `faults.jsonl`, or for a run from before it
/// `summary.txt` and `schedule.txt`; with a note when not the former.
pub fn read_faults(
    run_dir: &Path,
    producer: &[String],
) -> Result<(Vec<FaultSpan>, Option<String>), String> {
    let read = |name: &str| {
        std::fs::read_to_string(run_dir.join(name))
            .map_err(|e| format!("cannot read {}: {e}", run_dir.join(name).display()))
    };
    if run_dir.join("faults.jsonl").exists() {
        return Ok((FaultSpan::parse_lines(&read("faults.jsonl")?)?, None));
    }
    if !run_dir.join("summary.txt").exists() {
        return Ok((
            Vec::new(),
            Some("no faults.jsonl nor summary.txt: faults not shown".into()),
        ));
    }
    let first_send = producer
        .iter()
        .filter_map(|l| match client::parse_produced(l) {
            Ok(Produced::Outcome(_, Some(t))) => Some(t.sent_ms),
            _ => None,
        })
        .min()
        .ok_or("the producer printed no times: the faults cannot be placed")?;
    let spans =
        nemesis::spans_from_summary(&read("summary.txt")?, &read("schedule.txt")?, first_send)?;
    Ok((
        spans,
        Some("faults from summary.txt and schedule.txt, placed from the producer's first send: about a second out".into()),
    ))
}

/// Draws a kept run directory's pictures into `out`, from its files and
/// its validation (None: not validated), titled `title` and what it
/// counts; returns their paths.
pub fn of_run_dir(
    out: &Path,
    title: &str,
    run_dir: &Path,
    validation: Option<&KafkaValidation>,
    acks_all: bool,
) -> Result<[PathBuf; 2], String> {
    let producer_file = run_dir.join("producer.jsonl");
    let producer: Vec<String> = std::fs::read_to_string(&producer_file)
        .map_err(|e| format!("cannot read {}: {e}", producer_file.display()))?
        .lines()
        .map(str::to_string)
        .collect();
    let (faults, faults_note) = read_faults(run_dir, &producer)?;
    let consumed = run_dir.join("consumed.jsonl");
    // The reader's lines, when a reader ran (runs kept before it did have
    // none).
    let reads = match std::fs::read_to_string(run_dir.join("reads.jsonl")) {
        Ok(text) => Some(client::parse_reads(
            &text.lines().map(str::to_string).collect::<Vec<_>>(),
        )?),
        Err(_) => None,
    };
    let verdict = match std::fs::read_to_string(&consumed) {
        Ok(text) => Some(soak::kept_verdict(&producer, &text, reads.as_ref())?),
        Err(_) => None,
    };
    let lost = verdict.as_ref().map(|v| &v.lost[..]);
    let vanished = match (&verdict, &reads) {
        (Some(v), Some(r)) => v
            .reads
            .as_ref()
            .map(|checked| vanished_reads(&checked.vanished, &r.reads)),
        _ => None,
    };
    let mut run = from_sources(&Sources {
        title: String::new(),
        producer: &producer,
        faults: &faults,
        faults_note,
        validation,
        lost,
        vanished: vanished.as_deref(),
        acks_all,
    })?;
    let title = format!(
        "{title}: {} acknowledged{}{}, {} fault(s)",
        run.timeline.acks.len(),
        lost.map_or(String::new(), |l| format!(", {} lost", l.len())),
        vanished.as_ref().map_or(String::new(), |v| format!(
            ", {} read then vanished",
            v.len()
        )),
        faults.len()
    );
    run.timeline.title.clone_from(&title);
    run.partition.title = title;
    super::write(out, &run)
}
