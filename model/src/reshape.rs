//! A state from one [`Shape`] in another: the compact checker's states
//! followed at full size, and a full-size state brought back to the
//! checker's encoding where it fits. Nothing is changed on the way; a state
//! that does not fit (more records, epochs or ids than the shape holds, a
//! number too large) gives None.

use crate::actions::Action;
use crate::state::{
    Controller, Entry, IdSet, LogStore, Num, RecordHistory, Replica, Shape, State, Table,
};

fn num<N: Num, M: Num>(x: N) -> Option<M> {
    M::try_at(x.idx())
}

fn opt<N: Num, M: Num>(x: Option<N>) -> Option<Option<M>> {
    match x {
        None => Some(None),
        Some(v) => num(v).map(Some),
    }
}

fn replica<A: Shape, B: Shape>(r: &Replica<A>) -> Option<Replica<B>> {
    let entries = r
        .log
        .iter()
        .map(|e| {
            Some(Entry {
                id: num(e.id)?,
                epoch: num(e.epoch)?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let mut follower_leo = [None; crate::state::MAX_REPLICAS];
    for (to, from) in follower_leo.iter_mut().zip(&r.follower_leo) {
        *to = opt(*from)?;
    }
    let mut pending_acks = B::Pending::default();
    for id in r.pending_acks.ids() {
        let id: B::RecordId = num(id)?;
        // The compact shape's set holds small ids only.
        if B::BOUNDED && id.idx() >= 8 {
            return None;
        }
        pending_acks.insert(id);
    }
    Some(Replica {
        alive: r.alive,
        log: B::Log::from_entries(entries)?,
        hw: num(r.hw)?,
        recovery_point: num(r.recovery_point)?,
        hw_checkpoint: num(r.hw_checkpoint)?,
        epoch: opt(r.epoch)?,
        leader: r.leader,
        isr: r.isr,
        follower_leo,
        stale_fetch: r.stale_fetch,
        pending_acks,
        unclean_down: r.unclean_down,
    })
}

impl<A: Shape> State<A> {
    /// This state in shape `B`, if it fits there.
    pub fn reshape<B: Shape>(&self) -> Option<State<B>> {
        let mut replicas: [Replica<B>; crate::state::MAX_REPLICAS] = Default::default();
        for (to, from) in replicas.iter_mut().zip(&self.replicas) {
            *to = replica(from)?;
        }
        let c = &self.controller;
        let controller = Controller {
            leader: c.leader,
            epoch: opt(c.epoch)?,
            isr: c.isr,
            elr: c.elr,
            lke: c.lke,
            recovering: c.recovering,
            fenced: c.fenced,
        };
        // Requests up to the last one sent, records up to the last produced:
        // the slots past them are empty in every shape.
        let requests = self.requests.as_slice();
        let sent = requests
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |i| i + 1);
        let records = self
            .produced_records()
            .iter()
            .map(|h| {
                Some(RecordHistory {
                    offset: num(h.offset)?,
                    acked: opt(h.acked)?,
                    visible: opt(h.visible)?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(State {
            n: self.n,
            replicas,
            controller,
            requests: B::Requests::from_vec(requests[..sent].to_vec())?,
            produced: num(self.produced)?,
            records: crate::shape::RecordTable::from_vec(records)?,
            clean_crashes: num(self.clean_crashes)?,
            unclean_crashes: num(self.unclean_crashes)?,
            leader_moves: num(self.leader_moves)?,
        })
    }
}

impl<A: Shape> Action<A> {
    /// This action in shape `B`, if its numbers fit there.
    pub fn reshape<B: Shape>(self) -> Option<Action<B>> {
        Some(match self {
            Action::ControllerElectLeader { replica, election } => {
                Action::ControllerElectLeader { replica, election }
            }
            Action::ControllerShrinkIsr { replica } => Action::ControllerShrinkIsr { replica },
            Action::ControllerUnfence { replica } => Action::ControllerUnfence { replica },
            Action::BecomeLeader { replica, epoch } => Action::BecomeLeader {
                replica,
                epoch: num(epoch)?,
            },
            Action::BecomeFollower { replica, epoch } => Action::BecomeFollower {
                replica,
                epoch: num(epoch)?,
            },
            Action::Produce { leader, record } => Action::Produce {
                leader,
                record: num(record)?,
            },
            Action::FollowerFetch { follower, leader } => {
                Action::FollowerFetch { follower, leader }
            }
            Action::FollowerFetchOne { follower, leader } => {
                Action::FollowerFetchOne { follower, leader }
            }
            Action::FollowerFetchPart {
                follower,
                leader,
                records,
            } => Action::FollowerFetchPart {
                follower,
                leader,
                records: num(records)?,
            },
            Action::LeaderAdvanceHw { leader, hw } => Action::LeaderAdvanceHw {
                leader,
                hw: num(hw)?,
            },
            Action::LeaderShrinkIsr { leader, follower } => {
                Action::LeaderShrinkIsr { leader, follower }
            }
            Action::LeaderExpandIsr { leader, follower } => {
                Action::LeaderExpandIsr { leader, follower }
            }
            Action::LeaderLearnsIsr { leader } => Action::LeaderLearnsIsr { leader },
            Action::Flush { replica } => Action::Flush { replica },
            Action::CheckpointHw { replica } => Action::CheckpointHw { replica },
            Action::Crash { replica, clean } => Action::Crash { replica, clean },
            Action::Restart { replica } => Action::Restart { replica },
        })
    }
}
