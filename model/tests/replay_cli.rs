//! `highwater replay`: a step the model does not take is shown field by
//! field (or, for an action not enabled, beside the enabled ones of its
//! kind); `--under` re-runs a trace's actions under another rule and agrees
//! with `rerun::rerun`, which the preset tests use to show each fix holds.

mod bin;

use bin::{highwater, text};
use highwater_checker::shortest::shortest_counterexamples;
use highwater_model::itf;
use highwater_model::presets::{Expect, Preset, PRESETS};
use highwater_model::rerun;
use highwater_model::Trace;
use highwater_model::{Action, PartitionModel};
use serde_json::{json, Value};
use stateright::Model;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A historical preset's shortest counterexample: its property and path.
fn counterexample(p: &Preset) -> (&'static str, Trace) {
    let Expect::Breaks(name) = p.expect else {
        panic!("{} is not historical", p.name);
    };
    let model = PartitionModel::new(p.config);
    let target: Vec<_> = model
        .properties()
        .into_iter()
        .filter(|q| q.name == name)
        .collect();
    let (_, trace) = shortest_counterexamples(&model, &target).pop().unwrap();
    (name, trace.expect("a counterexample"))
}

/// The counterexample as an ITF document, with its property and path.
fn doc(p: &Preset) -> (Value, &'static str, Trace) {
    let (name, trace) = counterexample(p);
    (
        itf::to_itf(&p.config, name, "always", &trace, None),
        name,
        trace,
    )
}

fn write(dir: &Path, name: &str, doc: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

fn replay(file: &Path, more: &[&str]) -> Output {
    highwater(&[&["replay", "--trace", file.to_str().unwrap()], more].concat())
}

/// The row of `path` in a printed difference: the step's value, then the
/// trace's.
fn row<'a>(out: &'a str, path: &str) -> Option<(&'a str, &'a str)> {
    out.lines()
        .find_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [p, model, written] if p == path => Some((model, written)),
            _ => None,
        })
}

#[test]
fn a_hand_edited_hw_is_named_with_the_steps_value_and_the_traces() {
    let dir = tempfile::tempdir().unwrap();
    let (mut doc, _, trace) = doc(Preset::find("hw-truncation").unwrap());
    // The first state where some replica has a record: move its HW.
    let (k, r, hw) = trace
        .iter()
        .enumerate()
        .find_map(|(k, (s, _))| {
            s.ids()
                .find(|&r| s.replica(r).leo() > 0)
                .map(|r| (k, r, s.replica(r).hw))
        })
        .expect("a record is written");
    let edited = if hw == 0 { 1 } else { hw - 1 };
    let name = ["A", "B", "C"][r as usize];
    let entry = doc["states"][k]["replicas"]["#map"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e[0] == json!(name))
        .unwrap();
    entry[1]["hw"] = json!(edited);
    let file = write(dir.path(), "edited.itf.json", &doc);
    let o = replay(&file, &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("NOT a behaviour of the model"), "{out}");
    assert!(
        out.contains(&format!(
            "step {k}: {} does not lead to state {k} as written",
            trace[k].1.unwrap()
        )),
        "{out}"
    );
    let path = format!("replicas.{name}.hw");
    assert_eq!(
        row(&out, &path),
        Some((hw.to_string().as_str(), edited.to_string().as_str())),
        "{out}"
    );
    // Nothing else differs.
    assert!(
        !out.contains("replicas.A.log") && !out.contains("controller."),
        "{out}"
    );

    // Without the actions written, the nearest enabled action is shown with
    // the same difference.
    for s in doc["states"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("action");
    }
    let file = write(dir.path(), "no-actions.itf.json", &doc);
    let o = replay(&file, &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("no enabled action leads to"), "{out}");
    assert!(
        out.contains(&format!("the nearest, {}", trace[k].1.unwrap())),
        "{out}"
    );
    assert_eq!(
        row(&out, &path),
        Some((hw.to_string().as_str(), edited.to_string().as_str())),
        "{out}"
    );
}

#[test]
fn an_action_not_enabled_is_shown_beside_the_enabled_ones_of_its_kind() {
    let dir = tempfile::tempdir().unwrap();
    let (mut doc, _, trace) = doc(Preset::find("hw-truncation").unwrap());
    // The first BecomeFollower, given an epoch it cannot take.
    let k = trace
        .iter()
        .position(|(_, a)| matches!(a, Some(Action::BecomeFollower { .. })))
        .expect("a replica follows");
    let Some(Action::BecomeFollower { replica, epoch }) = trace[k].1 else {
        unreachable!()
    };
    doc["states"][k]["action"]["epoch"] = json!(7);
    let file = write(dir.path(), "edited.itf.json", &doc);
    let o = replay(&file, &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let name = (b'A' + replica) as char;
    assert!(
        out.contains(&format!(
            "step {k}: BecomeFollower({name}, epoch 7) is not enabled in state {}",
            k - 1
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "BecomeFollower({name}, epoch {epoch})   <- leads to state {k} as written"
        )),
        "{out}"
    );
}

/// `replay --under` on each historical counterexample, under the preset of
/// the rule that fixed it: the property holds at every state reached, as
/// `rerun::rerun` (which `assert_the_fix_holds` in presets.rs uses) finds;
/// under the preset's own rules it still breaks at the last step.
#[test]
fn under_each_fix_the_replay_agrees_with_the_shared_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for p in PRESETS {
        let Some(fix) = p.fixed_by else { continue };
        let (doc, property, trace) = doc(p);
        let file = write(dir.path(), &format!("{}.itf.json", p.name), &doc);
        let actions: Vec<Action> = trace.iter().filter_map(|(_, a)| *a).collect();

        let fixed = rerun::with_rules(&p.config, &Preset::find(fix.preset).unwrap().config);
        let run = rerun::rerun(&fixed, &actions, &[property]).unwrap();
        assert!(!run.breaks(), "{}: {}", p.name, run.verdict());
        let o = replay(&file, &["--under", fix.preset, "--expect", "holds"]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(0), "{}: {out}", p.name);
        assert!(
            out.contains(&format!("under these rules: {}", run.verdict())),
            "{}: {out}",
            p.name
        );
        assert!(out.contains("verdict: as expected"), "{out}");
        let changed: Vec<_> = rerun::rule_changes(&p.config, &fixed)
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(changed.len(), 1, "{}: {changed:?}", p.name);
        assert!(
            out.contains(&format!("rules changed: {}", changed[0])),
            "{out}"
        );
        let o = replay(
            &file,
            &["--under", fix.preset, "--expect", "counterexample"],
        );
        assert_eq!(o.status.code(), Some(1), "{}: {}", p.name, text(&o));
        assert!(text(&o).contains("verdict: NOT as expected"));

        // Under its own rules the counterexample is found again.
        let own = rerun::rerun(&p.config, &actions, &[property]).unwrap();
        assert_eq!(
            own.outcome,
            rerun::Outcome::Breaks {
                step: actions.len(),
                property,
            }
        );
        let o = replay(&file, &["--under", p.name, "--expect", "counterexample"]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(0), "{}: {out}", p.name);
        assert!(
            out.contains(&format!("\"{property}\" still breaks, at the last step")),
            "{out}"
        );
        assert!(out.contains("rules changed: none"), "{out}");
        let o = replay(&file, &["--under", p.name, "--expect", "holds"]);
        assert_eq!(o.status.code(), Some(1), "{}: {}", p.name, text(&o));
        checked += 1;
    }
    assert_eq!(checked, 7, "every historical preset names its fix");
}

#[test]
fn a_rule_flag_changes_one_rule_and_the_bounds_stay_the_traces() {
    let dir = tempfile::tempdir().unwrap();
    let (mut doc, _, _) = doc(Preset::find("hw-truncation").unwrap());
    // One more leader move allowed than any preset: a bound of the trace's
    // own, which a re-run keeps.
    doc["#meta"]["highwater"]["config"]["leader_moves"] = json!(3);
    let file = write(dir.path(), "moves.itf.json", &doc);
    let by_flag = text(&replay(&file, &["--truncation", "epoch"]));
    let by_preset = text(&replay(&file, &["--under", "epoch-lookup"]));
    let verdict = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("under these rules:"))
            .map(String::from)
    };
    assert!(verdict(&by_flag).is_some(), "{by_flag}");
    assert_eq!(verdict(&by_flag), verdict(&by_preset));
    assert!(
        by_flag.contains("rules changed: truncation hw -> epoch"),
        "{by_flag}"
    );
    assert!(by_flag.contains("re-running its 14 actions"), "{by_flag}");
    assert!(
        by_preset.contains(
            "bounds: the trace's, kept (preset epoch-lookup's differ: leader-moves 3 -> 2)"
        ),
        "{by_preset}"
    );
    assert!(by_preset.contains("leader-moves=3"), "{by_preset}");
    // A switch on top of a preset.
    let out = text(&replay(
        &file,
        &["--under", "epoch-lookup", "--fencing", "off"],
    ));
    assert!(
        out.contains("rules changed: truncation hw -> epoch, fencing on -> off"),
        "{out}"
    );
}

#[test]
fn a_rerun_is_asked_for_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let (mut doc, _, _) = doc(Preset::find("acks-1").unwrap());
    let file = write(dir.path(), "acks-1.itf.json", &doc);
    let d = dir.path().join("hw");
    for (args, says) in [
        (vec!["--expect", "holds"], "--expect judges a re-run"),
        (
            vec!["--under", "safe", "--dir", d.to_str().unwrap()],
            "cannot be used with",
        ),
        (vec!["--under", "nothing"], "invalid value"),
        (
            vec!["--min-isr", "4"],
            "min-isr 4 is impossible with 3 replicas",
        ),
        (
            vec!["--under", "safe", "--expect", "maybe"],
            "invalid value",
        ),
    ] {
        let o = replay(&file, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"));
    }
    // One trace decides no progress property: a re-run shows only whether
    // each step runs, and takes no --expect.
    doc["#meta"]["highwater"]["kind"] = json!("progress");
    let file = write(dir.path(), "progress.itf.json", &doc);
    let o = replay(&file, &["--under", "safe", "--expect", "holds"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("progress property"), "{}", text(&o));
    let o = replay(&file, &["--under", "safe"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("the re-run shows only whether each step runs"),
        "{}",
        text(&o)
    );
}

/// `replay --dir` checks its directory before replaying anything: a
/// directory holding files is refused at once (exit 2), naming --force.
#[test]
fn replay_dir_is_checked_before_the_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let p = Preset::find("acks-1").unwrap();
    let (doc, _, _) = doc(p);
    let file = write(tmp.path(), "acks-1.itf.json", &doc);
    let dir = tmp.path().join("brokers");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    let o = replay(&file, &["--dir", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--force"), "{}", text(&o));
    assert!(
        !text(&o).contains("replaying"),
        "nothing replayed: {}",
        text(&o)
    );
}
