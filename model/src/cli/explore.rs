//! `highwater explore`: serve the web explorer (`explorer.rs`) at once,
//! then check the configuration as `check` does while the page shows the
//! check's progress; when it ends, the page shows the verdicts and a link
//! to each counterexample, and the same links are printed. One Ctrl-C
//! stops it all, during the check or after.

use super::args::ExploreArgs;
use super::display::Display;
use highwater_model::explorer::Explorer;
use highwater_model::run::{self, Search};
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::process::ExitCode;

pub fn explore(args: ExploreArgs) -> Result<ExitCode, String> {
    if args.check.json || args.check.trace_out.is_some() {
        return Err(
            "--json and --trace-out belong to `check`; `explore` serves the explorer".into(),
        );
    }
    if let Some(path) = &args.trace {
        return explore_trace(path, &args.addr);
    }
    let resolved = args.check.model.resolve()?;
    let cfg = resolved.config;
    let expect = args.check.expectation(&resolved);
    let opts = args.check.run_options(expect)?;
    let (listener, addr) = bind(&args.addr)?;
    let describe = if resolved.changed {
        format!("preset {} with overrides: {cfg}", resolved.preset.name)
    } else {
        format!("preset {}: {cfg}", resolved.preset.name)
    };
    // As `check`'s display: an estimate only for an unchanged preset's
    // default search, whose state count was measured.
    let known = (!resolved.changed)
        .then_some(resolved.preset.measured)
        .flatten()
        .map(|m| m.unique_states)
        .filter(|_| opts.search == Search::Graph);
    let explorer = Explorer::checking(cfg, describe.clone(), known);
    stop_on_ctrl_c();
    explorer.clone().serve(listener)?;
    println!("highwater: exploring {describe}");
    println!("explorer: http://{addr}/ (Ctrl-C to stop): the page shows the check as it runs");
    let _ = std::io::stdout().flush();

    let mut display = Display::new(false, args.check.quiet, known);
    display.start();
    let report = run::run(cfg, None, expect, &opts, |p| {
        display.update(&p);
        explorer.progress(p);
    });
    display.finish();
    explorer.finish(&report);
    let status = explorer.status();
    let mut any = false;
    for p in &status.properties {
        if let (Some(what @ ("counterexample" | "a state that cannot heal")), Some(path)) =
            (p.what, &p.path)
        {
            let steps = p.steps.unwrap_or(0);
            println!(
                "{what} (\"{}\", {steps} steps): http://{addr}/#/steps/{path}",
                p.name
            );
            any = true;
        }
    }
    if !any {
        println!("no counterexamples: every property the run decided holds");
    }
    println!("done: the page at http://{addr}/ shows every verdict (Ctrl-C to stop)");
    let _ = std::io::stdout().flush();
    serve_until_stopped()
}

/// Binds `addr` first, so that a busy or bad address is an error before
/// any work.
fn bind(addr: &str) -> Result<(TcpListener, SocketAddr), String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("cannot serve on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    Ok((listener, local))
}

/// One Ctrl-C ends the process, whatever it is doing: the check is of no
/// use half done, and serving has nothing to finish. 130 is 128 + SIGINT,
/// as shells report it.
fn stop_on_ctrl_c() {
    let _ = ctrlc::set_handler(|| {
        println!();
        println!("explorer: stopped");
        let _ = std::io::stdout().flush();
        std::process::exit(run::exit::INTERRUPTED.into());
    });
}

/// The server runs in its own thread; this one waits for Ctrl-C.
fn serve_until_stopped() -> ! {
    loop {
        std::thread::park();
    }
}

/// Serves a saved trace: checked step by step on the model first.
fn explore_trace(path: &std::path::Path, addr: &str) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let t =
        highwater_model::itf::from_itf(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    super::replay::check_steps(&t)
        .map_err(|e| format!("{} is not a behaviour of the model: {e}", path.display()))?;
    let (listener, addr) = bind(addr)?;
    let title = format!("{} under {}", path.display(), t.config);
    let explorer = Explorer::of_trace(t.config, title.clone(), t.property.as_deref(), &t.states)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    stop_on_ctrl_c();
    explorer.clone().serve(listener)?;
    println!("highwater: exploring {title}");
    println!("explorer: http://{addr}/ (Ctrl-C to stop)");
    let steps = t.states.len().saturating_sub(1);
    match (&t.property, explorer.status().properties.first()) {
        (Some(name), Some(p)) => println!(
            "the trace (\"{name}\", {steps} steps): http://{addr}/#/steps/{}",
            p.path.as_deref().unwrap_or("0")
        ),
        (Some(name), None) => println!("the trace names \"{name}\", which the model does not have"),
        (None, _) => {}
    }
    println!("done: the page at http://{addr}/ shows the trace (Ctrl-C to stop)");
    let _ = std::io::stdout().flush();
    serve_until_stopped()
}
