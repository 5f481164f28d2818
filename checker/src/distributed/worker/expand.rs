//! One state's expansion, as the single-process search expands it.

use super::*;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Bounded,
    Recovery,
}

/// One successor of a state, as the single-process expansion computes it.
pub(super) struct Successor<S> {
    pub(super) fp: u64,
    pub(super) action: u32,
    pub(super) fault: bool,
    pub(super) in_bounds: bool,
    pub(super) rep: S,
}

/// A state's expansion: its property bits, flags, and successors (none
/// when a recovery walk spared it).
pub(super) struct Expansion<S> {
    pub(super) properties: u64,
    pub(super) flags: u8,
    pub(super) walked: bool,
    pub(super) successors: Vec<Successor<S>>,
}

/// What a worker's expansions reuse: the enabled actions' buffer, and
/// what its recovery walks learnt.
pub(super) struct Scratch<A> {
    pub(super) enabled: Vec<A>,
    pub(super) memo: WalkMemo,
}

impl<A> Default for Scratch<A> {
    fn default() -> Self {
        Scratch {
            enabled: Vec::new(),
            memo: WalkMemo::default(),
        }
    }
}

/// Expands `s` as `search.rs`'s `expand_chunk` does (`walk`: whether a
/// recovery state may be walked instead).
pub(super) fn expand<M: Checkable>(
    sh: &Shared<M>,
    phase: Phase,
    s: &M::State,
    walk: bool,
    scratch: &mut Scratch<M::Action>,
) -> Expansion<M::State> {
    let Scratch { enabled, memo } = scratch;
    let model = &sh.model;
    let lister = if sh.keeps_progress {
        &sh.recovery
    } else {
        model
    };
    let properties = if phase == Phase::Bounded {
        noteworthy_properties(model, &sh.properties, s)
    } else {
        0
    };
    let mut flags = 0;
    if sh.keeps_progress {
        flags = progress_flags(model, &sh.goals, s);
    }
    let mut out = Expansion {
        properties,
        flags,
        walked: false,
        successors: Vec::new(),
    };
    if phase == Phase::Recovery && walk {
        let every = all_goals(sh.goals.len());
        let goals = match sh.walk {
            RecoveryWalk::Greedy | RecoveryWalk::MemoOfWholeWalk => recovery_walk::goals_reached(
                model,
                &sh.recovery,
                &sh.goals,
                s,
                memo,
                sh.walk,
                enabled,
            ),
            RecoveryWalk::Off => 0,
            RecoveryWalk::ClaimsEveryGoal => every,
        };
        out.flags |= goals;
        if goals == every {
            out.walked = true;
            return out;
        }
    }
    enabled.clear();
    lister.actions(s, enabled);
    for (i, a) in enabled.iter().enumerate() {
        let fault = model.is_fault(s, a);
        if phase == Phase::Recovery && !model.heals(s, a) {
            continue;
        }
        let Some(next) = lister.successor(s, a.clone()) else {
            continue;
        };
        if !model.within_boundary(&next) {
            continue;
        }
        let in_bounds = phase == Phase::Bounded && model.within_bounds(&next);
        if !in_bounds && !model.heals(s, a) {
            continue;
        }
        let rep = if in_bounds {
            model.representative(&next)
        } else {
            model.representative(&model.recovery_view(next))
        };
        out.successors.push(Successor {
            fp: fingerprint_of_representative(&rep),
            action: i as u32,
            fault,
            in_bounds,
            rep,
        });
    }
    out
}
