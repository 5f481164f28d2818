//! `highwater-replay`: runs a counterexample on the reference
//! implementation, in lockstep with the model, and leaves the brokers' data
//! directories (Kafka's on-disk format) for inspection. The counterexample is
//! a historical preset's shortest, as the model checker finds it, or any
//! trace `highwater check --trace-out` wrote (under any settings).
//!
//! Exit codes: 0 the property broke on the implementation as in the model,
//! 1 it did not (or the two diverged), 2 usage or I/O errors.

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use highwater_conformance::abstraction::abstract_state;
use highwater_conformance::lockstep::Lockstep;
use highwater_conformance::replay::shortest_counterexample;
use highwater_model::itf;
use highwater_model::presets::{Expect, Preset, PRESETS};
use highwater_model::render::state_table;
use highwater_model::state::replica_name;
use highwater_model::{Action, Config};

#[derive(Parser)]
#[command(
    name = "highwater-replay",
    version,
    about = "Replay a counterexample (a historical preset's shortest, or a saved ITF trace) on the reference implementation, on real files",
    after_help = "Exit status: 0 the loss happened on the implementation too, 1 it did not, 2 usage or I/O error.\n\
                  The brokers' directories are left in DIR/broker-<n>/; inspect them with highwater-dump-log."
)]
struct Cli {
    /// A preset that expects a counterexample (see `highwater presets`).
    #[arg(long, required_unless_present = "trace", conflicts_with = "trace")]
    preset: Option<String>,
    /// An ITF trace written by `highwater check --trace-out`.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Where the brokers keep their data: created, and must be empty if it exists.
    #[arg(long)]
    dir: PathBuf,
    /// Replace the broker directories an earlier replay left in --dir.
    #[arg(long)]
    force: bool,
    /// Print both states after every step, not only the last.
    #[arg(long)]
    verbose: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    highwater_model::sigpipe::end_when_stdout_closes();
    match run(&cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("highwater-replay: {e}");
            ExitCode::from(2)
        }
    }
}

fn breaking_preset(name: &str) -> Result<(&'static Preset, &'static str), String> {
    let breaking = || {
        PRESETS
            .iter()
            .filter(|p| matches!(p.expect, Expect::Breaks(_)))
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let p = PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        format!(
            "no preset {name:?}; those with a counterexample: {}",
            breaking()
        )
    })?;
    match p.expect {
        Expect::Breaks(property) => Ok((p, property)),
        Expect::Holds { .. } | Expect::NoCounterexample | Expect::AnyCounterexample => {
            Err(format!(
                "preset {name} breaks nothing, so there is nothing to replay; try one of: {}",
                breaking()
            ))
        }
    }
}

/// The configuration, the property and the actions to replay.
fn what_to_replay(cli: &Cli) -> Result<(Config, String, Vec<Action>), String> {
    if let Some(path) = &cli.trace {
        let text =
            fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let t = itf::from_itf(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let property = t
            .property
            .clone()
            .ok_or_else(|| format!("{} names no property to break", path.display()))?;
        if t.kind.as_deref() == Some("progress") {
            return Err(format!(
                "\"{property}\" is a progress property: one trace cannot show it on the implementation"
            ));
        }
        // Each step's action, or the one that leads there in the model.
        let mut actions = Vec::new();
        for (i, w) in t.states.windows(2).enumerate() {
            let a = match t.actions[i + 1] {
                Some(a) => a,
                None => {
                    let mut enabled = Vec::new();
                    highwater_model::actions::enabled(&t.config, &w[0], &mut enabled);
                    enabled
                        .into_iter()
                        .find(|a| {
                            highwater_model::actions::apply(&t.config, &w[0], *a).as_ref()
                                == Some(&w[1])
                        })
                        .ok_or_else(|| format!("step {}: no model action leads there", i + 1))?
                }
            };
            actions.push(a);
        }
        println!("trace {}: {}", path.display(), t.config);
        return Ok((t.config, property, actions));
    }
    let name = cli.preset.as_deref().unwrap_or_default();
    let (preset, property) = breaking_preset(name)?;
    println!("preset {}: {}", preset.name, preset.summary);
    println!("finding the shortest counterexample to \"{property}\" in the model ...");
    let actions = shortest_counterexample(&preset.config, property)
        .ok_or_else(|| format!("the model finds no counterexample to \"{property}\""))?;
    Ok((preset.config, property.to_string(), actions))
}

fn run(cli: &Cli) -> Result<bool, String> {
    // The directory first: finding a preset's counterexample is a search.
    highwater_model::outdir::replay_dir(&cli.dir, cli.force)?;
    let (config, property, actions) = what_to_replay(cli)?;
    let property = property.as_str();
    println!(
        "replaying its {} steps on the implementation in {}",
        actions.len(),
        cli.dir.display()
    );
    let mut both = match Lockstep::start(&config, &cli.dir) {
        Ok(b) => b,
        Err(d) => {
            println!("{d}");
            return Ok(false);
        }
    };
    for (i, &a) in actions.iter().enumerate() {
        if let Err(d) = both.step(a) {
            println!("the implementation left the model {d}");
            return Ok(false);
        }
        println!("step {}: {a}", i + 1);
        if cli.verbose {
            print!("{}", state_table(both.model()));
        }
    }
    let snap = both
        .implementation()
        .snapshot()
        .map_err(|e| format!("cannot read the cluster back: {e}"))?;
    let seen = abstract_state(&config, &snap)
        .map_err(|e| format!("cannot map the cluster onto the model: {e}"))?;
    println!("\nthe implementation after the last step, read back from its files:");
    print!("{}", state_table(&seen));
    let broken = snap.broken_properties();
    for b in &broken {
        println!("broken on the implementation: {}: {}", b.property, b.detail);
    }
    for r in 0..config.replicas {
        if let Some(d) = both.implementation().data_dir(u32::from(r)) {
            println!("broker {r} ({}): {}", replica_name(r), d.display());
        }
    }
    println!(
        "inspect a partition with: cargo run --release -p highwater --bin highwater-dump-log -- dump --records <broker dir>/{}",
        both.implementation().config().topic_partition.dir_name()
    );
    let reproduced = broken.iter().any(|b| b.property == property);
    if reproduced {
        println!("\"{property}\" broke on the implementation, as in the model");
    } else {
        println!("\"{property}\" did NOT break on the implementation");
    }
    Ok(reproduced)
}
