//! `highwater explore` serves its explorer at once, while the check runs;
//! the counterexample link it prints leads, over HTTP, along the path it
//! printed; one Ctrl-C stops it, during the check or after.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to the explorer");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("send request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read response");
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

#[test]
fn explore_serves_the_printed_counterexample_path() {
    // A small model with a counterexample: acks=1 under tla-kip320's bounds.
    let run = Running::start(&[
        "--preset",
        "tla-kip320",
        "--acks",
        "1",
        "--addr",
        "127.0.0.1:0",
        "--threads",
        "1",
    ]);
    // The address comes first; the counterexample's link once the check is
    // done, then a last line.
    let addr = address(&run.line("explorer: ", Duration::from_secs(120)));
    let line = run.line(
        "counterexample (\"acknowledged records survive\"",
        Duration::from_secs(300),
    );
    let link = line.split_whitespace().last().expect("a link").to_string();
    run.line("done: ", Duration::from_secs(60));
    let rest = link.strip_prefix("http://").expect("an http link");
    let (link_addr, fragment) = rest.split_once("/#/steps/").expect("a #/steps link");
    assert_eq!(link_addr, addr);
    let (status, page) = get(&addr, "/");
    assert_eq!(status, 200);
    assert!(page.contains("<html"), "the explorer page");
    let (status, script) = get(&addr, "/explorer.js");
    assert_eq!(status, 200);
    assert!(script.contains("/.path/"), "the page's script");

    // The path: step 0 the initial state, then one step an action, the
    // last state breaking the property, its picture saying so.
    let (status, body) = get(&addr, &format!("/.path/{fragment}"));
    assert_eq!(status, 200, "GET /.path/{fragment}: {body}");
    let path: serde_json::Value = serde_json::from_str(&body).expect("JSON path");
    let steps = path["steps"].as_array().expect("steps");
    let actions = fragment.split('/').count() - 1;
    assert!(actions >= 2, "the path has steps: {link}");
    assert_eq!(steps.len(), actions + 1, "step 0 and one a action");
    assert_eq!(steps[0]["step"], 0);
    assert!(steps[0]["action"].is_null(), "step 0 is the initial state");
    assert!(steps[1]["action"].is_string());
    let last = &steps[actions];
    assert_eq!(last["step"], actions);
    assert_eq!(last["path"], fragment);
    assert!(last["svg"].as_str().unwrap().contains("<svg"));
    assert!(
        last["svg"]
            .as_str()
            .unwrap()
            .contains("Broken: acknowledged records survive"),
        "the picture says what broke: {last}"
    );
    assert!(
        last["table"].as_str().unwrap().contains("acknowledged: a@"),
        "the last state has an acknowledged record: {last}"
    );
    assert!(last["broken"]
        .as_array()
        .unwrap()
        .contains(&"acknowledged records survive".into()));
    // Only the last step breaks it.
    for s in &steps[..actions] {
        assert!(!s["broken"]
            .as_array()
            .unwrap()
            .contains(&"acknowledged records survive".into()));
    }
    // The actions enabled at its end lead one step further.
    let next = path["next"].as_array().expect("next actions");
    assert!(!next.is_empty());
    assert_eq!(next[0]["path"], format!("{fragment}/0"));

    // The page's verdict names the printed path.
    let status = wait_done(&addr, Duration::from_secs(60));
    let found = status["properties"]
        .as_array()
        .expect("properties")
        .iter()
        .find(|p| p["name"] == "acknowledged records survive")
        .expect("the property is shown");
    assert_eq!(found["verdict"], "counterexample");
    assert_eq!(found["path"], fragment);
    assert_eq!(found["steps"], actions);
    assert_eq!(status["check"]["done"], true);

    // A path the model does not have is a clear 404, not a crash.
    let (code, body) = get(&addr, "/.path/0/99");
    assert_eq!(code, 404);
    assert!(body.contains("no action 99"), "{body}");
    let (code, body) = get(&addr, "/.path/0/x");
    assert_eq!(code, 404);
    assert!(body.contains("not an action index"), "{body}");
}

#[test]
fn explore_refuses_a_bad_address_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args([
            "explore",
            "--preset",
            "tla-kip320",
            "--addr",
            "not-an-address",
        ])
        .output()
        .expect("run highwater explore");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot serve on not-an-address"), "{err}");
}

#[test]
fn explore_serves_a_saved_trace_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["check", "--preset", "acks-1", "-q", "--trace-out"])
        .arg(dir.path())
        .output()
        .expect("run highwater check");
    assert!(out.status.success());
    let trace = dir.path().join("acknowledged-records-survive.itf.json");
    let run = Running::start(&["--addr", "127.0.0.1:0", "--trace", trace.to_str().unwrap()]);
    let line = run.line(
        "the trace (\"acknowledged records survive\"",
        Duration::from_secs(60),
    );
    let link = line.split_whitespace().last().unwrap();
    let rest = link.strip_prefix("http://").unwrap();
    let (addr, fragment) = rest.split_once("/#/steps/").unwrap();
    let (_, body) = get(addr, "/.status");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["done"], true);
    assert!(status["check"].is_null(), "nothing is checked");
    let found = &status["properties"][0];
    assert_eq!(found["name"], "acknowledged records survive");
    assert_eq!(found["path"], fragment);
    let (code, body) = get(addr, &format!("/.path/{fragment}"));
    assert_eq!(code, 200);
    let path: serde_json::Value = serde_json::from_str(&body).unwrap();
    let last = path["steps"].as_array().unwrap().last().unwrap().clone();
    assert!(last["broken"]
        .as_array()
        .unwrap()
        .contains(&"acknowledged records survive".into()));
}

/// `highwater explore` running, its stdout read line by line in a thread
/// (so that a test can wait for a line with a deadline).
struct Running {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
            .arg("explore")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start highwater explore");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Running { child, lines }
    }

    /// The first line starting with `prefix`, within `limit`.
    fn line(&self, prefix: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(e) => panic!("no line starting {prefix:?} within {limit:?}: {e}"),
            }
        }
    }

    /// One SIGINT, as one Ctrl-C sends; the exit status within `limit`.
    fn interrupt(&mut self, limit: Duration) -> Option<i32> {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: a signal to our own child process.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address in an `explorer: http://ADDR/ ...` line.
fn address(line: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|a| a.split('/').next())
        .unwrap_or_else(|| panic!("an address in {line:?}"))
        .to_string()
}

/// Polls `/.status` until the check is done.
fn wait_done(addr: &str, limit: Duration) -> serde_json::Value {
    let deadline = Instant::now() + limit;
    loop {
        let (_, body) = get(addr, "/.status");
        let status: serde_json::Value = serde_json::from_str(&body).expect("JSON status");
        if status["done"] == true {
            return status;
        }
        assert!(Instant::now() < deadline, "the check never finished");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn explore_answers_while_the_check_runs_and_one_ctrl_c_stops_it() {
    // `safe` takes minutes to check: the explorer must serve from the start.
    let mut run = Running::start(&["--preset", "safe", "--addr", "127.0.0.1:0", "-t", "1"]);
    let line = run.line("explorer: ", Duration::from_secs(60));
    let addr = address(&line);
    let (status, body) = get(&addr, "/.status");
    assert_eq!(status, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).expect("JSON status");
    assert_eq!(
        status["done"], false,
        "the check is still running: {status}"
    );
    assert_eq!(status["check"]["done"], false, "{status}");
    // Its progress, and the estimate from the preset's measured states.
    let known = status["check"]["known_states"].as_u64().expect("measured");
    assert!(known > 0, "{status}");
    // The page itself, and a path, are served during the check too.
    let (code, page) = get(&addr, "/");
    assert_eq!(code, 200);
    assert!(page.contains("<html"), "{page}");
    let (code, path) = get(&addr, "/.path/0");
    assert_eq!(code, 200, "{path}");

    // One Ctrl-C ends it, mid-check: 130, as a shell reports SIGINT.
    assert_eq!(run.interrupt(Duration::from_secs(30)), Some(130));
    assert!(TcpStream::connect(&addr).is_err(), "the port is closed");
}

#[test]
fn one_ctrl_c_stops_the_explorer_once_the_check_is_done() {
    let mut run = Running::start(&[
        "--preset",
        "tla-kip320",
        "--acks",
        "1",
        "--addr",
        "127.0.0.1:0",
        "-q",
    ]);
    let line = run.line("explorer: ", Duration::from_secs(120));
    let addr = address(&line);
    wait_done(&addr, Duration::from_secs(300));
    assert_eq!(
        run.interrupt(Duration::from_secs(30)),
        Some(130),
        "one Ctrl-C stops the explorer"
    );
    assert!(TcpStream::connect(&addr).is_err(), "the port is closed");
}
