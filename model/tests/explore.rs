//! `highwater explore` serves stateright's explorer, and the counterexample
//! link it prints leads, over HTTP, along the path it printed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

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
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args([
            "explore",
            "--preset",
            "tla-kip320",
            "--acks",
            "1",
            "--addr",
            "127.0.0.1:0",
            "--threads",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start highwater explore");
    let stdout = child.stdout.take().expect("stdout");
    let _server = Server(child);

    // Read until the explorer line; keep the counterexample link.
    let mut link = None;
    let mut explorer = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read stdout");
        if line.starts_with("counterexample (\"acknowledged records survive\"") {
            link = line.split_whitespace().last().map(str::to_string);
        }
        if line.starts_with("explorer: ") {
            explorer = Some(line);
            break;
        }
        assert!(Instant::now() < deadline, "explore took too long");
    }
    assert!(explorer.is_some(), "explore printed its address");
    let link = link.expect("explore printed a counterexample link");
    let rest = link.strip_prefix("http://").expect("an http link");
    let (addr, fragment) = rest.split_once("/#/steps").expect("a #/steps link");
    let indices: Vec<usize> = fragment
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("action indices"))
        .collect();
    assert!(indices.len() >= 2, "the path has steps: {link}");

    // The server may take a moment to bind after printing.
    let start = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "explorer never listened"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, page) = get(addr, "/");
    assert_eq!(status, 200);
    assert!(
        page.contains("<html") || page.contains("<!DOCTYPE"),
        "the explorer page"
    );

    // Walk the path: at each prefix the next action index is offered, and the
    // last state breaks the property (the explorer shows the property's own
    // discovery, and the state after the last step has the record missing).
    let mut prefix = format!("/.states/{}", indices[0]);
    let mut last_state = String::new();
    let mut last_svg = String::new();
    for &i in &indices[1..] {
        let (status, body) = get(addr, &prefix);
        assert_eq!(status, 200, "GET {prefix}: {body}");
        let steps: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("JSON steps at {prefix}: {e}: {body:?}"));
        let step = steps
            .as_array()
            .expect("a list of steps")
            .iter()
            .find(|s| s["actionIndex"] == i)
            .unwrap_or_else(|| panic!("step {i} offered at {prefix}"));
        let state = step["state"].as_str().expect("a state follows the action");
        last_state = state.to_string();
        last_svg = step["svg"]
            .as_str()
            .expect("each state has a picture")
            .to_string();
        prefix.push_str(&format!("/{i}"));
    }
    // The picture of the last state names what broke there.
    assert!(last_svg.contains("<svg"), "{last_svg}");
    assert!(
        last_svg.contains("Broken: acknowledged records survive"),
        "the picture says what broke:\n{last_svg}"
    );
    // The property breaks only once something was acknowledged.
    assert!(
        last_state.contains("acknowledged: a@"),
        "the last state has an acknowledged record:\n{last_state}"
    );
    let (status, body) = get(addr, "/.status");
    assert_eq!(status, 200);
    let status: serde_json::Value = serde_json::from_str(&body).expect("JSON status");
    assert_eq!(
        status["done"], true,
        "the explorer's bounded search is done"
    );
    let props = status["properties"].as_array().expect("properties");
    // The explorer's discovery is the printed path, so the link opens on
    // the property marked as broken.
    let found = props
        .iter()
        .find(|p| p[1] == "acknowledged records survive")
        .expect("the property is shown");
    assert_eq!(format!("/{}", found[2].as_str().unwrap()), fragment);
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["explore", "--addr", "127.0.0.1:0", "--trace"])
        .arg(&trace)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start highwater explore");
    let stdout = child.stdout.take().expect("stdout");
    let _server = Server(child);
    let mut link = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read stdout");
        if line.starts_with("the trace (\"acknowledged records survive\"") {
            link = line.split_whitespace().last().map(str::to_string);
        }
        if line.starts_with("explorer: ") {
            break;
        }
    }
    let link = link.expect("the trace's link");
    let rest = link.strip_prefix("http://").unwrap();
    let (addr, fragment) = rest.split_once("/#/steps").unwrap();
    let (_, body) = get(addr, "/.status");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["done"], true);
    let found = &status["properties"][0];
    assert_eq!(found[1], "acknowledged records survive");
    assert_eq!(format!("/{}", found[2].as_str().unwrap()), fragment);
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
