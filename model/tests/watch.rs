//! The property watch (`watch.rs`) reads only what changed between two
//! states; its verdicts must be the properties' own. Random walks of every
//! preset in the unbounded shape, past the checker's bounds (historical rule
//! sets included, so properties break and heal), give the watch every
//! state, or every few, and compare it with `properties::broken`.

use highwater_model::actions::{apply, enabled, Action};
use highwater_model::presets::PRESETS;
use highwater_model::properties::broken;
use highwater_model::state::{LogStore, Num, State, Unbounded};
use highwater_model::watch::{Watch, WatchFault};
use highwater_model::PartitionModel;

/// Walks `steps` steps of preset `p`'s rules from its initial state in the
/// unbounded shape, the choices drawn from `seed`; gives `watch` every
/// `stride`-th state and returns the first where it disagrees with the
/// properties, and how many states broke a property.
fn disagreement(
    p: &highwater_model::Preset,
    seed: u64,
    steps: usize,
    stride: usize,
    mut watch: Watch<Unbounded>,
) -> (Option<String>, usize) {
    let cfg = p.config;
    let mut s: State<Unbounded> = PartitionModel::new(cfg)
        .init_state()
        .reshape()
        .expect("the initial state fits");
    let mut actions: Vec<Action<Unbounded>> = Vec::new();
    let mut rng = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut breaking = 0;
    for step in 0..steps {
        actions.clear();
        enabled(&cfg, &s, &mut actions);
        // Two unclean crashes at most: past that, historical or not, every
        // rule set loses records at once and nothing is left to watch.
        actions
            .retain(|a| s.unclean_crashes < 2 || !matches!(a, Action::Crash { clean: false, .. }));
        if actions.is_empty() {
            break;
        }
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let a = actions[(rng >> 33) as usize % actions.len()];
        s = apply(&cfg, &s, a).expect("enabled actions change the state");
        if step % stride != 0 {
            continue;
        }
        let want = broken(&s);
        breaking += usize::from(!want.is_empty());
        let got = watch.broken(&s);
        if got != want {
            return (
                Some(format!(
                    "{} seed {seed} step {step} after {a}: the watch says {got:?}, the properties {want:?}",
                    p.name
                )),
                breaking,
            );
        }
    }
    (None, breaking)
}

#[test]
fn the_watch_agrees_with_the_properties_on_random_walks() {
    let mut breaking = 0;
    for p in PRESETS.iter() {
        for seed in 0..6u64 {
            for stride in [1, 3] {
                let (found, b) = disagreement(p, seed, 1500, stride, Watch::default());
                if let Some(why) = found {
                    panic!("{why}");
                }
                breaking += b;
            }
        }
    }
    assert!(
        breaking > 100,
        "the walks broke a property in {breaking} states only: the watch was barely tested where it matters"
    );
}

/// Whether some walk tells a watch with `fault` apart from the properties.
fn caught(fault: WatchFault) -> Option<String> {
    PRESETS.iter().find_map(|p| {
        (0..6u64).find_map(|seed| {
            [1, 3]
                .into_iter()
                .find_map(|stride| disagreement(p, seed, 1500, stride, Watch::with_fault(fault)).0)
        })
    })
}

/// The test above catches a watch that misses a new leader or ISR. (In
/// the model's steps nothing else breaks a property: see `watch.rs`.)
#[test]
fn a_watch_blind_to_a_new_leader_is_caught() {
    assert!(
        caught(WatchFault::FrameUnseen).is_some(),
        "no walk told apart a watch blind to a new leader"
    );
}

/// The walks catch a watch that does not read again the records that
/// broke a property before (it would see the property heal while they are
/// still missing).
#[test]
fn a_watch_blind_to_records_broken_before_is_caught() {
    assert!(
        caught(WatchFault::BrokenRecordsUnseen).is_some(),
        "no walk told apart a watch blind to the records broken before"
    );
}

/// A state of a walk under today's rules where a leader holds a committed
/// record below its HW, with that leader.
fn a_leader_with_a_committed_record() -> (State<Unbounded>, u8) {
    let p = PRESETS.iter().find(|p| p.name == "safe").unwrap();
    let cfg = p.config;
    let mut s: State<Unbounded> = PartitionModel::new(cfg).init_state().reshape().unwrap();
    let mut actions: Vec<Action<Unbounded>> = Vec::new();
    let mut rng = 7u64;
    for _ in 0..5000 {
        let found = s.presumed_leaders().find(|&l| {
            let x = s.replica(l);
            x.hw.idx() >= 1 && s.produced_records().iter().any(|h| h.visible.is_some())
        });
        if let Some(l) = found {
            return (s, l);
        }
        actions.clear();
        enabled(&cfg, &s, &mut actions);
        // No crash: past the preset's unclean crashes nothing is elected.
        actions.retain(|a| !matches!(a, Action::Crash { .. }));
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let a = actions[(rng >> 33) as usize % actions.len()];
        s = apply(&cfg, &s, a).unwrap();
    }
    panic!("no walk committed a record");
}

/// States the model never reaches, as a faulty implementation can make:
/// a leader's log cut under it (caught only by reading where logs
/// changed), and a record newly marked committed where its leader does not
/// hold it (caught only by reading the records that changed).
#[test]
fn a_watch_blind_to_changed_logs_or_records_is_caught() {
    let (before, l) = a_leader_with_a_committed_record();
    let mut cut = before.clone();
    cut.replica_mut(l).log.truncate(0);
    let mut marked = before.clone();
    let leo = marked.replica(l).leo();
    let unheld = marked
        .produced_records()
        .iter()
        .position(|h| h.visible.is_none());
    let id = unheld.unwrap_or(0);
    let epoch = marked.replica(l).epoch;
    let h = marked.record_mut(Num::at(id));
    h.offset = leo;
    h.visible = epoch;
    for (after, fault) in [
        (&cut, WatchFault::LogChangesUnseen),
        (&marked, WatchFault::RecordChangesUnseen),
    ] {
        let want = broken(after);
        assert!(!want.is_empty(), "{fault:?}: the state breaks nothing");
        let mut watch = Watch::default();
        watch.broken(&before);
        assert_eq!(
            watch.broken(after),
            want,
            "the watch misses what {fault:?} misses"
        );
        let mut blind = Watch::with_fault(fault);
        blind.broken(&before);
        assert_ne!(
            blind.broken(after),
            want,
            "a watch with {fault:?} is not told apart"
        );
    }
}
