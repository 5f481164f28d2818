//! `highwater check`: run the checker, show progress, print the report, and
//! turn the verdict into an exit status.

use super::args::{bound_warnings, CheckArgs};
use super::display::Display;
use super::report::print_report;
use highwater_model::render::Style;
use highwater_model::run::{self, Ended, Outcome, Search};
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
    opts.interrupt = Some(install_interrupt());
    let cfg = resolved.config;
    let known = (!resolved.changed)
        .then_some(resolved.preset.measured)
        .flatten()
        .map(|m| m.unique_states)
        .filter(|_| opts.search == Search::Graph);
    let mut display = Display::new(args.json, args.quiet, known);
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
    if args.json {
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
                "expected: nothing (the preset was overridden; --expect gives a verdict and an exit status)"
            ),
        }
        if opts.stop_at != run::StopAt::Never {
            println!("stopping at the first counterexample (--exhaustive checks every property)");
        }
    }
    display.start();
    let preset = (!resolved.changed).then_some(resolved.preset.name);
    let mut report = run::run(cfg, preset, expect, &opts, |p| display.update(&p));
    display.finish();
    report.expected = expect.map(|e| e.text());
    if args.json {
        let out = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        println!("{out}");
    } else {
        print_report(&report, Style { diff: args.diff });
    }
    if let Some(dir) = &args.trace_out {
        write_traces(dir, &report, args.json)?;
    }
    if report.ended == Ended::Interrupted {
        return Ok(ExitCode::from(130));
    }
    Ok(match report.outcome {
        Outcome::AsExpected | Outcome::NoExpectation => ExitCode::SUCCESS,
        Outcome::NotAsExpected => ExitCode::from(1),
        Outcome::Undecided => ExitCode::from(3),
    })
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
    if parts.is_empty() {
        String::new()
    } else {
        format!(", {}", parts.join(", "))
    }
}

/// Writes each counterexample as an ITF trace in `dir`, one file per
/// property (a progress property's as a lasso: its path runs on into its
/// trap and round it, `lasso.rs`). Existing files are never overwritten.
fn write_traces(dir: &std::path::Path, report: &run::Report, json: bool) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for p in &report.properties {
        let Some(steps) = &p.counterexample else {
            continue;
        };
        let mut trace: Vec<_> = steps.iter().map(|s| s.raw).collect();
        let mut loop_index = None;
        if let Some(cont) = &p.stuck_continuation {
            let cont: Vec<_> = cont.iter().map(|s| s.raw).collect();
            let (lasso, at) = highwater_model::lasso::progress_lasso(&report.config, &trace, &cont);
            (trace, loop_index) = (lasso, Some(at));
        }
        let doc = highwater_model::itf::to_itf(&report.config, p.name, p.kind, &trace, loop_index);
        let slug: String = p
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        let path = dir.join(format!("{}.itf.json", slug.trim_matches('-')));
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| {
                format!(
                    "cannot write {} (it is never overwritten): {e}",
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
