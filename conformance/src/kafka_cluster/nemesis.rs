//! The nemesis: a fault schedule drawn from a seed (so a run is replayed
//! from its seed alone, and printed before it runs), applied one fault at
//! a time to the broker that leads the partition, or to a follower, as
//! it stands when the fault comes.

use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::cluster::{Cluster, REPLICA_LAG_MS, SESSION_TIMEOUT_MS};
use super::programs::Programs;
use super::proxy::Link;
use super::{client, segment, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// kill -9, down for the hold, restarted.
    Kill,
    /// SIGSTOP shorter than the broker session timeout, then SIGCONT.
    PauseShort,
    /// SIGSTOP longer than the session timeout (the controller fences it).
    PauseLong,
    /// SIGTERM, waited for (a clean shutdown), down for the hold, restarted.
    CleanRestart,
    /// kill -9, the partition's log cut back to its recovery point (the
    /// unflushed tail lost, see [`segment`]), restarted.
    PowerLoss,
    /// Every follower SIGSTOPped for the hold (shorter than replica.lag.time.max.ms,
    /// so they stay in the ISR), then the leader killed with kill -9 and the
    /// followers resumed; the leader restarts once the controller has fenced it
    /// and elected a follower. What the leader took alone is then on no
    /// replica the controller can elect.
    StallFollowersKillLeader,
    /// A follower SIGSTOPped past replica.lag.time.max.ms and the broker
    /// session (the leader drops it from the ISR, the controller fences
    /// it); then the leader and the other follower killed with kill -9 at
    /// once and the paused follower resumed, alone. Only an unclean election
    /// (or none) can give the partition a leader now: with
    /// `unclean.leader.election.enable` the lagging follower is elected
    /// without what the others committed while it was stopped. The others
    /// restart after the session timeout.
    LagThenKillOthers,
    /// Both followers SIGSTOPped past replica.lag.time.max.ms and the
    /// session (the leader is left alone in the ISR, or below
    /// min.insync.replicas), then the leader's power lost (as
    /// [`FaultKind::PowerLoss`]) and the followers resumed; the leader
    /// restarts after the session timeout. With min.insync.replicas=1 the
    /// leader acknowledged alone, and its unflushed tail is gone when it is
    /// elected again as the last known leader.
    StrandThenPowerLoss,
    /// The broker's link to the controller cut (every connection reset, new
    /// ones refused) for the hold, shorter or longer than the session: the
    /// broker keeps serving clients and followers, but cannot heartbeat or
    /// learn the controller's decisions; past the session the controller
    /// fences it.
    CutFromController,
    /// As [`FaultKind::CutFromController`], but the link held silent (open,
    /// nothing passes): the broker's requests time out instead of failing.
    HoldFromController,
    /// Every link between the broker and its peers cut, both directions
    /// (connections reset, new ones closed), for the hold, shorter or
    /// longer than replica.lag.time.max.ms; its links to the controller and
    /// the clients stay open. A leader's followers cannot fetch, so past
    /// the lag it shrinks the ISR to itself (below min.insync.replicas:
    /// the HW stops and acks=all sends fail); a follower cannot fetch, and
    /// the leader drops it from the ISR.
    CutFromPeers,
    /// As [`FaultKind::CutFromPeers`], but the links held silent (open,
    /// nothing passes): fetches wait for answers that do not come.
    HoldFromPeers,
    /// Its peers' links to the broker cut, its own to them open: always
    /// strikes the leader, whose followers cannot fetch from it.
    CutPeersIn,
    /// The broker's links to its peers cut, theirs to it open: always
    /// strikes a follower, which cannot fetch from the leader.
    CutPeersOut,
    /// The leader cut from its peers (as [`FaultKind::CutFromPeers`]) past
    /// replica.lag.time.max.ms, so that it shrinks the ISR to itself (and,
    /// with the ELR, the followers it removed enter the ELR), then killed
    /// with kill -9 and the links opened; the leader restarts once the
    /// controller has fenced it. Under `acks1` it acknowledges alone while
    /// cut off, and the ELR member elected lacks those records: the loss a
    /// network partition, not a stopped process, brings.
    IsolateThenKillLeader,
}

impl FaultKind {
    const ALL: [FaultKind; 15] = [
        FaultKind::Kill,
        FaultKind::PauseShort,
        FaultKind::PauseLong,
        FaultKind::CleanRestart,
        FaultKind::PowerLoss,
        FaultKind::StallFollowersKillLeader,
        FaultKind::LagThenKillOthers,
        FaultKind::StrandThenPowerLoss,
        FaultKind::CutFromController,
        FaultKind::HoldFromController,
        FaultKind::CutFromPeers,
        FaultKind::HoldFromPeers,
        FaultKind::CutPeersIn,
        FaultKind::CutPeersOut,
        FaultKind::IsolateThenKillLeader,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill-9",
            FaultKind::PauseShort => "pause-short",
            FaultKind::PauseLong => "pause-long",
            FaultKind::CleanRestart => "clean-restart",
            FaultKind::PowerLoss => "power-loss",
            FaultKind::StallFollowersKillLeader => "stall-kill",
            FaultKind::LagThenKillOthers => "lag-kill",
            FaultKind::StrandThenPowerLoss => "strand-power-loss",
            FaultKind::CutFromController => "cut-controller",
            FaultKind::HoldFromController => "hold-controller",
            FaultKind::CutFromPeers => "cut-peers",
            FaultKind::HoldFromPeers => "hold-peers",
            FaultKind::CutPeersIn => "cut-peers-in",
            FaultKind::CutPeersOut => "cut-peers-out",
            FaultKind::IsolateThenKillLeader => "isolate-kill",
        }
    }

    /// How long, after killing the leader, the fault waits for the
    /// controller to fence it and elect (or find no one to elect) before
    /// restarting it; the fault's span in the timeline includes the wait.
    fn fence_wait(self) -> Option<Duration> {
        match self {
            FaultKind::StallFollowersKillLeader => Some(SESSION_TIMEOUT_MS + 2000),
            FaultKind::IsolateThenKillLeader => Some(SESSION_TIMEOUT_MS + 3000),
            _ => None,
        }
        .map(Duration::from_millis)
    }

    /// The links between brokers this fault sets for `broker` among
    /// `brokers` (from, to), and how.
    fn peer_links(self, broker: u32, brokers: &[u32]) -> (Vec<(u32, u32)>, Link) {
        let peers = brokers.iter().copied().filter(|&b| b != broker);
        let (ins, outs) = match self {
            FaultKind::CutFromPeers
            | FaultKind::HoldFromPeers
            | FaultKind::IsolateThenKillLeader => (true, true),
            FaultKind::CutPeersIn => (true, false),
            FaultKind::CutPeersOut => (false, true),
            _ => (false, false),
        };
        let links = peers
            .flat_map(|p| {
                let i = ins.then_some((p, broker));
                let o = outs.then_some((broker, p));
                i.into_iter().chain(o)
            })
            .collect();
        let link = if self == FaultKind::HoldFromPeers {
            Link::Held
        } else {
            Link::Cut
        };
        (links, link)
    }
}

/// Whom a fault strikes, resolved when it comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Leader,
    /// The n-th (mod their number) of the other replicas, by id.
    Follower(u8),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Leader => write!(f, "leader"),
            Target::Follower(n) => write!(f, "follower#{n}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Not before this long after the producer starts.
    pub at: Duration,
    pub kind: FaultKind,
    pub target: Target,
    /// How long the broker stays down or paused.
    pub hold: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// None for a fixed schedule.
    pub seed: Option<u64>,
    pub steps: Vec<Step>,
}

/// splitmix64: a few lines, the same numbers on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Milliseconds in [lo, hi].
    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo + 1))
    }
}

impl Schedule {
    /// Faults from 3 s after the producer starts until 3 s before it ends,
    /// each followed by 3-8 s of quiet (plus the wait for the brokers).
    pub fn from_seed(seed: u64, seconds: u64) -> Schedule {
        let mut rng = Rng(seed);
        let mut steps = Vec::new();
        let end = Duration::from_secs(seconds.saturating_sub(3));
        let mut at = Duration::from_secs(3);
        while at < end {
            let kind = FaultKind::ALL[(rng.next() % FaultKind::ALL.len() as u64) as usize];
            let mut target = if rng.next() % 3 < 2 {
                Target::Leader
            } else {
                Target::Follower((rng.next() % 2) as u8)
            };
            if matches!(
                kind,
                FaultKind::StallFollowersKillLeader
                    | FaultKind::StrandThenPowerLoss
                    | FaultKind::CutPeersIn
                    | FaultKind::IsolateThenKillLeader
            ) {
                target = Target::Leader;
            }
            if matches!(kind, FaultKind::LagThenKillOthers | FaultKind::CutPeersOut) {
                target = Target::Follower((rng.next() % 2) as u8);
            }
            let hold = match kind {
                FaultKind::StallFollowersKillLeader => rng.ms(1000, REPLICA_LAG_MS / 2),
                FaultKind::PauseShort => rng.ms(1000, SESSION_TIMEOUT_MS / 2),
                // Either side of the session: fenced or not.
                FaultKind::CutFromController | FaultKind::HoldFromController => {
                    rng.ms(2000, SESSION_TIMEOUT_MS + 6000)
                }
                // Either side of replica.lag.time.max.ms: dropped from the ISR or not.
                FaultKind::CutFromPeers
                | FaultKind::HoldFromPeers
                | FaultKind::CutPeersIn
                | FaultKind::CutPeersOut => rng.ms(2000, REPLICA_LAG_MS + 6000),
                FaultKind::PauseLong => {
                    rng.ms(SESSION_TIMEOUT_MS + 2000, SESSION_TIMEOUT_MS + 6000)
                }
                FaultKind::LagThenKillOthers | FaultKind::StrandThenPowerLoss => {
                    let past = SESSION_TIMEOUT_MS.max(REPLICA_LAG_MS);
                    rng.ms(past + 2000, past + 4000)
                }
                FaultKind::IsolateThenKillLeader => {
                    rng.ms(REPLICA_LAG_MS + 2000, REPLICA_LAG_MS + 4000)
                }
                _ => rng.ms(1000, 5000),
            };
            steps.push(Step {
                at,
                kind,
                target,
                hold,
            });
            at += hold + rng.ms(3000, 8000);
        }
        Schedule {
            seed: Some(seed),
            steps,
        }
    }

    pub fn fixed(steps: Vec<Step>) -> Schedule {
        Schedule { seed: None, steps }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.seed {
            Some(seed) => writeln!(f, "schedule of seed {seed} ({} faults):", self.steps.len())?,
            None => writeln!(f, "fixed schedule ({} faults):", self.steps.len())?,
        }
        for s in &self.steps {
            writeln!(
                f,
                "  at {:>6.1}s  {:<13} {:<10} hold {:.1}s",
                s.at.as_secs_f64(),
                s.kind.name(),
                s.target.to_string(),
                s.hold.as_secs_f64()
            )?;
        }
        Ok(())
    }
}

/// A fault as it was applied.
#[derive(Clone, Debug)]
pub struct Applied {
    pub step: Step,
    /// When it began, after the producer started.
    pub began: Duration,
    /// When it struck and when the broker was restarted or resumed, on the
    /// host's wall clock (ms since the epoch), which the producer's lines
    /// and the metadata log share.
    pub began_ms: u64,
    pub ended_ms: u64,
    pub broker: u32,
    pub leader_before: i64,
    /// The leader at the end of the hold, before the broker came back (-1: none, or no answer).
    pub leader_during: i64,
    /// The ISR at the end of the hold (empty: no answer).
    pub isr_during: Vec<u32>,
    /// The leader once the fault was over and the brokers were back (or the wait gave up).
    pub leader_after: i64,
    pub note: String,
    /// Each kill -9 the fault sent, when (see [`Kill`]).
    pub kills: Vec<Kill>,
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>6.1}s {} broker {} ({}; leader {} -> {} -> {}; ISR during {:?}){}",
            self.began.as_secs_f64(),
            self.step.kind.name(),
            self.broker,
            self.step.target,
            self.leader_before,
            self.leader_during,
            self.leader_after,
            self.isr_during,
            if self.note.is_empty() {
                String::new()
            } else {
                format!("; {}", self.note)
            }
        )
    }
}

impl Applied {
    /// Its line in `faults.jsonl`.
    pub fn span(&self) -> FaultSpan {
        FaultSpan {
            kind: self.step.kind.name().to_string(),
            broker: self.broker,
            began_ms: self.began_ms,
            ended_ms: self.ended_ms,
            kills: self.kills.clone(),
        }
    }
}

/// A kill -9 the nemesis sent: the broker and the host's wall clock just
/// before the signal. A killed JVM's request threads may have moved state
/// whose log line they had not written yet; the leaders' half reads these
/// to allow for such a line, lost with the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kill {
    pub broker: u32,
    pub at_ms: u64,
}

/// A fault applied, as a run directory's `faults.jsonl` keeps it (one line
/// each): what a picture of the run shades.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultSpan {
    /// Its kind's name (`kill-9`, `stall-kill`, ...).
    pub kind: String,
    /// The broker struck (for a stall-kill, the leader killed).
    pub broker: u32,
    /// See [`Applied::began_ms`].
    pub began_ms: u64,
    pub ended_ms: u64,
    /// The kills it sent (absent from runs kept before they were
    /// recorded: see [`FaultSpan::kills`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kills: Vec<Kill>,
}

impl FaultSpan {
    /// The kills it sent: as recorded, or for a run kept before they were,
    /// a kill -9's or a power loss's, which kill the broker as they begin.
    pub fn kills(&self) -> Vec<Kill> {
        let at_start = [FaultKind::Kill.name(), FaultKind::PowerLoss.name()];
        if self.kills.is_empty() && at_start.contains(&self.kind.as_str()) {
            return vec![Kill {
                broker: self.broker,
                at_ms: self.began_ms,
            }];
        }
        self.kills.clone()
    }

    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The spans of a `faults.jsonl`.
    pub fn parse_lines(text: &str) -> Result<Vec<FaultSpan>> {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(n, l)| {
                serde_json::from_str(l).map_err(|e| format!("faults.jsonl line {}: {e}", n + 1))
            })
            .collect()
    }
}

/// The spans of a run kept before `faults.jsonl` was written, from its
/// `summary.txt` (each fault line: its start after the producer started,
/// kind and broker, as [`Applied`]'s `Display` writes them) and its
/// `schedule.txt` (the faults applied are the schedule's first steps: their
/// holds). Placed from `producer_start_ms` (the producer's first send,
/// later than the start the summary counts from by the producer's start-up);
/// each ends after its hold, a stall-kill's once the session has ended
/// and 2 s more (when the nemesis restarts the leader).
pub fn spans_from_summary(
    summary: &str,
    schedule: &str,
    producer_start_ms: u64,
) -> Result<Vec<FaultSpan>> {
    let holds: Vec<&str> = schedule
        .lines()
        .filter(|l| l.trim_start().starts_with("at "))
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    let seconds = |text: &str, what: &str| -> Result<u64> {
        text.strip_suffix('s')
            .and_then(|t| t.parse::<f64>().ok())
            .filter(|t| t.is_finite() && *t >= 0.0)
            .map(|t| (t * 1000.0).round() as u64)
            .ok_or_else(|| format!("{what} {text:?} is not a time in seconds"))
    };
    let mut spans = Vec::new();
    for line in summary.lines() {
        let Some(rest) = line.trim_start().strip_prefix("fault ") else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let [began, kind, "broker", broker, ..] = words[..] else {
            return Err(format!(
                "summary.txt: a fault line that does not read: {line:?}"
            ));
        };
        let i = spans.len();
        let hold = holds
            .get(i)
            .ok_or_else(|| format!("schedule.txt has no step {} for {line:?}", i + 1))?;
        let mut held = seconds(hold, "schedule.txt: a hold")?;
        if let Some(wait) = FaultKind::ALL
            .into_iter()
            .find(|k| k.name() == kind)
            .and_then(FaultKind::fence_wait)
        {
            held += wait.as_millis() as u64;
        }
        let began_ms = producer_start_ms + seconds(began, "summary.txt: a fault's start")?;
        spans.push(FaultSpan {
            kind: kind.to_string(),
            broker: broker
                .parse()
                .map_err(|_| format!("summary.txt: broker {broker:?} in {line:?}"))?,
            began_ms,
            ended_ms: began_ms + held,
            kills: Vec::new(),
        });
    }
    Ok(spans)
}

/// Sets each of `links` (from, to) between brokers to `link`.
fn set_peer_links(cluster: &Cluster, links: &[(u32, u32)], link: Link) -> Result<()> {
    for &(from, to) in links {
        cluster.set_peer_link(from, to, link)?;
    }
    Ok(())
}

/// The host's wall clock, in ms since the epoch (0 if it is set before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Applies one step now, then waits (bounded) for every broker to be back.
pub fn apply(
    cluster: &mut Cluster,
    programs: &Programs,
    topic: &str,
    step: &Step,
    began: Duration,
) -> Result<Applied> {
    let state = client::describe(programs, cluster.bootstrap(), topic)?;
    let broker = match step.target {
        _ if matches!(
            step.kind,
            FaultKind::StallFollowersKillLeader
                | FaultKind::LagThenKillOthers
                | FaultKind::StrandThenPowerLoss
                | FaultKind::IsolateThenKillLeader
        ) && state.leader < 0 =>
        {
            return Err(format!(
                "{} needs a leader, and the partition has none",
                step.kind.name()
            ));
        }
        Target::Leader if state.leader >= 0 => state.leader as u32,
        // No leader: strike the first replica instead.
        Target::Leader => *state
            .replicas
            .first()
            .ok_or("the partition has no replicas")?,
        Target::Follower(n) => {
            let mut others = others(&state.replicas, state.leader);
            others.sort_unstable();
            *others
                .get(n as usize % others.len().max(1))
                .ok_or("the partition has no follower")?
        }
    };
    let mut note = String::new();
    let bootstrap = cluster.bootstrap().to_string();
    // The leader and ISR as the hold ends, before the broker is back.
    let during = |programs: &Programs| {
        client::describe(programs, &bootstrap, topic)
            .map(|s| (s.leader, s.isr))
            .unwrap_or((-1, Vec::new()))
    };
    let (leader_during, isr_during);
    let mut kills = Vec::new();
    let began_ms = now_ms();
    match step.kind {
        FaultKind::Kill => {
            kill(cluster, broker, &mut kills)?;
            std::thread::sleep(step.hold);
            (leader_during, isr_during) = during(programs);
            cluster.restart(broker)?;
        }
        FaultKind::PauseShort | FaultKind::PauseLong => {
            cluster.broker(broker)?.pause()?;
            std::thread::sleep(step.hold);
            (leader_during, isr_during) = during(programs);
            cluster.broker(broker)?.resume()?;
        }
        FaultKind::CleanRestart => {
            let t = Instant::now();
            let clean = cluster.broker(broker)?.terminate(Duration::from_secs(30))?;
            if !clean {
                kills.push(Kill {
                    broker,
                    at_ms: now_ms(),
                });
            }
            note = if clean {
                format!("stopped cleanly in {:.1}s", t.elapsed().as_secs_f64())
            } else {
                "did not stop within 30 s: killed".into()
            };
            std::thread::sleep(step.hold);
            (leader_during, isr_during) = during(programs);
            cluster.restart(broker)?;
        }
        FaultKind::StallFollowersKillLeader => {
            let leader = state.leader as u32;
            let followers = others(&state.replicas, state.leader);
            for &f in &followers {
                cluster.broker(f)?.pause()?;
            }
            std::thread::sleep(step.hold);
            kill(cluster, leader, &mut kills)?;
            for &f in &followers {
                cluster.broker(f)?.resume()?;
            }
            // Until the controller fences the dead leader (its session ends) and elects another.
            std::thread::sleep(step.kind.fence_wait().expect("a kill waits for the fence"));
            (leader_during, isr_during) = during(programs);
            cluster.restart(leader)?;
        }
        FaultKind::LagThenKillOthers => {
            let others = others(&state.replicas, broker.into());
            cluster.broker(broker)?.pause()?;
            std::thread::sleep(step.hold);
            for &o in &others {
                kill(cluster, o, &mut kills)?;
            }
            cluster.broker(broker)?.resume()?;
            // Until the controller fences the dead brokers, unfences the
            // resumed one and elects (or cannot).
            std::thread::sleep(Duration::from_millis(SESSION_TIMEOUT_MS + 3000));
            (leader_during, isr_during) = during(programs);
            for &o in &others {
                cluster.restart(o)?;
            }
        }
        FaultKind::StrandThenPowerLoss => {
            let followers = others(&state.replicas, broker.into());
            for &f in &followers {
                cluster.broker(f)?.pause()?;
            }
            std::thread::sleep(step.hold);
            note = lose_power(cluster, broker, topic, &mut kills)?;
            for &f in &followers {
                cluster.broker(f)?.resume()?;
            }
            std::thread::sleep(Duration::from_millis(SESSION_TIMEOUT_MS + 3000));
            (leader_during, isr_during) = during(programs);
            cluster.restart(broker)?;
        }
        FaultKind::CutFromController | FaultKind::HoldFromController => {
            let link = if step.kind == FaultKind::CutFromController {
                Link::Cut
            } else {
                Link::Held
            };
            cluster.set_controller_link(broker, link)?;
            std::thread::sleep(step.hold);
            (leader_during, isr_during) = during(programs);
            cluster.set_controller_link(broker, Link::Open)?;
        }
        FaultKind::CutFromPeers
        | FaultKind::HoldFromPeers
        | FaultKind::CutPeersIn
        | FaultKind::CutPeersOut => {
            let (links, link) = step.kind.peer_links(broker, &cluster.broker_ids());
            set_peer_links(cluster, &links, link)?;
            std::thread::sleep(step.hold);
            (leader_during, isr_during) = during(programs);
            set_peer_links(cluster, &links, Link::Open)?;
            note = links
                .iter()
                .map(|(f, t)| format!("{f}->{t}"))
                .collect::<Vec<_>>()
                .join(" ");
            note = format!("links {note} {link:?}");
        }
        FaultKind::IsolateThenKillLeader => {
            let (links, link) = step.kind.peer_links(broker, &cluster.broker_ids());
            set_peer_links(cluster, &links, link)?;
            std::thread::sleep(step.hold);
            kill(cluster, broker, &mut kills)?;
            set_peer_links(cluster, &links, Link::Open)?;
            // Until the controller fences the dead leader and elects (or,
            // without an eligible replica, cannot).
            std::thread::sleep(step.kind.fence_wait().expect("a kill waits for the fence"));
            (leader_during, isr_during) = during(programs);
            cluster.restart(broker)?;
            note = format!(
                "cut from its peers for {:.1}s, then killed",
                step.hold.as_secs_f64()
            );
        }
        FaultKind::PowerLoss => {
            note = lose_power(cluster, broker, topic, &mut kills)?;
            std::thread::sleep(step.hold);
            (leader_during, isr_during) = during(programs);
            cluster.restart(broker)?;
        }
    }
    let ended_ms = now_ms();
    // Bounded: a broker that does not come back is left to the final heal.
    let count = cluster.brokers.len();
    cluster.wait_started(Duration::from_secs(60));
    let (after, full) =
        match client::wait_brokers(programs, &bootstrap, count, Duration::from_secs(45)) {
            Ok(()) => client::wait_full_isr(programs, &bootstrap, topic, Duration::from_secs(45)),
            Err(_) => (None, false),
        };
    if !full {
        note += if note.is_empty() { "" } else { "; " };
        note += "the ISR was not full again within 45 s after it";
    }
    let leader_after = after.map_or(-1, |s| s.leader);
    Ok(Applied {
        step: step.clone(),
        began,
        began_ms,
        ended_ms,
        broker,
        leader_before: state.leader,
        leader_during,
        isr_during,
        leader_after,
        note,
        kills,
    })
}

/// kill -9 of `broker`, noted in `kills`.
fn kill(cluster: &mut Cluster, broker: u32, kills: &mut Vec<Kill>) -> Result<()> {
    kills.push(Kill {
        broker,
        at_ms: now_ms(),
    });
    cluster.broker(broker)?.kill()
}

/// The replicas but `but` (a broker id, or -1 for none).
fn others(replicas: &[u32], but: i64) -> Vec<u32> {
    replicas
        .iter()
        .copied()
        .filter(|&r| i64::from(r) != but)
        .collect()
}

/// kill -9, then the partition's log cut back to its recovery point, as
/// a power loss would leave it; says what was cut.
fn lose_power(
    cluster: &mut Cluster,
    broker: u32,
    topic: &str,
    kills: &mut Vec<Kill>,
) -> Result<String> {
    kill(cluster, broker, kills)?;
    let node = cluster.broker(broker)?;
    let cut = segment::cut_unflushed(&node.data_dir(), topic, 0)?;
    Ok(format!(
        "cut {} at recovery point {}: {} -> {} bytes{}",
        cut.segment
            .file_name()
            .unwrap_or_default()
            .to_string_lossy(),
        cut.recovery_point,
        cut.bytes_before,
        cut.bytes_after,
        if cut.deleted_segments > 0 {
            format!(", {} later segments deleted", cut.deleted_segments)
        } else {
            String::new()
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_faults_line_keeps_its_kills_and_an_older_line_without_them_reads() {
        let span = FaultSpan {
            kind: FaultKind::StallFollowersKillLeader.name().into(),
            broker: 2,
            began_ms: 1_000,
            ended_ms: 9_000,
            kills: vec![Kill {
                broker: 2,
                at_ms: 4_000,
            }],
        };
        let read = FaultSpan::parse_lines(&span.to_line()).unwrap();
        assert_eq!(read, vec![span.clone()]);
        assert_eq!(read[0].kills(), span.kills);
        // Kept before kills were written: a kill -9 or a power loss kills
        // as it begins; a stall-kill's moment is not known.
        let old = r#"{"kind":"kill-9","broker":1,"began_ms":5,"ended_ms":9}"#;
        let read = FaultSpan::parse_lines(old).unwrap();
        assert_eq!(
            read[0].kills(),
            vec![Kill {
                broker: 1,
                at_ms: 5
            }]
        );
        let old = r#"{"kind":"stall-kill","broker":1,"began_ms":5,"ended_ms":9}"#;
        assert_eq!(FaultSpan::parse_lines(old).unwrap()[0].kills(), vec![]);
    }

    #[test]
    fn a_seed_gives_one_schedule_with_pauses_on_either_side_of_the_session() {
        for seed in 0..50 {
            let s = Schedule::from_seed(seed, 120);
            assert_eq!(s, Schedule::from_seed(seed, 120), "seed {seed} replays");
            assert!(!s.steps.is_empty());
            for step in &s.steps {
                let session = Duration::from_millis(SESSION_TIMEOUT_MS);
                match step.kind {
                    FaultKind::PauseShort => assert!(step.hold < session),
                    FaultKind::PauseLong => assert!(step.hold > session),
                    FaultKind::StallFollowersKillLeader => {
                        assert!(step.hold < Duration::from_millis(REPLICA_LAG_MS));
                        assert_eq!(step.target, Target::Leader);
                    }
                    FaultKind::LagThenKillOthers => {
                        assert!(step.hold > Duration::from_millis(REPLICA_LAG_MS));
                        assert!(step.hold > session);
                        assert_ne!(step.target, Target::Leader);
                    }
                    FaultKind::StrandThenPowerLoss => {
                        assert!(step.hold > Duration::from_millis(REPLICA_LAG_MS));
                        assert!(step.hold > session);
                        assert_eq!(step.target, Target::Leader);
                    }
                    FaultKind::CutPeersIn => assert_eq!(step.target, Target::Leader),
                    FaultKind::IsolateThenKillLeader => {
                        assert!(step.hold > Duration::from_millis(REPLICA_LAG_MS));
                        assert_eq!(step.target, Target::Leader);
                    }
                    FaultKind::CutPeersOut => assert_ne!(step.target, Target::Leader),
                    _ => {}
                }
                assert!(step.at < Duration::from_secs(117));
            }
        }
        let kinds: std::collections::BTreeSet<&str> = (0..50)
            .flat_map(|seed| Schedule::from_seed(seed, 120).steps)
            .map(|s| s.kind.name())
            .collect();
        assert_eq!(
            kinds.len(),
            FaultKind::ALL.len(),
            "every fault is drawn: {kinds:?}"
        );
        // The partitions between brokers are drawn on either side of the lag.
        let lag = Duration::from_millis(REPLICA_LAG_MS);
        let peer_holds: Vec<Duration> = (0..50)
            .flat_map(|seed| Schedule::from_seed(seed, 120).steps)
            .filter(|s| s.kind.name().contains("peers"))
            .map(|s| s.hold)
            .collect();
        assert!(peer_holds.iter().any(|h| *h < lag) && peer_holds.iter().any(|h| *h > lag));
    }

    #[test]
    fn a_peer_partition_sets_the_links_of_its_broker_in_its_directions() {
        let brokers = [1, 2, 3];
        let (both, link) = FaultKind::CutFromPeers.peer_links(2, &brokers);
        assert_eq!(both, [(1, 2), (2, 1), (3, 2), (2, 3)]);
        assert_eq!(link, Link::Cut);
        let (held, link) = FaultKind::HoldFromPeers.peer_links(2, &brokers);
        assert_eq!(held, both);
        assert_eq!(link, Link::Held);
        assert_eq!(
            FaultKind::CutPeersIn.peer_links(1, &brokers).0,
            [(2, 1), (3, 1)]
        );
        assert_eq!(
            FaultKind::CutPeersOut.peer_links(3, &brokers).0,
            [(3, 1), (3, 2)]
        );
        assert!(FaultKind::Kill.peer_links(1, &brokers).0.is_empty());
    }
}
