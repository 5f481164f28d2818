//! The explorer in a real browser: `highwater explore` serves a historical
//! preset, headless Chromium opens the printed deep link, and the rendered
//! page must show the path (its steps numbered as the CLI's), the state's
//! picture (an SVG with a lane per replica and the HW) and the broken
//! property. A screenshot is left in the test's output directory. While a
//! check runs, the page shows its progress. stateright's own explorer,
//! started beside it when the check ends, opens the printed stateright link
//! on the same path with the broken property's counterexample found there.
//!
//! Chromium comes from `.ci/run` (Debian's `chromium`); outside CI the test
//! skips, saying so, when it is missing. `HIGHWATER_CHROMIUM` names another.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Each line `stdout` prints, read in a thread, until a line starting
/// with `last`, within `limit` (a line that never comes fails the test
/// instead of hanging it).
fn lines_until(stdout: ChildStdout, last: &str, limit: Duration) -> Vec<String> {
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + limit;
    let mut out = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                let end = line.starts_with(last);
                out.push(line);
                if end {
                    return out;
                }
            }
            Err(e) => panic!("no line starting {last:?} within {limit:?} ({e}); printed: {out:#?}"),
        }
    }
}

/// The address in the `explorer: http://ADDR/ ...` line.
fn address_of(lines: &[String]) -> String {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("explorer: "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("explore printed its address")
        .to_string()
}

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HIGHWATER_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Chromium, headless, with nothing that reaches for the network.
fn headless(bin: &PathBuf, profile: &std::path::Path) -> Command {
    let mut c = Command::new(bin);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--virtual-time-budget=10000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .stderr(Stdio::null());
    c
}

/// Runs `chromium` to its end, its stdout kept, within a limit: a page that
/// never settles (one that reloads itself, as stateright's address does
/// until its explorer starts) fails the test instead of hanging it.
fn run(chromium: &mut Command) -> std::process::Output {
    let limit = Duration::from_secs(300);
    let mut child = chromium
        .stdout(Stdio::piped())
        .spawn()
        .expect("run chromium");
    let mut stdout = child.stdout.take().expect("stdout");
    let read = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut out);
        out
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {limit:?}: {chromium:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = read.join().expect("chromium's output");
    std::process::Output {
        status,
        stdout,
        stderr: Vec::new(),
    }
}

#[test]
fn a_deep_link_shows_the_path_the_picture_and_the_broken_property() {
    let Some(browser) = chromium() else {
        assert!(!in_ci(), "CI must install chromium (.ci/run does)");
        eprintln!("browser test: SKIPPED: no chromium found (install Debian's chromium, or set HIGHWATER_CHROMIUM)");
        return;
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args([
            "explore",
            "--preset",
            "hw-truncation",
            "--addr",
            "127.0.0.1:0",
            "-q",
            "-t",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start highwater explore");
    let stdout = child.stdout.take().expect("stdout");
    let _server = Server(child);
    let lines = lines_until(stdout, "done: ", Duration::from_secs(300));
    let at = lines
        .iter()
        .position(|l| l.starts_with("counterexample (\"committed records survive\""))
        .expect("explore printed the deep link");
    let link = lines[at]
        .split_whitespace()
        .last()
        .expect("a link")
        .to_string();
    // stateright's link to the same path, on the line after.
    let stateright_link = lines[at + 1]
        .strip_prefix("  in stateright's explorer: ")
        .unwrap_or_else(|| panic!("stateright's link after {link}: {lines:#?}"))
        .to_string();

    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&out).expect("output directory");
    let profile = tempfile::tempdir().expect("a browser profile");
    let dom = run(headless(&browser, profile.path())
        .arg("--dump-dom")
        .arg(&link));
    assert!(dom.status.success(), "chromium failed");
    let page = String::from_utf8_lossy(&dom.stdout);
    std::fs::write(out.join("explorer.html"), page.as_bytes()).expect("keep the page");

    // The path: every step of the counterexample, numbered as the CLI's
    // step tables number them, ending at the HW advance.
    // http://ADDR/#/steps/0/a1/a2...: the initial state, then each action.
    let actions = link
        .split_once("#/steps/")
        .expect("a path")
        .1
        .split('/')
        .count()
        - 1;
    assert!(page.contains("step 0: initial state"), "step 0 is shown");
    assert!(
        page.contains(&format!("step {actions}: LeaderAdvanceHw(A, hw 1)")),
        "its last step is shown as step {actions}"
    );
    assert!(!page.contains(&format!("step {}:", actions + 1)));
    assert!(!page.contains("Pre-init") && !page.contains("Init 0"));
    // The picture: our SVG, a lane per replica, the HW drawn.
    assert!(
        page.contains("class=\"highwater-state\""),
        "the state's picture"
    );
    for r in ["A", "B", "C"] {
        assert!(page.contains(&format!("data-replica=\"{r}\"")), "lane {r}");
    }
    assert!(page.contains("class=\"hw\""), "the HW line");
    // The broken property: marked on the page and named in the picture.
    assert!(
        page.contains(r#"data-property="committed records survive" data-verdict="counterexample""#),
        "the property is marked as broken"
    );
    assert!(page.contains("(this step)"), "at this step");
    assert!(page.contains("Broken: committed records survive"));
    // Each path links to stateright's explorer, which is up.
    let fragment = link.split_once("#/steps/").expect("a path").1;
    let (base, sr_fragment) = stateright_link.split_once("#/steps/").expect("a path");
    assert_eq!(sr_fragment, fragment, "the same path in both explorers");
    assert!(
        page.contains(&format!(
            r#"<a href="{stateright_link}" class="stateright">open in stateright's explorer</a>"#
        )),
        "our page links the path to stateright's explorer"
    );
    assert!(page.contains("open this path in stateright's explorer"));

    // stateright's own page, opened at the printed link: the same path,
    // our picture of its last state, and the property's counterexample
    // found at exactly that path.
    let sr = run(headless(&browser, profile.path())
        .arg("--dump-dom")
        .arg(&stateright_link));
    assert!(sr.status.success(), "chromium failed");
    let sr_page = String::from_utf8_lossy(&sr.stdout);
    std::fs::write(out.join("stateright.html"), sr_page.as_bytes()).expect("keep the page");
    assert!(sr_page.contains("Stateright Explorer"), "stateright's page");
    assert!(sr_page.contains("Path of Actions"), "the path is shown");
    // Its path list: Pre-init, Init 0, then one entry per action, each a
    // link to that step; the last is the selected one, the HW advance.
    let selected = sr_page
        .split("<a class=\"font-code is-selected-state\"")
        .nth(1)
        .unwrap_or_else(|| panic!("a selected step: {sr_page}"));
    assert!(
        selected.starts_with(&format!(r##" href="#/steps/{fragment}?offset=0""##)),
        "the selected step is the path's end: {}",
        &selected[..selected.len().min(300)]
    );
    let text = selected.split('>').nth(1).unwrap_or("");
    assert!(
        text.starts_with("LeaderAdvanceHw(A, hw 1)"),
        "its last step is the HW advance: {text}"
    );
    // The property's counterexample: found, at exactly the printed path.
    let found = format!(
        r##"<b data-bind="text: p.summary">⚠️ Counterexample found: </b>
                        <a class="font-code" href="#/steps/{fragment}""##
    );
    let marked = sr_page.split(found.as_str()).skip(1).any(|rest| {
        rest.split("</a>")
            .next()
            .is_some_and(|a| a.ends_with(">Always committed records survive"))
    });
    assert!(marked, "stateright marks the property broken on this path");
    assert!(
        sr_page.contains("class=\"highwater-state\""),
        "our picture in stateright's page"
    );
    assert!(sr_page.contains("Broken: committed records survive"));
    assert!(base.ends_with('/'));

    let shot = out.join("explorer.png");
    let status = run(headless(&browser, profile.path())
        .arg("--window-size=1400,1800")
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&link))
    .status;
    assert!(status.success());
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 10_000,
        "a screenshot of the page: {}",
        shot.display()
    );
    eprintln!("browser test: page and screenshot in {}", out.display());
}

/// The page's marks come from the check: a configuration where everything
/// holds shows no counterexample.
#[test]
fn a_model_that_holds_shows_no_counterexample() {
    let Some(browser) = chromium() else {
        assert!(!in_ci(), "CI must install chromium (.ci/run does)");
        eprintln!("browser test: SKIPPED: no chromium found");
        return;
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args([
            "explore",
            "--preset",
            "tla-kip320",
            "--addr",
            "127.0.0.1:0",
            "-q",
            "-t",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start highwater explore");
    let stdout = child.stdout.take().expect("stdout");
    let _server = Server(child);
    let lines = lines_until(stdout, "done: ", Duration::from_secs(300));
    let root = address_of(&lines);
    let profile = tempfile::tempdir().expect("a browser profile");
    let dom = run(headless(&browser, profile.path())
        .arg("--dump-dom")
        .arg(&root));
    let page = String::from_utf8_lossy(&dom.stdout);
    assert!(
        page.contains(r#"data-property="committed records survive" data-verdict="holds""#),
        "the verdicts are shown"
    );
    assert!(!page.contains(r#"data-verdict="counterexample""#));
    assert!(!page.contains(r#"data-verdict="checking""#));
    assert!(page.contains("step 0: initial state"), "the initial state");

    // stateright's page says the same.
    let second = lines
        .iter()
        .find_map(|l| l.strip_prefix("stateright's explorer: "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("explore printed stateright's address");
    let dom = run(headless(&browser, profile.path())
        .arg("--dump-dom")
        .arg(second));
    let page = String::from_utf8_lossy(&dom.stdout);
    assert!(
        page.contains("✅ Safety holds: </b>"),
        "the verdicts on stateright's page: {page}"
    );
    assert!(!page.contains("Counterexample found"), "{page}");
}

/// While the check runs the page shows its progress, with the estimate the
/// preset's measured state count gives, and the verdicts as still open.
#[test]
fn the_page_shows_the_check_while_it_runs() {
    let Some(browser) = chromium() else {
        assert!(!in_ci(), "CI must install chromium (.ci/run does)");
        eprintln!("browser test: SKIPPED: no chromium found");
        return;
    };
    // `safe` takes minutes to check.
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["explore", "--preset", "safe", "--addr", "127.0.0.1:0", "-q"])
        .args(["-t", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start highwater explore");
    let stdout = child.stdout.take().expect("stdout");
    let _server = Server(child);
    let root = address_of(&lines_until(stdout, "explorer: ", Duration::from_secs(60)));
    let profile = tempfile::tempdir().expect("a browser profile");
    let dom = run(headless(&browser, profile.path())
        .arg("--dump-dom")
        .arg(&root));
    let page = String::from_utf8_lossy(&dom.stdout);
    assert!(
        page.contains("unique states"),
        "the check's figures: {page}"
    );
    assert!(page.contains("(measured)"), "the estimate: {page}");
    assert!(page.contains(r#"data-verdict="checking""#), "open verdicts");
    assert!(page.contains("step 0: initial state"), "browsing meanwhile");
    assert!(
        page.contains("stateright's own explorer starts on port"),
        "when stateright's explorer starts: {page}"
    );
}
