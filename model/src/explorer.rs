//! `highwater explore`'s web explorer: a small HTTP server and its page
//! (`explorer/`). It serves at once, while the check runs: the page shows
//! the check's progress (the same figures as the terminal, with the
//! estimate a preset's measured state count gives) and fills in the
//! verdicts and each counterexample's path when the check ends. Any path
//! through the model can be browsed meanwhile, each state drawn as a
//! picture (`picture.rs`) beside its step table.
//!
//! A path is the action indices of `run::explorer_fragment`: the page's
//! `#/steps/0/3/1` is the initial state (0), then the state's 4th enabled
//! action, then the next state's 2nd. Its steps are numbered as the CLI's
//! step tables number them: step 0 is the initial state, step k the state
//! after the k-th action.
//!
//! Routes: `/` (the page), `/explorer.js`, `/explorer.css`, `/.status`
//! (the check and the verdicts, JSON) and `/.path/0/3/1` (the path's steps
//! and the actions enabled at its end, JSON).

use crate::config::Config;
use crate::model::PartitionModel;
use crate::picture;
use crate::properties;
use crate::render;
use crate::run::{self, Ended, Outcome, Phase, Progress, Report, Verdict};
use crate::state::State;
use serde::Serialize;
use stateright::Model;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

const PAGE: &str = include_str!("explorer/index.html");
const SCRIPT: &str = include_str!("explorer/explorer.js");
const STYLE: &str = include_str!("explorer/explorer.css");

/// The longest path served: far past any counterexample, short enough
/// that a mistyped address cannot keep the server busy.
const MAX_PATH: usize = 1000;

/// The check as the page shows it.
#[derive(Clone, Debug, Serialize)]
pub struct CheckView {
    /// The check has ended (its verdicts are in `StatusView::properties`).
    pub done: bool,
    pub phase: Phase,
    /// What the check is doing, in the terminal's words.
    pub heading: &'static str,
    /// The latest figures: states (with repeats), unique states, depth.
    pub progress: Progress,
    /// Unique states of an unchanged preset, as measured (for an estimate).
    pub known_states: Option<u64>,
    /// How far the search is, from `known_states` (searching only).
    pub percent: Option<f64>,
    pub ended: Option<Ended>,
    pub outcome: Option<Outcome>,
    /// Where the verdicts contradict the expectation.
    pub mismatches: Vec<String>,
}

/// A property as the page shows it.
#[derive(Clone, Debug, Serialize)]
pub struct PropertyView {
    pub name: String,
    /// "always", "sometimes" or "progress".
    pub kind: &'static str,
    /// None while the check runs.
    pub verdict: Option<Verdict>,
    /// What `path` leads to: "counterexample", "example", or "a state that
    /// cannot heal".
    pub what: Option<&'static str>,
    /// Actions on `path`.
    pub steps: Option<usize>,
    /// Its path: action indices joined by `/` (the page's `#/steps/...`).
    pub path: Option<String>,
}

/// stateright's own explorer, on a second address
/// (`stateright_explorer.rs`).
#[derive(Clone, Debug, Serialize)]
pub struct StaterightView {
    /// Its address: `http://HOST:PORT/`.
    pub url: String,
    pub port: u16,
    /// On this page's host: the page links to its own host name and
    /// `port`, as the browser knows it.
    pub same_host: bool,
    /// "starting" (it starts when the check ends), "up" or "failed".
    pub state: &'static str,
    pub error: Option<String>,
}

/// `/.status`.
#[derive(Clone, Debug, Serialize)]
pub struct StatusView {
    /// Nothing more will change: the check has ended (or there is none),
    /// and stateright's explorer is up (or could not start).
    pub done: bool,
    /// What is explored: the preset and its settings, or the trace's file.
    pub title: String,
    /// The check (none for a saved trace).
    pub check: Option<CheckView>,
    pub properties: Vec<PropertyView>,
    pub stateright: Option<StaterightView>,
}

impl StatusView {
    fn settle(&mut self) {
        self.done = self.check.as_ref().is_none_or(|c| c.done)
            && self
                .stateright
                .as_ref()
                .is_none_or(|s| s.state != "starting");
    }
}

/// One step of a path (`/.path`).
#[derive(Clone, Debug, Serialize)]
pub struct StepView {
    /// 0: the initial state; k: the state after the k-th action.
    pub step: usize,
    pub action: Option<String>,
    /// The path to this step (action indices joined by `/`).
    pub path: String,
    /// The state as the CLI's step tables print it (`*`: changed).
    pub table: String,
    pub svg: String,
    /// The always-properties this state breaks.
    pub broken: Vec<&'static str>,
}

/// An action enabled at the end of a path.
#[derive(Clone, Debug, Serialize)]
pub struct NextView {
    pub index: usize,
    pub action: String,
    /// The path it leads to (None: the model ignores it there).
    pub path: Option<String>,
}

/// `/.path/...`: the path's steps and what can come next.
#[derive(Clone, Debug, Serialize)]
pub struct PathView {
    pub steps: Vec<StepView>,
    pub next: Vec<NextView>,
}

/// The explorer: the model, and what the page shows of the check.
pub struct Explorer {
    model: PartitionModel,
    status: Mutex<StatusView>,
}

impl Explorer {
    /// The explorer of `cfg` before its check: every property still to
    /// decide. `known_states` (a preset's measured count) gives the page an
    /// estimate.
    pub fn checking(cfg: Config, title: String, known_states: Option<u64>) -> Arc<Explorer> {
        let model = PartitionModel::new(cfg);
        let mut properties: Vec<PropertyView> = model
            .properties()
            .iter()
            .map(|p| undecided(p.name, kind_of(&p.expectation)))
            .collect();
        for name in [
            crate::progress::RECOVERABLE,
            crate::progress::ACKED_REPLICATED,
        ] {
            properties.push(undecided(name, "progress"));
        }
        let check = CheckView {
            done: false,
            phase: Phase::Search,
            heading: Phase::Search.heading(),
            progress: Progress::default(),
            known_states,
            percent: known_states.map(|_| 0.0),
            ended: None,
            outcome: None,
            mismatches: vec![],
        };
        Arc::new(Explorer {
            model,
            status: Mutex::new(StatusView {
                done: false,
                title,
                check: Some(check),
                properties,
                stateright: None,
            }),
        })
    }

    /// The explorer of a saved trace of `cfg` (each step already checked on
    /// the model): its path, as a counterexample of `property` when the
    /// model has that property. Errs when a step is no action of the model.
    pub fn of_trace(
        cfg: Config,
        title: String,
        property: Option<&str>,
        states: &[State],
    ) -> Result<Arc<Explorer>, String> {
        let model = PartitionModel::new(cfg);
        let path = path_of(&model, states)?;
        let properties = property
            .and_then(|name| model.properties().into_iter().find(|p| p.name == name))
            .map(|p| PropertyView {
                name: p.name.to_string(),
                kind: kind_of(&p.expectation),
                verdict: Some(Verdict::Counterexample),
                what: Some("counterexample"),
                steps: Some(states.len().saturating_sub(1)),
                path: Some(path),
            })
            .into_iter()
            .collect();
        Ok(Arc::new(Explorer {
            model,
            status: Mutex::new(StatusView {
                done: true,
                title,
                check: None,
                properties,
                stateright: None,
            }),
        }))
    }

    /// The check's latest figures.
    pub fn progress(&self, p: Progress) {
        let mut status = self.status.lock().expect("not poisoned");
        if let Some(c) = &mut status.check {
            c.phase = p.phase;
            c.heading = p.phase.heading();
            c.progress = p;
            // As the terminal's: an estimate only of the search itself.
            c.percent = c
                .known_states
                .filter(|_| p.phase == Phase::Search)
                .map(|k| (100.0 * p.unique_states as f64 / k.max(1) as f64).min(100.0));
        }
    }

    /// The check has ended: its verdicts and paths.
    pub fn finish(&self, report: &Report) {
        let mut status = self.status.lock().expect("not poisoned");
        if let Some(c) = &mut status.check {
            c.done = true;
            c.progress = Progress {
                phase: c.phase,
                ..report.progress
            };
            c.percent = None;
            c.ended = Some(report.ended);
            c.outcome = Some(report.outcome);
            c.mismatches = report.mismatches.clone();
        }
        status.properties = report
            .properties
            .iter()
            .map(|p| {
                let (what, steps) = match (&p.counterexample, &p.example) {
                    (Some(c), _) if p.kind == "progress" => {
                        (Some("a state that cannot heal"), Some(c))
                    }
                    (Some(c), _) => (Some("counterexample"), Some(c)),
                    (None, Some(e)) => (Some("example"), Some(e)),
                    (None, None) => (None, None),
                };
                PropertyView {
                    name: p.name.to_string(),
                    kind: p.kind,
                    verdict: Some(p.verdict),
                    what,
                    steps: steps.map(|s| s.len().saturating_sub(1)),
                    path: steps.map(|s| {
                        run::explorer_fragment(s)
                            .trim_start_matches("#/steps/")
                            .to_string()
                    }),
                }
            })
            .collect();
        status.settle();
    }

    /// stateright's explorer will serve on `addr` (starting: when the check
    /// ends); `same_host`: on this page's host.
    pub fn stateright_at(&self, addr: std::net::SocketAddr, same_host: bool) {
        let mut status = self.status.lock().expect("not poisoned");
        status.stateright = Some(StaterightView {
            url: format!("http://{addr}/"),
            port: addr.port(),
            same_host,
            state: "starting",
            error: None,
        });
        status.settle();
    }

    /// stateright's explorer is up (Ok) or could not start (Err).
    pub fn stateright_started(&self, result: Result<(), String>) {
        let mut status = self.status.lock().expect("not poisoned");
        if let Some(s) = &mut status.stateright {
            match result {
                Ok(()) => s.state = "up",
                Err(e) => {
                    s.state = "failed";
                    s.error = Some(e);
                }
            }
        }
        status.settle();
    }

    pub fn status(&self) -> StatusView {
        self.status.lock().expect("not poisoned").clone()
    }

    /// The path `indices` (`0/3/1`: the initial state, then action
    /// indices), each step with its picture and table, and the actions
    /// enabled at its end. Errs, saying where, on a path the model does not
    /// have.
    pub fn path(&self, indices: &str) -> Result<PathView, String> {
        let parsed: Vec<usize> = indices
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse()
                    .map_err(|_| format!("{s:?} is not an action index"))
            })
            .collect::<Result<_, _>>()?;
        let Some((&first, actions)) = parsed.split_first() else {
            return Err("a path starts with the initial state's index, 0".into());
        };
        if parsed.len() > MAX_PATH {
            return Err(format!("a path of at most {MAX_PATH} steps"));
        }
        let inits = self.model.init_states();
        let mut state = *inits.get(first).ok_or_else(|| {
            format!(
                "no initial state {first}: the model has {}, numbered from 0",
                inits.len()
            )
        })?;
        let mut path = first.to_string();
        let mut steps = vec![self.step(0, None, None, state, path.clone())];
        for (k, &i) in actions.iter().enumerate() {
            let mut enabled = Vec::new();
            self.model.actions(&state, &mut enabled);
            let action = *enabled.get(i).ok_or_else(|| {
                format!(
                    "the state at step {k} has {} enabled actions, numbered from 0: there is no action {i}",
                    enabled.len()
                )
            })?;
            let next = self
                .model
                .next_state(&state, action)
                .ok_or_else(|| format!("action {i} at step {k} ({action}) leads nowhere"))?;
            path.push_str(&format!("/{i}"));
            steps.push(self.step(k + 1, Some(action), Some(&state), next, path.clone()));
            state = next;
        }
        let mut enabled = Vec::new();
        self.model.actions(&state, &mut enabled);
        let next = enabled
            .into_iter()
            .enumerate()
            .map(|(index, a)| NextView {
                index,
                action: a.to_string(),
                path: self
                    .model
                    .next_state(&state, a)
                    .map(|_| format!("{path}/{index}")),
            })
            .collect();
        Ok(PathView { steps, next })
    }

    fn step(
        &self,
        step: usize,
        action: Option<crate::actions::Action>,
        prev: Option<&State>,
        s: State,
        path: String,
    ) -> StepView {
        let broken = properties::broken(&s);
        StepView {
            step,
            action: action.map(|a| a.to_string()),
            path,
            table: render::state_block(&s, prev, false),
            svg: picture::svg(&s, action.as_ref(), &broken),
            broken,
        }
    }

    /// Serves the explorer on `listener` from a thread of its own, until
    /// the process ends.
    pub fn serve(self: Arc<Self>, listener: TcpListener) -> Result<(), String> {
        let server = tiny_http::Server::from_listener(listener, None)
            .map_err(|e| format!("cannot serve: {e}"))?;
        std::thread::spawn(move || {
            for request in server.incoming_requests() {
                self.answer(request);
            }
        });
        Ok(())
    }

    fn answer(&self, request: tiny_http::Request) {
        let url = request.url().to_string();
        let route = url.split(['?', '#']).next().unwrap_or("");
        let get = *request.method() == tiny_http::Method::Get;
        let json = |v: Result<String, String>| match v {
            Ok(body) => (200, body, "application/json"),
            Err(e) => (404, e, "text/plain; charset=utf-8"),
        };
        let (code, body, kind) = match route {
            _ if !get => (405, "GET only".to_string(), "text/plain"),
            "/" | "/index.html" => (200, PAGE.to_string(), "text/html; charset=utf-8"),
            "/explorer.js" => (200, SCRIPT.to_string(), "text/javascript; charset=utf-8"),
            "/explorer.css" => (200, STYLE.to_string(), "text/css; charset=utf-8"),
            "/.status" => json(serde_json::to_string(&self.status()).map_err(|e| e.to_string())),
            _ if route == "/.path" || route.starts_with("/.path/") => json(
                self.path(&route["/.path".len()..])
                    .and_then(|v| serde_json::to_string(&v).map_err(|e| e.to_string())),
            ),
            _ => (404, format!("no page {route}"), "text/plain"),
        };
        let mut response = tiny_http::Response::from_string(body).with_status_code(code);
        for (name, value) in [("Content-Type", kind), ("Cache-Control", "no-store")] {
            if let Ok(h) = tiny_http::Header::from_bytes(name, value) {
                response.add_header(h);
            }
        }
        // A browser that went away is no concern of the server's.
        let _ = request.respond(response);
    }
}

fn undecided(name: &str, kind: &'static str) -> PropertyView {
    PropertyView {
        name: name.to_string(),
        kind,
        verdict: None,
        what: None,
        steps: None,
        path: None,
    }
}

fn kind_of(e: &stateright::Expectation) -> &'static str {
    match e {
        stateright::Expectation::Always => "always",
        _ => "sometimes",
    }
}

/// The action indices (`0/3/1`) of a sequence of states, each the next
/// state of one enabled action of the one before.
fn path_of(model: &PartitionModel, states: &[State]) -> Result<String, String> {
    crate::stateright_explorer::path_of_states(model, states)
}
