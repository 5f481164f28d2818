//! `highwater check` distributed on timely dataflow: the binary started
//! twice on this host, as process 0 and 1 of two (one worker each, free
//! ports on 127.0.0.1 in a host file), prints the report the single-process
//! run prints, in JSON and in text, but for its times and memory. A planted
//! flaw (owners that let the last parent reach a state win) shows the
//! comparison failing. Bad flags give an error, never a panic. Both
//! processes are stopped by their PID on every path.

#[path = "../../testkit/long_tier.rs"]
mod long_tier;

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_highwater");

/// A child process, killed (by its PID) when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a run printed, and how it ended.
struct Output {
    status: i32,
    stdout: String,
    stderr: String,
}

/// Waits for `child`, at most `limit`, reading what it prints meanwhile
/// (a report larger than a pipe's buffer would otherwise block it).
fn finish(mut child: Running, limit: Duration) -> Output {
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                pipe.read_to_string(&mut text).expect("read a pipe");
            }
            text
        })
    };
    let stdout = drain(
        child
            .0
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .0
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("wait") {
            break status;
        }
        assert!(
            start.elapsed() < limit,
            "a process ran for more than {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status: status.code().unwrap_or(-1),
        stdout: stdout.join().expect("stdout"),
        stderr: stderr.join().expect("stderr"),
    }
}

fn spawn(args: &[&str]) -> Running {
    Running(
        Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start highwater"),
    )
}

/// Two free ports on 127.0.0.1, in a host file.
fn hostfile(dir: &tempfile::TempDir) -> String {
    let a = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let b = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let text = format!(
        "# process 0, then 1\n{}\n{}\n",
        a.local_addr().unwrap(),
        b.local_addr().unwrap()
    );
    let path = dir.path().join("hosts");
    std::fs::write(&path, text).expect("write the host file");
    path.display().to_string()
}

/// The single-process run's output, on two threads.
fn single(args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(["-q", "-t", "2"]);
    finish(spawn(&all), Duration::from_secs(1800))
}

/// Process 0's output, run as 2 processes of 1 worker on this host.
fn two_processes(args: &[&str], extra: &[&str]) -> Output {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let hosts = hostfile(&dir);
    let with = |process: &str| {
        let mut all = args.to_vec();
        all.extend(["-q", "-n", "2", "-w", "1", "--process", process]);
        all.extend(["--hostfile", &hosts]);
        all.extend(extra);
        all.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let one = with("1");
    let zero = with("0");
    let one = spawn(&one.iter().map(String::as_str).collect::<Vec<_>>());
    let zero = spawn(&zero.iter().map(String::as_str).collect::<Vec<_>>());
    let zero = finish(zero, Duration::from_secs(1800));
    let one = finish(one, Duration::from_secs(60));
    assert_eq!(one.status, 0, "process 1: {}", one.stderr);
    assert_eq!(one.stdout, "", "process 1 prints nothing on stdout");
    zero
}

/// The report without what differs from run to run: times, rates and
/// memory (JSON fields, the `memory` object, which only one process counts
/// by part, the figures of the text's two timing lines, and its memory
/// line).
fn normalized(report: &str) -> String {
    let mut in_memory = false;
    let report: Vec<&str> = report
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            if t.starts_with("\"memory\": {") {
                in_memory = true;
            }
            let keep = !in_memory && !t.starts_with("memory per unique state:");
            if in_memory && t.starts_with('}') {
                in_memory = false;
            }
            keep
        })
        .collect();
    let report = report.join("\n");
    const TIMING: [&str; 5] = [
        "\"seconds\"",
        "\"shortest_seconds\"",
        "\"states_per_second\"",
        "\"peak_memory_mib\"",
        "\"graph_bytes\"",
    ];
    report
        .lines()
        .filter(|l| !TIMING.iter().any(|t| l.trim_start().starts_with(t)))
        .map(|l| {
            if l.starts_with("done after ") || l.starts_with("progress check: ") {
                // Keep the counts, drop times, rates and sizes.
                l.split([',', ':'])
                    .filter(|part| {
                        let seconds = part
                            .strip_suffix('s')
                            .is_some_and(|p| p.ends_with(|c: char| c.is_ascii_digit()));
                        !(seconds || part.ends_with("states/s") || part.contains("MiB"))
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn normalizing_keeps_the_counts_and_drops_the_times() {
    let done = "done after 5.1s: 7744787 states, 1059765 unique, depth 31, 1506584 states/s, \
                peak memory 239 MiB";
    assert_eq!(
        normalized(done),
        " 7744787 states| 1059765 unique| depth 31"
    );
    let check = "progress check: 5530947 fault-free edges, 130570 recovery states beyond the \
                 epoch bound (130570 shown to heal by one walk, not expanded), graph 106 MiB, 0.3s";
    assert_eq!(
        normalized(check),
        "progress check| 5530947 fault-free edges| 130570 recovery states beyond the epoch bound \
         (130570 shown to heal by one walk| not expanded)"
    );
}

/// One process's report and process 0's of two agree, as JSON (`formats`
/// true: and as text). Returns the single-process report last compared.
fn assert_same(args: &[&str], formats: &[bool]) -> String {
    let mut last = String::new();
    for &json in formats {
        let mut args = args.to_vec();
        if json {
            args.push("--json");
        }
        let want = single(&args);
        let got = two_processes(&args, &[]);
        assert_eq!(got.status, want.status, "{args:?}: {}", got.stderr);
        assert!(!want.stdout.is_empty());
        assert_eq!(
            normalized(&got.stdout),
            normalized(&want.stdout),
            "{args:?}: two processes disagree with one"
        );
        last = want.stdout;
    }
    last
}

#[test]
fn tla_kip320_on_two_processes_is_reported_as_on_one() {
    assert_same(&["check", "--preset", "tla-kip320"], &[true, false]);
}

/// The default preset, 20 million states: JSON only, which holds every
/// figure, verdict and path the text shows (the text is compared above).
/// The single-process run is also the long tier's one search of `safe`
/// itself: every verdict as the preset expects (safety, reachability and
/// progress) and its state count the one the preset records.
#[test]
fn safe_on_two_processes_is_reported_as_on_one() {
    if !long_tier::enabled("about 5 minutes: safe, once on one process, once on two") {
        return;
    }
    let report = assert_same(&["check", "--preset", "safe"], &[true]);
    let report: serde_json::Value = serde_json::from_str(&report).expect("a JSON report");
    assert_eq!(
        report["mismatches"],
        serde_json::json!([]),
        "safe: every verdict as expected"
    );
    assert_eq!(report["exit_status"], 0);
    let p = highwater_model::presets::Preset::find("safe").expect("the default preset");
    assert_eq!(
        report["progress"]["unique_states"].as_u64(),
        p.measured.map(|m| m.unique_states),
        "update SAFE_UNIQUE_STATES (used for estimates and warnings) to the new count"
    );
}

#[test]
fn the_comparison_catches_the_last_parent_winning() {
    let args = ["check", "--preset", "tla-kip320", "--json"];
    let want = single(&args);
    let got = two_processes(&args, &["--planted-flaw", "last-parent-wins"]);
    assert_ne!(
        normalized(&got.stdout),
        normalized(&want.stdout),
        "the planted flaw went unnoticed"
    );
}

#[test]
fn bad_flags_are_errors_not_panics() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let hosts = hostfile(&dir);
    let missing = dir.path().join("no-such-file").display().to_string();
    let busy = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let busy_file = dir.path().join("busy");
    std::fs::write(
        &busy_file,
        format!("{}\n127.0.0.1:1\n", busy.local_addr().unwrap()),
    )
    .unwrap();
    let busy_file = busy_file.display().to_string();
    let cases: [(&[&str], &str); 5] = [
        (
            &["-n", "2", "--process", "2", "--hostfile", &hosts],
            "--process 2 is not one of the 2 processes",
        ),
        (
            &["-n", "2", "--hostfile", &missing],
            "cannot read the host file",
        ),
        (
            &["-n", "3", "--hostfile", &hosts],
            "3 processes need 3 addresses",
        ),
        (
            &["-n", "2", "--process", "0", "--hostfile", &busy_file],
            "cannot listen on",
        ),
        (&["-w", "2", "--dfs"], "cannot be used with"),
    ];
    for (flags, says) in cases {
        let mut args = vec!["check", "--preset", "tla-kip320", "-q"];
        args.extend(flags);
        let out = finish(spawn(&args), Duration::from_secs(60));
        assert_eq!(out.status, 2, "{flags:?}: {}", out.stderr);
        assert!(
            out.stderr.contains(says),
            "{flags:?} should say {says:?}: {}",
            out.stderr
        );
        assert!(
            !out.stderr.contains("panicked"),
            "{flags:?}: {}",
            out.stderr
        );
    }
}

/// Whether a TCP connection between the two addresses of `hosts` is
/// established (Linux: `/proc/net/tcp`, addresses in hex, state 01).
fn connected(hosts: &str) -> bool {
    let text = std::fs::read_to_string(hosts).expect("the host file");
    let ports: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            format!(
                ":{:04X}",
                l.rsplit(':').next().unwrap().parse::<u16>().unwrap()
            )
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table.lines().skip(1).any(|row| {
        let f: Vec<&str> = row.split_whitespace().collect();
        f.len() > 3 && f[3] == "01" && ports.iter().any(|p| f[1].ends_with(p.as_str()))
    })
}

/// A process killed mid-run: the other says so in one line and exits with
/// the status of an error (2), not with timely's panics.
#[test]
fn a_process_that_goes_away_is_an_error_not_a_panic() {
    if !std::path::Path::new("/proc/net/tcp").exists() {
        eprintln!("skipped: needs Linux's /proc/net/tcp to see the processes connect");
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let hosts = hostfile(&dir);
    let with = |process: &'static str| {
        let args = ["check", "--records", "1", "-q", "-n", "2", "-w", "1"];
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--process", process, "--hostfile", &hosts]);
        spawn(&all)
    };
    let mut one = with("1");
    let zero = with("0");
    let start = Instant::now();
    while !connected(&hosts) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the processes never connected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Past the handshake (a few bytes each way), into the search (seconds).
    std::thread::sleep(Duration::from_secs(1));
    one.0.kill().expect("kill process 1 by its PID");
    let zero = finish(zero, Duration::from_secs(300));
    if zero.status == 0 {
        // Process 1 had done its part before it was killed: nothing to see.
        eprintln!("process 0 finished before process 1 was killed; not decided");
        return;
    }
    assert_eq!(zero.status, 2, "{}", zero.stderr);
    assert!(
        zero.stderr.contains("a process went away"),
        "{}",
        zero.stderr
    );
    assert!(!zero.stderr.contains("panicked"), "{}", zero.stderr);
}
