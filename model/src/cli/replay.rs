//! `highwater replay --trace FILE`: a trace written by `check --trace-out`
//! (or any ITF trace in highwater's mapping), checked step by step on the
//! model under the settings it carries; with `--dir`, handed on to the
//! implementation's replay (`highwater-replay`), and `dump-log`, handed on
//! to `highwater-dump-log`.

use super::args::ReplayArgs;
use highwater_model::actions;
use highwater_model::itf;
use highwater_model::properties;
use highwater_model::render::{self, Style};
use highwater_model::{Action, PartitionModel, State};
use stateright::Model;
use std::process::{Command, ExitCode};

pub fn replay(args: ReplayArgs) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(&args.trace)
        .map_err(|e| format!("cannot read {}: {e}", args.trace.display()))?;
    let trace = itf::from_itf(&text).map_err(|e| format!("{}: {e}", args.trace.display()))?;
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
    print!(
        "{}",
        render::steps_table(&steps, 0, Style { diff: args.diff })
    );
    match trace.loop_index {
        Some(l) if l + 1 == trace.states.len() => {
            println!("a lasso: the last state repeats forever (no fault-free step leaves it)")
        }
        Some(l) => println!("a lasso: the last state's successor is state {l}, and so on forever"),
        None => {}
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
    if let Some(dir) = &args.dir {
        let mut cmd = Command::new(sibling("highwater-replay")?);
        cmd.arg("--trace").arg(&args.trace).arg("--dir").arg(dir);
        return run_sibling(cmd);
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks that the trace starts in the model's initial state and that each
/// step is enabled and leads to the next state; returns the steps.
pub fn check_steps(t: &itf::ItfTrace) -> Result<Vec<(State, Option<Action>)>, String> {
    let model = PartitionModel::new(t.config);
    if t.states[0] != model.init_state() {
        return Err("state 0 is not the model's initial state".to_string());
    }
    let cfg = t.step_config();
    let mut steps = vec![(t.states[0], None)];
    for (i, w) in t.states.windows(2).enumerate() {
        let (prev, next) = (&w[0], &w[1]);
        let mut enabled = Vec::new();
        actions::enabled(&cfg, prev, &mut enabled);
        let leads = |a: &Action| actions::apply(&cfg, prev, *a).as_ref() == Some(next);
        let action = match t.actions[i + 1] {
            Some(a) if !enabled.contains(&a) => {
                return Err(format!("step {}: {a} is not enabled", i + 1));
            }
            Some(a) if !leads(&a) => {
                return Err(format!(
                    "step {}: {a} does not lead to state {} as written",
                    i + 1,
                    i + 1
                ));
            }
            Some(a) => a,
            None => *enabled.iter().find(|a| leads(a)).ok_or_else(|| {
                format!("step {}: no enabled action leads to state {}", i + 1, i + 1)
            })?,
        };
        steps.push((*next, Some(action)));
    }
    highwater_model::lasso::check_loop(t)?;
    Ok(steps)
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
