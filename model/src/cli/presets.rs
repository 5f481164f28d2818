//! `highwater presets`: every preset, its bounds and its expected verdict.

use highwater_model::config::on_off;
use highwater_model::presets::{Expect, PRESETS};
use std::process::ExitCode;

pub fn presets(json: bool) -> Result<ExitCode, String> {
    if json {
        let list: Vec<_> = PRESETS
            .iter()
            .map(|p| {
                serde_json::json!({
                    "name": p.name,
                    "summary": p.summary,
                    "config": p.config,
                    "expected": p.expectation_text(),
                    "breaks": match p.expect { Expect::Breaks(n) => Some(n), _ => None },
                    "fixed_by": p.fixed_by.map(|f| serde_json::json!({"preset": f.preset, "rule": f.rule})),
                    "tlc_distinct_states": p.tlc.map(|t| t.distinct_states),
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&list).map_err(|e| e.to_string())?
        );
        return Ok(ExitCode::SUCCESS);
    }
    // One column wide enough for every name.
    let w = PRESETS.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for p in PRESETS {
        let c = &p.config;
        println!("{:<w$} {}", p.name, p.summary);
        println!(
            "{:<w$} replicas={} records={} max-epoch={} min-isr={} acks={} truncation={} fencing={} elr={} last-known-leader={} unclean-election={} hw-checkpoint={} crashes: clean={} unclean={} leader-moves={}",
            "",
            c.replicas,
            c.records,
            c.max_epoch,
            c.min_isr,
            c.acks,
            c.truncation,
            on_off(c.fencing),
            on_off(c.elr),
            on_off(c.last_known_leader),
            on_off(c.unclean_election),
            c.hw_checkpoint,
            c.clean_crashes,
            c.unclean_crashes,
            c.leader_moves
        );
        println!("{:<w$} expected: {}", "", p.expectation_text());
        if let Some(f) = p.fixed_by {
            println!("{:<w$} fixed by: {} (preset {})", "", f.rule, f.preset);
        }
        if let Some(t) = p.tlc {
            println!(
                "{:<w$} TLC on the TLA+ {} module: {} distinct states (depth {}); highwater: {} unique states (see `highwater presets --help`)",
                "",
                t.module,
                t.distinct_states,
                t.depth,
                highwater_model::presets::TLA_KIP320_UNIQUE_STATES
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
