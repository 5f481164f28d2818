//! Concurrent runs for the driver's tests: a validated run of 3 replicas
//! in a directory of its own, its trace, and the loop that shows a broken
//! rule caught.

use std::time::Duration;

use highwater::cluster::concurrent::{
    read_trace_file, ConcurrentConfig, Fault, FaultSchedule, Regression, RunReport,
};
use highwater::cluster::TraceEntry;
use highwater_conformance::trace_validation::{validated_run, ValidatedRun};

/// A run's validation, with the directory that holds its trace.
pub struct Run {
    pub run: ValidatedRun,
    /// The configuration as set up.
    pub config: ConcurrentConfig,
    dir: tempfile::TempDir,
}

/// Runs 3 replicas (`ConcurrentConfig::new(3)`, as `setup` changes it)
/// with `regress`, through `validated_run`.
pub fn run3(
    regress: Option<Regression>,
    setup: impl FnOnce(&mut ConcurrentConfig),
) -> highwater::replication::Result<Run> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut config = ConcurrentConfig::new(3);
    setup(&mut config);
    config.regress = regress;
    let run = validated_run(config.clone(), dir.path())?;
    Ok(Run { run, config, dir })
}

impl Run {
    /// Every entry of the run's trace.
    pub fn trace(&self) -> Vec<TraceEntry> {
        trace_of(self.dir.path())
    }

    /// The report, once the trace fitted the model (panics otherwise);
    /// `what` names the run, with its regression.
    pub fn fitted(self, what: &str) -> RunReport {
        let report = &self.run.report;
        if !report.unmet_goals.is_empty() {
            let trace = self.trace();
            let last: Vec<String> = trace
                .iter()
                .skip(trace.len().saturating_sub(30))
                .map(|e| format!("#{} {:?}: {:?}", e.seq, e.actor, e.event))
                .collect();
            panic!(
                "{what}: the run stopped at its hang guard: {:?}\n{}\nthe trace's last events:\n{}",
                report.unmet_goals,
                end_state(report),
                last.join("\n")
            );
        }
        self.run
            .fitted(&format!("{what}, {:?}", self.config.regress))
    }
}

/// Every entry of the trace `validated_run` wrote in `dir`.
pub fn trace_of(dir: &std::path::Path) -> Vec<TraceEntry> {
    read_trace_file(&dir.join("trace.jsonl"))
        .expect("the trace file")
        .map(|e| e.expect("a trace entry"))
        .collect()
}

/// A broken rule is caught: the first of up to `tries` attempts whose
/// check fails (a run on a loaded machine may miss the moment a bug
/// needs), printed; panics if every check passed.
pub fn caught_in(tries: usize, what: &str, mut attempt: impl FnMut() -> Result<(), String>) {
    let caught = (0..tries)
        .find_map(|_| attempt().err())
        .unwrap_or_else(|| panic!("{what} went unnoticed in {tries} run(s)"));
    eprintln!(
        "caught: {}",
        caught.lines().take(12).collect::<Vec<_>>().join("\n")
    );
}

/// `faults` in turn, the first at `first_after` ms, then one every `every`
/// ms, each broker down `down_for` ms.
pub fn schedule(first_after: u64, every: u64, down_for: u64, faults: Vec<Fault>) -> FaultSchedule {
    FaultSchedule {
        first_after: Duration::from_millis(first_after),
        every: Duration::from_millis(every),
        down_for: Duration::from_millis(down_for),
        faults,
    }
}

/// How a run ended, for a failure's message: the controller's leader, ISR
/// and live brokers, and each replica's role, epoch, LEO, HW and ISR copy.
pub fn end_state(report: &RunReport) -> String {
    let c = &report.controller;
    let mut out = format!(
        "controller: leader {:?} epoch {:?} isr {:?} elr {:?} alive {:?}",
        c.leader, c.leader_epoch, c.isr, c.elr, c.alive
    );
    for (r, s) in report.final_states.iter().enumerate() {
        out.push_str(&match s {
            Some(s) => format!(
                "; replica {r}: {:?} epoch {:?} leo {} hw {} isr {:?}",
                s.role, s.leader_epoch, s.log_end_offset, s.high_watermark, s.isr
            ),
            None => format!("; replica {r}: down"),
        });
    }
    out
}
