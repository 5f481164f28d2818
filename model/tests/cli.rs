//! The `highwater check` command line: verdicts and exit statuses for
//! custom runs, limits, Ctrl-C, bad input, and the JSON report's shape.

use std::process::{Command, Output, Stdio};

fn highwater(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(args)
        .output()
        .expect("run highwater")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn an_overridden_run_gets_a_verdict_from_expect() {
    let broken = ["check", "--acks", "1", "--records", "1", "-q", "-t", "2"];
    let o = highwater(&[&broken[..], &["--expect", "holds"]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("NOT as expected"));
    let o = highwater(&[&broken[..], &["--expect", "acknowledged records survive"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = highwater(&[&broken[..], &["--expect", "counterexample"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Without --expect: no verdict, the first counterexample printed.
    let o = highwater(&broken);
    assert_eq!(o.status.code(), Some(0));
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

/// Ctrl-C once the check said what it checks (`check` installs its
/// handler before it prints its first line: a signal sent after a fixed
/// wait could, on a busy machine, come before the handler and kill it).
#[test]
fn ctrl_c_prints_the_partial_report() {
    use std::io::{BufRead, BufReader, Read};
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["check", "--records", "3", "-q", "-t", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start highwater");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("the first line");
    assert!(first.starts_with("highwater: checking"), "{first}");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    let mut rest = String::new();
    stdout
        .read_to_string(&mut rest)
        .expect("the rest of stdout");
    let o = child.wait_with_output().expect("wait");
    let out = format!("{first}{rest}{}", text(&o));
    assert_eq!(o.status.code(), Some(130), "{out}");
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
    assert_eq!(v["schema"], "highwater-check-report/3");
    assert_eq!(v["config"]["acks"], "1");
    assert_eq!(v["outcome"], "as-expected");
    assert_eq!(v["ended"], "stopped-at-counterexample");
    assert!(v["search"]["kind"].is_string(), "{}", v["search"]);
}
