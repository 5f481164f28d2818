//! Trace validation: whether a concurrent run's trace is a behaviour of
//! the model, as CCF's and etcd-raft's trace validation check theirs
//! against TLA+. The cluster is rebuilt from the events ([`rebuild`]),
//! seen through the refinement mapping (spec/trace-validation.md), and
//! abstracted to a model state; each event is then a stutter (the
//! abstraction did not move) or a short sequence of model actions, each
//! enabled, that leads to exactly that state ([`check`]). The
//! always-properties are checked on every state: one that breaks them fits
//! only where the model breaks them too (under a historical rule set), and
//! is then recorded in the [`Summary`] (`broken_properties`); under today's
//! rules the model reaches no such state, so it does not fit. The first
//! event that does not fit is reported with the model's state, the
//! implementation's, and the events around it.
//!
//! The model's states are small (4 records, 7 epochs): a longer run is
//! validated through a window that moves over its settled records
//! ([`window`]); an event still beyond the bounds (a record while nothing
//! has settled, an epoch) ends validation as [`MisfitKind::BeyondModel`],
//! not as a misfit.

pub mod check;
pub mod incremental;
pub mod read_ahead;
pub mod reads;
pub mod rebuild;
pub mod window;

use std::collections::VecDeque;
use std::fmt;
use std::path::Path;

use highwater::cluster::concurrent::ConcurrentConfig;
use highwater::cluster::{Actor, Event, TraceEntry};
use highwater::replication::ReplicaId;
use highwater::replication::{Controller, ControllerConfig};
use highwater_model::rules::Rule;
use highwater_model::state::{Shape, Unbounded};
use highwater_model::{Acks, Action, Config, HwCheckpoint, State, Truncation};

use crate::abstraction::{abstract_state, comparable, show};
use crate::mapping;
use check::Checker;
pub use incremental::{abstracted_whole, cross_check};
use incremental::{Incremental, Unabstracted};
use rebuild::Rebuild;
use window::{Shift, Window};

/// Why validation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MisfitKind {
    /// The trace is not a behaviour of the model.
    DoesNotFit,
    /// The run went beyond what the model's state can hold (records,
    /// epochs): nothing is said about the rest.
    BeyondModel,
}

/// The first event that does not fit.
#[derive(Debug)]
pub struct Misfit {
    pub kind: MisfitKind,
    /// The event's position in the trace.
    pub seq: u64,
    pub event: String,
    pub why: String,
    /// The model's state before the event, shown.
    pub model: String,
    /// The implementation's after it, as the model sees it (when it could
    /// be abstracted).
    pub implementation: Option<String>,
    /// The implementation's state in its own terms.
    pub implementation_detail: String,
    /// Events before it (oldest first), and after it.
    pub before: Vec<String>,
    pub after: Vec<String>,
}

impl fmt::Display for Misfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "event {} does not fit: {}", self.seq, self.why)?;
        writeln!(f, "events before:")?;
        for e in &self.before {
            writeln!(f, "  {e}")?;
        }
        writeln!(f, "> {}", self.event)?;
        writeln!(f, "events after:")?;
        for e in &self.after {
            writeln!(f, "  {e}")?;
        }
        writeln!(f, "model state:\n{}", self.model)?;
        match &self.implementation {
            Some(s) => writeln!(f, "implementation, abstracted:\n{s}")?,
            None => writeln!(f, "implementation: (no model state)")?,
        }
        write!(f, "implementation:\n{}", self.implementation_detail)
    }
}

impl Summary {
    /// Properties broken at event `seq`: the first event to break each is
    /// kept (`where_`: how the state was reached, when not by validated
    /// steps).
    fn count_broken(&mut self, seq: u64, broken: &[String], where_: &str) {
        for b in broken {
            let name = b.split(':').next().unwrap_or(b);
            if !self.has_broken(name) {
                let b = match where_ {
                    "" => b.clone(),
                    w => format!("{b} ({w})"),
                };
                self.broken_properties.push((seq, b));
            }
        }
    }

    /// Whether an event before broke property `name`.
    pub fn has_broken(&self, name: &str) -> bool {
        self.broken_properties
            .iter()
            .any(|(_, k)| k.split(':').next() == Some(name))
    }

    /// A consumer's read checked against the model (`reads.rs`).
    fn count_read(&mut self, c: reads::ReadChecked) {
        self.events += 1;
        self.reads += 1;
        self.records_read_visible += c.visible;
        self.records_read_settled += c.settled;
    }

    /// A resync taken, and why (the first eight reasons kept).
    fn count_resync(&mut self, why: &str) {
        self.resyncs += 1;
        if self.resync_reasons.len() < 8 {
            self.resync_reasons.push(why.to_string());
        }
    }
}

/// What a validated trace held.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub events: u64,
    /// Events that left the abstract state as it was.
    pub stutters: u64,
    /// Model actions taken, by name.
    pub actions: std::collections::BTreeMap<String, u64>,
    /// Steps the model has no action for (see spec/trace-validation.md):
    /// the model state was set to the implementation's, and the step
    /// counted here rather than checked.
    pub resyncs: u64,
    /// Events placed, in the model's order, before actions already taken
    /// that they commute with (see `Checker::reorder`).
    pub reorderings: u64,
    pub resync_reasons: Vec<String>,
    /// Times the window moved (`window.rs`): a settled prefix dropped.
    pub window_moves: u64,
    /// Offsets and records dropped by those moves.
    pub offsets_dropped: u64,
    pub records_dropped: u64,
    /// Leader epochs dropped by those moves.
    pub epochs_dropped: u64,
    /// Always-properties broken by states that fit (the model breaks them
    /// too, under rules it shows unsafe) or where validation resumed (after
    /// a stretch it did not see): the first event to break each, and how.
    /// Under today's rules a run that breaks one has lost something.
    pub broken_properties: Vec<(u64, String)>,
    /// The highest first epoch of the window at a validated event: events
    /// of epochs up to this many past the model's last were validated.
    pub epoch_base_reached: highwater::replication::LeaderEpoch,
    /// Moves `behaves_alike` refused (the refinement argument did not hold
    /// on that state; validation then goes on without moving).
    pub window_refused: u64,
    /// Events not validated: from each event beyond the model's bounds up
    /// to and including the event validation resumed after
    /// (`Mode::Resume`), or to the end of the trace.
    pub events_skipped: u64,
    /// Times validation resumed after a stretch beyond the bounds.
    pub resumptions: u64,
    /// Stretches beyond the bounds: (first event skipped, why), the first
    /// eight kept.
    pub stretches: Vec<(u64, String)>,
    /// Why validation could not resume when the trace ended, if it ended
    /// in a stretch beyond the bounds.
    pub unresumed: Option<String>,
    /// Consumer reads checked against the model (counted in `events`
    /// too), and the records they returned: found visible in the model,
    /// or dropped by the window as settled (`reads.rs`).
    pub reads: u64,
    pub records_read_visible: u64,
    pub records_read_settled: u64,
}

impl Summary {
    /// Validated whole: every event checked, none skipped.
    pub fn whole(&self) -> bool {
        self.events_skipped == 0
    }

    /// Events validated and skipped, resumptions, and why the first stretch
    /// began and the last did not end.
    pub fn describe_skipped(&self) -> String {
        let mut out = format!(
            "{} events validated, {} skipped beyond the model's bounds in {} stretch(es), \
             resumed {} time(s)",
            self.events,
            self.events_skipped,
            self.resumptions + u64::from(self.unresumed.is_some()),
            self.resumptions
        );
        if let Some((seq, why)) = self.stretches.first() {
            out.push_str(&format!("; first stopped at event {seq}: {why}"));
        }
        if let Some(why) = &self.unresumed {
            out.push_str(&format!("; not resumed by the end: {why}"));
        }
        out
    }
}

/// How far validation goes past the model's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No window: validation ends at the first record beyond the model's
    /// state (as before the window; kept to show what the window catches).
    Fixed,
    /// The window moves over settled records; validation ends at the first
    /// event still beyond the bounds (`MisfitKind::BeyondModel`; as before
    /// resuming, kept to show what resuming catches).
    Window,
    /// The window moves, and past a stretch beyond the bounds validation
    /// resumes from the first state that fits the model once its settled
    /// prefix is dropped (`window::resume_at`); the stretch is skipped and
    /// counted in the `Summary`, never an error.
    Resume,
    /// The model's unbounded shape (`model/src/shape.rs`): the whole trace
    /// at its own size, no window and nothing skipped; the same rules.
    Unbounded,
}

/// The model configuration a concurrent run stands for: its protocol
/// switches, and bounds as wide as the model's state holds.
pub fn model_config(c: &ConcurrentConfig) -> Config {
    Config {
        replicas: c.replicas as u8,
        records: highwater_model::state::MAX_RECORDS as u8,
        // Every request slot the state has.
        max_epoch: (highwater_model::state::EPOCH_SLOTS - 1) as u8,
        min_isr: c.replication.min_insync_replicas as u8,
        acks: match c.acks {
            highwater::replication::Acks::None => Acks::None,
            highwater::replication::Acks::Leader => Acks::Leader,
            highwater::replication::Acks::All => Acks::All,
        },
        truncation: match c.replication.truncation {
            highwater::replication::TruncationMode::Hw => Truncation::Hw,
            highwater::replication::TruncationMode::Epoch => Truncation::Epoch,
            highwater::replication::TruncationMode::EpochIterative => Truncation::EpochIterative,
            highwater::replication::TruncationMode::OnFetch => Truncation::OnFetch,
        },
        fencing: c.replication.fencing,
        elr: c.replication.elr,
        last_known_leader: true,
        unclean_election: c.unclean_leader_election,
        hw_checkpoint: match c.replication.hw_checkpoint {
            highwater::replication::HwCheckpointPolicy::EveryChange => HwCheckpoint::EveryChange,
            highwater::replication::HwCheckpointPolicy::IntervalMs(_) => HwCheckpoint::Periodic,
        },
        clean_crashes: u8::MAX,
        unclean_crashes: u8::MAX,
        leader_moves: u8::MAX,
        mutation: None,
        knock_out: VALIDATION_KNOCK_OUT,
    }
}

/// The one rule the validator takes out of the checker's: the controller
/// electing only a live broker (`Rule::ElectLiveReplica`). The checker
/// may keep it, since electing a broker whose crash the controller has not
/// noticed reaches only states that electing it just before its crash
/// reaches (spec/differences.md, the knock-out table). A trace cannot be
/// reordered that way: Kafka's controller, as the driver's, elects a
/// broker until its session times out (`PartitionChangeBuilder.isAcceptableLeader`
/// over `ClusterControlManager.isActive`), crashed or not, so the validator
/// follows Kafka's rule as it is.
pub const VALIDATION_KNOCK_OUT: Option<Rule> = Some(Rule::ElectLiveReplica);

fn describe(e: &TraceEntry) -> String {
    format!("#{} {:?}: {:?}", e.seq, e.actor, e.event)
}

/// Validates a trace, entry by entry, in time linear in its length and
/// memory bounded by the cluster's state (plus a few events of context),
/// moving the window over settled records (`window.rs`) so that a run of
/// any length is validated to its end where its records settle.
pub fn validate(
    cfg: &Config,
    concurrent: &ConcurrentConfig,
    entries: impl IntoIterator<Item = Result<TraceEntry, String>>,
) -> Result<Summary, Box<Misfit>> {
    validate_with(cfg, concurrent, entries, Mode::Resume)
}

/// A deliberately unsound validator (a test-only switch), to show the
/// kept traces that do not fit without the rule it breaks: one of the
/// waits that keep a follower's own Flush or CheckpointHw placeable before
/// its fetch (`Checker::reorder`) left out, or one fix of the rebuild
/// (`rebuild.rs`) reverted to the rule it had before a paced soak's trace
/// did not fit. Never set outside tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsound {
    /// The window moves while an answer that changes a follower is
    /// unapplied, forgetting its fetch.
    MoveWithoutWaiting,
    /// Validation resumes while such an answer is unapplied.
    ResumeWithoutWaiting,
    /// The rebuild takes a broker that was down when another crashed to
    /// hear of the crash later (it hears nothing while down).
    CrashHeardByADownBroker,
    /// The rebuild counts an unapplied answer as changing its follower
    /// only when it brings records or a higher HW, not a lower one.
    OnlyAHigherHwChanges,
    /// The rebuild takes a fetch served after its follower left the epoch
    /// it was sent in as any other (not a gap).
    StaleEpochFetchServedAsAny,
    /// The rebuild keeps an ISR change the controller decided for a leader
    /// that crashed since it sent the request.
    DecisionForACrashedLeader,
    /// The rebuild keeps a decided ISR change when its leader sends another
    /// request.
    DecisionPastANewRequest,
    /// Both of the above.
    DecisionForACrashedLeaderPastANewRequest,
    /// The rebuild drops an answer served and shown as applied, when its
    /// follower takes an error answer instead, without a gap.
    ErrorAnswerLosesNothing,
    /// The rebuild takes a diverging answer applied after its leader left
    /// the epoch it served in as any other (not a gap).
    LateDivergingAnswerAsAny,
    /// A consumer's read is checked only against the model's visibility,
    /// not its bound against its leader's HW (`reads.rs`).
    ReadBoundUnchecked,
}

/// [`validate`], going as far past the model's bounds as `mode` says.
pub fn validate_with(
    cfg: &Config,
    concurrent: &ConcurrentConfig,
    entries: impl IntoIterator<Item = Result<TraceEntry, String>>,
    mode: Mode,
) -> Result<Summary, Box<Misfit>> {
    validate_as(cfg, concurrent, entries, mode, None)
}

/// [`validate`] with a wait left out or a rebuild fix reverted
/// (`Unsound`), for the tests that show what it catches.
pub fn validate_unsound(
    cfg: &Config,
    concurrent: &ConcurrentConfig,
    path: &Path,
    unsound: Unsound,
) -> Result<Summary, Box<Misfit>> {
    validate_path(cfg, concurrent, path, Mode::Resume, Some(unsound))
}

/// [`validate_unsound`] in another mode.
pub fn validate_unsound_with(
    cfg: &Config,
    concurrent: &ConcurrentConfig,
    path: &Path,
    mode: Mode,
    unsound: Unsound,
) -> Result<Summary, Box<Misfit>> {
    validate_path(cfg, concurrent, path, mode, Some(unsound))
}

fn validate_as(
    cfg: &Config,
    concurrent: &ConcurrentConfig,
    entries: impl IntoIterator<Item = Result<TraceEntry, String>>,
    mode: Mode,
    unsound: Option<Unsound>,
) -> Result<Summary, Box<Misfit>> {
    if mode == Mode::Unbounded {
        return validate_unbounded(cfg, concurrent, entries, unsound);
    }
    let moving = mode != Mode::Fixed;
    let mut rebuild = rebuild_for(cfg, concurrent, unsound)?;
    let mut checker = Checker::new(*cfg);
    let mut window = Window::default();
    let mut before: VecDeque<String> = VecDeque::new();
    let mut entries = entries.into_iter();
    let mut seq = 0;
    // In a stretch beyond the model's bounds (`Mode::Resume`): why
    // validation cannot resume yet.
    let mut skipping: Option<String> = None;
    while let Some(entry) = entries.next() {
        let fail =
            |kind, seq, event: String, why: String, checker: &Checker, rebuild: &Rebuild| Misfit {
                kind,
                seq,
                event,
                why,
                model: show(checker.model()),
                implementation: None,
                implementation_detail: rebuild.describe(),
                before: Vec::new(),
                after: Vec::new(),
            };
        let mut misfit = match entry {
            Err(e) => Some(fail(
                MisfitKind::DoesNotFit,
                seq,
                String::new(),
                format!("unreadable trace: {e}"),
                &checker,
                &rebuild,
            )),
            Ok(entry) if reads::read_of(&entry).is_some() => {
                seq = entry.seq;
                let event = describe(&entry);
                let read = reads::read_of(&entry).expect("a read");
                let checked = if skipping.is_some() {
                    checker.skip();
                    Ok(())
                } else {
                    reads::check_read(checker.model(), &window, &rebuild, &read)
                        .map(|c| checker.summary_mut().count_read(c))
                };
                let m = checked.err().map(|why| {
                    fail(
                        MisfitKind::DoesNotFit,
                        seq,
                        event.clone(),
                        why,
                        &checker,
                        &rebuild,
                    )
                });
                remember(&mut before, event);
                m
            }
            Ok(entry) if skipping.is_some() => {
                seq = entry.seq;
                let event = describe(&entry);
                checker.skip();
                rebuild.gap.take();
                let resumed = rebuild.apply(&entry).map(|()| {
                    // Resuming forgets the steps `reorder` keeps: a
                    // follower's own Flush or CheckpointHw before it
                    // applies an answer shown as applied could no longer
                    // go before its fetch.
                    let unapplied = match unsound {
                        Some(Unsound::ResumeWithoutWaiting) => Vec::new(),
                        _ => rebuild.unapplied_followers(),
                    };
                    match unapplied.first() {
                        Some(f) => Err(format!(
                            "replica {f}'s fetch is answered and not yet applied"
                        )),
                        None => {
                            let floor = rebuild.unapplied_floor().map(|(o, _)| o);
                            let cfg = checker.config();
                            let replicas = rebuild.replicas_without_logs();
                            window::resume_hint(cfg, &replicas, floor, rebuild.highest_epoch())
                                .and_then(|()| window::resume_at(cfg, &rebuild.snapshot(), floor))
                        }
                    }
                });
                let m = match resumed {
                    Err(why) => Some(fail(
                        MisfitKind::DoesNotFit,
                        seq,
                        event.clone(),
                        why,
                        &checker,
                        &rebuild,
                    )),
                    Ok(Err(why)) => {
                        skipping = Some(why);
                        None
                    }
                    Ok(Ok(resumed)) => {
                        let mut broken = checker.resume(resumed.state);
                        // A lost record is dropped with the prefix: its
                        // loss is recorded as the property it broke.
                        broken.extend(resumed.lost);
                        let s = checker.summary_mut();
                        s.count_broken(seq, &broken, "where validation resumed");
                        rebuild.trim(&resumed.window);
                        window = resumed.window;
                        skipping = None;
                        None
                    }
                };
                remember(&mut before, event);
                m
            }
            Ok(entry) => {
                seq = entry.seq;
                let event = describe(&entry);
                let viewed = rebuild
                    .apply(&entry)
                    .and_then(|()| window.view(rebuild.snapshot()));
                match viewed {
                    Err(why) => Some(fail(
                        MisfitKind::DoesNotFit,
                        seq,
                        event,
                        why,
                        &checker,
                        &rebuild,
                    )),
                    Ok(snap) => match checker.step(&snap, rebuild.gap.take()) {
                        Ok(broken) => {
                            let s = checker.summary_mut();
                            s.count_broken(seq, &broken, "");
                            s.epoch_base_reached = s.epoch_base_reached.max(window.epoch_base);
                            let moved = if moving {
                                let wait = unsound != Some(Unsound::MoveWithoutWaiting);
                                move_window(&mut checker, &mut window, &mut rebuild, wait)
                            } else {
                                Ok(())
                            };
                            remember(&mut before, event.clone());
                            moved.err().map(|why| {
                                fail(MisfitKind::DoesNotFit, seq, event, why, &checker, &rebuild)
                            })
                        }
                        Err((MisfitKind::BeyondModel, why, _)) if mode == Mode::Resume => {
                            // Skipped from here until the implementation's
                            // state fits the model again.
                            checker.skip();
                            let s = checker.summary_mut();
                            if s.stretches.len() < 8 {
                                s.stretches.push((seq, why.clone()));
                            }
                            skipping = Some(why);
                            remember(&mut before, event);
                            None
                        }
                        Err((kind, why, imp)) => {
                            let mut m = fail(kind, seq, event, why, &checker, &rebuild);
                            m.implementation = imp;
                            Some(m)
                        }
                    },
                }
            }
        };
        if let Some(m) = misfit.as_mut() {
            if window.base > 0 || window.dropped > 0 {
                m.implementation_detail.push_str(&format!(
                    "  (offsets as the implementation has them; the model's window starts at \
                     offset {}, {} records dropped)\n",
                    window.base, window.dropped
                ));
            }
            m.before = before.into_iter().collect();
            m.after = entries
                .by_ref()
                .take(4)
                .map(|e| e.map_or_else(|e| e, |e| describe(&e)))
                .collect();
            return Err(Box::new(misfit.take().expect("set")));
        }
    }
    let mut summary = checker.into_summary();
    summary.unresumed = skipping;
    Ok(summary)
}

/// The cluster the trace is replayed into: the controller the run had.
fn rebuild_for(
    cfg: &Config,
    concurrent: &ConcurrentConfig,
    unsound: Option<Unsound>,
) -> Result<Rebuild, Box<Misfit>> {
    let ids: Vec<u32> = (0..concurrent.replicas).collect();
    let controller = Controller::new(
        ids,
        ControllerConfig {
            min_insync_replicas: concurrent.replication.min_insync_replicas,
            elr: concurrent.replication.elr,
            unclean_leader_election: concurrent.unclean_leader_election,
        },
    )
    .map_err(|e| {
        Box::new(Misfit {
            kind: MisfitKind::DoesNotFit,
            seq: 0,
            event: String::new(),
            why: format!("the controller cannot be set up: {e}"),
            model: String::new(),
            implementation: None,
            implementation_detail: String::new(),
            before: Vec::new(),
            after: Vec::new(),
        })
    })?;
    let mut rebuild = Rebuild::new(
        concurrent.replicas,
        mapping::acks(cfg.acks),
        mapping::truncation(cfg.truncation),
        cfg.fencing,
        usize::from(cfg.min_isr),
        controller.state(),
    );
    rebuild.unsound = unsound;
    Ok(rebuild)
}

/// [`validate`] in the model's unbounded shape (`Mode::Unbounded`): every
/// event, at the trace's own size.
fn validate_unbounded(
    cfg: &Config,
    concurrent: &ConcurrentConfig,
    entries: impl IntoIterator<Item = Result<TraceEntry, String>>,
    unsound: Option<Unsound>,
) -> Result<Summary, Box<Misfit>> {
    let mut rebuild = rebuild_for(cfg, concurrent, unsound)?;
    rebuild.keep_changes();
    let mut abstraction = Incremental::default();
    let mut checker: Checker<Unbounded> = Checker::new(*cfg);
    let mut window = Window::default();
    let mut before: VecDeque<String> = VecDeque::new();
    let mut entries = entries.into_iter();
    while let Some(entry) = entries.next() {
        let (seq, event, stepped) = match entry {
            Err(e) => (
                0,
                String::new(),
                Err((
                    MisfitKind::DoesNotFit,
                    format!("unreadable trace: {e}"),
                    None,
                )),
            ),
            Ok(entry) if reads::read_of(&entry).is_some() => {
                let event = describe(&entry);
                let read = reads::read_of(&entry).expect("a read");
                let checked = reads::check_read(checker.model(), &window, &rebuild, &read)
                    .map(|c| {
                        checker.summary_mut().count_read(c);
                        Vec::new()
                    })
                    .map_err(|why| (MisfitKind::DoesNotFit, why, None));
                (entry.seq, event, checked)
            }
            Ok(entry) => {
                let event = describe(&entry);
                checker.hint(cut_fetch(&entry).into_iter().collect());
                let stepped = rebuild
                    .apply(&entry)
                    .map_err(|why| (MisfitKind::DoesNotFit, why, None))
                    .and_then(|()| {
                        let imp = match abstraction.abstract_state(cfg, &mut rebuild, &window) {
                            Ok(imp) => Ok(imp),
                            Err(Unabstracted::Abstraction(why)) => Err(why),
                            Err(Unabstracted::View(why)) => {
                                return Err((MisfitKind::DoesNotFit, why, None))
                            }
                        };
                        let stepped = checker.step_abstracted(imp, rebuild.gap.take());
                        if stepped.is_ok() {
                            abstraction.adopt(checker.model());
                        }
                        stepped
                    })
                    .and_then(|broken| {
                        trim_unbounded(&mut checker, &mut window, &mut rebuild)
                            .map_err(|why| (MisfitKind::DoesNotFit, why, None))?;
                        Ok(broken)
                    });
                (entry.seq, event, stepped)
            }
        };
        match stepped {
            Ok(broken) => {
                checker.summary_mut().count_broken(seq, &broken, "");
                remember(&mut before, event);
            }
            Err((kind, why, implementation)) => {
                return Err(Box::new(Misfit {
                    kind,
                    seq,
                    event,
                    why,
                    model: show(checker.model()),
                    implementation,
                    implementation_detail: rebuild.describe(),
                    before: before.into_iter().collect(),
                    after: entries
                        .by_ref()
                        .take(4)
                        .map(|e| e.map_or_else(|e| e, |e| describe(&e)))
                        .collect(),
                }));
            }
        }
    }
    Ok(checker.into_summary())
}

/// Keeps `event` among the last eight, shown around a misfit.
fn remember(before: &mut VecDeque<String>, event: String) {
    before.push_back(event);
    if before.len() > 8 {
        before.pop_front();
    }
}

/// The model's fetch cut short at the length a served fetch says, if it
/// was cut (more than one record, fewer than the leader's LEO).
fn cut_fetch(entry: &TraceEntry) -> Option<Action<Unbounded>> {
    let (
        Actor::Replica(leader),
        Event::FetchServed {
            follower,
            fetch_offset,
            log_end_offset,
            served_end: Some(end),
            error: None,
            diverging: false,
            ..
        },
    ) = (&entry.actor, &entry.event)
    else {
        return None;
    };
    let records = end.checked_sub(*fetch_offset)?;
    (records > 1 && end < log_end_offset).then_some(())?;
    Some(Action::FollowerFetchPart {
        follower: u8::try_from(*follower).ok()?,
        leader: u8::try_from(*leader).ok()?,
        records: u32::try_from(records).ok()?,
    })
}

/// Moves the window where the model's state allows it, the
/// implementation's view with it; the two must still agree (a check of
/// the validator's own mapping). `wait`: while an answer that changes a
/// follower is unapplied (false: `Unsound::MoveWithoutWaiting`).
fn move_window(
    checker: &mut Checker,
    window: &mut Window,
    rebuild: &mut Rebuild,
    wait: bool,
) -> Result<(), String> {
    let (limit, unapplied) = window_limits(window, rebuild, wait);
    let limit = limit.map(|(o, f)| (u8::try_from(o).unwrap_or(u8::MAX), f));
    match checker.move_window(limit, &unapplied) {
        Some(shift) => follow_the_move(checker, window, rebuild, &shift),
        None => Ok(()),
    }
}

/// [`move_window`] in the unbounded shape (`Checker::trim`).
fn trim_unbounded(
    checker: &mut Checker<Unbounded>,
    window: &mut Window,
    rebuild: &mut Rebuild,
) -> Result<(), String> {
    let (limit, unapplied) = window_limits(window, rebuild, true);
    let limit = limit.map(|(o, f)| (u32::try_from(o).unwrap_or(u32::MAX), f));
    match checker.trim(limit, &unapplied) {
        Some(shift) => follow_the_move(checker, window, rebuild, &shift),
        None => Ok(()),
    }
}

/// Where the window may move to: no offset at or above where a served
/// response still unapplied could take a follower back (model offsets),
/// and the followers with such a response (none unless `wait`).
fn window_limits(
    window: &Window,
    rebuild: &Rebuild,
    wait: bool,
) -> (Option<(u64, ReplicaId)>, Vec<u8>) {
    let limit = rebuild
        .unapplied_floor()
        .map(|(o, f)| (o.saturating_sub(window.base), f));
    let unapplied: Vec<u8> = rebuild
        .unapplied_followers()
        .into_iter()
        .filter(|_| wait)
        .filter_map(|f| u8::try_from(f).ok())
        .collect();
    (limit, unapplied)
}

/// The implementation follows the model's move: the window advances, the
/// rebuild drops what it dropped, and the implementation seen through it
/// must be the model's moved state.
fn follow_the_move<S: Shape>(
    checker: &Checker<S>,
    window: &mut Window,
    rebuild: &mut Rebuild,
    shift: &Shift<S>,
) -> Result<(), String>
where
    State<S>: std::hash::Hash,
{
    window.advance(shift);
    rebuild.trim(window);
    let imp = window
        .view(rebuild.snapshot())
        .and_then(|snap| abstract_state::<S>(checker.config(), &snap))
        .map_err(|e| {
            format!("the window moved by {shift:?}, and the implementation cannot follow: {e}")
        })?;
    if comparable(&imp) != comparable(checker.model()) {
        return Err(format!(
            "the window moved by {shift:?}, and the implementation seen through it is not the \
             model's moved state:\n{}",
            show(&imp)
        ));
    }
    Ok(())
}

/// Validates a trace file written by a run with `config`.
pub fn validate_file(
    cfg: &Config,
    concurrent: &ConcurrentConfig,
    path: &Path,
) -> Result<Summary, Box<Misfit>> {
    validate_file_with(cfg, concurrent, path, Mode::Resume)
}

/// [`validate_file`], going as far past the model's bounds as `mode` says.
pub fn validate_file_with(
    cfg: &Config,
    concurrent: &ConcurrentConfig,
    path: &Path,
    mode: Mode,
) -> Result<Summary, Box<Misfit>> {
    validate_path(cfg, concurrent, path, mode, None)
}

fn validate_path(
    cfg: &Config,
    concurrent: &ConcurrentConfig,
    path: &Path,
    mode: Mode,
    unsound: Option<Unsound>,
) -> Result<Summary, Box<Misfit>> {
    match read_ahead::read_trace_file_ahead(path) {
        Ok(entries) => validate_as(cfg, concurrent, entries, mode, unsound),
        Err(e) => validate_as(
            cfg,
            concurrent,
            [Err(format!("{}: {e}", path.display()))],
            mode,
            unsound,
        ),
    }
}

/// A small deterministic generator: runs are chosen by seed.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

/// A concurrent run with faults, chosen by `seed`, small enough for the
/// model's state (4 records; at most 3 crashes, so at most 6 leader
/// epochs), its trace streamed to `trace` (today's rules: acks=all,
/// min.insync.replicas=2, KIP-320, ELR, a periodic HW checkpoint).
pub fn seeded_config(seed: u64, trace: &Path) -> ConcurrentConfig {
    use highwater::cluster::concurrent::{Fault, FaultSchedule};
    use highwater::replication::HwCheckpointPolicy;
    use std::time::Duration;
    let mut g = Lcg(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut c = ConcurrentConfig::new(3);
    c.duration = Duration::from_millis(200 + g.below(150));
    c.max_records = Some(highwater_model::state::MAX_RECORDS as u64);
    // Every record is sent however slow the machine (in a fixed 200 ms a
    // loaded one may send fewer); not a choice: the choices below stay the
    // seed's.
    c.until.sent = c.max_records;
    c.max_in_flight = 1 + g.below(4) as usize;
    c.consumers = 1;
    c.trace = true;
    c.trace_file = Some(trace.to_path_buf());
    c.settle_timeout = Duration::from_secs(3);
    c.replication.replica_lag_time_max_ms = 100 + g.below(400);
    c.flush_interval = (g.below(2) == 0).then(|| Duration::from_millis(10 + g.below(40)));
    let faults = (0..1 + g.below(3))
        .map(|_| {
            let clean = g.below(2) == 0;
            if g.below(2) == 0 {
                Fault::CrashLeader { clean }
            } else {
                Fault::CrashFollower { clean }
            }
        })
        .collect::<Vec<_>>();
    c.faults = Some(FaultSchedule {
        first_after: Duration::from_millis(5 + g.below(80)),
        every: Duration::from_millis(20 + g.below(100)),
        down_for: Duration::from_millis(10 + g.below(80)),
        faults,
    });
    // The HW checkpoint: periodic (the default, Kafka's rule) at an interval
    // the run outlasts, as Kafka's 5 s is to a broker's life, so that an
    // unclean crash brings back an HW older than the last; or, one run in
    // four, on every change. Chosen last: the choices above stay the
    // seed's.
    c.replication.hw_checkpoint = if g.below(4) == 0 {
        HwCheckpointPolicy::EveryChange
    } else {
        HwCheckpointPolicy::IntervalMs(10 + g.below(60))
    };
    c
}

/// A run and what validating its trace found.
pub struct ValidatedRun {
    pub report: highwater::cluster::concurrent::RunReport,
    pub validation: Result<Summary, Box<Misfit>>,
    /// Bytes of the trace file.
    pub trace_bytes: u64,
}

/// Every concurrent run of the test suites goes through here (a test in
/// conformance/tests/concurrent_driver.rs checks that no test calls
/// `concurrent::run` directly): the run's trace is streamed to
/// `dir/trace.jsonl` whatever `config` said, and validated against the
/// model.
pub fn validated_run(
    mut config: ConcurrentConfig,
    dir: &Path,
) -> highwater::replication::Result<ValidatedRun> {
    config.trace = true;
    config.trace_file = Some(dir.join("trace.jsonl"));
    run_and_validate(&config, dir)
}

impl ValidatedRun {
    /// The events validated: the whole trace, or those outside its
    /// stretches beyond the model's bounds. A trace that does not fit is an
    /// error.
    pub fn events_validated(&self) -> Result<u64, &Misfit> {
        match &self.validation {
            Ok(s) => Ok(s.events),
            Err(m) if m.kind == MisfitKind::BeyondModel => Ok(m.seq),
            Err(m) => Err(m),
        }
    }

    /// The always-properties the trace broke where it fitted (or resumed):
    /// the first event to break each.
    pub fn broken_properties(&self) -> &[(u64, String)] {
        self.validation
            .as_ref()
            .map_or(&[], |s| s.broken_properties.as_slice())
    }

    /// Whether the whole trace was validated (no event skipped beyond the
    /// model's bounds).
    pub fn whole(&self) -> bool {
        self.validation.as_ref().is_ok_and(Summary::whole)
    }

    /// One line: how far validation went, where the window moved, what was
    /// skipped beyond the model's bounds, the properties broken.
    pub fn describe(&self) -> String {
        let broken = match self.broken_properties() {
            [] => String::new(),
            b => format!(
                "; always-properties broken (by states the model reaches too): {}",
                b.iter()
                    .map(|(seq, p)| format!("at event {seq}: {p}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        self.describe_fit() + &broken
    }

    fn describe_fit(&self) -> String {
        match &self.validation {
            Ok(s) if s.whole() => format!(
                "{} events validated, the whole trace (window moved {} times over {} offsets \
                 and {} epochs, {} records dropped)",
                s.events, s.window_moves, s.offsets_dropped, s.epochs_dropped, s.records_dropped
            ),
            Ok(s) => format!(
                "{} (window moved {} times over {} offsets and {} epochs)",
                s.describe_skipped(),
                s.window_moves,
                s.offsets_dropped,
                s.epochs_dropped
            ),
            Err(m) if m.kind == MisfitKind::BeyondModel => format!(
                "{} events validated, then stopped beyond the model's bounds: {}",
                m.seq, m.why
            ),
            Err(m) => format!("does not fit at event {}: {}", m.seq, m.why),
        }
    }

    /// The run's report, once its trace fitted the model (as far as the
    /// model's bounds reach) and it met its goals; panics with the misfit,
    /// or the goals its hang guard stopped short of, otherwise.
    pub fn fitted(self, what: &str) -> highwater::cluster::concurrent::RunReport {
        assert!(
            self.report.unmet_goals.is_empty(),
            "{what}: the run stopped at its hang guard: {:?}",
            self.report.unmet_goals
        );
        match self.events_validated() {
            Ok(_) => eprintln!("{what}: {}", self.describe()),
            Err(m) => panic!("{what}: the trace is not a behaviour of the model:\n{m}"),
        }
        self.report
    }
}

/// Runs `config` in `dir` and validates its trace file.
pub fn run_and_validate(
    config: &ConcurrentConfig,
    dir: &Path,
) -> highwater::replication::Result<ValidatedRun> {
    let report = highwater::cluster::concurrent::run(&dir.join("cluster"), config.clone())?;
    let path = config
        .trace_file
        .clone()
        .unwrap_or_else(|| dir.join("trace.jsonl"));
    let trace_bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
    let validation = validate_file(&model_config(config), config, &path);
    Ok(ValidatedRun {
        report,
        validation,
        trace_bytes,
    })
}
