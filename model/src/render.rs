//! Human-readable states and counterexample step tables.

use crate::actions::Action;
use crate::state::{record_name, replica_name, LeaderView, ReplicaSet, State};
use std::fmt::{self, Write};

/// One block per state: a line per replica, then the controller and history.
pub fn state_table(s: &State) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "       state role       epoch log (| = HW)     LEO  HW  RP  leader's ISR"
    );
    for r in s.ids() {
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
        let epoch = x.epoch.map_or("-".to_string(), |e| e.to_string());
        let isr = if x.leader == LeaderView::Replica(r) {
            format!("{:?}", x.isr)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {:<4} {:<5} {:<10} {:<5} {:<16} {:>3} {:>3} {:>3}  {}",
            replica_name(r),
            state,
            role,
            epoch,
            log_text(s, r),
            x.leo(),
            x.hw,
            x.recovery_point,
            isr
        );
    }
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
    let _ = writeln!(
        out,
        "  controller: leader {}, epoch {}, ISR {:?}, ELR {:?}{extras}",
        c.leader
            .map_or("none".to_string(), |l| replica_name(l).to_string()),
        c.epoch.map_or("-".to_string(), |e| e.to_string()),
        c.isr,
        c.elr
    );
    let _ = writeln!(
        out,
        "  acknowledged: {}   visible: {}",
        history_text(s, |h| h.acked),
        history_text(s, |h| h.visible)
    );
    out
}

/// Entries as record letter + epoch, with `|` where the HW is.
fn log_text(s: &State, r: u8) -> String {
    let x = s.replica(r);
    let mut parts: Vec<String> = x.log.entries().iter().map(|e| format!("{e:?}")).collect();
    parts.insert(x.hw as usize, "|".to_string());
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
    s.records[..s.produced as usize]
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

/// A counterexample: the initial state, then each action and the state it
/// leads to.
pub fn step_table(path: &[(State, Option<Action>)]) -> String {
    let mut out = String::new();
    for (i, (state, action)) in path.iter().enumerate() {
        match action {
            None => {
                let _ = writeln!(out, "step {i}: initial state");
            }
            Some(a) => {
                let _ = writeln!(out, "step {i}: {a}");
            }
        }
        out.push_str(&state_table(state));
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
        },
        acknowledged: record_facts(s, |h| h.acked).collect(),
        visible: record_facts(s, |h| h.visible).collect(),
    }
}
