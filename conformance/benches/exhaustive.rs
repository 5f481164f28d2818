//! Exhaustive conformance benchmark: `cargo bench -p highwater-conformance
//! --bench exhaustive` checks every transition of the `safe` preset (about
//! 6.9 M states, 49 M transitions) on the in-memory implementation, and
//! runs the model checker over the same configuration in the same process:
//! transitions checked per second beside the model checker's own.
//!
//! Settings: `HIGHWATER_EXHAUSTIVE_PRESET` (default `safe`),
//! `HIGHWATER_EXHAUSTIVE_RECORDS` (the preset's by default),
//! `HIGHWATER_EXHAUSTIVE_THREADS` (2), `HIGHWATER_EXHAUSTIVE_SYMMETRY`
//! (`on`; `off` visits every state, not one per symmetry class, and so does
//! the model checker beside it),
//! `HIGHWATER_EXHAUSTIVE_REFUSALS` (`on`; `off` skips offering the
//! forbidden actions).

use highwater_conformance::exhaustive::{check, model_checker_run, Options};
use highwater_model::presets::Preset;
use highwater_model::Config;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn on(name: &str) -> bool {
    env(name).is_none_or(|v| v != "off")
}

fn main() {
    // `cargo test --benches` runs benches with `--bench`; a plain test run
    // passes nothing: run only when asked to benchmark.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let preset = env("HIGHWATER_EXHAUSTIVE_PRESET").unwrap_or_else(|| "safe".into());
    let p = Preset::find(&preset).unwrap_or_else(|| panic!("no preset {preset:?}"));
    let records = env("HIGHWATER_EXHAUSTIVE_RECORDS")
        .map(|r| r.parse().expect("a number of records"))
        .unwrap_or(p.config.records);
    let cfg = Config {
        records,
        ..p.config
    };
    let threads: usize = env("HIGHWATER_EXHAUSTIVE_THREADS")
        .map(|t| t.parse().expect("a number of threads"))
        .unwrap_or(2);
    let opts = Options {
        threads,
        symmetry: on("HIGHWATER_EXHAUSTIVE_SYMMETRY"),
        refusals: on("HIGHWATER_EXHAUSTIVE_REFUSALS"),
    };
    println!("highwater exhaustive conformance: preset {preset}, {cfg}");
    println!(
        "{threads} thread(s), symmetry {}, refusals {}",
        if opts.symmetry { "on" } else { "off" },
        if opts.refusals { "on" } else { "off" }
    );
    let (generated, unique, secs) = model_checker_run(&cfg, threads, opts.symmetry);
    let checker_transitions = generated - 1;
    println!(
        "model checker:          {unique:>10} states {checker_transitions:>11} transitions in {:8.1} s: {:>10.0} transitions/s",
        secs.as_secs_f64(),
        checker_transitions as f64 / secs.as_secs_f64()
    );
    let report = check(&cfg, &opts, |p| {
        eprintln!(
            "  {:7.0} s  {:>10} states {:>11} transitions",
            p.elapsed.as_secs_f64(),
            p.states,
            p.transitions
        )
    });
    if let Some(d) = &report.divergence {
        panic!("the implementation left the model:\n{d}");
    }
    println!(
        "exhaustive conformance: {:>10} states {:>11} transitions in {:8.1} s: {:>10.0} transitions/s ({:.3} of the model checker's)",
        report.states,
        report.transitions,
        report.elapsed.as_secs_f64(),
        report.transitions_per_second(),
        report.transitions_per_second() / (checker_transitions as f64 / secs.as_secs_f64())
    );
    println!(
        "  also: {} enabled without a change, {} forbidden actions offered ({} taken invisibly), depth {}",
        report.unchanged, report.refusals, report.silent, report.max_depth
    );
    assert_eq!(report.states, unique, "every state the model checker finds");
    assert_eq!(report.transitions, checker_transitions, "every transition");
}
