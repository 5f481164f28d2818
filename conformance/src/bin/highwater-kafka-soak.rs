//! highwater-kafka-soak: Apache Kafka 4.4 itself (1 KRaft controller, 3
//! brokers, local `java` processes) under a seeded nemesis: for each seed,
//! starts a cluster, creates a topic (1 partition, replication factor 3),
//! produces numbered records for --seconds while faults strike the leader
//! or a follower (kill -9 and restart, SIGSTOP shorter and longer than the
//! session timeout, clean restart, kill -9 losing the unflushed tail,
//! network partitions between a broker and the controller or its peers),
//! heals, reads the partition back and checks that every acknowledged
//! record is there, and that nothing a consumer read during the run
//! (from the partition's start, beside the producer) vanished from it;
//! then validates the run's observations (the
//! controller's metadata log, the brokers' state-change logs, the
//! producer's acknowledgements) against the model (spec/kafka-trace.md).
//! Prints each seed's schedule first (a seed replays it) and its summary
//! at the end. Exits non-zero on a loss or a vanished read under today's rules, on a run that
//! does not fit the model, or on a harness failure; the run directory (every node's log
//! dir and logs, the producer's and consumer's JSON lines) is kept with
//! --keep or on failure.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use highwater_conformance::kafka_cluster::nemesis::Schedule;
use highwater_conformance::kafka_cluster::programs::{Programs, Setup};
use highwater_conformance::kafka_cluster::soak::{self, SoakConfig};
use highwater_conformance::kafka_cluster::{pids, summary, Rules};
use highwater_conformance::kafka_trace::KafkaValidation;
use highwater_conformance::pictures;

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
    /// min-isr-1 or unclean [default: today; with --validate, the rules the
    /// run's summary.txt names]
    #[arg(long, value_parser = parse_rules)]
    rules: Option<Rules>,
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
    /// the model (no cluster is started), print the result and stop. Without
    /// Java, the metadata.txt an earlier validation wrote there is read.
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "dry_run")]
    validate: Option<PathBuf>,
    /// Draw every run's pictures into DIR/<rules>-seed-<n>/ (with
    /// --validate, DIR/<the run directory's name>/): timeline.svg (records
    /// acknowledged per interval, ack latency p50/p99, faults shaded,
    /// losses, misfits and broken properties marked) and partition.svg
    /// (leader, epoch, ISR, ELR and the logged HW over time).
    #[arg(long, value_name = "DIR")]
    pictures: Option<PathBuf>,
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
    if let Err(e) = pids::kill_all_on_ctrl_c() {
        eprintln!("{e}");
        return ExitCode::from(2);
    }
    if let Some(run_dir) = &cli.validate {
        // Java dumps the metadata log again; without it, the kept dump serves.
        let programs = match Programs::setup() {
            Ok(Setup::Ready(p)) => Some(p),
            Ok(Setup::Missing(why)) => {
                eprintln!("no Kafka ({why}): reading the run's metadata.txt");
                None
            }
            Err(e) => {
                eprintln!("no Kafka ({e}): reading the run's metadata.txt");
                None
            }
        };
        let rules = match cli.rules {
            Some(r) => r,
            None => match std::fs::read_to_string(run_dir.join("summary.txt"))
                .ok()
                .as_deref()
                .and_then(summary::rules_named)
            {
                Some(r) => {
                    eprintln!("rules {}, as the run's summary.txt names them", r.name());
                    r
                }
                None => {
                    eprintln!("the run's summary.txt names no rules: validating under today's (--rules to choose)");
                    Rules::Today
                }
            },
        };
        return validate_kept(programs.as_ref(), run_dir, rules, cli.pictures.as_deref());
    }
    let rules = cli.rules.unwrap_or(Rules::Today);
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
    let mut failed = false;
    let mut totals = [0u64; 7];
    // Runs whose observations fit the model, runs that did not, and the
    // metadata batches and broker lines validated.
    let (mut fitted, mut misfits, mut batches, mut lines) = (0u64, 0u64, 0usize, 0usize);
    for seed in cli.first_seed..cli.first_seed + cli.seeds {
        let schedule = Schedule::from_seed(seed, cli.seconds);
        print!("{schedule}");
        let run_dir = soak::run_dir(&cli.dir, rules, Some(seed));
        let config = SoakConfig {
            rules,
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
                totals[5] += v.reads.as_ref().map_or(0, |r| r.reads);
                totals[6] += v.vanished() as u64;
                if summary.lost() && rules == Rules::Today {
                    if v.vanished() > 0 {
                        println!(
                            "  FAIL: records read by the consumer vanished under today's rules"
                        );
                    }
                    if v.reads
                        .as_ref()
                        .is_some_and(|r| !r.out_of_order.is_empty() || !r.unsent.is_empty())
                    {
                        println!("  FAIL: the consumer read out of order, or a value never sent");
                    }
                    if !v.lost.is_empty() || !v.moved.is_empty() || !v.unexpected.is_empty() {
                        println!("  FAIL: acknowledged data lost under today's rules");
                    }
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
                if let Some(to) = &cli.pictures {
                    let dir = to.join(format!("{}-seed-{seed}", rules.name()));
                    let title = format!(
                        "highwater-kafka-soak --rules {} seed {seed}, {} s",
                        rules.name(),
                        cli.seconds,
                    );
                    draw(
                        &dir,
                        &title,
                        &run_dir,
                        summary.validation.as_ref().ok(),
                        rules,
                    );
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
        "total over {} seeds ({}): sent {} acknowledged {} indeterminate {} lost {} read {} vanished {} faults {}",
        cli.seeds,
        rules.name(),
        totals[0],
        totals[1],
        totals[2],
        totals[3],
        totals[5],
        totals[6],
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

/// Draws a run's pictures into `dir`; says where (or why not).
fn draw(
    dir: &Path,
    title: &str,
    run_dir: &Path,
    validation: Option<&KafkaValidation>,
    rules: Rules,
) {
    match pictures::kafka::of_run_dir(dir, title, run_dir, validation, rules.acks() == "all") {
        Ok(_) => println!("  pictures in {}", dir.display()),
        Err(e) => println!("  no pictures: {e}"),
    }
}

/// `--validate RUN_DIR`: a kept run's observations against the model
/// (`programs` None: its kept metadata.txt), drawn into `pictures/<its
/// name>/` when asked.
fn validate_kept(
    programs: Option<&Programs>,
    run_dir: &Path,
    rules: Rules,
    pictures: Option<&Path>,
) -> ExitCode {
    match highwater_conformance::kafka_trace::validate_run(
        programs,
        run_dir,
        soak::TOPIC,
        rules.acks() == "all",
    ) {
        Ok(v) => {
            print!("{v}");
            if let Some(to) = pictures {
                let name = run_dir
                    .file_name()
                    .map_or("run".into(), |n| n.to_string_lossy().into_owned());
                let title = format!("{name} (--rules {})", rules.name());
                draw(&to.join(&name), &title, run_dir, Some(&v), rules);
            }
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
