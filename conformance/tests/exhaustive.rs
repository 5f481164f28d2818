//! Exhaustive conformance in CI: every state and every transition of two
//! configurations, each enabled action taken by the in-memory
//! implementation and compared with the model's successor, every forbidden
//! action offered and refused (or taken invisibly); the counts must be the
//! model checker's own, run beside with the same reduction.
//! - `safe` with one record, without symmetry reduction: every state, not
//!   one per class, so that no assumption about the implementation treating
//!   replicas alike is needed;
//! - `tla-kip320`, with symmetry reduction, as the model checker runs it.
//!
//! Both are the long tier (`HIGHWATER_LONG_TESTS=1`, as CI runs them).
//!
//! The full `safe` runs in `benches/exhaustive.rs`.

#[path = "../../testkit/long_tier.rs"]
mod long_tier;

use highwater_conformance::exhaustive::{check, check_against, model_checker_run, Options};
use highwater_conformance::mapping::step_config;
use highwater_model::config::Mutation;
use highwater_model::presets::{Expect, Preset, PRESETS, SAFE};
use highwater_model::Config;

/// Checks every transition of `cfg` and prints the figures.
fn every_transition(name: &str, cfg: &Config, symmetry: bool) {
    let threads = 2;
    let opts = Options {
        threads,
        symmetry,
        refusals: true,
    };
    let report = check(cfg, &opts, |p| {
        eprintln!(
            "  {:6.1} s  {} states  {} transitions",
            p.elapsed.as_secs_f64(),
            p.states,
            p.transitions
        )
    });
    if let Some(d) = &report.divergence {
        panic!("{name}: the implementation left the model:\n{d}");
    }
    let (generated, unique, checker_time) = model_checker_run(cfg, threads, symmetry);
    let reduction = if symmetry {
        "symmetry-reduced"
    } else {
        "every state"
    };
    println!("{name} ({reduction}, {threads} threads): {cfg}");
    println!(
        "  exhaustive conformance: {} states, {} transitions (+{} enabled without a change), \
         {} refusals offered ({} taken invisibly), depth {}, in {:.1} s: {:.0} transitions/s",
        report.states,
        report.transitions,
        report.unchanged,
        report.refusals,
        report.silent,
        report.max_depth,
        report.elapsed.as_secs_f64(),
        report.transitions_per_second()
    );
    let checker_transitions = generated - 1;
    println!(
        "  model checker, same run: {unique} states, {checker_transitions} transitions in {:.2} s: \
         {:.0} transitions/s",
        checker_time.as_secs_f64(),
        checker_transitions as f64 / checker_time.as_secs_f64()
    );
    assert_eq!(
        report.states, unique,
        "{name}: every state the model checker finds"
    );
    assert_eq!(
        report.transitions, checker_transitions,
        "{name}: every transition the model checker takes"
    );
    assert!(
        report.refusals > report.transitions,
        "refusals were offered"
    );
}

#[test]
fn every_transition_of_safe_with_one_record_conforms_without_symmetry() {
    if !long_tier::enabled(
        "every transition of safe with one record, unreduced: 25 minutes on a busy 2-core machine",
    ) {
        return;
    }
    let cfg = Config { records: 1, ..SAFE };
    every_transition("safe --records 1", &cfg, false);
}

#[test]
fn every_transition_of_tla_kip320_conforms() {
    if !long_tier::enabled("every transition, about 20 seconds") {
        return;
    }
    let p = Preset::find("tla-kip320").expect("a preset");
    every_transition(p.name, &p.config, true);
}

/// `cfg` with today's rules and its own bounds.
fn todays_rules(cfg: &Config) -> Config {
    Config {
        acks: SAFE.acks,
        min_isr: SAFE.min_isr,
        truncation: SAFE.truncation,
        fencing: SAFE.fencing,
        elr: SAFE.elr,
        unclean_election: SAFE.unclean_election,
        mutation: None,
        ..*cfg
    }
}

/// Each historical rule put into the implementation (the model keeping
/// today's), and the old ISR-join rule that lets a partition stall, is
/// noticed by the exhaustive run: it does not pass by luck.
#[test]
fn the_exhaustive_run_notices_every_old_rule_in_the_implementation() {
    let mut mutants: Vec<(&str, Config)> = PRESETS
        .iter()
        .filter(|p| matches!(p.expect, Expect::Breaks(_)))
        .map(|p| (p.name, p.config))
        .collect();
    mutants.push((
        "expand-on-leader-hw",
        Config {
            mutation: Some(Mutation::ExpandOnLeaderHw),
            ..SAFE
        },
    ));
    let mut missed = Vec::new();
    for (name, old) in mutants {
        let model = todays_rules(&old);
        let report = check_against(&model, step_config(&old), &Options::default(), |_| {});
        match report.divergence {
            Some(d) => println!(
                "{name}: noticed after {} states, {} steps: {}",
                report.states,
                d.steps.len(),
                d.what
            ),
            None => missed.push(name),
        }
    }
    assert!(
        missed.is_empty(),
        "the exhaustive run did not notice: {missed:?}"
    );
}
