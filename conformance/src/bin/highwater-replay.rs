//! `highwater-replay`: runs a historical preset's shortest counterexample,
//! as the model checker finds it, on the reference implementation, in
//! lockstep with the model, and leaves the brokers' data directories (Kafka's
//! on-disk format) for inspection.
//!
//! Exit codes: 0 the property broke on the implementation as in the model,
//! 1 it did not (or the two diverged), 2 usage or I/O errors.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use highwater_conformance::abstraction::abstract_state;
use highwater_conformance::lockstep::Lockstep;
use highwater_conformance::replay::shortest_counterexample;
use highwater_model::presets::{Expect, Preset, PRESETS};
use highwater_model::render::state_table;
use highwater_model::state::replica_name;

#[derive(Parser)]
#[command(
    name = "highwater-replay",
    version,
    about = "Replay a historical preset's shortest counterexample on the reference implementation, on real files",
    after_help = "Exit status: 0 the loss happened on the implementation too, 1 it did not, 2 usage or I/O error.\n\
                  The brokers' directories are left in DIR/broker-<n>/; inspect them with highwater-dump-log."
)]
struct Cli {
    /// A preset that expects a counterexample (see `highwater presets`).
    #[arg(long)]
    preset: String,
    /// Where the brokers keep their data: created, and must be empty if it exists.
    #[arg(long)]
    dir: PathBuf,
    /// Print both states after every step, not only the last.
    #[arg(long)]
    verbose: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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

/// Creates `dir`, or accepts it if it is an empty directory: replaying never
/// writes among someone's files.
fn empty_dir(dir: &Path) -> Result<(), String> {
    match fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(format!(
                "{} is not empty; give a new or empty directory",
                dir.display()
            )),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
        }
        Err(e) => Err(format!("cannot read {}: {e}", dir.display())),
    }
}

fn run(cli: &Cli) -> Result<bool, String> {
    let (preset, property) = breaking_preset(&cli.preset)?;
    empty_dir(&cli.dir)?;
    println!("preset {}: {}", preset.name, preset.summary);
    println!("finding the shortest counterexample to \"{property}\" in the model ...");
    let actions = shortest_counterexample(&preset.config, property)
        .ok_or_else(|| format!("the model finds no counterexample to \"{property}\""))?;
    println!(
        "replaying its {} steps on the implementation in {}",
        actions.len(),
        cli.dir.display()
    );
    let mut both = match Lockstep::start(&preset.config, &cli.dir) {
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
    let seen = abstract_state(&preset.config, &snap)
        .map_err(|e| format!("cannot map the cluster onto the model: {e}"))?;
    println!("\nthe implementation after the last step, read back from its files:");
    print!("{}", state_table(&seen));
    let broken = snap.broken_properties();
    for b in &broken {
        println!("broken on the implementation: {}: {}", b.property, b.detail);
    }
    for r in 0..preset.config.replicas {
        if let Some(d) = both.implementation().data_dir(u32::from(r)) {
            println!("broker {r} ({}): {}", replica_name(r), d.display());
        }
    }
    println!(
        "inspect a partition with: cargo run -p highwater --bin highwater-dump-log -- dump --records <broker dir>/{}",
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
