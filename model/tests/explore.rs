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
