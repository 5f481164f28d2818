//! The Java client commands (`ClusterClient.java`) against a running
//! cluster: readiness, topic creation, the partition's state, the
//! producer (a long-running process whose JSON lines are collected as
//! they come) and the consumer that reads the partition back.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Deserialize;

use super::checker::{Outcome, Record};
use super::programs::Programs;
use super::{pids, Result};

fn args(pairs: &[(&str, &str)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(k, v)| [format!("--{k}"), v.to_string()])
        .collect()
}

/// Waits (at most `limit`) until `count` brokers are registered and unfenced.
pub fn wait_brokers(
    programs: &Programs,
    bootstrap: &str,
    count: usize,
    limit: Duration,
) -> Result<()> {
    let ms = limit.as_millis().to_string();
    programs
        .run_client(
            "brokers",
            &args(&[
                ("bootstrap", bootstrap),
                ("count", &count.to_string()),
                ("timeout-ms", &ms),
            ]),
            limit + Duration::from_secs(15),
        )
        .map(|_| ())
}

pub fn create_topic(programs: &Programs, bootstrap: &str, topic: &str) -> Result<()> {
    programs
        .run_client(
            "create-topic",
            &args(&[
                ("bootstrap", bootstrap),
                ("topic", topic),
                ("replication-factor", "3"),
            ]),
            Duration::from_secs(60),
        )
        .map(|_| ())
}

/// A partition as the controller's metadata has it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct PartitionState {
    pub partition: u32,
    /// -1 when there is none.
    pub leader: i64,
    pub replicas: Vec<u32>,
    pub isr: Vec<u32>,
    pub elr: Vec<u32>,
    pub last_known_elr: Vec<u32>,
}

pub fn describe(programs: &Programs, bootstrap: &str, topic: &str) -> Result<PartitionState> {
    let out = programs.run_client(
        "describe",
        &args(&[("bootstrap", bootstrap), ("topic", topic)]),
        Duration::from_secs(30),
    )?;
    let line = out
        .lines()
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| format!("describe printed no partition: {out:?}"))?;
    serde_json::from_str(line).map_err(|e| format!("describe printed {line:?}: {e}"))
}

/// Polls until the partition has a leader and every replica is in its ISR;
/// the last state seen and whether that happened within `limit`.
pub fn wait_full_isr(
    programs: &Programs,
    bootstrap: &str,
    topic: &str,
    limit: Duration,
) -> (Option<PartitionState>, bool) {
    let start = std::time::Instant::now();
    let mut last = None;
    while start.elapsed() < limit {
        if let Ok(s) = describe(programs, bootstrap, topic) {
            let full = s.leader >= 0 && s.isr.len() == s.replicas.len();
            last = Some(s);
            if full {
                return (last, true);
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    (last, false)
}

#[derive(Deserialize)]
struct ConsumedLine {
    offset: Option<u64>,
    value: Option<String>,
    done: Option<bool>,
}

/// Reads partition 0 from its start to its end offset.
pub fn consume(programs: &Programs, bootstrap: &str, topic: &str) -> Result<Vec<Record>> {
    let out = programs.run_client(
        "consume",
        &args(&[
            ("bootstrap", bootstrap),
            ("topic", topic),
            ("timeout-ms", "90000"),
        ]),
        Duration::from_secs(120),
    )?;
    let mut records = Vec::new();
    let mut done = false;
    for line in out.lines().filter(|l| l.starts_with('{')) {
        let parsed: ConsumedLine =
            serde_json::from_str(line).map_err(|e| format!("consume printed {line:?}: {e}"))?;
        match (parsed.offset, parsed.value, parsed.done) {
            (Some(offset), Some(value), _) => records.push(Record { offset, value }),
            (_, _, Some(true)) => done = true,
            _ => return Err(format!("consume printed {line:?}")),
        }
    }
    if !done {
        return Err("consume ended without reaching the partition's end".into());
    }
    Ok(records)
}

#[derive(Deserialize)]
struct ProducedLine {
    value: Option<u64>,
    outcome: Option<String>,
    offset: Option<u64>,
    error: Option<String>,
    done: Option<bool>,
    sent: Option<u64>,
    sent_ms: Option<u64>,
    ms: Option<u64>,
}

/// Parses one line the producer printed.
pub fn parse_produced(line: &str) -> Result<Produced> {
    let p: ProducedLine =
        serde_json::from_str(line).map_err(|e| format!("the producer printed {line:?}: {e}"))?;
    // Lines written before the producer printed times have none.
    let timing = p
        .sent_ms
        .zip(p.ms)
        .map(|(sent_ms, at_ms)| Timing { sent_ms, at_ms });
    match (p.value, p.outcome.as_deref(), p.offset, p.done, p.sent) {
        (Some(value), Some("ack"), Some(offset), _, _) => {
            Ok(Produced::Outcome(Outcome::Acked { value, offset }, timing))
        }
        (Some(value), Some("error"), _, _, _) => Ok(Produced::Outcome(
            Outcome::Indeterminate {
                value,
                error: p.error.unwrap_or_default(),
            },
            timing,
        )),
        (_, _, _, Some(true), Some(sent)) => Ok(Produced::Done { sent }),
        _ => Err(format!("the producer printed {line:?}")),
    }
}

/// When a send was made and when its outcome came, on the host's wall
/// clock (ms since the epoch), which the brokers' and controller's logs
/// share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub sent_ms: u64,
    pub at_ms: u64,
}

pub enum Produced {
    Outcome(Outcome, Option<Timing>),
    Done { sent: u64 },
}

/// The producer, running: its lines (raw, as printed) gathered by a thread.
pub struct Producer {
    child: Option<Child>,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl Producer {
    pub fn start(
        programs: &Programs,
        bootstrap: &str,
        topic: &str,
        acks: &str,
        seconds: u64,
        stderr: &std::path::Path,
    ) -> Result<Producer> {
        let mut cmd = programs.client(
            "produce",
            &args(&[
                ("bootstrap", bootstrap),
                ("topic", topic),
                ("acks", acks),
                ("seconds", &seconds.to_string()),
                ("interval-ms", "5"),
            ]),
        );
        // Its stderr (an exception that ends it, say) goes to a file kept with the run.
        let err = std::fs::File::create(stderr)
            .map_err(|e| format!("cannot create {}: {e}", stderr.display()))?;
        cmd.stdout(Stdio::piped()).stderr(Stdio::from(err));
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the producer: {e}"))?;
        pids::register(child.id() as i32);
        let stdout = child.stdout.take().expect("piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        Ok(Producer {
            child: Some(child),
            lines,
            reader: Some(reader),
        })
    }

    /// Outcomes printed so far.
    pub fn outcomes_so_far(&self) -> usize {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Waits (at most `limit`) for the producer to end and returns its raw lines.
    pub fn finish(mut self, limit: Duration) -> Result<Vec<String>> {
        let mut child = self.child.take().expect("started");
        let pid = child.id() as i32;
        let start = std::time::Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if start.elapsed() > limit => break None,
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => return Err(format!("waiting for the producer: {e}")),
            }
        };
        if status.is_none() {
            let _ = pids::signal_group(pid, libc::SIGKILL);
            let _ = child.wait();
        }
        pids::unregister(pid);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let lines = std::mem::take(&mut *self.lines.lock().unwrap_or_else(|e| e.into_inner()));
        match status {
            Some(s) if s.success() => Ok(lines),
            Some(s) => Err(format!(
                "the producer failed ({s}) after {} lines",
                lines.len()
            )),
            None => Err(format!("the producer did not end within {limit:?}")),
        }
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id() as i32;
            let _ = pids::signal_group(pid, libc::SIGKILL);
            let _ = child.wait();
            pids::unregister(pid);
        }
    }
}
