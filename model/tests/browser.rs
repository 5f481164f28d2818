//! The explorer in a real browser: `highwater explore` serves a historical
//! preset, headless Chromium opens the printed deep link, and the rendered
//! page must show the path (its steps numbered as the CLI's), the state's
//! picture (an SVG with a lane per replica and the HW) and the broken
//! property. A screenshot is left in the test's output directory. While a
//! check runs, the page shows its progress.
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
    let link = lines
        .iter()
        .find(|l| l.starts_with("counterexample (\"committed records survive\""))
        .and_then(|l| l.split_whitespace().last())
        .map(str::to_string);
    let link = link.expect("explore printed the deep link");

    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&out).expect("output directory");
    let profile = tempfile::tempdir().expect("a browser profile");
    let dom = headless(&browser, profile.path())
        .arg("--dump-dom")
        .arg(&link)
        .output()
        .expect("run chromium");
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

    let shot = out.join("explorer.png");
    let status = headless(&browser, profile.path())
        .arg("--window-size=1400,1800")
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&link)
        .status()
        .expect("run chromium");
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
    let root = address_of(&lines_until(stdout, "done: ", Duration::from_secs(300)));
    let profile = tempfile::tempdir().expect("a browser profile");
    let dom = headless(&browser, profile.path())
        .arg("--dump-dom")
        .arg(&root)
        .output()
        .expect("run chromium");
    let page = String::from_utf8_lossy(&dom.stdout);
    assert!(
        page.contains(r#"data-property="committed records survive" data-verdict="holds""#),
        "the verdicts are shown"
    );
    assert!(!page.contains(r#"data-verdict="counterexample""#));
    assert!(!page.contains(r#"data-verdict="checking""#));
    assert!(page.contains("step 0: initial state"), "the initial state");
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
    let dom = headless(&browser, profile.path())
        .arg("--dump-dom")
        .arg(&root)
        .output()
        .expect("run chromium");
    let page = String::from_utf8_lossy(&dom.stdout);
    assert!(
        page.contains("unique states"),
        "the check's figures: {page}"
    );
    assert!(page.contains("(measured)"), "the estimate: {page}");
    assert!(page.contains(r#"data-verdict="checking""#), "open verdicts");
    assert!(page.contains("step 0: initial state"), "browsing meanwhile");
}
