//! stateright's own web explorer, beside ours (`explorer.rs`): the model as
//! its explorer browses it after a check, and its server on a second
//! address.
//!
//! stateright's explorer runs its own checker, which would search the whole
//! model again, without symmetry, for minutes. Instead its search is bounded
//! to the check's own paths (each counterexample, each stuck state's path,
//! each sometimes-property's example): a state here ([`Node`]) is the
//! model's state together with which of those paths the actions so far
//! have followed step for step, and the search never leaves them. Each
//! property is discovered only at the end of its own path, so its discovery
//! is the very path the check printed (`run::explorer_fragment`) and a
//! printed link opens with its property marked, in milliseconds. Any other
//! path can still be browsed: the actions, and their indices, are the
//! model's own.
//!
//! A property the check did not decide (a run stopped early), or decided
//! without a path to show, is left out rather than shown wrongly. A
//! progress property is shown as an always-property broken at the end of
//! its path (the state the check found cannot heal).
//!
//! stateright's server can only start after the check, and it panics on an
//! address it cannot bind; so the address is held from the start
//! ([`reserve`]): a busy or bad one is refused before the check runs, and
//! until the check ends it answers with a page saying the explorer starts
//! then.

use crate::actions::Action;
use crate::model::PartitionModel;
use crate::picture;
use crate::properties;
use crate::run::{self, Report, Verdict};
use crate::state::State;
use stateright::{Expectation, Model, Path, Property};
use std::fmt;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// A state as stateright's explorer sees it: the model's state, and which
/// of the check's paths lead here.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Node {
    pub state: State,
    /// Bit k: the actions so far are the first `depth` actions of path k.
    on: u32,
    /// Actions so far while on a path; 0 off every path, so that a state
    /// browsed off them is one node however it was reached.
    depth: u32,
}

/// The explorer prints a state as the step tables do.
impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.state.fmt(f)
    }
}

/// One of the check's paths: where it starts, each action and the state it
/// leads to, and its address (`0/3/1`: the initial state's index, then
/// each action's among those enabled).
#[derive(Clone, Debug)]
struct Trail {
    init: State,
    steps: Vec<(Action, State)>,
    fragment: String,
}

/// A property as the explorer shows it.
#[derive(Clone, Debug)]
struct Shown {
    name: &'static str,
    expectation: Expectation,
    /// None: a progress property.
    condition: Option<fn(&PartitionModel, &State) -> bool>,
    /// The check's path for it, at whose end alone it is discovered.
    trail: Option<usize>,
}

/// The model, the check's verdicts, and the paths it found.
#[derive(Clone, Debug)]
pub struct ExplorerModel {
    pub inner: PartitionModel,
    trails: Vec<Trail>,
    shown: Vec<Shown>,
}

impl ExplorerModel {
    /// The explorer's view of `report`, a run of `inner`.
    pub fn of_report(inner: PartitionModel, report: &Report) -> ExplorerModel {
        let model_properties = inner.properties();
        let mut m = ExplorerModel {
            inner,
            trails: vec![],
            shown: vec![],
        };
        for p in &report.properties {
            let path = p.counterexample.as_ref().or(p.example.as_ref());
            let with_path = matches!(p.verdict, Verdict::Counterexample | Verdict::Reached);
            let without = matches!(p.verdict, Verdict::Holds | Verdict::NotReached);
            let trail = match path.and_then(|s| trail_of_steps(s)) {
                Some(t) if with_path => Some(m.add_trail(t)),
                _ if without => None,
                // Undecided, or decided without a path to show.
                _ => continue,
            };
            let shown = if p.kind == "progress" {
                Shown {
                    name: p.name,
                    expectation: Expectation::Always,
                    condition: None,
                    trail,
                }
            } else if let Some(q) = model_properties.iter().find(|q| q.name == p.name) {
                Shown {
                    name: q.name,
                    expectation: q.expectation.clone(),
                    condition: Some(q.condition),
                    trail,
                }
            } else {
                continue;
            };
            m.shown.push(shown);
        }
        m.fit();
        m
    }

    /// The explorer's view of one saved trace (`explore --trace`): its
    /// path, and the property it breaks (if the model has it) discovered at
    /// its end. Errs when a step is no action of the model.
    pub fn of_trace(
        inner: PartitionModel,
        property: Option<&str>,
        states: &[State],
    ) -> Result<ExplorerModel, String> {
        let trail = trail_of_states(&inner, states)?;
        let shown = property
            .and_then(|name| inner.properties().into_iter().find(|q| q.name == name))
            .map(|q| Shown {
                name: q.name,
                expectation: q.expectation.clone(),
                condition: Some(q.condition),
                trail: Some(0),
            })
            .into_iter()
            .collect();
        let mut m = ExplorerModel {
            inner,
            trails: vec![trail],
            shown,
        };
        m.fit();
        Ok(m)
    }

    fn add_trail(&mut self, t: Trail) -> usize {
        self.trails.push(t);
        self.trails.len() - 1
    }

    /// At most one property per condition slot, one path per bit of
    /// `Node::on` (a unit test asks that every property fits).
    fn fit(&mut self) {
        self.shown.truncate(CONDITIONS.len());
        self.trails.truncate(u32::BITS as usize);
        let n = self.trails.len();
        for p in &mut self.shown {
            p.trail = p.trail.filter(|&k| k < n);
        }
    }

    /// Each property with a path, and that path's address (`0/3/1`): what
    /// the explorer's search is to discover.
    pub fn links(&self) -> Vec<(&'static str, String)> {
        self.shown
            .iter()
            .filter_map(|p| Some((p.name, self.trails[p.trail?].fragment.clone())))
            .collect()
    }

    /// Each path's address (`0/3/1`), in order.
    pub fn trail_fragments(&self) -> Vec<&str> {
        self.trails.iter().map(|t| t.fragment.as_str()).collect()
    }

    /// Whether `n` is the end of property `i`'s path.
    fn at_end(&self, i: usize, n: &Node) -> bool {
        self.shown[i]
            .trail
            .is_some_and(|k| n.on & (1 << k) != 0 && n.depth as usize == self.trails[k].steps.len())
    }

    /// Property `i` at `n`: its own condition, except that it is broken
    /// (always) or met (sometimes) only at the end of its path.
    fn holds(&self, i: usize, n: &Node) -> bool {
        let p = &self.shown[i];
        let real = match p.condition {
            Some(c) => c(&self.inner, &n.state),
            // A progress property: broken only where the check found a
            // state that cannot heal.
            None => p.trail.is_none(),
        };
        match (p.trail, &p.expectation) {
            (None, _) => real,
            (Some(_), Expectation::Always) => real || !self.at_end(i, n),
            (Some(_), _) => real && self.at_end(i, n),
        }
    }
}

/// A path of the report (step 0 the initial state, each later step with the
/// action that led to it). None if a step lacks its action.
fn trail_of_steps(steps: &[run::Step]) -> Option<Trail> {
    let (first, rest) = steps.split_first()?;
    let actions = rest
        .iter()
        .map(|s| Some((s.raw.1?, s.raw.0)))
        .collect::<Option<Vec<_>>>()?;
    Some(Trail {
        init: first.raw.0,
        steps: actions,
        fragment: run::explorer_fragment(steps)
            .trim_start_matches("#/steps/")
            .to_string(),
    })
}

/// The action indices (`0/3/1`) of a sequence of states, as both
/// explorers address a path.
pub(crate) fn path_of_states(model: &PartitionModel, states: &[State]) -> Result<String, String> {
    trail_of_states(model, states).map(|t| t.fragment)
}

/// A sequence of states, each the next state of an enabled action of the
/// one before (the first such action, as `explorer.rs` numbers it).
fn trail_of_states(model: &PartitionModel, states: &[State]) -> Result<Trail, String> {
    let first = *states.first().ok_or("an empty trace")?;
    let init = model
        .init_states()
        .iter()
        .position(|s| *s == first)
        .ok_or("the trace does not start in the model's initial state")?;
    let mut fragment = init.to_string();
    let mut steps = Vec::new();
    for (k, pair) in states.windows(2).enumerate() {
        let mut enabled = Vec::new();
        model.actions(&pair[0], &mut enabled);
        let i = enabled
            .iter()
            .position(|&a| model.next_state(&pair[0], a) == Some(pair[1]))
            .ok_or_else(|| format!("step {} of the trace is no action of the model", k + 1))?;
        fragment.push_str(&format!("/{i}"));
        steps.push((enabled[i], pair[1]));
    }
    Ok(Trail {
        init: first,
        steps,
        fragment,
    })
}

/// Property conditions are plain function pointers: one per slot.
macro_rules! conditions {
    ($($i:literal),*) => {
        const CONDITIONS: &[fn(&ExplorerModel, &Node) -> bool] = &[$(|m, n| m.holds($i, n)),*];
    };
}
conditions!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19);

impl Model for ExplorerModel {
    type State = Node;
    type Action = Action;

    fn init_states(&self) -> Vec<Node> {
        self.inner
            .init_states()
            .into_iter()
            .map(|state| Node {
                state,
                on: self
                    .trails
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| t.init == state)
                    .fold(0, |on, (k, _)| on | 1 << k),
                depth: 0,
            })
            .collect()
    }

    fn actions(&self, node: &Node, actions: &mut Vec<Action>) {
        self.inner.actions(&node.state, actions);
    }

    fn next_state(&self, node: &Node, action: Action) -> Option<Node> {
        let state = self.inner.next_state(&node.state, action)?;
        let d = node.depth as usize;
        let on = (0..self.trails.len())
            .filter(|&k| node.on & (1 << k) != 0)
            .filter(|&k| self.trails[k].steps.get(d) == Some(&(action, state)))
            .fold(0, |on, k| on | 1 << k);
        let depth = if on == 0 { 0 } else { node.depth + 1 };
        Some(Node { state, on, depth })
    }

    fn format_action(&self, action: &Action) -> String {
        action.to_string()
    }

    fn format_step(&self, last: &Node, action: Action) -> Option<String> {
        self.inner.format_step(&last.state, action)
    }

    /// The state's picture, as our explorer draws it.
    fn as_svg(&self, path: Path<Node, Action>) -> Option<String> {
        let steps = path.into_vec();
        let (node, _) = steps.last()?;
        // The action that led here is stored with the state before it.
        let action = steps.len().checked_sub(2).and_then(|i| steps[i].1);
        let broken = properties::broken(&node.state);
        Some(picture::svg(&node.state, action.as_ref(), &broken))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        self.shown
            .iter()
            .zip(CONDITIONS)
            .map(|(p, &condition)| Property {
                expectation: p.expectation.clone(),
                name: p.name,
                condition,
            })
            .collect()
    }

    fn within_boundary(&self, node: &Node) -> bool {
        node.on != 0
    }
}

/// The second address, held from the start until stateright's explorer
/// takes it over; meanwhile each request is answered (503) with a page
/// saying the explorer starts when the check ends.
pub struct Reserved {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    closed: mpsc::Receiver<()>,
}

/// Holds `addr` (the first of them that binds; `shown` as given) for
/// stateright's explorer, serving `page` (HTML) until it starts. Errs,
/// naming the address, on one that is busy.
pub fn reserve(addr: &[SocketAddr], shown: &str, page: String) -> Result<Reserved, String> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| format!("cannot serve stateright's explorer on {shown}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = Arc::clone(&stop);
    let (closed_tx, closed) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            if stopping.load(Ordering::SeqCst) {
                break;
            }
            if let Ok(stream) = conn {
                not_yet(stream, &page);
            }
        }
        drop(listener);
        let _ = closed_tx.send(());
    });
    Ok(Reserved {
        addr: local,
        stop,
        closed,
    })
}

/// One answer while the address is held, on a connection then closed (so
/// that no browser keeps it for a later request).
fn not_yet(mut stream: TcpStream, page: &str) {
    // Read the request first: closing a connection with it unread would
    // reset it before the browser reads the answer.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/html; charset=utf-8\r\n\
         Content-Length: {}\r\nRetry-After: 5\r\nCache-Control: no-store\r\n\
         Connection: close\r\n\r\n{page}",
        page.len()
    );
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

impl Reserved {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes the held address, once its thread has let it go.
    fn release(self) -> SocketAddr {
        self.stop.store(true, Ordering::SeqCst);
        // Its thread waits in accept: a connection of our own wakes it.
        let wake = match self.addr {
            SocketAddr::V4(a) if a.ip().is_unspecified() => {
                SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, a.port()))
            }
            SocketAddr::V6(a) if a.ip().is_unspecified() => {
                SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, a.port()))
            }
            a => a,
        };
        loop {
            let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
            match self.closed.recv_timeout(Duration::from_millis(100)) {
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                _ => return self.addr,
            }
        }
    }

    /// Hands the address to stateright's explorer browsing `model`, and
    /// waits for its bounded search. Returns each property the search did
    /// not discover at the end of the check's path (none, by design: its
    /// link would open unmarked); errs when the explorer cannot serve.
    pub fn serve(self, model: ExplorerModel) -> Result<Vec<String>, String> {
        let expected = model.links();
        let addr = self.release();
        // stateright's `serve` never returns: its web server runs until the
        // process ends (one Ctrl-C, `cli/explore.rs`).
        let server = std::thread::Builder::new()
            .name("stateright's explorer".into())
            .spawn(move || {
                model.checker().threads(1).serve(addr);
            })
            .map_err(|e| format!("cannot start stateright's explorer: {e}"))?;
        let gone = || format!("stateright's explorer could not serve on {addr}");
        // Its checker searches only when asked; it listens soon.
        while exchange(addr, "POST", "/.runtocompletion").is_none() {
            if server.is_finished() {
                return Err(gone());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let status = loop {
            let status = exchange(addr, "GET", "/.status")
                .and_then(|body| serde_json::from_str::<serde_json::Value>(&body).ok());
            match status {
                Some(s) if s["done"] == true => break s,
                _ if server.is_finished() => return Err(gone()),
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        // Its properties: [expectation, name, discovery path or null].
        let found = |name: &str| {
            status["properties"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p[1] == name)
                .and_then(|p| p[2].as_str().map(str::to_string))
        };
        Ok(expected
            .into_iter()
            .filter_map(|(name, path)| match found(name) {
                Some(p) if p == path => None,
                Some(p) => Some(format!(
                    "stateright's explorer found \"{name}\" at {p}, not at the check's {path}"
                )),
                None => Some(format!(
                    "stateright's explorer did not find \"{name}\" at the check's {path}"
                )),
            })
            .collect())
    }
}

/// One HTTP/1.0 exchange with stateright's explorer: the body of a 200.
fn exchange(addr: SocketAddr, method: &str, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let request = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n");
    s.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    s.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.split_whitespace()
        .nth(1)
        .is_some_and(|code| code == "200")
        .then(|| body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each property a report can have (the model's and the two progress
    /// properties) has a condition slot of its own: `fit` drops none.
    #[test]
    fn every_property_fits() {
        let n = PartitionModel::default().properties().len();
        assert!(n + 2 <= CONDITIONS.len(), "{n} properties and 2 progress");
    }

    /// A trace whose step is no action of the model is refused, saying
    /// which step.
    #[test]
    fn a_trace_off_the_model_is_refused() {
        let model = PartitionModel::default();
        let init = model.init_states()[0];
        let err = ExplorerModel::of_trace(model, None, &[init, init]).unwrap_err();
        assert_eq!(err, "step 1 of the trace is no action of the model");
    }
}
