#![allow(dead_code)]
//! Helpers shared by the model's unit tests (`tests/actions.rs`, `tests/elr.rs`).

use highwater_model::actions::{apply, enabled};
use highwater_model::controller::Election;
use highwater_model::render::state_table;
use highwater_model::state::{
    Entry, Epoch, LeaderView, Log, Offset, RecordId, ReplicaId, ReplicaSet, Request,
};
use highwater_model::{Acks, Action, Config, HwCheckpoint, PartitionModel, State, Truncation};

pub const A: ReplicaId = 0;
pub const B: ReplicaId = 1;
pub const C: ReplicaId = 2;

/// Three replicas, min.insync.replicas=2, acks=all, KIP-320 fencing, ELR on,
/// room for three records, epochs 0..=3 and one crash of each kind.
pub fn base() -> Config {
    Config {
        replicas: 3,
        records: 3,
        max_epoch: 3,
        min_isr: 2,
        acks: Acks::All,
        truncation: Truncation::EpochIterative,
        fencing: true,
        elr: true,
        last_known_leader: true,
        unclean_election: false,
        hw_checkpoint: HwCheckpoint::EveryChange,
        clean_crashes: 1,
        unclean_crashes: 1,
        // Elections fill a leaderless partition only, unless a test adds moves.
        leader_moves: 0,
        mutation: None,
        knock_out: None,
    }
}

/// `base()` under each of `modes`, without KIP-320's fencing.
pub fn unfenced(modes: &[Truncation]) -> impl Iterator<Item = Config> + '_ {
    modes.iter().map(|&truncation| Config {
        truncation,
        fencing: false,
        ..base()
    })
}

/// The truncation lookups, each a rule from before KIP-320's fencing.
pub const LOOKUPS: &[Truncation] = &[
    Truncation::Hw,
    Truncation::Epoch,
    Truncation::EpochIterative,
];

pub fn init(cfg: &Config) -> State {
    PartitionModel::new(*cfg).init_state()
}

pub fn enabled_actions(cfg: &Config, s: &State) -> Vec<Action> {
    let mut out = Vec::new();
    enabled(cfg, s, &mut out);
    out
}

pub fn is_enabled(cfg: &Config, s: &State, a: Action) -> bool {
    enabled_actions(cfg, s).contains(&a)
}

/// The enabled actions of `s`, comma-separated, for failure messages.
pub fn list(cfg: &Config, s: &State) -> String {
    enabled_actions(cfg, s)
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[track_caller]
pub fn assert_enabled(cfg: &Config, s: &State, a: Action) {
    assert!(
        is_enabled(cfg, s, a),
        "{a} should be enabled; enabled: [{}]\n{}",
        list(cfg, s),
        state_table(s)
    );
}

#[track_caller]
pub fn assert_disabled(cfg: &Config, s: &State, a: Action) {
    assert!(
        !is_enabled(cfg, s, a),
        "{a} should not be enabled\n{}",
        state_table(s)
    );
}

/// Applies an enabled action.
#[track_caller]
pub fn step(cfg: &Config, s: &State, a: Action) -> State {
    assert_enabled(cfg, s, a);
    apply(cfg, s, a).unwrap_or(*s)
}

/// Applies actions in turn, each asserted enabled.
#[track_caller]
pub fn run(cfg: &Config, s: &State, actions: &[Action]) -> State {
    actions.iter().fold(*s, |s, &a| step(cfg, &s, a))
}

pub fn elect(replica: ReplicaId) -> Action {
    Action::ControllerElectLeader {
        replica,
        election: Election::Clean,
    }
}
pub fn elect_elr(replica: ReplicaId) -> Action {
    Action::ControllerElectLeader {
        replica,
        election: Election::Elr,
    }
}
pub fn elect_unclean(replica: ReplicaId) -> Action {
    Action::ControllerElectLeader {
        replica,
        election: Election::Unclean,
    }
}
pub fn ctrl_shrink(replica: ReplicaId) -> Action {
    Action::ControllerShrinkIsr { replica }
}
pub fn unfence(replica: ReplicaId) -> Action {
    Action::ControllerUnfence { replica }
}
pub fn lead(replica: ReplicaId, epoch: Epoch) -> Action {
    Action::BecomeLeader { replica, epoch }
}
pub fn follow(replica: ReplicaId, epoch: Epoch) -> Action {
    Action::BecomeFollower { replica, epoch }
}
pub fn produce(leader: ReplicaId, record: RecordId) -> Action {
    Action::Produce { leader, record }
}
pub fn fetch(follower: ReplicaId, leader: ReplicaId) -> Action {
    Action::FollowerFetch { follower, leader }
}
pub fn advance(leader: ReplicaId, hw: Offset) -> Action {
    Action::LeaderAdvanceHw { leader, hw }
}
pub fn shrink(leader: ReplicaId, follower: ReplicaId) -> Action {
    Action::LeaderShrinkIsr { leader, follower }
}
pub fn expand(leader: ReplicaId, follower: ReplicaId) -> Action {
    Action::LeaderExpandIsr { leader, follower }
}
pub fn flush(replica: ReplicaId) -> Action {
    Action::Flush { replica }
}
pub fn crash(replica: ReplicaId, clean: bool) -> Action {
    Action::Crash { replica, clean }
}
pub fn restart(replica: ReplicaId) -> Action {
    Action::Restart { replica }
}

pub fn set(members: &[ReplicaId]) -> ReplicaSet {
    members.iter().fold(ReplicaSet::EMPTY, |s, &r| s.with(r))
}

/// A log of (record id, epoch) entries.
pub fn log(entries: &[(RecordId, Epoch)]) -> Log {
    let mut l = Log::default();
    for &(id, epoch) in entries {
        l.append(Entry { id, epoch });
    }
    l
}

/// A leads epoch 0 with ISR {A,B,C}; B and C follow it. No records yet.
pub fn led(cfg: &Config) -> State {
    run(
        cfg,
        &init(cfg),
        &[elect(A), lead(A, 0), follow(B, 0), follow(C, 0)],
    )
}

/// The HW advances enabled in `s`.
pub fn hw_advances(cfg: &Config, s: &State) -> Vec<Action> {
    enabled_actions(cfg, s)
        .into_iter()
        .filter(|a| matches!(a, Action::LeaderAdvanceHw { .. }))
        .collect()
}

/// The elections enabled in `s`.
pub fn elections(cfg: &Config, s: &State) -> Vec<(ReplicaId, Election)> {
    enabled_actions(cfg, s)
        .into_iter()
        .filter_map(|a| match a {
            Action::ControllerElectLeader { replica, election } => Some((replica, election)),
            _ => None,
        })
        .collect()
}

/// Leaderless at epoch 1: ISR {A}, ELR {B}, C in neither; every replica alive.
pub fn isr_a_elr_b(cfg: &Config) -> State {
    let mut s = init(cfg);
    s.controller.epoch = Some(1);
    s.controller.isr = set(&[A]);
    s.controller.elr = set(&[B]);
    s
}

/// Breadth-first over the states of `cfg` reachable by the actions `keep`
/// allows (up to `limit` states), calling `visit` on each state with the
/// actions it enables.
pub fn explore(
    cfg: &Config,
    limit: usize,
    keep: impl Fn(&Action) -> bool,
    mut visit: impl FnMut(&State, &[Action]),
) {
    use std::collections::{HashSet, VecDeque};
    let init = init(cfg);
    let mut seen: HashSet<State> = HashSet::from([init]);
    let mut queue = VecDeque::from([init]);
    while let Some(s) = queue.pop_front() {
        let actions = enabled_actions(cfg, &s);
        visit(&s, &actions);
        for &a in actions.iter().filter(|a| keep(a)) {
            if let Some(next) = apply(cfg, &s, a) {
                if seen.len() < limit && seen.insert(next) {
                    queue.push_back(next);
                }
            }
        }
    }
}

/// A hand-built state: controller leader `leader` at `epoch` with ISR `isr`
/// and the matching LeaderAndIsr; the leader has taken it.
pub fn leading(cfg: &Config, leader: ReplicaId, epoch: Epoch, isr: ReplicaSet) -> State {
    let mut s = init(cfg);
    s.controller.leader = Some(leader);
    s.controller.epoch = Some(epoch);
    s.controller.isr = isr;
    s.requests[epoch as usize] = Some(Request {
        leader: Some(leader),
        isr,
        later_isrs: highwater_model::state::IsrChain::EMPTY,
    });
    let l = s.replica_mut(leader);
    l.epoch = Some(epoch);
    l.leader = LeaderView::Replica(leader);
    l.isr = isr;
    s
}
