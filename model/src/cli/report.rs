//! The text report of a run: figures, one line per property, and each
//! counterexample as a step table.

use highwater_model::properties;
use highwater_model::render::{self, Style};
use highwater_model::run::PropertyResult;
use highwater_model::run::{self, Ended, Outcome, Report, Search, Verdict};

use super::check::{size_text, thousands};

pub fn print_report(r: &Report, style: Style) {
    let p = &r.progress;
    let how = match r.ended {
        Ended::Exhaustive | Ended::StoppedAtCounterexample | Ended::Sampled => "done",
        Ended::Limited => "NOT EXHAUSTIVE: stopped at a limit",
        Ended::Interrupted => "NOT EXHAUSTIVE: interrupted",
        Ended::OverBudget if over_budget_step(r) == Some("progress-check") => {
            "done, but the progress check does not fit the memory budget,"
        }
        Ended::OverBudget => "NOT EXHAUSTIVE: stopped by its memory budget",
    };
    // The whole run's time, as TLC's "Finished in": the search's (which
    // its states/s are of) and the progress check's, printed on its own
    // line below.
    let seconds = p.seconds + r.progress_check.as_ref().map_or(0.0, |pc| pc.seconds);
    println!(
        "{how} after {seconds:.1}s: {} states, {} unique, depth {}, {:.0} states/s{}",
        p.states,
        p.unique_states,
        p.max_depth,
        r.states_per_second,
        r.peak_memory_mib
            .map_or(String::new(), |m| format!(", peak memory {m:.0} MiB"))
    );
    print_memory(r);
    if r.search != Search::Graph && r.properties.iter().any(|p| p.counterexample.is_some()) {
        println!(
            "shortest counterexamples found in {:.1}s more (breadth-first, symmetry-reduced)",
            r.shortest_seconds
        );
    }
    println!();
    for prop in &r.properties {
        let verdict = match (prop.kind, prop.verdict) {
            ("progress", Verdict::Holds) => "holds (every state can heal)".to_string(),
            ("progress", Verdict::Counterexample) => format!(
                "STUCK ({} states cannot heal without a fault)",
                prop.stuck_states.unwrap_or(0)
            ),
            ("progress", Verdict::NotChecked) => match (r.search, r.ended) {
                (Search::Graph, Ended::StoppedAtCounterexample) => {
                    "not checked (stopped at a counterexample)".to_string()
                }
                (Search::Graph, Ended::OverBudget) => {
                    "not checked (out of memory budget)".to_string()
                }
                (Search::Graph, _) => "not checked (the search did not finish)".to_string(),
                _ => "not checked (needs the default search's state graph)".to_string(),
            },
            (_, Verdict::Holds) => "holds".to_string(),
            (_, Verdict::Counterexample) => "COUNTEREXAMPLE".to_string(),
            (_, Verdict::Reached) => "reached".to_string(),
            (_, Verdict::NotReached) => "not reached".to_string(),
            (_, Verdict::NoneFound) => "no counterexample found (not exhaustive)".to_string(),
            (_, Verdict::NotChecked) => match r.ended {
                Ended::StoppedAtCounterexample => "not checked (stopped at a counterexample)",
                _ => "not checked (the search did not finish)",
            }
            .to_string(),
        };
        println!("  {:<9} {:<44} {verdict}", prop.kind, prop.name);
    }
    if let Some(pc) = &r.progress_check {
        println!(
            "  {:<9} {:<44} {} states (no leader electable without an unclean election)",
            "", "offline by design", pc.offline_states
        );
        if let Some(example) = &pc.offline_example {
            let raw: Vec<_> = example.iter().map(|s| s.raw).collect();
            println!(
                "Shortest path to a partition offline by design (ISR and ELR empty, {} steps):",
                raw.len() - 1
            );
            print!("{}", render::steps_table(&raw, 0, style));
        }
        println!(
            "(healing may use {} leader epochs beyond --max-epoch: a run's epoch bound must not \
             make a partition look stuck)",
            highwater_model::state::RECOVERY_EPOCHS
        );
        println!(
            "progress check: {} fault-free edges, {} recovery states beyond the epoch bound \
             ({} shown to heal by one walk, not expanded), graph {:.0} MiB, {:.1}s",
            pc.edges,
            pc.recovery_states,
            pc.recovery_walked,
            pc.graph_bytes as f64 / (1024.0 * 1024.0),
            pc.seconds
        );
    }
    print_counterexamples(r, style);
    println!();
    let expected = r.expected.as_deref().unwrap_or("nothing");
    let no_expectation = "no expectation was given: --expect holds, counterexample or a \
                          property's name gives one";
    match r.outcome {
        Outcome::AsExpected if r.ended == Ended::Sampled => {
            println!("verdict: as expected ({expected}), found by random walks")
        }
        Outcome::AsExpected => {
            let unchecked = r
                .properties
                .iter()
                .any(|p| p.kind == "progress" && p.verdict == Verdict::NotChecked);
            if unchecked && r.ended == Ended::Exhaustive {
                println!(
                    "verdict: as expected ({expected}), for safety: this search does not check \
                     progress"
                )
            } else {
                println!("verdict: as expected ({expected})")
            }
        }
        Outcome::NotAsExpected => {
            println!("verdict: NOT as expected (expected: {expected})");
            for m in &r.mismatches {
                println!("  - {m}");
            }
        }
        Outcome::Undecided => println!(
            "verdict: not decided (expected: {expected}); the run stopped after {} states before \
             it could tell: nothing it saw contradicts the expectation",
            r.progress.unique_states
        ),
        Outcome::NoExpectation
            if matches!(
                r.exit_status,
                run::exit::SAFETY_VIOLATION | run::exit::PROGRESS_VIOLATION
            ) =>
        {
            println!("verdict: a property BROKE ({no_expectation})")
        }
        Outcome::NoExpectation
            if matches!(
                r.ended,
                Ended::Limited | Ended::Interrupted | Ended::OverBudget
            ) =>
        {
            println!(
                "verdict: not decided: nothing broke in the {} states seen, but the search did \
                 not finish ({no_expectation})",
                r.progress.unique_states
            )
        }
        Outcome::NoExpectation if r.ended == Ended::Sampled => println!(
            "verdict: nothing broke on these random walks, which prove nothing ({no_expectation})"
        ),
        Outcome::NoExpectation => println!("verdict: nothing broke ({no_expectation})"),
    }
    println!("exit status {}", r.exit_status);
}

fn over_budget_step(r: &Report) -> Option<&'static str> {
    r.memory.over_budget.as_ref().map(|o| o.step)
}

/// What the run held per unique state, and, for a run its budget stopped,
/// what it held and what it would have needed.
fn print_memory(r: &Report) {
    let m = &r.memory;
    let b = |x: Option<f64>| x.map_or("?".to_string(), |x| format!("{x:.1}"));
    if let Some(queue) = m.queue_bytes {
        println!(
            "memory per unique state: index {} bytes, graph {} ({} nodes, {} edges); queue at most \
             {}; counted at most {}{}",
            b(m.index_bytes_per_state),
            b(m.graph_bytes_per_state),
            b(m.node_bytes_per_state),
            b(m.edge_bytes_per_state),
            size_text(queue),
            size_text(m.counted_peak_bytes.unwrap_or(0)),
            m.peak_resident_bytes.map_or(String::new(), |p| format!(
                "; peak resident {} ({} bytes a state)",
                size_text(p),
                b(m.peak_resident_bytes_per_state)
            ))
        );
    }
    let (Some(o), Some(budget)) = (&m.over_budget, m.budget_bytes) else {
        return;
    };
    let step = match o.step {
        "progress-check" => "the progress check over the complete graph",
        _ => "growing the search for its next batch of states",
    };
    println!(
        "memory budget {}: stopped after {} unique states, holding {} by the engine's count, \
         before {step}, which would hold {} (a budget of {} at least)",
        size_text(budget),
        thousands(r.progress.unique_states),
        size_text(o.held_bytes),
        size_text(o.next_step_bytes),
        size_text(o.next_step_budget_bytes)
    );
    if let (Some(e), Some(p)) = (o.estimated_bytes, r.preset) {
        println!(
            "the whole run of preset {p} is estimated to need about {} ({} bytes a state, \
             measured)",
            size_text(e),
            highwater_model::presets::PEAK_BYTES_PER_STATE
        );
    }
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// What a stuck state can still do: every fault-free action, each leading
/// to another state that cannot heal.
fn print_exits(exits: &[run::Step]) {
    if exits.is_empty() {
        println!("No action is enabled there without a fault.");
        return;
    }
    println!(
        "Without a fault, only these are enabled there, and each leads to another state that cannot heal:"
    );
    for e in exits {
        println!("  {}", e.action.as_deref().unwrap_or("?"));
    }
}

/// Each distinct counterexample once, naming every property it breaks,
/// with a closing line saying what broke.
fn print_counterexamples(r: &Report, style: Style) {
    let mut printed: Vec<&PropertyResult> = Vec::new();
    for prop in &r.properties {
        let Some(steps) = &prop.counterexample else {
            continue;
        };
        let actions = |p: &PropertyResult| -> Option<Vec<String>> {
            p.counterexample
                .as_ref()
                .map(|c| c.iter().filter_map(|s| s.action.clone()).collect())
        };
        if printed
            .iter()
            .any(|p| p.kind == prop.kind && actions(p) == actions(prop))
        {
            continue;
        }
        printed.push(prop);
        let same: Vec<&PropertyResult> = r
            .properties
            .iter()
            .filter(|p| p.kind == prop.kind && actions(p) == actions(prop))
            .collect();
        let names = same
            .iter()
            .map(|p| format!("\"{}\"", p.name))
            .collect::<Vec<_>>()
            .join(" and ");
        println!();
        let trace: Vec<_> = steps.iter().map(|s| s.raw).collect();
        if prop.kind == "progress" {
            println!(
                "Shortest path to a state that cannot heal ({names}, {} steps):",
                steps.len() - 1
            );
            print!("{}", render::steps_table(&trace, 0, style));
            print_exits(prop.stuck_exits.as_deref().unwrap_or(&[]));
            if let Some(cont) = &prop.stuck_continuation {
                let raw: Vec<_> = cont.iter().map(|s| s.raw).collect();
                println!(
                    "Every fault-free future ends in a trap: states that lead only to each other, none healthy \
                     ({}). The shortest way in ({} steps more):",
                    plural(prop.trap_states.unwrap_or(0), "state"),
                    raw.len() - 1
                );
                print!("{}", render::continuation_table(&raw, steps.len(), style));
            }
            println!(
                "Stuck: without a further fault the partition can no longer reach a healthy state{}.",
                if prop.name == highwater_model::progress::ACKED_REPLICATED {
                    " in which every acknowledged record is on every replica, back from any crash, below its HW"
                } else {
                    ""
                }
            );
        } else {
            println!(
                "Shortest counterexample to {names} ({} steps):",
                steps.len() - 1
            );
            print!("{}", render::steps_table(&trace, 0, style));
            let last = trace.last().expect("a trace has a state").0;
            for p in &same {
                if let Some(why) = properties::explain(p.name, &last) {
                    println!("Broken: {} — {why}.", p.name);
                }
            }
        }
    }
}
