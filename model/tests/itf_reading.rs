//! Reading ITF traces: any value the state's types hold is taken (a broken
//! state's too), what they cannot hold is refused naming the field, a
//! derived field edited alone is refused rather than ignored, traces of the
//! previous schema still read, and a lasso's loop is held against the model
//! when it is replayed.

mod bin;

use bin::{highwater, text};
use highwater_checker::shortest::shortest_counterexamples;
use highwater_model::itf;
use highwater_model::presets::{Expect, PRESETS};
use highwater_model::PartitionModel;
use serde_json::{json, Value};
use stateright::Model;
use std::path::Path;

/// The ITF document of a preset's shortest counterexample to the property
/// it breaks.
fn preset_trace(name: &str) -> Value {
    let p = PRESETS.iter().find(|p| p.name == name).expect("a preset");
    let Expect::Breaks(property) = p.expect else {
        panic!("{name} breaks a property")
    };
    let model = PartitionModel::new(p.config);
    let target: Vec<_> = model
        .properties()
        .into_iter()
        .filter(|q| q.name == property)
        .collect();
    let (_, trace) = shortest_counterexamples(&model, &target).pop().unwrap();
    itf::to_itf(&p.config, property, "always", &trace.unwrap(), None)
}

/// The replica entry `name` of a state's `replicas` map.
fn replica<'a>(state: &'a mut Value, name: &str) -> &'a mut Value {
    state["replicas"]["#map"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|kv| kv[0] == name)
        .map(|kv| &mut kv[1])
        .unwrap()
}

/// The reader's error for `doc` after `edit`, which must name `field`.
fn refused(doc: &Value, edit: impl Fn(&mut Value), field: &str) {
    let mut changed = doc.clone();
    edit(&mut changed);
    match itf::from_itf(&changed.to_string()) {
        Ok(_) => panic!("an edit of {field} is taken"),
        Err(e) => assert!(e.starts_with(&format!("{field}: ")), "{field}: {e}"),
    }
}

#[test]
fn a_derived_field_edited_alone_is_refused_by_name() {
    let doc = preset_trace("acks-1");
    assert!(itf::from_itf(&doc.to_string()).is_ok());
    let last = doc["states"].as_array().unwrap().len() - 1;
    let at = format!("state {last}");
    // The LEO is the log's length.
    refused(
        &doc,
        |d| {
            let a = replica(&mut d["states"][last], "A");
            a["leo"] = json!(a["leo"].as_u64().unwrap() + 1);
        },
        &format!("{at}.replicas.A.leo"),
    );
    // The action's kind is the action's.
    refused(
        &doc,
        |d| d["states"][last]["mbt::actionTaken"] = json!("Restart"),
        &format!("{at}.mbt::actionTaken"),
    );
    refused(
        &doc,
        |d| d["states"][0]["mbt::actionTaken"] = json!("Produce"),
        "state 0.mbt::actionTaken",
    );
    // A state's index is its position.
    refused(
        &doc,
        |d| d["states"][last]["#meta"]["index"] = json!(0),
        &format!("{at}.#meta.index"),
    );
    // One history per record produced.
    refused(
        &doc,
        |d| {
            d["states"][0]["records"] = json!([{"record": "a", "offset": 0, "acked": {"#set": []}, "visible": {"#set": []}}])
        },
        "state 0.records",
    );
}

/// An edit of one state of a trace.
type Edit = fn(&mut Value);

#[test]
fn every_value_refused_is_named_by_its_field() {
    let doc = preset_trace("acks-1");
    let k = doc["states"].as_array().unwrap().len() - 1;
    // Each edit of state k, and the field (below the state) it makes wrong.
    let cases: [(Edit, &str); 12] = [
        (|s| replica(s, "A")["hw"] = json!("x"), "replicas.A.hw"),
        (
            |s| replica(s, "B")["recovery_point"] = json!(300),
            "replicas.B.recovery_point",
        ),
        (
            |s| replica(s, "B")["epoch"] = json!({"#set": [1, 2]}),
            "replicas.B.epoch",
        ),
        (
            |s| replica(s, "C")["log"] = json!([{"record": "z", "epoch": 0}]),
            "replicas.C.log[0].record",
        ),
        (
            |s| replica(s, "A")["follower_leo"] = json!({"#map": [["B", "x"]]}),
            "replicas.A.follower_leo.B",
        ),
        (
            |s| replica(s, "A")["leader"] = json!({"tag": "Boss", "value": {}}),
            "replicas.A.leader",
        ),
        (
            |s| replica(s, "A")["leader"] = json!({"tag": "Unknown", "value": 3}),
            "replicas.A.leader.value",
        ),
        (
            |s| s["controller"]["isr"] = json!({"#set": ["Q"]}),
            "controller.isr",
        ),
        (
            |s| {
                s["requests"] =
                    json!({"#map": [[0, {"leader": {"#set": [7]}, "isr": {"#set": []}}]]})
            },
            "requests.0.leader",
        ),
        (|s| s["records"][0]["acked"] = json!(5), "records[0].acked"),
        (|s| s["action"]["kind"] = json!("Teleport"), "action.kind"),
        (|s| s["produced"] = json!(-1), "produced"),
    ];
    for (edit, field) in cases {
        refused(
            &doc,
            |d| edit(&mut d["states"][k]),
            &format!("state {k}.{field}"),
        );
    }
}

#[test]
fn a_broken_state_is_read_as_written() {
    let mut doc = preset_trace("acks-1");
    let k = doc["states"].as_array().unwrap().len() - 1;
    let b = replica(&mut doc["states"][k], "B");
    b["hw"] = json!(7);
    b["recovery_point"] = json!(255);
    let t = itf::from_itf(&doc.to_string()).expect("the types hold it");
    let s = t.states[k];
    assert_eq!((s.replica(1).hw, s.replica(1).recovery_point), (7, 255));
    assert!(s.replica(1).leo() < 7);
}

#[test]
fn a_trace_of_schema_1_still_reads() {
    // Written by highwater before options became sets: Quint's Some/None
    // variants and unit as the empty tuple.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hw-truncation-strong-isr.schema-1.itf.json");
    let text = std::fs::read_to_string(&fixture).unwrap();
    assert!(text.contains("\"highwater-itf/1\"") && text.contains("\"tag\":\"None\""));
    let old = itf::from_itf(&text).expect("schema 1 reads");
    assert_eq!(old.property.as_deref(), Some("strong ISR"));
    // The same states and actions as the counterexample found today.
    let p = PRESETS.iter().find(|p| p.name == "hw-truncation").unwrap();
    assert_eq!(old.config, p.config);
    let model = PartitionModel::new(p.config);
    let target: Vec<_> = model
        .properties()
        .into_iter()
        .filter(|q| q.name == "strong ISR")
        .collect();
    let (_, trace) = shortest_counterexamples(&model, &target).pop().unwrap();
    let trace = trace.unwrap();
    assert_eq!(
        old.states,
        trace.iter().map(|(s, _)| *s).collect::<Vec<_>>()
    );
    assert_eq!(
        old.actions,
        trace.iter().map(|(_, a)| *a).collect::<Vec<_>>()
    );

    let mut doc: Value = serde_json::from_str(&text).unwrap();
    doc["#meta"]["highwater"]["schema"] = json!("highwater-itf/9");
    let e = itf::from_itf(&doc.to_string()).unwrap_err();
    assert!(e.starts_with("#meta.highwater.schema: "), "{e}");
}

/// Progress traces of a stall whose fault-free future takes leader epochs
/// beyond `--max-epoch 0`, as the progress check lets recovery do.
fn stall_traces(dir: &Path) -> Vec<std::path::PathBuf> {
    let o = highwater(&[
        "check",
        "--mutation",
        "expand-on-leader-hw",
        "--records",
        "1",
        "--replicas",
        "2",
        "--min-isr",
        "1",
        "--max-epoch",
        "0",
        "--expect",
        "acknowledged records reach every replica",
        "-q",
        "-t",
        "2",
        "--trace-out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

#[test]
fn a_lasso_replays_and_a_loop_the_model_does_not_close_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = stall_traces(dir.path())
        .into_iter()
        .find(|f| f.to_str().unwrap().contains("acknowledged-records-reach"))
        .expect("the progress property's trace");
    let t = itf::from_itf(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let last = t.states.len() - 1;
    assert_eq!(
        t.loop_index,
        Some(last),
        "its trap is one state: it stutters"
    );
    assert!(
        t.states
            .iter()
            .any(|s| s.controller.epoch > Some(t.config.max_epoch)),
        "the trace goes beyond the epoch bound"
    );
    let o = highwater(&["replay", "--trace", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("a lasso: the last state repeats forever"));

    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let changed = dir.path().join("changed.itf.json");
    let replay_changed = |edit: &dyn Fn(&mut Value)| {
        let mut d = doc.clone();
        edit(&mut d);
        std::fs::write(&changed, d.to_string()).unwrap();
        highwater(&["replay", "--trace", changed.to_str().unwrap()])
    };
    // No step leads from the trap back to the initial state.
    let o = replay_changed(&|d| d["loop"] = json!(0));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains(&format!(
            "loop: no fault-free step leads from the last state (state {last}) back to state 0"
        )),
        "{}",
        text(&o)
    );
    // Cut before the trap, the last state does not stutter: a fault-free
    // step leaves it.
    let o = replay_changed(&|d| {
        d["states"].as_array_mut().unwrap().truncate(3);
        d["loop"] = json!(2);
    });
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("loop: the trace ends stuttering in state 2, but"),
        "{}",
        text(&o)
    );
    // Not a state at all.
    let o = replay_changed(&|d| d["loop"] = json!(99));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("loop: 99 is not the index of a state"));
}
