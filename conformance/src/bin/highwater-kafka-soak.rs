//! highwater-kafka-soak: Apache Kafka 4.4 itself (1 KRaft controller, 3
//! brokers, local `java` processes) under a seeded nemesis: for each seed,
//! starts a cluster, creates a topic (1 partition, replication factor 3),
//! produces numbered records for --seconds while faults strike the leader
//! or a follower (kill -9 and restart, SIGSTOP shorter and longer than the
//! session timeout, clean restart, kill -9 losing the unflushed tail),
//! heals, reads the partition back and checks that every acknowledged
//! record is there; then validates the run's observations (the
//! controller's metadata log, the brokers' state-change logs, the
//! producer's acknowledgements) against the model (spec/kafka-trace.md).
//! Prints each seed's schedule first (a seed replays it) and its summary
//! at the end. Exits non-zero on a loss under today's rules, on a run that
//! does not fit the model, or on a harness failure; the run directory (every node's log
//! dir and logs, the producer's and consumer's JSON lines) is kept with
//! --keep or on failure.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use highwater_conformance::kafka_cluster::nemesis::Schedule;
use highwater_conformance::kafka_cluster::programs::{Programs, Setup};
use highwater_conformance::kafka_cluster::soak::{self, SoakConfig};
use highwater_conformance::kafka_cluster::{pids, Rules};

#[derive(Parser)]
#[command(about = "Apache Kafka under a nemesis, every acknowledged record checked")]
struct Cli {
    /// Seeds to run: 0 to N-1, or from --first-seed.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Seconds the producer runs under the nemesis, per seed.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(5..=3600))]
    seconds: u64,
    /// today (acks=all, min.insync.replicas=2, no unclean election), acks1,
    /// min-isr-1 or unclean.
    #[arg(long, default_value = "today", value_parser = parse_rules)]
    rules: Rules,
    /// Keep every run directory (kept anyway when a run fails or loses data).
    #[arg(long)]
    keep: bool,
    /// Print each seed's fault schedule and stop (no cluster).
    #[arg(long)]
    dry_run: bool,
    /// Where run directories go.
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
    /// Validate the observations a kept run left in this directory against
    /// the model (no cluster is started), print the result and stop.
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "dry_run")]
    validate: Option<PathBuf>,
}

fn parse_rules(text: &str) -> Result<Rules, String> {
    Rules::parse(text)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.dry_run {
        for seed in cli.first_seed..cli.first_seed + cli.seeds {
            print!("{}", Schedule::from_seed(seed, cli.seconds));
        }
        return ExitCode::SUCCESS;
    }
    // Every java process leads its own process group, so a terminal's Ctrl-C
    // reaches only this one: stop them all by PID, then leave.
    if let Err(e) = ctrlc::set_handler(|| {
        let killed = pids::kill_all();
        eprintln!("interrupted: killed {} processes {killed:?}", killed.len());
        std::process::exit(130);
    }) {
        eprintln!("cannot install the Ctrl-C handler: {e}");
        return ExitCode::from(2);
    }
    let programs = match Programs::setup() {
        Ok(Setup::Ready(p)) => p,
        Ok(Setup::Missing(why)) => {
            eprintln!("cannot run Kafka: {why}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Some(run_dir) = &cli.validate {
        return validate_kept(&programs, run_dir, cli.rules);
    }
    let mut failed = false;
    let mut totals = [0u64; 5];
    // Runs whose observations fit the model, runs that did not, and the
    // metadata batches and broker lines validated.
    let (mut fitted, mut misfits, mut batches, mut lines) = (0u64, 0u64, 0usize, 0usize);
    for seed in cli.first_seed..cli.first_seed + cli.seeds {
        let schedule = Schedule::from_seed(seed, cli.seconds);
        print!("{schedule}");
        let run_dir = soak::run_dir(&cli.dir, cli.rules, Some(seed));
        let config = SoakConfig {
            rules: cli.rules,
            seconds: cli.seconds,
            schedule,
            run_dir: run_dir.clone(),
            heal_timeout: std::time::Duration::from_secs(120),
        };
        let keep = match soak::run(&programs, &config) {
            Ok(summary) => {
                print!("{summary}");
                let v = &summary.verdict;
                totals[0] += v.sent;
                totals[1] += v.acknowledged;
                totals[2] += v.indeterminate;
                totals[3] += v.lost.len() as u64;
                totals[4] += summary.faults.len() as u64;
                if summary.lost() && cli.rules == Rules::Today {
                    println!("  FAIL: acknowledged data lost under today's rules");
                    failed = true;
                }
                if let Ok(v) = &summary.validation {
                    batches += v.controller.batches;
                    lines += v.brokers.applied;
                }
                if let Some(misfit) = summary.misfit() {
                    println!("  FAIL: the run does not fit the model: {misfit}");
                    misfits += 1;
                    failed = true;
                } else {
                    fitted += 1;
                }
                if !summary.healed {
                    println!("  note: the cluster did not heal within the bound");
                }
                cli.keep || summary.lost() || !summary.healed || summary.misfit().is_some()
            }
            Err(e) => {
                println!("seed {seed}: harness failure: {e}");
                failed = true;
                true
            }
        };
        if keep {
            println!("  observations kept in {}", run_dir.display());
        } else if let Err(e) = std::fs::remove_dir_all(&run_dir) {
            println!("  cannot remove {}: {e}", run_dir.display());
        }
    }
    println!(
        "total over {} seeds ({}): sent {} acknowledged {} indeterminate {} lost {} faults {}",
        cli.seeds,
        cli.rules.name(),
        totals[0],
        totals[1],
        totals[2],
        totals[3],
        totals[4]
    );
    println!(
        "validated against the model: {fitted} runs fit, {misfits} do not ({batches} metadata batches, {lines} broker lines)"
    );
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `--validate RUN_DIR`: a kept run's observations against the model.
fn validate_kept(programs: &Programs, run_dir: &std::path::Path, rules: Rules) -> ExitCode {
    match highwater_conformance::kafka_trace::validate_run(
        programs,
        run_dir,
        soak::TOPIC,
        rules.acks() == "all",
    ) {
        Ok(v) => {
            print!("{v}");
            if v.misfit().is_some() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("cannot validate {}: {e}", run_dir.display());
            ExitCode::from(2)
        }
    }
}
