//! Two-phase commit (Gray and Lamport's transaction commit, as in TLA+'s
//! `TwoPhase` and stateright's examples), the model the engine is held
//! against stateright's checkers on (`stateright_agreement.rs`) and the
//! distributed engine against the single-process one
//! (`distributed_agreement.rs`).

#![allow(dead_code)]

use highwater_checker::Checkable;
use serde::{Deserialize, Serialize};
use stateright::{Model, Property};
use std::collections::BTreeSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Rm {
    Working,
    Prepared,
    Committed,
    Aborted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Tm {
    Init,
    Committed,
    Aborted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Msg {
    Prepared(usize),
    Commit,
    Abort,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct State {
    pub rm: Vec<Rm>,
    pub tm: Tm,
    pub tm_prepared: Vec<bool>,
    pub msgs: BTreeSet<Msg>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    TmRcvPrepared(usize),
    TmCommit,
    TmAbort,
    RmPrepare(usize),
    RmChooseToAbort(usize),
    RmRcvCommitMsg(usize),
    RmRcvAbortMsg(usize),
}

/// A mistake planted in what the model tells the engine, to show that the
/// comparison notices it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flaw {
    None,
    /// The representative forgets which prepares the TM has received:
    /// states that are not symmetric become one.
    CoarseRepresentative,
    /// The engine's successor says the TM's abort does nothing, where
    /// `next_state` takes it.
    LostAbort,
}

#[derive(Clone, Debug)]
pub struct TwoPhase {
    pub rms: usize,
    /// Fingerprint a state by its class under renaming of resource managers.
    pub symmetric: bool,
    pub flaw: Flaw,
}

impl TwoPhase {
    pub fn new(rms: usize) -> Self {
        TwoPhase {
            rms,
            symmetric: false,
            flaw: Flaw::None,
        }
    }
}

impl Model for TwoPhase {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            rm: vec![Rm::Working; self.rms],
            tm: Tm::Init,
            tm_prepared: vec![false; self.rms],
            msgs: BTreeSet::new(),
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.tm == Tm::Init {
            if s.tm_prepared.iter().all(|&p| p) {
                actions.push(Action::TmCommit);
            }
            actions.push(Action::TmAbort);
        }
        for r in 0..self.rms {
            if s.tm == Tm::Init && s.msgs.contains(&Msg::Prepared(r)) && !s.tm_prepared[r] {
                actions.push(Action::TmRcvPrepared(r));
            }
            if s.rm[r] == Rm::Working {
                actions.push(Action::RmPrepare(r));
                actions.push(Action::RmChooseToAbort(r));
            }
            if s.msgs.contains(&Msg::Commit) && s.rm[r] != Rm::Committed {
                actions.push(Action::RmRcvCommitMsg(r));
            }
            if s.msgs.contains(&Msg::Abort) && s.rm[r] != Rm::Aborted {
                actions.push(Action::RmRcvAbortMsg(r));
            }
        }
    }

    fn next_state(&self, s: &State, a: Action) -> Option<State> {
        let mut n = s.clone();
        match a {
            Action::TmRcvPrepared(r) => n.tm_prepared[r] = true,
            Action::TmCommit => {
                n.tm = Tm::Committed;
                n.msgs.insert(Msg::Commit);
            }
            Action::TmAbort => {
                n.tm = Tm::Aborted;
                n.msgs.insert(Msg::Abort);
            }
            Action::RmPrepare(r) => {
                n.rm[r] = Rm::Prepared;
                n.msgs.insert(Msg::Prepared(r));
            }
            Action::RmChooseToAbort(r) | Action::RmRcvAbortMsg(r) => n.rm[r] = Rm::Aborted,
            Action::RmRcvCommitMsg(r) => n.rm[r] = Rm::Committed,
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("consistent", |_, s: &State| {
                !(s.rm.contains(&Rm::Committed) && s.rm.contains(&Rm::Aborted))
            }),
            // Broken on purpose: the shortest way to a commit takes every
            // prepare, every receipt of it, and the commit.
            Property::always("the TM never commits", |_, s: &State| s.tm != Tm::Committed),
            Property::sometimes("all commit", |_, s: &State| {
                s.rm.iter().all(|&r| r == Rm::Committed)
            }),
            Property::sometimes("an RM aborts on its own", |_, s: &State| {
                s.tm == Tm::Init && s.rm.contains(&Rm::Aborted)
            }),
            Property::sometimes("one commits while another aborts", |_, s: &State| {
                s.rm.contains(&Rm::Committed) && s.rm.contains(&Rm::Aborted)
            }),
        ]
    }
}

/// The same state with resource manager `order[i]` renamed `i`.
pub fn renamed(s: &State, order: &[usize]) -> State {
    let mut new_name = vec![0; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_name[old] = new;
    }
    State {
        rm: order.iter().map(|&r| s.rm[r]).collect(),
        tm: s.tm,
        tm_prepared: order.iter().map(|&r| s.tm_prepared[r]).collect(),
        msgs: s
            .msgs
            .iter()
            .map(|m| match *m {
                Msg::Prepared(r) => Msg::Prepared(new_name[r]),
                other => other,
            })
            .collect(),
    }
}

/// Resource managers sorted by everything that concerns each alone; two
/// that tie hold the same, so their order does not matter.
pub fn sorted(s: &State) -> State {
    let key = |r: usize| {
        (
            s.rm[r],
            s.tm_prepared[r],
            s.msgs.contains(&Msg::Prepared(r)),
        )
    };
    let mut order: Vec<usize> = (0..s.rm.len()).collect();
    order.sort_by_key(|&r| key(r));
    renamed(s, &order)
}

impl Checkable for TwoPhase {
    /// An RM that gives up unasked is the fault here.
    fn is_fault(&self, _: &State, a: &Action) -> bool {
        matches!(a, Action::RmChooseToAbort(_))
    }

    fn successor(&self, s: &State, a: Action) -> Option<State> {
        if self.flaw == Flaw::LostAbort && a == Action::TmAbort {
            return None;
        }
        self.next_state(s, a)
    }

    fn representative(&self, s: &State) -> State {
        let mut rep = if self.symmetric { sorted(s) } else { s.clone() };
        if self.flaw == Flaw::CoarseRepresentative {
            rep.tm_prepared.fill(false);
        }
        rep
    }
}
