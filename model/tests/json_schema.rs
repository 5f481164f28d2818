//! The `--json` report of every preset (and of runs that show the progress
//! check, a stuck state and an offline partition) matches
//! `model/schema/check-report.schema.json`, and the schema notices a report
//! that does not.

use highwater_model::presets::PRESETS;
use std::process::Command;

fn schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/check-report.schema.json"
    ))
    .expect("the schema is readable");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema")
}

fn report(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["check", "--json", "--quiet", "--threads", "2"])
        .args(args)
        .output()
        .expect("run highwater");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn assert_valid(v: &jsonschema::Validator, r: &serde_json::Value, what: &str) {
    let errors: Vec<String> = v
        .iter_errors(r)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:#?}");
}

#[test]
fn every_report_matches_the_schema() {
    let v = schema();
    let mut runs: Vec<Vec<&str>> = Vec::new();
    for p in PRESETS {
        // The presets that hold are checked to completion elsewhere; a
        // bounded run has the same shape.
        let mut args = vec!["--preset", p.name];
        if matches!(p.expect, highwater_model::Expect::Holds { .. }) {
            args.extend(["--max-states", "20000"]);
        }
        runs.push(args);
    }
    runs.push(vec!["--records", "1", "--expect", "holds"]);
    runs.push(vec!["--records", "1", "--mutation", "expand-on-leader-hw"]);
    runs.push(vec!["--records", "1", "--unclean-crashes", "2"]);
    runs.push(vec!["--preset", "acks-1", "--dfs"]);
    // Stopped by its memory budget: the `over_budget` object.
    runs.push(vec![
        "--records",
        "1",
        "--max-epoch",
        "1",
        "--memory-budget",
        "1MiB",
    ]);
    runs.push(vec![
        "--preset",
        "acks-1",
        "--simulate",
        "--seconds",
        "1",
        "--seed",
        "3",
    ]);
    for args in &runs {
        let r = report(args);
        assert_valid(&v, &r, &format!("{args:?}"));
    }
}

#[test]
fn the_schema_notices_a_report_that_drifts() {
    let v = schema();
    let r = report(&["--preset", "acks-1"]);
    assert_valid(&v, &r, "acks-1");
    let mut wrong_acks = r.clone();
    wrong_acks["config"]["acks"] = serde_json::json!("leader");
    assert!(
        !v.is_valid(&wrong_acks),
        "acks spelled otherwise than on the CLI"
    );
    let mut extra = r.clone();
    extra["surprise"] = serde_json::json!(1);
    assert!(!v.is_valid(&extra), "a field the schema does not document");
    let mut old = r;
    old["schema"] = serde_json::json!("highwater-check-report/1");
    assert!(!v.is_valid(&old), "another version");
}

/// A report under each mutation matches the schema: its list of mutations
/// is the CLI's (`hw-over-isr-only` was once missing from it).
#[test]
fn every_mutation_is_in_the_schema() {
    use clap::ValueEnum;
    let v = schema();
    let r = report(&["--preset", "acks-1"]);
    for m in highwater_model::config::Mutation::value_variants() {
        let mut with = r.clone();
        with["config"]["mutation"] = serde_json::to_value(m).expect("a mutation is JSON");
        assert_valid(&v, &with, &format!("mutation {m}"));
    }
}

/// A report with each rule knocked out matches the schema, and one with
/// none has no `knock_out` at all.
#[test]
fn every_knock_out_is_in_the_schema() {
    let v = schema();
    let r = report(&["--preset", "acks-1"]);
    assert!(r["config"].get("knock_out").is_none());
    for &rule in highwater_model::rules::Rule::all() {
        if rule.mutation().is_some() {
            continue;
        }
        let mut with = r.clone();
        with["config"]["knock_out"] = serde_json::to_value(rule).expect("a rule is JSON");
        assert_valid(&v, &with, &format!("knock-out {rule}"));
    }
}
