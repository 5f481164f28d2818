use highwater_model::actions::{apply, enabled};
use highwater_model::{PartitionModel, Preset};
use stateright::Representative;
use std::collections::{BTreeSet, HashSet, VecDeque};

#[test]
fn successors_are_equivariant() {
    let p = highwater_model::presets::PRESETS
        .iter()
        .find(|p| p.name == "tla-kip320")
        .unwrap();
    let cfg = p.config;
    eprintln!("{cfg:?}");
    let init = PartitionModel::new(cfg).init_state();
    let mut seen = HashSet::new();
    let mut q = VecDeque::from([init]);
    let perms: [[u8; 5]; 6] = [
        [0, 1, 2, 3, 4],
        [0, 2, 1, 3, 4],
        [1, 0, 2, 3, 4],
        [1, 2, 0, 3, 4],
        [2, 0, 1, 3, 4],
        [2, 1, 0, 3, 4],
    ];
    let mut n = 0;
    let mut reps = HashSet::new();
    while let Some(s) = q.pop_front() {
        if !seen.insert(s) {
            continue;
        }
        n += 1;
        reps.insert(s.representative());
        if n > 3_000_000 {
            break;
        }
        let succ = |x: &highwater_model::State| -> BTreeSet<highwater_model::State> {
            let mut acts = Vec::new();
            enabled(&cfg, x, &mut acts);
            acts.into_iter()
                .filter_map(|a| apply(&cfg, x, a))
                .map(|y| y.representative())
                .collect()
        };
        let base = succ(&s);
        for p in &perms[..0] {
            let t = s.renamed(p);
            assert_eq!(
                t.representative(),
                s.representative(),
                "rep not canonical: {s:?}"
            );
            let other = succ(&t);
            if other != base {
                let extra: Vec<_> = other.symmetric_difference(&base).take(2).collect();
                panic!("not equivariant at {s:?}\nperm {p:?}\ndiff {extra:?}");
            }
        }
        let mut acts = Vec::new();
        enabled(&cfg, &s, &mut acts);
        for a in acts {
            if let Some(y) = apply(&cfg, &s, a) {
                q.push_back(y);
            }
        }
    }
    let _ = Preset::default_preset;
    eprintln!("{n} states checked, {} classes", reps.len());
}
