//! `highwater explore` serves its explorer at once, while the check runs;
//! the counterexample link it prints leads, over HTTP, along the path it
//! printed; stateright's own explorer starts on a second address when the
//! check ends, and its printed link leads along the same path, the broken
//! property discovered at its end; one Ctrl-C stops it all, during the
//! check or after.

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
    // The addresses come first; the counterexample's link once the check
    // is done, then stateright's, then a last line.
    let start: Vec<String> = (0..3)
        .map(|_| run.next_line(Duration::from_secs(120)))
        .collect();
    assert!(start[1].starts_with("explorer: "), "{start:?}");
    assert!(
        start[2].starts_with("stateright's explorer: http://")
            && start[2].ends_with(" once the check ends"),
        "{start:?}"
    );
    let addr = address(&start[1]);
    let line = run.line(
        "counterexample (\"acknowledged records survive\"",
        Duration::from_secs(300),
    );
    let link = line.split_whitespace().last().expect("a link").to_string();
    let second = run.next_line(Duration::from_secs(60));
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

    // The same path in stateright's explorer, on the address printed at
    // the start.
    let second_addr = address(&start[2]);
    assert_ne!(second_addr, addr);
    let stateright_link = second
        .strip_prefix("  in stateright's explorer: ")
        .unwrap_or_else(|| panic!("stateright's link after the counterexample: {second:?}"));
    assert_eq!(
        stateright_link,
        format!("http://{second_addr}/#/steps/{fragment}")
    );
    assert_eq!(status["stateright"]["state"], "up", "{status}");
    assert_eq!(
        status["stateright"]["port"],
        second_addr
            .rsplit(':')
            .next()
            .unwrap()
            .parse::<u16>()
            .unwrap()
    );
    stateright_serves_the_path(
        &second_addr,
        fragment,
        "acknowledged records survive",
        "Always",
    );
    stateright_agrees(&status, &second_addr);
}

/// Each property our page (`ours`, its `/.status`) has a verdict for,
/// stateright's explorer at `addr` shows alike: discovered at the very path
/// ours links (an always- or progress property as Always, a
/// sometimes-property as Sometimes), or not at all when ours has none; and
/// one ours has no verdict for, not at all.
fn stateright_agrees(ours: &serde_json::Value, addr: &str) {
    let (code, body) = get(addr, "/.status");
    assert_eq!(code, 200, "{body}");
    let theirs: serde_json::Value = serde_json::from_str(&body).expect("JSON status");
    let theirs = theirs["properties"].as_array().expect("properties");
    for p in ours["properties"].as_array().expect("properties") {
        let name = p["name"].as_str().unwrap();
        let shown = theirs.iter().find(|q| q[1] == name);
        let decided = ["holds", "counterexample", "reached", "not-reached"]
            .contains(&p["verdict"].as_str().unwrap());
        if !decided {
            assert!(shown.is_none(), "{name}, undecided, is shown: {shown:?}");
            continue;
        }
        let shown = shown.unwrap_or_else(|| panic!("{name} is not shown: {theirs:?}"));
        let expectation = if p["kind"] == "sometimes" {
            "Sometimes"
        } else {
            "Always"
        };
        assert_eq!(shown[0], expectation, "{name}");
        assert_eq!(shown[2], p["path"], "{name}: ours {p}, theirs {shown}");
    }
}

/// stateright's explorer at `addr` has discovered `property` at the end
/// of `fragment` (`0/3/1`) and nowhere else, and its `/.states` follow that
/// path, its last state drawn broken.
fn stateright_serves_the_path(addr: &str, fragment: &str, property: &str, expectation: &str) {
    let (code, page) = get(addr, "/");
    assert_eq!(code, 200);
    assert!(page.contains("Stateright Explorer"), "stateright's page");
    // Its search is done, the property discovered at the end of the path.
    let (code, body) = get(addr, "/.status");
    assert_eq!(code, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).expect("JSON status");
    assert_eq!(status["done"], true, "{status}");
    let discovered = serde_json::json!([expectation, property, fragment]);
    assert!(
        status["properties"]
            .as_array()
            .unwrap()
            .contains(&discovered),
        "{status}"
    );
    let steps = follow(addr, fragment);
    let actions = steps.len() - 1;
    for (k, step) in steps.iter().enumerate() {
        let svg = step["svg"].as_str().expect("a picture");
        assert!(svg.contains("class=\"highwater-state\""), "our picture");
        let broken = svg.contains(&format!("Broken: {property}"));
        assert_eq!(broken, k == actions, "step {k} of {fragment}: {svg}");
        assert!(
            step["properties"].as_array().unwrap().contains(&discovered),
            "{step}"
        );
    }
    // A path the model does not have is its 404.
    let (code, _) = get(addr, "/.states/0/99");
    assert_eq!(code, 404);
}

/// The steps of `fragment` (`0/3/1`) in stateright's explorer at `addr`:
/// each from the `/.states` of the path before it (the next states there),
/// the one with the path's action index. Step 0 is the initial state.
fn follow(addr: &str, fragment: &str) -> Vec<serde_json::Value> {
    let indices: Vec<&str> = fragment.split('/').collect();
    (0..indices.len())
        .map(|k| {
            let before = indices[..k].join("/");
            let (code, body) = get(addr, &format!("/.states/{before}"));
            assert_eq!(code, 200, "GET /.states/{before}: {body}");
            let next: serde_json::Value = serde_json::from_str(&body).expect("JSON states");
            let index: u64 = indices[k].parse().expect("an action index");
            let step = next
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["actionIndex"] == index)
                .unwrap_or_else(|| panic!("/.states/{before} has action {index}: {next}"))
                .clone();
            assert_eq!(step["action"].is_null(), k == 0, "step {k}: {step}");
            step
        })
        .collect()
}

#[test]
fn stateright_shows_progress_counterexamples_and_examples_as_the_check_found_them() {
    // A check to the end with every kind of path: the sometimes-properties'
    // examples and both progress properties' states that cannot heal (the
    // ISR rule highwater had before Kafka's, as a mutation).
    let run = Running::start(&[
        "--records",
        "1",
        "--mutation",
        "expand-on-leader-hw",
        "--addr",
        "127.0.0.1:0",
        "-q",
    ]);
    let addr = address(&run.line("explorer: ", Duration::from_secs(120)));
    let second = address(&run.line("stateright's explorer: ", Duration::from_secs(60)));
    let line = run.line(
        "a state that cannot heal (\"the partition can heal\"",
        Duration::from_secs(1200),
    );
    let link = run.next_line(Duration::from_secs(60));
    run.line("done: ", Duration::from_secs(60));
    let fragment = line.split_once("/#/steps/").expect("a path").1;
    assert_eq!(
        link,
        format!("  in stateright's explorer: http://{second}/#/steps/{fragment}")
    );
    let status = wait_done(&addr, Duration::from_secs(60));
    let verdicts: Vec<_> = status["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["kind"].as_str().unwrap(), p["verdict"].as_str().unwrap()))
        .collect();
    for (kind, verdict) in [("progress", "counterexample"), ("sometimes", "reached")] {
        assert!(verdicts.contains(&(kind, verdict)), "{verdicts:?}");
    }
    stateright_agrees(&status, &second);
    let steps = follow(&second, fragment);
    assert_eq!(steps.len(), fragment.split('/').count());
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
    let second_addr = address(&run.line("stateright's explorer: ", Duration::from_secs(60)));
    let line = run.line(
        "the trace (\"acknowledged records survive\"",
        Duration::from_secs(60),
    );
    let second = run.next_line(Duration::from_secs(60));
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
    // stateright's view of the same path.
    assert_eq!(
        second,
        format!("  in stateright's explorer: http://{second_addr}/#/steps/{fragment}")
    );
    assert_eq!(status["stateright"]["state"], "up", "{status}");
    stateright_serves_the_path(
        &second_addr,
        fragment,
        "acknowledged records survive",
        "Always",
    );
}

/// `highwater explore ARGS`, which must refuse them: its exit code, stderr
/// and stdout. Each run checks `safe`, which takes minutes: an explore that
/// does not refuse at once is killed and fails the test, rather than
/// serving forever.
fn refused(args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["explore", "--preset", "safe"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start highwater explore");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("explore {args:?} was not refused: it kept running");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code(), err, out)
}

#[test]
fn explore_refuses_a_bad_stateright_address_before_the_check() {
    let (code, err, out) = refused(&[
        "--addr",
        "127.0.0.1:0",
        "--stateright-addr",
        "not-an-address",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("error: cannot serve stateright's explorer on not-an-address"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // Refused before the check and before anything is served.
    assert!(out.is_empty(), "{out}");
}

#[test]
fn explore_refuses_an_address_off_this_machine() {
    // Neither explorer asks who browses it: both serve loopback alone.
    for (args, what) in [
        (
            ["--addr", "0.0.0.0:0", "--stateright-addr", "127.0.0.1:0"],
            "",
        ),
        (
            ["--addr", "127.0.0.1:0", "--stateright-addr", "0.0.0.0:0"],
            "stateright's explorer ",
        ),
    ] {
        let (code, err, out) = refused(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "cannot serve {what}on 0.0.0.0:0: 0.0.0.0 is not a loopback address"
            )),
            "{args:?}: {err}"
        );
        assert!(out.is_empty(), "{args:?}: {out}");
    }
}

#[test]
fn explore_refuses_the_same_address_for_both_explorers() {
    // A port free a moment ago; should another program take it meanwhile,
    // explore's own bind fails first: then try another.
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let (code, err, out) = refused(&["--addr", &addr, "--stateright-addr", &addr]);
        if err.contains(&format!("cannot serve on {addr}")) {
            continue;
        }
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains(&format!(
                "--stateright-addr {addr} is the explorer's own address"
            )),
            "{err}"
        );
        assert!(out.is_empty(), "{out}");
        return;
    }
    panic!("no free port to try");
}

#[test]
fn explore_refuses_a_busy_next_port_for_stateright_by_default() {
    // A port held here, whose port before it is free: explore's own.
    let (held, ours) = loop {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = held.local_addr().unwrap().port();
        if port > 1024 && std::net::TcpListener::bind(("127.0.0.1", port - 1)).is_ok() {
            break (held, port - 1);
        }
    };
    let (code, err, out) = refused(&["--addr", &format!("127.0.0.1:{ours}")]);
    let theirs = held.local_addr().unwrap();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("cannot serve stateright's explorer on {theirs}")),
        "the port after --addr's, busy: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.is_empty(), "{out}");
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

    /// The next line, within `limit`.
    fn next_line(&self, limit: Duration) -> String {
        self.lines
            .recv_timeout(limit)
            .unwrap_or_else(|e| panic!("no line within {limit:?}: {e}"))
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
    let second = address(&run.line("stateright's explorer: ", Duration::from_secs(60)));
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
    // stateright's explorer's address is held: it says when it starts, and
    // the page says so too.
    let (code, note) = get(&second, "/");
    assert_eq!(code, 503, "{note}");
    assert!(note.contains("starts here when the check ends"), "{note}");
    assert_eq!(status["stateright"]["state"], "starting", "{status}");
    assert_eq!(status["stateright"]["url"], format!("http://{second}/"));

    // One Ctrl-C ends it, mid-check: 130, as a shell reports SIGINT.
    assert_eq!(run.interrupt(Duration::from_secs(30)), Some(130));
    assert!(TcpStream::connect(&addr).is_err(), "the port is closed");
    assert!(TcpStream::connect(&second).is_err(), "the second port too");
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
    let second = address(&run.line("stateright's explorer: ", Duration::from_secs(60)));
    let status = wait_done(&addr, Duration::from_secs(300));
    // Both serve: stateright's explorer is up once the page is done.
    assert_eq!(status["stateright"]["state"], "up", "{status}");
    let (code, _) = get(&second, "/.status");
    assert_eq!(code, 200);
    assert_eq!(
        run.interrupt(Duration::from_secs(30)),
        Some(130),
        "one Ctrl-C stops the explorer"
    );
    assert!(TcpStream::connect(&addr).is_err(), "the port is closed");
    assert!(TcpStream::connect(&second).is_err(), "the second port too");
}
