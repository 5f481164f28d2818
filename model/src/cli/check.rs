//! `highwater check`: run the checker, show progress, print the report, and
//! turn the verdict into an exit status.

use super::args::{bound_warnings, CheckArgs};
use super::display::Display;
use super::report::print_report;
use highwater_checker::Checkable;
use highwater_model::render::Style;
use highwater_model::run::{self, Search};
use highwater_model::PartitionModel;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the first Ctrl-C: the run stops and reports what it found.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The first Ctrl-C asks the run to stop and report; a second ends the
/// process at once.
pub fn install_interrupt() -> &'static AtomicBool {
    let _ = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
    &INTERRUPTED
}

pub fn check(args: CheckArgs) -> Result<ExitCode, String> {
    let resolved = args.model.resolve()?;
    let expect = args.expectation(&resolved);
    let mut opts = args.run_options(expect)?;
    let cfg = resolved.config;
    let cluster = args.search.cluster(token(&cfg, &opts, expect))?;
    if cluster.is_some() && opts.memory_budget.is_some() {
        return Err(run::memory_budget_distributed().to_string());
    }
    if let Some(c) = &cluster {
        opts.threads = c.peers();
    }
    // In a distributed run, process 0 speaks for all.
    let speaks = cluster.as_ref().is_none_or(|c| c.process == 0);
    if let (Some(dir), true) = (&args.trace_out, speaks) {
        prepare_trace_dir(dir, args.force)?;
    }
    opts.interrupt = Some(install_interrupt());
    let known = (!resolved.changed)
        .then_some(resolved.preset.measured)
        .flatten()
        .map(|m| m.unique_states)
        .filter(|_| opts.search == Search::Graph);
    opts.expected_states = known;
    let mut display = Display::new(args.json, args.quiet || !speaks, known);
    let describe = if resolved.changed {
        format!("preset {} with overrides: {cfg}", resolved.preset.name)
    } else {
        format!("preset {}: {cfg}", resolved.preset.name)
    };
    let warnings = if resolved.changed {
        bound_warnings(&cfg)
    } else {
        vec![]
    };
    if let Some(c) = &cluster {
        if speaks && !args.quiet {
            eprintln!(
                "distributed on timely dataflow: {} process(es) of {} worker(s){}",
                c.processes,
                c.workers,
                if c.processes > 1 {
                    format!(", this one {} at {}", c.process, c.addresses[c.process])
                } else {
                    String::new()
                }
            );
        }
    }
    if !speaks {
    } else if args.json {
        for w in &warnings {
            eprintln!("warning: {w}");
        }
    } else {
        println!("highwater: checking {describe}");
        for w in &warnings {
            println!("warning: {w}");
        }
        println!(
            "search: {} with {} thread(s){}",
            search_text(opts.search),
            opts.threads,
            limits_text(&opts)
        );
        match (expect, opts.stop_at) {
            (Some(e), _) => println!("expected: {}", e.text()),
            (None, _) => println!(
                "expected: nothing breaks (the preset was overridden; --expect holds, counterexample or a \
                 property's name says what the run should show)"
            ),
        }
        if opts.stop_at != run::StopAt::Never {
            println!("stopping at the first counterexample (--exhaustive checks every property)");
        }
    }
    let preset = (!resolved.changed).then_some(resolved.preset.name);
    if let Some(refusal) = refusal(&opts, preset) {
        // Before the search: a run that cannot fit is refused at once.
        let lines = [
            format!("verdict: refused: {refusal}"),
            format!("exit status {}", run::exit::OVER_BUDGET),
        ];
        for line in lines {
            if args.json {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
        }
        return Ok(ExitCode::from(run::exit::OVER_BUDGET));
    }
    display.start();
    let report = match cluster {
        None => Some(run::run(cfg, preset, expect, &opts, |p| display.update(&p))),
        Some(c) => {
            let flaw = args.search.flaw();
            let done = run::run_distributed(cfg, preset, expect, &opts, c.clone(), flaw, |p| {
                display.update(&p)
            });
            if done.is_err() {
                display.finish();
            }
            let done = done?;
            if done.is_none() && !args.quiet {
                eprintln!(
                    "process {} of {}: done (process 0 prints the report)",
                    c.process, c.processes
                );
            }
            done
        }
    };
    display.finish();
    let Some(mut report) = report else {
        return Ok(ExitCode::SUCCESS);
    };
    report.expected = expect.map(|e| e.text());
    if args.json {
        let out = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        println!("{out}");
    } else {
        print_report(&report, Style { diff: args.diff });
    }
    if let Some(dir) = &args.trace_out {
        write_traces(dir, &report, args.json, args.force)?;
    }
    Ok(ExitCode::from(report.exit_status))
}

/// Why a run of a preset of known size is refused before it starts: its
/// estimate does not fit `--memory-budget`.
fn refusal(opts: &run::RunOptions, preset: Option<&'static str>) -> Option<String> {
    let budget = opts.memory_budget?;
    let p = highwater_model::presets::Preset::find(preset?)?;
    let states = p.known_unique_states()?;
    let estimate = highwater_model::presets::estimated_peak_bytes(states);
    budget.refuses(estimate).then(|| {
        format!(
            "preset {} has {} unique states; at about {} bytes a state (measured) it needs about \
             {}, more than --memory-budget {}. Give it more, or stop it early with --max-states",
            p.name,
            thousands(states),
            highwater_model::presets::PEAK_BYTES_PER_STATE,
            size_text(estimate),
            size_text(budget.bytes)
        )
    })
}

/// `n` with commas between thousands.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A size in bytes as people read it: `1.50 GiB`, `320 MiB`, `512 bytes`.
pub fn size_text(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = None;
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = Some(u);
    }
    // Three figures: budgets and needs that differ by a few percent must
    // not print alike.
    match unit {
        Some(u) if value < 10.0 => format!("{value:.2} {u}"),
        Some(u) if value < 100.0 => format!("{value:.1} {u}"),
        Some(u) => format!("{value:.0} {u}"),
        None => format!("{bytes} bytes"),
    }
}

/// What every process of a distributed check must agree on: the
/// configuration and how the run stops. A process started with other
/// settings is refused at the handshake.
fn token(
    cfg: &highwater_model::Config,
    opts: &run::RunOptions,
    expect: Option<highwater_model::presets::Expect>,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    serde_json::to_string(cfg).unwrap_or_default().hash(&mut h);
    format!(
        "{:?} {:?} {:?} {:?}",
        opts.stop_at, opts.max_states, opts.time_limit, expect
    )
    .hash(&mut h);
    h.finish()
}

pub fn search_text(s: Search) -> String {
    match s {
        Search::Graph => {
            "exhaustive breadth-first over the state graph, symmetry-reduced, with the progress check"
                .to_string()
        }
        Search::Dfs => "stateright's exhaustive depth-first, symmetry-reduced (no progress check)"
            .to_string(),
        Search::Bfs => {
            "stateright's exhaustive breadth-first (no symmetry reduction, no progress check)"
                .to_string()
        }
        Search::Simulate { seed, max_depth } => {
            format!("random walks (seed {seed}, depth <= {max_depth}; not exhaustive)")
        }
    }
}

fn limits_text(opts: &run::RunOptions) -> String {
    let mut parts = Vec::new();
    if let Some(t) = opts.time_limit {
        parts.push(format!("at most {} s", t.as_secs()));
    }
    if let Some(m) = opts.max_states {
        parts.push(format!("at most {m} states"));
    }
    if let Some(b) = opts.memory_budget {
        parts.push(format!("memory budget {}", size_text(b.bytes)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(", {}", parts.join(", "))
    }
}

/// The file a property's trace is written to in `dir`: its name in lower
/// case, words joined by `-` ("HW <= LEO": `hw-le-leo.itf.json`).
fn trace_path(dir: &std::path::Path, property: &str) -> std::path::PathBuf {
    let words: Vec<String> = property
        .replace("<=", " le ")
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    dir.join(format!("{}.itf.json", words.join("-")))
}

/// Makes sure, before the search, that the traces can be written: the
/// directory exists (it is created) and takes a new file, and no trace
/// this run could write is already there (unless `force`). A long search
/// must not end in an error it could have given at once.
fn prepare_trace_dir(dir: &std::path::Path, force: bool) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("--trace-out: cannot create {}: {e}", dir.display()))?;
    let probe = dir.join(format!(".highwater-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .map_err(|e| format!("--trace-out: cannot write in {}: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    if force {
        return Ok(());
    }
    let mut names = highwater_model::properties::safety_names();
    names.extend([
        highwater_model::progress::RECOVERABLE,
        highwater_model::progress::ACKED_REPLICATED,
    ]);
    let existing: Vec<String> = names
        .iter()
        .map(|n| trace_path(dir, n))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if existing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "--trace-out: this run could overwrite {}; choose another directory or add --force",
            existing.join(", ")
        ))
    }
}

/// Writes each counterexample as an ITF trace in `dir`, one file per
/// property (a progress property's as a lasso: its path runs on into its
/// trap and round it, `checker/src/lasso.rs`). Existing files are
/// overwritten only with `force`.
fn write_traces(
    dir: &std::path::Path,
    report: &run::Report,
    json: bool,
    force: bool,
) -> Result<(), String> {
    for p in &report.properties {
        let Some(steps) = &p.counterexample else {
            continue;
        };
        let mut trace: Vec<_> = steps.iter().map(|s| s.raw).collect();
        let mut loop_index = None;
        if let Some(cont) = &p.stuck_continuation {
            let cont: Vec<_> = cont.iter().map(|s| s.raw).collect();
            let model = PartitionModel::new(report.config);
            let (lasso, at) = highwater_checker::lasso::progress_lasso(
                &model,
                &model.recovery_model(),
                &trace,
                &cont,
            );
            (trace, loop_index) = (lasso, Some(at));
        }
        let doc = highwater_model::itf::to_itf(&report.config, p.name, p.kind, &trace, loop_index);
        let path = trace_path(dir, p.name);
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(!force)
            .create(force)
            .truncate(force)
            .open(&path)
            .map_err(|e| {
                format!(
                    "cannot write {} (add --force to overwrite): {e}",
                    path.display()
                )
            })?;
        std::io::Write::write_all(&mut file, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let line = format!("trace of \"{}\" written to {}", p.name, path.display());
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    Ok(())
}
