//! Unit tests for the KIP-966 rules (eligible leader replicas) as the model
//! issue states them, and for the elections they allow:
//!
//! 1. the HW does not advance while the leader's ISR is below
//!    min.insync.replicas;
//! 2. a replica that leaves the ISR (controller or leader shrink) enters the
//!    ELR when the ISR after its removal is below min.insync.replicas, unless
//!    it is known to have shut down uncleanly (known only at its restart);
//! 3. the last ISR member is removed too when its broker fails (the ISR may
//!    become empty); without ELR it stays ("last replica standing");
//! 4. the ELR empties whenever the ISR is back at min.insync.replicas; a
//!    replica leaves it when it rejoins the ISR or is elected;
//! 5. a restarting replica leaves the ISR (Kafka 4.x's `handleBrokerShutdown`:
//!    the new incarnation registers fenced); after a clean shutdown it may
//!    enter the ELR, after an unclean one it leaves both the ISR and the ELR,
//!    and may rejoin later through a normal expand.
//!
//! Elections: clean from the live ISR, else from the ELR when ELR is on;
//! unclean only when enabled and no live ISR (nor, with ELR, ELR) member.

use highwater_model::actions::apply;
use highwater_model::controller::Election;
use highwater_model::render::state_table;
use highwater_model::state::{ReplicaId, ReplicaSet};
use highwater_model::{Action, Config, State};

mod common;
use common::*;

// --- helpers ------------------------------------------------------------------

/// The shared `base()` (three replicas, min.insync.replicas=2, acks=all,
/// KIP-320 fencing, ELR on, room for three records, epochs 0..=3) with one
/// clean and two unclean crashes.
fn base_two_unclean_crashes() -> Config {
    Config {
        unclean_crashes: 2,
        ..base()
    }
}

/// `base_two_unclean_crashes()` with ELR off.
fn no_elr() -> Config {
    Config {
        elr: false,
        ..base_two_unclean_crashes()
    }
}

#[track_caller]
fn assert_isr_elr(s: &State, isr: &[ReplicaId], elr: &[ReplicaId]) {
    assert_eq!(
        (s.controller.isr, s.controller.elr),
        (set(isr), set(elr)),
        "(ISR, ELR)\n{}",
        state_table(s)
    );
}

// --- rule 1: the HW waits for min.insync.replicas -----------------------------

/// A wrote record a (id 0) while its ISR was full, then dropped B and C
/// before either fetched: the leader alone, with an HW of 0 and a LEO of 1.
fn leader_alone_with_a_record(cfg: &Config) -> State {
    run(cfg, &led(cfg), &[produce(A, 0), shrink(A, B), shrink(A, C)])
}

#[test]
fn rule1_hw_does_not_advance_while_the_leaders_isr_is_below_min_isr() {
    let cfg = base_two_unclean_crashes();
    let s = leader_alone_with_a_record(&cfg);
    assert_eq!(s.replica(A).isr, set(&[A]));
    assert_eq!(s.replica(A).leo(), 1);
    assert!(hw_advances(&cfg, &s).is_empty(), "ISR {{A}} < 2");

    // Without ELR the leader alone advances it.
    let off = no_elr();
    let s_off = leader_alone_with_a_record(&off);
    assert_eq!(hw_advances(&off, &s_off), vec![advance(A, 1)]);

    // At min.insync.replicas=1 the leader alone is enough, ELR or not.
    let one = Config { min_isr: 1, ..cfg };
    let s_one = leader_alone_with_a_record(&one);
    assert_eq!(hw_advances(&one, &s_one), vec![advance(A, 1)]);
}

#[test]
fn rule1_hw_advances_again_once_the_isr_is_back_at_min_isr() {
    let cfg = base_two_unclean_crashes();
    let s = leader_alone_with_a_record(&cfg);
    // B fetches the record and is caught up to the HW (0): back in.
    let s1 = run(&cfg, &s, &[fetch(B, A), expand(A, B)]);
    assert_eq!(s1.replica(A).isr, set(&[A, B]));
    // The leader knows B's LEO as 0 still: nothing to advance yet.
    assert!(hw_advances(&cfg, &s1).is_empty());
    let s2 = run(&cfg, &s1, &[fetch(B, A)]);
    assert_eq!(hw_advances(&cfg, &s2), vec![advance(A, 1)]);
    let s3 = step(&cfg, &s2, advance(A, 1));
    assert_eq!(s3.records[0].acked, Some(0));
    assert_eq!(s3.records[0].visible, Some(0));
}

#[test]
fn rule1_an_isr_of_exactly_min_isr_advances_the_hw() {
    let cfg = base_two_unclean_crashes();
    let s = run(
        &cfg,
        &led(&cfg),
        &[shrink(A, C), produce(A, 0), fetch(B, A), fetch(B, A)],
    );
    assert_eq!(s.replica(A).isr, set(&[A, B]));
    assert_eq!(hw_advances(&cfg, &s), vec![advance(A, 1)]);
}

// --- rule 2: leaving the ISR below min.insync.replicas enters the ELR --------

#[test]
fn rule2_controller_shrink_enters_the_elr_only_below_min_isr() {
    let cfg = base_two_unclean_crashes();
    let s = led(&cfg);
    let s1 = step(&cfg, &s, ctrl_shrink(C));
    assert_isr_elr(&s1, &[A, B], &[]);
    let s2 = step(&cfg, &s1, ctrl_shrink(B));
    assert_isr_elr(&s2, &[A], &[B]);
    // The leader too (rule 3: it may be the last).
    let s3 = step(&cfg, &s2, ctrl_shrink(A));
    assert_isr_elr(&s3, &[], &[A, B]);
    assert_eq!(s3.controller.leader, None);
}

#[test]
fn rule2_leader_shrink_enters_the_elr_only_below_min_isr() {
    let cfg = base_two_unclean_crashes();
    let s = led(&cfg);
    let s1 = step(&cfg, &s, shrink(A, C));
    assert_isr_elr(&s1, &[A, B], &[]);
    let s2 = step(&cfg, &s1, shrink(A, B));
    assert_isr_elr(&s2, &[A], &[B]);
}

#[test]
fn rule2_every_replica_leaving_below_min_isr_enters_the_elr() {
    // min.insync.replicas=3: each removal leaves the ISR short.
    let cfg = Config {
        min_isr: 3,
        ..base_two_unclean_crashes()
    };
    let s = run(&cfg, &led(&cfg), &[shrink(A, B)]);
    assert_isr_elr(&s, &[A, C], &[B]);
    let s2 = step(&cfg, &s, ctrl_shrink(C));
    assert_isr_elr(&s2, &[A], &[B, C]);
}

#[test]
fn rule2_without_elr_nobody_enters_it() {
    let cfg = no_elr();
    let s = run(
        &cfg,
        &led(&cfg),
        &[shrink(A, C), shrink(A, B), ctrl_shrink(A)],
    );
    assert_eq!(s.controller.elr, ReplicaSet::EMPTY);
}

#[test]
fn rule2_an_unclean_shutdown_the_controller_has_not_heard_of_does_not_keep_it_out() {
    let cfg = base_two_unclean_crashes();
    // C crashes uncleanly; until it restarts, the controller cannot know.
    let s = run(&cfg, &led(&cfg), &[shrink(A, B), crash(C, false)]);
    assert!(s.replica(C).unclean_down);
    let by_controller = step(&cfg, &s, ctrl_shrink(C));
    assert_isr_elr(&by_controller, &[A], &[C]);
    let by_leader = step(&cfg, &s, shrink(A, C));
    assert_isr_elr(&by_leader, &[A], &[C]);
    // At its restart (rule 5) it leaves the ELR.
    let back = step(&cfg, &by_controller, restart(C));
    assert_isr_elr(&back, &[A], &[]);
}

// --- rule 3: the last ISR member -------------------------------------------

#[test]
fn rule3_with_elr_the_last_isr_member_is_removed_and_the_isr_may_empty() {
    let cfg = base_two_unclean_crashes();
    // The leader last.
    let s = run(
        &cfg,
        &led(&cfg),
        &[shrink(A, C), shrink(A, B), crash(A, true)],
    );
    assert_isr_elr(&s, &[A], &[B]);
    let s1 = step(&cfg, &s, ctrl_shrink(A));
    assert_isr_elr(&s1, &[], &[A, B]);
    assert_eq!(s1.controller.leader, None);
    assert_eq!(s1.controller.epoch, Some(1));

    // A non-leader last, on a leaderless partition.
    let s2 = run(&cfg, &led(&cfg), &[ctrl_shrink(A), ctrl_shrink(B)]);
    assert_isr_elr(&s2, &[C], &[B]);
    assert_eq!(s2.controller.leader, None);
    let s3 = step(&cfg, &s2, ctrl_shrink(C));
    assert_isr_elr(&s3, &[], &[B, C]);
}

#[test]
fn rule3_without_elr_the_last_replica_standing_stays_in_the_isr() {
    let cfg = no_elr();
    let s = run(
        &cfg,
        &led(&cfg),
        &[shrink(A, C), shrink(A, B), crash(A, true)],
    );
    let s1 = step(&cfg, &s, ctrl_shrink(A));
    assert_isr_elr(&s1, &[A], &[]);
    assert_eq!(s1.controller.leader, None, "only its leadership goes");
    assert_eq!(s1.controller.epoch, Some(1));
    assert_disabled(&cfg, &s1, ctrl_shrink(A));
    // It is elected again, cleanly, once back.
    let s2 = step(&cfg, &s1, restart(A));
    assert_eq!(elections(&cfg, &s2), vec![(A, Election::Clean)]);

    // A non-leader last stays likewise.
    let s3 = run(&cfg, &led(&cfg), &[ctrl_shrink(A), ctrl_shrink(B)]);
    assert_isr_elr(&s3, &[C], &[]);
    assert_disabled(&cfg, &s3, ctrl_shrink(C));
}

// --- rule 4: leaving the ELR ------------------------------------------------

#[test]
fn rule4_the_elr_empties_when_the_isr_is_back_at_min_isr() {
    let cfg = base_two_unclean_crashes();
    // ISR {A}, ELR {B}; C comes back, B does not.
    let s = run(&cfg, &led(&cfg), &[shrink(A, C), shrink(A, B)]);
    assert_isr_elr(&s, &[A], &[B]);
    let s1 = run(&cfg, &s, &[fetch(C, A), expand(A, C)]);
    assert_isr_elr(&s1, &[A, C], &[]);
}

#[test]
fn rule4_a_replica_rejoining_the_isr_leaves_the_elr() {
    let cfg = Config {
        min_isr: 3,
        ..base_two_unclean_crashes()
    };
    let s = run(&cfg, &led(&cfg), &[shrink(A, B), shrink(A, C)]);
    assert_isr_elr(&s, &[A], &[B, C]);
    // B rejoins; the ISR is still short, C stays eligible.
    let s1 = run(&cfg, &s, &[fetch(B, A), expand(A, B)]);
    assert_isr_elr(&s1, &[A, B], &[C]);
    let s2 = run(&cfg, &s1, &[fetch(C, A), expand(A, C)]);
    assert_isr_elr(&s2, &[A, B, C], &[]);
}

#[test]
fn rule4_a_replica_elected_from_the_elr_leaves_it() {
    let cfg = base_two_unclean_crashes();
    let s = run(
        &cfg,
        &led(&cfg),
        &[shrink(A, C), shrink(A, B), crash(A, true), ctrl_shrink(A)],
    );
    assert_isr_elr(&s, &[], &[A, B]);
    assert_eq!(elections(&cfg, &s), vec![(B, Election::Elr)]);
    let s1 = step(&cfg, &s, elect_elr(B));
    assert_isr_elr(&s1, &[B], &[A]);
    assert_eq!(s1.controller.leader, Some(B));
    // The new leader's epoch carries its one-member ISR.
    let req = s1.request(2).expect("LeaderAndIsr of epoch 2");
    assert_eq!((req.leader, req.isr), (Some(B), set(&[B])));
}

#[test]
fn rule4_a_clean_restart_keeps_an_elr_member_eligible() {
    let cfg = base_two_unclean_crashes();
    let s = run(
        &cfg,
        &led(&cfg),
        &[shrink(A, C), crash(B, true), ctrl_shrink(B)],
    );
    assert_isr_elr(&s, &[A], &[B]);
    let s1 = step(&cfg, &s, restart(B));
    assert_isr_elr(&s1, &[A], &[B]);
}

// --- rule 5: an unclean restart leaves the ISR and the ELR --------------------

#[test]
fn rule5_an_unclean_restart_leaves_the_elr() {
    let cfg = base_two_unclean_crashes();
    let s = run(
        &cfg,
        &led(&cfg),
        &[shrink(A, C), crash(B, false), ctrl_shrink(B)],
    );
    assert_isr_elr(&s, &[A], &[B]);
    let s1 = step(&cfg, &s, restart(B));
    assert_isr_elr(&s1, &[A], &[]);
}

#[test]
fn rule5_an_unclean_restart_leaves_the_isr_without_entering_the_elr() {
    let cfg = base_two_unclean_crashes();
    // ISR after its removal is still at min.insync.replicas.
    let s = run(&cfg, &led(&cfg), &[crash(C, false)]);
    let s1 = step(&cfg, &s, restart(C));
    assert_isr_elr(&s1, &[A, B], &[]);
    // ISR after its removal is below min.insync.replicas: still not in the
    // ELR, the controller knows it shut down uncleanly.
    let s2 = run(&cfg, &led(&cfg), &[shrink(A, B), crash(C, false)]);
    assert_isr_elr(&s2, &[A, C], &[]);
    let s3 = step(&cfg, &s2, restart(C));
    assert_isr_elr(&s3, &[A], &[]);
}

#[test]
fn rule5_a_clean_restart_leaves_the_isr_and_may_enter_the_elr() {
    // Kafka 4.x's handleBrokerShutdown: a new incarnation registers fenced
    // and leaves every ISR, clean shutdown or not.
    let cfg = base_two_unclean_crashes();
    let s = run(&cfg, &led(&cfg), &[crash(C, true), restart(C)]);
    assert_isr_elr(&s, &[A, B], &[]);
    // Below min.insync.replicas a cleanly restarted replica stays eligible.
    let s = run(
        &cfg,
        &led(&cfg),
        &[shrink(A, B), crash(C, true), restart(C)],
    );
    assert_isr_elr(&s, &[A], &[C]);
}

#[test]
fn rule5_without_elr_an_unclean_restart_leaves_the_isr_as_a_clean_one() {
    let cfg = no_elr();
    let s = run(&cfg, &led(&cfg), &[crash(C, false), restart(C)]);
    assert_isr_elr(&s, &[A, B], &[]);
}

#[test]
fn rule5_the_uncleanly_restarted_replica_rejoins_through_a_normal_expand() {
    let cfg = base_two_unclean_crashes();
    // a is committed on all three; C has not flushed it and loses it.
    let s = run(
        &cfg,
        &led(&cfg),
        &[
            produce(A, 0),
            fetch(B, A),
            fetch(C, A),
            fetch(B, A),
            fetch(C, A),
            advance(A, 1),
            crash(C, false),
            restart(C),
        ],
    );
    assert_isr_elr(&s, &[A, B], &[]);
    assert_eq!(s.replica(C).leo(), 0);
    // It takes the current epoch again and catches up.
    let s1 = run(&cfg, &s, &[follow(C, 0), fetch(C, A)]);
    assert_eq!(s1.replica(C).leo(), 1);
    assert_disabled(&cfg, &s1, expand(A, C));
    // The leader still lists C from before; its fetch offset (0) lags, so
    // the leader drops it from its own view, and takes it back once caught up.
    let s2 = run(&cfg, &s1, &[shrink(A, C)]);
    assert_isr_elr(&s2, &[A, B], &[]);
    assert_disabled(&cfg, &s2, expand(A, C));
    let s3 = run(&cfg, &s2, &[fetch(C, A), expand(A, C)]);
    assert_isr_elr(&s3, &[A, B, C], &[]);
}

/// After a controller-side removal (here the unclean restart of rule 5), the
/// leader's own ISR still lists the replica: nothing refreshes it. Once that
/// replica has caught up and follows the leader, LeaderShrinkIsr (not
/// lagging, not gone) and LeaderExpandIsr (already in the leader's ISR) are
/// both disabled, so without a new record it can never rejoin the quorum ISR.
#[test]
fn rule5_a_caught_up_replica_can_rejoin_after_an_unclean_restart() {
    let cfg = Config {
        records: 1,
        ..base_two_unclean_crashes()
    };
    let s = run(
        &cfg,
        &led(&cfg),
        &[
            produce(A, 0),
            fetch(B, A),
            fetch(C, A),
            fetch(B, A),
            fetch(C, A),
            advance(A, 1),
            crash(C, false),
            restart(C),
            follow(C, 0),
            fetch(C, A),
            fetch(C, A),
        ],
    );
    assert_isr_elr(&s, &[A, B], &[]);
    assert_eq!(s.replica(A).isr, set(&[A, B, C]), "the leader's stale view");
    assert_eq!(s.replica(C).leo(), 1);
    assert_eq!(s.replica(A).follower_leo[C as usize], Some(1));
    // C is caught up, follows A in its epoch, and its fetch is fresh: a normal
    // expand must be possible, directly or after the leader drops it from its
    // view.
    let rejoin = is_enabled(&cfg, &s, expand(A, C))
        || apply(&cfg, &s, shrink(A, C))
            .filter(|_| is_enabled(&cfg, &s, shrink(A, C)))
            .is_some_and(|s2| is_enabled(&cfg, &s2, expand(A, C)));
    assert!(rejoin, "C can never rejoin\n{}", state_table(&s));
}

// --- elections ----------------------------------------------------------------

#[test]
fn election_is_clean_from_a_live_isr_member_first() {
    let cfg = Config {
        unclean_election: true,
        ..base_two_unclean_crashes()
    };
    let s = isr_a_elr_b(&cfg);
    assert_eq!(elections(&cfg, &s), vec![(A, Election::Clean)]);
}

#[test]
fn election_is_from_the_elr_only_with_elr_on_and_the_isr_empty() {
    let cfg = base_two_unclean_crashes();
    let mut s = isr_a_elr_b(&cfg);
    s.replica_mut(A).alive = false;
    // KIP-966: the failed member leaves the ISR (for the ELR) before an ELR
    // election.
    assert!(elections(&cfg, &s).is_empty());
    // ELR off: the ELR gives no candidate.
    assert!(elections(&no_elr(), &s).is_empty());
    let s = step(&cfg, &s, ctrl_shrink(A));
    assert_eq!(elections(&cfg, &s), vec![(B, Election::Elr)]);
    // Reached by a path: see rule4_a_replica_elected_from_the_elr_leaves_it.
}

#[test]
fn election_is_unclean_only_when_enabled_and_no_live_isr_or_elr_member() {
    let cfg = Config {
        unclean_election: true,
        ..base_two_unclean_crashes()
    };
    let mut s = isr_a_elr_b(&cfg);
    s.replica_mut(A).alive = false;
    let mut s = step(&cfg, &s, ctrl_shrink(A));
    // A live ELR member rules out an unclean election.
    assert_eq!(elections(&cfg, &s), vec![(B, Election::Elr)]);
    s.replica_mut(B).alive = false;
    assert_eq!(elections(&cfg, &s), vec![(C, Election::Unclean)]);
    let disabled = Config {
        unclean_election: false,
        ..cfg
    };
    assert!(elections(&disabled, &s).is_empty());
    // Without ELR, any live replica as soon as the ISR is dead.
    let off = Config {
        unclean_election: true,
        ..no_elr()
    };
    let mut t = init(&off);
    t.controller.epoch = Some(1);
    t.controller.isr = set(&[A]);
    t.replica_mut(A).alive = false;
    assert_eq!(
        elections(&off, &t),
        vec![(B, Election::Unclean), (C, Election::Unclean)]
    );
}

#[test]
fn unclean_election_clears_the_elr() {
    let cfg = Config {
        unclean_election: true,
        ..base_two_unclean_crashes()
    };
    // ISR {}, ELR {A,B}, both dead; C was never eligible.
    let s = run(
        &cfg,
        &led(&cfg),
        &[
            shrink(A, C),
            shrink(A, B),
            crash(B, true),
            crash(A, false),
            ctrl_shrink(A),
        ],
    );
    assert_isr_elr(&s, &[], &[A, B]);
    assert_eq!(elections(&cfg, &s), vec![(C, Election::Unclean)]);
    let s1 = step(
        &cfg,
        &s,
        Action::ControllerElectLeader {
            replica: C,
            election: Election::Unclean,
        },
    );
    assert_isr_elr(&s1, &[C], &[]);
    assert_eq!(s1.controller.leader, Some(C));
}

#[test]
fn an_elr_member_restarting_uncleanly_is_no_longer_electable() {
    let cfg = base_two_unclean_crashes();
    // ISR {}, ELR {A,B}; B crashes uncleanly and comes back: only A remains
    // eligible, and it is dead, so nobody can be elected.
    let s = run(
        &cfg,
        &led(&cfg),
        &[
            shrink(A, C),
            shrink(A, B),
            crash(A, true),
            ctrl_shrink(A),
            crash(B, false),
            restart(B),
        ],
    );
    assert_isr_elr(&s, &[], &[A]);
    assert!(elections(&cfg, &s).is_empty());
    // A clean restart of A makes it electable from the ELR.
    let s1 = step(&cfg, &s, restart(A));
    assert_eq!(elections(&cfg, &s1), vec![(A, Election::Elr)]);
}
