//! `highwater`: check the partition model, list presets, serve the explorer.

mod cli;

use clap::Parser;
use cli::args::{Cli, Command};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Explore(_)) {
        highwater_model::sigpipe::end_when_stdout_closes();
    }
    let result = match cli.command {
        Command::Check(args) => cli::check::check(args),
        Command::Presets { json } => cli::presets::presets(json),
        Command::Explore(args) => cli::explore::explore(args),
        Command::Replay(args) => cli::replay::replay(args),
        Command::DumpLog { args } => cli::replay::dump_log(args),
    };
    match result {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}
