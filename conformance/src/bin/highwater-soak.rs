//! highwater-soak: runs the concurrent driver under a nemesis (overlapping
//! crashes, zombies, leader moves, pauses; chosen by seed) for N seeds of
//! T seconds each, under one or more rule sets, and prints what was sent,
//! acknowledged and lost, what was read and later vanished, logs that
//! disagree below the HW, faults injected, and whether the partition
//! healed after the last fault. Every seed's trace is validated against the
//! model (`trace_validation::validated_run`; this binary lives in the
//! conformance crate, which sees both): per rule set it prints how many
//! traces were validated whole, how many went beyond the model's bounds
//! (and how many of their events were validated and skipped), and how many
//! did not fit, and how many broke an always-property where they fit (the
//! model breaks it too under a historical rule set). Exits non-zero on a
//! trace that does not fit (under any rule set: the model runs with the
//! same rules; the misfit is printed and the trace kept), on a partition
//! that has not healed by the end of the settle phase (any rule set: the
//! historical ones lose data, they do not stall; the followers that made
//! no progress at all are named and the trace kept), and on any loss or
//! broken property under today's rules (a historical rule set is expected
//! to lose).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use highwater::cluster::concurrent::{
    pace_for_validation, soak_config, ConcurrentConfig, InjectedFault, RuleSet, SoakFigures,
};
use highwater_conformance::pictures;
use highwater_conformance::trace_validation::{
    model_config, validate_file_with, validated_run, MisfitKind, Mode, ValidatedRun,
};

#[derive(Parser)]
#[command(about = "Soak the concurrent driver under a nemesis, every trace validated")]
struct Cli {
    /// Seeds to run (0 to N-1, or from --first-seed), under each rule set.
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Seconds each seed runs.
    #[arg(long, default_value_t = 3.0, value_parser = positive_seconds)]
    seconds: f64,
    /// Rule sets to soak, one after the other (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "today")]
    rules: Vec<RuleSet>,
    /// Stop a rule set at the first seed that loses something.
    #[arg(long)]
    stop_at_loss: bool,
    /// Let unclean crashes overlap (by default one happens only while
    /// every broker is up and in the ISR: the model's assumption, since
    /// records unflushed on every replica are lost under any rule).
    #[arg(long)]
    overlap_unclean: bool,
    /// The nemesis only strands: it holds the followers until the leader
    /// acknowledges a record none of them has, then crashes the leader,
    /// aimed at the loss each rule set allows (see `RuleSet::strand`). A
    /// historical rule set then loses in every run, not by chance.
    #[arg(long)]
    strand: bool,
    /// Stop producing after this many records (4 or fewer: the records fit
    /// the model's state, and a trace is validated to its end unless its
    /// leader epochs go beyond the model's); a run then lasts until all of
    /// them were sent, however slow the machine.
    #[arg(long)]
    max_records: Option<u64>,
    /// Pace the producers so that trace validation can follow the run past
    /// its faults: bursts of 4 records (the model's) with a pause after
    /// each, and brokers that flush and checkpoint their HW every 10 ms
    /// (`pace_for_validation`). Without it the soak runs at full rate, and
    /// only the traces' first events fit the model's 4 records.
    #[arg(long)]
    paced: bool,
    /// Also validate each trace as before resuming (the window moves, and
    /// validation stops at the first event beyond the model's bounds), and
    /// print the fraction of events validated then.
    #[arg(long)]
    compare_without_resuming: bool,
    /// Also validate each trace in the model's unbounded shape (whole, at
    /// its own size, no window), and print the events it validated, its
    /// misfits, and its speed beside the driver's. With --validate-trace:
    /// validate the kept trace in that shape.
    #[arg(long)]
    unbounded: bool,
    /// A concurrency bug injected into the driver (a test-only switch, to
    /// show a trace that does not fit failing the soak).
    #[arg(long, value_enum, hide = true)]
    inject_fault: Option<Injected>,
    /// Validate this kept trace again instead of running (with the
    /// configuration of --rules, --first-seed and --paced, as the soak
    /// that kept it ran): prints the first event that does not fit.
    #[arg(long, value_name = "FILE")]
    validate_trace: Option<PathBuf>,
    /// Where the trace of a run that does not fit the model, or whose
    /// partition did not heal, is kept.
    #[arg(long, default_value_os_t = std::env::temp_dir().join("highwater-soak-misfits"))]
    keep_traces: PathBuf,
    /// Keep every run's trace in --keep-traces, not only those that did
    /// not fit or heal (to validate or study them later with
    /// --validate-trace).
    #[arg(long)]
    keep_every_trace: bool,
    /// Draw every run's pictures into DIR/<rules>-seed-<n>/: timeline.svg
    /// (records acknowledged per interval, ack latency p50/p99, faults
    /// shaded, losses and misfits marked) and partition.svg (leader,
    /// epoch, ISR, ELR and HW over time). A kept trace gets them anyway,
    /// beside it in --keep-traces.
    #[arg(long, value_name = "DIR")]
    pictures: Option<PathBuf>,
}

/// The driver's injected faults the soak can be run with.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Injected {
    HwPublishedEarly,
    /// `hw-published-early` from offset 20 on: past the compact shape's
    /// bounds, where only the unbounded shape (or a resumed window) sees it.
    HwPublishedEarlyPastTheBounds,
    StaleEpochFetchResponse,
    IsrChangeAppliedTwice,
    DivergingEpochIgnored,
    /// Consumers read the record at the HW too: only the traced reads show
    /// it (no replica's state changes).
    ConsumerReadsPastHw,
    /// A leader publishes to consumers the HW a fetch would justify before
    /// checking it.
    HwPublishedBeforeFetchChecked,
    /// Consumers read the storage layer's HW, set before its checkpoint.
    HwPublishedBeforeCheckpoint,
    /// A leader shrinks its ISR copy as soon as it asks the controller.
    HwFromUnconfirmedIsr,
}

impl Injected {
    fn fault(self) -> InjectedFault {
        match self {
            Injected::HwPublishedEarly => InjectedFault::HwPublishedEarly,
            Injected::HwPublishedEarlyPastTheBounds => {
                InjectedFault::HwPublishedEarlyFrom { offset: 20 }
            }
            Injected::StaleEpochFetchResponse => InjectedFault::StaleEpochFetchResponse,
            Injected::IsrChangeAppliedTwice => InjectedFault::IsrChangeAppliedTwice,
            Injected::DivergingEpochIgnored => InjectedFault::DivergingEpochIgnored,
            Injected::ConsumerReadsPastHw => InjectedFault::ConsumerReadsPastHw,
            Injected::HwPublishedBeforeFetchChecked => InjectedFault::HwPublishedBeforeFetchChecked,
            Injected::HwPublishedBeforeCheckpoint => InjectedFault::HwPublishedBeforeCheckpoint,
            Injected::HwFromUnconfirmedIsr => InjectedFault::HwFromUnconfirmedIsr,
        }
    }
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if v > 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(format!("{s}: the seconds must be a positive number"))
    }
}

/// What one rule set's seeds showed.
#[derive(Default)]
struct Tally {
    runs: u64,
    healed: u64,
    figures: SoakFigures,
    first_loss: Option<(u64, Duration)>,
    /// Traces validated whole.
    whole: u64,
    /// Traces that went beyond the model's bounds: their events validated
    /// and skipped, and the times validation resumed.
    beyond: u64,
    beyond_validated: u64,
    beyond_skipped: u64,
    resumptions: u64,
    /// Events of the traces that fit, and of those the events validated
    /// now and (with --compare-without-resuming) as before resuming.
    events: u64,
    validated: u64,
    validated_before: u64,
    /// Traces that do not fit, and where each is kept.
    misfits: Vec<String>,
    /// Traces that fit and break an always-property (as the model does
    /// under a historical rule set): the seed and the first broken.
    broken: Vec<String>,
    /// Runs stopped by their hang guard before their goals (all records
    /// sent): the seed and the goals.
    unmet: Vec<String>,
    /// Runs whose partition had not healed by the end of the settle
    /// phase: the seed, the followers that made no progress, the trace.
    unhealed: Vec<String>,
    /// With --unbounded: events validated in the unbounded shape (of
    /// `events_all`), its misfits, and the seconds validation and the
    /// runs took.
    unbounded: u64,
    events_all: u64,
    unbounded_misfits: Vec<String>,
    /// With --unbounded: runs whose trace broke a property of the model at
    /// a validated step: the seed, the event and the first broken.
    unbounded_broken: Vec<String>,
    /// With --unbounded: consumer reads checked against the model's
    /// visibility, and the records they returned found visible there.
    unbounded_reads: u64,
    unbounded_records_read: u64,
    unbounded_seconds: f64,
    run_seconds: f64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    highwater_model::sigpipe::end_when_stdout_closes();
    if let Some(trace) = &cli.validate_trace {
        return validate_kept(&cli, trace);
    }
    let mut failed = false;
    let mut tallies = Vec::new();
    for &rules in &cli.rules {
        match soak(&cli, rules) {
            Ok(t) => {
                let lost_today = rules == RuleSet::Today
                    && !cli.overlap_unclean
                    && (t.first_loss.is_some()
                        || !t.broken.is_empty()
                        || !t.unbounded_broken.is_empty());
                failed |= lost_today
                    || !t.misfits.is_empty()
                    || !t.unbounded_misfits.is_empty()
                    || !t.unmet.is_empty()
                    || !t.unhealed.is_empty();
                tallies.push((rules, t));
            }
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        }
    }
    for (rules, t) in &tallies {
        print_tally(&cli, *rules, t);
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The configuration the soak runs `rules` and `seed` with.
fn config_of(cli: &Cli, rules: RuleSet, seed: u64) -> ConcurrentConfig {
    let mut config = soak_config(rules, seed, Duration::from_secs_f64(cli.seconds));
    if let Some(n) = config.nemesis.as_mut() {
        n.one_unclean_at_a_time = !cli.overlap_unclean;
        if cli.strand {
            n.faults = vec![rules.strand()];
        }
    }
    config.inject = cli.inject_fault.map(Injected::fault);
    if cli.max_records.is_some() {
        config.max_records = cli.max_records;
        config.until.sent = cli.max_records;
    }
    if cli.paced {
        pace_for_validation(&mut config);
    }
    config
}

/// `--validate-trace`: exit 0 when the trace fits, 1 when it does not, 2
/// when the options name no single rule set.
fn validate_kept(cli: &Cli, trace: &Path) -> ExitCode {
    let [rules] = cli.rules[..] else {
        eprintln!("--validate-trace takes one rule set (--rules), the one the trace ran under");
        return ExitCode::from(2);
    };
    let config = config_of(cli, rules, cli.first_seed);
    let mode = if cli.unbounded {
        Mode::Unbounded
    } else {
        Mode::Resume
    };
    match validate_file_with(&model_config(&config), &config, trace, mode) {
        Ok(s) => {
            println!("{}: fits ({})", trace.display(), s.describe_skipped());
            ExitCode::SUCCESS
        }
        Err(m) => {
            println!("{}: {m}", trace.display());
            ExitCode::FAILURE
        }
    }
}

fn soak(cli: &Cli, rules: RuleSet) -> Result<Tally, String> {
    let started = Instant::now();
    let mut t = Tally::default();
    for (i, seed) in (cli.first_seed..cli.first_seed + cli.seeds).enumerate() {
        eprint!(
            "{rules:?} seed {seed} ({} of {}): running {} s, then validating... ",
            i + 1,
            cli.seeds,
            cli.seconds
        );
        let _ = std::io::stderr().flush();
        let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
        let kept_before = t.misfits.len() + t.unhealed.len() + t.unbounded_misfits.len();
        let config = config_of(cli, rules, seed);
        let run = validated_run(config.clone(), dir.path())
            .map_err(|e| format!("{rules:?} seed {seed}: the run failed: {e}"))?;
        eprintln!("done");
        if let Ok(s) = &run.validation {
            t.events += s.events + s.events_skipped;
            t.validated += s.events;
            if cli.compare_without_resuming {
                let trace = dir.path().join("trace.jsonl");
                t.validated_before +=
                    match validate_file_with(&model_config(&config), &config, &trace, Mode::Window)
                    {
                        Ok(s) => s.events,
                        Err(m) => m.seq,
                    };
            }
        }
        if cli.unbounded {
            let trace = dir.path().join("trace.jsonl");
            let all = highwater::cluster::concurrent::read_trace_file(&trace)
                .map_or(0, |e| e.count() as u64);
            t.events_all += all;
            t.run_seconds += run.report.produce_elapsed.as_secs_f64();
            let at = Instant::now();
            match validate_file_with(&model_config(&config), &config, &trace, Mode::Unbounded) {
                Ok(s) => {
                    t.unbounded += s.events;
                    t.unbounded_reads += s.reads;
                    t.unbounded_records_read += s.records_read_visible;
                    if let Some((seq, p)) = s.broken_properties.first() {
                        t.unbounded_broken
                            .push(format!("seed {seed}: at event {seq}, {p}"));
                    }
                }
                Err(m) => {
                    t.unbounded += m.seq;
                    let kept = keep_trace(&cli.keep_traces, rules, seed, dir.path());
                    println!(
                        "{rules:?} seed {seed}: the trace does not fit the unbounded shape:\n{m}"
                    );
                    t.unbounded_misfits
                        .push(format!("seed {seed}: at event {} (trace {kept})", m.seq));
                }
            }
            t.unbounded_seconds += at.elapsed().as_secs_f64();
        }
        if let Some((seq, p)) = run.broken_properties().first() {
            t.broken.push(format!("seed {seed}: at event {seq}, {p}"));
        }
        let report = &run.report;
        if !report.unmet_goals.is_empty() {
            t.unmet
                .push(format!("seed {seed}: {}", report.unmet_goals.join("; ")));
        }
        let f = SoakFigures::of(report);
        t.runs += 1;
        t.healed += u64::from(f.healed);
        if !f.healed {
            let kept = keep_trace(&cli.keep_traces, rules, seed, dir.path());
            let stalled: Vec<String> = report
                .stalled_followers
                .iter()
                .map(|r| r.to_string())
                .collect();
            t.unhealed.push(format!(
                "seed {seed}: followers with no progress in the settle phase: [{}]; trace {kept}",
                stalled.join(", ")
            ));
        }
        let validation = match &run.validation {
            Ok(s) if s.whole() => {
                t.whole += 1;
                run.describe()
            }
            Ok(s) => {
                t.beyond += 1;
                t.beyond_validated += s.events;
                t.beyond_skipped += s.events_skipped;
                t.resumptions += s.resumptions;
                run.describe()
            }
            // Not returned by `validated_run` (it resumes past the bounds);
            // counted the same should it be.
            Err(m) if m.kind == MisfitKind::BeyondModel => {
                t.beyond += 1;
                t.beyond_validated += m.seq;
                run.describe()
            }
            Err(m) => {
                let kept = keep_trace(&cli.keep_traces, rules, seed, dir.path());
                println!("{rules:?} seed {seed}: the trace is not a behaviour of the model:\n{m}");
                t.misfits.push(format!("seed {seed}: trace {kept}"));
                format!("does not fit at event {} (trace {kept})", m.seq)
            }
        };
        let validation = if cli.keep_every_trace && !validation.contains("(trace kept") {
            let kept = keep_trace(&cli.keep_traces, rules, seed, dir.path());
            format!("{validation} (trace {kept})")
        } else {
            validation
        };
        println!(
            "{rules:?} seed {seed}: sent {} acked {} lost {} vanished {} disagreeing-below-hw {} \
             faults {} healed {}{}; trace: {validation}",
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
        if let Some(to) = &cli.pictures {
            draw(to, cli, rules, seed, dir.path(), &run);
        }
        let kept = t.misfits.len() + t.unhealed.len() + t.unbounded_misfits.len() > kept_before;
        if kept || cli.keep_every_trace {
            draw(&cli.keep_traces, cli, rules, seed, dir.path(), &run);
        }
        t.figures.records_sent += f.records_sent;
        t.figures.acknowledged += f.acknowledged;
        t.figures.lost += f.lost;
        t.figures.vanished += f.vanished;
        t.figures.disagreeing_below_hw += f.disagreeing_below_hw;
        t.figures.faults += f.faults;
        if f.loss() && t.first_loss.is_none() {
            t.first_loss = Some((seed, started.elapsed()));
            if cli.stop_at_loss {
                break;
            }
        }
    }
    Ok(t)
}

/// Copies a misfit's trace out of the run's temporary directory; says
/// where it is (or why it could not be kept).
fn keep_trace(to: &Path, rules: RuleSet, seed: u64, run_dir: &Path) -> String {
    let from = run_dir.join("trace.jsonl");
    let dest = to.join(format!("{rules:?}-seed-{seed}.jsonl").to_lowercase());
    match std::fs::create_dir_all(to).and_then(|()| std::fs::copy(&from, &dest)) {
        Ok(_) => format!("kept at {}", dest.display()),
        Err(e) => format!("not kept ({} to {}: {e})", from.display(), dest.display()),
    }
}

/// Draws a run's pictures into `to/<rules>-seed-<n>/`; says where (or why
/// not).
fn draw(to: &Path, cli: &Cli, rules: RuleSet, seed: u64, run_dir: &Path, run: &ValidatedRun) {
    let f = SoakFigures::of(&run.report);
    let title = format!(
        "highwater-soak --rules {rules:?} seed {seed}, {} s{}: {} acknowledged, {} lost, {} faults",
        cli.seconds,
        if cli.paced { " paced" } else { "" },
        f.acknowledged,
        f.lost,
        f.faults
    );
    let dir = to.join(format!("{rules:?}-seed-{seed}").to_lowercase());
    match pictures::of_validated_run(&dir, &title, &run_dir.join("trace.jsonl"), run) {
        Ok(_) => println!("{rules:?} seed {seed}: pictures in {}", dir.display()),
        Err(e) => println!("{rules:?} seed {seed}: no pictures: {e}"),
    }
}

fn print_tally(cli: &Cli, rules: RuleSet, t: &Tally) {
    let f = &t.figures;
    let paced = if cli.paced { ", paced" } else { "" };
    println!(
        "rules: {rules:?}, {} run(s) of {} s{paced}",
        t.runs, cli.seconds
    );
    println!("records sent:                 {}", f.records_sent);
    println!("acknowledged:                 {}", f.acknowledged);
    println!("acknowledged and lost:        {}", f.lost);
    println!("consumed, later vanished:     {}", f.vanished);
    println!("logs disagreeing below HW:    {}", f.disagreeing_below_hw);
    println!("traces validated whole:       {} of {}", t.whole, t.runs);
    println!(
        "traces beyond model bounds:   {} ({} events validated, {} skipped, validation resumed {} \
         times)",
        t.beyond, t.beyond_validated, t.beyond_skipped, t.resumptions
    );
    let pct = |n: u64| 100.0 * n as f64 / t.events.max(1) as f64;
    println!(
        "events validated:             {} of {} ({:.1}%) in the traces that fit",
        t.validated,
        t.events,
        pct(t.validated)
    );
    if cli.compare_without_resuming {
        println!(
            "  without resuming:           {} ({:.1}%)",
            t.validated_before,
            pct(t.validated_before)
        );
    }
    if cli.unbounded {
        println!(
            "unbounded shape:              {} of {} events validated ({:.1}%), {} misfit(s); \
             {:.0} events/s validated, the driver {:.0} events/s",
            t.unbounded,
            t.events_all,
            100.0 * t.unbounded as f64 / t.events_all.max(1) as f64,
            t.unbounded_misfits.len(),
            t.unbounded as f64 / t.unbounded_seconds.max(1e-9),
            t.events_all as f64 / t.run_seconds.max(1e-9),
        );
        for m in &t.unbounded_misfits {
            println!("  {m}");
        }
        println!(
            "  consumer reads checked:     {} ({} records read, each visible in the model)",
            t.unbounded_reads, t.unbounded_records_read
        );
        println!(
            "  breaking a property:        {} (at a step validated in the unbounded shape)",
            t.unbounded_broken.len()
        );
        for b in &t.unbounded_broken {
            println!("    {b}");
        }
    }
    println!("traces that do not fit:       {}", t.misfits.len());
    for m in &t.misfits {
        println!("  {m}");
    }
    println!("traces breaking a property:   {}", t.broken.len());
    for b in &t.broken {
        println!("  {b}");
    }
    if !t.unmet.is_empty() {
        println!("runs stopped short of their goals: {}", t.unmet.len());
        for u in &t.unmet {
            println!("  {u}");
        }
    }
    println!("faults injected:              {}", f.faults);
    println!("healed after the last fault:  {} of {}", t.healed, t.runs);
    for u in &t.unhealed {
        println!("  not healed: {u}");
    }
    match t.first_loss {
        Some((seed, at)) => println!(
            "first loss:                   seed {seed}, within {:.1} s (runs and their validation)",
            at.as_secs_f64()
        ),
        None => println!("first loss:                   none"),
    }
}
