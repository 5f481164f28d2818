//! KIP-966's LastKnownElr and the last-known-leader election, as Kafka 4.x's
//! `PartitionChangeBuilder` runs them (`model/src/controller.rs`):
//!
//! - the controller remembers the last leader when the partition becomes
//!   leaderless, and forgets it at the next election;
//! - while ISR and ELR are both empty it elects that leader if it is up,
//!   even with unclean election off; Kafka counts the election as unclean:
//!   the ISR becomes the leader alone and the partition is RECOVERING until
//!   the leader's next ISR change;
//! - the election can make a leader of a replica that lost committed records
//!   in an unclean crash (see spec/history.md, "last-known-leader");
//! - within `safe`'s bounds (one unclean crash, min.insync.replicas=2) it
//!   never happens ([`never_within_safe_bounds`], an ignored run).

mod common;

use common::*;
#[path = "../../testkit/long_tier.rs"]
mod long_tier;
use highwater_checker::shortest::shortest_counterexamples;
use highwater_model::controller::Election;
use highwater_model::presets::SAFE;
use highwater_model::properties::{properties, COMMITTED_RECORDS_SURVIVE};
use highwater_model::render::state_table;
use highwater_model::{Action, Config, PartitionModel, State};
use stateright::Property;

/// `base()` with min.insync.replicas=1, where one unclean crash can empty
/// both ISR and ELR.
fn min_isr_1() -> Config {
    Config {
        min_isr: 1,
        ..base()
    }
}

fn elect_last_known(replica: u8) -> Action {
    Action::ControllerElectLeader {
        replica,
        election: Election::LastKnownLeader,
    }
}

/// A alone in the ISR commits record a (id 0), unflushed, crashes uncleanly
/// and is removed: ISR {}, ELR {A}, last known leader A.
fn a_lost_a_committed_record(cfg: &Config) -> State {
    run(
        cfg,
        &led(cfg),
        &[
            shrink(A, B),
            shrink(A, C),
            produce(A, 0),
            advance(A, 1),
            crash(A, false),
            ctrl_shrink(A),
        ],
    )
}

fn committed_survive(cfg: &Config, s: &State) -> bool {
    let p = properties()
        .into_iter()
        .find(|p| p.name == COMMITTED_RECORDS_SURVIVE)
        .expect("the property");
    (p.condition)(&PartitionModel::new(*cfg), s)
}

#[test]
fn the_last_leader_is_remembered_while_leaderless_and_forgotten_at_an_election() {
    let cfg = base();
    let s = step(&cfg, &led(&cfg), ctrl_shrink(A));
    assert_eq!(s.controller.leader, None);
    assert_eq!(s.controller.lke, set(&[A]), "\n{}", state_table(&s));
    let s1 = step(&cfg, &s, elect(B));
    assert_eq!(s1.controller.lke, set(&[]));
    // Not without the ELR, nor with the switch off.
    for off in [
        Config { elr: false, ..cfg },
        Config {
            last_known_leader: false,
            ..cfg
        },
    ] {
        let s = step(&off, &led(&off), ctrl_shrink(A));
        assert_eq!(s.controller.lke, set(&[]), "{off}");
    }
}

#[test]
fn the_last_known_leader_is_elected_once_isr_and_elr_are_empty() {
    let cfg = min_isr_1();
    let s = a_lost_a_committed_record(&cfg);
    assert_eq!(
        (s.controller.isr, s.controller.elr, s.controller.lke),
        (set(&[]), set(&[A]), set(&[A]))
    );
    // A is in the ELR, but down: nobody can be elected.
    assert!(elections(&cfg, &s).is_empty());
    // Its unclean restart takes it out of the ELR: ISR and ELR are empty.
    let back = step(&cfg, &s, restart(A));
    assert_eq!(
        (back.controller.isr, back.controller.elr),
        (set(&[]), set(&[]))
    );
    assert_eq!(elections(&cfg, &back), vec![(A, Election::LastKnownLeader)]);
    let led_again = step(&cfg, &back, elect_last_known(A));
    let c = &led_again.controller;
    assert_eq!(
        (c.leader, c.isr, c.elr, c.lke),
        (Some(A), set(&[A]), set(&[]), set(&[]))
    );
    assert!(c.recovering, "Kafka counts it as unclean");
    // With the switch off the partition stays offline.
    let off = Config {
        last_known_leader: false,
        ..cfg
    };
    let back_off = run(&off, &a_lost_a_committed_record(&off), &[restart(A)]);
    assert!(elections(&off, &back_off).is_empty());
}

#[test]
fn not_while_an_elr_member_remains_nor_while_the_last_leader_is_down() {
    let cfg = base();
    // ISR {}, ELR {A, B} with A the last leader, both down.
    let s = run(
        &cfg,
        &led(&cfg),
        &[
            shrink(A, C),
            crash(B, true),
            ctrl_shrink(B),
            crash(A, false),
            ctrl_shrink(A),
        ],
    );
    assert_eq!(
        (s.controller.elr, s.controller.lke),
        (set(&[A, B]), set(&[A]))
    );
    assert!(elections(&cfg, &s).is_empty());
    // A's unclean restart takes it out of the ELR; B, still eligible though
    // down, rules out the last known leader.
    let s1 = step(&cfg, &s, restart(A));
    assert_eq!(s1.controller.elr, set(&[B]));
    assert!(elections(&cfg, &s1).is_empty());
    // ISR and ELR empty, but the last known leader is down.
    let cfg1 = min_isr_1();
    let mut t = run(&cfg1, &a_lost_a_committed_record(&cfg1), &[restart(A)]);
    assert_eq!(elections(&cfg1, &t), vec![(A, Election::LastKnownLeader)]);
    t.replica_mut(A).alive = false;
    assert!(elections(&cfg1, &t).is_empty());
}

#[test]
fn recovering_lasts_until_the_leaders_next_isr_change() {
    let cfg = min_isr_1();
    let s = run(
        &cfg,
        &a_lost_a_committed_record(&cfg),
        &[
            restart(A),
            elect_last_known(A),
            lead(A, 2),
            follow(B, 2),
            fetch(B, A),
        ],
    );
    assert!(s.controller.recovering);
    let s1 = step(&cfg, &s, expand(A, B));
    assert!(!s1.controller.recovering, "\n{}", state_table(&s1));
}

#[test]
fn an_unclean_election_makes_the_partition_recovering() {
    let cfg = Config {
        unclean_election: true,
        ..base()
    };
    let s = run(
        &cfg,
        &led(&cfg),
        &[shrink(A, C), shrink(A, B), crash(A, true), ctrl_shrink(A)],
    );
    // ISR {}, ELR {A, B}; B is up, so it is elected from the ELR.
    assert_eq!(elections(&cfg, &s), vec![(B, Election::Elr)]);
    let mut t = s;
    t.replica_mut(B).alive = false;
    assert_eq!(elections(&cfg, &t), vec![(C, Election::Unclean)]);
    let u = step(&cfg, &t, elect_unclean(C));
    assert!(u.controller.recovering);
    assert_eq!((u.controller.elr, u.controller.lke), (set(&[]), set(&[])));
}

/// The step that breaks "committed records survive": A, elected as last
/// known leader, leads without the record it committed and lost.
#[test]
fn electing_the_last_known_leader_can_lose_a_committed_record() {
    let cfg = min_isr_1();
    let s = run(
        &cfg,
        &a_lost_a_committed_record(&cfg),
        &[restart(A), elect_last_known(A)],
    );
    assert!(committed_survive(&cfg, &s));
    let s1 = step(&cfg, &s, lead(A, 2));
    assert!(!committed_survive(&cfg, &s1), "\n{}", state_table(&s1));
}

/// "The last known leader can be elected here."
fn no_last_known_leader_election(m: &PartitionModel, s: &State) -> bool {
    let mut actions = Vec::new();
    highwater_model::actions::enabled(&m.cfg, s, &mut actions);
    !actions.iter().any(|a| {
        matches!(
            a,
            Action::ControllerElectLeader {
                election: Election::LastKnownLeader,
                ..
            }
        )
    })
}

/// Whether some reachable state of `cfg` enables a last-known-leader election.
fn reachable(cfg: Config) -> bool {
    let model = PartitionModel::new(cfg);
    let never = Property::always(
        "no last-known-leader election",
        no_last_known_leader_election,
    );
    let found = shortest_counterexamples(&model, &[never]);
    found[0].1.is_some()
}

#[test]
fn reachable_with_two_unclean_crashes_or_min_isr_1() {
    let small = Config { records: 1, ..SAFE };
    assert!(
        !reachable(small),
        "one unclean crash, min.insync.replicas=2"
    );
    assert!(reachable(Config {
        unclean_crashes: 2,
        ..small
    }));
    assert!(reachable(Config {
        min_isr: 1,
        ..small
    }));
}

/// `safe` itself (the long tier).
#[test]
fn never_within_safe_bounds() {
    if !long_tier::enabled("a breadth-first search of safe's whole state space, about a minute") {
        return;
    }
    assert!(!reachable(SAFE));
}
