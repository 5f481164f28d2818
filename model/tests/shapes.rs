//! The model's rules are written once and run in two shapes (`shape.rs`):
//! the checker's compact one, bounded, and trace validation's unbounded
//! one. Random walks of every preset run in both side by side: wherever the
//! compact shape can follow, both enable the same actions (the unbounded one
//! more only where a checker bound stops the compact one), reach the same
//! state, and break the same properties. Past the bounds the unbounded walk
//! goes on alone, hundreds of records and tens of epochs in, and today's
//! rules still break nothing.

use highwater_model::actions::{
    apply, enabled, forget_what_no_longer_matters_as, Action, Forgetting,
};
use highwater_model::config::Config;
use highwater_model::presets::{Expect, PRESETS};
use highwater_model::properties::broken;
use highwater_model::render::state_table;
use highwater_model::rules::Rule;
use highwater_model::state::{Compact, Num, Shape, State, Unbounded};
use highwater_model::PartitionModel;
use proptest::prelude::*;

/// Whether a checker bound (records, epochs, crashes, leader moves) is why
/// the compact shape does not enable `a`, which the unbounded one does in
/// the same state.
fn cut_by_a_bound(cfg: &Config, c: &State, a: &Action<Unbounded>) -> bool {
    let next_epoch = c.controller.next_epoch();
    let epochs_spent = next_epoch > cfg.max_epoch;
    let unclean_spent = c.unclean_crashes >= cfg.unclean_crashes;
    match *a {
        Action::Produce { .. } => c.produced >= cfg.records,
        Action::Crash { clean: true, .. } => c.clean_crashes >= cfg.clean_crashes,
        Action::Crash { clean: false, .. } => unclean_spent,
        Action::Flush { .. } | Action::CheckpointHw { .. } => unclean_spent,
        Action::ControllerElectLeader { .. } => {
            epochs_spent || (c.controller.leader.is_some() && c.leader_moves >= cfg.leader_moves)
        }
        Action::ControllerShrinkIsr { .. } | Action::Restart { .. } => epochs_spent,
        _ => false,
    }
}

/// The unbounded state, brought to the compact shape and reduced as the
/// checker reduces its states (what no crash budget left can use).
fn as_compact(cfg: &Config, u: &State<Unbounded>, how: Forgetting) -> Option<State> {
    let mut c = u.reshape::<Compact>()?;
    forget_what_no_longer_matters_as(cfg, &mut c, how);
    Some(c)
}

/// Walks `cfg_c`'s rules in the compact shape and `cfg_u`'s in the
/// unbounded one from the initial state, taking at each step the action
/// `choices` picks among the compact shape's; then goes on in the unbounded
/// shape alone for `beyond` steps. Returns the first disagreement, and the
/// unbounded states visited past the bounds.
fn walk(
    cfg_c: &Config,
    cfg_u: &Config,
    choices: &[u32],
    beyond: usize,
) -> Result<Vec<State<Unbounded>>, String> {
    walk_as(cfg_c, cfg_u, choices, beyond, Forgetting::Exact)
}

/// [`walk`], the compact shape forgetting as `how` says (a planted flaw
/// forgets more after each step).
fn walk_as(
    cfg_c: &Config,
    cfg_u: &Config,
    choices: &[u32],
    beyond: usize,
    how: Forgetting,
) -> Result<Vec<State<Unbounded>>, String> {
    let mut c = PartitionModel::new(*cfg_c).init_state();
    let mut u: State<Unbounded> = c.reshape().expect("the initial state fits");
    let (mut ca, mut ua) = (Vec::new(), Vec::new());
    for (step, &choice) in choices.iter().enumerate() {
        ca.clear();
        ua.clear();
        enabled(cfg_c, &c, &mut ca);
        enabled(cfg_u, &u, &mut ua);
        let as_u: Vec<Action<Unbounded>> = ca.iter().map(|a| a.reshape().unwrap()).collect();
        if let Some(missing) = as_u.iter().find(|a| !ua.contains(a)) {
            return Err(format!(
                "step {step}: {missing} is enabled compact, not unbounded, in\n{}",
                state_table(&c)
            ));
        }
        if let Some(extra) = ua
            .iter()
            .find(|a| !as_u.contains(a) && !cut_by_a_bound(cfg_c, &c, a))
        {
            return Err(format!(
                "step {step}: {extra} is enabled unbounded, not compact, and no bound cuts it, in\n{}",
                state_table(&c)
            ));
        }
        if ca.is_empty() {
            break;
        }
        let a = ca[choice as usize % ca.len()];
        let (Some(cn), Some(un)) = (apply(cfg_c, &c, a), apply(cfg_u, &u, a.reshape().unwrap()))
        else {
            return Err(format!("step {step}: {a} changes nothing in one shape"));
        };
        let mut cn = cn;
        if how != Forgetting::Exact {
            forget_what_no_longer_matters_as(cfg_c, &mut cn, how);
        }
        if as_compact(cfg_c, &un, how).as_ref() != Some(&cn) {
            return Err(format!(
                "step {step}: after {a} the shapes differ:\ncompact\n{}unbounded {:?}",
                state_table(&cn),
                un.reshape::<Compact>().map(|s| state_table(&s))
            ));
        }
        if broken(&cn) != broken(&un) {
            return Err(format!(
                "step {step}: after {a} compact breaks {:?}, unbounded {:?}",
                broken(&cn),
                broken(&un)
            ));
        }
        (c, u) = (cn, un);
    }
    let mut past = Vec::new();
    for step in 0..beyond {
        ua.clear();
        enabled(cfg_u, &u, &mut ua);
        // The unclean crash budget is the guarantee's fault assumption, not
        // a size bound: acks=all holds records in page caches, and two
        // replicas that lose theirs can lose a committed record.
        let faults_left = u.unclean_crashes < u32::from(cfg_u.unclean_crashes);
        ua.retain(|a| faults_left || !matches!(a, Action::Crash { clean: false, .. }));
        if ua.is_empty() {
            break;
        }
        // Deterministic, spread over the choices: the walk is the test's.
        let pick = (step * 7919 + choices.len() * 31) % ua.len();
        u = apply(cfg_u, &u, ua[pick]).expect("enabled actions change the state");
        past.push(u.clone());
    }
    Ok(past)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn both_shapes_move_alike_within_the_bounds(
        preset in 0..PRESETS.len(),
        choices in prop::collection::vec(any::<u32>(), 1..160),
    ) {
        let cfg = PRESETS[preset].config;
        if let Err(why) = walk(&cfg, &cfg, &choices, 0) {
            prop_assert!(false, "{}: {}", PRESETS[preset].name, why);
        }
    }
}

/// Past every size bound, today's rules still keep every always-property:
/// the unbounded walks reach tens of records and hundreds of epochs, with
/// any number of clean crashes and the preset's unclean ones.
#[test]
fn past_the_bounds_todays_rules_break_nothing() {
    let mut most = (0u32, 0u32);
    for p in PRESETS
        .iter()
        .filter(|p| matches!(p.expect, Expect::Holds { .. }))
    {
        for seed in 0..8u32 {
            let choices: Vec<u32> = (0..40u32)
                .map(|i| i.wrapping_mul(2654435761) ^ seed)
                .collect();
            let past = walk(&p.config, &p.config, &choices, 3000)
                .unwrap_or_else(|why| panic!("{}: {why}", p.name));
            for s in &past {
                let b = broken(s);
                assert!(b.is_empty(), "{}: breaks {b:?} past the bounds", p.name);
            }
            if let Some(last) = past.last() {
                let epoch = last.controller.epoch.map_or(0, |e| e.idx() as u32);
                most = (most.0.max(last.produced), most.1.max(epoch));
            }
        }
    }
    assert!(
        most.0 > 50 && most.1 > 100,
        "the walks stayed small: {} records, epoch {}",
        most.0,
        most.1
    );
}

/// The same walks past the bounds do find the losses of the historical
/// rule sets: the check above is not vacuous.
#[test]
fn past_the_bounds_historical_rules_lose_records() {
    for name in ["acks-1", "unclean-election", "hw-truncation"] {
        let p = PRESETS.iter().find(|p| p.name == name).unwrap();
        let lost = (0..64u32).any(|seed| {
            let choices: Vec<u32> = (0..40u32)
                .map(|i| i.wrapping_mul(2654435761) ^ seed)
                .collect();
            let past = walk(&p.config, &p.config, &choices, 3000)
                .unwrap_or_else(|why| panic!("{}: {why}", p.name));
            past.iter().any(|s| !broken(s).is_empty())
        });
        assert!(lost, "{name}: no walk past the bounds broke a property");
    }
}

/// The side-by-side walk finds a rule that differs between the shapes: the
/// unbounded side runs with one of the rules knocked out.
#[test]
fn a_rule_that_differs_between_shapes_is_found() {
    let cfg = highwater_model::presets::SAFE;
    let knocked = Config {
        knock_out: Some(Rule::LeaderLearnsFetchOffset),
        ..cfg
    };
    let found = (0..200u32).any(|seed| {
        let choices: Vec<u32> = (0..80u32)
            .map(|i| i.wrapping_mul(2654435761) ^ seed.wrapping_mul(40503))
            .collect();
        walk(&cfg, &knocked, &choices, 0).is_err()
    });
    assert!(found, "no walk told the shapes apart");
}

/// Numbers past the compact shape's bytes stay unbounded's own.
#[test]
fn the_unbounded_shape_counts_past_a_byte() {
    let big = <Unbounded as Shape>::Offset::at(1000);
    assert_eq!(big.idx(), 1000);
    assert!(<u8 as Num>::try_at(1000).is_none());
}

/// The unbounded shape hashes a log by its length and last entries only
/// (hashing every entry made trace validation quadratic), while equality
/// still compares all: two states that differ in an early entry hash alike
/// and stay two states.
#[test]
fn unbounded_states_that_differ_early_hash_alike_and_stay_apart() {
    use highwater_model::state::{Entry, LogStore};
    use std::collections::HashSet;
    use std::hash::{BuildHasher, RandomState};
    let log = |first: u32| {
        let entries = (0..10)
            .map(|i| Entry::<Unbounded> {
                id: if i == 0 { first } else { i },
                epoch: 0,
            })
            .collect();
        LogStore::from_entries(entries).expect("any length fits")
    };
    let mut a = State::<Unbounded> {
        n: 3,
        ..State::default()
    };
    let mut b = a.clone();
    a.replica_mut(0).log = log(0);
    b.replica_mut(0).log = log(100);
    let hasher = RandomState::new();
    assert_eq!(
        hasher.hash_one(&a),
        hasher.hash_one(&b),
        "only the tail is hashed"
    );
    assert!(a != b, "equality reads every entry");
    let set: HashSet<State<Unbounded>> = [a, b].into_iter().collect();
    assert_eq!(set.len(), 2);
}

/// The checker's shape forgets a request only where no replica can take it
/// and no leader reads it (`actions::dead_request`); the walks notice a
/// forgetting that drops one a live replica may still take: in the
/// unbounded shape, which forgets no request, that replica can take it.
#[test]
fn forgetting_a_request_a_replica_may_still_take_is_found() {
    let cfg = highwater_model::presets::SAFE;
    let found = (0..256u32).find_map(|seed| {
        let choices: Vec<u32> = (0..60u32)
            .map(|i| i.wrapping_mul(2654435761) ^ seed.wrapping_mul(40503))
            .collect();
        walk_as(&cfg, &cfg, &choices, 0, Forgetting::TakeableRequests).err()
    });
    let why = found.expect("no walk noticed requests a replica may still take being forgotten");
    assert!(
        why.contains("not compact"),
        "found, but not as expected: {why}"
    );
}
