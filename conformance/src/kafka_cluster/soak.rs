//! One run: start the cluster, create the topic (1 partition, RF 3),
//! produce under the nemesis, heal (resume and restart everything, wait
//! for the full ISR, bounded), read the partition back, check it, stop.
//! Everything observed stays in the run directory: each node's directory
//! (its log dir with the partition and, for the controller,
//! `__cluster_metadata-0`; server.log; state-change.log), producer.jsonl
//! and producer.stderr, reads.jsonl and reader.stderr (the consumer that
//! reads beside the producer from its start to the end of the heal),
//! consumed.jsonl, faults.jsonl (each fault applied,
//! on the wall clock), proxies.txt (the client ids each proxy read, with
//! how many connections began with each), schedule.txt and summary.txt.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::checker::{self, Outcome};
use super::client::{self, Produced, Producer, Reader};
use super::cluster::{Cluster, ClusterConfig};
use super::nemesis::{self, Schedule};
use super::node::write_file;
use super::programs::Programs;
use super::summary::Summary;
use super::{Result, Rules};

pub const TOPIC: &str = "soak";

pub struct SoakConfig {
    pub rules: Rules,
    pub seconds: u64,
    pub schedule: Schedule,
    /// Where the cluster and the observations go.
    pub run_dir: PathBuf,
    /// Bound on the heal: the brokers unfenced and the ISR full again.
    pub heal_timeout: Duration,
}

/// Prints progress lines (the binary shows them; a test sees them with --nocapture).
fn say(text: &str) {
    eprintln!("[kafka-cluster] {text}");
}

pub fn run(programs: &Programs, config: &SoakConfig) -> Result<Summary> {
    let began = Instant::now();
    let dir = &config.run_dir;
    write_file(&dir.join("schedule.txt"), &config.schedule.to_string()).or_else(|_| {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        write_file(&dir.join("schedule.txt"), &config.schedule.to_string())
    })?;
    say(&format!(
        "starting 1 controller + 3 brokers under {}",
        dir.join("cluster").display()
    ));
    let mut cluster = Cluster::start(
        programs,
        &ClusterConfig::new(config.rules),
        &dir.join("cluster"),
    )?;
    say(&format!(
        "cluster up in {:.1}s",
        cluster.started_in.as_secs_f64()
    ));
    let result = produce_and_check(programs, config, &mut cluster);
    let _ = write_file(&dir.join("proxies.txt"), &cluster.proxy_clients());
    // Stopped on success and failure alike (Drop kills whatever this leaves).
    let killed = cluster.stop();
    let mut summary = result?;
    if let Ok(killed) = killed {
        if !killed.is_empty() {
            say(&format!("had to kill -9 at the end: {killed:?}"));
        }
    }
    // The observations are complete only once every node has stopped.
    summary.validation =
        crate::kafka_trace::validate_run(Some(programs), dir, TOPIC, config.rules.acks() == "all");
    summary.took = began.elapsed();
    write_file(&dir.join("summary.txt"), &summary.to_string())?;
    Ok(summary)
}

fn produce_and_check(
    programs: &Programs,
    config: &SoakConfig,
    cluster: &mut Cluster,
) -> Result<Summary> {
    let bootstrap = cluster.bootstrap().to_string();
    client::create_topic(programs, &bootstrap, TOPIC)?;
    let mut leaders = vec![wait_for_leader(
        programs,
        &bootstrap,
        Duration::from_secs(30),
    )?];
    say(&format!("topic {TOPIC} created, leader {}", leaders[0]));

    // The consumer reads from the partition's start for the whole run: it
    // starts before the producer and stops after the heal.
    let reader = Reader::start(
        programs,
        &bootstrap,
        TOPIC,
        &config.run_dir.join("reader.stderr"),
    )?;
    let producer = Producer::start(
        programs,
        &bootstrap,
        TOPIC,
        config.rules.acks(),
        config.seconds,
        &config.run_dir.join("producer.stderr"),
    )?;
    let start = Instant::now();
    let end = Duration::from_secs(config.seconds);
    let mut faults = Vec::new();
    for step in &config.schedule.steps {
        if step.at >= end {
            break;
        }
        if let Some(wait) = step.at.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        // Late past the producer's end (the faults before took long): nothing left to hurt.
        if start.elapsed() >= end {
            say(&format!(
                "skipped the faults from {:.1}s on: the producer has ended",
                step.at.as_secs_f64()
            ));
            break;
        }
        let applied = nemesis::apply(cluster, programs, TOPIC, step, start.elapsed())?;
        say(&format!("fault {applied}"));
        leaders.extend([
            applied.leader_before,
            applied.leader_during,
            applied.leader_after,
        ]);
        faults.push(applied);
    }
    // Kept as they happened, for the run's pictures.
    let spans: String = faults.iter().map(|a| a.span().to_line() + "\n").collect();
    write_file(&config.run_dir.join("faults.jsonl"), &spans)?;
    say(&format!(
        "faults done; {} producer lines and {} reader lines so far",
        producer.outcomes_so_far(),
        reader.lines_so_far()
    ));
    // The producer stops sending at `seconds`; each send then ends within its delivery timeout.
    let left = end.saturating_sub(start.elapsed());
    let lines = producer.finish(left + Duration::from_secs(60))?;
    write_file(
        &config.run_dir.join("producer.jsonl"),
        &(lines.join("\n") + "\n"),
    )?;

    let heal_began = Instant::now();
    for done in cluster.heal()? {
        say(&format!("heal: {done}"));
    }
    let healed = wait_full_isr(programs, cluster, config.heal_timeout);
    let healed_in = heal_began.elapsed();
    let final_state = client::describe(programs, &bootstrap, TOPIC).ok();
    if let Some(s) = &final_state {
        leaders.push(s.leader);
    }
    leaders.dedup();
    // The reader catches up with the healed partition before it is stopped.
    std::thread::sleep(Duration::from_secs(2));
    let (read_lines, reader_ended) = reader.finish(Duration::from_secs(15));
    write_file(
        &config.run_dir.join("reads.jsonl"),
        &(read_lines.join("\n") + "\n"),
    )?;
    reader_ended?;
    let read = client::parse_reads(&read_lines)?;
    say(&format!(
        "healed: {healed} in {:.1}s; the reader read {} records in {} lines; reading the partition back",
        healed_in.as_secs_f64(),
        read.reads.len(),
        read_lines.len()
    ));
    let log = client::consume(programs, &bootstrap, TOPIC)?;
    let consumed: Vec<String> = log
        .iter()
        .map(|r| format!("{{\"offset\":{},\"value\":{:?}}}", r.offset, r.value))
        .collect();
    write_file(
        &config.run_dir.join("consumed.jsonl"),
        &(consumed.join("\n") + "\n"),
    )?;

    let (sent, outcomes) = outcomes(&lines)?;
    let mut verdict = checker::check(sent, &outcomes, &log);
    verdict.reads = Some(checker::check_reads(
        sent,
        &read.reads,
        &read.errors,
        read.done,
        &log,
    ));
    Ok(Summary {
        seed: config.schedule.seed,
        rules: config.rules,
        started_in: cluster.started_in,
        verdict,
        faults,
        healed,
        healed_in,
        leaders,
        final_state,
        took: Duration::ZERO,
        validation: Err("not validated yet".into()),
    })
}

/// The producer's outcomes and how many it sent, from its lines.
pub fn outcomes(lines: &[String]) -> Result<(u64, Vec<Outcome>)> {
    let (sent, outcomes) = some_outcomes(lines)?;
    if outcomes.len() as u64 != sent {
        return Err(format!(
            "the producer sent {sent} records but printed {} outcomes",
            outcomes.len()
        ));
    }
    Ok((sent, outcomes))
}

/// The outcomes among the producer's lines and how many it says it sent
/// (a kept run may keep only some of its lines).
fn some_outcomes(lines: &[String]) -> Result<(u64, Vec<Outcome>)> {
    let mut outcomes = Vec::new();
    let mut sent = None;
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        match client::parse_produced(line)? {
            Produced::Outcome(o, _) => outcomes.push(o),
            Produced::Done { sent: n } => sent = Some(n),
        }
    }
    let sent = sent.ok_or("the producer's lines have no final {\"done\":true} line")?;
    Ok((sent, outcomes))
}

#[derive(serde::Deserialize)]
struct ConsumedLine {
    offset: u64,
    value: String,
}

/// The client-side check of a kept run: its producer's lines (all, or
/// some: then only their outcomes are checked) against `consumed.jsonl`
/// as the run wrote it, and the reader's lines (`reads.jsonl`) when a
/// reader ran, as the live run checks them.
pub fn kept_verdict(
    producer_lines: &[String],
    consumed: &str,
    reads: Option<&client::ReaderLines>,
) -> Result<checker::Verdict> {
    let (sent, outcomes) = some_outcomes(producer_lines)?;
    let mut log = Vec::new();
    for (n, line) in consumed.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: ConsumedLine = serde_json::from_str(line)
            .map_err(|e| format!("consumed.jsonl line {}: {e}", n + 1))?;
        log.push(checker::Record {
            offset: r.offset,
            value: r.value,
        });
    }
    let mut verdict = checker::check(sent, &outcomes, &log);
    verdict.reads = reads.map(|r| checker::check_reads(sent, &r.reads, &r.errors, r.done, &log));
    Ok(verdict)
}

fn wait_for_leader(programs: &Programs, bootstrap: &str, limit: Duration) -> Result<i64> {
    let start = Instant::now();
    loop {
        match client::describe(programs, bootstrap, TOPIC) {
            Ok(s) if s.leader >= 0 => return Ok(s.leader),
            Ok(_) | Err(_) if start.elapsed() < limit => {
                std::thread::sleep(Duration::from_millis(500))
            }
            Ok(s) => return Err(format!("no leader for {TOPIC} within {limit:?}: {s:?}")),
            Err(e) => return Err(e),
        }
    }
}

/// Whether every broker is unfenced and every replica back in the ISR within `limit`.
fn wait_full_isr(programs: &Programs, cluster: &mut Cluster, limit: Duration) -> bool {
    let start = Instant::now();
    cluster.wait_started(limit);
    if cluster
        .wait_unfenced(programs, limit.saturating_sub(start.elapsed()))
        .is_err()
    {
        return false;
    }
    let left = limit.saturating_sub(start.elapsed());
    client::wait_full_isr(programs, cluster.bootstrap(), TOPIC, left).1
}

/// A fresh run directory under `parent`, named after the rules and seed.
pub fn run_dir(parent: &Path, rules: Rules, seed: Option<u64>) -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let seed = seed.map_or("fixed".to_string(), |s| format!("seed{s}"));
    parent.join(format!(
        "kafka-soak-{}-{seed}-{stamp}-{}",
        rules.name(),
        std::process::id()
    ))
}
