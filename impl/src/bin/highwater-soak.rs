//! highwater-soak: runs the concurrent driver under a nemesis (overlapping
//! crashes, zombies, leader moves, pauses; chosen by seed) for N seeds of
//! T seconds each, under one rule set, and prints what was sent,
//! acknowledged and lost, what was read and later vanished, logs that
//! disagree below the HW, faults injected, and whether the partition
//! healed after the last fault. Exits non-zero on any loss under today's
//! rules (a historical rule set is expected to lose).
//!
//! Traces are validated against the model by the conformance crate, which
//! sees both (conformance/tests/soak.rs runs these soaks with every trace
//! validated); this binary sees only the implementation.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use highwater::cluster::concurrent::{self, soak_config, RuleSet, SoakFigures};

#[derive(Parser)]
#[command(about = "Soak the concurrent driver under a nemesis")]
struct Cli {
    /// Seeds to run (0 to N-1, or from --first-seed).
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Seconds each seed runs.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    #[arg(long, value_enum, default_value = "today")]
    rules: RuleSet,
    /// Stop at the first seed that loses something.
    #[arg(long)]
    stop_at_loss: bool,
    /// Let unclean crashes overlap (by default one happens only while
    /// every broker is up and in the ISR: the model's assumption, since
    /// records unflushed on every replica are lost under any rule).
    #[arg(long)]
    overlap_unclean: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !(cli.seconds > 0.0 && cli.seconds.is_finite()) {
        eprintln!("--seconds must be a positive number");
        return ExitCode::from(2);
    }
    let started = Instant::now();
    let mut total = SoakFigures::default();
    let (mut runs, mut healed, mut first_loss) = (0u64, 0u64, None);
    for seed in cli.first_seed..cli.first_seed + cli.seeds {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => {
                eprintln!("no temporary directory: {e}");
                return ExitCode::from(2);
            }
        };
        let mut config = soak_config(cli.rules, seed, Duration::from_secs_f64(cli.seconds));
        if let Some(n) = config.nemesis.as_mut() {
            n.one_unclean_at_a_time = !cli.overlap_unclean;
        }
        let report = match concurrent::run(dir.path(), config) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("seed {seed}: the run failed: {e}");
                return ExitCode::from(2);
            }
        };
        let f = SoakFigures::of(&report);
        runs += 1;
        healed += u64::from(f.healed);
        println!(
            "seed {seed}: sent {} acked {} lost {} vanished {} disagreeing-below-hw {} faults {} healed {}{}",
            f.records_sent,
            f.acknowledged,
            f.lost,
            f.vanished,
            f.disagreeing_below_hw,
            f.faults,
            f.healed,
            if report.errors.is_empty() {
                String::new()
            } else {
                format!(" errors {:?}", report.errors)
            }
        );
        total.records_sent += f.records_sent;
        total.acknowledged += f.acknowledged;
        total.lost += f.lost;
        total.vanished += f.vanished;
        total.disagreeing_below_hw += f.disagreeing_below_hw;
        total.faults += f.faults;
        if f.loss() && first_loss.is_none() {
            first_loss = Some((seed, started.elapsed()));
            if cli.stop_at_loss {
                break;
            }
        }
    }
    println!("rules: {:?}, {runs} run(s) of {} s", cli.rules, cli.seconds);
    println!("records sent:                 {}", total.records_sent);
    println!("acknowledged:                 {}", total.acknowledged);
    println!("acknowledged and lost:        {}", total.lost);
    println!("consumed, later vanished:     {}", total.vanished);
    println!(
        "logs disagreeing below HW:    {}",
        total.disagreeing_below_hw
    );
    println!(
        "traces validated:             0 (this binary does not see the model; see conformance)"
    );
    println!("faults injected:              {}", total.faults);
    println!("healed after the last fault:  {healed} of {runs}");
    match first_loss {
        Some((seed, t)) => println!(
            "first loss:                   seed {seed}, within {:.1} s of soaking",
            t.as_secs_f64()
        ),
        None => println!("first loss:                   none"),
    }
    if cli.rules == RuleSet::Today && !cli.overlap_unclean && first_loss.is_some() {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
