//! The Java client commands (`ClusterClient.java`) against a running
//! cluster: readiness, topic creation, the partition's state, the
//! producer (a long-running process whose JSON lines are collected as
//! they come) and the consumer that reads the partition back.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Deserialize;

use super::checker::{Outcome, Read, Record};
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

/// A client process, running: its lines (raw, as printed) gathered by a
/// thread as they come; stopped by its PID.
struct LineProcess {
    what: &'static str,
    child: Option<Child>,
    /// Held open while it runs; closing it asks the reader to stop.
    stdin: Option<ChildStdin>,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl LineProcess {
    fn start(
        what: &'static str,
        mut cmd: std::process::Command,
        stderr: &std::path::Path,
    ) -> Result<LineProcess> {
        // Its stderr (an exception that ends it, say) goes to a file kept with the run.
        let err = std::fs::File::create(stderr)
            .map_err(|e| format!("cannot create {}: {e}", stderr.display()))?;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err));
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the {what}: {e}"))?;
        pids::register(child.id() as i32);
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        Ok(LineProcess {
            what,
            child: Some(child),
            stdin,
            lines,
            reader: Some(reader),
        })
    }

    fn so_far(&self) -> usize {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Closes its stdin, waits (at most `limit`) for it to end, kills its
    /// process group by PID past that, and returns its raw lines.
    fn finish(self, limit: Duration) -> Result<Vec<String>> {
        let (lines, ended) = self.finish_lines(limit);
        ended.map(|()| lines)
    }

    /// As `finish`, the lines returned whether or not it ended well.
    fn finish_lines(mut self, limit: Duration) -> (Vec<String>, Result<()>) {
        drop(self.stdin.take());
        let mut child = self.child.take().expect("started");
        let pid = child.id() as i32;
        let start = std::time::Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(Ok(s)),
                Ok(None) if start.elapsed() > limit => break None,
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => break Some(Err(format!("waiting for the {}: {e}", self.what))),
            }
        };
        if !matches!(status, Some(Ok(_))) {
            let _ = pids::signal_group(pid, libc::SIGKILL);
            let _ = child.wait();
        }
        pids::unregister(pid);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let lines = std::mem::take(&mut *self.lines.lock().unwrap_or_else(|e| e.into_inner()));
        let ended = match status {
            Some(Ok(s)) if s.success() => Ok(()),
            Some(Ok(s)) => Err(format!(
                "the {} failed ({s}) after {} lines",
                self.what,
                lines.len()
            )),
            Some(Err(e)) => Err(e),
            None => Err(format!("the {} did not end within {limit:?}", self.what)),
        };
        (lines, ended)
    }
}

impl Drop for LineProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id() as i32;
            let _ = pids::signal_group(pid, libc::SIGKILL);
            let _ = child.wait();
            pids::unregister(pid);
        }
    }
}

/// The producer, running.
pub struct Producer(LineProcess);

impl Producer {
    pub fn start(
        programs: &Programs,
        bootstrap: &str,
        topic: &str,
        acks: &str,
        seconds: u64,
        stderr: &std::path::Path,
    ) -> Result<Producer> {
        let cmd = programs.client(
            "produce",
            &args(&[
                ("bootstrap", bootstrap),
                ("topic", topic),
                ("acks", acks),
                ("seconds", &seconds.to_string()),
                ("interval-ms", "5"),
            ]),
        );
        LineProcess::start("producer", cmd, stderr).map(Producer)
    }

    /// Outcomes printed so far.
    pub fn outcomes_so_far(&self) -> usize {
        self.0.so_far()
    }

    /// Waits (at most `limit`) for the producer to end and returns its raw lines.
    pub fn finish(self, limit: Duration) -> Result<Vec<String>> {
        self.0.finish(limit)
    }
}

/// The consumer that reads the partition beside the producer for the
/// whole run (`ClusterClient.java read`), running.
pub struct Reader(LineProcess);

impl Reader {
    pub fn start(
        programs: &Programs,
        bootstrap: &str,
        topic: &str,
        stderr: &std::path::Path,
    ) -> Result<Reader> {
        let cmd = programs.client("read", &args(&[("bootstrap", bootstrap), ("topic", topic)]));
        LineProcess::start("reader", cmd, stderr).map(Reader)
    }

    /// Lines printed so far.
    pub fn lines_so_far(&self) -> usize {
        self.0.so_far()
    }

    /// Asks it to stop (its stdin closed), waits at most `limit`, then
    /// kills it by its PID; its raw lines, and whether it ended well.
    pub fn finish(self, limit: Duration) -> (Vec<String>, Result<()>) {
        self.0.finish_lines(limit)
    }
}

#[derive(Deserialize)]
struct ReadLine {
    session: Option<u64>,
    offset: Option<u64>,
    value: Option<String>,
    ms: Option<u64>,
    error: Option<String>,
    done: Option<bool>,
}

/// What the reader printed: its reads, its errors, and whether it ended
/// with its final line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReaderLines {
    pub reads: Vec<Read>,
    pub errors: Vec<String>,
    pub done: bool,
}

/// Parses the reader's lines.
pub fn parse_reads(lines: &[String]) -> Result<ReaderLines> {
    let mut out = ReaderLines::default();
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let r: ReadLine =
            serde_json::from_str(line).map_err(|e| format!("the reader printed {line:?}: {e}"))?;
        match (r.session, r.offset, r.value, r.error, r.done) {
            (Some(session), Some(offset), Some(value), _, _) => out.reads.push(Read {
                session,
                offset,
                value,
                ms: r.ms.unwrap_or(0),
            }),
            (_, _, _, Some(error), _) => out.errors.push(error),
            (_, _, _, _, Some(true)) => out.done = true,
            _ => return Err(format!("the reader printed {line:?}")),
        }
    }
    Ok(out)
}
