//! `highwater explore`: find each counterexample, print a link to it, and
//! serve stateright's web explorer.

use super::args::{threads, ExploreArgs};
use highwater_model::run::{self, RunOptions, Search};
use highwater_model::PartitionModel;
use std::io::Write;
use std::process::ExitCode;

pub fn explore(args: ExploreArgs) -> Result<ExitCode, String> {
    let resolved = args.model.resolve()?;
    let cfg = resolved.config;
    // Bind first so that a busy or bad address is an error, not a panic in
    // the explorer's server.
    let probe = std::net::TcpListener::bind(&args.addr)
        .map_err(|e| format!("cannot serve on {}: {e}", args.addr))?;
    let addr = probe.local_addr().map_err(|e| e.to_string())?;
    drop(probe);
    println!(
        "highwater: exploring preset {}: {cfg}",
        resolved.preset.name
    );
    println!("looking for counterexamples first (exhaustive, symmetry-reduced)...");
    let mut opts = RunOptions::new(threads(args.threads)?, Search::Graph);
    opts.interrupt = Some(super::check::install_interrupt());
    let mut display = super::display::Display::new(false, false, None);
    let report = run::run(cfg, None, None, &opts, |p| display.update(&p));
    display.finish();
    let mut any = false;
    for prop in &report.properties {
        if let Some(steps) = &prop.counterexample {
            any = true;
            println!(
                "counterexample to \"{}\": http://{addr}/{}",
                prop.name,
                run::explorer_fragment(steps)
            );
        }
    }
    if !any {
        println!("no counterexamples: every always-property holds");
    }
    println!("explorer: http://{addr}/ (Ctrl-C to stop)");
    let _ = std::io::stdout().flush();
    use stateright::Model;
    PartitionModel::new(cfg).checker().serve(addr);
    Ok(ExitCode::SUCCESS)
}
