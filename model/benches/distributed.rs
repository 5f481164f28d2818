//! The distributed check's rate against the single-process engine's, in
//! one run: a preset (default `tla-kip320`; pass another's name) checked by
//! one process on 1 and 2 threads, then distributed on timely dataflow as
//! 1 and 2 workers of one process and as 2 processes of 1 worker on
//! 127.0.0.1. Each prints its states/s (transitions followed per second of
//! wall time, the process started and ended) and its ratio to one process
//! on as many threads; every run must find the same unique states.
//!
//! `cargo bench -p highwater-model --bench distributed [-- PRESET]`.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Instant;

/// A run: its label, its threads or workers in all, process 0's flags,
/// and process 1's if any.
type Run<'a> = (&'a str, usize, Vec<&'a str>, Option<Vec<&'a str>>);

fn main() {
    let exe = env!("CARGO_BIN_EXE_highwater");
    let preset = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| "tla-kip320".to_string());
    let dir = std::env::temp_dir().join(format!("highwater-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let hosts = dir.join("hosts");
    let ports: Vec<String> = (0..2)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect::<Vec<_>>()
        .iter()
        .map(|l| l.local_addr().expect("an address").to_string())
        .collect();
    std::fs::write(&hosts, ports.join("\n")).expect("write the host file");
    let hosts = hosts.display().to_string();
    let runs: Vec<Run> = vec![
        ("one process, 1 thread", 1, vec!["-t", "1"], None),
        ("one process, 2 threads", 2, vec!["-t", "2"], None),
        ("timely, 1 worker", 1, vec!["-w", "1"], None),
        ("timely, 2 workers", 2, vec!["-w", "2"], None),
        (
            "timely, 2 processes x 1",
            2,
            vec!["-n", "2", "--process", "0", "--hostfile", &hosts],
            Some(vec!["-n", "2", "--process", "1", "--hostfile", &hosts]),
        ),
    ];
    println!("{preset}");
    println!(
        "{:<26} {:>12} {:>11} {:>8} {:>12} {:>22}",
        "run", "states", "unique", "wall s", "states/s", "vs one process"
    );
    let mut single: [Option<f64>; 3] = [None; 3];
    let mut unique_first = None;
    for (label, parallel, flags, other) in runs {
        let base = ["check", "--preset", &preset, "--json", "--quiet"];
        let start = Instant::now();
        let mut second = other.map(|f| {
            Command::new(exe)
                .args(base)
                .args(f)
                .stdout(Stdio::null())
                .spawn()
                .expect("start process 1")
        });
        let out = Command::new(exe)
            .args(base)
            .args(&flags)
            .output()
            .expect("run highwater");
        if let Some(p) = second.as_mut() {
            let _ = p.wait();
        }
        let wall = start.elapsed().as_secs_f64();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{label}: {}", String::from_utf8_lossy(&out.stderr)));
        let states = report["progress"]["states"].as_u64().unwrap_or(0);
        let unique = report["progress"]["unique_states"].as_u64().unwrap_or(0);
        let rate = states as f64 / wall;
        let ratio = match single[parallel] {
            None => {
                single[parallel] = Some(rate);
                "-".to_string()
            }
            Some(r) => format!("{:.2} x ({parallel} thread(s))", rate / r),
        };
        println!("{label:<26} {states:>12} {unique:>11} {wall:>8.2} {rate:>12.0} {ratio:>22}");
        assert_eq!(
            *unique_first.get_or_insert(unique),
            unique,
            "{label} found other unique states"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
