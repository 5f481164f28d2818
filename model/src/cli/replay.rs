//! `highwater replay --trace FILE`: a trace written by `check --trace-out`
//! (or any ITF trace in highwater's mapping), checked step by step on the
//! model under the settings it carries (a step it does not take is shown
//! field by field); with `--under` or a rule flag, its actions re-run under
//! other rules; with `--dir`, handed on to the implementation's replay
//! (`highwater-replay`), and `dump-log`, handed on to `highwater-dump-log`.

use super::args::{ReplayArgs, RerunExpect};
use highwater_model::itf;
use highwater_model::presets::Preset;
use highwater_model::properties;
use highwater_model::render::{self, Style};
use highwater_model::rerun::{self, Mismatch, Steps};
use highwater_model::{Config, PartitionModel};
use stateright::Model;
use std::process::{Command, ExitCode};

pub fn replay(args: ReplayArgs) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(&args.trace)
        .map_err(|e| format!("cannot read {}: {e}", args.trace.display()))?;
    let trace = itf::from_itf(&text).map_err(|e| format!("{}: {e}", args.trace.display()))?;
    let under = args.rules.resolve(&trace.config)?;
    if let Some(dir) = &args.dir {
        highwater_model::outdir::replay_dir(dir, args.force)?;
    }
    let progress = trace.kind.as_deref() == Some("progress");
    match (args.expect, &under) {
        (Some(_), None) => {
            return Err("--expect judges a re-run: give --under PRESET or a rule flag".to_string())
        }
        (Some(_), Some(_)) if progress => {
            return Err(format!(
                "the trace is of a progress property ({:?}), which one trace cannot decide: \
                 --expect applies to always-properties",
                trace.property.as_deref().unwrap_or("")
            ))
        }
        _ => {}
    }
    println!(
        "highwater: replaying {} ({} steps) under {}",
        args.trace.display(),
        trace.states.len() - 1,
        trace.config
    );
    let steps = match check_steps(&trace) {
        Ok(steps) => steps,
        Err(e) => {
            println!("NOT a behaviour of the model: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    if let Err(e) = highwater_model::itf::check_loop(&trace) {
        println!("NOT a behaviour of the model: {e}");
        return Ok(ExitCode::from(1));
    }
    let style = Style { diff: args.diff };
    if under.is_none() {
        print!("{}", render::steps_table(&steps, 0, style));
        match trace.loop_index {
            Some(l) if l + 1 == trace.states.len() => {
                println!("a lasso: the last state repeats forever (no fault-free step leaves it)")
            }
            Some(l) => {
                println!("a lasso: the last state's successor is state {l}, and so on forever")
            }
            None => {}
        }
    } else {
        println!("every step is the model's under the trace's own settings");
    }
    let reproduced = match (trace.kind.as_deref(), trace.property.as_deref()) {
        (Some("always") | None, Some(name)) => breaks_at_end(&trace, name)?,
        (Some("progress"), Some(name)) => {
            println!(
                "every step is the model's; \"{name}\" is a progress property, decided on the whole \
                 state graph by `highwater check`, not by one trace"
            );
            true
        }
        _ => {
            println!("every step is the model's; the trace names no property to break");
            true
        }
    };
    if !reproduced {
        return Ok(ExitCode::from(1));
    }
    if let Some((cfg, preset)) = under {
        return rerun_under(&trace, &steps, &cfg, preset, args.expect, style);
    }
    if let Some(dir) = &args.dir {
        let mut cmd = Command::new(sibling("highwater-replay")?);
        // Already checked (and emptied, with --force) above.
        cmd.arg("--trace").arg(&args.trace).arg("--dir").arg(dir);
        return run_sibling(cmd);
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks that the trace starts in the model's initial state and that each
/// step is enabled and leads to the next state; returns the steps.
pub fn check_steps(t: &itf::ItfTrace) -> Result<Steps, Mismatch> {
    // A progress trace may use the recovery epochs beyond the bound.
    rerun::check_trace(&t.step_config(), &t.states, &t.actions)
}

/// Re-runs the trace's actions under `cfg` (the trace's bounds, other
/// rules), prints what ran and the verdict; the exit status is 0 unless
/// `expect` says otherwise.
fn rerun_under(
    t: &itf::ItfTrace,
    steps: &Steps,
    cfg: &Config,
    preset: Option<&Preset>,
    expect: Option<RerunExpect>,
    style: Style,
) -> Result<ExitCode, String> {
    let actions: Vec<_> = steps.iter().filter_map(|(_, a)| *a).collect();
    let names: Vec<&str> = match (t.kind.as_deref(), t.property.as_deref()) {
        (Some("progress"), _) => vec![],
        (_, Some(name)) => vec![name],
        (_, None) => properties::safety_names(),
    };
    let run = rerun::rerun(cfg, &actions, &names)?;
    let whose = preset.map_or("the trace's rules".to_string(), |p| {
        format!("preset {}'s rules", p.name)
    });
    println!(
        "\nre-running its {} actions from the initial state under {whose}:",
        actions.len()
    );
    let rules = rerun::rule_changes(&t.config, cfg);
    if rules.is_empty() {
        println!("  rules changed: none (the trace's own)");
    } else {
        println!("  rules changed: {}", join(&rules));
    }
    match preset.map(|p| rerun::bound_changes(&t.config, &p.config)) {
        Some(differ) if !differ.is_empty() => println!(
            "  bounds: the trace's, kept (preset {}'s differ: {})",
            preset.map_or("", |p| p.name),
            join(&differ)
        ),
        _ => println!("  bounds: the trace's"),
    }
    println!("  under {cfg}");
    match names.as_slice() {
        [] => println!(
            "  \"{}\" is a progress property, decided on the whole state graph by `highwater \
             check`: the re-run shows only whether each step runs",
            t.property.as_deref().unwrap_or("")
        ),
        [one] => println!("  checking \"{one}\" in every state"),
        _ => println!("  checking every always-property in every state (the trace names none)"),
    }
    print!("{}", render::steps_table(&run.steps, 0, style));
    println!("under these rules: {}", run.verdict());
    if let Some(lines) = run.outcome.alternatives_text() {
        println!("  {lines}");
    }
    let Some(expect) = expect else {
        return Ok(ExitCode::SUCCESS);
    };
    let met = match expect {
        RerunExpect::Holds => !run.breaks(),
        RerunExpect::Counterexample => run.breaks(),
    };
    let asked = match expect {
        RerunExpect::Holds => "holds",
        RerunExpect::Counterexample => "counterexample",
    };
    if met {
        println!("verdict: as expected (--expect {asked})");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("verdict: NOT as expected (--expect {asked})");
        Ok(ExitCode::from(1))
    }
}

fn join(changes: &[rerun::Change]) -> String {
    changes
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether the always-property `name` breaks at the last state, and not
/// before; says which.
fn breaks_at_end(t: &itf::ItfTrace, name: &str) -> Result<bool, String> {
    let model = PartitionModel::new(t.config);
    let property = model
        .properties()
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| format!("the trace names no property of the model: {name:?}"))?;
    let broken_at = t
        .states
        .iter()
        .position(|s| !(property.condition)(&model, s));
    let last = t.states.len() - 1;
    Ok(match broken_at {
        Some(i) if i == last => {
            let why = properties::explain(name, &t.states[last]).unwrap_or_default();
            println!("reproduced: \"{name}\" breaks at the last step, and not before — {why}.");
            true
        }
        Some(i) => {
            println!("NOT reproduced: \"{name}\" already breaks at step {i}, before the end");
            false
        }
        None => {
            println!("NOT reproduced: \"{name}\" holds in every state of the trace");
            false
        }
    })
}

/// A tool built beside this one (as `cargo build --release --workspace`
/// builds them all).
pub fn sibling(name: &str) -> Result<std::path::PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let path = me.with_file_name(name);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{name} is not built beside {}: run `cargo build --release --workspace` (it belongs \
             to the implementation, which the model never depends on)",
            me.display()
        ))
    }
}

pub fn run_sibling(mut cmd: Command) -> Result<ExitCode, String> {
    let status = cmd.status().map_err(|e| e.to_string())?;
    Ok(ExitCode::from(status.code().map_or(1, |c| c as u8)))
}

pub fn dump_log(args: Vec<String>) -> Result<ExitCode, String> {
    let mut cmd = Command::new(sibling("highwater-dump-log")?);
    cmd.args(args);
    run_sibling(cmd)
}
