//! A check that finds a state breaking "HW <= LEO" reports it: the verdict,
//! the counterexample's step table, its trace file, and the exit status of
//! a run not as expected. The step table once drew the HW by inserting a
//! mark at its offset in the log, and a state with the HW past the LEO
//! ended the run in a panic (exit 101) after the verdict table said
//! COUNTEREXAMPLE. The `hw-past-leo` mutation makes such states.

use highwater_model::itf;
use highwater_model::properties::HW_WITHIN_LOG;
use std::process::{Command, Output};

fn highwater(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(args)
        .output()
        .expect("run highwater")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Small bounds: the HW passes the LEO four steps in.
const PAST_LEO: [&str; 16] = [
    "check",
    "--mutation",
    "hw-past-leo",
    "--replicas",
    "2",
    "--min-isr",
    "1",
    "--records",
    "1",
    "--max-epoch",
    "1",
    "--unclean-crashes",
    "0",
    "--leader-moves",
    "0",
    "-q",
];

#[test]
fn a_state_with_the_hw_past_the_leo_is_reported_traced_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = highwater(&[&PAST_LEO[..], &["--expect", "holds", "--trace-out", out]].concat());
    let report = text(&o);
    assert_eq!(o.status.code(), Some(12), "a safety violation: {report}");
    assert!(!report.contains("panicked"), "{report}");
    assert!(report.contains("verdict: NOT as expected"), "{report}");
    assert!(
        report.contains("HW <= LEO\" (4 steps):") && report.contains("step 4: LeaderAdvanceHw"),
        "the counterexample's table: {report}"
    );
    // The leader's log: empty, its HW mark past the end.
    assert!(
        report.contains("  A    up     leader     0      ..|*"),
        "{report}"
    );
    assert!(
        report.contains("Broken: HW <= LEO — A's HW 1 is above its LEO 0."),
        "{report}"
    );

    // Its trace, read back with the HW past the LEO, replays and breaks
    // "HW <= LEO" at its last step.
    let traces: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let file = traces
        .iter()
        .find(|f| {
            let t = itf::from_itf(&std::fs::read_to_string(f).unwrap()).unwrap();
            t.property.as_deref() == Some(HW_WITHIN_LOG)
        })
        .unwrap_or_else(|| panic!("a trace of \"HW <= LEO\" among {traces:?}"));
    let t = itf::from_itf(&std::fs::read_to_string(file).unwrap()).unwrap();
    let last = t.states.last().unwrap();
    assert_eq!((last.replica(0).hw, last.replica(0).leo()), (1, 0));
    let o = highwater(&["replay", "--trace", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("reproduced: \"HW <= LEO\" breaks at the last step"),
        "{}",
        text(&o)
    );
}
