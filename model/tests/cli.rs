//! The `highwater check` command line: verdicts and exit statuses for
//! custom runs, limits, Ctrl-C, bad input, and the JSON report's shape.

mod bin;

use bin::{highwater, text};
use std::process::{Command, Stdio};

#[test]
fn an_overridden_run_gets_a_verdict_from_expect() {
    let broken = ["check", "--acks", "1", "--records", "1", "-q", "-t", "2"];
    let o = highwater(&[&broken[..], &["--expect", "holds"]].concat());
    assert_eq!(o.status.code(), Some(12), "{}", text(&o));
    assert!(text(&o).contains("NOT as expected"));
    let o = highwater(&[&broken[..], &["--expect", "acknowledged records survive"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = highwater(&[&broken[..], &["--expect", "counterexample"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Without --expect nothing may break, as in TLC: the first
    // counterexample printed, and TLC's status for a safety violation.
    let o = highwater(&broken);
    assert_eq!(o.status.code(), Some(12), "{}", text(&o));
    assert!(text(&o).contains("Shortest counterexample to"));
    assert!(text(&o).contains("stopping at the first counterexample"));
}

#[test]
fn a_limited_run_says_it_is_not_exhaustive_and_does_not_decide() {
    let o = highwater(&[
        "check",
        "--records",
        "3",
        "--max-states",
        "20000",
        "-q",
        "-t",
        "2",
        "--expect",
        "holds",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("NOT EXHAUSTIVE"), "{out}");
    assert!(out.contains("verdict: not decided"), "{out}");
    assert!(out.contains("beyond every measured preset"), "{out}");
    assert!(
        !out.contains(" holds\n"),
        "nothing is claimed to hold: {out}"
    );
}

#[test]
fn ctrl_c_prints_the_partial_report() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["check", "--records", "3", "-q", "-t", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start highwater");
    // The first line is printed once the Ctrl-C handler is in place: wait
    // for it rather than for a time, which a busy machine may overrun.
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first).expect("a first line");
    assert!(first.starts_with("highwater: checking"), "{first}");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    let o = child.wait_with_output().expect("wait");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("the rest");
    let out = format!("{rest}{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(130), "{out}");
    assert!(out.contains("exit status 130"), "{out}");
    assert!(out.contains("NOT EXHAUSTIVE: interrupted"), "{out}");
    assert!(
        out.contains("not checked (the search did not finish)"),
        "{out}"
    );
}

/// A reader that goes away (`highwater check | head -1`) ends the check as
/// it ends a Unix tool, by SIGPIPE, not by a panic (exit 101) in `println!`.
#[cfg(unix)]
#[test]
fn a_reader_that_goes_away_ends_the_check_by_sigpipe() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["check", "--records", "1", "-t", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start highwater");
    let mut first = String::new();
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    stdout.read_line(&mut first).expect("a first line");
    drop(stdout);
    let o = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(first.starts_with("highwater: checking"), "{first}");
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {err}",
        o.status
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_is_a_clear_error() {
    for (args, says) in [
        (
            vec!["check", "--threads", "100000"],
            "more than this machine can use",
        ),
        (vec!["check", "--threads", "0"], "at least 1"),
        (vec!["check", "--simulate", "--max-depth", "0"], "max-depth"),
        (vec!["check", "--replicas", "9"], "replicas"),
        (vec!["check", "--min-isr", "4"], "min-isr"),
        (vec!["check", "--seconds", "0"], "seconds"),
        (vec!["check", "--simulate", "--exhaustive"], "exhaustive"),
        (vec!["check", "--seed", "3"], "simulate"),
        (
            vec!["check", "--expect", "everything"],
            "expected holds, counterexample",
        ),
        (
            vec!["check", "--dfs", "--expect", "the partition can heal"],
            "progress property",
        ),
        (vec!["check", "--memory-budget", "8XB"], "not a size"),
        (vec!["check", "--memory-budget", "1.5GiB"], "not a size"),
        (vec!["check", "--memory-budget", "0"], "0 bytes"),
        (
            vec!["check", "--memory-budget", "1GiB", "--dfs"],
            "default search only",
        ),
        (
            vec!["check", "--memory-budget", "1GiB", "--workers", "2"],
            "single-process search only",
        ),
    ] {
        let o = highwater(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{args:?}");
    }
}

#[test]
fn the_json_report_is_versioned_and_spells_acks_as_the_cli() {
    let o = highwater(&["check", "--preset", "acks-1", "--json", "-t", "2"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(v["schema"], "highwater-check-report/4");
    assert_eq!(v["config"]["acks"], "1");
    assert_eq!(v["outcome"], "as-expected");
    assert_eq!(v["ended"], "stopped-at-counterexample");
    assert!(v["search"]["kind"].is_string(), "{}", v["search"]);
}

/// `--trace-out` is checked before the search: a directory that cannot be
/// made, or a trace this run could overwrite, is an error at once (exit 2,
/// no search); `--force` overwrites.
#[test]
fn trace_out_is_checked_before_the_search_and_force_overwrites() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("traces");
    let out_s = out.to_str().expect("utf-8");
    let broken = ["check", "--acks", "1", "--records", "1", "-q", "-t", "2"];
    let o = highwater(&[&broken[..], &["--trace-out", out_s]].concat());
    assert_eq!(o.status.code(), Some(12), "{}", text(&o));
    let written = out.join("acknowledged-records-survive.itf.json");
    assert!(written.exists(), "{}", text(&o));
    // Again into the same directory: refused before any search.
    let o = highwater(&[&broken[..], &["--trace-out", out_s]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--force"), "{}", text(&o));
    assert!(
        !text(&o).contains("done after"),
        "no search ran: {}",
        text(&o)
    );
    let o = highwater(&[&broken[..], &["--trace-out", out_s, "--force"]].concat());
    assert_eq!(o.status.code(), Some(12), "{}", text(&o));
    assert!(text(&o).contains("written to"), "{}", text(&o));
    // A file where the directory should be.
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let o = highwater(&["check", "--trace-out", file.to_str().unwrap(), "-q"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        !text(&o).contains("done after"),
        "no search ran: {}",
        text(&o)
    );
}

/// A run of a size not known beforehand (an overridden preset), with a
/// budget far below what it needs.
const OVER_BUDGET: [&str; 10] = [
    "check",
    "--records",
    "1",
    "--max-epoch",
    "1",
    "--memory-budget",
    "1MiB",
    "-q",
    "-t",
    "2",
];

#[test]
fn a_run_that_does_not_fit_its_memory_budget_stops_with_a_partial_report() {
    let o = highwater(&OVER_BUDGET);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(152), "{out}");
    assert!(
        out.contains("NOT EXHAUSTIVE: stopped by its memory budget"),
        "{out}"
    );
    assert!(out.contains("verdict: not decided"), "{out}");
    assert!(
        !out.contains(" holds\n"),
        "nothing is claimed to hold: {out}"
    );
    // The states explored, what was held, and what the next step needed.
    let line = out
        .lines()
        .find(|l| l.starts_with("memory budget 1.00 MiB: stopped after "))
        .unwrap_or_else(|| panic!("the budget's line: {out}"));
    let explored: u64 = line["memory budget 1.00 MiB: stopped after ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.replace(',', "").parse().ok())
        .unwrap_or_else(|| panic!("a count: {line}"));
    assert!(explored > 0, "{line}");
    assert!(line.contains("by the engine's count"), "{line}");
    assert!(line.contains("a budget of"), "{line}");

    let json = highwater(&[&OVER_BUDGET[..], &["--json"]].concat());
    assert_eq!(json.status.code(), Some(152), "{}", text(&json));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(v["ended"], "over-budget");
    assert_eq!(v["exit_status"], 152);
    assert_eq!(v["progress"]["unique_states"], explored);
    assert_eq!(v["memory"]["budget_bytes"], 1 << 20);
    assert_eq!(v["memory"]["over_budget"]["step"], "search");
    let held = v["memory"]["over_budget"]["held_bytes"]
        .as_u64()
        .expect("held");
    assert!(held <= 1 << 20, "held {held} past the budget");
}

/// The planted flaw that never checks the budget: the same run goes on to
/// the end, so the test above would fail without the check.
#[test]
fn without_its_check_the_budget_is_run_past() {
    let o = highwater(&[&OVER_BUDGET[..], &["--planted-flaw", "budget-unchecked"]].concat());
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(!out.contains("stopped by its memory budget"), "{out}");
    // Nor is a preset that cannot fit refused at once: it runs to its limit.
    let o = highwater(&[
        "check",
        "--preset",
        "tla-kip320",
        "--memory-budget",
        "1MiB",
        "--max-states",
        "1000",
        "--planted-flaw",
        "budget-unchecked",
        "-q",
        "-t",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

#[test]
fn a_preset_that_cannot_fit_is_refused_at_once_with_an_estimate() {
    let started = std::time::Instant::now();
    let o = highwater(&[
        "check",
        "--preset",
        "safe-hw-checkpoint",
        "--memory-budget",
        "4GiB",
        "-q",
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(152), "{out}");
    assert!(
        out.contains("verdict: refused: preset safe-hw-checkpoint has 96,292,461 unique states"),
        "{out}"
    );
    assert!(
        out.contains("GiB, more than --memory-budget 4.00 GiB"),
        "{out}"
    );
    assert!(out.contains("exit status 152"), "{out}");
    assert!(!out.contains("done after"), "no search ran: {out}");
    assert!(started.elapsed().as_secs() < 10, "at once");
}

/// A budget with room to spare: the same report as without one, but for
/// times and memory.
#[test]
fn a_generous_memory_budget_changes_nothing() {
    let run = |extra: &[&str]| {
        let args = [
            &["check", "--preset", "tla-kip320", "--json", "-q", "-t", "2"][..],
            extra,
        ]
        .concat();
        let o = highwater(&args);
        let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        for timing in [
            "seconds",
            "shortest_seconds",
            "states_per_second",
            "peak_memory_mib",
        ] {
            v[timing] = serde_json::Value::Null;
        }
        v["progress"]["seconds"] = serde_json::Value::Null;
        v["progress_check"]["seconds"] = serde_json::Value::Null;
        v["memory"] = serde_json::Value::Null;
        (o.status.code(), v)
    };
    let (status, with) = run(&["--memory-budget", "4GiB"]);
    assert_eq!(status, Some(0));
    assert_eq!(with["ended"], "exhaustive");
    assert_eq!(run(&[]), (status, with));
}
