//! The ITF traces `check --trace-out` writes load in readers other than
//! ours: itf-py (PyPI `itf-py`) and Quint's (`@informalsystems/quint`, its
//! `ofItf` decoding normalized through Quint's runtime values; Quint has no
//! command that reads an ITF file). Each reader's decoding of every state
//! (each replica's HW, LEO, epoch and leader, the controller's epoch, the
//! producer's count, the action's kind) and itf-py's `loop` are held
//! against ours.
//!
//! The traces: every historical preset's counterexamples, the progress
//! lassos of a stalled partition (`expand-on-leader-hw`), and the traces of
//! a model whose HW passes its LEO (`hw-past-leo`), safety and progress.
//!
//! `.ci/run` installs both readers, pinned, under `target/itf-readers`
//! (`python/` for `pip install --target`, `node/` for `npm install
//! --prefix`); `ITF_READERS=<dir>` points elsewhere. A reader that is
//! missing skips its half with a message, except in CI (`CI` set, and not
//! `false` or `0`), where it fails the test.

use highwater_model::itf::{self, ItfTrace};
use highwater_model::presets::{Expect, PRESETS};
use highwater_model::state::{replica_name, LeaderView};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

fn readers_dir() -> PathBuf {
    std::env::var_os("ITF_READERS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/itf-readers"),
        PathBuf::from,
    )
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/itf_readers")
        .join(name)
}

/// Runs `highwater check` with `args` into `dir`, which must end with
/// `status` (0: as expected; 12: a safety property broke unexpectedly).
fn write_traces(args: &[&str], dir: &Path, status: i32) {
    let o = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(args)
        .args(["-q", "-t", "2", "--trace-out"])
        .arg(dir)
        .output()
        .expect("run highwater");
    assert_eq!(
        o.status.code(),
        Some(status),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Every trace of the runs above, in a fresh directory (kept alive by the
/// returned handle).
fn traces() -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for p in PRESETS {
        if matches!(p.expect, Expect::Breaks(_)) {
            write_traces(&["check", "--preset", p.name], &dir.path().join(p.name), 0);
        }
    }
    let small = ["--records", "1", "--replicas", "2", "--min-isr", "1"];
    let stall = [
        &["check", "--mutation", "expand-on-leader-hw"][..],
        &small,
        &["--expect", "acknowledged records reach every replica"],
    ]
    .concat();
    write_traces(&stall, &dir.path().join("stall"), 0);
    let never_restarts = [
        &["check", "--mutation", "no-restart"][..],
        &small,
        &["--expect", "the partition can heal"],
    ]
    .concat();
    write_traces(&never_restarts, &dir.path().join("no-restart"), 0);
    let past_leo = [
        &["check", "--mutation", "hw-past-leo"][..],
        &small,
        &[
            "--max-epoch",
            "1",
            "--unclean-crashes",
            "0",
            "--leader-moves",
            "0",
        ],
        &["--expect", "holds"],
    ]
    .concat();
    write_traces(&past_leo, &dir.path().join("hw-past-leo"), 12);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .expect("the trace directory")
        .flat_map(|d| std::fs::read_dir(d.expect("an entry").path()).expect("a run's traces"))
        .map(|e| e.expect("a trace").path())
        .collect();
    files.sort();
    (dir, files)
}

/// What each reader is asked to report of a state, as our reader sees it.
fn summary(t: &ItfTrace) -> Vec<Value> {
    let option = |x: Option<u8>| json!(x.into_iter().collect::<Vec<_>>());
    t.states
        .iter()
        .zip(&t.actions)
        .map(|(s, a)| {
            let replicas: serde_json::Map<String, Value> = s
                .ids()
                .map(|r| {
                    let x = s.replica(r);
                    let leader = match x.leader {
                        LeaderView::Unknown => "Unknown".to_string(),
                        LeaderView::NoLeader => "NoLeader".to_string(),
                        LeaderView::Replica(l) => format!("Replica:{}", replica_name(l)),
                    };
                    let fields = json!({
                        "hw": x.hw,
                        "leo": x.leo(),
                        "epoch": option(x.epoch),
                        "leader": leader,
                    });
                    (replica_name(r).to_string(), fields)
                })
                .collect();
            json!({
                "replicas": replicas,
                "controller_epoch": option(s.controller.epoch),
                "produced": s.produced,
                "action": a.as_ref().map_or("init", itf::action_kind),
            })
        })
        .collect()
}

/// A reader: the command that runs its script, and how to tell it is there.
struct Reader {
    name: &'static str,
    program: &'static str,
    script: &'static str,
    /// Environment variable and directory (under the readers' directory)
    /// where the installed package is found.
    path_var: &'static str,
    path: &'static str,
    /// Arguments that fail unless the package loads.
    probe: &'static [&'static str],
    /// Whether the reader decodes `loop`.
    reads_loop: bool,
}

const READERS: [Reader; 2] = [
    Reader {
        name: "itf-py",
        program: "python3",
        script: "read_itf.py",
        path_var: "PYTHONPATH",
        path: "python",
        probe: &["-c", "import itf_py"],
        reads_loop: true,
    },
    Reader {
        name: "Quint's reader (@informalsystems/quint)",
        program: "node",
        script: "read_itf.js",
        path_var: "NODE_PATH",
        path: "node/node_modules",
        probe: &["-e", "require('@informalsystems/quint/dist/src/itf.js')"],
        reads_loop: false,
    },
];

impl Reader {
    fn command(&self) -> Command {
        let mut c = Command::new(self.program);
        c.env(self.path_var, readers_dir().join(self.path));
        c
    }

    /// Whether the reader is installed; says why not.
    fn available(&self) -> Result<(), String> {
        match self.command().args(self.probe).output() {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => {
                // The error's own line, not the whole traceback.
                let stderr = String::from_utf8_lossy(&o.stderr);
                let why = stderr
                    .lines()
                    .find(|l| l.contains("Error"))
                    .or_else(|| stderr.lines().rfind(|l| !l.trim().is_empty()))
                    .unwrap_or("")
                    .trim()
                    .to_string();
                Err(format!(
                    "{} cannot load {} from {}: {why}",
                    self.program,
                    self.name,
                    readers_dir().join(self.path).display(),
                ))
            }
            Err(e) => Err(format!("{} is not runnable: {e}", self.program)),
        }
    }

    /// The reader's decoding of each file, one JSON value per file.
    fn read(&self, files: &[PathBuf]) -> Vec<Value> {
        let o = self
            .command()
            .arg(script(self.script))
            .args(files)
            .output()
            .expect("run the reader");
        assert!(
            o.status.success(),
            "{} refused a trace: {}",
            self.name,
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout)
            .expect("UTF-8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("the reader prints JSON"))
            .collect()
    }
}

#[test]
fn readers_other_than_ours_load_every_trace_as_we_do() {
    let mut missing = Vec::new();
    let ready: Vec<&Reader> = READERS
        .iter()
        .filter(|r| match r.available() {
            Ok(()) => true,
            Err(why) => {
                missing.push(format!("{}: {why}", r.name));
                false
            }
        })
        .collect();
    for m in &missing {
        let message = format!(
            "{m}. Install it as .ci/run does (under {}).",
            readers_dir().display()
        );
        assert!(!in_ci(), "{message}");
        eprintln!("skipped: {message}");
    }
    if ready.is_empty() {
        return;
    }
    let (_dir, files) = traces();
    let ours: Vec<ItfTrace> = files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).expect("a trace file");
            itf::from_itf(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()))
        })
        .collect();
    let lassos = ours.iter().filter(|t| t.loop_index.is_some()).count();
    let broken = ours
        .iter()
        .filter(|t| {
            t.states
                .iter()
                .any(|s| s.ids().any(|r| s.replica(r).hw > s.replica(r).leo()))
        })
        .count();
    assert!(lassos >= 2, "progress traces are lassos: {lassos}");
    assert!(broken >= 2, "states with the HW past the LEO: {broken}");
    for reader in ready {
        let theirs = reader.read(&files);
        assert_eq!(
            theirs.len(),
            files.len(),
            "{}: one line per file",
            reader.name
        );
        for ((file, t), line) in files.iter().zip(&ours).zip(&theirs) {
            assert_eq!(
                line["states"],
                json!(summary(t)),
                "{} decodes {} otherwise",
                reader.name,
                file.display()
            );
            if reader.reads_loop {
                assert_eq!(line["loop"], json!(t.loop_index), "{}", file.display());
            }
        }
        println!(
            "{} loaded {} traces ({lassos} lassos) as highwater reads them",
            reader.name,
            files.len()
        );
    }
}
