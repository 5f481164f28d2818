//! `highwater explore`: check the configuration as `check` does, print a
//! link to each counterexample, and serve stateright's web explorer on the
//! check's results (`explorer.rs`): each state drawn as a picture, each
//! link opening on its path with the broken property marked.

use super::args::ExploreArgs;
use super::display::Display;
use highwater_model::explorer::ExplorerModel;
use highwater_model::run::{self, Ended};
use highwater_model::PartitionModel;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

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
    let mut opts = args.check.run_options(expect)?;
    opts.interrupt = Some(super::check::install_interrupt());
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
    let mut display = Display::new(false, args.check.quiet, None);
    display.start();
    let report = run::run(cfg, None, expect, &opts, |p| display.update(&p));
    display.finish();
    if report.ended == Ended::Interrupted {
        println!("interrupted before the explorer started");
        return Ok(ExitCode::from(130));
    }
    let broken: Vec<(&'static str, &'static str, usize)> = report
        .properties
        .iter()
        .filter_map(|p| Some((p.name, p.kind, p.counterexample.as_ref()?.len() - 1)))
        .collect();
    if broken.is_empty() {
        println!("no counterexamples: every property the run decided holds");
    }
    let model = ExplorerModel::new(PartitionModel::new(cfg), &report);
    // Once the server listens, run its (bounded) search, so that the page
    // shows the verdicts and each link its broken property.
    std::thread::spawn(move || {
        let links = run_to_completion(addr);
        // The links are the explorer's own discoveries: the check's paths.
        for (name, kind, steps) in &broken {
            let what = if *kind == "progress" {
                "a state that cannot heal"
            } else {
                "counterexample"
            };
            match links.iter().find(|(n, _)| n == name) {
                Some((_, path)) => {
                    println!("{what} (\"{name}\", {steps} steps): http://{addr}/#/steps/{path}")
                }
                None => println!("{what} (\"{name}\", {steps} steps): not found by the explorer"),
            }
        }
        println!("explorer: http://{addr}/ (Ctrl-C to stop)");
        let _ = std::io::stdout().flush();
    });
    use stateright::Model;
    model.checker().threads(1).serve(addr);
    Ok(ExitCode::SUCCESS)
}

/// Asks the explorer to search (it listens soon after this thread starts)
/// and waits until it is done; returns each property's discovery path.
fn run_to_completion(addr: SocketAddr) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut asked = false;
    while Instant::now() < deadline {
        if !asked {
            asked = request(addr, "POST", "/.runtocompletion").is_some();
        } else if let Some(body) = request(addr, "GET", "/.status") {
            if let Ok(status) = serde_json::from_str::<serde_json::Value>(&body) {
                if status["done"] == true {
                    return status["properties"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|p| {
                            Some((p[1].as_str()?.to_string(), p[2].as_str()?.to_string()))
                        })
                        .collect();
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    vec![]
}

/// One HTTP/1.0 exchange with the explorer; the body, if it answered.
fn request(addr: SocketAddr, method: &str, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    let request = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n");
    s.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    s.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then(|| body.to_string())
}

/// Serves a saved trace: checked step by step on the model first.
fn explore_trace(path: &std::path::Path, addr: &str) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let t =
        highwater_model::itf::from_itf(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    super::replay::check_steps(&t)
        .map_err(|e| format!("{} is not a behaviour of the model: {e}", path.display()))?;
    let probe =
        std::net::TcpListener::bind(addr).map_err(|e| format!("cannot serve on {addr}: {e}"))?;
    let addr = probe.local_addr().map_err(|e| e.to_string())?;
    drop(probe);
    println!("highwater: exploring {} under {}", path.display(), t.config);
    let model = ExplorerModel::of_trace(
        PartitionModel::new(t.config),
        t.property.as_deref(),
        &t.states,
    );
    let name = t.property.clone();
    let steps = t.states.len() - 1;
    std::thread::spawn(move || {
        let links = run_to_completion(addr);
        if let Some(name) = name {
            match links.iter().find(|(n, _)| *n == name) {
                Some((_, p)) => {
                    println!("the trace (\"{name}\", {steps} steps): http://{addr}/#/steps/{p}")
                }
                None => println!("the trace does not break \"{name}\" in the explorer"),
            }
        }
        println!("explorer: http://{addr}/ (Ctrl-C to stop)");
        let _ = std::io::stdout().flush();
    });
    use stateright::Model;
    model.checker().threads(1).serve(addr);
    Ok(ExitCode::SUCCESS)
}
