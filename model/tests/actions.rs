//! Unit tests for every action of the model: when it is enabled (an enabled
//! and a disabled case) and what it does, plus the always-properties on
//! hand-built states where each fails and where it holds.
//!
//! States are reached by applying actions from `PartitionModel::init_state()`
//! (each step asserted enabled), or built by hand where a path would be long.

use highwater_model::actions::{allowed, apply};
use highwater_model::config::Mutation;
use highwater_model::controller::Election;
use highwater_model::properties::{self, *};
use highwater_model::state::{
    Epoch, IsrChain, LeaderView, Log, Offset, ReplicaId, ReplicaSet, Request, MAX_REPLICAS,
};
use highwater_model::{Acks, Action, Config, HwCheckpoint, PartitionModel, State, Truncation};
use stateright::Model;

mod common;
use common::*;

// --- helpers ------------------------------------------------------------------

/// `led`, then record a (id 0) written by A and fetched twice by B and C, so
/// that A knows both hold it; the HW is still 0.
fn replicated_one(cfg: &Config) -> State {
    run(
        cfg,
        &led(cfg),
        &[
            produce(A, 0),
            fetch(B, A),
            fetch(C, A),
            fetch(B, A),
            fetch(C, A),
        ],
    )
}

// --- ControllerElectLeader ----------------------------------------------------

#[test]
fn elect_clean_is_enabled_for_live_isr_members_of_a_leaderless_partition_only() {
    let cfg = base();
    let s = init(&cfg);
    assert_eq!(
        elections(&cfg, &s),
        vec![
            (A, Election::Clean),
            (B, Election::Clean),
            (C, Election::Clean)
        ]
    );

    // A dead ISR member is not a candidate.
    let s2 = run(&cfg, &s, &[crash(B, true)]);
    assert_eq!(
        elections(&cfg, &s2),
        vec![(A, Election::Clean), (C, Election::Clean)]
    );

    // A partition with a leader has no election.
    let s3 = run(&cfg, &s, &[elect(A)]);
    assert!(elections(&cfg, &s3).is_empty(), "[{}]", list(&cfg, &s3));

    // No election once the leader epoch bound is reached.
    let mut s4 = init(&cfg);
    s4.controller.epoch = Some(cfg.max_epoch);
    assert!(elections(&cfg, &s4).is_empty());
    s4.controller.epoch = Some(cfg.max_epoch - 1);
    assert_eq!(elections(&cfg, &s4).len(), 3);
}

#[test]
fn elect_clean_names_the_leader_in_a_new_epoch_and_keeps_the_isr() {
    let cfg = base();
    let s = run(&cfg, &init(&cfg), &[elect(B)]);
    let all = ReplicaSet::all(3);
    assert_eq!(s.controller.leader, Some(B));
    assert_eq!(s.controller.epoch, Some(0));
    assert_eq!(s.controller.isr, all);
    assert_eq!(s.controller.elr, ReplicaSet::EMPTY);
    assert_eq!(
        s.request(0),
        Some(Request {
            leader: Some(B),
            isr: all,
            later_isrs: highwater_model::state::IsrChain::EMPTY,
        })
    );
    // The replicas learn of it only from the LeaderAndIsr.
    for r in s.ids() {
        assert_eq!(s.replica(r).epoch, None);
        assert_eq!(s.replica(r).leader, LeaderView::Unknown);
    }

    // A later election bumps the epoch; earlier requests stay.
    let s = run(&cfg, &led(&cfg), &[ctrl_shrink(A), elect(C)]);
    assert_eq!(s.controller.leader, Some(C));
    assert_eq!(s.controller.epoch, Some(2));
    assert_eq!(
        s.request(2),
        Some(Request {
            leader: Some(C),
            isr: set(&[B, C]),
            later_isrs: highwater_model::state::IsrChain::EMPTY,
        })
    );
    assert_eq!(s.request(0).unwrap().leader, Some(A));
    assert_eq!(s.request(1).unwrap().leader, None);
}

#[test]
fn elect_from_elr_is_enabled_only_with_elr_on_and_an_empty_isr() {
    let cfg = base();
    let s = isr_a_elr_b(&cfg);
    // A live ISR member wins: no ELR election.
    assert_eq!(elections(&cfg, &s), vec![(A, Election::Clean)]);

    // A dead member still in the ISR is removed first (into the ELR).
    let mut dead_isr = s;
    dead_isr.replica_mut(A).alive = false;
    assert!(elections(&cfg, &dead_isr).is_empty());
    let empty = step(&cfg, &dead_isr, ctrl_shrink(A));
    assert_eq!(empty.controller.isr, ReplicaSet::EMPTY);
    assert_eq!(empty.controller.elr, set(&[A, B]));
    assert_eq!(elections(&cfg, &empty), vec![(B, Election::Elr)]);

    // ELR off: B is no candidate (and C neither without unclean election).
    let off = Config { elr: false, ..cfg };
    assert!(elections(&off, &dead_isr).is_empty());

    // A dead ELR member is no candidate.
    let mut dead_elr = empty;
    dead_elr.replica_mut(B).alive = false;
    assert!(elections(&cfg, &dead_elr).is_empty());
}

#[test]
fn elect_from_elr_makes_a_new_isr_of_the_leader_which_leaves_the_elr() {
    let cfg = base();
    let mut s = init(&cfg);
    s.controller.epoch = Some(1);
    s.controller.isr = ReplicaSet::EMPTY;
    s.controller.elr = set(&[B, C]);
    let next = step(&cfg, &s, elect_elr(B));
    assert_eq!(next.controller.leader, Some(B));
    assert_eq!(next.controller.epoch, Some(2));
    assert_eq!(next.controller.isr, set(&[B]));
    assert_eq!(next.controller.elr, set(&[C]), "C stays eligible");
    assert_eq!(
        next.request(2),
        Some(Request {
            leader: Some(B),
            isr: set(&[B]),
            later_isrs: highwater_model::state::IsrChain::EMPTY,
        })
    );

    // With min.insync.replicas=1 the new ISR is enough, but Kafka's
    // PartitionChangeBuilder settles the ELR before the election: C stays
    // until the next change.
    let one = Config { min_isr: 1, ..cfg };
    let next = step(&one, &s, elect_elr(B));
    assert_eq!(next.controller.isr, set(&[B]));
    assert_eq!(next.controller.elr, set(&[C]));
}

#[test]
fn elect_unclean_is_enabled_only_when_allowed_and_no_live_isr_or_elr_member() {
    let cfg = Config {
        unclean_election: true,
        ..base()
    };
    let s = isr_a_elr_b(&cfg);
    // Live ISR member: only the clean election.
    assert_eq!(elections(&cfg, &s), vec![(A, Election::Clean)]);

    // ISR dead and removed, ELR member alive: only the ELR election.
    let mut s2 = s;
    s2.replica_mut(A).alive = false;
    assert!(elections(&cfg, &s2).is_empty(), "A is removed first");
    let s2 = step(&cfg, &s2, ctrl_shrink(A));
    assert_eq!(elections(&cfg, &s2), vec![(B, Election::Elr)]);

    // ISR and ELR dead: unclean election of the live replica.
    let mut s3 = s2;
    s3.replica_mut(B).alive = false;
    assert_eq!(elections(&cfg, &s3), vec![(C, Election::Unclean)]);

    // Not allowed: nothing.
    let no = Config {
        unclean_election: false,
        ..cfg
    };
    assert!(elections(&no, &s3).is_empty());

    // Without ELR, any live replica once the ISR is dead.
    let off = Config { elr: false, ..cfg };
    let mut s4 = init(&off);
    s4.controller.epoch = Some(0);
    s4.controller.isr = set(&[A]);
    s4.replica_mut(A).alive = false;
    assert_eq!(
        elections(&off, &s4),
        vec![(B, Election::Unclean), (C, Election::Unclean)]
    );
}

#[test]
fn elect_unclean_makes_the_leader_the_isr_and_clears_the_elr() {
    let cfg = Config {
        unclean_election: true,
        ..base()
    };
    let mut s = isr_a_elr_b(&cfg);
    s.replica_mut(A).alive = false;
    s.replica_mut(B).alive = false;
    let s = step(&cfg, &s, ctrl_shrink(A));
    let next = step(&cfg, &s, elect_unclean(C));
    assert_eq!(next.controller.leader, Some(C));
    assert_eq!(next.controller.epoch, Some(2));
    assert_eq!(next.controller.isr, set(&[C]));
    assert_eq!(next.controller.elr, ReplicaSet::EMPTY);
    assert_eq!(
        next.request(2),
        Some(Request {
            leader: Some(C),
            isr: set(&[C]),
            later_isrs: highwater_model::state::IsrChain::EMPTY,
        })
    );
}

// --- ControllerShrinkIsr ------------------------------------------------------

#[test]
fn controller_shrink_is_enabled_for_isr_members_and_unfenced_elr_members() {
    let cfg = base();
    let s = led(&cfg);
    // The controller may declare any ISR member failed (a dead broker, or a
    // live one whose session expired).
    for r in [A, B, C] {
        assert_enabled(&cfg, &s, ctrl_shrink(r));
    }
    // Out of the ISR, and out of the ELR (the ISR left is at min.insync.replicas):
    // the fence is forgotten, nothing is left to do.
    let s2 = run(&cfg, &s, &[ctrl_shrink(C)]);
    assert_eq!(s2.controller.fenced, ReplicaSet::EMPTY);
    assert_disabled(&cfg, &s2, ctrl_shrink(C));

    // A live ELR member out of the ISR may be fenced (the fence alone: it
    // is then no candidate); a dead one may not (down, it is no acceptable
    // leader anyway).
    let three = Config { min_isr: 3, ..cfg };
    let s3 = run(&three, &led(&three), &[shrink(A, C)]);
    assert_eq!(s3.controller.elr, set(&[C]));
    let fenced = step(&three, &s3, ctrl_shrink(C));
    assert_eq!(fenced.controller.fenced, set(&[C]));
    assert_eq!(fenced.controller.isr, s3.controller.isr, "no ISR change");
    assert_disabled(&three, &fenced, ctrl_shrink(C));
    let s4 = run(&three, &s3, &[crash(C, true)]);
    assert_disabled(&three, &s4, ctrl_shrink(C));
}

#[test]
fn controller_shrink_of_the_leader_needs_an_epoch_left() {
    let cfg = Config {
        max_epoch: 0,
        ..base()
    };
    let s = led(&cfg);
    assert_disabled(&cfg, &s, ctrl_shrink(A));
    assert_enabled(&cfg, &s, ctrl_shrink(B));
    let more = Config {
        max_epoch: 1,
        ..cfg
    };
    assert_enabled(&more, &s, ctrl_shrink(A));
}

#[test]
fn controller_shrink_keeps_the_last_replica_standing_without_elr() {
    let off = Config {
        elr: false,
        ..base()
    };
    // Leader A alone in the ISR.
    let s = run(&off, &led(&off), &[shrink(A, B), shrink(A, C)]);
    assert_eq!(s.controller.isr, set(&[A]));
    assert_enabled(&off, &s, ctrl_shrink(A));
    let s2 = run(&off, &s, &[ctrl_shrink(A)]);
    assert_eq!(s2.controller.isr, set(&[A]), "the last replica stays");
    assert_eq!(s2.controller.leader, None);
    // Leaderless, the last member is not removed again.
    assert_disabled(&off, &s2, ctrl_shrink(A));

    // With ELR it is removed: the ISR may become empty.
    let on = base();
    let s3 = run(
        &on,
        &led(&on),
        &[shrink(A, B), shrink(A, C), ctrl_shrink(A)],
    );
    assert_eq!(s3.controller.isr, ReplicaSet::EMPTY);
}

#[test]
fn controller_shrink_of_a_follower_changes_only_the_isr() {
    let cfg = base();
    let s = led(&cfg);
    let next = step(&cfg, &s, ctrl_shrink(C));
    assert_eq!(next.controller.isr, set(&[A, B]));
    assert_eq!(next.controller.leader, Some(A));
    assert_eq!(next.controller.epoch, Some(0));
    assert_eq!(next.request(1), None, "no new LeaderAndIsr");
    assert_eq!(next.replicas, s.replicas, "no replica is told");
}

#[test]
fn controller_shrink_of_the_leader_leaves_the_partition_leaderless_in_a_new_epoch() {
    let cfg = base();
    let s = led(&cfg);
    let next = step(&cfg, &s, ctrl_shrink(A));
    assert_eq!(next.controller.isr, set(&[B, C]));
    assert_eq!(next.controller.elr, ReplicaSet::EMPTY, "ISR still at min");
    assert_eq!(next.controller.leader, None);
    assert_eq!(next.controller.epoch, Some(1));
    // No leader takes a leaderless request; its ISR is kept only for "a
    // removed follower rejoins", while it is the current epoch's.
    assert_eq!(
        next.request(1),
        Some(Request {
            leader: None,
            isr: set(&[B, C]),
            later_isrs: highwater_model::state::IsrChain::EMPTY,
        })
    );
    let elected = step(&cfg, &next, elect(B));
    assert_eq!(
        elected.request(1),
        Some(Request {
            leader: None,
            isr: ReplicaSet::EMPTY,
            later_isrs: highwater_model::state::IsrChain::EMPTY,
        }),
        "dropped once an older epoch's"
    );
    // A still presumes it leads until it hears of epoch 1.
    assert!(next.replica(A).presumes_leadership(A));
    let s2 = step(&cfg, &next, follow(A, 1));
    assert_eq!(s2.replica(A).leader, LeaderView::NoLeader);
    assert_eq!(s2.replica(A).epoch, Some(1));
}

// --- ControllerUnfence -------------------------------------------------------

/// Unclean rules (no ELR, min.insync.replicas=1, unclean election on):
/// leader A alone in the ISR, then fenced while alive (the nemesis's
/// `Fence`): the partition is leaderless with A the ISR's only member.
fn fenced_last_member(cfg: &Config) -> State {
    let s = run(cfg, &led(cfg), &[shrink(A, B), shrink(A, C)]);
    assert_eq!(s.controller.isr, set(&[A]));
    let s = step(cfg, &s, ctrl_shrink(A));
    assert_eq!(s.controller.leader, None);
    assert_eq!(s.controller.isr, set(&[A]), "the last replica stays");
    assert!(s.replica(A).alive);
    s
}

fn unclean_rules() -> Config {
    Config {
        elr: false,
        min_isr: 1,
        unclean_election: true,
        ..base()
    }
}

#[test]
fn a_live_broker_fenced_stays_fenced_until_unfenced() {
    let cfg = unclean_rules();
    let s = fenced_last_member(&cfg);
    assert_eq!(s.controller.fenced, set(&[A]));
    assert_enabled(&cfg, &s, unfence(A));
    for r in [B, C] {
        assert_disabled(&cfg, &s, unfence(r));
    }
    let back = step(&cfg, &s, unfence(A));
    assert_eq!(back.controller.fenced, ReplicaSet::EMPTY);
    // Kafka's handleBrokerUnfenced changes no ISR.
    assert_eq!(back.controller.isr, s.controller.isr);
    assert_eq!(back.controller.epoch, s.controller.epoch);
    assert_disabled(&cfg, &back, unfence(A));
    // A fenced broker that goes down leaves the set.
    let down = step(&cfg, &s, crash(A, true));
    assert_eq!(down.controller.fenced, ReplicaSet::EMPTY);
}

/// The behaviour the nemesis's `Fence` showed and the model lacked: while
/// the ISR's only member is fenced, the unclean election of another live
/// replica is enabled (and the clean one of the member is not); once it is
/// unfenced, only its clean election is.
#[test]
fn unclean_election_is_enabled_only_while_the_live_isr_member_is_fenced() {
    let cfg = unclean_rules();
    let s = fenced_last_member(&cfg);
    assert_eq!(
        elections(&cfg, &s),
        vec![(B, Election::Unclean), (C, Election::Unclean)]
    );
    let elected = step(&cfg, &s, elect_unclean(B));
    assert_eq!(elected.controller.isr, set(&[B]));
    assert!(elected.controller.recovering);

    let back = step(&cfg, &s, unfence(A));
    assert_eq!(elections(&cfg, &back), vec![(A, Election::Clean)]);

    // Without the unclean election the fence unblocks nothing: the model
    // forgets it, as if A heartbeat again at once (Kafka's wait for that
    // heartbeat elects no one meanwhile).
    let no = Config {
        unclean_election: false,
        ..cfg
    };
    let s2 = fenced_last_member(&no);
    assert_eq!(s2.controller.fenced, ReplicaSet::EMPTY);
    assert_eq!(elections(&no, &s2), vec![(A, Election::Clean)]);
}

#[test]
fn a_fenced_elr_member_is_no_candidate_until_unfenced() {
    let cfg = base();
    // A leads with ISR {A, B}; B is fenced while alive and enters the ELR.
    let s = run(&cfg, &led(&cfg), &[shrink(A, C), ctrl_shrink(B)]);
    assert_eq!(s.controller.elr, set(&[B]));
    assert_eq!(s.controller.fenced, set(&[B]));
    // A dies and is removed: the ISR is empty.
    let s = run(&cfg, &s, &[crash(A, true), ctrl_shrink(A)]);
    assert_eq!(s.controller.isr, ReplicaSet::EMPTY);
    assert!(elections(&cfg, &s).is_empty(), "B is fenced");
    let back = step(&cfg, &s, unfence(B));
    assert_eq!(elections(&cfg, &back), vec![(B, Election::Elr)]);
}

#[test]
fn a_fenced_follower_is_not_taken_back_into_the_isr() {
    // min.insync.replicas=3: C, fenced while alive, enters the ELR, where
    // its fence is kept; it keeps fetching and catches up.
    let cfg = Config {
        min_isr: 3,
        ..base()
    };
    let s = run(&cfg, &led(&cfg), &[ctrl_shrink(C), fetch(C, A)]);
    assert_eq!(s.controller.isr, set(&[A, B]));
    assert_eq!(s.controller.fenced, set(&[C]));
    // KIP-841: the controller would refuse C.
    assert_disabled(&cfg, &s, expand(A, C));
    let back = step(&cfg, &s, unfence(C));
    assert_enabled(&cfg, &back, expand(A, C));
}

#[test]
fn the_fence_of_a_broker_out_of_isr_elr_and_last_known_leader_is_forgotten() {
    // Unclean rules: A, fenced as the ISR's only member, loses its place
    // to B's unclean election; fenced or not, it may now only wait for
    // B to take it back, which its unfence may precede at any time.
    let cfg = unclean_rules();
    let s = fenced_last_member(&cfg);
    let elected = step(&cfg, &s, elect_unclean(B));
    assert_eq!(elected.controller.isr, set(&[B]));
    assert_eq!(elected.controller.fenced, ReplicaSet::EMPTY);
    assert_disabled(&cfg, &elected, unfence(A));
}

// --- BecomeLeader -------------------------------------------------------------

#[test]
fn become_leader_is_enabled_for_the_named_replica_of_a_newer_epoch() {
    let cfg = base();
    let s = run(&cfg, &init(&cfg), &[elect(A)]);
    assert_enabled(&cfg, &s, lead(A, 0));
    assert_disabled(&cfg, &s, lead(B, 0));

    // Taken once: not again.
    let s2 = step(&cfg, &s, lead(A, 0));
    assert_disabled(&cfg, &s2, lead(A, 0));

    // A dead replica takes nothing.
    let mut dead = s;
    dead.replica_mut(A).alive = false;
    assert_disabled(&cfg, &dead, lead(A, 0));

    // A replica at a newer epoch ignores older requests.
    let s3 = run(&cfg, &s2, &[ctrl_shrink(A), elect(B), lead(B, 2)]);
    assert_eq!(s3.replica(B).epoch, Some(2));
    assert_disabled(&cfg, &s3, follow(B, 0));
    assert_disabled(&cfg, &s3, follow(B, 1));
    assert_disabled(&cfg, &s3, lead(B, 2));
    // C, told nothing yet, may take any of them, late and out of order.
    assert_enabled(&cfg, &s3, follow(C, 0));
    assert_enabled(&cfg, &s3, follow(C, 1));
    assert_enabled(&cfg, &s3, follow(C, 2));
}

#[test]
fn become_leader_takes_the_epoch_and_isr_and_publishes_its_hw() {
    let cfg = base();
    let isr = set(&[A, B]);
    let mut s = leading(&cfg, A, 1, isr);
    // A was a follower at epoch 0, with stale leadership leftovers.
    let a = s.replica_mut(A);
    a.epoch = Some(0);
    a.leader = LeaderView::Replica(B);
    a.isr = ReplicaSet::EMPTY;
    a.log = log(&[(0, 0), (1, 0)]);
    a.hw = 1;
    a.follower_leo[B as usize] = Some(2);
    a.stale_fetch = set(&[C]);
    a.pending_acks = 0b10;
    s.produced = 2;
    s.records[1].offset = 1;

    let next = step(&cfg, &s, lead(A, 1));
    let a = next.replica(A);
    assert_eq!(a.epoch, Some(1));
    assert_eq!(a.leader, LeaderView::Replica(A));
    assert_eq!(a.isr, isr);
    assert_eq!(a.follower_leo, [None; MAX_REPLICAS]);
    assert_eq!(a.stale_fetch, ReplicaSet::EMPTY);
    assert_eq!(a.pending_acks, 0);
    assert_eq!(a.log, log(&[(0, 0), (1, 0)]), "the log is kept");
    assert_eq!(a.hw, 1, "the HW is kept");
    assert_eq!(next.records[0].visible, Some(1), "below the HW: visible");
    assert_eq!(next.records[1].visible, None, "at the HW: not visible");

    // An earlier visibility is kept (the lowest epoch).
    let mut s2 = s;
    s2.records[0].visible = Some(0);
    assert_eq!(step(&cfg, &s2, lead(A, 1)).records[0].visible, Some(0));
}

// --- BecomeFollower -----------------------------------------------------------

#[test]
fn become_follower_under_hw_does_not_wait_for_the_leader() {
    let cfg = Config {
        truncation: Truncation::Hw,
        ..base()
    };
    let s = run(&cfg, &init(&cfg), &[elect(A)]);
    assert_enabled(&cfg, &s, follow(B, 0));
    let mut dead = s;
    dead.replica_mut(A).alive = false;
    assert_enabled(&cfg, &dead, follow(B, 0));
    // The leader itself does not follow.
    assert_disabled(&cfg, &s, follow(A, 0));
}

#[test]
fn become_follower_consulting_the_leader_waits_until_it_leads() {
    for cfg in unfenced(&[Truncation::Epoch, Truncation::EpochIterative]).chain([base()]) {
        let s = run(&cfg, &init(&cfg), &[elect(A)]);
        assert_disabled(&cfg, &s, follow(B, 0));
        let s2 = step(&cfg, &s, lead(A, 0));
        assert_enabled(&cfg, &s2, follow(B, 0));
        let mut dead = s2;
        dead.replica_mut(A).alive = false;
        assert_disabled(&cfg, &dead, follow(B, 0));
    }
}

/// Controller at epoch 1 with leader A; A still leads in epoch 0 and B still
/// follows it there.
fn leader_one_epoch_behind(cfg: &Config) -> State {
    let mut s = leading(cfg, A, 1, ReplicaSet::all(3));
    s.requests[0] = s.requests[1];
    s.replica_mut(A).epoch = Some(0);
    for f in [B, C] {
        s.replica_mut(f).epoch = Some(0);
        s.replica_mut(f).leader = LeaderView::Replica(A);
    }
    s
}

#[test]
fn become_follower_under_fenced_waits_until_the_leader_leads_in_that_epoch() {
    let fenced = base();
    let s = leader_one_epoch_behind(&fenced);
    assert_disabled(&fenced, &s, follow(B, 1));
    let s2 = step(&fenced, &s, lead(A, 1));
    assert_enabled(&fenced, &s2, follow(B, 1));

    // Unfenced modes only need the leader to presume it leads.
    for cfg in unfenced(&[Truncation::Epoch, Truncation::EpochIterative]) {
        assert_enabled(&cfg, &s, follow(B, 1));
    }
}

/// B leads epoch 2 with [a0, c0, d2]; A, at epoch 1 with [a0, b1] and HW 0,
/// receives the epoch-2 LeaderAndIsr. The modes disagree on where A cuts.
fn divergent(cfg: &Config) -> State {
    let mut s = leading(cfg, B, 2, ReplicaSet::all(3));
    s.produced = 4;
    s.replica_mut(B).log = log(&[(0, 0), (2, 0), (3, 2)]);
    s.replica_mut(B).hw = 1;
    let a = s.replica_mut(A);
    a.epoch = Some(1);
    a.leader = LeaderView::Replica(A);
    a.log = log(&[(0, 0), (1, 1)]);
    a.hw = 0;
    a.recovery_point = 2;
    a.isr = set(&[A]);
    a.follower_leo[C as usize] = Some(1);
    a.pending_acks = 0b10;
    s
}

#[test]
fn become_follower_truncates_as_its_mode_says() {
    // The lookup alone decides where A cuts; fencing only decides when.
    let cases = [
        (Truncation::Hw, log(&[])),
        (Truncation::Epoch, log(&[(0, 0), (1, 1)])),
        (Truncation::EpochIterative, log(&[(0, 0)])),
    ];
    for ((mode, expected), fencing) in cases.iter().flat_map(|c| [(*c, false), (*c, true)]) {
        let cfg = Config {
            truncation: mode,
            fencing,
            ..base()
        };
        let s = divergent(&cfg);
        let next = step(&cfg, &s, follow(A, 2));
        let a = next.replica(A);
        assert_eq!(a.log, expected, "{mode}");
        assert_eq!(
            a.recovery_point,
            a.leo(),
            "{mode}: recovery point within the log"
        );
        assert_eq!(a.hw, 0, "{mode}");
        assert_eq!(a.epoch, Some(2), "{mode}");
        assert_eq!(a.leader, LeaderView::Replica(B), "{mode}");
        // The former leader forgets its leadership.
        assert_eq!(a.isr, ReplicaSet::EMPTY, "{mode}");
        assert_eq!(a.follower_leo, [None; MAX_REPLICAS], "{mode}");
        assert_eq!(a.pending_acks, 0, "{mode}");
        assert!(!a.presumes_leadership(A), "{mode}");
    }
}

#[test]
fn become_follower_hw_mode_keeps_what_is_below_its_hw() {
    let cfg = Config {
        truncation: Truncation::Hw,
        ..base()
    };
    let mut s = divergent(&cfg);
    s.replica_mut(A).hw = 1;
    let next = step(&cfg, &s, follow(A, 2));
    assert_eq!(next.replica(A).log, log(&[(0, 0)]));
}

#[test]
fn become_follower_of_no_leader_keeps_the_log() {
    let cfg = base();
    let s = run(
        &cfg,
        &led(&cfg),
        &[produce(A, 0), fetch(B, A), ctrl_shrink(A)],
    );
    assert_eq!(s.request(1).unwrap().leader, None);
    // Enabled though nobody leads.
    let next = step(&cfg, &s, follow(B, 1));
    assert_eq!(next.replica(B).log, log(&[(0, 0)]));
    assert_eq!(next.replica(B).leader, LeaderView::NoLeader);
    assert_eq!(next.replica(B).epoch, Some(1));
    assert_disabled(&cfg, &next, fetch(B, A));
}

// --- Produce ------------------------------------------------------------------

#[test]
fn produce_is_enabled_only_on_a_presumed_leader_within_the_record_bound() {
    let cfg = Config {
        records: 2,
        ..base()
    };
    let s = led(&cfg);
    assert_enabled(&cfg, &s, produce(A, 0));
    let produced: Vec<_> = enabled_actions(&cfg, &s)
        .into_iter()
        .filter(|a| matches!(a, Action::Produce { .. }))
        .collect();
    assert_eq!(
        produced,
        vec![produce(A, 0)],
        "only the leader takes writes"
    );

    let s2 = run(&cfg, &s, &[produce(A, 0), produce(A, 1)]);
    assert!(
        !enabled_actions(&cfg, &s2)
            .iter()
            .any(|a| matches!(a, Action::Produce { .. })),
        "the record bound is reached"
    );

    // A dead leader takes nothing.
    let mut dead = s;
    dead.replica_mut(A).alive = false;
    assert_disabled(&cfg, &dead, produce(A, 0));

    // A stale leader still presuming leadership does.
    let zombie = run(&cfg, &s, &[ctrl_shrink(A)]);
    assert_enabled(&cfg, &zombie, produce(A, 0));
}

#[test]
fn produce_with_acks_all_is_refused_when_the_leaders_isr_is_below_min_isr() {
    let all = base();
    // The leader's ISR is what counts: the controller's has 3.
    let mut s = led(&all);
    s.replica_mut(A).isr = set(&[A]);
    assert_disabled(&all, &s, produce(A, 0));
    for acks in [Acks::None, Acks::Leader] {
        let cfg = Config { acks, ..all };
        assert_enabled(&cfg, &s, produce(A, 0));
    }
    // Exactly min.insync.replicas is enough.
    s.replica_mut(A).isr = set(&[A, C]);
    assert_enabled(&all, &s, produce(A, 0));
    // Reached by leader shrinks too.
    let s2 = run(&all, &led(&all), &[shrink(A, B), shrink(A, C)]);
    assert_disabled(&all, &s2, produce(A, 0));
}

#[test]
fn produce_appends_at_the_leaders_epoch_and_acknowledges_per_acks() {
    for acks in [Acks::None, Acks::Leader, Acks::All] {
        let cfg = Config { acks, ..base() };
        let s = run(&cfg, &led(&cfg), &[produce(A, 0), produce(A, 1)]);
        assert_eq!(s.produced, 2, "{acks}");
        assert_eq!(s.replica(A).log, log(&[(0, 0), (1, 0)]), "{acks}");
        assert_eq!(s.records[0].offset, 0);
        assert_eq!(s.records[1].offset, 1);
        assert_eq!(s.replica(A).hw, 0, "{acks}: the HW does not move");
        for r in 0..2 {
            let h = s.records[r];
            assert_eq!(h.visible, None, "{acks}");
            match acks {
                Acks::None => assert_eq!(h.acked, None),
                Acks::Leader => assert_eq!(h.acked, Some(0)),
                Acks::All => assert_eq!(h.acked, None),
            }
        }
        let pending = if acks == Acks::All { 0b11 } else { 0 };
        assert_eq!(s.replica(A).pending_acks, pending, "{acks}");
        assert_eq!(
            s.replica(B).log,
            Log::default(),
            "followers get it by fetching"
        );
    }
}

#[test]
fn produce_on_a_leader_with_a_shorter_log_records_its_offset() {
    let cfg = Config {
        acks: Acks::Leader,
        ..base()
    };
    let mut s = leading(&cfg, B, 2, ReplicaSet::all(3));
    s.produced = 1;
    s.records[0].offset = 3;
    let next = step(&cfg, &s, produce(B, 1));
    assert_eq!(next.records[1].offset, 0);
    assert_eq!(next.records[1].acked, Some(2));
    assert_eq!(next.replica(B).log, log(&[(1, 2)]));
}

// --- FollowerFetch ------------------------------------------------------------

#[test]
fn fetch_is_enabled_from_the_live_presumed_leader_the_follower_knows() {
    let cfg = base();
    let s = led(&cfg);
    let fetches: Vec<_> = enabled_actions(&cfg, &s)
        .into_iter()
        .filter(|a| matches!(a, Action::FollowerFetch { .. }))
        .collect();
    assert_eq!(fetches, vec![fetch(B, A), fetch(C, A)]);

    // Before the follower knows its leader: nothing.
    let s0 = run(&cfg, &init(&cfg), &[elect(A), lead(A, 0)]);
    assert_disabled(&cfg, &s0, fetch(B, A));

    // A dead leader: nothing.
    let mut dead = s;
    dead.replica_mut(A).alive = false;
    assert_disabled(&cfg, &dead, fetch(B, A));

    // A leader that stepped down: nothing.
    let s2 = run(&cfg, &s, &[ctrl_shrink(A), follow(A, 1)]);
    assert_disabled(&cfg, &s2, fetch(B, A));
}

#[test]
fn fenced_fetch_requires_the_same_epoch() {
    let fenced = base();
    let s = leader_one_epoch_behind(&fenced);
    let s = step(&fenced, &s, lead(A, 1));
    // B still at epoch 0, A at 1.
    assert_disabled(&fenced, &s, fetch(B, A));
    let s2 = step(&fenced, &s, follow(B, 1));
    assert_enabled(&fenced, &s2, fetch(B, A));

    for cfg in unfenced(LOOKUPS) {
        assert_enabled(&cfg, &s, fetch(B, A));
    }
}

#[test]
fn fetch_copies_the_leaders_suffix_and_the_leader_learns_the_fetch_offset() {
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[produce(A, 0), produce(A, 1)]);
    let s1 = step(&cfg, &s, fetch(B, A));
    assert_eq!(s1.replica(B).log, s.replica(A).log);
    // One round late: the leader learns the LEO B had when it fetched.
    assert_eq!(s1.replica(A).follower_leo[B as usize], Some(0));
    assert_eq!(s1.replica(A).follower_leo[C as usize], None);
    assert_eq!(s1.replica(B).hw, 0);

    let s2 = step(&cfg, &s1, fetch(B, A));
    assert_eq!(s2.replica(A).follower_leo[B as usize], Some(2));
    assert_eq!(s2.replica(B).log, s.replica(A).log);
}

fn fetch_one(follower: ReplicaId, leader: ReplicaId) -> Action {
    Action::FollowerFetchOne { follower, leader }
}

#[test]
fn a_fetch_cut_short_copies_one_record_and_is_offered_only_when_several_are_lacking() {
    let cfg = base();
    let one = run(&cfg, &led(&cfg), &[produce(A, 0)]);
    assert_enabled(&cfg, &one, fetch(B, A));
    assert_disabled(&cfg, &one, fetch_one(B, A)); // the same as a full fetch
    let s = step(&cfg, &one, produce(A, 1));
    assert_enabled(&cfg, &s, fetch_one(B, A));
    let s1 = step(&cfg, &s, fetch_one(B, A));
    assert_eq!(s1.replica(B).log, log(&[(0, 0)]));
    assert_eq!(s1.replica(A).follower_leo[B as usize], Some(0));
    // One record left to copy: a cut fetch would be a full one.
    assert_disabled(&cfg, &s1, fetch_one(B, A));
    let s2 = step(&cfg, &s1, fetch(B, A));
    assert_eq!(s2.replica(B).log, s.replica(A).log);
    assert_eq!(s2.replica(A).follower_leo[B as usize], Some(1));
}

/// FollowerFetchPart, the fetch cut at any length trace validation
/// instantiates: allowed for more than one record and fewer than all the
/// follower lacks, never listed by `enabled`, and copying that many.
#[test]
fn a_fetch_cut_at_a_given_length_is_allowed_between_one_and_all_and_never_listed() {
    let cfg = base();
    let s = run(
        &cfg,
        &led(&cfg),
        &[produce(A, 0), produce(A, 1), produce(A, 2)],
    );
    let part = |records| Action::FollowerFetchPart {
        follower: B,
        leader: A,
        records,
    };
    assert!(
        !allowed(&cfg, &s, part(1)),
        "one record is FollowerFetchOne"
    );
    assert!(allowed(&cfg, &s, part(2)));
    assert!(!allowed(&cfg, &s, part(3)), "all it lacks is FollowerFetch");
    let backwards = Action::FollowerFetchPart {
        follower: A,
        leader: B,
        records: 2,
    };
    assert!(
        !allowed(&cfg, &s, backwards),
        "only from the leader it follows"
    );
    let mut listed = Vec::new();
    highwater_model::actions::enabled(&cfg, &s, &mut listed);
    assert!(!listed.contains(&part(2)), "the checker never lists it");
    let cut = apply(&cfg, &s, part(2)).expect("it changes the state");
    assert_eq!(cut.replica(B).log, log(&[(0, 0), (1, 0)]));
    assert_eq!(cut.replica(A).follower_leo[B as usize], Some(0));
}

#[test]
fn fetch_sets_the_follower_hw_to_the_leaders_hw_within_its_log() {
    let cfg = base();
    let s = run(&cfg, &replicated_one(&cfg), &[advance(A, 1)]);
    assert_eq!(s.replica(B).hw, 0);
    let s2 = step(&cfg, &s, fetch(B, A));
    assert_eq!(s2.replica(B).hw, 1);

    // A follower ahead of its leader's HW comes back to it.
    let mut s3 = s;
    s3.replica_mut(A).hw = 0;
    s3.replica_mut(B).hw = 1;
    assert_eq!(step(&cfg, &s3, fetch(B, A)).replica(B).hw, 0);
}

#[test]
fn fetch_clears_the_stale_fetch_mark() {
    let cfg = base();
    let mut s = led(&cfg);
    s.replica_mut(A).stale_fetch = set(&[B, C]);
    let next = step(&cfg, &s, fetch(B, A));
    assert_eq!(next.replica(A).stale_fetch, set(&[C]));
}

#[test]
fn fetch_by_a_follower_ahead_of_its_leader_truncates_it_to_the_leaders_leo() {
    let cfg = base();
    let mut s = leading(&cfg, A, 1, ReplicaSet::all(3));
    s.produced = 2;
    s.replica_mut(A).log = log(&[(0, 0)]);
    let b = s.replica_mut(B);
    b.epoch = Some(1);
    b.leader = LeaderView::Replica(A);
    b.log = log(&[(0, 0), (1, 0)]);
    b.hw = 2;
    b.recovery_point = 2;
    let next = step(&cfg, &s, fetch(B, A));
    let b = next.replica(B);
    assert_eq!(b.log, log(&[(0, 0)]));
    assert_eq!(b.hw, 1);
    assert_eq!(b.recovery_point, 1);
    assert_eq!(
        next.replica(A).follower_leo[B as usize],
        None,
        "no fetch offset learnt from OffsetOutOfRange"
    );
}

// --- LeaderAdvanceHw ----------------------------------------------------------

#[test]
fn hw_advances_to_the_lowest_leo_the_leader_knows_over_its_isr() {
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[produce(A, 0)]);
    assert!(hw_advances(&cfg, &s).is_empty(), "no follower fetched yet");

    // First fetches: the leader learns 0.
    let s1 = run(&cfg, &s, &[fetch(B, A), fetch(C, A)]);
    assert!(hw_advances(&cfg, &s1).is_empty(), "followers' LEOs still 0");

    // B fetched again: C still at 0 holds the HW back.
    let s2 = run(&cfg, &s1, &[fetch(B, A)]);
    assert!(hw_advances(&cfg, &s2).is_empty());

    let s3 = run(&cfg, &s2, &[fetch(C, A)]);
    assert_eq!(hw_advances(&cfg, &s3), vec![advance(A, 1)]);

    // A follower outside the leader's ISR does not hold it back.
    let s4 = run(
        &cfg,
        &led(&cfg),
        &[shrink(A, C), produce(A, 0), fetch(B, A), fetch(B, A)],
    );
    assert_eq!(hw_advances(&cfg, &s4), vec![advance(A, 1)]);

    // Two records, B knows 2, C knows 1: HW 1.
    let s5 = run(
        &cfg,
        &led(&cfg),
        &[
            produce(A, 0),
            fetch(C, A),
            produce(A, 1),
            fetch(B, A),
            fetch(C, A),
            fetch(B, A),
        ],
    );
    assert_eq!(s5.replica(A).follower_leo[B as usize], Some(2));
    assert_eq!(s5.replica(A).follower_leo[C as usize], Some(1));
    assert_eq!(hw_advances(&cfg, &s5), vec![advance(A, 1)]);
    // Never backwards.
    let mut s6 = s5;
    s6.replica_mut(A).hw = 1;
    assert!(hw_advances(&cfg, &s6).is_empty());
}

/// Kafka's `Partition.maybeIncrementLeaderHW` also waits for a follower
/// outside the ISR that is caught up and eligible to join it
/// (`shouldWaitForReplicaToJoinIsr`): with no clock, the model offers the
/// HW that waits for it (no time passed) and the one over the ISR alone
/// (replica.lag.time.max.ms passed). The `hw-over-isr-only` mutation drops
/// the first, and this test notices.
#[test]
fn hw_waits_for_a_caught_up_follower_outside_the_isr_or_the_lag_passes() {
    let cfg = base();
    // C is out of the ISR {A,B}; it copied a (the leader knows it holds 1),
    // then b was written; B holds both.
    let s = run(
        &cfg,
        &led(&cfg),
        &[
            shrink(A, C),
            produce(A, 0),
            fetch(C, A),
            fetch(C, A),
            produce(A, 1),
            fetch(B, A),
            fetch(B, A),
        ],
    );
    assert_eq!(s.replica(A).isr, set(&[A, B]));
    assert_eq!(s.replica(A).follower_leo[B as usize], Some(2));
    assert_eq!(s.replica(A).follower_leo[C as usize], Some(1));
    assert_eq!(hw_advances(&cfg, &s), vec![advance(A, 1), advance(A, 2)]);
    // Waiting for C holds the HW at C's LEO; C, at the HW, may then join.
    let held = step(&cfg, &s, advance(A, 1));
    assert_eq!(held.replica(A).hw, 1);
    assert_enabled(&cfg, &held, expand(A, C));
    assert_eq!(hw_advances(&cfg, &held), vec![advance(A, 2)]);

    // Without the rule the HW goes straight over C.
    let mutated = Config {
        mutation: Some(Mutation::HwOverIsrOnly),
        ..cfg
    };
    assert_eq!(hw_advances(&mutated, &s), vec![advance(A, 2)]);

    // A follower whose last fetch came from an incarnation that crashed
    // since is not eligible (KIP-903's broker epoch): it does not hold the HW.
    let crashed = run(&cfg, &s, &[crash(C, true)]);
    assert_eq!(hw_advances(&cfg, &crashed), vec![advance(A, 2)]);

    // One at or below the HW holds it where it is: only the lag passing
    // moves it.
    let behind = run(
        &cfg,
        &s,
        &[advance(A, 1), produce(A, 2), fetch(B, A), fetch(B, A)],
    );
    assert_eq!(behind.replica(A).follower_leo[B as usize], Some(3));
    assert_eq!(hw_advances(&cfg, &behind), vec![advance(A, 3)]);
}

/// KAFKA-15583 (Kafka 3.7): the HW does not move while the ISR is below
/// min.insync.replicas, even for a caught-up follower waiting to join.
/// The model applies it with the ELR (off, it stands for Kafka before it).
#[test]
fn hw_stays_while_the_isr_is_below_min_isr_with_the_elr() {
    // acks=1: acks=all would refuse the writes below min.insync.replicas.
    let cfg = Config {
        acks: Acks::Leader,
        ..base()
    };
    let s = run(
        &cfg,
        &led(&cfg),
        &[
            shrink(A, B),
            shrink(A, C),
            produce(A, 0),
            fetch(B, A),
            fetch(B, A),
        ],
    );
    assert_eq!(s.replica(A).isr, set(&[A]));
    assert!(hw_advances(&cfg, &s).is_empty());
    let no_elr = Config { elr: false, ..cfg };
    let s = run(
        &no_elr,
        &led(&no_elr),
        &[
            shrink(A, B),
            shrink(A, C),
            produce(A, 0),
            fetch(B, A),
            produce(A, 1),
            fetch(B, A),
        ],
    );
    assert_eq!(s.replica(A).follower_leo[B as usize], Some(1));
    assert_eq!(
        hw_advances(&no_elr, &s),
        vec![advance(A, 1), advance(A, 2)],
        "waiting for B, or not"
    );
}

#[test]
fn hw_advance_acknowledges_acks_all_writes_and_publishes_them() {
    let cfg = base();
    let s = run(
        &cfg,
        &replicated_one(&cfg),
        &[produce(A, 1), fetch(B, A), fetch(C, A)],
    );
    // B and C hold both records, A knows only of the first.
    assert_eq!(s.replica(A).pending_acks, 0b11);
    let next = step(&cfg, &s, advance(A, 1));
    assert_eq!(next.replica(A).hw, 1);
    assert_eq!(next.records[0].acked, Some(0));
    assert_eq!(next.records[0].visible, Some(0));
    assert_eq!(next.records[1].acked, None, "above the HW: still waiting");
    assert_eq!(next.records[1].visible, None);
    assert_eq!(next.replica(A).pending_acks, 0b10);
    // Followers learn the HW only on their next fetch.
    assert_eq!(next.replica(B).hw, 0);
}

#[test]
fn hw_advance_below_min_isr_answers_acks_all_writes_without_acknowledging() {
    // Without ELR the HW advances with the leader alone; the waiting producer
    // is told NotEnoughReplicasAfterAppend, yet the record is visible.
    let cfg = Config {
        elr: false,
        ..base()
    };
    let s = run(
        &cfg,
        &led(&cfg),
        &[produce(A, 0), shrink(A, B), shrink(A, C)],
    );
    assert_eq!(s.replica(A).isr, set(&[A]));
    let next = step(&cfg, &s, advance(A, 1));
    assert_eq!(next.replica(A).hw, 1);
    assert_eq!(next.replica(A).pending_acks, 0, "answered");
    assert_eq!(next.records[0].acked, None, "but not acknowledged");
    assert_eq!(next.records[0].visible, Some(0));
}

#[test]
fn hw_advance_with_acks_1_keeps_the_first_acknowledgement() {
    let cfg = Config {
        acks: Acks::Leader,
        ..base()
    };
    let s = replicated_one(&cfg);
    assert_eq!(s.records[0].acked, Some(0));
    let next = step(&cfg, &s, advance(A, 1));
    assert_eq!(next.records[0].acked, Some(0));
    assert_eq!(next.records[0].visible, Some(0));
    assert_eq!(next.replica(A).pending_acks, 0);
}

// --- LeaderShrinkIsr ----------------------------------------------------------

#[test]
fn leader_shrink_is_enabled_for_a_lagging_follower() {
    let cfg = base();
    let s = led(&cfg);
    // Not fetched yet: lagging.
    assert_enabled(&cfg, &s, shrink(A, B));
    // Caught up and following: kept.
    let s1 = run(&cfg, &s, &[fetch(B, A)]);
    assert_disabled(&cfg, &s1, shrink(A, B));
    assert_enabled(&cfg, &s1, shrink(A, C));
    // A new record: behind again until it fetches twice.
    let s2 = run(&cfg, &s1, &[produce(A, 0)]);
    assert_enabled(&cfg, &s2, shrink(A, B));
    let s3 = run(&cfg, &s2, &[fetch(B, A)]);
    assert_enabled(&cfg, &s3, shrink(A, B));
    let s4 = run(&cfg, &s3, &[fetch(B, A)]);
    assert_disabled(&cfg, &s4, shrink(A, B));
    // Never the leader itself, nor a non-leader.
    assert_disabled(&cfg, &s4, shrink(A, A));
    assert_disabled(&cfg, &s4, shrink(B, C));
}

#[test]
fn leader_shrink_never_removes_a_follower_caught_up_to_the_leaders_leo() {
    // Kafka's Replica.isCaughtUp: a follower whose LEO equals the leader's
    // is in sync, whether or not it still fetches.
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[fetch(B, A)]);
    assert_disabled(&cfg, &s, shrink(A, B));
    // Crashed: the controller removes it, not the leader.
    let crashed = run(&cfg, &s, &[crash(B, true)]);
    assert_disabled(&cfg, &crashed, shrink(A, B));
    assert!(is_enabled(&cfg, &crashed, ctrl_shrink(B)));
    // Following another epoch, or no leader: still caught up.
    let mut other = s;
    other.replica_mut(B).epoch = Some(1);
    assert_disabled(&cfg, &other, shrink(A, B));
    let mut none = s;
    none.replica_mut(B).leader = LeaderView::NoLeader;
    assert_disabled(&cfg, &none, shrink(A, B));
    // Once the leader's LEO moves past it, it lags and may be removed.
    let behind = run(&cfg, &crashed, &[produce(A, 0)]);
    assert_enabled(&cfg, &behind, shrink(A, B));
}

#[test]
fn only_the_true_leader_changes_the_isr() {
    let cfg = base();
    let s = led(&cfg);
    assert_enabled(&cfg, &s, shrink(A, C));
    // The controller moved on: A is a stale leader.
    let zombie = run(&cfg, &s, &[ctrl_shrink(A)]);
    assert!(zombie.replica(A).presumes_leadership(A));
    assert_disabled(&cfg, &zombie, shrink(A, C));
    // The controller re-elected A, but A has not taken the new epoch yet.
    let mut stale_epoch = s;
    stale_epoch.controller.epoch = Some(1);
    assert_disabled(&cfg, &stale_epoch, shrink(A, C));

    // Expansion likewise.
    let s2 = run(
        &cfg,
        &s,
        &[
            fetch(C, A),
            crash(C, true),
            ctrl_shrink(C),
            learn(A),
            restart(C),
        ],
    );
    let s2 = run(&cfg, &s2, &[follow(C, 0), fetch(C, A)]);
    assert_enabled(&cfg, &s2, expand(A, C));
    let mut zombie2 = s2;
    zombie2.controller.leader = None;
    zombie2.controller.epoch = Some(1);
    assert_disabled(&cfg, &zombie2, expand(A, C));
}

fn learn(leader: ReplicaId) -> Action {
    Action::LeaderLearnsIsr { leader }
}

#[test]
fn the_leader_learns_the_controllers_own_isr_removals() {
    let cfg = base();
    let s = led(&cfg);
    assert_disabled(&cfg, &s, learn(A));
    // The controller drops failed C; A's copy still lists it.
    let s1 = run(&cfg, &s, &[crash(C, true), ctrl_shrink(C)]);
    assert_eq!(s1.controller.isr, set(&[A, B]));
    assert_eq!(s1.replica(A).isr, set(&[A, B, C]));
    let s2 = step(&cfg, &s1, learn(A));
    assert_eq!(s2.replica(A).isr, set(&[A, B]));
    assert_eq!(s2.controller, s1.controller, "the controller is unchanged");
    assert_disabled(&cfg, &s2, learn(A));
    // With B gone too, the leader learns it is alone and refuses acks=all.
    let s3 = run(&cfg, &s2, &[crash(B, false), ctrl_shrink(B)]);
    assert_enabled(&cfg, &s3, produce(A, 0));
    let s4 = step(&cfg, &s3, learn(A));
    assert_eq!(s4.replica(A).isr, set(&[A]));
    assert_disabled(&cfg, &s4, produce(A, 0));
}

/// The chain of ISRs an epoch's leader has yet to apply.
fn chain(isrs: &[&[ReplicaId]]) -> Option<IsrChain> {
    let sets: Vec<ReplicaSet> = isrs.iter().map(|x| set(x)).collect();
    IsrChain::of(&sets)
}

#[test]
fn a_deposed_leader_learns_only_its_own_epochs_last_isr() {
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[crash(C, true), ctrl_shrink(C)]);
    assert_enabled(&cfg, &s, learn(A));
    // Deposed before it learnt the removal: the metadata, applied in
    // order, still brings its own epoch's last ISR, not the new one.
    let deposed = step(&cfg, &s, ctrl_shrink(A));
    assert!(deposed.replica(A).presumes_leadership(A));
    assert_ne!(deposed.controller.epoch, Some(0));
    assert_eq!(deposed.request(0).map(|r| r.later_isrs), chain(&[&[A, B]]));
    assert_enabled(&cfg, &deposed, learn(A));
    let learnt = step(&cfg, &deposed, learn(A));
    assert_eq!(learnt.replica(A).isr, set(&[A, B]));
    assert_disabled(&cfg, &learnt, learn(A));
    // Nothing left to learn: the chain is empty.
    assert_eq!(learnt.request(0).map(|r| r.later_isrs), chain(&[]));
    // Under the rule before, only the controller's current leader learns.
    let old = Config {
        mutation: Some(Mutation::OnlyTrueLeaderLearnsIsr),
        ..cfg
    };
    let deposed = run(
        &old,
        &led(&old),
        &[crash(C, true), ctrl_shrink(C), ctrl_shrink(A)],
    );
    assert!(deposed.replica(A).presumes_leadership(A));
    assert_disabled(&old, &deposed, learn(A));
    assert_eq!(deposed.request(0).map(|r| r.later_isrs), chain(&[]));
}

/// Leader A of epoch 0 has applied none of the controller's removals of C
/// (crashed) and then B (fenced: missed heartbeats) when the controller
/// deposes it: the ISRs it may hold next,
/// learning alone, in order.
fn zombie_learns(cfg: &Config) -> Vec<ReplicaSet> {
    let removals = [
        crash(C, true),
        ctrl_shrink(C),
        ctrl_shrink(B),
        ctrl_shrink(A),
    ];
    let mut s = run(cfg, &led(cfg), &removals);
    assert_ne!(s.controller.epoch, Some(0));
    assert!(s.replica(A).presumes_leadership(A));
    assert_eq!(s.replica(A).isr, set(&[A, B, C]));
    let mut learnt = Vec::new();
    while allowed(cfg, &s, learn(A)) {
        s = step(cfg, &s, learn(A));
        learnt.push(s.replica(A).isr);
    }
    learnt
}

#[test]
fn a_deposed_leader_learns_each_isr_change_of_its_epoch_in_order() {
    let cfg = base();
    // Kafka's broker applies the two ISR updates one after the other: the
    // zombie holds {A, B} (the removal of C) before {A}.
    assert_eq!(zombie_learns(&cfg), vec![set(&[A, B]), set(&[A])]);
    let s = run(
        &cfg,
        &led(&cfg),
        &[crash(C, true), ctrl_shrink(C), ctrl_shrink(B)],
    );
    // While the epoch is current, the chain holds the removal A skipped;
    // the controller's current ISR is its own field.
    assert_eq!(s.request(0).map(|r| r.later_isrs), chain(&[&[A, B]]));
    // The true leader takes the newest (it reaches {A, B} by learning
    // before B's removal), and has nothing older left to apply.
    let s1 = step(&cfg, &s, learn(A));
    assert_eq!(s1.replica(A).isr, set(&[A]));
    assert_eq!(s1.request(0).map(|r| r.later_isrs), chain(&[]));
    // A leader's own AlterPartition supersedes what it had not applied.
    let s2 = step(&cfg, &s, shrink(A, C));
    assert_eq!(s2.request(0).map(|r| r.later_isrs), chain(&[]));
}

#[test]
fn the_zombie_learning_only_its_last_isr_skips_the_intermediate_one() {
    // The rule before (`zombie-learns-only-last-isr`): the zombie never
    // holds {A, B}, which the test above asks for.
    let old = Config {
        mutation: Some(Mutation::ZombieLearnsOnlyLastIsr),
        ..base()
    };
    assert_eq!(zombie_learns(&old), vec![set(&[A])]);
}

#[test]
fn a_leader_taking_its_request_after_the_controller_left_still_learns_its_last_isr() {
    let cfg = base();
    // A is elected but has not taken its request when the controller
    // removes C and then deposes A: epoch 0 ends with ISR {A, B}.
    let s = run(
        &cfg,
        &init(&cfg),
        &[elect(A), crash(C, true), ctrl_shrink(C), ctrl_shrink(A)],
    );
    assert_ne!(s.controller.epoch, Some(0));
    assert_eq!(s.request(0).map(|r| r.later_isrs), chain(&[&[A, B]]));
    // Taking the stale request, A leads epoch 0 with its first ISR, and
    // its metadata, applied in order, brings the epoch's last one.
    let late = step(&cfg, &s, lead(A, 0));
    assert_eq!(late.replica(A).isr, set(&[A, B, C]));
    assert_enabled(&cfg, &late, learn(A));
    assert_eq!(step(&cfg, &late, learn(A)).replica(A).isr, set(&[A, B]));
    // Once A can no longer take the request (it took the next epoch's),
    // the chain is forgotten.
    let gone = step(&cfg, &s, follow(A, 1));
    assert_eq!(gone.request(0).map(|r| r.later_isrs), chain(&[]));
}

#[test]
fn leader_shrink_sets_the_quorum_and_the_leaders_isr() {
    let cfg = base();
    let s = led(&cfg);
    let next = step(&cfg, &s, shrink(A, C));
    assert_eq!(next.controller.isr, set(&[A, B]));
    assert_eq!(next.replica(A).isr, set(&[A, B]));
    assert_eq!(next.controller.epoch, Some(0), "no new epoch");
    assert_eq!(next.controller.leader, Some(A));
    assert_eq!(next.request(1), None);
    assert_disabled(&cfg, &next, shrink(A, C));
}

// --- LeaderExpandIsr ----------------------------------------------------------

#[test]
fn leader_expand_needs_a_fetch_caught_up_to_the_hw() {
    let cfg = base();
    let s = run(
        &cfg,
        &led(&cfg),
        &[fetch(C, A), produce(A, 0), shrink(A, C)],
    );
    assert_eq!(s.controller.isr, set(&[A, B]));
    // Fetch offset 0 >= HW 0: caught up.
    assert_enabled(&cfg, &s, expand(A, C));
    // The HW moves to 1: 0 is no longer enough.
    let s1 = run(&cfg, &s, &[fetch(B, A), fetch(B, A), advance(A, 1)]);
    assert_disabled(&cfg, &s1, expand(A, C));
    let s2 = run(&cfg, &s1, &[fetch(C, A)]);
    assert_eq!(s2.replica(A).follower_leo[C as usize], Some(0));
    assert_disabled(&cfg, &s2, expand(A, C));
    let s3 = run(&cfg, &s2, &[fetch(C, A)]);
    assert_enabled(&cfg, &s3, expand(A, C));
    // Never an ISR member, nor the leader itself.
    assert_disabled(&cfg, &s3, expand(A, B));
    assert_disabled(&cfg, &s3, expand(A, A));

    // Never fetched: not caught up.
    let s4 = run(&cfg, &led(&cfg), &[shrink(A, C)]);
    assert_disabled(&cfg, &s4, expand(A, C));
}

/// A leads epoch 1 with [a0, b0, c1] and HW `hw`, ISR {A,B}; C follows it on
/// epoch 1 and has fetched from offset 1.
fn expand_across_epochs(cfg: &Config, hw: Offset, follower_leo: Offset) -> State {
    let isr = set(&[A, B]);
    let mut s = leading(cfg, A, 1, isr);
    s.produced = 3;
    let a = s.replica_mut(A);
    a.log = log(&[(0, 0), (1, 0), (2, 1)]);
    a.hw = hw;
    a.follower_leo[B as usize] = Some(3);
    a.follower_leo[C as usize] = Some(follower_leo);
    for f in [B, C] {
        let r = s.replica_mut(f);
        r.epoch = Some(1);
        r.leader = LeaderView::Replica(A);
    }
    s
}

#[test]
fn fenced_expand_waits_until_the_follower_reaches_the_leaders_epoch_start() {
    let fenced = base();
    // A's epoch 1 starts at offset 2 (c1). C has reached the HW (1) but
    // not the epoch start: Partition.isFollowerInSync keeps it out.
    let s = expand_across_epochs(&fenced, 1, 1);
    assert_disabled(&fenced, &s, expand(A, C));
    for cfg in unfenced(LOOKUPS) {
        assert_enabled(&cfg, &s, expand(A, C));
    }
    // C's LEO at the epoch start, the HW still below it: allowed. (The old
    // rule, now the expand-on-leader-hw mutation, asked the HW to get there.)
    let s = expand_across_epochs(&fenced, 1, 2);
    assert_enabled(&fenced, &s, expand(A, C));
    let old_rule = Config {
        mutation: Some(Mutation::ExpandOnLeaderHw),
        ..fenced
    };
    assert_disabled(&old_rule, &s, expand(A, C));
    // The HW at the epoch start and C with it: allowed under both.
    let s = expand_across_epochs(&fenced, 2, 2);
    assert_enabled(&fenced, &s, expand(A, C));
    assert_enabled(&old_rule, &s, expand(A, C));
    // C below the HW: never.
    assert_disabled(&fenced, &expand_across_epochs(&fenced, 3, 2), expand(A, C));
}

#[test]
fn kip903_a_fetch_from_before_a_crash_keeps_the_follower_out() {
    let cfg = base();
    let s = run(
        &cfg,
        &led(&cfg),
        &[fetch(C, A), crash(C, true), ctrl_shrink(C), learn(A)],
    );
    assert!(s.replica(A).stale_fetch.contains(C));
    assert_eq!(s.replica(A).follower_leo[C as usize], Some(0));
    // Its last fetch offset is caught up, but from a dead incarnation.
    assert_disabled(&cfg, &s, expand(A, C));
    let s1 = run(&cfg, &s, &[restart(C), follow(C, 0)]);
    assert_disabled(&cfg, &s1, expand(A, C));
    let s2 = run(&cfg, &s1, &[fetch(C, A)]);
    assert_enabled(&cfg, &s2, expand(A, C));
}

#[test]
fn leader_expand_sets_the_quorum_and_the_leaders_isr() {
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[shrink(A, C), fetch(C, A)]);
    let next = step(&cfg, &s, expand(A, C));
    assert_eq!(next.controller.isr, ReplicaSet::all(3));
    assert_eq!(next.replica(A).isr, ReplicaSet::all(3));
    assert_eq!(next.controller.epoch, Some(0));
    assert_disabled(&cfg, &next, expand(A, C));
}

// --- Flush --------------------------------------------------------------------

#[test]
fn flush_is_enabled_for_a_live_replica_with_unflushed_records_when_unclean_crashes_may_happen() {
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[produce(A, 0)]);
    assert_enabled(&cfg, &s, flush(A));
    assert_disabled(&cfg, &s, flush(B));
    let none = Config {
        unclean_crashes: 0,
        ..cfg
    };
    assert_disabled(&none, &s, flush(A));
    let mut dead = s;
    dead.replica_mut(A).alive = false;
    assert_disabled(&cfg, &dead, flush(A));
    let flushed = step(&cfg, &s, flush(A));
    assert_disabled(&cfg, &flushed, flush(A));
}

/// Since recovery points are forgotten (0) once no unclean crash is left,
/// Flush then changes nothing, yet `enabled` still offers it: its condition
/// reads `cfg.unclean_crashes > 0`, not whether an unclean crash is left.
#[test]
fn flush_is_not_offered_once_no_unclean_crash_is_left() {
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[produce(A, 0), crash(C, false)]);
    assert_eq!(s.unclean_crashes, cfg.unclean_crashes);
    assert!(apply(&cfg, &s, flush(A)).is_none(), "Flush(A) is a no-op");
    assert_disabled(&cfg, &s, flush(A));
}

#[test]
fn flush_moves_the_recovery_point_to_the_leo() {
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[produce(A, 0), produce(A, 1)]);
    assert_eq!(s.replica(A).recovery_point, 0);
    let next = step(&cfg, &s, flush(A));
    assert_eq!(next.replica(A).recovery_point, 2);
    assert_eq!(next.replica(A).log, s.replica(A).log);
}

// --- CheckpointHw -------------------------------------------------------------

/// `base()` with Kafka's periodic HW checkpoint.
fn periodic() -> Config {
    Config {
        hw_checkpoint: HwCheckpoint::Periodic,
        ..base()
    }
}

/// A leads with a0 committed (HW 1) and flushed; no HW checkpoint written.
fn committed_unchecked(cfg: &Config) -> State {
    let s = run(
        cfg,
        &led(cfg),
        &[
            produce(A, 0),
            fetch(B, A),
            fetch(C, A),
            fetch(B, A),
            fetch(C, A),
            advance(A, 1),
            flush(A),
        ],
    );
    assert_eq!((s.replica(A).hw, s.replica(A).hw_checkpoint), (1, 0));
    s
}

fn checkpoint(replica: ReplicaId) -> Action {
    Action::CheckpointHw { replica }
}

#[test]
fn checkpoint_hw_is_offered_only_when_periodic_and_the_file_is_behind() {
    let cfg = periodic();
    let s = committed_unchecked(&cfg);
    assert_enabled(&cfg, &s, checkpoint(A));
    assert_disabled(&cfg, &s, checkpoint(B)); // its HW (0) is in the file
    let written = step(&cfg, &s, checkpoint(A));
    assert_eq!(written.replica(A).hw_checkpoint, 1);
    assert_disabled(&cfg, &written, checkpoint(A));
    // With every change checkpointed there is no such step; nor once no
    // unclean crash, the only reader of the file, is left.
    let every = base();
    assert_disabled(&every, &committed_unchecked(&every), checkpoint(A));
    let none = Config {
        unclean_crashes: 0,
        ..cfg
    };
    assert_disabled(&none, &s, checkpoint(A));
}

#[test]
fn an_unclean_crash_brings_back_the_checkpointed_hw() {
    let cfg = periodic();
    let s = committed_unchecked(&cfg);
    let crashed = step(&cfg, &s, crash(A, false));
    assert_eq!(crashed.replica(A).log, s.replica(A).log, "flushed: kept");
    assert_eq!(crashed.replica(A).hw, 0, "the file's HW, older than A's");
    let written = run(&cfg, &s, &[checkpoint(A), crash(A, false)]);
    assert_eq!(written.replica(A).hw, 1);
    // With every change checkpointed the HW comes back as it was.
    let every = base();
    let crashed = step(&every, &committed_unchecked(&every), crash(A, false));
    assert_eq!(crashed.replica(A).hw, 1);
}

#[test]
fn a_clean_shutdown_checkpoints_the_hw() {
    let cfg = periodic();
    let s = step(&cfg, &committed_unchecked(&cfg), crash(A, true));
    assert_eq!((s.replica(A).hw, s.replica(A).hw_checkpoint), (1, 1));
}

// --- Crash --------------------------------------------------------------------

#[test]
fn crash_is_enabled_for_live_replicas_within_each_budget() {
    let cfg = base();
    let s = led(&cfg);
    for r in [A, B, C] {
        assert_enabled(&cfg, &s, crash(r, true));
        assert_enabled(&cfg, &s, crash(r, false));
    }
    let s1 = step(&cfg, &s, crash(B, true));
    assert_disabled(&cfg, &s1, crash(B, false));
    assert_disabled(&cfg, &s1, crash(A, true));
    assert_enabled(&cfg, &s1, crash(A, false));
    let s2 = step(&cfg, &s1, crash(A, false));
    assert_disabled(&cfg, &s2, crash(C, false));
    assert_disabled(&cfg, &s2, crash(C, true));
    let none = Config {
        clean_crashes: 0,
        unclean_crashes: 0,
        ..cfg
    };
    assert!(!enabled_actions(&none, &s)
        .iter()
        .any(|a| matches!(a, Action::Crash { .. })));
}

#[test]
fn clean_crash_keeps_the_log_and_flushes_it() {
    let cfg = base();
    let s = replicated_one(&cfg);
    let next = step(&cfg, &s, crash(A, true));
    let a = next.replica(A);
    assert!(!a.alive);
    assert_eq!(a.log, s.replica(A).log);
    assert_eq!(a.recovery_point, 1);
    assert!(!a.unclean_down);
    assert_eq!(a.leader, LeaderView::Unknown);
    assert_eq!(a.epoch, None);
    assert_eq!(a.isr, ReplicaSet::EMPTY);
    assert_eq!(a.follower_leo, [None; MAX_REPLICAS]);
    assert_eq!(a.pending_acks, 0);
    assert_eq!(next.clean_crashes, 1);
    assert_eq!(next.unclean_crashes, 0);
    // The controller does not know yet.
    assert_eq!(next.controller, s.controller);
}

#[test]
fn crash_marks_the_crashed_followers_last_fetch_stale() {
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[fetch(B, A)]);
    let next = step(&cfg, &s, crash(B, true));
    assert_eq!(next.replica(A).stale_fetch, set(&[B]));
    // C never fetched: nothing to mark.
    let next2 = step(&cfg, &s, crash(C, true));
    assert_eq!(next2.replica(A).stale_fetch, ReplicaSet::EMPTY);
}

#[test]
fn unclean_crash_cuts_the_log_to_the_recovery_point_and_clamps_the_hw() {
    // Two unclean crashes, so that recovery points still matter after one.
    let cfg = Config {
        unclean_crashes: 2,
        ..base()
    };
    let s = run(
        &cfg,
        &replicated_one(&cfg),
        &[
            advance(A, 1),
            fetch(B, A),
            flush(B),
            produce(A, 1),
            fetch(B, A),
        ],
    );
    let b = s.replica(B);
    assert_eq!((b.leo(), b.recovery_point, b.hw), (2, 1, 1));
    let mut s = s;
    s.replica_mut(B).hw = 2; // as if it had learnt HW 2
    let next = step(&cfg, &s, crash(B, false));
    let b = next.replica(B);
    assert!(!b.alive);
    assert!(b.unclean_down);
    assert_eq!(b.log, log(&[(0, 0)]));
    assert_eq!(b.recovery_point, 1);
    assert_eq!(b.hw, 1, "HW clamped to the surviving log");
    assert_eq!(b.epoch, None);
    assert_eq!(b.leader, LeaderView::Unknown);
    assert_eq!(next.unclean_crashes, 1);
    assert_eq!(next.clean_crashes, 0);

    // Nothing flushed: everything is lost.
    let next2 = step(&cfg, &s, crash(C, false));
    assert_eq!(next2.replica(C).log, Log::default());
    assert_eq!(next2.replica(C).hw, 0);
}

// --- Restart ------------------------------------------------------------------

#[test]
fn recovery_points_are_forgotten_once_no_unclean_crash_is_left() {
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[produce(A, 0), flush(A)]);
    assert_eq!(s.replica(A).recovery_point, 1);
    let next = step(&cfg, &s, crash(C, false));
    assert_eq!(next.replica(A).recovery_point, 0);
    assert_eq!(next.replica(A).log, s.replica(A).log);
}

#[test]
fn restart_is_enabled_for_a_dead_replica_that_is_not_the_controllers_leader() {
    let cfg = base();
    let s = led(&cfg);
    assert_disabled(&cfg, &s, restart(B));
    let s1 = step(&cfg, &s, crash(B, true));
    assert_enabled(&cfg, &s1, restart(B));
    // The crashed leader waits until the controller removes it.
    let s2 = step(&cfg, &s, crash(A, true));
    assert_disabled(&cfg, &s2, restart(A));
    let s3 = step(&cfg, &s2, ctrl_shrink(A));
    assert_enabled(&cfg, &s3, restart(A));
}

#[test]
fn restart_comes_back_alive_and_accepts_the_current_epochs_leader_and_isr_again() {
    let cfg = base();
    let s = run(
        &cfg,
        &replicated_one(&cfg),
        &[advance(A, 1), fetch(B, A), crash(B, true)],
    );
    let next = step(&cfg, &s, restart(B));
    let b = next.replica(B);
    assert!(b.alive);
    assert_eq!(b.epoch, Some(0));
    assert_eq!(b.leader, LeaderView::Unknown);
    assert_eq!(b.hw, 1, "with its checkpointed HW");
    assert_eq!(b.log, s.replica(B).log);
    assert_enabled(&cfg, &next, follow(B, 0));
    assert_disabled(&cfg, &next, fetch(B, A));
    let s2 = step(&cfg, &next, follow(B, 0));
    assert_enabled(&cfg, &s2, fetch(B, A));
    // Once told, epoch 0 is not taken again.
    assert_disabled(&cfg, &s2, follow(B, 0));
}

#[test]
fn restart_takes_the_controllers_epoch_of_the_moment() {
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[crash(B, true), ctrl_shrink(A)]);
    let next = step(&cfg, &s, restart(B));
    assert_eq!(next.replica(B).epoch, Some(1));
    assert_disabled(&cfg, &next, follow(B, 0));
    assert_enabled(&cfg, &next, follow(B, 1));
}

#[test]
fn restart_after_an_unclean_crash_is_remembered() {
    let cfg = base();
    let s = run(&cfg, &led(&cfg), &[crash(C, false)]);
    assert!(s.replica(C).unclean_down);
    assert!(!holds(SOMETIMES_UNCLEAN_RESTART, &s));
    let next = step(&cfg, &s, restart(C));
    assert!(!next.replica(C).unclean_down);
    assert!(holds(SOMETIMES_UNCLEAN_RESTART, &next));
}

// --- always-properties --------------------------------------------------------

fn holds(name: &str, s: &State) -> bool {
    let m = PartitionModel::default();
    let p = m
        .properties()
        .into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no property {name}"));
    (p.condition)(&m, s)
}

/// A state that breaks the always-property `name`, for each the model
/// defines (None: a property this test does not know yet).
fn breaking_state(name: &str) -> Option<State> {
    let cfg = base();
    let mut s = led(&cfg);
    match name {
        COMMITTED_RECORDS_SURVIVE | ACKNOWLEDGED_RECORDS_SURVIVE => {
            // a was written at offset 0 in epoch 0; B leads epoch 1 without it.
            s.produced = 1;
            let h = &mut s.records[0];
            if name == COMMITTED_RECORDS_SURVIVE {
                h.visible = Some(0);
            } else {
                h.acked = Some(0);
            }
            let b = s.replica_mut(B);
            b.leader = LeaderView::Replica(B);
            b.epoch = Some(1);
        }
        STRONG_ISR => {
            let a = s.replica_mut(A);
            a.log = log(&[(0, 0)]);
            a.hw = 1;
            s.produced = 1;
        }
        LEADER_IN_ISR => s.controller.isr = set(&[B, C]),
        HW_WITHIN_LOG => s.replica_mut(B).hw = 1,
        NO_DIVERGENCE_BELOW_HW => {
            for (r, id) in [(B, 0), (C, 1)] {
                let x = s.replica_mut(r);
                x.log = log(&[(id, 0)]);
                x.hw = 1;
            }
            s.produced = 2;
        }
        _ => return None,
    }
    Some(s)
}

/// Every always-property the model defines has a state that breaks it,
/// holds initially, and explains itself where broken.
#[test]
fn every_always_property_is_tested_here() {
    let names = properties::safety_names();
    assert!(!names.is_empty());
    assert_eq!(
        names,
        properties::ALWAYS,
        "properties::ALWAYS (what `broken` checks) lists the model's always-properties"
    );
    for name in names {
        let s = breaking_state(name).unwrap_or_else(|| {
            panic!("\"{name}\" is a new always-property: give it a breaking state here")
        });
        assert!(
            !holds(name, &s),
            "{name} breaks in its breaking state:\n{}",
            highwater_model::render::state_table(&s)
        );
        assert!(holds(name, &init(&base())), "{name} holds initially");
        assert!(
            properties::explain(name, &s).is_some(),
            "{name} explains why it breaks"
        );
    }
}

#[test]
fn every_always_property_holds_initially_and_after_a_commit() {
    let cfg = base();
    let s = run(&cfg, &replicated_one(&cfg), &[advance(A, 1), fetch(B, A)]);
    for name in properties::safety_names() {
        assert!(holds(name, &init(&cfg)), "{name}");
        assert!(holds(name, &s), "{name}");
    }
}

/// Record a (id 0) at offset 0, marked at epoch 1 (visible and acked);
/// B presumes it leads at `epoch` with `log`.
fn marked_record_and_leader(epoch: Epoch, leader_log: Log) -> State {
    let cfg = base();
    let mut s = leading(&cfg, B, epoch, ReplicaSet::all(3));
    s.produced = 1;
    s.records[0].visible = Some(1);
    s.records[0].acked = Some(1);
    s.replica_mut(B).log = leader_log;
    s
}

#[test]
fn committed_and_acknowledged_records_survive_on_later_leaders() {
    for (name, mark) in [
        (COMMITTED_RECORDS_SURVIVE, 0),
        (ACKNOWLEDGED_RECORDS_SURVIVE, 1),
    ] {
        let clear_other = |mut s: State| {
            if mark == 0 {
                s.records[0].acked = None;
            } else {
                s.records[0].visible = None;
            }
            s
        };
        // A later leader holding it: holds.
        let s = clear_other(marked_record_and_leader(2, log(&[(0, 0)])));
        assert!(holds(name, &s), "{name}");
        // The same epoch counts as later.
        let s = clear_other(marked_record_and_leader(1, log(&[(0, 0)])));
        assert!(holds(name, &s), "{name}");
        let s = clear_other(marked_record_and_leader(1, Log::default()));
        assert!(!holds(name, &s), "{name}");
        // A later leader without it: fails.
        let s = clear_other(marked_record_and_leader(2, Log::default()));
        assert!(!holds(name, &s), "{name}");
        // Another record at its offset: fails.
        let s = clear_other(marked_record_and_leader(2, log(&[(1, 2)])));
        assert!(!holds(name, &s), "{name}");
        // An earlier (stale) leader without it: holds.
        let s = clear_other(marked_record_and_leader(0, Log::default()));
        assert!(holds(name, &s), "{name}");
        // A leader that is dead does not count.
        let mut s = clear_other(marked_record_and_leader(2, Log::default()));
        s.replica_mut(B).alive = false;
        assert!(holds(name, &s), "{name}");
        // An unmarked record may be lost.
        let mut s = clear_other(marked_record_and_leader(2, Log::default()));
        s.records[0] = Default::default();
        assert!(holds(name, &s), "{name}");
    }
    // Each property reads its own mark only.
    let mut s = marked_record_and_leader(2, Log::default());
    s.records[0].visible = None;
    assert!(holds(COMMITTED_RECORDS_SURVIVE, &s));
    assert!(!holds(ACKNOWLEDGED_RECORDS_SURVIVE, &s));
}

#[test]
fn strong_isr_needs_every_isr_member_to_match_the_leader_below_its_hw() {
    let cfg = base();
    let mut s = leading(&cfg, A, 0, set(&[A, B]));
    s.produced = 2;
    s.replica_mut(A).log = log(&[(0, 0), (1, 0)]);
    s.replica_mut(A).hw = 1;
    s.replica_mut(B).log = log(&[(0, 0)]);
    assert!(holds(STRONG_ISR, &s));
    // B lacks a record below the HW.
    let mut missing = s;
    missing.replica_mut(B).log = Log::default();
    assert!(!holds(STRONG_ISR, &missing));
    // B holds another record there.
    let mut other = s;
    other.replica_mut(B).log = log(&[(1, 0)]);
    assert!(!holds(STRONG_ISR, &other));
    // Outside the quorum ISR it does not matter.
    let mut outside = missing;
    outside.controller.isr = set(&[A]);
    assert!(holds(STRONG_ISR, &outside));
    // Down after an unclean crash: left out until it restarts.
    let mut down = missing;
    down.replica_mut(B).unclean_down = true;
    assert!(holds(STRONG_ISR, &down));
    // Above the HW the logs may differ.
    let mut above = s;
    above.replica_mut(A).hw = 0;
    above.replica_mut(B).log = Log::default();
    assert!(holds(STRONG_ISR, &above));
}

#[test]
fn leader_in_isr_holds_only_when_the_controllers_leader_is_in_its_isr() {
    let cfg = base();
    let s = leading(&cfg, A, 0, set(&[A, B]));
    assert!(holds(LEADER_IN_ISR, &s));
    let mut out = s;
    out.controller.isr = set(&[B, C]);
    assert!(!holds(LEADER_IN_ISR, &out));
    let mut none = out;
    none.controller.leader = None;
    assert!(holds(LEADER_IN_ISR, &none));
}

#[test]
fn hw_within_log_fails_when_any_replicas_hw_passes_its_leo() {
    let cfg = base();
    let mut s = init(&cfg);
    s.replica_mut(C).log = log(&[(0, 0)]);
    s.replica_mut(C).hw = 1;
    assert!(holds(HW_WITHIN_LOG, &s));
    s.replica_mut(C).hw = 2;
    assert!(!holds(HW_WITHIN_LOG, &s));
}

#[test]
fn logs_agree_below_the_lower_of_two_hws() {
    let cfg = base();
    let mut s = init(&cfg);
    s.replica_mut(A).log = log(&[(0, 0), (1, 0)]);
    s.replica_mut(A).hw = 2;
    s.replica_mut(C).log = log(&[(0, 0), (2, 1)]);
    s.replica_mut(C).hw = 2;
    assert!(!holds(NO_DIVERGENCE_BELOW_HW, &s));
    s.replica_mut(C).hw = 1;
    assert!(holds(NO_DIVERGENCE_BELOW_HW, &s));
    s.replica_mut(A).hw = 1;
    s.replica_mut(C).hw = 2;
    assert!(holds(NO_DIVERGENCE_BELOW_HW, &s));
    // A shorter log below the other's HW is no disagreement once its own HW
    // is lower.
    s.replica_mut(C).log = log(&[(0, 0)]);
    s.replica_mut(C).hw = 1;
    assert!(holds(NO_DIVERGENCE_BELOW_HW, &s));
    s.replica_mut(C).log = log(&[(3, 0)]);
    assert!(!holds(NO_DIVERGENCE_BELOW_HW, &s));
}
