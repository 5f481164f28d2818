//! Counterexamples as ITF trace files: written by `check --trace-out`, read
//! back equal, replayed by `highwater replay --trace`, and refused when
//! they are not behaviours of the model.

mod bin;

use bin::{highwater, text};
use highwater_checker::shortest::shortest_counterexamples;
use highwater_model::itf;
use highwater_model::presets::{Expect, PRESETS};
use highwater_model::{Config, PartitionModel, Truncation};
use stateright::Model;
use std::path::Path;
use std::process::Output;

#[test]
fn every_historical_counterexample_reads_back_as_written() {
    for p in PRESETS {
        let Expect::Breaks(name) = p.expect else {
            continue;
        };
        let model = PartitionModel::new(p.config);
        let target: Vec<_> = model
            .properties()
            .into_iter()
            .filter(|q| q.name == name)
            .collect();
        let (_, trace) = shortest_counterexamples(&model, &target).pop().unwrap();
        let trace = trace.unwrap();
        let doc = itf::to_itf(&p.config, name, "always", &trace, None);
        let back = itf::from_itf(&doc.to_string()).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        assert_eq!(back.config, p.config);
        assert_eq!(back.property.as_deref(), Some(name));
        let states: Vec<_> = trace.iter().map(|(s, _)| *s).collect();
        let actions: Vec<_> = trace.iter().map(|(_, a)| *a).collect();
        assert_eq!(back.states, states, "{}", p.name);
        assert_eq!(back.actions, actions, "{}", p.name);
    }
}

/// Writes the traces of `args` into a fresh directory.
fn traces(args: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = highwater(&[args, &["-q", "-t", "2", "--trace-out", out]].concat());
    assert!(o.status.success(), "{}", text(&o));
    dir
}

fn replay(path: &Path) -> Output {
    highwater(&["replay", "--trace", path.to_str().unwrap()])
}

#[test]
fn a_saved_trace_replays_and_a_changed_setting_is_noticed() {
    let dir = traces(&["check", "--preset", "hw-truncation"]);
    let file = dir.path().join("committed-records-survive.itf.json");
    let o = replay(&file);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("reproduced: \"committed records survive\" breaks at the last step"));

    // Change a setting: KIP-101's truncation, the rule that fixed it.
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    doc["#meta"]["highwater"]["config"]["truncation"] = serde_json::json!("epoch");
    let changed = dir.path().join("changed.itf.json");
    std::fs::write(&changed, doc.to_string()).unwrap();
    let o = replay(&changed);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("NOT a behaviour of the model"),
        "{}",
        text(&o)
    );

    // A state edited by hand is not what the action leads to.
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    doc["states"][3]["produced"] = serde_json::json!(0);
    doc["states"][3]["records"] = serde_json::json!([]);
    doc["states"][3]["controller"]["isr"] = serde_json::json!({"#set": ["A"]});
    std::fs::write(&changed, doc.to_string()).unwrap();
    let o = replay(&changed);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn a_trace_from_custom_settings_replays_under_them() {
    let dir = traces(&[
        "check",
        "--truncation",
        "hw",
        "--records",
        "1",
        "--expect",
        "counterexample",
    ]);
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!files.is_empty());
    for f in files {
        let t = itf::from_itf(&std::fs::read_to_string(&f).unwrap()).unwrap();
        assert_eq!(t.config.truncation, Truncation::Hw);
        assert_eq!(t.config.records, 1);
        let o = replay(&f);
        assert_eq!(o.status.code(), Some(0), "{}: {}", f.display(), text(&o));
    }
}

#[test]
fn trace_files_are_overwritten_only_with_force_and_bad_files_are_clear_errors() {
    let dir = traces(&["check", "--preset", "acks-1"]);
    let out = dir.path().to_str().unwrap();
    let o = highwater(&["check", "--preset", "acks-1", "-q", "--trace-out", out]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--force"), "{}", text(&o));

    let bad = dir.path().join("bad.itf.json");
    for (content, says) in [
        ("not json", "not JSON"),
        ("{}", "missing \"#meta\""),
        (
            r##"{"#meta": {"highwater": {"config": {"replicas": 9}}}, "states": []}"##,
            "config",
        ),
    ] {
        std::fs::write(&bad, content).unwrap();
        let o = replay(&bad);
        assert_eq!(o.status.code(), Some(2), "{content}: {}", text(&o));
        assert!(text(&o).contains(says), "{content}: {}", text(&o));
        assert!(!text(&o).contains("panicked"));
    }
    let o = highwater(&["replay", "--trace", "/nonexistent/trace.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("cannot read"));
}

#[test]
fn the_written_config_is_the_one_checked() {
    let cfg: Config = Config {
        records: 1,
        ..PRESETS[0].config
    };
    let json = serde_json::to_value(cfg).unwrap();
    let back: Config = serde_json::from_value(json).unwrap();
    assert_eq!(back, cfg);
}
