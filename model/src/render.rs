//! Human-readable states and counterexample step tables.

use crate::actions::Action;
use crate::state::{record_name, replica_name, LeaderView, ReplicaId, ReplicaSet, State};
use std::fmt::{self, Write};

/// One block per state: a line per replica, then the controller, the
/// LeaderAndIsr requests still to be taken, and the history.
pub fn state_table(s: &State) -> String {
    state_block(s, None, false)
}

/// Column names, in cell order.
const NAMES: [&str; 9] = [
    "state",
    "role",
    "epoch",
    "log (| = HW)",
    "LEO",
    "HW",
    "RP",
    "leader's ISR",
    "fetched",
];

/// A replica's cells, in header order.
fn replica_cells(s: &State, r: ReplicaId) -> [String; 9] {
    let x = s.replica(r);
    let state = match (x.alive, x.unclean_down) {
        (true, _) => "up",
        (false, false) => "down",
        (false, true) => "DOWN!",
    };
    let role = match x.leader {
        LeaderView::Unknown => "-".to_string(),
        LeaderView::NoLeader => "no leader".to_string(),
        LeaderView::Replica(l) if l == r => "leader".to_string(),
        LeaderView::Replica(l) => format!("follows {}", replica_name(l)),
    };
    let leads = x.leader == LeaderView::Replica(r);
    let isr = if leads {
        format!("{:?}", x.isr)
    } else {
        String::new()
    };
    // What the leader knows of each follower's LEO, from its fetches
    // (`?`: fetched by an incarnation that has since crashed, KIP-903).
    let fetched = if leads {
        s.ids()
            .filter(|&f| f != r)
            .map(|f| {
                let leo = x.follower_leo[f as usize].map_or("-".to_string(), |o| o.to_string());
                let stale = if x.stale_fetch.contains(f) { "?" } else { "" };
                format!("{}:{leo}{stale}", replica_name(f))
            })
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        String::new()
    };
    [
        state.to_string(),
        role,
        x.epoch.map_or("-".to_string(), |e| e.to_string()),
        log_text(s, r),
        x.leo().to_string(),
        x.hw.to_string(),
        x.recovery_point.to_string(),
        isr,
        fetched,
    ]
}

/// Cell widths and alignment (true: right-aligned), in header order.
const CELLS: [(usize, bool); 9] = [
    (6, false),
    (10, false),
    (6, false),
    (17, false),
    (3, true),
    (3, true),
    (3, true),
    (13, false),
    (0, false),
];

/// One row: a label, then each cell padded to its column, marked `*` where
/// `changed` says.
fn row(label: &str, cells: &[String], changed: impl Fn(usize) -> bool) -> String {
    let mut line = format!("  {label:<4} ");
    for (i, (cell, &(width, right))) in cells.iter().zip(&CELLS).enumerate() {
        let mark = if changed(i) { "*" } else { " " };
        if right {
            line.push_str(&format!("{cell:>width$}{mark} "));
        } else {
            line.push_str(&format!("{:<width$} ", format!("{cell}{mark}")));
        }
    }
    line.trim_end().to_string()
}

/// A state block; with `prev`, each changed cell is marked `*` (and with
/// `diff`, only changed lines are shown).
pub fn state_block(s: &State, prev: Option<&State>, diff: bool) -> String {
    let mut out = String::new();
    let names = NAMES.map(String::from);
    let _ = writeln!(out, "{}", row("", &names, |_| false));
    for r in s.ids() {
        let cells = replica_cells(s, r);
        let before = prev.map(|p| replica_cells(p, r));
        let changed = |i: usize| before.as_ref().is_some_and(|b| b[i] != cells[i]);
        if diff && !(0..cells.len()).any(changed) {
            continue;
        }
        let label = replica_name(r).to_string();
        let _ = writeln!(out, "{}", row(&label, &cells, changed));
    }
    for (line, prev_line) in [
        (controller_line(s), prev.map(controller_line)),
        (requests_line(s), prev.map(requests_line)),
        (history_line(s), prev.map(history_line)),
    ] {
        let changed = prev_line.is_some_and(|p| p != line);
        if diff && !changed {
            continue;
        }
        let _ = writeln!(out, "{}{line}", if changed { "* " } else { "  " });
    }
    out
}

fn controller_line(s: &State) -> String {
    let c = &s.controller;
    // The last known leader and the recovery state only when they say
    // something, so that most tables read as before KIP-966's extras.
    let mut extras = String::new();
    if !c.lke.is_empty() {
        let _ = write!(extras, ", last known leader {:?}", c.lke);
    }
    if c.recovering {
        extras.push_str(", RECOVERING");
    }
    if !c.fenced.is_empty() {
        let _ = write!(extras, ", fenced {:?}", c.fenced);
    }
    format!(
        "controller: leader {}, epoch {}, ISR {:?}, ELR {:?}{extras}",
        c.leader
            .map_or("none".to_string(), |l| replica_name(l).to_string()),
        c.epoch.map_or("-".to_string(), |e| e.to_string()),
        c.isr,
        c.elr
    )
}

/// The LeaderAndIsr requests some live replica may still take.
fn requests_line(s: &State) -> String {
    let mut parts = Vec::new();
    for (epoch, req) in s.requests.iter().enumerate() {
        let Some(req) = req else { continue };
        let epoch = epoch as u8;
        let takers: Vec<String> = s
            .ids()
            .filter(|&r| crate::actions::accepts_request(s, r, epoch))
            .map(|r| replica_name(r).to_string())
            .collect();
        if takers.is_empty() {
            continue;
        }
        let leader = req.leader.map_or("no leader".to_string(), |l| {
            format!("leader {}", replica_name(l))
        });
        parts.push(format!("epoch {epoch} ({leader}) for {}", takers.join(",")));
    }
    if parts.is_empty() {
        "LeaderAndIsr in flight: none".to_string()
    } else {
        format!("LeaderAndIsr in flight: {}", parts.join("; "))
    }
}

fn history_line(s: &State) -> String {
    format!(
        "acknowledged: {}   visible: {}",
        history_text(s, |h| h.acked),
        history_text(s, |h| h.visible)
    )
}

/// Entries as record letter + epoch, with `|` where the HW is; `..|` after
/// the last entry when the HW is past the log's end (a state that breaks
/// "HW <= LEO": the HW column says by how much).
fn log_text(s: &State, r: u8) -> String {
    let x = s.replica(r);
    let mut parts: Vec<String> = x.log.entries().iter().map(|e| format!("{e:?}")).collect();
    if x.hw <= x.leo() {
        parts.insert(x.hw as usize, "|".to_string());
    } else {
        parts.push("..|".to_string());
    }
    parts.join(" ")
}

fn history_text(s: &State, epoch_of: EpochOf) -> String {
    let items: Vec<String> = record_facts(s, epoch_of)
        .map(|f| format!("{}@{} (epoch {})", f.record, f.offset, f.epoch))
        .collect();
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

/// Which epoch of a record's history to show (acknowledged or visible).
type EpochOf = fn(&crate::state::RecordHistory) -> Option<u8>;

/// The produced records that `epoch_of` marks, with offset and epoch.
fn record_facts(s: &State, epoch_of: EpochOf) -> impl Iterator<Item = RecordFact> + '_ {
    s.produced_records()
        .iter()
        .enumerate()
        .filter_map(move |(id, h)| {
            epoch_of(h).map(|epoch| RecordFact {
                record: record_name(id as u8).to_string(),
                offset: h.offset,
                epoch,
            })
        })
}

/// How step tables are drawn.
#[derive(Clone, Copy, Debug, Default)]
pub struct Style {
    /// Only the lines that changed at each step.
    pub diff: bool,
}

/// A counterexample: the initial state, then each action and the state it
/// leads to, changed cells marked, each kind of action glossed the first
/// time it appears.
pub fn step_table(path: &[(State, Option<Action>)]) -> String {
    steps_table(path, 0, Style::default())
}

/// Steps numbered from `first`: the initial state (no action) in full,
/// then each action and the state it leads to.
pub fn steps_table(path: &[(State, Option<Action>)], first: usize, style: Style) -> String {
    let mut out = String::new();
    let mut glossed = std::collections::HashSet::new();
    let mut prev: Option<&State> = None;
    for (i, (state, action)) in path.iter().enumerate() {
        match action {
            None => {
                let _ = writeln!(out, "step {}: initial state", first + i);
            }
            Some(a) => {
                let _ = writeln!(out, "step {}: {a}", first + i);
                if glossed.insert(std::mem::discriminant(a)) {
                    let _ = writeln!(out, "        ({})", a.gloss());
                }
            }
        }
        out.push_str(&state_block(state, prev, style.diff && prev.is_some()));
        prev = Some(state);
    }
    out
}

/// Steps that continue a path from its last state: each action and the
/// state it leads to, numbered from `first`.
pub fn continuation_table(path: &[(State, Option<Action>)], first: usize, style: Style) -> String {
    let Some(((start, _), rest)) = path.split_first() else {
        return String::new();
    };
    let mut out = String::new();
    let mut glossed = std::collections::HashSet::new();
    let mut prev = start;
    for (i, (state, action)) in rest.iter().enumerate() {
        if let Some(a) = action {
            let _ = writeln!(out, "step {}: {a}", first + i);
            if glossed.insert(std::mem::discriminant(a)) {
                let _ = writeln!(out, "        ({})", a.gloss());
            }
        }
        out.push_str(&state_block(state, Some(prev), style.diff));
        prev = state;
    }
    out
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&state_table(self))
    }
}

/// A state for machines (`--json`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct StateJson {
    pub replicas: Vec<ReplicaJson>,
    pub controller: ControllerJson,
    /// Record name -> (offset, lowest epoch at which it was acknowledged).
    pub acknowledged: Vec<RecordFact>,
    pub visible: Vec<RecordFact>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct ReplicaJson {
    pub name: String,
    pub alive: bool,
    pub unclean_down: bool,
    pub leader: Option<String>,
    pub epoch: Option<u8>,
    /// Entries as record name + epoch, e.g. "a0".
    pub log: Vec<String>,
    pub leo: u8,
    pub hw: u8,
    pub recovery_point: u8,
    /// The ISR the replica knows, while it leads.
    pub isr: Vec<String>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct ControllerJson {
    pub leader: Option<String>,
    pub epoch: Option<u8>,
    pub isr: Vec<String>,
    pub elr: Vec<String>,
    /// KIP-966's LastKnownElr (the last leader, while leaderless).
    pub last_known_elr: Vec<String>,
    /// The leader recovery state is RECOVERING (after an unclean or
    /// last-known-leader election).
    pub recovering: bool,
    /// Live brokers the controller fenced and has not unfenced.
    pub fenced: Vec<String>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct RecordFact {
    pub record: String,
    pub offset: u8,
    pub epoch: u8,
}

fn names(s: ReplicaSet) -> Vec<String> {
    s.iter().map(|r| replica_name(r).to_string()).collect()
}

pub fn state_json(s: &State) -> StateJson {
    StateJson {
        replicas: s
            .ids()
            .map(|r| {
                let x = s.replica(r);
                ReplicaJson {
                    name: replica_name(r).to_string(),
                    alive: x.alive,
                    unclean_down: x.unclean_down,
                    leader: match x.leader {
                        LeaderView::Replica(l) => Some(replica_name(l).to_string()),
                        _ => None,
                    },
                    epoch: x.epoch,
                    log: x.log.entries().iter().map(|e| format!("{e:?}")).collect(),
                    leo: x.leo(),
                    hw: x.hw,
                    recovery_point: x.recovery_point,
                    isr: names(x.isr),
                }
            })
            .collect(),
        controller: ControllerJson {
            leader: s.controller.leader.map(|l| replica_name(l).to_string()),
            epoch: s.controller.epoch,
            isr: names(s.controller.isr),
            elr: names(s.controller.elr),
            last_known_elr: names(s.controller.lke),
            recovering: s.controller.recovering,
            fenced: names(s.controller.fenced),
        },
        acknowledged: record_facts(s, |h| h.acked).collect(),
        visible: record_facts(s, |h| h.visible).collect(),
    }
}
