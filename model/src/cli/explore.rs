//! `highwater explore`: serve the web explorer (`explorer.rs`) at once,
//! then check the configuration as `check` does while the page shows the
//! check's progress; when it ends, the page shows the verdicts and a link
//! to each counterexample, and the same links are printed. stateright's
//! own web explorer (`stateright_explorer.rs`) then starts on a second
//! address, browsing the same paths: each counterexample's link there is
//! printed too, and the page links each path to it. Both addresses are
//! taken before the check. One Ctrl-C stops it all, during the check or
//! after.

use super::args::ExploreArgs;
use super::display::Display;
use highwater_model::explorer::Explorer;
use highwater_model::run::{self, Search};
use highwater_model::stateright_explorer::{self, ExplorerModel, Reserved};
use highwater_model::PartitionModel;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::Arc;

pub fn explore(args: ExploreArgs) -> Result<ExitCode, String> {
    if args.check.json || args.check.trace_out.is_some() {
        return Err(
            "--json and --trace-out belong to `check`; `explore` serves the explorer".into(),
        );
    }
    if let Some(path) = &args.trace {
        return explore_trace(path, &args);
    }
    let resolved = args.check.model.resolve()?;
    let cfg = resolved.config;
    let expect = args.check.expectation(&resolved);
    if args.check.search.cluster(0)?.is_some() {
        return Err(
            "explore runs in one process: drop --workers, --processes, --process and --hostfile"
                .to_string(),
        );
    }
    let opts = args.check.run_options(expect)?;
    let (listener, addr, any) = bind(&args.addr)?;
    let second = reserve(&args, addr, any, "when the check ends")?;
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
    explorer.stateright_at(second.addr(), same_host(addr, second.addr()));
    stop_on_ctrl_c();
    explorer.clone().serve(listener)?;
    let addr2 = second.addr();
    println!("highwater: exploring {describe}");
    println!("explorer: http://{addr}/ (Ctrl-C to stop): the page shows the check as it runs");
    println!("stateright's explorer: http://{addr2}/ once the check ends");
    let _ = std::io::stdout().flush();

    let mut display = Display::new(false, args.check.quiet, known);
    display.start();
    let report = run::run(cfg, None, expect, &opts, |p| {
        display.update(&p);
        explorer.progress(p);
    });
    display.finish();
    explorer.finish(&report);
    let up = start_stateright(
        &explorer,
        second,
        ExplorerModel::of_report(PartitionModel::new(cfg), &report),
    );
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
            if up {
                println!("  in stateright's explorer: http://{addr2}/#/steps/{path}");
            }
            any = true;
        }
    }
    if !any {
        println!("no counterexamples: every property the run decided holds");
    }
    done(addr, addr2, up, "every verdict");
    serve_until_stopped()
}

/// The addresses `addr` (`--addr`'s or `--stateright-addr`'s value) names,
/// for `what` ("" or "stateright's explorer "). Each must be on loopback:
/// neither explorer asks who browses it, so both serve this machine alone.
fn loopback(addr: &str, what: &str) -> Result<Vec<SocketAddr>, String> {
    let cannot = |why: String| format!("cannot serve {what}on {addr}: {why}");
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| cannot(e.to_string()))?
        .collect();
    if addrs.is_empty() {
        return Err(cannot("it names no address".into()));
    }
    if let Some(a) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        return Err(cannot(format!(
            "{} is not a loopback address; the explorers serve this machine \
             alone (give one such as 127.0.0.1:3000)",
            a.ip()
        )));
    }
    Ok(addrs)
}

/// Binds `--addr` first, so that a busy or bad address is an error before
/// any work. Also whether it asked for any free port (port 0).
fn bind(addr: &str) -> Result<(TcpListener, SocketAddr, bool), String> {
    let addrs = loopback(addr, "")?;
    let listener =
        TcpListener::bind(&addrs[..]).map_err(|e| format!("cannot serve on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    Ok((listener, local, addrs.iter().all(|a| a.port() == 0)))
}

/// Holds stateright's explorer's address (`--stateright-addr`, or the
/// port after ours, `any`: any free one) until it starts `when`.
fn reserve(
    args: &ExploreArgs,
    ours: SocketAddr,
    any: bool,
    when: &str,
) -> Result<Reserved, String> {
    let addr = match &args.stateright_addr {
        Some(a) => a.clone(),
        None => {
            let port = if any {
                0
            } else {
                ours.port().checked_add(1).ok_or_else(|| {
                    format!(
                        "--addr's port is {}: there is no next one for stateright's \
                         explorer; give --stateright-addr",
                        ours.port()
                    )
                })?
            };
            SocketAddr::new(ours.ip(), port).to_string()
        }
    };
    let addrs = loopback(&addr, "stateright's explorer ")?;
    // Said plainly, rather than as the busy address it would be.
    if addrs.contains(&ours) {
        return Err(format!(
            "--stateright-addr {addr} is the explorer's own address ({ours}, --addr): \
             each explorer needs a port of its own"
        ));
    }
    let page = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"5\">\
         <title>stateright's explorer: not yet</title></head><body>\
         <p>stateright's explorer starts here {when}; this page reloads until then.</p>\
         <p>Meanwhile: <a href=\"http://{ours}/\">http://{ours}/</a></p></body></html>"
    );
    stateright_explorer::reserve(&addrs, &addr, page)
}

/// Whether the browser reaches both addresses by the same host name.
fn same_host(ours: SocketAddr, theirs: SocketAddr) -> bool {
    ours.ip() == theirs.ip()
}

/// Starts stateright's explorer on the held address; the page links to it
/// once it is up. Whether it is.
fn start_stateright(explorer: &Arc<Explorer>, second: Reserved, model: ExplorerModel) -> bool {
    let result = second.serve(model).map(|unmarked| {
        for m in unmarked {
            eprintln!("warning: {m}: its link there opens unmarked");
        }
    });
    if let Err(e) = &result {
        eprintln!("highwater: {e}");
    }
    let up = result.is_ok();
    explorer.stateright_started(result);
    up
}

fn done(addr: SocketAddr, addr2: SocketAddr, up: bool, what: &str) {
    if up {
        println!(
            "done: the page at http://{addr}/ shows {what}, stateright's explorer at \
             http://{addr2}/ too (Ctrl-C to stop)"
        );
    } else {
        println!("done: the page at http://{addr}/ shows {what} (Ctrl-C to stop)");
    }
    let _ = std::io::stdout().flush();
}

/// One Ctrl-C ends the process, whatever it is doing: the check is of no
/// use half done, and serving has nothing to finish. Ending the process
/// closes both servers' ports (stateright's server has no other way to
/// stop). 130 is 128 + SIGINT, as shells report it.
fn stop_on_ctrl_c() {
    let _ = ctrlc::set_handler(|| {
        println!();
        println!("explorer: stopped");
        let _ = std::io::stdout().flush();
        std::process::exit(run::exit::INTERRUPTED.into());
    });
}

/// The servers run in threads of their own; this one waits for Ctrl-C.
fn serve_until_stopped() -> ! {
    loop {
        std::thread::park();
    }
}

/// Serves a saved trace: checked step by step on the model first.
fn explore_trace(path: &std::path::Path, args: &ExploreArgs) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let t =
        highwater_model::itf::from_itf(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    super::replay::check_steps(&t)
        .map_err(|e| format!("{} is not a behaviour of the model: {e}", path.display()))?;
    let title = format!("{} under {}", path.display(), t.config);
    let explorer = Explorer::of_trace(t.config, title.clone(), t.property.as_deref(), &t.states)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let model = ExplorerModel::of_trace(
        PartitionModel::new(t.config),
        t.property.as_deref(),
        &t.states,
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    let (listener, addr, any) = bind(&args.addr)?;
    let second = reserve(args, addr, any, "in a moment")?;
    let addr2 = second.addr();
    explorer.stateright_at(addr2, same_host(addr, addr2));
    stop_on_ctrl_c();
    explorer.clone().serve(listener)?;
    println!("highwater: exploring {title}");
    println!("explorer: http://{addr}/ (Ctrl-C to stop)");
    let trail = model.trail_fragments().first().map(|s| s.to_string());
    let up = start_stateright(&explorer, second, model);
    if up {
        println!("stateright's explorer: http://{addr2}/");
    }
    let steps = t.states.len().saturating_sub(1);
    let named = explorer.status().properties.first().cloned();
    let path = named
        .as_ref()
        .and_then(|p| p.path.clone())
        .or(trail)
        .unwrap_or_else(|| "0".into());
    match (&t.property, named) {
        (Some(name), Some(_)) => {
            println!("the trace (\"{name}\", {steps} steps): http://{addr}/#/steps/{path}")
        }
        (name, _) => {
            if let Some(name) = name {
                println!("the trace names \"{name}\", which the model does not have");
            }
            println!("the trace ({steps} steps): http://{addr}/#/steps/{path}");
        }
    }
    if up {
        println!("  in stateright's explorer: http://{addr2}/#/steps/{path}");
    }
    done(addr, addr2, up, "the trace");
    serve_until_stopped()
}
