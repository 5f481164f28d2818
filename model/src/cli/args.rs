//! The command line: subcommands, flags, their ranges, and the checks that
//! turn flags into a configuration and run options (or a clear error).

use clap::{Args, Parser, Subcommand};
use highwater_checker::distributed::Cluster;
use highwater_checker::memory::{Budget, BudgetFlaw};
use highwater_model::config::{Acks, Config, HwCheckpoint, Mutation, Truncation};
use highwater_model::presets::{Expect, Preset, PRESETS};
use highwater_model::progress;
use highwater_model::properties;
use highwater_model::rules::Rule;
use highwater_model::run::{RunOptions, Search, StopAt};
use std::time::Duration;

/// `highwater check`'s exit statuses (`run::exit`), for `--help`.
macro_rules! exit_status_help {
    () => {
        "Exit status (TLC's codes where they meet):\n  \
        0    every verdict as expected (with no expectation: nothing broke in a search that ran to its end)\n  \
        1    not as expected: an expected counterexample not found, a sometimes-property not reached\n  \
        2    bad usage: flags, input files, or an output that cannot be written\n  \
        3    stopped (--seconds, --max-states) before it could decide, or random walks asked to prove a property\n  \
        12   an always-property expected to hold has a counterexample (TLC: safety violation)\n  \
        13   a progress property expected to hold has a stuck state (TLC: liveness violation)\n  \
        130  interrupted by Ctrl-C\n  \
        152  out of --memory-budget: stopped before it could decide, or refused at once (TLC: state space too large)"
    };
}

#[derive(Parser)]
#[command(
    name = "highwater",
    version,
    about = "Model-check Kafka's partition replication: leader election, ISR, high watermark, acks, truncation, crashes",
    long_about = concat!("Model-check Kafka's partition replication exhaustively.\n\n\
        `highwater check` runs the default preset `safe` (today's rules) and shows every guarantee holding \
        and the partition able to heal; `highwater check --preset hw-truncation` (or any historical preset) \
        rediscovers a historical data-loss bug and prints its shortest counterexample. `highwater presets` \
        lists them all.\n\n", exit_status_help!())
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the model checker on a preset, with any bound or switch overridden.
    #[command(after_help = exit_status_help!())]
    Check(CheckArgs),
    /// List the presets: bounds, switches and expected verdict of each.
    #[command(after_long_help = highwater_model::presets::TLA_KIP320_DIFFERENCES)]
    Presets {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Serve the web explorer at once and check meanwhile: the page shows
    /// the check's progress, then the verdicts and a link to each
    /// counterexample.
    Explore(ExploreArgs),
    /// Replay a trace written by `check --trace-out` (any settings): check
    /// each step on the model and that the property breaks at the end; with
    /// --dir, also on the implementation's files (runs `highwater-replay`);
    /// with --under, re-run its actions under another rule.
    #[command(after_long_help = REPLAY_EXIT_STATUS)]
    Replay(ReplayArgs),
    /// Inspect Kafka-format partition directories (runs `highwater-dump-log`,
    /// the implementation's tool: `highwater dump-log --help`).
    #[command(name = "dump-log", disable_help_flag = true)]
    DumpLog {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Args)]
pub struct ReplayArgs {
    /// The ITF trace to replay.
    #[arg(long, value_name = "FILE")]
    pub trace: std::path::PathBuf,
    /// Also run it on the implementation, leaving each broker's data
    /// directory (Kafka's format) in this new or empty directory.
    #[arg(long, value_name = "DIR", conflicts_with_all = RuleArgs::FLAGS)]
    pub dir: Option<std::path::PathBuf>,
    /// Replace the broker directories an earlier replay left in --dir.
    #[arg(long, requires = "dir")]
    pub force: bool,
    /// In step tables, print only what changed at each step.
    #[arg(long)]
    pub diff: bool,
    #[command(flatten)]
    pub rules: RuleArgs,
    /// What the re-run under another rule must show, for an exit status:
    /// `holds` (the property holds in every state reached: every step runs,
    /// or the rule refuses one) or `counterexample` (it still breaks).
    /// Without it the re-run's verdict is printed and the exit status is 0.
    #[arg(long, value_name = "OUTCOME")]
    pub expect: Option<RerunExpect>,
}

/// Shown by `highwater replay --help`.
const REPLAY_EXIT_STATUS: &str = "\
Exit status: 0 the trace is a behaviour of the model under its own settings (each
step the model's; the always-property it names, if any, breaks at the last step and
not before), and with --under or a rule flag the re-run's verdict is printed (with
--expect, it is the one expected); with --dir, the status of `highwater-replay`.
1 the trace is not a behaviour of the model (the step, and the fields in which the
state written differs from the one the step leads to), or the re-run is not what
--expect says. 2 bad usage or an unreadable trace.";

/// `replay --expect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RerunExpect {
    /// The property holds in every state the re-run reaches.
    Holds,
    /// The property still breaks.
    Counterexample,
}

/// Another rule to re-run a trace's actions under: a preset's rules, and
/// any of these switches on top (of the trace's own rules without
/// --under). The trace's bounds stay.
#[derive(Args, Clone, Debug, Default)]
pub struct RuleArgs {
    /// Re-run the trace's actions from the initial state under this
    /// preset's rules (its acks, min.insync.replicas, truncation, fencing,
    /// ELR, elections, HW checkpoint, mutation), the trace's bounds kept.
    #[arg(long, value_name = "PRESET", value_parser = preset_parser())]
    pub under: Option<String>,
    /// min.insync.replicas (1 to the replica count).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=5))]
    pub min_isr: Option<u8>,
    /// Producer acks: 0, 1 or all.
    #[arg(long)]
    pub acks: Option<Acks>,
    /// Where a new follower truncates: hw, epoch, epoch-iterative, on-fetch
    /// (`highwater check --help` says more of each switch).
    #[arg(long)]
    pub truncation: Option<Truncation>,
    /// KIP-320 fencing (on or off).
    #[arg(long, value_parser = on_off_parser())]
    pub fencing: Option<bool>,
    /// KIP-966 eligible leader replicas (on or off).
    #[arg(long, value_parser = on_off_parser())]
    pub elr: Option<bool>,
    /// KIP-966's last-known-leader election (on or off).
    #[arg(long, value_parser = on_off_parser())]
    pub last_known_leader: Option<bool>,
    /// Unclean leader election (on or off).
    #[arg(long, value_parser = on_off_parser())]
    pub unclean_election: Option<bool>,
    /// When the HW is checkpointed: every-change or periodic.
    #[arg(long)]
    pub hw_checkpoint: Option<HwCheckpoint>,
    /// A deliberately broken rule (as `check --mutation`).
    #[arg(long)]
    pub mutation: Option<Mutation>,
}

impl RuleArgs {
    /// The flags' ids, for what conflicts with a re-run.
    const FLAGS: [&'static str; 10] = [
        "under",
        "min_isr",
        "acks",
        "truncation",
        "fencing",
        "elr",
        "last_known_leader",
        "unclean_election",
        "hw_checkpoint",
        "mutation",
    ];

    /// The configuration to re-run a trace of `own` under: `own`'s bounds,
    /// the rules of --under (else `own`'s), the switches on top; None when
    /// no flag asks for a re-run.
    pub fn resolve(
        &self,
        own: &Config,
    ) -> Result<Option<(Config, Option<&'static Preset>)>, String> {
        let preset = match &self.under {
            Some(name) => Some(Preset::find(name).ok_or_else(|| format!("unknown preset {name}"))?),
            None => None,
        };
        let mut c = highwater_model::rerun::with_rules(own, &preset.map_or(*own, |p| p.config));
        let mut asked = preset.is_some();
        macro_rules! set {
            ($field:ident) => {
                if let Some(v) = self.$field {
                    c.$field = v;
                    asked = true;
                }
            };
        }
        set!(min_isr);
        set!(acks);
        set!(truncation);
        set!(fencing);
        set!(elr);
        set!(last_known_leader);
        set!(unclean_election);
        set!(hw_checkpoint);
        if let Some(m) = self.mutation {
            c.mutation = Some(m);
            asked = true;
        }
        if !asked {
            return Ok(None);
        }
        c.validate().map_err(|e| e.to_string())?;
        Ok(Some((c, preset)))
    }
}

/// Bounds and switches; each overrides the preset's value.
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// Preset to start from (see `highwater presets`).
    #[arg(long, short, default_value = "safe", value_parser = preset_parser())]
    pub preset: String,
    /// Number of replicas (2-5).
    #[arg(long, value_parser = clap::value_parser!(u8).range(2..=5))]
    pub replicas: Option<u8>,
    /// Records the producer writes (1-4).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    pub records: Option<u8>,
    /// Highest leader epoch the controller may assign (0-4; the first is 0).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=4))]
    pub max_epoch: Option<u8>,
    /// min.insync.replicas (1 to the replica count).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=5))]
    pub min_isr: Option<u8>,
    /// Producer acks: 0, 1 or all.
    #[arg(long)]
    pub acks: Option<Acks>,
    /// Where a new follower truncates: hw (before KIP-101), epoch (KIP-101's
    /// single leader-epoch lookup), epoch-iterative (KIP-279), on-fetch
    /// (today: the fetch response carries the diverging epoch).
    #[arg(long)]
    pub truncation: Option<Truncation>,
    /// KIP-320 fencing (on or off): fetch and truncation fenced by the
    /// current leader epoch, ISR join only from the leader's epoch start.
    #[arg(long, value_parser = on_off_parser())]
    pub fencing: Option<bool>,
    /// KIP-966 eligible leader replicas (on or off).
    #[arg(long, value_parser = on_off_parser())]
    pub elr: Option<bool>,
    /// KIP-966's last-known-leader election (with the ELR; Kafka 4.x: on).
    #[arg(long, value_parser = on_off_parser())]
    pub last_known_leader: Option<bool>,
    /// Allow unclean leader election (on or off).
    #[arg(long, value_parser = on_off_parser())]
    pub unclean_election: Option<bool>,
    /// When the HW is checkpointed: every-change, or periodic (Kafka's
    /// replica.high.watermark.checkpoint.interval.ms; an unclean crash
    /// brings back an older HW).
    #[arg(long)]
    pub hw_checkpoint: Option<HwCheckpoint>,
    /// Clean crashes (log kept) allowed in a run (0-3).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub clean_crashes: Option<u8>,
    /// Unclean crashes (unflushed suffix lost) allowed in a run (0-3).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub unclean_crashes: Option<u8>,
    /// Clean elections while the controller still names a leader (controlled
    /// shutdown, preferred-leader election, or failover from a leader not yet
    /// removed) allowed in a run (0-4).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=4))]
    pub leader_moves: Option<u8>,
    /// A deliberately broken rule, to see a check fail: expand-on-leader-hw
    /// (a follower rejoins the ISR only once the leader's HW reaches its
    /// epoch start: the partition can stall), expand-at-hw (a follower
    /// rejoins once it reaches the HW, short of the leader's epoch start:
    /// strong ISR breaks), no-elr-election (the controller
    /// never elects from the ELR), elr-election-settles (an ELR election
    /// empties the rest of the ELR, highwater's rule before Kafka's),
    /// hw-over-isr-only (the HW never waits for a caught-up follower
    /// outside the ISR: it only moves sooner, no property breaks),
    /// no-last-fetched-epoch (under on-fetch the leader never sees a
    /// divergence: strong ISR breaks), fenced-still-acceptable (a live
    /// broker the controller fenced is still an acceptable leader: no
    /// property breaks; trace validation notices it), no-restart (a crashed
    /// broker never comes back: the partition never heals), never-acknowledge
    /// (every acks=all write answered with an error: safe, vacuously; the
    /// preset's sometimes-properties notice, see --expect preset),
    /// hw-past-leo (a leader's HW may pass its LEO: the offset checks
    /// notice), only-true-leader-learns-isr (a leader left behind in an
    /// epoch the controller has left never learns that epoch's last ISR:
    /// safe, fewer behaviours; trace validation notices it),
    /// zombie-learns-only-last-isr (such a leader learns only its epoch's
    /// last ISR, not the changes before it: trace validation notices it).
    #[arg(long)]
    pub mutation: Option<Mutation>,
    /// One of today's rules knocked out (dropped, or a bound of it moved by
    /// one), to see which property needs it: the rules and their knock-outs
    /// are listed in model/src/rules.rs.
    #[arg(long, value_name = "RULE", hide_possible_values = true)]
    pub knock_out: Option<Rule>,
}

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub search: SearchArgs,
    /// What the run must show, for a verdict and an exit status when the
    /// preset is overridden: `holds` (no counterexample), `counterexample`
    /// (some property breaks), a property's name (that one breaks), or
    /// `preset` (what the preset expects, its sometimes-properties included:
    /// a mutation run against `safe`'s whole expectation). By default a
    /// preset's own expectation; an overridden run expects nothing to break.
    #[arg(long, value_parser = expect_parser())]
    pub expect: Option<ExpectArg>,
    /// Print one JSON report on stdout instead of text (progress then goes
    /// to stderr). Its shape is `run::Report`, versioned by its `schema`.
    #[arg(long)]
    pub json: bool,
    /// No progress lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// In step tables, print only what changed at each step.
    #[arg(long)]
    pub diff: bool,
    /// Write each counterexample to this directory as an ITF trace (the
    /// Informal Trace Format of Apalache and Quint), to replay with
    /// `highwater replay --trace FILE`. The directory is created and checked
    /// before the search; a trace file already there is refused unless
    /// --force.
    #[arg(long, value_name = "DIR")]
    pub trace_out: Option<std::path::PathBuf>,
    /// Overwrite trace files already in --trace-out.
    #[arg(long, requires = "trace_out")]
    pub force: bool,
}

/// How to search, and when to stop.
#[derive(Args)]
pub struct SearchArgs {
    /// Checker threads (default: all cores; at most four per core).
    #[arg(long, short)]
    pub threads: Option<usize>,
    /// stateright's exhaustive depth-first search with symmetry reduction
    /// (checks safety only: no progress check, and shortest counterexamples
    /// need a second search). The default is highwater's own breadth-first
    /// search of the state graph: safety, shortest counterexamples and the
    /// progress check in one pass.
    #[arg(long, conflicts_with_all = ["bfs", "simulate"])]
    pub dfs: bool,
    /// stateright's exhaustive breadth-first search (no symmetry reduction:
    /// slower, more memory; no progress check).
    #[arg(long, conflicts_with = "simulate")]
    pub bfs: bool,
    /// Random walks instead of an exhaustive search (proves nothing; finds bugs fast).
    /// Runs for --seconds (default 10).
    #[arg(long)]
    pub simulate: bool,
    /// Seed of the random walks.
    #[arg(long, requires = "simulate")]
    pub seed: Option<u64>,
    /// Longest random walk (1-10000).
    #[arg(long, requires = "simulate", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub max_depth: Option<u64>,
    /// Stop after this many seconds and report what was found (any search).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: Option<u64>,
    /// Stop after this many distinct states and report what was found.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_states: Option<u64>,
    /// The memory the whole process may use: bytes, or with a suffix KiB,
    /// MiB, GiB or TiB (powers of 1024; KB, MB, GB and TB too): 8GiB,
    /// 512MiB. A preset of known size that would not fit is refused at
    /// once, with an estimate; any other run stops before a step that
    /// would not fit and reports what it saw (exit status 152), rather than
    /// be killed when memory runs out. Default search, one process.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_budget: Option<u64>,
    /// Check every property to the end, even when a counterexample is
    /// found (a historical preset, or an overridden run, stops at the
    /// first by default).
    #[arg(long, conflicts_with = "simulate")]
    pub exhaustive: bool,
    /// Distributed on timely dataflow: worker threads in each process
    /// (timely's -w). Any of --workers, --processes, --process or
    /// --hostfile runs the default search distributed, with the same
    /// report as one process.
    #[arg(long, short = 'w', value_name = "N", help_heading = "Distributed (timely dataflow)",
          conflicts_with_all = ["threads", "dfs", "bfs", "simulate"])]
    pub workers: Option<usize>,
    /// Processes of a distributed check (timely's -n), each started with
    /// the same flags and its own --process.
    #[arg(long, short = 'n', value_name = "N", help_heading = "Distributed (timely dataflow)",
          conflicts_with_all = ["threads", "dfs", "bfs", "simulate"])]
    pub processes: Option<usize>,
    /// This process's index, 0 to --processes minus 1 (timely's -p; here
    /// -p is --preset). Process 0 prints the report.
    #[arg(long, value_name = "I", help_heading = "Distributed (timely dataflow)",
          conflicts_with_all = ["threads", "dfs", "bfs", "simulate"])]
    pub process: Option<usize>,
    /// Where the processes listen: one host:port per line, line i for
    /// process i (timely's -h; here -h is --help). Default: 127.0.0.1,
    /// ports 2101, 2102, ...
    #[arg(long, value_name = "FILE", help_heading = "Distributed (timely dataflow)",
          conflicts_with_all = ["threads", "dfs", "bfs", "simulate"])]
    pub hostfile: Option<std::path::PathBuf>,
    /// How long a process waits for the others to start, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, help_heading = "Distributed (timely dataflow)",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub connect_timeout: u64,
    /// A mistake planted in the distributed engine, for the tests that
    /// show its comparison with one process failing.
    #[arg(long, hide = true, value_name = "FLAW")]
    pub planted_flaw: Option<PlantedFlaw>,
}

/// `--planted-flaw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PlantedFlaw {
    LastParentWins,
    DropSomeSent,
    /// The memory budget is never checked (`checker/src/memory.rs`).
    BudgetUnchecked,
}

impl SearchArgs {
    /// The distributed run asked for, if any: its workers and processes,
    /// checked, and the address of each process.
    pub fn cluster(&self, token: u64) -> Result<Option<Cluster>, String> {
        if self.workers.is_none()
            && self.processes.is_none()
            && self.process.is_none()
            && self.hostfile.is_none()
        {
            return Ok(None);
        }
        let processes = self.processes.unwrap_or(1);
        let addresses = match &self.hostfile {
            Some(path) => highwater_checker::distributed::read_hostfile(path)?,
            None => Cluster::localhost(processes, 2101),
        };
        let cluster = Cluster {
            workers: self.workers.unwrap_or(1),
            processes,
            process: self.process.unwrap_or(0),
            addresses,
            connect_timeout: Duration::from_secs(self.connect_timeout),
            token,
        };
        cluster.validate()?;
        Ok(Some(cluster))
    }

    /// The planted flaw, as the engine names it.
    pub fn flaw(&self) -> highwater_checker::distributed::Flaw {
        use highwater_checker::distributed::Flaw;
        match self.planted_flaw {
            None | Some(PlantedFlaw::BudgetUnchecked) => Flaw::None,
            Some(PlantedFlaw::LastParentWins) => Flaw::LastParentWins,
            Some(PlantedFlaw::DropSomeSent) => Flaw::DropSomeSent,
        }
    }

    /// `--memory-budget`, with the planted flaw that unchecks it.
    pub fn memory_budget(&self) -> Option<Budget> {
        self.memory_budget.map(|bytes| Budget {
            bytes,
            flaw: match self.planted_flaw {
                Some(PlantedFlaw::BudgetUnchecked) => BudgetFlaw::Unchecked,
                _ => BudgetFlaw::None,
            },
        })
    }
}

#[derive(Args)]
pub struct ExploreArgs {
    /// The run to explore, with the same flags as `check` (`--json` and
    /// `--trace-out` do not apply).
    #[command(flatten)]
    pub check: CheckArgs,
    /// Address to serve the explorer on (a loopback address: the
    /// explorers serve this machine alone).
    #[arg(long, default_value = "127.0.0.1:3000")]
    pub addr: String,
    /// Address for stateright's own web explorer (loopback too), which
    /// starts when the check ends (at once for --trace) [default: --addr's
    /// port + 1 on its host; any free port when --addr's port is 0].
    #[arg(long, value_name = "ADDR")]
    pub stateright_addr: Option<String>,
    /// Explore a saved trace (`check --trace-out`) under its own settings,
    /// instead of checking first.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
}

/// `--expect`, parsed.
#[derive(Clone, Copy, Debug)]
pub enum ExpectArg {
    Holds,
    Counterexample,
    Preset,
    Breaks(&'static str),
}

fn expect_parser() -> clap::builder::ValueParser {
    clap::builder::ValueParser::new(|s: &str| -> Result<ExpectArg, String> {
        match s {
            "holds" => return Ok(ExpectArg::Holds),
            "counterexample" => return Ok(ExpectArg::Counterexample),
            "preset" => return Ok(ExpectArg::Preset),
            _ => {}
        }
        let names = breakable_properties();
        names
            .iter()
            .find(|n| **n == s)
            .map(|n| ExpectArg::Breaks(n))
            .ok_or_else(|| {
                format!(
                    "expected holds, counterexample, preset, or a property that can break: {}",
                    names
                        .iter()
                        .map(|n| format!("\"{n}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    })
}

/// The always- and progress properties, by name.
fn breakable_properties() -> Vec<&'static str> {
    let mut names = properties::safety_names();
    names.extend([progress::RECOVERABLE, progress::ACKED_REPLICATED]);
    names
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

/// A configuration to check, with where it came from.
pub struct Resolved {
    pub preset: &'static Preset,
    pub config: Config,
    /// Whether any flag changed the preset.
    pub changed: bool,
}

impl ModelArgs {
    /// The preset with the overrides applied, validated.
    pub fn resolve(&self) -> Result<Resolved, String> {
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
        set!(fencing);
        set!(elr);
        set!(last_known_leader);
        set!(unclean_election);
        set!(hw_checkpoint);
        set!(clean_crashes);
        set!(unclean_crashes);
        set!(leader_moves);
        if let Some(m) = self.mutation {
            changed |= c.mutation != Some(m);
            c.mutation = Some(m);
        }
        if let Some(r) = self.knock_out {
            changed |= c.knock_out != Some(r);
            c.knock_out = Some(r);
        }
        c.validate().map_err(|e| e.to_string())?;
        Ok(Resolved {
            preset,
            config: c,
            changed,
        })
    }
}

/// A bound's flag and how to read it from a configuration.
type Bound = (&'static str, fn(&Config) -> u8);

/// Warnings for bounds beyond every measured preset: the run may take far
/// longer than any of them.
pub fn bound_warnings(cfg: &Config) -> Vec<String> {
    let measured: Vec<&Preset> = PRESETS.iter().filter(|p| p.measured.is_some()).collect();
    let dims: [Bound; 6] = [
        ("--replicas", |c| c.replicas),
        ("--records", |c| c.records),
        ("--max-epoch", |c| c.max_epoch),
        ("--clean-crashes", |c| c.clean_crashes),
        ("--unclean-crashes", |c| c.unclean_crashes),
        ("--leader-moves", |c| c.leader_moves),
    ];
    // The measured preset nearest to this configuration, bound by bound.
    let distance = |p: &Preset| -> u32 {
        dims.iter()
            .map(|(_, d)| u32::from(d(cfg).abs_diff(d(&p.config))))
            .sum()
    };
    let Some(nearest) = measured.iter().min_by_key(|p| distance(p)) else {
        return vec![];
    };
    let m = nearest.measured.expect("measured");
    let mut out = Vec::new();
    for (flag, dim) in dims {
        if measured.iter().all(|p| dim(cfg) > dim(&p.config)) {
            out.push(format!(
                "{flag} {} is beyond every measured preset; the nearest, {} ({flag} {}), has {} \
                 states ({:.0} s on 2 threads): each step up multiplies the state space, so \
                 consider --seconds or --max-states",
                dim(cfg),
                nearest.name,
                dim(&nearest.config),
                m.unique_states,
                m.seconds
            ));
        }
    }
    out
}

/// Checker threads: all cores by default; at most four per core.
pub fn threads(requested: Option<usize>) -> Result<usize, String> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    match requested {
        Some(0) => Err("--threads must be at least 1".to_string()),
        Some(n) if n > 4 * cores => Err(format!(
            "--threads {n} is more than this machine can use: it has {cores} cores (at most {})",
            4 * cores
        )),
        Some(n) => Ok(n),
        None => Ok(cores),
    }
}

impl CheckArgs {
    /// The expectation a run is held to: `--expect`, else the preset's
    /// own when nothing is overridden.
    pub fn expectation(&self, r: &Resolved) -> Option<Expect> {
        match self.expect {
            Some(ExpectArg::Holds) => Some(Expect::NoCounterexample),
            Some(ExpectArg::Counterexample) => Some(Expect::AnyCounterexample),
            Some(ExpectArg::Breaks(name)) => Some(Expect::Breaks(name)),
            Some(ExpectArg::Preset) => Some(r.preset.expect),
            None => (!r.changed).then_some(r.preset.expect),
        }
    }

    /// Run options from the flags, checked for combinations that would be
    /// ignored.
    pub fn run_options(&self, expect: Option<Expect>) -> Result<RunOptions, String> {
        if self.diff && self.json {
            return Err("--diff shapes the text report; --json has none".to_string());
        }
        let s = &self.search;
        let search = if s.simulate {
            Search::Simulate {
                seed: s.seed.unwrap_or(0),
                max_depth: s.max_depth.unwrap_or(80) as usize,
            }
        } else if s.bfs {
            Search::Bfs
        } else if s.dfs {
            Search::Dfs
        } else {
            Search::Graph
        };
        let is_progress =
            |name: &str| name == progress::RECOVERABLE || name == progress::ACKED_REPLICATED;
        if let Some(Expect::Breaks(name)) = expect {
            if is_progress(name) && search != Search::Graph {
                return Err(format!(
                    "--expect \"{name}\" is a progress property: only the default search checks it \
                     (drop --dfs, --bfs or --simulate)"
                ));
            }
        }
        // Stop at the first counterexample that settles the expectation,
        // unless asked to check everything; a progress property is decided
        // only by the complete graph.
        let stop_at = match expect {
            _ if s.exhaustive => StopAt::Never,
            Some(Expect::Breaks(name)) if !is_progress(name) => StopAt::Property(name),
            // A counterexample decides each of these: the one expected, or
            // one that should not be (TLC stops at its first violation too).
            Some(Expect::AnyCounterexample | Expect::NoCounterexample) | None => {
                StopAt::AnyCounterexample
            }
            _ => StopAt::Never,
        };
        if s.memory_budget.is_some() && search != Search::Graph {
            return Err(
                "--memory-budget is kept by the default search only (drop --dfs, --bfs or --simulate)"
                    .to_string(),
            );
        }
        let time_limit = match (s.seconds, s.simulate) {
            (Some(t), _) => Some(Duration::from_secs(t)),
            (None, true) => Some(Duration::from_secs(10)),
            (None, false) => None,
        };
        Ok(RunOptions {
            threads: threads(s.threads)?,
            search,
            time_limit,
            max_states: s.max_states,
            stop_at,
            interrupt: None,
            memory_budget: s.memory_budget(),
            expected_states: None,
        })
    }
}

/// A size in bytes: a whole number, alone or with a unit (B, KiB, MiB,
/// GiB, TiB, or KB, MB, GB, TB, all powers of 1024; any case, a space
/// allowed before it). `--memory-budget`'s parser.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(format!(
            "{text:?} is not a size: a whole number of bytes, or one with a unit (KiB, MiB, GiB, \
                 TiB), such as 8GiB"
        ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size: it needs a whole number, such as 8GiB"))?;
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is more bytes than this program can count"))?;
    if bytes == 0 {
        return Err("a memory budget of 0 bytes leaves no room for any search".to_string());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_plain_bytes_and_binary_units() {
        for (text, bytes) in [
            ("1048576", 1 << 20),
            ("1MiB", 1 << 20),
            ("8GiB", 8 << 30),
            ("8 GiB", 8 << 30),
            ("8gib", 8 << 30),
            ("512M", 512 << 20),
            ("64KB", 64 << 10),
            ("2TiB", 2 << 40),
            ("100B", 100),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn a_bad_size_is_a_clear_error() {
        for (text, says) in [
            ("", "whole number"),
            ("GiB", "whole number"),
            ("-1GiB", "not a size"),
            ("1.5GiB", "not a size"),
            ("8 GiBs", "not a size"),
            ("8XB", "not a size"),
            ("0", "0 bytes"),
            ("0MiB", "0 bytes"),
            ("99999999999TiB", "more bytes"),
            ("18446744073709551616", "whole number"),
        ] {
            let err = parse_size(text).expect_err(text);
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
