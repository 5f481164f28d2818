//! What the Kafka interop and differential tests share: running the
//! programs in `conformance/kafka/` (built by its `setup.sh`; outside CI a
//! test skips with a message when Java or Maven is missing, under `CI=true`
//! that fails), whole or streamed line by line, Kafka's view of a log as
//! they print it, and the parsing of `DumpLogSegments` output.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::OnceLock;

use highwater_conformance::kafka_cluster::programs::{Programs, Setup};
use serde::Deserialize;

/// Copies a log directory tree (files and partition directories).
pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Files in `dir` ending in `.suffix`, sorted by name.
pub fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some(suffix))
        .collect();
    out.sort();
    out
}

pub fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| path_str(p).to_string())
        .collect::<Vec<_>>()
        .join(",")
}

// ---------------------------------------------------------------------------
// Running Kafka's programs (conformance/kafka/kafka.sh)
// ---------------------------------------------------------------------------

/// The Kafka interop programs, built by `conformance/kafka/setup.sh`.
pub struct Kafka {
    pub dir: PathBuf,
}

/// Whether this run is CI's: there a missing prerequisite is a failure, not a skip.
pub fn in_ci() -> bool {
    matches!(std::env::var("CI"), Ok(v) if !v.is_empty() && v != "false" && v != "0")
}

/// Writes straight to the process's stderr, past the test harness's capture,
/// so that a skip is seen in a normal `cargo test` run.
pub fn announce(message: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{message}");
    let _ = err.flush();
}

/// Builds the Java programs once per test binary (setup.sh is idempotent) and
/// returns them, or `None` when the test must skip: outside CI only, when
/// Java, Maven or the built jar is missing. Under CI that panics instead.
pub fn kafka(test: &str) -> Option<&'static Kafka> {
    static BUILT: OnceLock<Result<Kafka, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        // setup.sh, run as the cluster harness runs it: Java or Maven missing
        // outside CI is a skip; a build that was attempted and failed is a
        // failure in any run.
        match Programs::setup() {
            Ok(Setup::Ready(p)) => Ok(Kafka { dir: p.dir }),
            Ok(Setup::Missing(why)) => Err(why),
            Err(e) => panic!("{e}"),
        }
    });
    match built {
        Ok(kafka) => Some(kafka),
        Err(why) if in_ci() => panic!("CI=true and the Kafka programs are unavailable: {why}"),
        Err(why) => {
            announce(&format!(
                "SKIPPED {test}: {why} (outside CI only; under CI=true this fails)"
            ));
            None
        }
    }
}

/// What a Kafka program printed.
pub struct Ran {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Kafka {
    /// Runs `kafka.sh ARGS...` and returns its output, whatever its status.
    pub fn run(&self, args: &[&str]) -> Ran {
        let out = Command::new("bash")
            .arg(self.dir.join("kafka.sh"))
            .args(args)
            // Short runs: start fast rather than compile hot code well.
            .env(
                "JAVA_OPTS",
                "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto",
            )
            .stdin(Stdio::null())
            .output()
            .expect("run kafka.sh");
        Ran {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs a program that must succeed and parses the JSON it prints.
    pub fn json<T: serde::de::DeserializeOwned>(&self, args: &[&str]) -> T {
        let ran = self.run(args);
        assert!(
            ran.status.success(),
            "kafka.sh {args:?} failed ({}):\n{}\n{}",
            ran.status,
            ran.stderr,
            ran.stdout
        );
        serde_json::from_str(&ran.stdout)
            .unwrap_or_else(|e| panic!("kafka.sh {args:?} printed no JSON ({e}):\n{}", ran.stdout))
    }

    /// Kafka writes a partition directory (`interop-0`) under `log_dir`; returns
    /// Kafka's own view of what it wrote. `stop` is "close" or "crash".
    pub fn write(&self, log_dir: &Path, stop: &str) -> KView {
        self.json(&["write", "--log-dir", path_str(log_dir), "--stop", stop])
    }

    /// Kafka's log loader opens `log_dir/interop-0` as after an unclean stop.
    pub fn recover(&self, log_dir: &Path) -> KView {
        self.json(&["recover", "--log-dir", path_str(log_dir), "--records"])
    }

    /// Kafka's checkpoint readers on `log_dir`.
    pub fn checkpoints(&self, log_dir: &Path) -> KCheckpoints {
        self.json(&["checkpoints", "--log-dir", path_str(log_dir)])
    }
}

/// A running Kafka program whose stdout is read line by line.
pub struct Lines {
    child: Child,
    out: BufReader<ChildStdout>,
    args: Vec<String>,
}

impl Kafka {
    /// Starts `kafka.sh ARGS...` (a long run: the JIT compiles hot code).
    pub fn stream(&self, args: &[&str]) -> Lines {
        let mut child = Command::new("bash")
            .arg(self.dir.join("kafka.sh"))
            .args(args)
            .env("JAVA_OPTS", "-XX:+UseSerialGC")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kafka.sh");
        let out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped"));
        Lines {
            child,
            out,
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl Lines {
    /// The next line (without its newline) into `buf`; false at the end.
    pub fn next_line(&mut self, buf: &mut Vec<u8>) -> bool {
        buf.clear();
        let n = self.out.read_until(b'\n', buf).expect("read from kafka.sh");
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        n > 0
    }

    /// Waits for the program; panics unless it succeeded. Returns its stderr.
    pub fn finish(mut self) -> String {
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        let status = self.child.wait().expect("wait for kafka.sh");
        assert!(
            status.success(),
            "kafka.sh {:?} failed ({status}):\n{err}",
            self.args
        );
        err
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        // A test that stops reading early (a failure) ends the program it started.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temporary path")
}

// ---------------------------------------------------------------------------
// Kafka's view of a log, as printed by the Java programs
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Deserialize)]
pub struct KView {
    pub log_start_offset: u64,
    pub log_end_offset: u64,
    pub high_watermark: u64,
    pub leader_epochs: Vec<KEpoch>,
    pub segments: Vec<KSegment>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KEpoch {
    pub epoch: i32,
    pub start_offset: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct KSegment {
    pub base_offset: u64,
    pub file: String,
    pub size_bytes: u64,
    pub batches: Vec<KBatch>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct KBatch {
    pub base_offset: u64,
    pub last_offset: u64,
    pub partition_leader_epoch: i32,
    pub position: u64,
    pub size_bytes: u64,
    pub magic: i8,
    pub crc: u32,
    pub is_valid: bool,
    pub max_timestamp: i64,
    pub timestamp_type: String,
    pub compression: String,
    pub record_count: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub is_transactional: bool,
    pub is_control: bool,
    #[serde(default)]
    pub records: Vec<KRecord>,
}

/// What `kafka.sh fixtures` prints: each partition's view and lookups.
#[derive(Debug, Deserialize)]
pub struct KFixtures {
    pub partitions: Vec<KFixture>,
}

#[derive(Debug, Deserialize)]
pub struct KFixture {
    pub case: String,
    pub partition: u32,
    #[serde(flatten)]
    pub view: KView,
    pub lookups: Vec<KLookup>,
}

/// Kafka's `UnifiedLog.fetchOffsetByTimestamp` answer for one target.
#[derive(Debug, Deserialize)]
pub struct KLookup {
    pub target: i64,
    pub offset: Option<u64>,
    pub timestamp: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KRecord {
    pub offset: u64,
    pub timestamp: i64,
    pub key: Option<String>,
    pub value: Option<String>,
    pub headers: Vec<KHeader>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KHeader {
    pub key: String,
    pub value: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct KCheckpoints {
    #[serde(rename = "recovery-point-offset-checkpoint")]
    pub recovery_point: Option<Vec<KOffset>>,
    #[serde(rename = "log-start-offset-checkpoint")]
    pub log_start_offset: Option<Vec<KOffset>>,
    #[serde(rename = "replication-offset-checkpoint")]
    pub replication_offset: Option<Vec<KOffset>>,
    #[serde(rename = "leader-epoch-checkpoint")]
    pub leader_epochs: BTreeMap<String, Vec<KEpoch>>,
    pub clean_shutdown: KMarker,
}

#[derive(Debug, Deserialize)]
pub struct KMarker {
    pub exists: bool,
}

#[derive(Debug, PartialEq, Eq, Deserialize)]
pub struct KOffset {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
}

impl KView {
    pub fn batches(&self) -> impl Iterator<Item = &KBatch> {
        self.segments.iter().flat_map(|s| s.batches.iter())
    }

    pub fn records(&self) -> Vec<(i32, KRecord)> {
        self.batches()
            .flat_map(|b| {
                b.records
                    .iter()
                    .map(|r| (b.partition_leader_epoch, r.clone()))
            })
            .collect()
    }

    /// (base offset, last offset, leader epoch, CRC) of every batch: what recovery kept.
    pub fn batch_ids(&self) -> Vec<(u64, u64, i32, u32)> {
        self.batches()
            .map(|b| {
                (
                    b.base_offset,
                    b.last_offset,
                    b.partition_leader_epoch,
                    b.crc,
                )
            })
            .collect()
    }
}

/// A record as the Java programs print it (hex bytes).
pub fn to_krecord(offset: u64, r: &highwater::storage::Record) -> KRecord {
    KRecord {
        offset,
        timestamp: r.timestamp,
        key: r.key.as_deref().map(hex),
        value: r.value.as_deref().map(hex),
        headers: r
            .headers
            .iter()
            .map(|h| KHeader {
                key: h.key.clone(),
                value: h.value.as_deref().map(hex),
            })
            .collect(),
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------
// DumpLogSegments output
// ---------------------------------------------------------------------------

/// One batch line of `DumpLogSegments --deep-iteration --print-data-log`, with its record lines.
#[derive(Debug, Default)]
pub struct DumpedBatch {
    pub fields: BTreeMap<String, String>,
    pub records: Vec<DumpedRecord>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct DumpedRecord {
    pub offset: u64,
    pub create_time: i64,
    pub key_size: i32,
    pub value_size: i32,
    pub header_keys: Vec<String>,
    pub key: Option<String>,
    pub payload: Option<String>,
}

/// Every dumped `.log` file: its name, the base offset it reported, and its batches.
#[derive(Debug)]
pub struct DumpedLog {
    pub file: String,
    pub starting_offset: u64,
    pub batches: Vec<DumpedBatch>,
}

/// `name: value` pairs of a DumpLogSegments line (every value here is one token).
pub fn fields(line: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut tokens = line.split_whitespace();
    while let Some(name) = tokens.next() {
        let name = name
            .strip_suffix(':')
            .unwrap_or_else(|| panic!("no name at {name:?} in {line}"));
        let value = tokens
            .next()
            .unwrap_or_else(|| panic!("no value for {name} in {line}"));
        out.insert(name.to_string(), value.to_string());
    }
    out
}

pub fn parse_record_line(line: &str) -> DumpedRecord {
    let rest = line.strip_prefix("| ").expect("record line");
    let (meta, contents) = {
        let open = rest.find("headerKeys: [").expect("headerKeys") + "headerKeys: [".len();
        let close = open + rest[open..].find(']').expect("]");
        (&rest[..close + 1], &rest[close + 1..])
    };
    let header_start = meta.find("headerKeys: ").unwrap();
    let f = fields(&meta[..header_start]);
    let keys = &meta[header_start + "headerKeys: [".len()..meta.len() - 1];
    let header_keys = if keys.is_empty() {
        Vec::new()
    } else {
        keys.split(',').map(str::to_string).collect()
    };
    let (mut key, mut payload) = (None, None);
    let mut contents = contents;
    if let Some(k) = contents.strip_prefix(" key: ") {
        match k.find(" payload: ") {
            Some(at) => {
                key = Some(k[..at].to_string());
                contents = &k[at..];
            }
            None => {
                key = Some(k.to_string());
                contents = "";
            }
        }
    }
    if let Some(p) = contents.strip_prefix(" payload: ") {
        payload = Some(p.to_string());
    } else {
        assert!(
            contents.is_empty(),
            "unexpected record text {contents:?} in {line}"
        );
    }
    DumpedRecord {
        offset: f["offset"].parse().unwrap(),
        create_time: f["CreateTime"].parse().unwrap(),
        key_size: f["keySize"].parse().unwrap(),
        value_size: f["valueSize"].parse().unwrap(),
        header_keys,
        key,
        payload,
    }
}

/// Parses the stdout of a deep `.log` dump; any line it does not know fails the test.
pub fn parse_log_dump(stdout: &str) -> Vec<DumpedLog> {
    let mut logs: Vec<DumpedLog> = Vec::new();
    for line in stdout.lines() {
        if let Some(path) = line.strip_prefix("Dumping ") {
            let file = Path::new(path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            logs.push(DumpedLog {
                file,
                starting_offset: u64::MAX,
                batches: Vec::new(),
            });
            continue;
        }
        let log = logs
            .last_mut()
            .unwrap_or_else(|| panic!("output before Dumping: {line}"));
        if let Some(n) = line.strip_prefix("Log starting offset: ") {
            log.starting_offset = n.parse().unwrap();
        } else if line.starts_with("baseOffset: ") {
            log.batches.push(DumpedBatch {
                fields: fields(line),
                records: Vec::new(),
            });
        } else if line.starts_with("| offset: ") {
            let batch = log.batches.last_mut().expect("record before batch");
            batch.records.push(parse_record_line(line));
        } else if line.starts_with("Found ") {
            panic!("DumpLogSegments found invalid bytes: {line}");
        } else if !line.trim().is_empty() {
            panic!("unexpected DumpLogSegments line: {line}");
        }
    }
    logs
}

/// DumpLogSegments reports problems on stderr and still exits 0. The only
/// stderr it may print here is its per-file "non-consecutive" note for a
/// segment that does not start at offset 0: it starts every file expecting
/// offset 0 (`-1 is followed by BASE`). Anything else fails the test.
pub fn assert_clean_dump_stderr(stderr: &str, dir: &Path) {
    let mut lines = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !l.starts_with("OpenJDK 64-Bit Server VM warning"));
    while let Some(line) = lines.next() {
        let path = line
            .strip_prefix("Non-consecutive offsets in ")
            .unwrap_or_else(|| {
                panic!(
                    "DumpLogSegments reported an error for {}:\n{stderr}",
                    dir.display()
                )
            });
        let base: u64 = Path::new(path)
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad file in {line}"));
        let next = lines.next().unwrap_or_default();
        assert_eq!(
            next.trim(),
            format!("-1 is followed by {base}"),
            "DumpLogSegments found non-consecutive offsets in {path}:\n{stderr}"
        );
    }
}
