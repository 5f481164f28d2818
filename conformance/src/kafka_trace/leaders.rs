//! The leaders' half: each leader's tenure replayed through the model's
//! own steps (spec/kafka-trace.md, "The leaders' half").
//!
//! A tenure runs from a broker's "Leader ... starts at leader epoch E"
//! line (`state-change.log`) to its next registration. Its observations are
//! the broker's `partition.log` lines of that time (`partition_log`) and
//! the ISRs the metadata told it (`state_change::IsrLearnt`), in the
//! broker's own order. The replay starts from a model state the leader's
//! line determines (its log end offset, HW and ISR; the epoch starts at
//! that log end offset, as Kafka's leader epoch start offset does) and
//! takes each observation as the model's step:
//!
//! | observation | the model's step |
//! |---|---|
//! | "Recorded replica F ... position X" | F's fetch from X (`FollowerFetch`, `FollowerFetchOne` or `FollowerFetchPart`), copying up to F's next recorded position |
//! | "High watermark updated ... to B" | `LeaderAdvanceHw { hw: B }` |
//! | "PendingExpandIsr(newInSyncReplicaId=F" | `LeaderExpandIsr { follower: F }` |
//! | "ISR updated to ...", a learnt ISR | the ISR taken as given (the controller's half validates ISR changes) |
//!
//! Steps the observations do not show are searched: the leader's appends
//! (`Produce`, as many as the next observation needs: a follower cannot
//! fetch, nor the HW pass, records the leader does not have) and a
//! follower's fetch whose copy the next observation shows only in part.
//! Lines logged within a few ms may have happened in another order
//! ([`SAME_MOMENT_MS`]), so an observation that does not fit is tried again
//! after up to three of the next few, in every order. A misfit names the
//! first observation no model step explains.
//!
//! What is not a model step is counted, not hidden: a follower placed at
//! its first fetch of the tenure (its log before that is not observed), or
//! placed again when it fetches from below where the model has it (it
//! restarted and lost a tail); a fetch answer the follower never applied
//! (it fetched again from the same offset while the leader had more).

use std::fmt;

use highwater_model::actions::{allowed, apply};
use highwater_model::presets::SAFE;
use highwater_model::shape::{LogStore, RecordTable, Shape, Table};
use highwater_model::state::{
    Controller, Entry, IsrChain, LeaderView, RecordHistory, ReplicaId, ReplicaSet, Request,
    Unbounded,
};
use highwater_model::{Acks, Action, Config, State};

use super::controller::ClusterRules;
use super::metadata::BrokerId;
use super::partition_log::{LeaderStep, PartitionLine};
use super::state_change::{Applied, IsrLearnt, Role};

type Model = State<Unbounded>;

/// What the leaders' half showed.
#[derive(Clone, Debug, Default)]
pub struct LeaderValidation {
    /// Leader tenures replayed.
    pub tenures: usize,
    /// Recorded fetches taken as the model's fetch.
    pub fetches: usize,
    /// HW moves taken as the model's `LeaderAdvanceHw`.
    pub hw_moves: usize,
    /// ISR expansions taken as the model's `LeaderExpandIsr`.
    pub expansions: usize,
    /// Appends no line shows, found by the replay (`Produce`).
    pub hidden_appends: usize,
    /// Fetches no line shows, found by the replay.
    pub hidden_fetches: usize,
    /// HW moves and expansions taken after the fetch logged after them.
    pub reordered: usize,
    /// Fetches taken before an HW move logged as the leader was killed,
    /// whose own lines the kill lost ([`Killed`]).
    pub unwritten_fetches: usize,
    /// Followers placed at a fetch, not reached by a step (see the module
    /// documentation).
    pub placed: usize,
    /// Fetch answers the follower did not apply.
    pub lost_answers: usize,
    /// ISRs taken as given.
    pub isrs_taken: usize,
    pub misfit: Option<String>,
    pub misfit_ms: Option<u64>,
}

impl fmt::Display for LeaderValidation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} leader tenures replayed through the model: {} fetches, {} HW moves, {} ISR expansions as its steps ({} taken after the fetch or ISR logged after them); searched, as no line shows them: {} appends, {} fetches finishing a copy, {} fetches whose line a kill -9 lost; {} followers placed at a fetch, {} answers not applied, {} ISRs taken as given",
            self.tenures,
            self.fetches,
            self.hw_moves,
            self.expansions,
            self.reordered,
            self.hidden_appends,
            self.hidden_fetches,
            self.unwritten_fetches,
            self.placed,
            self.lost_answers,
            self.isrs_taken
        )
    }
}

/// The model's configuration for a cluster's leaders: today's rules with
/// the cluster's min.insync.replicas, ELR and unclean election, and the
/// producer's acks. Bounds do not apply: the replay is in the unbounded
/// shape.
pub fn model_config(rules: ClusterRules, acks_all: bool) -> Config {
    Config {
        min_isr: rules.min_isr,
        elr: rules.elr,
        unclean_election: rules.unclean,
        acks: if acks_all { Acks::All } else { Acks::Leader },
        clean_crashes: u8::MAX,
        unclean_crashes: u8::MAX,
        leader_moves: u8::MAX,
        ..SAFE
    }
}

/// One observation of a tenure.
#[derive(Clone, Copy)]
enum Observed<'a> {
    Line(&'a PartitionLine),
    Learnt(&'a IsrLearnt),
}

impl Observed<'_> {
    fn at_ms(&self) -> u64 {
        match self {
            Observed::Line(l) => l.at_ms,
            Observed::Learnt(l) => l.at_ms,
        }
    }
    fn recorded(&self) -> Option<(BrokerId, u64)> {
        match self {
            Observed::Line(PartitionLine {
                step: LeaderStep::Recorded { follower, offset },
                ..
            }) => Some((*follower, *offset)),
            _ => None,
        }
    }
}

impl fmt::Display for Observed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Observed::Line(l) => write!(
                f,
                "broker {} partition.log line {} (at {} ms): {:?}",
                l.broker, l.line, l.at_ms, l.step
            ),
            Observed::Learnt(l) => write!(
                f,
                "broker {} state-change.log line {} (at {} ms): ISR {:?} learnt",
                l.broker, l.line, l.at_ms, l.isr
            ),
        }
    }
}

/// How many observations ahead are looked at when one does not fit where
/// it was logged. A burst of one follower's fetches can come between an HW
/// move and the other follower's fetch that allowed it: seven lines in 24 ms
/// in a CI run (kept as `acks1-fetch-burst`), so the bound is wide.
const REORDER_WINDOW: usize = 12;
/// How many of them may be taken before it.
const MAX_BEFORE: usize = 3;
/// Lines logged this close may be in another order than they happened:
/// Kafka logs a fetch's "Recorded" after the ISR expansion and HW move the
/// fetch caused (`Partition.updateFollowerFetchState`); two request
/// threads serving two followers log their HW moves as they finish, not
/// as they moved it (each "from" names the move before it); a leader moves
/// its HW for a learnt ISR (`Partition.makeLeader`) before the broker logs
/// in `state-change.log` that it applied it. Between a fetch's HW move and
/// its "Recorded" line the thread also answers the produce requests the
/// move completed (`tryCompleteDelayedRequests`): 23 ms apart in one run on
/// this 2-core machine running four JVMs, so the bound is wide. It counts
/// the JVM's running time only: a leader stopped by SIGSTOP between its HW
/// move and the "Recorded" line (6 s, seed 17) logs them that far apart
/// ([`Frozen`]).
const SAME_MOMENT_MS: u64 = 250;

/// Every ordered choice of up to `most` of `items`, the shorter first,
/// and each length in the items' order.
fn arrangements(items: &[usize], most: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut level: Vec<Vec<usize>> = vec![Vec::new()];
    for _ in 0..most.min(items.len()) {
        let next: Vec<Vec<usize>> = level
            .iter()
            .flat_map(|prefix| {
                items
                    .iter()
                    .filter(|j| !prefix.contains(j))
                    .map(move |&j| [prefix.as_slice(), &[j]].concat())
            })
            .collect();
        out.extend(next.iter().cloned());
        level = next;
    }
    out
}

/// A time a broker's JVM was stopped (SIGSTOP to SIGCONT, the nemesis's
/// pauses, `faults.jsonl`): it logged nothing then, whatever it was in the
/// middle of, so that time does not separate its lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frozen {
    pub broker: BrokerId,
    pub from_ms: u64,
    pub to_ms: u64,
}

/// A kill -9 of a broker's JVM (`faults.jsonl`): the host's clock just
/// before the signal. Its request threads may have moved the HW at a
/// follower's fetch and died before they logged that fetch, so an HW move
/// logged within [`SAME_MOMENT_MS`] of it may stand without the fetch that
/// allows it: the replay takes that fetch as unwritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Killed {
    pub broker: BrokerId,
    pub at_ms: u64,
}

/// What the nemesis did to the brokers' JVMs, as far as it is known: runs
/// kept before the nemesis recorded it have none of it.
#[derive(Clone, Debug, Default)]
pub struct Jvms {
    pub frozen: Vec<Frozen>,
    pub killed: Vec<Killed>,
}

impl Jvms {
    /// The ms from `a` to `b` (`a <= b`) that `broker`'s JVM ran.
    fn running_ms(&self, broker: BrokerId, a: u64, b: u64) -> u64 {
        running_ms(&self.frozen, broker, a, b)
    }

    /// Whether `broker` was killed within the same moment as `at_ms`.
    fn killed_by(&self, broker: BrokerId, at_ms: u64) -> bool {
        self.killed.iter().any(|k| {
            k.broker == broker
                && self.running_ms(broker, at_ms.min(k.at_ms), at_ms.max(k.at_ms)) <= SAME_MOMENT_MS
        })
    }
}

/// The ms from `a` to `b` (`a <= b`) that `broker`'s JVM ran.
fn running_ms(frozen: &[Frozen], broker: BrokerId, a: u64, b: u64) -> u64 {
    let stopped: u64 = frozen
        .iter()
        .filter(|f| f.broker == broker)
        .map(|f| f.to_ms.min(b).saturating_sub(f.from_ms.max(a)))
        .sum();
    b.saturating_sub(a).saturating_sub(stopped)
}

/// Replays every leader tenure the brokers' lines show. `replicas` is the
/// partition's assignment (the model's replica `i` is `replicas[i]`);
/// `applied`, `learnt` and `lines` are every broker's; `jvms`, the times
/// brokers were stopped and killed, when known.
pub fn validate(
    cfg: &Config,
    replicas: &[BrokerId],
    applied: &[Applied],
    learnt: &[IsrLearnt],
    lines: &[PartitionLine],
    jvms: &Jvms,
) -> LeaderValidation {
    let mut v = LeaderValidation::default();
    for &broker in replicas {
        let mine: Vec<&Applied> = applied.iter().filter(|a| a.broker == broker).collect();
        for (i, start) in mine.iter().enumerate() {
            let Role::Leader { isr } = &start.role else {
                continue;
            };
            // A line in the same ms as the broker's next registration is
            // the leader's, unless that registration makes it leader again.
            let next = mine.get(i + 1);
            let within = |ms: u64| {
                ms >= start.at_ms
                    && next.is_none_or(|n| match n.role {
                        Role::Follower { .. } => ms <= n.at_ms,
                        Role::Leader { .. } => ms < n.at_ms,
                    })
            };
            let mut observed: Vec<Observed> = lines
                .iter()
                .filter(|l| l.broker == broker && within(l.at_ms))
                .map(Observed::Line)
                .chain(
                    learnt
                        .iter()
                        .filter(|l| {
                            l.broker == broker
                                && l.leader_epoch == start.leader_epoch
                                && within(l.at_ms)
                        })
                        .map(Observed::Learnt),
                )
                .collect();
            observed.sort_by_key(Observed::at_ms);
            v.tenures += 1;
            let replayed = Tenure::start(cfg, replicas, start, isr)
                .map_err(|why| (why, start.at_ms))
                .and_then(|mut t| t.replay(&observed, jvms, &mut v));
            if let Err((why, at_ms)) = replayed {
                v.misfit = Some(format!(
                    "broker {broker}'s tenure as leader in epoch {} (state-change.log line {}) does not fit the model: {why}",
                    start.leader_epoch, start.line
                ));
                v.misfit_ms = Some(at_ms);
                return v;
            }
        }
    }
    v
}

/// One leader's tenure, as the model has it so far.
struct Tenure<'c> {
    cfg: &'c Config,
    replicas: &'c [BrokerId],
    leader: ReplicaId,
    s: Model,
    /// Followers the replay has placed in this tenure.
    placed: Vec<bool>,
    /// For each observation that is a recorded fetch, where the same
    /// follower's next recorded fetch is from (what this one copied up to).
    next_fetch: Vec<Option<u64>>,
}

fn offset(o: u64) -> Result<u32, String> {
    u32::try_from(o).map_err(|_| format!("offset {o} is past the model's offsets"))
}

impl<'c> Tenure<'c> {
    /// The model's state as the leader's line leaves it: its log of
    /// `log_end_offset` records, its HW and ISR, every replica told of the
    /// leader, no follower's position known yet.
    fn start(
        cfg: &'c Config,
        replicas: &'c [BrokerId],
        line: &Applied,
        isr: &[BrokerId],
    ) -> Result<Tenure<'c>, String> {
        let index = |b: BrokerId| replica_index(replicas, b);
        let leader = index(line.broker)?;
        let epoch = u32::try_from(line.leader_epoch)
            .map_err(|_| format!("leader epoch {}", line.leader_epoch))?;
        let (leo, hw) = (offset(line.log_end_offset)?, offset(line.high_watermark)?);
        let isr = isr.iter().try_fold(ReplicaSet::EMPTY, |set, &b| {
            Ok::<_, String>(set.with(index(b)?))
        })?;
        let mut s = Model {
            n: u8::try_from(replicas.len()).map_err(|_| "too many replicas".to_string())?,
            ..Model::default()
        };
        // Which records the log holds, and in which earlier epochs, does not
        // matter to the leader's steps; that epoch E starts at the log end
        // offset does (Kafka's leader epoch start offset).
        let earlier = epoch.saturating_sub(1);
        let entries = (0..leo).map(|id| Entry { id, epoch: earlier }).collect();
        let log = <<Unbounded as Shape>::Log as LogStore<Unbounded>>::from_entries(entries)
            .ok_or("a log the model cannot hold")?;
        for r in s.ids() {
            let rep = s.replica_mut(r);
            rep.alive = true;
            rep.epoch = Some(epoch);
            rep.leader = LeaderView::Replica(leader);
        }
        let l = s.replica_mut(leader);
        l.log = log;
        l.hw = hw;
        l.recovery_point = leo;
        l.hw_checkpoint = hw;
        l.isr = isr;
        s.controller = Controller {
            leader: Some(leader),
            epoch: Some(epoch),
            isr,
            ..Controller::default()
        };
        let mut requests = vec![None; epoch as usize + 1];
        requests[epoch as usize] = Some(Request {
            leader: Some(leader),
            isr,
            later_isrs: IsrChain::EMPTY,
        });
        s.requests = Table::from_vec(requests).ok_or("requests the model cannot hold")?;
        let records = (0..leo)
            .map(|o| RecordHistory {
                offset: o,
                acked: None,
                visible: (o < hw).then_some(earlier),
            })
            .collect();
        s.records = RecordTable::from_vec(records).ok_or("records the model cannot hold")?;
        s.produced = leo;
        Ok(Tenure {
            cfg,
            replicas,
            leader,
            placed: vec![false; replicas.len()],
            next_fetch: Vec::new(),
            s,
        })
    }

    fn replay(
        &mut self,
        observed: &[Observed],
        jvms: &Jvms,
        v: &mut LeaderValidation,
    ) -> Result<(), (String, u64)> {
        // One pass from the end: each fetch's successor by the same follower.
        let mut later: Vec<(BrokerId, u64)> = Vec::new();
        self.next_fetch = vec![None; observed.len()];
        for (i, o) in observed.iter().enumerate().rev() {
            if let Some((follower, at)) = o.recorded() {
                self.next_fetch[i] = later
                    .iter()
                    .find(|(f, _)| *f == follower)
                    .map(|&(_, at)| at);
                later.retain(|(f, _)| *f != follower);
                later.push((follower, at));
            }
        }
        let mut taken = vec![false; observed.len()];
        for i in 0..observed.len() {
            if taken[i] {
                continue;
            }
            let before = (self.s.clone(), v.clone());
            let Err(why) = self.step(observed, i, v) else {
                continue;
            };
            // Lines the leader's request threads log within a few ms of
            // each other (of the JVM's running time) may have happened in
            // another order: the next few are tried before this one, in
            // every order, up to MAX_BEFORE.
            let leader = self.replicas[self.leader as usize];
            let later: Vec<usize> = (i + 1..observed.len().min(i + 1 + REORDER_WINDOW))
                .filter(|&j| {
                    !taken[j]
                        && jvms.running_ms(leader, observed[i].at_ms(), observed[j].at_ms())
                            <= SAME_MOMENT_MS
                })
                .collect();
            let mut fitted = false;
            for first in arrangements(&later, MAX_BEFORE) {
                (self.s, *v) = before.clone();
                let ok = first.iter().try_for_each(|&j| self.step(observed, j, v));
                if ok.is_ok() && self.step(observed, i, v).is_ok() {
                    first.iter().for_each(|&j| taken[j] = true);
                    v.reordered += 1;
                    fitted = true;
                    break;
                }
            }
            if !fitted && jvms.killed_by(leader, observed[i].at_ms()) {
                (self.s, *v) = before.clone();
                fitted = self.unwritten_fetches(&observed[i], v).is_ok()
                    && self.step(observed, i, v).is_ok();
            }
            if !fitted {
                (self.s, *v) = before;
                return Err((
                    format!(
                        "{}: {why}\n  the model's leader then: {}",
                        observed[i],
                        self.describe()
                    ),
                    observed[i].at_ms(),
                ));
            }
        }
        Ok(())
    }

    /// Takes observation `i` as the model's step, with the hidden steps it
    /// needs first.
    fn step(
        &mut self,
        observed: &[Observed],
        i: usize,
        v: &mut LeaderValidation,
    ) -> Result<(), String> {
        let line = match observed[i] {
            Observed::Learnt(l) => return self.take_isr(&l.isr, v),
            Observed::Line(l) => l,
        };
        match &line.step {
            LeaderStep::Recorded {
                follower,
                offset: at,
            } => self.fetch(*follower, *at, self.next_fetch[i], v),
            LeaderStep::HighWatermark { from, to } => {
                // Each move names the HW it moved from: the one before it.
                let hw = self.s.replica(self.leader).hw;
                if u64::from(hw) != *from {
                    return Err(format!(
                        "the move is from HW {from}, the model's leader is at {hw}"
                    ));
                }
                let to = offset(*to)?;
                self.append_to(to, v)?;
                self.take(Action::LeaderAdvanceHw {
                    leader: self.leader,
                    hw: to,
                })?;
                v.hw_moves += 1;
                Ok(())
            }
            LeaderStep::PendingExpand { follower } => {
                let follower = replica_index(self.replicas, *follower)?;
                self.take(Action::LeaderExpandIsr {
                    leader: self.leader,
                    follower,
                })?;
                v.expansions += 1;
                Ok(())
            }
            LeaderStep::IsrUpdated { isr } => self.take_isr(isr, v),
        }
    }

    /// Before an HW move to B logged as its JVM was killed: the fetches
    /// from B of every ISR follower the leader knows below B, which moved
    /// it and whose lines died with the JVM ([`Killed`]).
    fn unwritten_fetches(
        &mut self,
        observed: &Observed,
        v: &mut LeaderValidation,
    ) -> Result<(), String> {
        let Observed::Line(PartitionLine {
            step: LeaderStep::HighWatermark { to, .. },
            ..
        }) = observed
        else {
            return Err("only an HW move is explained by fetches".into());
        };
        let l = self.s.replica(self.leader);
        let behind: Vec<BrokerId> = l
            .isr
            .iter()
            .filter(|&f| f != self.leader)
            .filter(|&f| l.follower_leo[f as usize].is_none_or(|at| u64::from(at) < *to))
            .map(|f| self.replicas[f as usize])
            .collect();
        for follower in behind {
            self.fetch(follower, *to, None, v)?;
            v.unwritten_fetches += 1;
        }
        Ok(())
    }

    /// A fetch of `follower` from `at` reached the leader; its next one in
    /// the tenure is from `next`.
    fn fetch(
        &mut self,
        follower: BrokerId,
        at: u64,
        next: Option<u64>,
        v: &mut LeaderValidation,
    ) -> Result<(), String> {
        let f = replica_index(self.replicas, follower)?;
        if f == self.leader {
            return Err("the leader recorded a fetch of its own".into());
        }
        let at = offset(at)?;
        // The follower holds `at` records, copied from the leader.
        self.append_to(at, v)?;
        let held = self.s.replica(f).leo();
        if !self.placed[f as usize] || held > at {
            self.place(f, at);
            self.placed[f as usize] = true;
            v.placed += 1;
        } else if held < at {
            // The copy of its last fetch reached further than the leader's
            // log did when the replay took it.
            self.take(self.fetch_action(f, at - held))?;
            v.hidden_fetches += 1;
        }
        let leo = self.s.replica(self.leader).leo();
        let upto = next.map_or(Ok(leo), |n| offset(n).map(|n| n.min(leo)))?;
        let copy = upto.saturating_sub(at);
        if copy == 0 {
            let known = &mut self.s.replica_mut(self.leader).follower_leo[f as usize];
            if *known == Some(at) {
                // Nothing new on either side: not a step.
                return Ok(());
            }
            if leo > at {
                // The follower fetches from `at` again: it did not apply
                // this answer (a lost response, a pause, a restart).
                *known = Some(at);
                v.lost_answers += 1;
                return Ok(());
            }
        }
        self.take(self.fetch_action(f, copy))?;
        v.fetches += 1;
        Ok(())
    }

    /// The model's fetch of `follower` that copies `copy` records.
    fn fetch_action(&self, follower: ReplicaId, copy: u32) -> Action<Unbounded> {
        let leader = self.leader;
        let left = self
            .s
            .replica(leader)
            .leo()
            .saturating_sub(self.s.replica(follower).leo());
        if copy >= left {
            Action::FollowerFetch { follower, leader }
        } else if copy == 1 {
            Action::FollowerFetchOne { follower, leader }
        } else {
            Action::FollowerFetchPart {
                follower,
                leader,
                records: copy,
            }
        }
    }

    /// The leader appends until its log reaches `leo`: writes no line
    /// shows, but a fetch or an HW move needs them.
    fn append_to(&mut self, leo: u32, v: &mut LeaderValidation) -> Result<(), String> {
        while self.s.replica(self.leader).leo() < leo {
            let record = self.s.produced;
            self.take(Action::Produce {
                leader: self.leader,
                record,
            })
            .map_err(|why| {
                format!(
                    "the leader's log must reach offset {leo} here, but the model refuses its write at offset {}: {why}",
                    self.s.replica(self.leader).leo()
                )
            })?;
            v.hidden_appends += 1;
        }
        Ok(())
    }

    /// `follower` holds the leader's first `at` records (its log before
    /// this fetch is not observed).
    fn place(&mut self, follower: ReplicaId, at: u32) {
        let mut log = self.s.replica(self.leader).log.clone();
        log.truncate(at);
        let hw = self.s.replica(self.leader).hw.min(at);
        let f = self.s.replica_mut(follower);
        f.log = log;
        f.hw = hw;
        f.recovery_point = at;
        f.hw_checkpoint = hw;
    }

    /// The ISR is `isr`, as the leader's line says (the controller's half
    /// validated the change that made it).
    fn take_isr(&mut self, isr: &[BrokerId], v: &mut LeaderValidation) -> Result<(), String> {
        let isr = isr.iter().try_fold(ReplicaSet::EMPTY, |set, &b| {
            Ok::<_, String>(set.with(replica_index(self.replicas, b)?))
        })?;
        self.s.replica_mut(self.leader).isr = isr;
        self.s.controller.isr = isr;
        v.isrs_taken += 1;
        Ok(())
    }

    fn take(&mut self, action: Action<Unbounded>) -> Result<(), String> {
        if !allowed(self.cfg, &self.s, action) {
            return Err(format!("{action} is not a step the model may take here"));
        }
        if let Some(next) = apply(self.cfg, &self.s, action) {
            self.s = next;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        let l = self.s.replica(self.leader);
        let name = |r: usize| self.replicas.get(r).copied().unwrap_or(0);
        let isr: Vec<BrokerId> = l.isr.iter().map(|r| name(r as usize)).collect();
        let known: Vec<String> = (0..self.replicas.len())
            .filter(|&r| r != self.leader as usize)
            .map(|r| match l.follower_leo[r] {
                Some(o) => format!("{}: {o}", name(r)),
                None => format!("{}: not yet fetched", name(r)),
            })
            .collect();
        format!(
            "broker {} with log end offset {}, HW {}, ISR {isr:?}, followers' positions as it knows them {{{}}} (min.insync.replicas {}, ELR {})",
            name(self.leader as usize),
            l.leo(),
            l.hw,
            known.join(", "),
            self.cfg.min_isr,
            if self.cfg.elr { "on" } else { "off" }
        )
    }
}

fn replica_index(replicas: &[BrokerId], broker: BrokerId) -> Result<ReplicaId, String> {
    replicas
        .iter()
        .position(|&b| b == broker)
        .map(|i| i as ReplicaId)
        .ok_or_else(|| {
            format!("broker {broker} is not one of the partition's replicas {replicas:?}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka_trace::{partition_log, state_change};

    const START: &str = "[2026-12-04 03:56:52,000] INFO [Broker id=1] Leader soak-0 with topic id Some(F) starts at leader epoch 1 from offset 10 with partition epoch 2, high watermark 8, ISR [1,2,3], adding replicas [] and removing replicas [] . Previous leader Some(2) and previous leader epoch was 0. (state.change.logger)";

    fn replay(partition_log: &str, min_isr: u8) -> LeaderValidation {
        replay_under(partition_log, min_isr, &Jvms::default())
    }

    fn replay_frozen(partition_log: &str, min_isr: u8, frozen: &[Frozen]) -> LeaderValidation {
        let jvms = Jvms {
            frozen: frozen.to_vec(),
            killed: Vec::new(),
        };
        replay_under(partition_log, min_isr, &jvms)
    }

    fn replay_under(partition_log: &str, min_isr: u8, jvms: &Jvms) -> LeaderValidation {
        let applied = state_change::parse(1, "soak-0", START).unwrap();
        let lines = partition_log::parse(1, "soak-0", partition_log).unwrap();
        let rules = ClusterRules {
            min_isr,
            elr: true,
            unclean: false,
        };
        validate(
            &model_config(rules, true),
            &[1, 2, 3],
            &applied,
            &[],
            &lines,
            jvms,
        )
    }

    fn line(ms: u64, what: &str) -> String {
        format!("{ms} DEBUG [Partition soak-0 broker=1] {what} (kafka.cluster.Partition)\n")
    }

    fn recorded(ms: u64, follower: u32, at: u64) -> String {
        line(
            ms,
            &format!("Recorded replica {follower} log end offset (LEO) position {at} and log start offset 0."),
        )
    }

    fn hw(ms: u64, from: u64, to: u64) -> String {
        line(
            ms,
            &format!("High watermark updated from (offset={from}, segment=[0:0]) to (offset={to}, segment=[0:0])"),
        )
    }

    const T: u64 = 1_796_356_612_000;

    #[test]
    fn an_hw_logged_before_the_fetches_that_moved_it_fits() {
        let log = [
            recorded(T + 1, 2, 10),
            hw(T + 2, 8, 10),
            recorded(T + 3, 3, 10),
            recorded(T + 4, 2, 14),
            hw(T + 5, 10, 14),
            recorded(T + 5, 3, 14),
        ]
        .concat();
        let v = replay(&log, 2);
        assert!(v.misfit.is_none(), "{v:?}");
        assert_eq!((v.fetches, v.hw_moves, v.reordered), (4, 2, 2), "{v:?}");
        // 4 records appended (10 -> 14), no line shows them.
        assert_eq!(v.hidden_appends, 4, "{v:?}");
        assert_eq!(v.placed, 2, "{v:?}");
    }

    #[test]
    fn an_hw_and_its_fetch_logged_apart_fit_only_if_the_leader_was_stopped_between() {
        // The leader moved its HW to 14 at broker 3's fetch from 14, and was
        // stopped for 6 s before it logged the fetch.
        let log = [
            recorded(T + 1, 2, 10),
            recorded(T + 2, 3, 10),
            hw(T + 3, 8, 10),
            recorded(T + 4, 2, 14),
            hw(T + 5, 10, 14),
            recorded(T + 6_005, 3, 14),
        ]
        .concat();
        let stopped = Frozen {
            broker: 1,
            from_ms: T + 6,
            to_ms: T + 6_000,
        };
        let v = replay_frozen(&log, 2, &[stopped]);
        assert!(v.misfit.is_none(), "{v:?}");
        assert_eq!(v.reordered, 1, "{v:?}");
        // Not stopped (or another broker stopped): 6 s apart is not the
        // same moment, and the HW passed broker 3.
        for frozen in [
            vec![],
            vec![Frozen {
                broker: 2,
                ..stopped
            }],
        ] {
            let v = replay_frozen(&log, 2, &frozen);
            let misfit = v.misfit.expect("a misfit");
            assert!(misfit.contains("LeaderAdvanceHw"), "{misfit}");
        }
    }

    #[test]
    fn an_hw_move_whose_fetch_line_a_kill_lost_fits_only_if_the_leader_was_killed_then() {
        // Broker 2's fetch from 14 and broker 3's from 14: broker 3's thread
        // moved the HW to 14 and logged it; the leader was killed before
        // broker 2's thread logged its fetch (seed-fixed run, CI, 2026-12-04).
        let log = [
            recorded(T + 1, 2, 10),
            recorded(T + 2, 3, 10),
            hw(T + 3, 8, 10),
            recorded(T + 50, 3, 14),
            hw(T + 50, 10, 14),
        ]
        .concat();
        let killed = Killed {
            broker: 1,
            at_ms: T + 50,
        };
        let replay_killed = |killed: Vec<Killed>| {
            let jvms = Jvms {
                frozen: Vec::new(),
                killed,
            };
            replay_under(&log, 2, &jvms)
        };
        let v = replay_killed(vec![killed]);
        assert!(v.misfit.is_none(), "{v:?}");
        assert_eq!(v.unwritten_fetches, 1, "{v:?}");
        // Not killed, another broker killed, or killed long after: broker 2
        // is at 10, and the HW passed it.
        for killed in [
            vec![],
            vec![Killed {
                broker: 2,
                ..killed
            }],
            vec![Killed {
                at_ms: T + 50 + SAME_MOMENT_MS + 1,
                ..killed
            }],
        ] {
            let misfit = replay_killed(killed).misfit.expect("a misfit");
            assert!(misfit.contains("LeaderAdvanceHw"), "{misfit}");
        }
    }

    #[test]
    fn hw_moves_logged_out_of_order_by_two_request_threads_fit() {
        // Broker 2's fetch from 13 moved the HW 11 -> 12 and broker 3's
        // from 14 moved it 12 -> 13, but broker 3's thread logged first.
        let log = [
            recorded(T + 1, 2, 11),
            recorded(T + 1, 3, 12),
            hw(T + 2, 8, 11),
            hw(T + 3, 12, 13),
            recorded(T + 3, 3, 14),
            hw(T + 4, 11, 12),
            recorded(T + 4, 2, 13),
        ]
        .concat();
        let v = replay(&log, 2);
        assert!(v.misfit.is_none(), "{v:?}");
        assert_eq!(v.hw_moves, 3, "{v:?}");
    }

    #[test]
    fn arrangements_are_every_ordered_choice_shortest_first() {
        assert_eq!(
            arrangements(&[4, 5, 6], 2),
            vec![
                vec![4],
                vec![5],
                vec![6],
                vec![4, 5],
                vec![4, 6],
                vec![5, 4],
                vec![5, 6],
                vec![6, 4],
                vec![6, 5]
            ]
        );
        assert_eq!(arrangements(&[4], 3), vec![vec![4]]);
        assert!(arrangements(&[], 3).is_empty());
    }

    #[test]
    fn an_hw_past_a_follower_in_the_isr_is_a_misfit() {
        let log = [
            recorded(T + 1, 2, 10),
            recorded(T + 2, 3, 9),
            hw(T + 3, 8, 10),
        ]
        .concat();
        let v = replay(&log, 2);
        let misfit = v.misfit.expect("a misfit");
        assert!(
            misfit.contains("line 3") && misfit.contains("3: 9"),
            "{misfit}"
        );
    }

    #[test]
    fn a_follower_fetching_again_from_where_it_was_lost_the_answer() {
        // Broker 3's fetch from 12 shows the leader held 12; broker 2
        // fetched from 10, and again from 10: the leader had records for
        // it, so it did not apply that answer. Its third fetch copied them.
        let log = [
            recorded(T + 1, 3, 12),
            recorded(T + 2, 2, 10),
            recorded(T + 3, 2, 10),
            recorded(T + 4, 2, 12),
        ]
        .concat();
        let v = replay(&log, 2);
        assert!(v.misfit.is_none(), "{v:?}");
        assert_eq!((v.lost_answers, v.fetches), (1, 3), "{v:?}");
    }

    #[test]
    fn a_write_while_the_isr_is_below_min_insync_replicas_is_a_misfit() {
        // ISR [1] under min.insync.replicas 2 with acks=all: the leader
        // refuses writes, so no follower can fetch past its log end offset.
        let log = [
            line(
                T + 1,
                "ISR updated to 1 (under-min-isr) and version updated to 3",
            ),
            recorded(T + 2, 2, 11),
        ]
        .concat();
        let misfit = replay(&log, 2).misfit.expect("a misfit");
        assert!(
            misfit.contains("refuses its write at offset 10"),
            "{misfit}"
        );
        assert!(replay(&log, 1).misfit.is_none());
    }
}
