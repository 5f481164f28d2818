//! Rebuilding the cluster from a concurrent run's trace: each entry carries
//! the state of the actor after the event, but not its log; the logs are
//! rebuilt from the events (a produce appends, a fetch response applied
//! copies what the leader served, truncation cuts). The result is a
//! [`ClusterSnapshot`], seen through the refinement mapping of
//! spec/trace-validation.md (finer-grained steps shown as the model's
//! atomic ones), ready for the abstraction function.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::window::Window;
use super::Unsound;

use highwater::cluster::{
    Actor, ClusterSnapshot, Event, RecordHistory, ReplicaSnapshot, TraceEntry,
};
use highwater::replication::{
    Acks, ControllerState, LeaderAndIsr, LeaderEpoch, LeaderView, LogEntry, PartitionState,
    RecordId, ReplicaId, Role, TruncationMode,
};

/// What a leader served a follower, kept until the follower applies it.
#[derive(Debug, Clone)]
struct Served {
    fetch_offset: u64,
    entries: Vec<LogEntry>,
    high_watermark: u64,
    /// A diverging epoch (KIP-320): no records, and the follower truncates
    /// when it takes it, so it is not shown as applied before then.
    diverging: bool,
    /// The epoch the follower fetched in.
    epoch: LeaderEpoch,
}

/// A replica's log as rebuilt, from the window's first offset on: the
/// settled prefix before it is dropped (`Rebuild::trim`), so that a
/// snapshot copies only what the window holds and validation stays linear
/// in a trace's length.
#[derive(Debug, Clone, Default)]
struct ShadowLog {
    /// The offset of `entries[0]`.
    start: u64,
    entries: Vec<LogEntry>,
    /// The lowest offset changed since `Rebuild::take_log_change` (for
    /// trace validation's incremental abstraction).
    changed_from: Option<u64>,
}

impl ShadowLog {
    fn leo(&self) -> u64 {
        self.start + self.entries.len() as u64
    }

    /// Entries from offset `from` to `to` (clamped to the log).
    fn range(&self, from: u64, to: u64) -> &[LogEntry] {
        let at = |o: u64| (o.saturating_sub(self.start) as usize).min(self.entries.len());
        &self.entries[at(from)..at(to).max(at(from))]
    }

    /// Cuts the log back to `leo`; below the dropped prefix is an error
    /// (the window settled it: nothing may cut it).
    fn truncate(&mut self, leo: u64, r: ReplicaId) -> Result<(), String> {
        let keep = leo.checked_sub(self.start).ok_or_else(|| {
            format!(
                "replica {r}'s log cut back to {leo}, below the settled prefix (offsets below {})",
                self.start
            )
        })?;
        if leo < self.leo() {
            self.changed(leo);
        }
        self.entries.truncate(keep as usize);
        Ok(())
    }

    fn push(&mut self, e: LogEntry) {
        self.changed(self.leo());
        self.entries.push(e);
    }

    fn changed(&mut self, offset: u64) {
        self.changed_from = Some(self.changed_from.map_or(offset, |c| c.min(offset)));
    }

    /// Drops the entries below `offset`.
    fn trim(&mut self, offset: u64) {
        let n = (offset.saturating_sub(self.start) as usize).min(self.entries.len());
        self.entries.drain(..n);
        self.start += n as u64;
        self.changed(self.start);
    }
}

/// One replica as rebuilt.
#[derive(Debug, Clone, Default)]
struct Shadow {
    alive: bool,
    log: ShadowLog,
    state: Option<PartitionState>,
    unclean_down: bool,
    /// Registered with the controller, its Restart event still to come.
    registered: Option<Option<LeaderEpoch>>,
    /// Between a LeaderAndIsr taken and its truncation done: the replica as
    /// it was before (the model's BecomeFollower is the pair, atomic).
    frozen: Option<ReplicaSnapshot>,
    /// Counts the times `frozen` was set.
    frozen_gen: u64,
    /// The last HW, recovery point and HW checkpoint seen while up.
    last_hw: u64,
    last_rp: u64,
    last_hw_checkpoint: u64,
    /// As leader: the epoch and the HW up to which its records were marked
    /// visible (`Rebuild::mark_visible`).
    marked: Option<(LeaderEpoch, u64)>,
}

/// `x` without its log (its LEO kept).
fn without_log(x: &ReplicaSnapshot) -> ReplicaSnapshot {
    ReplicaSnapshot {
        id: x.id,
        alive: x.alive,
        log: Vec::new(),
        high_watermark: x.high_watermark,
        log_end_offset: x.log_end_offset,
        recovery_point: x.recovery_point,
        hw_checkpoint: x.hw_checkpoint,
        leader_epoch: x.leader_epoch,
        leader: x.leader,
        isr: x.isr.clone(),
        follower_leo: x.follower_leo.clone(),
        stale_fetch: x.stale_fetch.clone(),
        pending_acks: x.pending_acks.clone(),
        unclean_down: x.unclean_down,
        truncating: x.truncating,
    }
}

/// The cluster rebuilt from a trace, event by event.
pub struct Rebuild {
    acks: Acks,
    truncation: TruncationMode,
    fencing: bool,
    replicas: Vec<Shadow>,
    controller: ControllerState,
    requests: Arc<BTreeMap<LeaderEpoch, LeaderAndIsr>>,
    /// Every ISR the controller held in each epoch, oldest first.
    epoch_isrs: Arc<BTreeMap<LeaderEpoch, Vec<Vec<ReplicaId>>>>,
    /// Implementation record id -> model record id (order of append).
    ids: HashMap<RecordId, u64>,
    /// Shared with the snapshots (`snapshot`), changed in place once they
    /// are dropped (`Arc::make_mut`).
    records: Arc<BTreeMap<u64, RecordHistory>>,
    /// Produce request id -> the records it carried.
    request_records: HashMap<u64, Vec<RecordId>>,
    /// (follower, leader) -> the last response served.
    served: HashMap<(ReplicaId, ReplicaId), Served>,
    /// (observer, crashed peer): the crash not yet noticed by the observer.
    unnoticed_crashes: BTreeSet<(ReplicaId, ReplicaId)>,
    /// Produce requests released and not yet answered: whether written.
    released: HashMap<u64, bool>,
    min_isr: usize,
    /// (leader, change) decided by the controller, answer not yet taken.
    decided: HashMap<ReplicaId, Vec<ReplicaId>>,
    clean_crashes: u32,
    unclean_crashes: u32,
    leader_moves: u32,
    /// Set when a step the model has no action for happened since the
    /// last check (a fetch response dropped by a follower that moved on):
    /// the checker may then resynchronise, and counts it.
    pub gap: Option<Gap>,
    /// A fix of the rebuild reverted (test-only: `Unsound`).
    pub(super) unsound: Option<Unsound>,
    /// The records changed since `take_record_changes`, when kept
    /// (`keep_changes`).
    record_changes: Option<Vec<u64>>,
}

/// Where a replica's log as [`Rebuild::snapshot`] shows it comes from.
pub enum LogSource<'a> {
    /// As before its LeaderAndIsr (`Shadow::frozen`): this log, set the
    /// `gen`th time.
    Frozen { gen: u64, log: &'a [LogEntry] },
    /// Its rebuilt log (`Rebuild::take_log_change` says what changed),
    /// followed by the entries of a response served and not yet applied.
    Rebuilt { extra: &'a [LogEntry] },
}

/// One half of a fetch without the other: the model's FollowerFetch is
/// atomic, so it has no state where the leader served and the follower did
/// not copy (a response served and never applied: the follower is taken as
/// it is), nor one where the leader serves a request its follower sent in
/// an epoch it has since left (the follower drops the answer; the leader is
/// taken as it is). The checker may take these replicas as they are
/// (counted).
#[derive(Debug, Clone, Default)]
pub struct Gap {
    pub why: String,
    pub replicas: Vec<ReplicaId>,
}

impl Rebuild {
    fn gap_at(&mut self, why: String, replicas: impl Iterator<Item = ReplicaId>) {
        let g = self.gap.get_or_insert_with(Gap::default);
        if g.why.is_empty() {
            g.why = why;
        }
        for f in replicas {
            if !g.replicas.contains(&f) {
                g.replicas.push(f);
            }
        }
    }
}

/// Whether an answer served and not yet applied changes its follower
/// (records, or another HW: a follower takes its leader's HW, lower or
/// higher, as Kafka's `UnifiedLog.maybeUpdateHighWatermark` does; only a
/// higher one under `Unsound::OnlyAHigherHwChanges`). One that brings
/// nothing (a held fetch at the follower's LEO and HW) is shown as
/// applied to no effect.
fn changes(x: &Served, s: &Shadow, higher_only: bool) -> bool {
    let hw = s.state.as_ref().map_or(s.last_hw, |st| st.high_watermark);
    let leo = s.log.leo() + x.entries.len() as u64;
    let hw_changes = match higher_only {
        true => x.high_watermark.min(leo) > hw,
        false => x.high_watermark.min(leo) != hw,
    };
    !x.diverging && (!x.entries.is_empty() || hw_changes)
}

fn replica_of(entry: &TraceEntry) -> Option<ReplicaId> {
    match entry.actor {
        Actor::Replica(r) => Some(r),
        Actor::Controller | Actor::Consumer(_) => None,
    }
}

impl Rebuild {
    /// A cluster of `n` replicas, all up with empty logs, and the
    /// controller's initial state.
    pub fn new(
        n: u32,
        acks: Acks,
        truncation: TruncationMode,
        fencing: bool,
        min_isr: usize,
        controller: ControllerState,
    ) -> Rebuild {
        let replicas = (0..n)
            .map(|_| Shadow {
                alive: true,
                ..Shadow::default()
            })
            .collect();
        Rebuild {
            acks,
            truncation,
            fencing,
            replicas,
            controller,
            requests: Arc::default(),
            epoch_isrs: Arc::default(),
            ids: HashMap::new(),
            records: Arc::default(),
            request_records: HashMap::new(),
            served: HashMap::new(),
            unnoticed_crashes: BTreeSet::new(),
            decided: HashMap::new(),
            released: HashMap::new(),
            min_isr,
            clean_crashes: 0,
            unclean_crashes: 0,
            leader_moves: 0,
            gap: None,
            unsound: None,
            record_changes: None,
        }
    }

    /// Keeps, from now on, what changed (for `take_log_change` and
    /// `take_record_changes`).
    pub fn keep_changes(&mut self) {
        self.record_changes.get_or_insert_with(Vec::new);
    }

    /// The lowest offset of replica `r`'s rebuilt log changed since the
    /// last call (None: nothing).
    pub fn take_log_change(&mut self, r: ReplicaId) -> Option<u64> {
        self.replicas[r as usize].log.changed_from.take()
    }

    /// The records whose history changed (or that were appended) since
    /// the last call, if kept (`keep_changes`).
    pub fn take_record_changes(&mut self) -> Vec<u64> {
        self.record_changes
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn record_changed(&mut self, id: u64) {
        if let Some(c) = self.record_changes.as_mut() {
            c.push(id);
        }
    }

    /// The replicas.
    pub fn replica_count(&self) -> usize {
        self.replicas.len()
    }

    /// Replica `r`'s rebuilt log from offset `from` on.
    pub fn log_from(&self, r: ReplicaId, from: u64) -> &[LogEntry] {
        let log = &self.replicas[r as usize].log;
        log.range(from, log.leo())
    }

    /// The records, by the rebuild's id.
    pub fn records(&self) -> &BTreeMap<u64, RecordHistory> {
        &self.records
    }

    /// Where replica `r`'s log as [`Rebuild::snapshot`] shows it comes from.
    pub fn log_source(&self, r: ReplicaId) -> LogSource<'_> {
        let s = &self.replicas[r as usize];
        if let Some(frozen) = self.frozen(r) {
            return LogSource::Frozen {
                gen: s.frozen_gen,
                log: &frozen.log,
            };
        }
        let extra = match (&s.state, s.alive) {
            (Some(st), true) => self.applied_pending(r, st, s.log.leo()),
            _ => None,
        };
        LogSource::Rebuilt {
            extra: extra.map_or(&[], |x| &x.entries[..]),
        }
    }

    /// The frozen snapshot `r` is shown as, if it is.
    fn frozen(&self, r: ReplicaId) -> Option<&ReplicaSnapshot> {
        self.replicas[r as usize]
            .frozen
            .as_ref()
            .filter(|_| self.unsettled(r))
    }

    /// The response served to `r` and not yet applied that it is shown as
    /// having applied, if any.
    fn applied_pending(&self, r: ReplicaId, st: &PartitionState, leo: u64) -> Option<&Served> {
        let LeaderView::Replica(l) = st.leader else {
            return None;
        };
        let fetching = matches!(
            st.role,
            Role::Follower {
                truncating: false,
                ..
            }
        );
        self.served
            .get(&(r, l))
            .filter(|x| fetching && !x.diverging && x.fetch_offset == leo)
    }

    /// Whether the test-only switch `u` is set.
    fn reverts(&self, u: &[Unsound]) -> bool {
        self.unsound.is_some_and(|x| u.contains(&x))
    }

    fn shadow(&mut self, r: ReplicaId) -> Result<&mut Shadow, String> {
        self.replicas
            .get_mut(r as usize)
            .ok_or_else(|| format!("replica {r} is not in the cluster"))
    }

    /// Takes one entry; an event the rebuilt cluster cannot explain (a
    /// response applied that was never served, a log growing while down)
    /// is an error.
    pub fn apply(&mut self, entry: &TraceEntry) -> Result<(), String> {
        match (replica_of(entry), entry.actor) {
            (Some(r), _) => self.replica_event(r, entry)?,
            // A read changes no replica (`reads.rs` checks it).
            (None, Actor::Consumer(_)) => return Ok(()),
            (None, _) => self.controller_event(entry)?,
        }
        // A follower settles once its leader leads: from then on it is
        // itself (it stays so if that leader later fails).
        for r in 0..self.replicas.len() as ReplicaId {
            if self.replicas[r as usize].frozen.is_some() && !self.unsettled(r) {
                self.replicas[r as usize].frozen = None;
            }
        }
        self.mark_visible();
        Ok(())
    }

    fn controller_event(&mut self, entry: &TraceEntry) -> Result<(), String> {
        let Some(after) = entry.controller.clone() else {
            return Err("a controller event without the controller's state".into());
        };
        let before_leader = self.controller.leader;
        match &entry.event {
            Event::ControllerElectLeader { .. } if before_leader.is_some() => {
                self.leader_moves += 1;
            }
            // Decided for a leader that crashed since it sent the request:
            // the answer reaches no one.
            Event::ControllerAlterPartition {
                leader,
                result: Ok(isr),
                ..
            } if self.replicas.get(*leader as usize).is_some_and(|s| s.alive)
                || self.reverts(&[
                    Unsound::DecisionForACrashedLeader,
                    Unsound::DecisionForACrashedLeaderPastANewRequest,
                ]) =>
            {
                self.decided.insert(*leader, isr.clone());
            }
            Event::BrokerRegistered { replica, .. } => {
                let epoch = after.leader_epoch;
                self.shadow(*replica)?.registered = Some(epoch);
            }
            _ => {}
        }
        // Every ISR an epoch had, in order: the updates its leader applies
        // one after the other, even once the epoch is left.
        if let Some(e) = after.leader_epoch {
            let isrs = Arc::make_mut(&mut self.epoch_isrs).entry(e).or_default();
            if isrs.last() != Some(&after.isr) {
                isrs.push(after.isr.clone());
            }
        }
        if let Some(epoch) = after.leader_epoch {
            Arc::make_mut(&mut self.requests)
                .entry(epoch)
                .or_insert_with(|| LeaderAndIsr {
                    leader_epoch: epoch,
                    // Not traced; the model has no partition epoch.
                    partition_epoch: 0,
                    leader: after.leader,
                    isr: after.isr.clone(),
                    replicas: Vec::new(),
                });
        }
        self.controller = after;
        Ok(())
    }

    fn replica_event(&mut self, r: ReplicaId, entry: &TraceEntry) -> Result<(), String> {
        let n = self.replicas.len() as ReplicaId;
        if r >= n {
            return Err(format!("an event of replica {r}, beyond the {n} replicas"));
        }
        match &entry.event {
            Event::Crash { clean } => {
                let s = self.shadow(r)?;
                s.alive = false;
                s.state = None;
                s.frozen = None;
                s.registered = None;
                if *clean {
                    // A clean shutdown flushes everything.
                    s.last_rp = s.log.leo();
                    // And checkpoints the HW.
                    s.last_hw_checkpoint = s.last_hw;
                    self.clean_crashes += 1;
                } else {
                    let rp = s.last_rp;
                    s.log.truncate(rp, r)?;
                    // The HW comes back from its last checkpoint.
                    s.last_hw = s.last_hw_checkpoint;
                    s.unclean_down = true;
                    self.unclean_crashes += 1;
                }
                // Responses it was served are lost with it. Responses it
                // served stay: one may have reached its follower before
                // the crash, and applying it then is the fetch's second
                // half (a follower moving on without it is a gap, below).
                if self.served.keys().any(|&(f, _)| f == r) {
                    let why = format!("replica {r} crashed with a response served and not applied");
                    self.gap_at(why, std::iter::once(r));
                }
                self.served.retain(|&(f, _), _| f != r);
                self.decided.remove(&r);
                // A broker that is down hears nothing of it (and comes back
                // with no leader state the notice could change).
                let all = self.reverts(&[Unsound::CrashHeardByADownBroker]);
                for o in (0..n).filter(|&o| o != r) {
                    if self.replicas[o as usize].alive || all {
                        self.unnoticed_crashes.insert((o, r));
                    }
                }
                self.unnoticed_crashes.retain(|&(o, _)| o != r);
                return Ok(());
            }
            Event::Restart { log_end_offset, .. } => {
                let s = self.shadow(r)?;
                if *log_end_offset > s.log.leo() {
                    return Err(format!(
                        "replica {r} restarted with LEO {log_end_offset}, but its log ended at \
                         {} when it went down",
                        s.log.leo()
                    ));
                }
                s.log.truncate(*log_end_offset, r)?;
                s.alive = true;
                s.unclean_down = false;
                s.registered = None;
            }
            Event::Produce {
                request_id,
                records,
                result: Ok((base, epoch)),
            } => {
                let len = self.shadow(r)?.log.leo();
                if *base != len {
                    return Err(format!(
                        "replica {r} appended at {base} with its LEO at {len}"
                    ));
                }
                for (i, &id) in records.iter().enumerate() {
                    let model_id = self.ids.len() as u64;
                    if self.ids.insert(id, model_id).is_some() {
                        return Err(format!("record {id} appended twice"));
                    }
                    self.record_changed(model_id);
                    Arc::make_mut(&mut self.records).insert(
                        model_id,
                        RecordHistory {
                            offset: base + i as u64,
                            acked: (self.acks == Acks::Leader).then_some(*epoch),
                            visible: None,
                        },
                    );
                    self.shadow(r)?.log.push(LogEntry {
                        offset: base + i as u64,
                        epoch: *epoch,
                        record_id: Some(model_id),
                    });
                }
                self.request_records.insert(*request_id, records.clone());
            }
            Event::ProduceAnswered { request_id, result } => {
                if let Some(predicted) = self.released.remove(request_id) {
                    if predicted != result.is_ok() {
                        return Err(format!(
                            "request {request_id} answered {result:?}, but the HW advance that \
                             released it had {}the ISR min.insync.replicas asks",
                            if predicted { "" } else { "not " }
                        ));
                    }
                } else if let Ok((_, epoch)) = result {
                    self.ack(*request_id, *epoch);
                }
            }
            Event::FetchServed {
                follower,
                fetch_offset,
                follower_epoch,
                error: None,
                log_end_offset,
                high_watermark,
                diverging,
                served_end,
            } => {
                let log = &self.shadow(r)?.log;
                // A diverging epoch's answer holds no records, whatever
                // the leader's LEO (`Partition::check_last_fetched_epoch`);
                // one cut short by `replica.fetch.max.bytes` holds those
                // up to where it says.
                let entries = if *diverging {
                    Vec::new()
                } else {
                    let end = served_end.unwrap_or(*log_end_offset).min(*log_end_offset);
                    log.range(*fetch_offset, end).to_vec()
                };
                // Served to a follower that is down (the leader checked
                // its incarnation just before it crashed): the answer
                // never reaches it, and its next incarnation drops it
                // (`Partition::set_correlation_base`). Not a fetch of the
                // model's; the leader learnt nothing new (the fetch is the
                // one it already learnt from when it held it, or one it
                // took before the crash).
                if !self.shadow(*follower)?.alive {
                    return self.take_entry_state(r, entry);
                }
                // A request the follower sent in an epoch it has since left
                // (a leader slow to take its requests serves it late): the
                // follower drops the answer, and the leader has learnt its
                // LEO from a fetch the model's atomic FollowerFetch cannot
                // place (the two were never in that epoch at once). A gap:
                // the leader is taken as it is.
                let now = self.shadow(*follower)?.state.as_ref();
                let left = now.and_then(|st| st.leader_epoch) > Some(*follower_epoch);
                if left && !self.reverts(&[Unsound::StaleEpochFetchServedAsAny]) {
                    let why = format!(
                        "replica {r} served a fetch replica {follower} sent in epoch \
                         {follower_epoch}, which it has since left"
                    );
                    self.gap_at(why, std::iter::once(r));
                    return self.take_entry_state(r, entry);
                }
                // A new fetch answered while records served before were
                // not applied: the follower sent it again (its request
                // timed out), and drops the late answer unread. The model
                // has no step for a lost answer: a gap for that follower.
                // (A held fetch is traced when held and again when sent,
                // but a held answer holds no records.)
                if self
                    .served
                    .get(&(*follower, r))
                    .is_some_and(|x| !x.entries.is_empty())
                {
                    let why = format!(
                        "replica {follower} fetched again with records served and not applied"
                    );
                    self.gap_at(why, std::iter::once(*follower));
                }
                self.served.insert(
                    (*follower, r),
                    Served {
                        fetch_offset: *fetch_offset,
                        entries,
                        high_watermark: *high_watermark,
                        diverging: *diverging,
                        epoch: *follower_epoch,
                    },
                );
            }
            Event::FetchApplied {
                leader,
                fetch_offset,
                log_end_offset,
                error,
                ..
            } => {
                let served = self.served.remove(&(r, *leader));
                // A diverging answer taken after its leader left the epoch
                // it served in (it crashed, or became a follower): the
                // follower truncates as Kafka's does (its fetch state is
                // still of that epoch: `AbstractFetcherThread.processFetchRequest`
                // takes an answer while the partition's leader epoch is the
                // request's, and `truncateOnFetchResponse` cuts at the
                // diverging epoch's end), but the model's atomic
                // FollowerFetch needs the leader to lead at the moment
                // the follower takes it. A gap: the follower is taken as
                // it is.
                if let Some(x) = served.as_ref().filter(|x| x.diverging) {
                    let leads = self.hw_leading_in(*leader, x.epoch).is_some();
                    if !leads && !self.reverts(&[Unsound::LateDivergingAnswerAsAny]) {
                        let why = format!(
                            "replica {r} took a diverging answer {leader} served in epoch {}, \
                             which {leader} has since left",
                            x.epoch
                        );
                        self.gap_at(why, std::iter::once(r));
                        return self.take_entry_state(r, entry);
                    }
                }
                let s = self.shadow(r)?;
                let len = s.log.leo();
                if *log_end_offset > len {
                    let Some(served) = served.filter(|x| x.fetch_offset == *fetch_offset) else {
                        return Err(format!(
                            "replica {r} applied a fetch response from {leader} at offset \
                             {fetch_offset} that {leader} never served"
                        ));
                    };
                    let want = (*log_end_offset - len) as usize;
                    if served.fetch_offset != len || served.entries.len() < want {
                        return Err(format!(
                            "replica {r} grew to {log_end_offset} from {len} by a response \
                             that held offsets {}..{}",
                            served.fetch_offset,
                            served.fetch_offset + served.entries.len() as u64
                        ));
                    }
                    for &e in &served.entries[..want] {
                        s.log.push(e);
                    }
                } else if let Some(lost) = served
                    .as_ref()
                    .filter(|x| error.is_some() && changes(x, s, false))
                {
                    // An error answer taken where an answer served before
                    // was shown as applied: the first answer was lost (seen
                    // after a fetch sent again and failed by the leader's
                    // storage). The model has no step for a lost answer: a
                    // gap for that follower.
                    let why = format!(
                        "replica {r} took an error answer from {leader}, losing the answer \
                         served at offset {} (HW {})",
                        lost.fetch_offset, lost.high_watermark
                    );
                    if !self.reverts(&[Unsound::ErrorAnswerLosesNothing]) {
                        self.gap_at(why, std::iter::once(r));
                    }
                } else if served.is_none() && error.is_none() {
                    // An error answer (NotLeaderOrFollower, fenced) holds no
                    // records and is not kept as served: taking it changes
                    // only what the entry's state says.
                    return Err(format!(
                        "replica {r} applied a fetch response from {leader} at offset \
                         {fetch_offset} that {leader} never served"
                    ));
                }
            }
            Event::PeerCrashNoticed { peer } => {
                self.unnoticed_crashes.remove(&(r, *peer));
            }
            // (Test-only: the decision kept past a new request.)
            Event::AlterPartitionSent { .. }
                if self.reverts(&[
                    Unsound::DecisionPastANewRequest,
                    Unsound::DecisionForACrashedLeaderPastANewRequest,
                ]) => {}
            // A new request: a decision on an earlier one whose answer
            // never came is forgotten with it.
            Event::AlterPartitionAnswered { .. } | Event::AlterPartitionSent { .. } => {
                self.decided.remove(&r);
            }
            _ => {}
        }
        self.take_entry_state(r, entry)
    }

    fn take_entry_state(&mut self, r: ReplicaId, entry: &TraceEntry) -> Result<(), String> {
        let state = entry
            .replica
            .clone()
            .ok_or_else(|| format!("an event of replica {r} without its state"))?;
        self.take_state(r, state)
    }

    fn ack(&mut self, request_id: u64, epoch: LeaderEpoch) {
        for id in self
            .request_records
            .get(&request_id)
            .cloned()
            .unwrap_or_default()
        {
            let Some(&m) = self.ids.get(&id) else {
                continue;
            };
            if let Some(h) = Arc::make_mut(&mut self.records).get_mut(&m) {
                h.acked = Some(h.acked.map_or(epoch, |a| a.min(epoch)));
                self.record_changed(m);
            }
        }
    }

    /// The replica's state after its event: the log cut to its LEO (any
    /// truncation), never grown by an event that did not say how.
    fn take_state(&mut self, r: ReplicaId, state: PartitionState) -> Result<(), String> {
        // Producers an event released (an HW advance, a lost leadership)
        // are answered in the events that follow, which other actors'
        // events may interleave; the model's LeaderAdvanceHw answers them
        // at once, so the answer is placed here: written if the leader
        // still leads with an ISR of min.insync.replicas (the model's
        // rule), checked against the answer when it is traced.
        if let Some(old) = self.replicas[r as usize].state.as_ref() {
            let released: Vec<u64> = old
                .waiting_acks
                .iter()
                .filter(|q| !state.waiting_acks.contains(q))
                .copied()
                .collect();
            let leads = state.leader == LeaderView::Replica(r);
            let written = leads && state.isr.len() >= self.min_isr;
            for q in released {
                self.released.insert(q, written);
                if let (true, Some(epoch)) = (written, state.leader_epoch) {
                    self.ack(q, epoch);
                }
            }
        }
        // A follower taking a new epoch drops what it was served before.
        let epoch_moved = self.replicas[r as usize]
            .state
            .as_ref()
            .is_some_and(|old| old.leader_epoch != state.leader_epoch);
        if epoch_moved {
            let before = self.served.len();
            self.served.retain(|&(f, _), _| f != r);
            if self.served.len() != before {
                let why = format!(
                    "replica {r} moved to epoch {:?} with a fetch response served and not taken",
                    state.leader_epoch
                );
                self.gap_at(why, std::iter::once(r));
            }
        }
        let moved = self.replicas[r as usize].state.as_ref().is_some_and(|old| {
            (old.leader_epoch, old.leader) != (state.leader_epoch, state.leader)
        });
        let following = matches!(state.role, Role::Follower { .. });
        if moved && following && self.replicas[r as usize].frozen.is_none() {
            let before = self.replica_snapshot(r);
            self.replicas[r as usize].frozen = Some(before);
            self.replicas[r as usize].frozen_gen += 1;
        }
        let s = self.shadow(r)?;
        if !following {
            s.frozen = None;
        }
        let leo = state.log_end_offset;
        if leo > s.log.leo() {
            return Err(format!(
                "replica {r}'s LEO is {leo}, but the events took its log to {}",
                s.log.leo()
            ));
        }
        s.log.truncate(leo, r)?;
        s.last_hw = state.high_watermark;
        s.last_rp = state.recovery_point;
        s.last_hw_checkpoint = state.hw_checkpoint;
        s.state = Some(state);
        Ok(())
    }

    /// The rebuild's number of the implementation's record `id` (the
    /// order of append), if a leader appended it.
    pub fn record_number(&self, id: RecordId) -> Option<u64> {
        self.ids.get(&id).copied()
    }

    /// Replica `r`'s HW, if it is up and leads in `epoch`.
    pub fn hw_leading_in(&self, r: ReplicaId, epoch: LeaderEpoch) -> Option<u64> {
        let s = self.replicas.get(r as usize).filter(|s| s.alive)?;
        let st = s.state.as_ref()?;
        (st.leader == LeaderView::Replica(r) && st.leader_epoch == Some(epoch))
            .then_some(st.high_watermark)
    }

    /// Records below a presumed leader's HW are visible at its epoch.
    fn mark_visible(&mut self) {
        for (i, s) in self.replicas.iter_mut().enumerate() {
            let leading = s
                .state
                .as_ref()
                .filter(|st| s.alive && st.leader == LeaderView::Replica(i as ReplicaId))
                .and_then(|st| Some((st.leader_epoch?, st.high_watermark)));
            let Some((epoch, hw)) = leading else {
                s.marked = None;
                continue;
            };
            // A leader's log below its HW does not change while it leads
            // in one epoch: only what the HW passed since is marked (a
            // whole pass at every event made long traces quadratic).
            let from = match s.marked {
                Some((e, upto)) if e == epoch => upto.min(hw),
                _ => 0,
            };
            for e in s.log.range(from, hw) {
                if let Some((id, h)) = e
                    .record_id
                    .and_then(|id| Some((id, Arc::make_mut(&mut self.records).get_mut(&id)?)))
                {
                    h.visible = Some(h.visible.map_or(epoch, |v| v.min(epoch)));
                    if let Some(c) = self.record_changes.as_mut() {
                        c.push(id);
                    }
                }
            }
            s.marked = Some((epoch, hw));
        }
    }

    /// A follower that took a LeaderAndIsr the model's BecomeFollower would
    /// not yet be enabled for: its truncation is not done, or (in every
    /// mode that asks the leader) its leader does not lead yet, in its
    /// epoch under KIP-320 (the model's `follow_enabled`).
    fn unsettled(&self, r: ReplicaId) -> bool {
        let Some(st) = self.replicas[r as usize].state.as_ref() else {
            return false;
        };
        let Role::Follower { leader, truncating } = st.role else {
            return false;
        };
        if truncating {
            return true;
        }
        if !self.truncation.asks_leader() {
            return false;
        }
        let Some(l) = self.replicas.get(leader as usize) else {
            return true;
        };
        let leads = l.alive
            && l.state.as_ref().is_some_and(|ls| {
                ls.leader == LeaderView::Replica(leader)
                    && (!self.fencing || ls.leader_epoch == st.leader_epoch)
            });
        !leads
    }

    /// Drops what `window` has dropped, so that a snapshot holds only what
    /// it sees: every log's entries below its first offset (the settled
    /// prefix, the same on every log, which nothing may cut after:
    /// `ShadowLog::truncate`), the records it dropped, and the requests of
    /// the epochs below its first (no replica can take them any more).
    pub fn trim(&mut self, window: &Window) {
        for s in &mut self.replicas {
            s.log.trim(window.base);
            if let Some(frozen) = s.frozen.as_mut() {
                frozen.log.retain(|e| e.offset >= window.base);
            }
        }
        Arc::make_mut(&mut self.records).retain(|&id, _| window.keeps(id));
        Arc::make_mut(&mut self.requests).retain(|&e, _| e >= window.epoch_base);
        Arc::make_mut(&mut self.epoch_isrs).retain(|&e, _| e >= window.epoch_base);
    }

    /// The highest leader epoch the controller has named (for
    /// `window::resume_hint`).
    pub fn highest_epoch(&self) -> Option<LeaderEpoch> {
        self.requests.keys().next_back().copied()
    }

    /// The lowest offset a served response not yet applied could still
    /// take a follower back to, and which follower: shown as applied
    /// (`replica_snapshot`), it is lost if the follower crashes or drops
    /// it first (a gap, `Gap`), and the follower is then taken at its own
    /// LEO and HW. The window must not settle above that.
    pub fn unapplied_floor(&self) -> Option<(u64, ReplicaId)> {
        self.served
            .iter()
            .filter(|(_, x)| !x.diverging)
            .filter_map(|(&(f, _), _)| {
                let s = self.replicas.get(f as usize)?;
                let hw = s.state.as_ref().map_or(s.last_hw, |st| st.high_watermark);
                Some((s.log.leo().min(hw), f))
            })
            .min()
    }

    /// The followers with a fetch answered and not yet applied whose answer
    /// changes them (records, or another HW: a follower takes its leader's
    /// HW, lower or higher, as Kafka's `UnifiedLog.maybeUpdateHighWatermark`
    /// does): shown as applied, so their
    /// own Flush or CheckpointHw before the apply must go before the fetch
    /// (`Checker::reorder`).
    pub fn unapplied_followers(&self) -> Vec<ReplicaId> {
        let higher_only = self.reverts(&[Unsound::OnlyAHigherHwChanges]);
        self.served
            .iter()
            .filter(|(&(f, _), x)| {
                self.replicas
                    .get(f as usize)
                    .is_some_and(|s| changes(x, s, higher_only))
            })
            .map(|(&(f, _), _)| f)
            .collect()
    }

    /// One replica as the model sees it, refinement applied: a follower
    /// still truncating shows as before its LeaderAndIsr; a response served
    /// and not yet applied shows as applied; a crash not yet noticed shows
    /// as noticed; an ISR change the controller decided shows as answered;
    /// a registered broker whose restart is under way shows as restarted.
    fn replica_snapshot(&self, r: ReplicaId) -> ReplicaSnapshot {
        self.replica_snapshot_with(r, true)
    }

    /// Every replica as [`Rebuild::snapshot`] shows it, but without the
    /// logs (empty; the LEOs kept): cheap, for `window::resume_hint`.
    pub fn replicas_without_logs(&self) -> Vec<ReplicaSnapshot> {
        (0..self.replicas.len() as ReplicaId)
            .map(|r| self.replica_snapshot_with(r, false))
            .collect()
    }

    fn replica_snapshot_with(&self, r: ReplicaId, with_log: bool) -> ReplicaSnapshot {
        let s = &self.replicas[r as usize];
        if let Some(frozen) = self.frozen(r) {
            return match with_log {
                true => frozen.clone(),
                false => without_log(frozen),
            };
        }
        let copy = |log: &ShadowLog| match with_log {
            true => log.entries.clone(),
            false => Vec::new(),
        };
        let leo = s.log.leo();
        let down = ReplicaSnapshot::down(
            r,
            copy(&s.log),
            leo,
            s.last_hw.min(leo),
            s.last_rp.min(leo),
            s.last_hw_checkpoint,
            s.unclean_down,
        );
        let st = match (&s.state, s.alive) {
            (Some(st), true) => st,
            // Not started yet: as in the model's initial state.
            (None, true) => {
                return ReplicaSnapshot {
                    alive: true,
                    ..down
                }
            }
            _ => {
                return match s.registered {
                    // Restart is linearized at its registration.
                    Some(epoch) => ReplicaSnapshot {
                        alive: true,
                        leader_epoch: epoch,
                        unclean_down: false,
                        ..down
                    },
                    None => down,
                };
            }
        };
        let mut log = copy(&s.log);
        let mut leo = leo;
        let mut hw = st.high_watermark;
        let recovery_point = st.recovery_point;
        if let Some(x) = self.applied_pending(r, st, leo) {
            if with_log {
                log.extend_from_slice(&x.entries);
            }
            leo += x.entries.len() as u64;
            hw = x.high_watermark.min(leo);
        }
        let mut stale: BTreeSet<ReplicaId> = st
            .followers
            .iter()
            .filter(|(_, v)| v.stale_fetch)
            .map(|(&f, _)| f)
            .collect();
        for &(o, p) in &self.unnoticed_crashes {
            let heard = st
                .followers
                .get(&p)
                .is_some_and(|v| v.log_end_offset.is_some());
            if o == r && heard {
                stale.insert(p);
            }
        }
        let isr = match self.decided.get(&r) {
            Some(isr) if st.pending_isr_change.is_some() => isr.clone(),
            _ => st.isr.clone(),
        };
        let pending_acks = st
            .waiting_acks
            .iter()
            .flat_map(|req| self.request_records.get(req).cloned().unwrap_or_default())
            .filter_map(|id| self.ids.get(&id).copied())
            .collect();
        ReplicaSnapshot {
            id: r,
            alive: true,
            log_end_offset: leo,
            log,
            high_watermark: hw,
            recovery_point,
            hw_checkpoint: st.hw_checkpoint,
            leader_epoch: st.leader_epoch,
            leader: st.leader,
            isr,
            follower_leo: st
                .followers
                .iter()
                .map(|(&f, v)| (f, v.log_end_offset))
                .collect(),
            stale_fetch: stale.into_iter().collect(),
            pending_acks,
            unclean_down: false,
            truncating: matches!(
                st.role,
                Role::Follower {
                    truncating: true,
                    ..
                }
            ),
        }
    }

    /// The cluster as the model sees it (see [`Rebuild::replica_snapshot`]).
    pub fn snapshot(&self) -> ClusterSnapshot {
        self.snapshot_with(true)
    }

    /// [`Rebuild::snapshot`] without the logs (empty; the LEOs kept: see
    /// [`Rebuild::log_source`]).
    pub fn snapshot_without_logs(&self) -> ClusterSnapshot {
        self.snapshot_with(false)
    }

    fn snapshot_with(&self, with_log: bool) -> ClusterSnapshot {
        ClusterSnapshot {
            replicas: (0..self.replicas.len() as ReplicaId)
                .map(|r| self.replica_snapshot_with(r, with_log))
                .collect(),
            controller: self.controller.clone(),
            requests: Arc::clone(&self.requests),
            epoch_isrs: Arc::clone(&self.epoch_isrs),
            records: Arc::clone(&self.records),
            clean_crashes: self.clean_crashes,
            unclean_crashes: self.unclean_crashes,
            leader_moves: self.leader_moves,
        }
    }

    /// One line per replica of what the implementation holds (for reports).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (i, s) in self.replicas.iter().enumerate() {
            // The last entries only: a long run's log would bury the rest.
            const SHOWN: usize = 16;
            let skip = s.log.entries.len().saturating_sub(SHOWN);
            let mut log: Vec<String> = s.log.entries[skip..]
                .iter()
                .map(|e| format!("{}@{}", e.record_id.map_or(-1, |x| x as i64), e.epoch))
                .collect();
            let before = s.log.start + skip as u64;
            if before > 0 {
                log.insert(0, format!("({before} entries before)"));
            }
            let st = s.state.as_ref().filter(|_| s.alive);
            out.push_str(&format!(
                "  replica {i}: {} log [{}] {}\n",
                if s.alive { "up" } else { "down" },
                log.join(" "),
                st.map_or(String::new(), |st| format!(
                    "hw {} rp {} epoch {:?} leader {:?} isr {:?} role {:?} followers {:?} pending {:?}",
                    st.high_watermark,
                    st.recovery_point,
                    st.leader_epoch,
                    st.leader,
                    st.isr,
                    st.role,
                    st.followers
                        .iter()
                        .map(|(f, v)| (f, v.log_end_offset, v.stale_fetch))
                        .collect::<Vec<_>>(),
                    st.pending_isr_change
                ))
            ));
        }
        out.push_str(&format!("  controller: {:?}\n", self.controller));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use highwater::replication::{Controller, ControllerConfig};

    fn state(r: ReplicaId, epoch: LeaderEpoch, role: Role, leo: u64, hw: u64) -> PartitionState {
        let leader = match role {
            Role::Leader => LeaderView::Replica(r),
            Role::Follower { leader, .. } => LeaderView::Replica(leader),
            Role::None => LeaderView::Unknown,
        };
        PartitionState {
            replica_id: r,
            leader_epoch: Some(epoch),
            leader,
            role,
            isr: Vec::new(),
            high_watermark: hw,
            log_end_offset: leo,
            log_start_offset: 0,
            recovery_point: leo,
            followers: BTreeMap::new(),
            waiting_acks: Vec::new(),
            epoch_start_offset: None,
            pending_isr_change: None,
            hw_checkpoint: hw,
        }
    }

    fn entry(seq: u64, r: ReplicaId, event: Event, state: Option<PartitionState>) -> TraceEntry {
        TraceEntry {
            seq,
            micros: seq,
            actor: Actor::Replica(r),
            event,
            replica: state,
            controller: None,
        }
    }

    fn produce(seq: u64, r: ReplicaId, id: u64, at: u64, epoch: LeaderEpoch) -> TraceEntry {
        let event = Event::Produce {
            request_id: id,
            records: vec![id],
            result: Ok((at, epoch)),
        };
        entry(
            seq,
            r,
            event,
            Some(state(r, epoch, Role::Leader, at + 1, 0)),
        )
    }

    /// Replica 0 led epoch 0 and wrote a@0, went down; replica 1 leads
    /// epoch 2 with b and c; replica 0 comes back fetching from 1 (truncation
    /// on fetch) with a@0 below its fetch offset.
    fn diverged() -> Rebuild {
        let controller = Controller::new(vec![0, 1], ControllerConfig::default())
            .unwrap()
            .state();
        let mut b = Rebuild::new(2, Acks::All, TruncationMode::OnFetch, true, 1, controller);
        let follower = Role::Follower {
            leader: 1,
            truncating: false,
        };
        let restart = Event::Restart {
            log_end_offset: 1,
            high_watermark: 0,
            recovery_point: 1,
        };
        for e in [
            produce(0, 0, 0, 0, 0),
            entry(1, 0, Event::Crash { clean: true }, None),
            produce(2, 1, 1, 0, 2),
            produce(3, 1, 2, 1, 2),
            entry(4, 0, restart, Some(state(0, 2, Role::None, 1, 0))),
            entry(
                5,
                0,
                Event::BecomeFollower {
                    epoch: 2,
                    leader: Some(1),
                },
                Some(state(0, 2, follower, 1, 0)),
            ),
        ] {
            b.apply(&e).unwrap();
        }
        b
    }

    fn served(diverging: bool) -> TraceEntry {
        let event = Event::FetchServed {
            follower: 0,
            fetch_offset: 1,
            follower_epoch: 2,
            error: None,
            log_end_offset: 2,
            high_watermark: 1,
            diverging,
            served_end: None,
        };
        entry(6, 1, event, Some(state(1, 2, Role::Leader, 2, 1)))
    }

    /// Once trimmed to the window, a snapshot holds only what the window
    /// holds, and a log cut below the settled prefix is an error (nothing
    /// may cut it).
    #[test]
    fn a_trimmed_log_is_copied_from_the_window_and_never_cut_below_it() {
        let mut b = diverged();
        b.trim(&Window::from_offset(1));
        let r1 = &b.snapshot().replicas[1];
        assert_eq!(r1.log_end_offset, 2);
        assert_eq!(r1.log.iter().map(|e| e.offset).collect::<Vec<_>>(), [1]);
        let cut = entry(
            6,
            1,
            Event::Flush { recovery_point: 0 },
            Some(state(1, 2, Role::Leader, 0, 0)),
        );
        let why = b.apply(&cut).unwrap_err();
        assert!(why.contains("below the settled prefix"), "{why}");
    }

    /// A diverging epoch's answer carries no records: replica 0 is not
    /// shown holding c over a (which broke "logs agree below the HW" when
    /// the rebuild took every answer as records, seed 102).
    #[test]
    fn a_diverging_answer_is_not_shown_as_records() {
        let mut b = diverged();
        b.apply(&served(true)).unwrap();
        let r0 = &b.snapshot().replicas[0];
        assert_eq!((r0.log.len(), r0.high_watermark), (1, 0));
        assert_eq!(b.unapplied_floor(), None);

        // The answer taken as records (the rebuild before the fix).
        let mut b = diverged();
        b.apply(&served(false)).unwrap();
        let r0 = &b.snapshot().replicas[0];
        assert_eq!((r0.log.len(), r0.high_watermark), (2, 1));
    }

    /// An answer served to a follower that crashed since is not shown as
    /// applied when it comes back (seed 10).
    #[test]
    fn an_answer_served_to_a_down_follower_is_dropped() {
        let mut b = diverged();
        b.apply(&entry(6, 0, Event::Crash { clean: true }, None))
            .unwrap();
        let event = Event::FetchServed {
            follower: 0,
            fetch_offset: 1,
            follower_epoch: 2,
            error: None,
            log_end_offset: 2,
            high_watermark: 0,
            diverging: false,
            served_end: None,
        };
        b.apply(&entry(7, 1, event, Some(state(1, 2, Role::Leader, 2, 0))))
            .unwrap();
        assert_eq!(b.unapplied_floor(), None);
    }

    /// A second fetch answered while records served before were not
    /// applied: the follower dropped that answer, a gap the checker may
    /// resynchronise over (a held answer, with no records, is none).
    #[test]
    fn a_fetch_sent_again_over_unapplied_records_is_a_gap() {
        let serve = |seq, leo| {
            let event = Event::FetchServed {
                follower: 0,
                fetch_offset: 1,
                follower_epoch: 2,
                error: None,
                log_end_offset: leo,
                high_watermark: 0,
                diverging: false,
                served_end: None,
            };
            entry(seq, 1, event, Some(state(1, 2, Role::Leader, 2, 0)))
        };
        let mut b = diverged();
        b.apply(&serve(6, 1)).unwrap();
        b.apply(&serve(7, 2)).unwrap();
        assert!(b.gap.is_none(), "a held answer re-served is no gap");
        b.apply(&serve(8, 2)).unwrap();
        let gap = b.gap.take().expect("the answer with records was lost");
        assert_eq!(gap.replicas, vec![0]);
    }

    /// A response served and not applied is shown as applied, but the
    /// window may not settle above where losing it takes the follower back.
    #[test]
    fn an_unapplied_response_bounds_the_window() {
        let mut b = diverged();
        let follower = Role::Follower {
            leader: 1,
            truncating: false,
        };
        let truncated = Event::FetchApplied {
            leader: 1,
            fetch_offset: 0,
            error: None,
            log_end_offset: 0,
            high_watermark: 0,
        };
        b.apply(&served(true)).unwrap();
        b.apply(&entry(7, 0, truncated, Some(state(0, 2, follower, 0, 0))))
            .unwrap();
        let event = Event::FetchServed {
            follower: 0,
            fetch_offset: 0,
            follower_epoch: 2,
            error: None,
            log_end_offset: 2,
            high_watermark: 1,
            diverging: false,
            served_end: None,
        };
        b.apply(&entry(8, 1, event, Some(state(1, 2, Role::Leader, 2, 1))))
            .unwrap();
        assert_eq!(b.snapshot().replicas[0].high_watermark, 1);
        assert_eq!(b.unapplied_floor(), Some((0, 0)));
        let applied = Event::FetchApplied {
            leader: 1,
            fetch_offset: 0,
            error: None,
            log_end_offset: 2,
            high_watermark: 1,
        };
        b.apply(&entry(9, 0, applied, Some(state(0, 2, follower, 2, 1))))
            .unwrap();
        assert_eq!(b.unapplied_floor(), None);
        assert_eq!(b.snapshot().replicas[0].log.len(), 2);
    }
}
