//! `state_diff::diff`: empty exactly when two states are equal, and each
//! field named by its path in an ITF trace, with both values.

use highwater_model::actions;
use highwater_model::presets::Preset;
use highwater_model::state::{Entry, LeaderView, ReplicaSet, Request, State};
use highwater_model::state_diff::{diff, FieldDiff};
use highwater_model::{Config, PartitionModel};
use std::collections::{HashSet, VecDeque};

/// `safe` with two replicas, one record and Kafka's periodic HW
/// checkpoint: small enough to search deep (commits, crashes), and some
/// steps change the checkpoint alone.
fn cfg() -> Config {
    Config {
        replicas: 2,
        records: 1,
        ..Preset::find("safe-hw-checkpoint").unwrap().config
    }
}

/// Up to `limit` states reachable under `cfg`, breadth first.
fn reachable(cfg: &Config, limit: usize) -> Vec<State> {
    let init = PartitionModel::new(*cfg).init_state();
    let mut seen = HashSet::from([init]);
    let mut queue = VecDeque::from([init]);
    let mut out = Vec::new();
    while let Some(s) = queue.pop_front() {
        out.push(s);
        if out.len() == limit {
            break;
        }
        let mut enabled = Vec::new();
        actions::enabled(cfg, &s, &mut enabled);
        for a in enabled {
            let next = actions::successor(cfg, &s, a);
            if seen.insert(next) {
                queue.push_back(next);
            }
        }
    }
    out
}

#[test]
fn the_difference_is_empty_exactly_when_the_states_are_equal() {
    let cfg = cfg();
    let states = reachable(&cfg, 20_000);
    assert_eq!(states.len(), 20_000, "enough states to compare");
    let mut compared = 0;
    for s in &states {
        assert!(diff(s, s).is_empty());
        let mut enabled = Vec::new();
        actions::enabled(&cfg, s, &mut enabled);
        for a in enabled {
            let next = actions::successor(&cfg, s, a);
            assert_eq!(diff(s, &next).is_empty(), *s == next, "{a}");
            compared += 1;
        }
    }
    // Far apart states too: each with the one a thousand later.
    for (a, b) in states.iter().zip(states.iter().skip(1000)) {
        assert_eq!(diff(a, b).is_empty(), a == b);
    }
    assert!(compared > 20_000);
}

/// One field changed by hand: the difference names it alone, with its
/// value before and after.
#[test]
fn each_field_is_named_by_its_itf_path_with_both_values() {
    let cfg = Config {
        replicas: 3,
        ..cfg()
    };
    // A state with a leader, a record, followers and a request.
    let s = reachable(&cfg, 5_000)
        .into_iter()
        .find(|s| {
            s.replica(0).leo() == 1
                && s.replica(0).leader == LeaderView::Replica(0)
                && s.produced == 1
        })
        .expect("a state where A leads with a record");
    type Edit = fn(&mut State);
    let cases: Vec<(&str, Edit, &str)> = vec![
        ("replicas.A.hw", |s| s.replica_mut(0).hw = 1, "1"),
        ("replicas.B.alive", |s| s.replica_mut(1).alive ^= true, ""),
        (
            "replicas.C.unclean_down",
            |s| s.replica_mut(2).unclean_down ^= true,
            "",
        ),
        (
            "replicas.A.recovery_point",
            |s| s.replica_mut(0).recovery_point ^= 1,
            "",
        ),
        (
            "replicas.A.hw_checkpoint",
            |s| s.replica_mut(0).hw_checkpoint ^= 1,
            "",
        ),
        (
            "replicas.B.epoch",
            |s| s.replica_mut(1).epoch = Some(4),
            "4",
        ),
        (
            "replicas.B.leader",
            |s| s.replica_mut(1).leader = LeaderView::NoLeader,
            "no leader",
        ),
        (
            "replicas.A.isr",
            |s| s.replica_mut(0).isr = ReplicaSet(0b101),
            "{A,C}",
        ),
        (
            "replicas.A.follower_leo.C",
            |s| s.replica_mut(0).follower_leo[2] = Some(3),
            "3",
        ),
        (
            "replicas.A.stale_fetch",
            |s| s.replica_mut(0).stale_fetch = ReplicaSet(0b10),
            "{B}",
        ),
        (
            "replicas.A.pending_acks",
            |s| s.replica_mut(0).pending_acks ^= 0b10,
            "",
        ),
        ("controller.leader", |s| s.controller.leader = Some(2), "C"),
        ("controller.epoch", |s| s.controller.epoch = Some(4), "4"),
        (
            "controller.isr",
            |s| s.controller.isr = ReplicaSet(0b1),
            "{A}",
        ),
        (
            "controller.elr",
            |s| s.controller.elr = ReplicaSet(0b110),
            "{B,C}",
        ),
        (
            "controller.last_known_elr",
            |s| s.controller.lke = ReplicaSet(0b100),
            "{C}",
        ),
        (
            "controller.recovering",
            |s| s.controller.recovering ^= true,
            "",
        ),
        (
            "controller.fenced",
            |s| s.controller.fenced = ReplicaSet(0b10),
            "{B}",
        ),
        (
            "requests.5",
            |s| {
                s.requests[5] = Some(Request {
                    leader: Some(1),
                    isr: ReplicaSet(0b11),
                    later_isrs: highwater_model::state::IsrChain::EMPTY,
                })
            },
            "leader B, isr {A,B}",
        ),
        ("produced", |s| s.produced = 2, "2"),
        ("records.a.offset", |s| s.records[0].offset = 3, "3"),
        ("records.a.acked", |s| s.records[0].acked = Some(3), "3"),
        ("records.b.visible", |s| s.records[1].visible = Some(2), "2"),
        ("clean_crashes", |s| s.clean_crashes = 3, "3"),
        ("unclean_crashes", |s| s.unclean_crashes = 3, "3"),
        ("leader_moves", |s| s.leader_moves = 3, "3"),
    ];
    for (path, edit, value) in cases {
        let mut t = s;
        edit(&mut t);
        assert_ne!(s, t, "{path}: the edit changes the state");
        let d = diff(&s, &t);
        assert_eq!(d.len(), 1, "{path}: {d:?}");
        assert_eq!(d[0].path, path);
        assert_ne!(d[0].left, d[0].right, "{path}");
        if !value.is_empty() {
            assert_eq!(d[0].right, value, "{path}");
        }
    }
}

#[test]
fn a_longer_log_names_the_log_and_its_leo() {
    let s = PartitionModel::new(cfg()).init_state();
    let mut t = s;
    t.replica_mut(1).log.append(Entry { id: 0, epoch: 2 });
    assert_eq!(
        diff(&s, &t),
        vec![
            FieldDiff {
                path: "replicas.B.log".into(),
                left: "[]".into(),
                right: "[a2]".into(),
            },
            FieldDiff {
                path: "replicas.B.leo".into(),
                left: "0".into(),
                right: "1".into(),
            },
        ]
    );
    // The same length, another entry: the log alone.
    let mut u = t;
    u.replica_mut(1).log.truncate(0);
    u.replica_mut(1).log.append(Entry { id: 0, epoch: 1 });
    let d = diff(&t, &u);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].left.as_str(), d[0].right.as_str()), ("[a2]", "[a1]"));
}
