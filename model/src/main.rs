//! `highwater`: check the partition model, list presets, serve the explorer.

use clap::{Args, Parser, Subcommand};
use highwater_model::config::{on_off, Acks, Config, Truncation};
use highwater_model::presets::{Expect, Preset, PRESETS};
use highwater_model::render;
use highwater_model::run::{self, Progress, Report, RunOptions, Search, Verdict};
use highwater_model::PartitionModel;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "highwater",
    version,
    about = "Model-check Kafka's partition replication: leader election, ISR, high watermark, acks, truncation, crashes",
    long_about = "Model-check Kafka's partition replication exhaustively.\n\n\
        `highwater check` runs the default preset `safe` (today's rules) and shows every guarantee holding; \
        `highwater check --preset hw-truncation` (or any historical preset) rediscovers a historical data-loss \
        bug and prints its shortest counterexample. `highwater presets` lists them all."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the model checker on a preset, with any bound or switch overridden.
    Check(CheckArgs),
    /// List the presets: bounds, switches and expected verdict of each.
    #[command(after_long_help = highwater_model::presets::TLA_KIP320_DIFFERENCES)]
    Presets {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Serve stateright's web explorer, with a link to each counterexample.
    Explore(ExploreArgs),
}

/// Bounds and switches; each overrides the preset's value.
#[derive(Args, Clone, Debug)]
struct ModelArgs {
    /// Preset to start from (see `highwater presets`).
    #[arg(long, short, default_value = "safe", value_parser = preset_parser())]
    preset: String,
    /// Number of replicas (2-5).
    #[arg(long)]
    replicas: Option<u8>,
    /// Records the producer writes (1-4).
    #[arg(long)]
    records: Option<u8>,
    /// Highest leader epoch the controller may assign (0-4; the first is 0).
    #[arg(long)]
    max_epoch: Option<u8>,
    /// min.insync.replicas.
    #[arg(long)]
    min_isr: Option<u8>,
    /// Producer acks.
    #[arg(long)]
    acks: Option<Acks>,
    /// Follower truncation rule: hw (before KIP-101), epoch (KIP-101),
    /// epoch-iterative (KIP-279), fenced (KIP-320).
    #[arg(long)]
    truncation: Option<Truncation>,
    /// KIP-966 eligible leader replicas.
    #[arg(long, value_parser = on_off_parser())]
    elr: Option<bool>,
    /// KIP-966's last-known-leader election (with the ELR; Kafka 4.x: on).
    #[arg(long, value_parser = on_off_parser())]
    last_known_leader: Option<bool>,
    /// Allow unclean leader election.
    #[arg(long, value_parser = on_off_parser())]
    unclean_election: Option<bool>,
    /// Clean crashes (log kept) allowed in a run.
    #[arg(long)]
    clean_crashes: Option<u8>,
    /// Unclean crashes (unflushed suffix lost) allowed in a run.
    #[arg(long)]
    unclean_crashes: Option<u8>,
    /// Clean elections while the controller still names a leader (controlled
    /// shutdown, preferred-leader election, or failover from a leader not yet
    /// removed) allowed in a run.
    #[arg(long)]
    leader_moves: Option<u8>,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Checker threads (default: all cores).
    #[arg(long, short)]
    threads: Option<usize>,
    /// Exhaustive depth-first search with symmetry reduction (default).
    #[arg(long, conflicts_with_all = ["bfs", "simulate"])]
    dfs: bool,
    /// stateright's exhaustive breadth-first search (no symmetry reduction: slower, more memory).
    #[arg(long, conflicts_with = "simulate")]
    bfs: bool,
    /// Random walks instead of an exhaustive search (proves nothing; finds bugs fast).
    #[arg(long)]
    simulate: bool,
    /// Seed of the random walks.
    #[arg(long, requires = "simulate", default_value_t = 0)]
    seed: u64,
    /// Longest random walk.
    #[arg(long, requires = "simulate", default_value_t = 80)]
    max_depth: usize,
    /// Stop a simulation after this many seconds.
    #[arg(long, requires = "simulate", default_value_t = 10)]
    seconds: u64,
    /// Check every property even when the preset expects a counterexample
    /// (by default such a run stops at the first counterexample it finds).
    #[arg(long)]
    exhaustive: bool,
    /// Print one JSON report on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args)]
struct ExploreArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Address to serve the explorer on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    addr: String,
    /// Checker threads for finding counterexamples first.
    #[arg(long, short)]
    threads: Option<usize>,
}

fn preset_parser() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(Preset::names())
}

fn on_off_parser() -> clap::builder::ValueParser {
    clap::builder::ValueParser::new(|s: &str| match s {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(format!("expected on or off, got {s:?}")),
    })
}

impl ModelArgs {
    /// The preset with the overrides applied, validated.
    fn resolve(&self) -> Result<(&'static Preset, Config, bool), String> {
        let preset =
            Preset::find(&self.preset).ok_or_else(|| format!("unknown preset {}", self.preset))?;
        let mut c = preset.config;
        let mut changed = false;
        macro_rules! set {
            ($field:ident) => {
                if let Some(v) = self.$field {
                    changed |= c.$field != v;
                    c.$field = v;
                }
            };
        }
        set!(replicas);
        set!(records);
        set!(max_epoch);
        set!(min_isr);
        set!(acks);
        set!(truncation);
        set!(elr);
        set!(last_known_leader);
        set!(unclean_election);
        set!(clean_crashes);
        set!(unclean_crashes);
        set!(leader_moves);
        c.validate().map_err(|e| e.to_string())?;
        Ok((preset, c, changed))
    }
}

fn threads(requested: Option<usize>) -> Result<usize, String> {
    match requested {
        Some(0) => Err("--threads must be at least 1".to_string()),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map_or(2, |n| n.get())),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check(args),
        Command::Presets { json } => presets(json),
        Command::Explore(args) => explore(args),
    };
    match result {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn check(args: CheckArgs) -> Result<ExitCode, String> {
    let (preset, cfg, changed) = args.model.resolve()?;
    let search = if args.simulate {
        Search::Simulate {
            seed: args.seed,
            max_depth: args.max_depth,
        }
    } else if args.bfs {
        Search::Bfs
    } else {
        Search::Dfs
    };
    // With overrides the preset's expectation no longer applies.
    let expect = (!changed).then_some(preset.expect);
    let opts = RunOptions {
        threads: threads(args.threads)?,
        search,
        time_limit: args.simulate.then(|| Duration::from_secs(args.seconds)),
        stop_at_first: !args.exhaustive && matches!(expect, Some(Expect::Breaks(_))),
    };
    if !args.json {
        println!("highwater: checking {}", describe(preset, &cfg, changed));
        println!(
            "search: {} with {} thread(s)",
            search_text(search),
            opts.threads
        );
        if opts.stop_at_first {
            println!("stopping at the first counterexample (--exhaustive checks every property)");
        }
    }
    let quiet = args.quiet;
    let mut report = run::run(cfg, (!changed).then_some(preset.name), expect, &opts, |p| {
        if !quiet {
            eprintln!("{}", progress_line(&p));
        }
    });
    report.expected = expect.map(|_| preset.expectation_text());
    if args.json {
        let out = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        println!("{out}");
    } else {
        print_report(&report);
    }
    Ok(if report.mismatches.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn describe(preset: &Preset, cfg: &Config, changed: bool) -> String {
    if changed {
        format!("preset {} with overrides: {cfg}", preset.name)
    } else {
        format!("preset {}: {cfg}", preset.name)
    }
}

fn search_text(s: Search) -> String {
    match s {
        Search::Dfs => "exhaustive depth-first, symmetry-reduced".to_string(),
        Search::Bfs => "exhaustive breadth-first (no symmetry reduction)".to_string(),
        Search::Simulate { seed, max_depth } => {
            format!("random walks (seed {seed}, depth <= {max_depth}; not exhaustive)")
        }
    }
}

fn progress_line(p: &Progress) -> String {
    format!(
        "  {:>7.1}s  states {:>12}  unique {:>11}  depth {:>3}  {:>10.0} states/s",
        p.seconds,
        p.states,
        p.unique_states,
        p.max_depth,
        p.states_per_second()
    )
}

fn print_report(r: &Report) {
    let p = &r.progress;
    println!(
        "done in {:.1}s: {} states, {} unique, depth {}, {:.0} states/s{}",
        p.seconds,
        p.states,
        p.unique_states,
        p.max_depth,
        r.states_per_second,
        r.peak_memory_mib
            .map_or(String::new(), |m| format!(", peak memory {m:.0} MiB"))
    );
    if r.properties.iter().any(|p| p.counterexample.is_some()) {
        println!(
            "shortest counterexamples found in {:.1}s more (breadth-first, symmetry-reduced)",
            r.shortest_seconds
        );
    }
    println!();
    for prop in &r.properties {
        let verdict = match prop.verdict {
            Verdict::Holds => "holds",
            Verdict::Counterexample => "COUNTEREXAMPLE",
            Verdict::Reached => "reached",
            Verdict::NotReached => "not reached",
            Verdict::NoneFound => "no counterexample found (not exhaustive)",
            Verdict::NotChecked => "not checked (stopped at a counterexample)",
        };
        println!("  {:<9} {:<44} {verdict}", prop.kind, prop.name);
    }
    for prop in &r.properties {
        if let Some(steps) = &prop.counterexample {
            println!();
            println!(
                "Shortest counterexample to \"{}\" ({} steps):",
                prop.name,
                steps.len() - 1
            );
            let trace: Vec<_> = steps.iter().map(|s| s.raw).collect();
            print!("{}", render::step_table(&trace));
        }
    }
    println!();
    match (&r.expected, r.mismatches.is_empty()) {
        (Some(e), true) if r.search.exhaustive() => println!("verdict: as expected ({e})"),
        (Some(e), true) => println!(
            "verdict: nothing found against the expectation ({e}); a search that is not \
             exhaustive proves no property"
        ),
        (Some(e), false) => {
            println!("verdict: NOT as expected (expected: {e})");
            for m in &r.mismatches {
                println!("  - {m}");
            }
        }
        (None, _) => println!("verdict: no expectation (the preset was overridden)"),
    }
}

fn presets(json: bool) -> Result<ExitCode, String> {
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
    for p in PRESETS {
        let c = &p.config;
        println!("{:<17} {}", p.name, p.summary);
        println!(
            "{:<17} replicas={} records={} max-epoch={} min-isr={} acks={} truncation={} elr={} last-known-leader={} unclean-election={} crashes: clean={} unclean={} leader-moves={}",
            "",
            c.replicas,
            c.records,
            c.max_epoch,
            c.min_isr,
            c.acks,
            c.truncation,
            on_off(c.elr),
            on_off(c.last_known_leader),
            on_off(c.unclean_election),
            c.clean_crashes,
            c.unclean_crashes,
            c.leader_moves
        );
        println!("{:<17} expected: {}", "", p.expectation_text());
        if let Some(t) = p.tlc {
            println!(
                "{:<17} TLC on the TLA+ {} module: {} distinct states (depth {}); highwater: {} unique states (see `highwater presets --help`)",
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

fn explore(args: ExploreArgs) -> Result<ExitCode, String> {
    let (preset, cfg, changed) = args.model.resolve()?;
    // Bind first so that a busy or bad address is an error, not a panic in
    // the explorer's server.
    let probe = std::net::TcpListener::bind(&args.addr)
        .map_err(|e| format!("cannot serve on {}: {e}", args.addr))?;
    let addr = probe.local_addr().map_err(|e| e.to_string())?;
    drop(probe);
    println!("highwater: exploring {}", describe(preset, &cfg, changed));
    println!("looking for counterexamples first (exhaustive, symmetry-reduced)...");
    let opts = RunOptions {
        threads: threads(args.threads)?,
        search: Search::Dfs,
        time_limit: None,
        stop_at_first: false,
    };
    let report = run::run(cfg, None, None, &opts, |p| {
        eprintln!("{}", progress_line(&p))
    });
    let mut any = false;
    for prop in &report.properties {
        if let Some(steps) = &prop.counterexample {
            any = true;
            println!(
                "counterexample to \"{}\": http://{addr}/{}",
                prop.name,
                run::explorer_fragment(steps)
            );
        }
    }
    if !any {
        println!("no counterexamples: every always-property holds");
    }
    println!("explorer: http://{addr}/ (Ctrl-C to stop)");
    let _ = std::io::stdout().flush();
    use stateright::Model;
    PartitionModel::new(cfg).checker().serve(addr);
    Ok(ExitCode::SUCCESS)
}
