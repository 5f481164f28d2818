//! Checker benchmark: every preset, each in its own process (so that peak
//! memory is its own), printing states, unique states, wall time, states/s
//! and peak memory, and for `tla-kip320` TLC's published figures beside ours.
//! For each preset that expects everything to hold it also runs stateright's
//! own depth-first search (safety only) in the same run, and prints what the
//! progress check costs beside it: the time ratio, and the state graph's
//! bytes and the backward search's time per state.
//!
//! `cargo bench -p highwater-model` runs all presets; pass preset names to
//! run only those: `cargo bench -p highwater-model -- safe tla-kip320`.
//! HIGHWATER_BENCH_THREADS sets the checker threads (default 2).
//! HIGHWATER_BENCH_BASELINE names another `highwater` binary (an earlier
//! build: `git worktree add ../base <commit>`, then
//! `cargo build --release -p highwater-model` there): each preset is then
//! also run by it, in turn with this build (three runs each, alternating),
//! and the bench prints the ratio of the medians of their wall times and
//! whether both found the same unique states: a change's cost measured in
//! one run on a noisy machine.

use std::process::Command;
use std::time::Instant;

/// Wall-time targets on a 2-core machine, from the project's goals.
fn target_seconds(preset: &str) -> f64 {
    match preset {
        "tla-kip320" => 1.0,
        "safe" => 30.0,
        "safe-deep" => 150.0,
        _ => 20.0,
    }
}

fn main() {
    let exe = env!("CARGO_BIN_EXE_highwater");
    let threads = std::env::var("HIGHWATER_BENCH_THREADS").unwrap_or_else(|_| "2".into());
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let list = Command::new(exe)
        .args(["presets", "--json"])
        .output()
        .expect("run highwater presets");
    let presets: serde_json::Value = serde_json::from_slice(&list.stdout).expect("presets as JSON");
    println!(
        "{:<17} {:>12} {:>11} {:>9} {:>12} {:>9} {:>8}  verdict",
        "preset", "states", "unique", "wall s", "states/s", "peak MiB", "target s"
    );
    let baseline = std::env::var_os("HIGHWATER_BENCH_BASELINE");
    let check_with =
        |exe: &std::ffi::OsStr, name: &str, extra: &[&str]| -> Option<(serde_json::Value, f64)> {
            let start = Instant::now();
            let mut args = vec![
                "check",
                "--preset",
                name,
                "--json",
                "--quiet",
                "--threads",
                &threads,
            ];
            args.extend_from_slice(extra);
            let out = Command::new(exe)
                .args(&args)
                .output()
                .expect("run highwater check");
            let wall = start.elapsed().as_secs_f64();
            match serde_json::from_slice::<serde_json::Value>(&out.stdout) {
                Ok(report) => Some((report, wall)),
                Err(_) => {
                    println!(
                        "{name:<17} failed ({}): {}",
                        exe.to_string_lossy(),
                        String::from_utf8_lossy(&out.stderr)
                    );
                    None
                }
            }
        };
    let check = |name: &str, extra: &[&str]| check_with(exe.as_ref(), name, extra);
    for p in presets.as_array().expect("a list") {
        let name = p["name"].as_str().expect("name");
        if !wanted.is_empty() && !wanted.iter().any(|w| w == name) {
            continue;
        }
        let Some((report, wall)) = check(name, &[]) else {
            continue;
        };
        let progress = &report["progress"];
        let unique = progress["unique_states"].as_u64().unwrap_or(0);
        let verdict = if report["mismatches"]
            .as_array()
            .is_some_and(|m| m.is_empty())
        {
            "as expected"
        } else {
            "NOT as expected"
        };
        println!(
            "{:<17} {:>12} {:>11} {:>9.2} {:>12.0} {:>9.0} {:>8.0}  {verdict}",
            name,
            progress["states"].as_u64().unwrap_or(0),
            unique,
            wall,
            report["states_per_second"].as_f64().unwrap_or(0.0),
            report["peak_memory_mib"].as_f64().unwrap_or(0.0),
            target_seconds(name),
        );
        if let Some(pc) = report.get("progress_check") {
            let states = unique + pc["recovery_states"].as_u64().unwrap_or(0);
            let baseline = check(name, &["--dfs"]);
            let ratio = baseline.map_or(String::from("?"), |(_, w)| format!("{:.2}", wall / w));
            println!(
                "{:<17} with the progress check: {ratio}x the wall time of stateright's DFS (safety only) in this run; \
                 graph {:.0} bytes/state over {} states ({} recovery states), backward search {:.0} ns/state, \
                 peak memory {:.0} MiB",
                "",
                pc["graph_bytes"].as_f64().unwrap_or(0.0) / states.max(1) as f64,
                states,
                pc["recovery_states"],
                pc["seconds"].as_f64().unwrap_or(0.0) * 1e9 / states.max(1) as f64,
                report["peak_memory_mib"].as_f64().unwrap_or(0.0),
            );
        }
        if let Some(base) = &baseline {
            compare_with_baseline(
                name,
                unique,
                &|exe: &std::ffi::OsStr| check_with(exe, name, &[]),
                exe.as_ref(),
                base,
            );
        }
        if let Some(tlc) = p["tlc_distinct_states"].as_u64() {
            println!(
                "{:<17} TLC (published, same bounds): {tlc} distinct states in 73-133 s, 2.2 GB; \
                 highwater explores {:.2}x as many unique states in {:.3}x the time of TLC's fastest run",
                "",
                unique as f64 / tlc as f64,
                wall / 73.0
            );
        }
    }
}

/// Runs `name` three times with this build and three with the baseline,
/// alternating, and prints the ratio of the median wall times.
fn compare_with_baseline(
    name: &str,
    unique: u64,
    run: &dyn Fn(&std::ffi::OsStr) -> Option<(serde_json::Value, f64)>,
    this: &std::ffi::OsStr,
    base: &std::ffi::OsStr,
) {
    let (mut ours, mut theirs, mut base_unique) = (Vec::new(), Vec::new(), None);
    for _ in 0..3 {
        if let Some((_, w)) = run(this) {
            ours.push(w);
        }
        if let Some((r, w)) = run(base) {
            theirs.push(w);
            base_unique = r["progress"]["unique_states"].as_u64();
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    match (median(&mut ours), median(&mut theirs)) {
        (Some(a), Some(b)) => println!(
            "{:<17} against the baseline: median wall {a:.2} s vs {b:.2} s, ratio {:.3}              (3 runs each, alternating); unique states {}",
            "",
            a / b,
            if base_unique == Some(unique) {
                "the same".to_string()
            } else {
                format!("DIFFER ({unique} vs {base_unique:?})")
            }
        ),
        _ => println!("{name:<17} against the baseline: a run failed"),
    }
}
