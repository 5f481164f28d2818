//! The window: how a run longer than the model's state (4 records) is
//! validated to its end without growing the state. When a prefix of the
//! logs is settled — the same entries on every replica's log, below every
//! replica's HW, recovery point and (when periodic) HW checkpoint and every
//! follower LEO a leader knows, each record in it committed and no longer
//! waiting for an answer — no action of the model can change or lose it
//! again, and the model's actions read offsets only relative to each other
//! (see `spec/trace-validation.md`, "The window"): the checker drops the
//! prefix, shifts every offset down by its length and renames the records
//! left (`shift_state`), and the validator sees the implementation through
//! the same move (`Window::view`). Records that are in no log and were
//! never acknowledged or committed are dropped with it: nothing can bring
//! them back, and no property speaks of them. Leader epochs move the same
//! way: once nothing outside the settled prefix names an epoch below `d`
//! (the controller's epoch, a live replica's, an entry above the prefix),
//! every epoch moves down by `d` (`Shift::epochs`), so that a run with
//! more elections than the model's 7 epochs is validated past them.
//!
//! The argument is also checked where it is used: `behaves_alike` compares
//! the model's steps from the state before a move and from the moved state,
//! two steps deep, before every move.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use highwater::cluster::{ClusterSnapshot, ReplicaSnapshot};
use highwater::replication::{LeaderEpoch, LogEntry};
use highwater_model::actions::{apply, enabled};
use highwater_model::properties::{ACKNOWLEDGED_RECORDS_SURVIVE, COMMITTED_RECORDS_SURVIVE};
use highwater_model::shape::{within, IdSet, LogStore, Num, RecordTable, Table};
use highwater_model::state::{Compact, Entry, RecordHistory, Shape, MAX_RECORDS};
use highwater_model::{Action, Config, HwCheckpoint, State};

/// One move of the window, in the model's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shift<S: Shape = Compact> {
    /// Offsets dropped from the front of every log.
    pub k: S::Offset,
    /// Records produced when the window moved.
    pub produced: S::RecordId,
    /// Each of those records' id after the move; None: dropped.
    pub renumber: Vec<Option<S::RecordId>>,
    /// How many were dropped (records produced later move down by this).
    pub dropped: S::RecordId,
    /// The settled entries (the first `k`).
    pub prefix: Vec<Entry<S>>,
    /// Leader epochs dropped: every epoch moves down by this many. Below
    /// it only settled entries, requests no replica can take any more (a
    /// live replica takes only its own epoch or a newer one, a restarted
    /// one the controller's) and records' ack and commit epochs name an
    /// epoch; those become 0, which every presumed leader's epoch is at or
    /// above, as it was above the old ones (`records_survive`).
    pub epochs: S::Epoch,
    /// Deliberately broken (`Broken::IgnoreLiveEpochs`): an epoch below the
    /// dropped ones becomes 0 rather than making the state unshiftable.
    clamp_epochs: bool,
}

/// `a - b`, if `a` is not below `b`.
fn minus<N: Num>(a: N, b: N) -> Option<N> {
    (a >= b).then(|| a - b)
}

/// The recovery point matters while an unclean crash may still happen
/// (`forget_what_no_longer_matters` drops it otherwise; in the unbounded
/// shape one always may), and so does a periodic HW checkpoint.
fn recovery_matters<S: Shape>(cfg: &Config, s: &State<S>) -> bool {
    within::<S, _>(s.unclean_crashes, cfg.unclean_crashes)
}

fn checkpoint_matters<S: Shape>(cfg: &Config, s: &State<S>) -> bool {
    recovery_matters(cfg, s) && cfg.hw_checkpoint == HwCheckpoint::Periodic
}

/// Whether a move to offset `k` drops record `id` (one rule for the
/// model's state, `settled_as`, and the implementation's, `resume_at`): a
/// record in the settled prefix, or one in no log that nobody waits for
/// and that was never acknowledged or committed (nothing brings it back).
/// A record appended below `k` and kept anyway is an error: nothing may
/// name an offset in the prefix.
fn dropped_by_the_move(
    id: impl std::fmt::Display,
    in_prefix: bool,
    dead: bool,
    offset: u64,
    k: u64,
) -> Result<bool, String> {
    if in_prefix || dead {
        Ok(true)
    } else if offset < k {
        Err(format!(
            "record {id} was appended at {offset} and is in no log, but was acknowledged or \
             committed"
        ))
    } else {
        Ok(false)
    }
}

/// The lowest leader epoch named outside the settled prefix (one rule for
/// the model's state, `epoch_floor`, and the implementation's,
/// `resume_at`): the controller's, every live replica's (one down takes the
/// controller's when it restarts) and every log entry's above the prefix.
/// 0 before the first election, or while a live replica has none.
fn lowest_epoch(
    controller: Option<i64>,
    live_replicas: impl IntoIterator<Item = Option<i64>>,
    entries_above_prefix: impl IntoIterator<Item = i64>,
) -> i64 {
    let live = live_replicas.into_iter().map(|e| e.unwrap_or(0));
    live.chain(entries_above_prefix)
        .fold(controller.unwrap_or(0), i64::min)
        .max(0)
}

/// [`lowest_epoch`] of the model's state `s`, prefix `k` offsets long.
fn epoch_floor<S: Shape>(s: &State<S>, k: S::Offset) -> S::Epoch {
    let wide = |e: S::Epoch| e.idx() as i64;
    let live = s.ids().map(|r| s.replica(r)).filter(|x| x.alive);
    let entries = s.ids().flat_map(|r| s.replica(r).log.iter_from(k.idx()));
    let d = lowest_epoch(
        s.controller.epoch.map(wide),
        live.map(|x| x.epoch.map(wide)),
        entries.map(|e| wide(e.epoch)),
    );
    S::Epoch::try_at(d as usize).expect("no lower than a model epoch")
}

/// Whether any replica holds an acks=all request for record `id`.
fn pending<S: Shape>(s: &State<S>, id: S::RecordId) -> bool {
    s.ids().any(|r| s.replica(r).pending_acks.contains(id))
}

/// The move the model's state `s` allows, or why none.
pub fn settled<S: Shape>(cfg: &Config, s: &State<S>) -> Result<Shift<S>, String> {
    settled_as(cfg, s, None, None)
}

/// The move [`settled`] allows, without moving the epochs: the unbounded
/// shape holds every epoch, so only offsets and records are worth
/// dropping there. `below`: an offset a served response not yet applied
/// may take a follower back to (and that follower), where the prefix
/// ends at the latest; the unbounded shape drops what it can below it
/// rather than wait for the answer (a paced run's every pause found one
/// in flight).
pub fn offsets_settled<S: Shape>(
    cfg: &Config,
    s: &State<S>,
    below: Option<(S::Offset, u32)>,
) -> Result<Shift<S>, String> {
    let mut shift = settled_as(cfg, s, None, below)?;
    shift.epochs = S::Epoch::ZERO;
    if shift.dropped == S::RecordId::ZERO {
        return Err("no record is settled".into());
    }
    Ok(shift)
}

/// A move of the epochs alone (no offset dropped), for a state whose last
/// epoch is taken while its record budget is not full: dropping a prefix
/// then could take from a leader's log the only entries of an epoch a
/// follower still asks about (KIP-101's answer comes from the log alone).
pub fn epochs_settled<S: Shape>(cfg: &Config, s: &State<S>) -> Result<Shift<S>, String> {
    if !cfg.fencing {
        return Err("no KIP-320 fencing: epochs may fall along a log".into());
    }
    let epochs = epoch_floor(s, S::Offset::ZERO);
    if epochs == S::Epoch::ZERO {
        return Err("epoch 0 is still named".into());
    }
    Ok(Shift {
        k: S::Offset::ZERO,
        produced: s.produced,
        renumber: (0..s.produced.idx())
            .map(|id| Some(S::RecordId::at(id)))
            .collect(),
        dropped: S::RecordId::ZERO,
        prefix: Vec::new(),
        epochs,
        clamp_epochs: false,
    })
}

/// The most a prefix can settle by the replicas' own offsets alone (each
/// LEO and HW, the recovery points and HW checkpoints where a crash can
/// still fall back to them, the followers' LEOs as leaders know them):
/// a few reads per replica, so the unbounded shape asks at every event
/// whether a try at [`offsets_settled`], which reads the whole log, can
/// drop more than it did.
pub fn settled_at_most<S: Shape>(cfg: &Config, s: &State<S>) -> S::Offset {
    replicas_bound(cfg, s, false).0
}

/// [`settled_at_most`], and which offset limits it.
fn replicas_bound<S: Shape>(
    cfg: &Config,
    s: &State<S>,
    ignore_recovery_point: bool,
) -> (S::Offset, Limit) {
    let mut k = s
        .ids()
        .map(|r| s.replica(r).leo())
        .max()
        .unwrap_or(S::Offset::ZERO);
    let mut limit = Limit::None;
    let mut lower = |v: S::Offset, what: Limit| {
        if v < k {
            k = v;
            limit = what;
        }
    };
    for r in s.ids() {
        let x = s.replica(r);
        lower(x.leo(), Limit::Leo(r));
        lower(x.hw, Limit::Hw(r));
        if recovery_matters(cfg, s) && !ignore_recovery_point {
            lower(x.recovery_point, Limit::RecoveryPoint(r));
        }
        if checkpoint_matters(cfg, s) {
            lower(x.hw_checkpoint, Limit::HwCheckpoint(r));
        }
        for (f, leo) in x.follower_leo.iter().enumerate() {
            if let Some(leo) = *leo {
                lower(leo, Limit::FollowerLeo(f, r));
            }
        }
    }
    (k, limit)
}

/// What limits a settled prefix, named only when a move is refused (no
/// text is built at every event).
#[derive(Debug, Clone, Copy)]
enum Limit {
    None,
    Leo(u8),
    Hw(u8),
    RecoveryPoint(u8),
    HwCheckpoint(u8),
    FollowerLeo(usize, u8),
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Limit::None => write!(f, "the longest log"),
            Limit::Leo(r) => write!(f, "replica {r}'s LEO"),
            Limit::Hw(r) => write!(f, "replica {r}'s HW"),
            Limit::RecoveryPoint(r) => write!(f, "replica {r}'s recovery point"),
            Limit::HwCheckpoint(r) => write!(f, "replica {r}'s HW checkpoint"),
            Limit::FollowerLeo(fl, r) => write!(f, "follower {fl}'s LEO as {r} knows it"),
        }
    }
}

/// A deliberately broken window rule, for the tests that show
/// `behaves_alike` refusing the moves it allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Broken {
    /// Settles a prefix an unclean crash can still cut.
    IgnoreRecoveryPoint,
    /// Drops epochs a live replica is still at (a follower that has not
    /// taken the newest LeaderAndIsr), setting its epoch to 0.
    IgnoreLiveEpochs,
}

/// [`settled`], or a `broken` rule.
fn settled_as<S: Shape>(
    cfg: &Config,
    s: &State<S>,
    broken: Option<Broken>,
    below: Option<(S::Offset, u32)>,
) -> Result<Shift<S>, String> {
    let ignore_recovery_point = broken == Some(Broken::IgnoreRecoveryPoint);
    if !cfg.fencing {
        // Without KIP-320 a log's epochs may fall, and the epoch caches
        // (`truncation::cache_of`) then depend on entries the window would
        // drop.
        return Err("no KIP-320 fencing: epochs may fall along a log".into());
    }
    for r in s.ids() {
        let starts: Vec<_> = s.replica(r).log.epoch_starts().collect();
        if starts.windows(2).any(|w| w[0].0 > w[1].0) {
            return Err(format!("replica {r}'s log has a falling epoch"));
        }
    }
    let (mut k, limit) = replicas_bound(cfg, s, ignore_recovery_point);
    let mut limit = limit.to_string();
    let mut lower = |k: &mut S::Offset, v: S::Offset, what: String| {
        if v < *k {
            *k = v;
            limit = what;
        }
    };
    if let Some((o, f)) = below {
        lower(
            &mut k,
            o,
            format!("a response served to replica {f} and not yet applied"),
        );
    }
    let first = &s.replica(0).log;
    for r in s.ids().skip(1) {
        let same = first.common_prefix(&s.replica(r).log).min(k.idx());
        if same < k.idx() {
            let o = S::Offset::at(same);
            lower(
                &mut k,
                o,
                format!("replicas 0 and {r} differ at offset {o}"),
            );
        }
    }
    let records = &s.records;
    let unsettled = first.iter().take(k.idx()).enumerate().find_map(|(o, e)| {
        let o = S::Offset::at(o);
        let h = records.get(e.id.idx()).copied().unwrap_or_default();
        if h.offset != o {
            return Some(Err(format!(
                "record {} at offset {o} says {}",
                e.id, h.offset
            )));
        }
        let open = h.visible.is_none() || pending(s, e.id);
        open.then_some(Ok((o, e.id)))
    });
    match unsettled {
        Some(Err(why)) => return Err(why),
        Some(Ok((o, id))) => lower(
            &mut k,
            o,
            format!("record {id} is not committed and answered"),
        ),
        None => {}
    }
    let in_logs: HashSet<S::RecordId> = s
        .ids()
        .flat_map(|r| s.replica(r).log.iter().map(|e| e.id))
        .collect();
    let mut shift = Shift {
        k,
        produced: s.produced,
        renumber: vec![None; s.produced.idx()],
        dropped: S::RecordId::ZERO,
        prefix: first.iter().take(k.idx()).collect(),
        epochs: epoch_floor(s, k),
        clamp_epochs: false,
    };
    if broken == Some(Broken::IgnoreLiveEpochs) {
        let mut dead = s.clone();
        for r in s.ids() {
            dead.replica_mut(r).alive = false;
        }
        shift.epochs = epoch_floor(&dead, k);
        shift.clamp_epochs = true;
    }
    let in_prefix: HashSet<S::RecordId> = shift.prefix.iter().map(|e| e.id).collect();
    let mut next = S::RecordId::ZERO;
    for (i, h) in s.produced_records().iter().enumerate() {
        let id = S::RecordId::at(i);
        let dead =
            !in_logs.contains(&id) && !pending(s, id) && h.acked.is_none() && h.visible.is_none();
        let offset = h.offset.idx() as u64;
        if dropped_by_the_move(id, in_prefix.contains(&id), dead, offset, k.idx() as u64)? {
            shift.dropped += S::RecordId::ONE;
        } else {
            shift.renumber[i] = Some(next);
            next += S::RecordId::ONE;
        }
    }
    if shift.dropped == S::RecordId::ZERO && shift.epochs == S::Epoch::ZERO {
        return Err(format!(
            "nothing is settled (limited by {limit}), and epoch 0 is still named"
        ));
    }
    Ok(shift)
}

impl<S: Shape> Shift<S> {
    /// A record's id after the move (None: dropped). Records produced after
    /// the move was decided (in `behaves_alike`'s steps) move down by the
    /// number dropped.
    fn id(&self, id: S::RecordId) -> Option<S::RecordId> {
        if id < self.produced {
            self.renumber[id.idx()]
        } else {
            Some(id - self.dropped)
        }
    }

    fn offset(&self, o: S::Offset) -> Option<S::Offset> {
        minus(o, self.k)
    }

    /// An epoch after the move (None: below the dropped ones).
    fn epoch(&self, e: S::Epoch) -> Option<S::Epoch> {
        match self.clamp_epochs {
            true => Some(minus(e, self.epochs).unwrap_or(S::Epoch::ZERO)),
            false => minus(e, self.epochs),
        }
    }
}

/// `s` with the window moved by `shift`; None when `s` does not hold the
/// settled prefix the move drops (an offset below it, another entry in
/// it, a dropped record elsewhere).
pub fn shift_state<S: Shape>(cfg: &Config, s: &State<S>, shift: &Shift<S>) -> Option<State<S>> {
    let mut out = s.clone();
    let k = shift.k.idx();
    for r in s.ids() {
        let x = s.replica(r);
        let y = out.replica_mut(r);
        if x.log.len() < k || !x.log.iter().take(k).eq(shift.prefix[..k].iter().copied()) {
            return None;
        }
        let entries = x
            .log
            .iter_from(k)
            .map(|e| {
                Some(Entry {
                    id: shift.id(e.id)?,
                    epoch: shift.epoch(e.epoch)?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        y.log = S::Log::from_entries(entries)?;
        y.epoch = match x.epoch {
            Some(e) => Some(shift.epoch(e)?),
            None => None,
        };
        y.hw = shift.offset(x.hw)?;
        y.recovery_point = if recovery_matters(cfg, s) {
            shift.offset(x.recovery_point)?
        } else {
            x.recovery_point
        };
        y.hw_checkpoint = if checkpoint_matters(cfg, s) {
            shift.offset(x.hw_checkpoint)?
        } else {
            x.hw_checkpoint
        };
        for (f, leo) in x.follower_leo.iter().enumerate() {
            y.follower_leo[f] = match leo {
                Some(o) => Some(shift.offset(*o)?),
                None => None,
            };
        }
        let mut pending = S::Pending::default();
        for id in x.pending_acks.ids() {
            pending.insert(shift.id(id)?);
        }
        y.pending_acks = pending;
    }
    out.controller.epoch = match s.controller.epoch {
        Some(e) => Some(shift.epoch(e)?),
        None => None,
    };
    let requests = s.requests.as_slice();
    // The compact table's slots past the epochs kept read as empty, as
    // they did (`Table::from_vec`).
    let kept = requests.get(shift.epochs.idx()..).unwrap_or_default();
    out.requests = S::Requests::from_vec(kept.to_vec())?;
    let below = |e: Option<S::Epoch>| e.map(|e| minus(e, shift.epochs).unwrap_or(S::Epoch::ZERO));
    let mut records = Vec::new();
    for (i, h) in s.produced_records().iter().enumerate() {
        if shift.id(S::RecordId::at(i)).is_some() {
            records.push(RecordHistory {
                offset: shift.offset(h.offset)?,
                acked: below(h.acked),
                visible: below(h.visible),
            });
        }
    }
    out.produced = S::RecordId::at(records.len());
    out.records = S::Records::from_vec(records)?;
    Some(out)
}

/// An action as it reads after the move (None: it names a dropped record
/// or offset).
pub fn shift_action<S: Shape>(a: Action<S>, shift: &Shift<S>) -> Option<Action<S>> {
    Some(match a {
        Action::Produce { leader, record } => Action::Produce {
            leader,
            record: shift.id(record)?,
        },
        Action::LeaderAdvanceHw { leader, hw } => Action::LeaderAdvanceHw {
            leader,
            hw: shift.offset(hw)?,
        },
        Action::BecomeLeader { replica, epoch } => Action::BecomeLeader {
            replica,
            epoch: shift.epoch(epoch)?,
        },
        Action::BecomeFollower { replica, epoch } => Action::BecomeFollower {
            replica,
            epoch: shift.epoch(epoch)?,
        },
        other => other,
    })
}

/// Whether the model behaves alike from `s` and from `s` moved by `shift`,
/// `depth` steps deep: the same actions are enabled (but a Produce the
/// record budget refused before the move, and an election or leader
/// removal the epoch budget refused) and lead to states that are again
/// each other's move. This is the refinement argument of the
/// window, checked on the states where it is used.
pub fn behaves_alike<S: Shape>(
    cfg: &Config,
    s: &State<S>,
    shift: &Shift<S>,
    depth: usize,
) -> Result<(), String>
where
    State<S>: std::hash::Hash,
{
    let t = shift_state(cfg, s, shift)
        .ok_or("the state does not hold the settled prefix, or names a dropped epoch")?;
    let (mut before, mut after) = (Vec::new(), Vec::new());
    enabled(cfg, s, &mut before);
    enabled(cfg, &t, &mut after);
    let mut images = Vec::new();
    for &a in &before {
        let b = shift_action(a, shift).ok_or_else(|| format!("{a} names what was dropped"))?;
        if !after.contains(&b) {
            return Err(format!("{a} is enabled before the move, {b} not after"));
        }
        match (apply(cfg, s, a), apply(cfg, &t, b)) {
            (None, None) => {}
            (Some(x), Some(y)) => {
                if shift_state(cfg, &x, shift) != Some(y) {
                    return Err(format!(
                        "{a} leads to states that are not each other's move"
                    ));
                }
                if depth > 1 {
                    behaves_alike(cfg, &x, shift, depth - 1)
                        .map_err(|e| format!("after {a}: {e}"))?;
                }
            }
            _ => return Err(format!("{a} changes the state on one side only")),
        }
        images.push(b);
    }
    let budget_refused = !within::<S, _>(s.produced, cfg.records);
    let epochs_refused =
        !highwater_model::shape::epoch_within::<S>(s.controller.next_epoch(), cfg.max_epoch);
    let bumps_epoch =
        |b| apply(cfg, &t, b).is_some_and(|y| y.controller.epoch != t.controller.epoch);
    for &b in &after {
        let produce = matches!(b, Action::Produce { .. });
        let refused = produce && budget_refused || epochs_refused && bumps_epoch(b);
        if !(images.contains(&b) || refused) {
            return Err(format!("{b} is enabled after the move only"));
        }
    }
    Ok(())
}

/// The implementation seen through the window's moves so far: the same
/// move on its snapshot (offsets down by `base`, the records the model
/// dropped removed, the rest renamed in order).
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// Offsets dropped so far.
    pub base: u64,
    /// Record ids (the rebuild's) still in the window, below `first_new`,
    /// in order.
    kept: Vec<u64>,
    /// Every record id from here on is in the window.
    first_new: u64,
    /// Records dropped so far.
    pub dropped: u64,
    /// Leader epochs dropped so far.
    pub epoch_base: LeaderEpoch,
}

impl Window {
    /// The rebuild's id of the model's record `i`.
    fn rebuild_id(&self, i: u64) -> u64 {
        match self.kept.get(i as usize) {
            Some(&id) => id,
            None => self.first_new + (i - self.kept.len() as u64),
        }
    }

    /// A window whose first offset is `base`, every record kept (for the
    /// rebuild's tests).
    #[cfg(test)]
    pub(super) fn from_offset(base: u64) -> Window {
        Window {
            base,
            ..Window::default()
        }
    }

    /// Whether the window still holds the rebuild's record `id`.
    pub fn keeps(&self, id: u64) -> bool {
        self.model_id(id).is_some()
    }

    /// The model's id of the rebuild's record `id` (None: dropped).
    pub fn model_id(&self, id: u64) -> Option<u64> {
        if id >= self.first_new {
            return Some(self.kept.len() as u64 + (id - self.first_new));
        }
        // `kept` is in order (`advance`): this runs for every entry of
        // every event seen through the window.
        self.kept.binary_search(&id).ok().map(|p| p as u64)
    }

    /// Moves the window as the model's state moved.
    pub fn advance<S: Shape>(&mut self, shift: &Shift<S>) {
        let produced = shift.produced.idx() as u64;
        let kept = (0..produced)
            .filter(|&i| shift.renumber[i as usize].is_some())
            .map(|i| self.rebuild_id(i))
            .collect();
        self.first_new = self.rebuild_id(produced);
        self.kept = kept;
        self.base += shift.k.idx() as u64;
        self.dropped += shift.dropped.idx() as u64;
        self.epoch_base += shift.epochs.idx() as LeaderEpoch;
    }

    /// Replica `r`'s log entry `e` through the window (None: in the
    /// settled prefix), as [`Window::view`] shows it.
    pub fn view_entry(&self, r: u32, e: &LogEntry) -> Result<Option<LogEntry>, String> {
        let (base, epochs) = (self.base, self.epoch_base);
        let id = e.record_id;
        let model = id.and_then(|id| self.model_id(id));
        if e.offset < base {
            if model.is_some() {
                return Err(format!(
                    "replica {r} holds record {id:?} at offset {}, in the settled prefix",
                    e.offset
                ));
            }
            return Ok(None);
        }
        let model = model.ok_or_else(|| {
            format!(
                "replica {r} holds record {id:?}, which the window dropped, at offset {}",
                e.offset
            )
        })?;
        // The message is made only when needed: this runs for every entry
        // of every event.
        let entry_epoch = match e.epoch.checked_sub(epochs).filter(|&e| e >= 0) {
            Some(e) => e,
            None => {
                return Err(format!(
                    "replica {r}'s entry at {} is epoch {}, below the window (epochs below \
                     {epochs} dropped)",
                    e.offset, e.epoch
                ))
            }
        };
        Ok(Some(LogEntry {
            offset: e.offset - base,
            epoch: entry_epoch,
            record_id: Some(model),
        }))
    }

    /// The rebuild's record `id` through the window: its model id and
    /// history (None: dropped), as [`Window::view`] shows it.
    pub fn view_record(
        &self,
        id: u64,
        h: &highwater::cluster::RecordHistory,
    ) -> Result<Option<(u64, highwater::cluster::RecordHistory)>, String> {
        let (base, epochs) = (self.base, self.epoch_base);
        let Some(m) = self.model_id(id) else {
            return Ok(None);
        };
        let offset = h
            .offset
            .checked_sub(base)
            .ok_or_else(|| format!("record {id}, still in the window, was appended below it"))?;
        // Every presumed leader is at or above the window's first epoch, as
        // it was above an earlier one (`Shift::epochs`).
        let below = |e: Option<LeaderEpoch>| e.map(|e| (e - epochs).max(0));
        Ok(Some((
            m,
            highwater::cluster::RecordHistory {
                offset,
                acked: below(h.acked),
                visible: below(h.visible),
            },
        )))
    }

    /// Whether [`Window::view`] leaves a snapshot as it is.
    pub fn at_origin(&self) -> bool {
        self.base == 0 && self.first_new == 0 && self.epoch_base == 0
    }

    /// What the window's view depends on: it changes when the window moves.
    pub fn key(&self) -> (u64, u64, usize, u64, LeaderEpoch) {
        (
            self.base,
            self.first_new,
            self.kept.len(),
            self.dropped,
            self.epoch_base,
        )
    }

    /// `snap` through the window. An implementation that goes below the
    /// settled prefix (a log, HW or recovery point cut below it, a follower
    /// LEO below it, a dropped record anywhere but there) or names a
    /// dropped epoch (a replica's, the controller's, an entry's above the
    /// prefix) has done what no model action can: an error.
    pub fn view(&self, snap: ClusterSnapshot) -> Result<ClusterSnapshot, String> {
        self.view_with(snap, true)
    }

    /// [`Window::view`]; `records`: the records too (else they are left as
    /// they are, for a caller that takes them through
    /// [`Window::view_record`]).
    pub fn view_with(
        &self,
        snap: ClusterSnapshot,
        records: bool,
    ) -> Result<ClusterSnapshot, String> {
        if self.at_origin() {
            return Ok(snap);
        }
        let base = self.base;
        let epochs = self.epoch_base;
        let epoch = |e: LeaderEpoch, what: &str| {
            e.checked_sub(epochs).filter(|&e| e >= 0).ok_or_else(|| {
                format!("{what} is epoch {e}, below the window (epochs below {epochs} dropped)")
            })
        };
        let leader_epoch =
            |e: Option<LeaderEpoch>, what: &str| e.map(|e| epoch(e, what)).transpose();
        let below = |v: u64, what: &str, r: u32| {
            v.checked_sub(base).ok_or_else(|| {
                format!(
                    "replica {r}'s {what} {v} is below the settled prefix (offsets below {base})"
                )
            })
        };
        let mut out = snap;
        for x in &mut out.replicas {
            let r = x.id;
            let mut log = Vec::new();
            for e in &x.log {
                if let Some(e) = self.view_entry(r, e)? {
                    log.push(e);
                }
            }
            if x.log_end_offset < base {
                return Err(format!(
                    "replica {r}'s log ends at {}, in the settled prefix (offsets below {base})",
                    x.log_end_offset
                ));
            }
            *x = ReplicaSnapshot {
                log,
                log_end_offset: below(x.log_end_offset, "LEO", r)?,
                high_watermark: below(x.high_watermark, "HW", r)?,
                recovery_point: below(x.recovery_point, "recovery point", r)?,
                // Below the prefix only once the model keeps no checkpoint
                // (after the last unclean crash it may have, `settled`
                // stops bounding it, and the model holds it at 0).
                hw_checkpoint: x.hw_checkpoint.saturating_sub(base),
                leader_epoch: leader_epoch(x.leader_epoch, &format!("replica {r}'s epoch"))?,
                follower_leo: x
                    .follower_leo
                    .iter()
                    .map(|(&f, leo)| Ok((f, leo.map(|o| below(o, "follower LEO", r)).transpose()?)))
                    .collect::<Result<_, String>>()?,
                pending_acks: x
                    .pending_acks
                    .iter()
                    .map(|&id| {
                        self.model_id(id).ok_or_else(|| {
                            format!("replica {r} waits for record {id}, which the window dropped")
                        })
                    })
                    .collect::<Result<_, String>>()?,
                ..x.clone()
            };
        }
        if records {
            let mut records = BTreeMap::new();
            for (&id, h) in out.records.iter() {
                if let Some((m, h)) = self.view_record(id, h)? {
                    records.insert(m, h);
                }
            }
            out.records = records.into();
        }
        out.controller.leader_epoch =
            leader_epoch(out.controller.leader_epoch, "the controller's epoch")?;
        // Requests of dropped epochs: no replica can take them any more
        // (nor lead in them, to learn their ISRs).
        // (Shared and left as they are where no epoch moved: the unbounded
        // shape moves offsets alone.)
        if epochs > 0 {
            out.requests = Arc::new(
                out.requests
                    .range(epochs..)
                    .map(|(&e, req)| {
                        let mut req = req.clone();
                        req.leader_epoch = e - epochs;
                        (e - epochs, req)
                    })
                    .collect(),
            );
            out.epoch_isrs = Arc::new(
                out.epoch_isrs
                    .range(epochs..)
                    .map(|(&e, isrs)| (e - epochs, isrs.clone()))
                    .collect(),
            );
        }
        Ok(out)
    }
}

/// A cheap necessary condition for [`resume_at`], read from the replicas'
/// numbers alone (`Rebuild::replicas_without_logs`): the prefix it could
/// drop ends at or below every LEO, HW, recovery point, HW checkpoint (when
/// periodic), follower LEO and `floor`, so a log longer than the model's
/// past that bound cannot fit; and the epochs it could drop end at or
/// below every live replica's, so a request above the model's last epoch
/// past that bound (`highest_epoch`, the newest sent) cannot either. Tried
/// before each `resume_at`, which copies the logs, so that a long stretch
/// beyond the bounds costs little per event.
pub fn resume_hint(
    cfg: &Config,
    replicas: &[ReplicaSnapshot],
    floor: Option<u64>,
    highest_epoch: Option<LeaderEpoch>,
) -> Result<(), String> {
    let live = replicas.iter().filter(|x| x.alive);
    let lowest = live.map(|x| x.leader_epoch.map_or(0, i64::from)).min();
    let apart =
        |e: LeaderEpoch| lowest.is_some_and(|l| i64::from(e) - l > i64::from(cfg.max_epoch));
    if let Some(e) = highest_epoch.filter(|&e| apart(e)) {
        let lowest = lowest.unwrap_or_default();
        return Err(format!(
            "a request of epoch {e}, and a live replica at epoch {lowest}: more epochs than the \
             model's {} apart",
            cfg.max_epoch + 1
        ));
    }
    let periodic = cfg.hw_checkpoint == HwCheckpoint::Periodic;
    let mut k = floor.unwrap_or(u64::MAX);
    for x in replicas {
        k = k
            .min(x.log_end_offset)
            .min(x.high_watermark)
            .min(x.recovery_point);
        if periodic {
            k = k.min(x.hw_checkpoint);
        }
        for leo in x.follower_leo.values().flatten() {
            k = k.min(*leo);
        }
    }
    match replicas
        .iter()
        .find(|x| x.log_end_offset.saturating_sub(k) > MAX_RECORDS as u64)
    {
        Some(x) => Err(format!(
            "replica {} holds {} entries past the most that could settle (offset {k}); the \
             model holds {MAX_RECORDS}",
            x.id,
            x.log_end_offset - k
        )),
        None => Ok(()),
    }
}

/// Where validation may resume after a stretch beyond the model's bounds
/// (spec/trace-validation.md, "Resuming past the bounds"): the
/// implementation's state `snap` (the rebuild's, refinement applied) with
/// its settled prefix dropped, if it then fits the model. The prefix is
/// settled by the same rules as [`settled`], read on the implementation's
/// state (which the model's cannot hold, so `settled` cannot read it):
/// the same entries on every log, below every HW, recovery point, HW
/// checkpoint (when periodic) and follower LEO a leader knows, each record
/// in it committed and answered, epochs rising along every log, KIP-320
/// fencing on; and below `floor`, where a response served and not applied
/// could still take a follower back (`Rebuild::unapplied_floor`). Records
/// in no log, never acknowledged, committed or waited for are dropped too.
/// Returns the window to see the implementation through from here on, the
/// model state to resume from (the abstraction of the implementation seen
/// through it) and the records lost in the stretch (acknowledged or
/// committed, in no log, below the prefix: dropped with it, so that a run
/// that lost one under a historical rule set is validated on; said here,
/// so that the caller records the loss), or why there is none yet.
pub fn resume_at(
    cfg: &Config,
    snap: &ClusterSnapshot,
    floor: Option<u64>,
) -> Result<Resumed, String> {
    if !cfg.fencing {
        return Err("no KIP-320 fencing: epochs may fall along a log".into());
    }
    let periodic = cfg.hw_checkpoint == HwCheckpoint::Periodic;
    let mut k = u64::MAX;
    let mut limit = String::new();
    let mut lower = |k: &mut u64, v: u64, what: String| {
        if v < *k {
            *k = v;
            limit = what;
        }
    };
    // The logs hold their entries from the rebuild's last trim on
    // (`Rebuild::trim`): below it, a prefix settled before, the same on
    // every log. Offsets below `held` are in every log no more.
    let mut held = 0;
    for x in &snap.replicas {
        let r = x.id;
        let start = x.log.first().map_or(x.log_end_offset, |e| e.offset);
        if x.log.windows(2).any(|w| w[1].offset != w[0].offset + 1)
            || start + x.log.len() as u64 != x.log_end_offset
        {
            return Err(format!(
                "replica {r}'s log is not contiguous up to its LEO {}",
                x.log_end_offset
            ));
        }
        if x.log.windows(2).any(|w| w[0].epoch > w[1].epoch) {
            return Err(format!("replica {r}'s log has a falling epoch"));
        }
        held = held.max(start);
        lower(&mut k, x.log_end_offset, format!("replica {r}'s LEO"));
        lower(&mut k, x.high_watermark, format!("replica {r}'s HW"));
        // An unclean crash may always come (`model_config`): the recovery
        // point always bounds the prefix.
        lower(
            &mut k,
            x.recovery_point,
            format!("replica {r}'s recovery point"),
        );
        if periodic {
            lower(
                &mut k,
                x.hw_checkpoint,
                format!("replica {r}'s HW checkpoint"),
            );
        }
        for (f, leo) in &x.follower_leo {
            if let Some(leo) = *leo {
                lower(&mut k, leo, format!("follower {f}'s LEO as {r} knows it"));
            }
        }
    }
    if let Some(o) = floor {
        lower(
            &mut k,
            o,
            "a fetch response served and not yet applied".into(),
        );
    }
    let Some(first) = snap.replicas.first() else {
        return Err("no replicas".into());
    };
    if k < held {
        return Err(format!(
            "the settled prefix would end at {k} ({limit}), below one settled before ({held})"
        ));
    }
    let at = |x: &ReplicaSnapshot, o: u64| {
        let start = x.log.first().map_or(x.log_end_offset, |e| e.offset);
        o.checked_sub(start)
            .and_then(|i| x.log.get(i as usize))
            .copied()
    };
    for x in &snap.replicas[1..] {
        if let Some(o) = (held..k).find(|&o| at(first, o) != at(x, o)) {
            lower(
                &mut k,
                o,
                format!("replicas {} and {} differ at offset {o}", first.id, x.id),
            );
        }
    }
    let waited: HashSet<u64> = snap
        .replicas
        .iter()
        .flat_map(|x| x.pending_acks.iter().copied())
        .collect();
    let mut unsettled = None;
    for o in held..k {
        let e = at(first, o).expect("below every LEO and above every log's start");
        let id = e
            .record_id
            .ok_or_else(|| format!("the record at offset {o} has no record id"))?;
        let h = snap
            .records
            .get(&id)
            .ok_or_else(|| format!("record {id} at offset {o} was never produced"))?;
        if h.offset != o {
            return Err(format!("record {id} at offset {o} says {}", h.offset));
        }
        if h.visible.is_none() || waited.contains(&id) {
            unsettled = Some((o, id));
            break;
        }
    }
    if let Some((o, id)) = unsettled {
        lower(
            &mut k,
            o,
            format!("record {id} is not committed and answered"),
        );
    }
    // Cheaply, before any copy: a log longer than the model's past the
    // prefix does not fit.
    if let Some(x) = snap
        .replicas
        .iter()
        .find(|x| x.log_end_offset - k > MAX_RECORDS as u64)
    {
        return Err(format!(
            "replica {}: {} entries; the model holds {MAX_RECORDS}, with the settled prefix \
             dropped (offsets below {k}, limited by {limit})",
            x.id,
            x.log_end_offset - k
        ));
    }
    let prefix: HashSet<u64> = first
        .log
        .iter()
        .filter(|e| e.offset < k)
        .filter_map(|e| e.record_id)
        .collect();
    let logged: HashSet<u64> = snap
        .replicas
        .iter()
        .flat_map(|x| x.log.iter().filter_map(|e| e.record_id))
        .collect();
    let epoch_base = lowest_epoch(
        snap.controller.leader_epoch.map(i64::from),
        snap.replicas
            .iter()
            .filter(|x| x.alive)
            .map(|x| x.leader_epoch.map(i64::from)),
        snap.replicas
            .iter()
            .flat_map(|x| x.log.iter().filter(|e| e.offset >= k))
            .map(|e| i64::from(e.epoch)),
    );
    let mut window = Window {
        base: k,
        kept: Vec::new(),
        first_new: snap.records.keys().last().map_or(0, |&id| id + 1),
        dropped: 0,
        epoch_base: LeaderEpoch::try_from(epoch_base).expect("no lower than an epoch named"),
    };
    let mut lost = Vec::new();
    for (&id, h) in snap.records.iter() {
        let done = h.acked.is_some() || h.visible.is_some();
        if !logged.contains(&id) && done && h.offset < k {
            let (property, how) = match h.acked {
                Some(_) => (ACKNOWLEDGED_RECORDS_SURVIVE, "acknowledged"),
                None => (COMMITTED_RECORDS_SURVIVE, "committed"),
            };
            lost.push(format!(
                "{property}: record {id}, {how} at offset {}, is in no log",
                h.offset
            ));
            window.dropped += 1;
            continue;
        }
        let dead = !logged.contains(&id) && !waited.contains(&id) && !done;
        if dropped_by_the_move(id, prefix.contains(&id), dead, h.offset, k)? {
            window.dropped += 1;
        } else {
            window.kept.push(id);
        }
    }
    let state = window
        .view(snap.clone())
        .and_then(|seen| crate::abstraction::abstract_state(cfg, &seen))
        .map_err(|why| {
            format!(
                "{why}, with the settled prefix dropped (offsets below {k}, limited by {limit})"
            )
        })?;
    Ok(Resumed {
        window,
        state,
        lost,
    })
}

/// Where validation resumes ([`resume_at`]).
#[derive(Debug)]
pub struct Resumed {
    pub window: Window,
    pub state: State,
    /// Records lost in the stretch and dropped with the prefix.
    pub lost: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use highwater_model::{PartitionModel, Truncation};

    /// Random walks of the model, faults one step in ten: at each state
    /// where the record budget is full and `settle` allows a move, or the
    /// last epoch is taken and `epochs_settle` allows one (as
    /// `Checker::move_window` moves), `check`
    /// decides whether to take it (the walk then goes on from the moved
    /// state, so records keep coming) or to end the walk.
    fn walks(
        cfg: &Config,
        walks: usize,
        settle: impl Fn(&State) -> Result<Shift, String>,
        epochs_settle: impl Fn(&State) -> Result<Shift, String>,
        mut check: impl FnMut(&State, &Shift) -> bool,
    ) {
        let mut seed = 7u64;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for _ in 0..walks {
            let mut s = PartitionModel::new(*cfg).init_state();
            let mut acts = Vec::new();
            for _ in 0..300 {
                let allowed = if s.produced >= cfg.records {
                    settle(&s)
                } else if s.controller.next_epoch() > cfg.max_epoch {
                    epochs_settle(&s)
                } else {
                    Err("no budget spent".into())
                };
                if let Ok(shift) = allowed {
                    if !check(&s, &shift) {
                        break;
                    }
                    s = shift_state(cfg, &s, &shift).expect("shiftable");
                }
                acts.clear();
                enabled(cfg, &s, &mut acts);
                let (faults, steps): (Vec<Action>, Vec<Action>) =
                    acts.iter().partition(|a| a.is_fault(&s));
                let pick = if !faults.is_empty() && (steps.is_empty() || next(10) == 0) {
                    faults[next(faults.len())]
                } else if !steps.is_empty() {
                    steps[next(steps.len())]
                } else {
                    break;
                };
                if let Some(n) = apply(cfg, &s, pick) {
                    s = n;
                }
            }
        }
    }

    /// Under every truncation rule with KIP-320, and with a periodic HW
    /// checkpoint: wherever the window moves, the model behaves alike from
    /// the moved state, three steps deep. Unclean crashes stay possible
    /// (as in `model_config`), so the recovery point matters throughout.
    #[test]
    fn the_model_behaves_alike_after_every_move_on_random_walks() {
        let concurrent = highwater::cluster::concurrent::ConcurrentConfig::new(3);
        let (mut moves, mut epoch_moves) = (0, 0);
        for truncation in [
            Truncation::OnFetch,
            Truncation::EpochIterative,
            Truncation::Epoch,
            Truncation::Hw,
        ] {
            for periodic in [false, true] {
                let mut cfg = super::super::model_config(&concurrent);
                cfg.truncation = truncation;
                if periodic {
                    cfg.hw_checkpoint = HwCheckpoint::Periodic;
                }
                walks(
                    &cfg,
                    100,
                    |s| settled(&cfg, s),
                    |s| epochs_settled(&cfg, s),
                    |s, shift| {
                        behaves_alike(&cfg, s, shift, 3)
                            .unwrap_or_else(|e| panic!("{truncation:?}: {e}\n{s:?}\n{shift:?}"));
                        if shift.epochs == 0 {
                            the_unbounded_shape_moves_alike(&cfg, s, shift);
                        }
                        moves += 1;
                        epoch_moves += usize::from(shift.epochs > 0);
                        true
                    },
                );
            }
        }
        eprintln!("{moves} moves checked, {epoch_moves} of them dropping epochs");
        assert!(moves > 100, "the window moved: {moves}");
        assert!(epoch_moves > 50, "the window dropped epochs: {epoch_moves}");
    }

    /// The same move in the unbounded shape (the rules are one, so the
    /// window is too): the same prefix settled, the same state after it,
    /// and the model behaving alike from it.
    fn the_unbounded_shape_moves_alike(cfg: &Config, s: &State, shift: &Shift) {
        use highwater_model::state::Unbounded;
        let wide: State<Unbounded> = s.reshape().expect("any state fits the unbounded shape");
        let moved = settled(cfg, &wide).expect("settled in the unbounded shape too");
        assert_eq!(
            (moved.k as u8, moved.dropped as u8, moved.epochs),
            (shift.k, shift.dropped, 0),
            "the same move: {s:?}"
        );
        let after = shift_state(cfg, &wide, &moved).expect("shiftable");
        assert_eq!(
            after.reshape::<Compact>(),
            shift_state(cfg, s, shift),
            "the same moved state"
        );
        behaves_alike(cfg, &wide, &moved, 2).expect("alike in the unbounded shape");
    }

    /// The refusals of `behaves_alike` (two steps deep) on random walks
    /// moving by the `broken` rule (offsets and epochs together), each walk
    /// ending at its first refusal.
    fn refusals_of(broken: Broken) -> Vec<String> {
        let concurrent = highwater::cluster::concurrent::ConcurrentConfig::new(3);
        let cfg = super::super::model_config(&concurrent);
        let (mut alike, mut refused) = (0, Vec::new());
        walks(
            &cfg,
            100,
            |s| settled_as(&cfg, s, Some(broken), None),
            |_| Err("with the offsets only".into()),
            |s, shift| match behaves_alike(&cfg, s, shift, 2) {
                Ok(()) => {
                    alike += 1;
                    true
                }
                Err(e) => {
                    refused.push(e);
                    false
                }
            },
        );
        eprintln!(
            "{broken:?}: {alike} moves alike, {} refused; first: {:?}",
            refused.len(),
            refused.first()
        );
        refused
    }

    /// A window that ignores the recovery point (a prefix an unclean crash
    /// can still cut, deliberately broken) moves where the model would not
    /// behave alike: `behaves_alike` refuses those moves.
    #[test]
    fn a_window_ignoring_the_recovery_point_is_refused() {
        let refused = refusals_of(Broken::IgnoreRecoveryPoint);
        assert!(
            !refused.is_empty(),
            "no move of the broken window was refused"
        );
    }

    /// A window that drops the epoch a live follower is still at (one that
    /// has not taken the newest LeaderAndIsr), deliberately broken, moves
    /// where the model would not behave alike: the follower could take a
    /// request before the move that it cannot after. `behaves_alike`
    /// refuses those moves.
    #[test]
    fn a_window_dropping_a_live_replicas_epoch_is_refused() {
        let refused = refusals_of(Broken::IgnoreLiveEpochs);
        assert!(
            refused.iter().any(|e| e.contains("not after")),
            "no move of the broken window was refused for a request it lost"
        );
    }

    #[test]
    fn model_ids_follow_the_moves() {
        let mut w = Window::default();
        // Records 0..4 produced; 0 and 2 dropped.
        let shift: Shift = Shift {
            k: 1,
            produced: 4,
            renumber: vec![None, Some(0), None, Some(1)],
            dropped: 2,
            prefix: vec![Entry::default(); 2],
            epochs: 0,
            clamp_epochs: false,
        };
        w.advance(&shift);
        assert_eq!(w.model_id(0), None);
        assert_eq!(w.model_id(1), Some(0));
        assert_eq!(w.model_id(2), None);
        assert_eq!(w.model_id(3), Some(1));
        assert_eq!(w.model_id(4), Some(2));
        assert_eq!(w.rebuild_id(2), 4);
        let shift: Shift = Shift {
            k: 2,
            produced: 4,
            renumber: vec![None, Some(0), Some(1), None],
            dropped: 2,
            prefix: vec![Entry::default(); 2],
            epochs: 0,
            clamp_epochs: false,
        };
        w.advance(&shift);
        assert_eq!(w.base, 3);
        assert_eq!(w.dropped, 4);
        assert_eq!(w.model_id(1), None);
        assert_eq!(w.model_id(3), Some(0));
        assert_eq!(w.model_id(4), Some(1));
        assert_eq!(w.model_id(5), None, "rebuild id 5 was model id 3, dropped");
        assert_eq!(w.model_id(6), Some(2));
    }
    /// A cluster of 3 replicas in epoch 0, led by 0, every log holding the
    /// same 6 records, flushed: HW `hw` everywhere, records below it
    /// committed and answered.
    fn six_records(hw: u64) -> ClusterSnapshot {
        use highwater::cluster::RecordHistory as H;
        use highwater::replication::{ControllerState, LeaderAndIsr, LeaderView};
        let log: Vec<LogEntry> = (0..6)
            .map(|o| LogEntry {
                offset: o,
                epoch: 0,
                record_id: Some(o),
            })
            .collect();
        let replicas = (0..3)
            .map(|r| {
                let mut x = ReplicaSnapshot::down(r, log.clone(), 6, hw, 6, hw, false);
                x.alive = true;
                x.leader_epoch = Some(0);
                x.leader = LeaderView::Replica(0);
                if r == 0 {
                    x.isr = vec![0, 1, 2];
                    x.follower_leo = [(1, Some(6)), (2, Some(6))].into_iter().collect();
                }
                x
            })
            .collect();
        let records = (0..6)
            .map(|o| {
                let done = (o < hw).then_some(0);
                (
                    o,
                    H {
                        offset: o,
                        acked: done,
                        visible: done,
                    },
                )
            })
            .collect::<BTreeMap<_, _>>()
            .into();
        ClusterSnapshot {
            replicas,
            controller: ControllerState {
                leader: Some(0),
                leader_epoch: Some(0),
                isr: vec![0, 1, 2],
                alive: vec![0, 1, 2],
                ..ControllerState::default()
            },
            requests: [(
                0,
                LeaderAndIsr {
                    leader_epoch: 0,
                    partition_epoch: 0,
                    leader: Some(0),
                    isr: vec![0, 1, 2],
                    replicas: vec![0, 1, 2],
                },
            )]
            .into_iter()
            .collect::<BTreeMap<_, _>>()
            .into(),
            epoch_isrs: Arc::default(),
            records,
            clean_crashes: 0,
            unclean_crashes: 0,
            leader_moves: 0,
        }
    }

    /// Resuming takes the implementation's state once its settled prefix
    /// is dropped and the rest fits the model (6 records, 3 settled: the
    /// model resumes holding the other 3, renamed 0 to 2 from offset 0),
    /// and refuses one that does not fit: 5 records unsettled (the HW at
    /// 1), a follower's recovery point below the HW (an unclean crash could
    /// still cut the prefix), a record still waiting for its answer.
    #[test]
    fn a_resume_takes_only_a_settled_state_that_fits_the_model() {
        let concurrent = highwater::cluster::concurrent::ConcurrentConfig::new(3);
        let cfg = super::super::model_config(&concurrent);
        let Resumed { window, state, .. } =
            resume_at(&cfg, &six_records(3), None).expect("3 settled");
        assert_eq!((window.base, window.dropped), (3, 3));
        assert_eq!(state.produced, 3);
        assert_eq!(state.replica(0).log.leo(), 3);
        assert_eq!(state.replica(1).hw, 0);
        assert_eq!(state.records[0].offset, 0);
        assert!(super::super::check::broken_properties(&state).is_empty());

        let refused = |snap: &ClusterSnapshot, floor| match resume_at(&cfg, snap, floor) {
            Ok(r) => panic!(
                "resumed at base {} with {} records",
                r.window.base, r.state.produced
            ),
            Err(why) => why,
        };
        let why = refused(&six_records(1), None);
        assert!(
            why.contains("5 entries") && why.contains("limited by replica 0's HW"),
            "{why}"
        );

        let mut unflushed = six_records(3);
        unflushed.replicas[2].recovery_point = 1;
        let why = refused(&unflushed, None);
        assert!(why.contains("replica 2's recovery point"), "{why}");

        let mut waiting = six_records(3);
        waiting.replicas[0].pending_acks = vec![1];
        let why = refused(&waiting, None);
        assert!(
            why.contains("record 1 is not committed and answered"),
            "{why}"
        );

        let why = refused(&six_records(3), Some(1));
        assert!(why.contains("served and not yet applied"), "{why}");

        // A record acknowledged at offset 1 and in no log (lost, as under
        // acks=1): dropped with the prefix, and said.
        let mut lost = six_records(3);
        std::sync::Arc::make_mut(&mut lost.records).insert(
            6,
            highwater::cluster::RecordHistory {
                offset: 1,
                acked: Some(0),
                visible: None,
            },
        );
        let r = resume_at(&cfg, &lost, None).expect("resumes");
        assert_eq!(r.window.dropped, 4);
        assert_eq!(r.lost.len(), 1, "{:?}", r.lost);
        assert!(
            r.lost[0].starts_with(ACKNOWLEDGED_RECORDS_SURVIVE),
            "{:?}",
            r.lost
        );
    }
}
