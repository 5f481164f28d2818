//! Every renderer draws every state the model's types allow, broken ones
//! above all: the step tables (whole and as a diff), the explorer's picture,
//! the JSON report's steps, and ITF (written, then read back equal). A
//! checker exists to find states that break its properties, so the code
//! that shows them must not assume the properties hold.
//!
//! The states are generated field by field within the types: replica
//! counts of a configuration (2 to 5) and replica names within it, logs of
//! at most `MAX_RECORDS` entries of records `a` to `d`, and any `u8`
//! wherever an offset, epoch or counter goes (HW and recovery point past
//! the LEO, epochs past every bound, a producer count past the records
//! kept). Two things are left at their default, as in every state the model
//! builds, because no format writes them: the replicas past the replica
//! count, and the record histories past the count produced.

use highwater_model::actions::Action;
use highwater_model::controller::Election;
use highwater_model::picture;
use highwater_model::presets::SAFE;
use highwater_model::properties;
use highwater_model::render::{self, Style};
use highwater_model::run::Step;
use highwater_model::state::{
    Entry, IsrChain, LeaderView, Log, RecordHistory, Replica, ReplicaSet, Request, State,
    EPOCH_SLOTS, MAX_RECORDS, MAX_REPLICAS,
};
use highwater_model::{itf, Config};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

/// Mostly small values, where the interesting comparisons are, and any
/// `u8` the rest of the time.
fn small_or_any() -> impl Strategy<Value = u8> {
    prop_oneof![3 => 0u8..=8, 1 => any::<u8>()]
}

fn replica_id(n: u8) -> impl Strategy<Value = u8> {
    0..n
}

fn replica_set(n: u8) -> impl Strategy<Value = ReplicaSet> {
    (0u16..(1 << n)).prop_map(|bits| ReplicaSet(bits as u8))
}

fn log() -> impl Strategy<Value = Log> {
    vec((0..MAX_RECORDS as u8, small_or_any()), 0..=MAX_RECORDS).prop_map(|entries| {
        let mut log = Log::default();
        for (id, epoch) in entries {
            log.append(Entry { id, epoch });
        }
        log
    })
}

fn leader_view(n: u8) -> impl Strategy<Value = LeaderView> {
    prop_oneof![
        Just(LeaderView::Unknown),
        Just(LeaderView::NoLeader),
        replica_id(n).prop_map(LeaderView::Replica),
    ]
}

fn replica(n: u8) -> impl Strategy<Value = Replica> {
    let offsets = (small_or_any(), small_or_any(), small_or_any());
    let views = (
        option::of(small_or_any()),
        leader_view(n),
        replica_set(n),
        replica_set(n),
    );
    let leader_state = (vec(option::of(small_or_any()), n as usize), 0u8..16);
    (
        any::<bool>(),
        any::<bool>(),
        log(),
        offsets,
        views,
        leader_state,
    )
        .prop_map(
            |(alive, unclean_down, log, (hw, rp, hwc), (epoch, leader, isr, stale), (fl, acks))| {
                let mut follower_leo = [None; MAX_REPLICAS];
                follower_leo[..fl.len()].copy_from_slice(&fl);
                Replica {
                    alive,
                    log,
                    hw,
                    recovery_point: rp,
                    hw_checkpoint: hwc,
                    epoch,
                    leader,
                    isr,
                    follower_leo,
                    stale_fetch: stale,
                    pending_acks: acks,
                    unclean_down,
                }
            },
        )
}

fn history() -> impl Strategy<Value = RecordHistory> {
    (
        small_or_any(),
        option::of(small_or_any()),
        option::of(small_or_any()),
    )
        .prop_map(|(offset, acked, visible)| RecordHistory {
            offset,
            acked,
            visible,
        })
}

/// A state of `n` replicas.
fn state_of(n: u8) -> impl Strategy<Value = State> {
    let controller = (
        option::of(replica_id(n)),
        option::of(small_or_any()),
        (
            replica_set(n),
            replica_set(n),
            replica_set(n),
            replica_set(n),
        ),
        any::<bool>(),
    );
    let chain = (replica_set(n), replica_set(n)).prop_map(|(x, y)| {
        IsrChain::of(&[x, y])
            .or(IsrChain::of(&[x]))
            .unwrap_or_default()
    });
    let request =
        (option::of(replica_id(n)), replica_set(n), chain).prop_map(|(leader, isr, later_isrs)| {
            Request {
                leader,
                isr,
                later_isrs,
            }
        });
    (
        vec(replica(n), n as usize),
        controller,
        vec(option::of(request), EPOCH_SLOTS),
        small_or_any(),
        vec(history(), MAX_RECORDS),
        (small_or_any(), small_or_any(), small_or_any()),
    )
        .prop_map(
            move |(replicas, c, requests, produced, histories, counters)| {
                let mut s = State {
                    n,
                    ..State::default()
                };
                s.replicas[..replicas.len()].copy_from_slice(&replicas);
                let (leader, epoch, (isr, elr, lke, fenced), recovering) = c;
                s.controller.leader = leader;
                s.controller.epoch = epoch;
                s.controller.isr = isr;
                s.controller.elr = elr;
                s.controller.lke = lke;
                s.controller.fenced = fenced;
                s.controller.recovering = recovering;
                s.requests.copy_from_slice(&requests);
                s.produced = produced;
                let kept = (produced as usize).min(MAX_RECORDS);
                s.records[..kept].copy_from_slice(&histories[..kept]);
                (s.clean_crashes, s.unclean_crashes, s.leader_moves) = counters;
                s
            },
        )
}

fn election() -> impl Strategy<Value = Election> {
    prop_oneof![
        Just(Election::Clean),
        Just(Election::Elr),
        Just(Election::Unclean),
        Just(Election::LastKnownLeader),
    ]
}

/// Any action naming replicas of `n`.
fn action(n: u8) -> impl Strategy<Value = Action> {
    let r = move || replica_id(n);
    prop_oneof![
        (r(), election())
            .prop_map(|(replica, election)| Action::ControllerElectLeader { replica, election }),
        r().prop_map(|replica| Action::ControllerShrinkIsr { replica }),
        r().prop_map(|replica| Action::ControllerUnfence { replica }),
        (r(), small_or_any()).prop_map(|(replica, epoch)| Action::BecomeLeader { replica, epoch }),
        (r(), small_or_any())
            .prop_map(|(replica, epoch)| Action::BecomeFollower { replica, epoch }),
        (r(), 0..MAX_RECORDS as u8).prop_map(|(leader, record)| Action::Produce { leader, record }),
        (r(), r()).prop_map(|(follower, leader)| Action::FollowerFetch { follower, leader }),
        (r(), r()).prop_map(|(follower, leader)| Action::FollowerFetchOne { follower, leader }),
        (r(), small_or_any()).prop_map(|(leader, hw)| Action::LeaderAdvanceHw { leader, hw }),
        (r(), r()).prop_map(|(leader, follower)| Action::LeaderShrinkIsr { leader, follower }),
        (r(), r()).prop_map(|(leader, follower)| Action::LeaderExpandIsr { leader, follower }),
        r().prop_map(|leader| Action::LeaderLearnsIsr { leader }),
        r().prop_map(|replica| Action::Flush { replica }),
        r().prop_map(|replica| Action::CheckpointHw { replica }),
        (r(), any::<bool>()).prop_map(|(replica, clean)| Action::Crash { replica, clean }),
        r().prop_map(|replica| Action::Restart { replica }),
    ]
}

/// Two states of one replica count and the action between them (None: a
/// step that names no action).
#[derive(Clone)]
struct Case {
    prev: State,
    action: Option<Action>,
    state: State,
}

/// Shown field by field, so that a failing case prints even when the code
/// under test is what fails (`State`'s own Debug is the step table).
impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fields = |s: &State| {
            format!(
                "n: {}, replicas: {:?}, controller: {:?}, requests: {:?}, produced: {}, records: {:?}, crashes: {}/{}, leader_moves: {}",
                s.n,
                &s.replicas[..s.n as usize],
                s.controller,
                s.requests,
                s.produced,
                s.records,
                s.clean_crashes,
                s.unclean_crashes,
                s.leader_moves
            )
        };
        f.debug_struct("Case")
            .field("prev", &fields(&self.prev))
            .field("action", &self.action.map(|a| format!("{a:?}")))
            .field("state", &fields(&self.state))
            .finish()
    }
}

fn step() -> impl Strategy<Value = Case> {
    (2..=MAX_REPLICAS as u8)
        .prop_flat_map(|n| (state_of(n), option::of(action(n)), state_of(n)))
        .prop_map(|(prev, action, state)| Case {
            prev,
            action,
            state,
        })
}

/// A configuration with the states' replica count.
fn config_of(n: u8) -> Config {
    Config {
        replicas: n,
        ..SAFE
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_step_tables_draw_any_state(c in step()) {
        let Case { prev, action: a, state: s } = c;
        let table = render::state_table(&s);
        prop_assert!(table.contains("controller:"));
        // An HW past the log's end is drawn after it.
        let past = s.ids().any(|r| s.replica(r).hw > s.replica(r).leo());
        prop_assert_eq!(table.contains("..|"), past);
        let _ = format!("{s:?}");
        let path = [(prev, None), (s, a)];
        for diff in [false, true] {
            let style = Style { diff };
            let steps = render::steps_table(&path, 0, style);
            prop_assert!(steps.starts_with("step 0: initial state"));
            let _ = render::continuation_table(&path, 5, style);
            let _ = render::state_block(&s, Some(&prev), diff);
        }
    }

    #[test]
    fn the_picture_draws_any_state(c in step()) {
        let Case { action: a, state: s, .. } = c;
        let names = properties::safety_names();
        let svg = picture::svg(&s, a.as_ref(), &names);
        prop_assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        for r in s.ids() {
            let x = s.replica(r);
            let label = format!("HW {} past LEO {}", x.hw, x.leo());
            prop_assert_eq!(svg.contains(&label), x.hw > x.leo());
        }
        for name in &names {
            let _ = properties::explain(name, &s);
        }
    }

    #[test]
    fn the_json_report_writes_any_state(c in step()) {
        let Case { prev, action: a, state: s } = c;
        let step = Step::new(s, a, None);
        let json = serde_json::to_value(&step).expect("a step is JSON");
        prop_assert_eq!(json["state"]["replicas"].as_array().map(Vec::len), Some(s.n as usize));
        let _ = serde_json::to_string(&render::state_json(&prev)).expect("a state is JSON");
    }

    #[test]
    fn itf_writes_any_state_and_reads_it_back_equal(c in step(), lasso in option::of(0..2usize)) {
        let Case { prev, action: a, state: s } = c;
        let cfg = config_of(s.n);
        let trace = vec![(prev, None), (s, a)];
        let doc = itf::to_itf(&cfg, "HW <= LEO", "always", &trace, lasso);
        let back = itf::from_itf(&doc.to_string());
        prop_assert!(back.is_ok(), "refused: {}", back.unwrap_err());
        let back = back.unwrap();
        prop_assert_eq!(back.states, vec![prev, s]);
        prop_assert_eq!(back.actions, vec![None, a]);
        prop_assert_eq!(back.loop_index, lasso);
    }
}
