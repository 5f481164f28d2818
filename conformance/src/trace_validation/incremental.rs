//! The abstraction (`abstraction::abstract_state`) of the rebuilt cluster
//! seen through the window, in the unbounded shape, at the cost of what an
//! event changed: the logs and the records, which grow with the run, are
//! kept converted from one event to the next (the rebuild says what changed:
//! `Rebuild::take_log_change`, `Rebuild::take_record_changes`), and the rest
//! of the snapshot, a constant size, is abstracted as before
//! (`abstract_state_with`). Converting every log and record at every event
//! was most of validation's time.
//!
//! The conversions are the window's and the abstraction's own
//! (`Window::view_entry`, `Window::view_record`, `entry_of`, `record_of`).
//! Where anything does not convert (an error of the window or of the
//! abstraction), the event is abstracted whole, the usual way, so the
//! answer and its message are the usual ones; the kept conversion then
//! starts over. With [`cross_check`] on, every event is abstracted both
//! ways and the two must be equal (the tests turn it on).

use std::cell::Cell;
use std::sync::OnceLock;

use highwater::cluster::ClusterSnapshot;
use highwater::replication::LogEntry;
use highwater_model::shape::{UnboundedLog, UnboundedRecords};
use highwater_model::state::{Entry, LogStore, RecordHistory, RecordTable, State, Unbounded};
use highwater_model::Config;

use super::rebuild::{LogSource, Rebuild};
use super::window::Window;
use crate::abstraction::{
    abstract_state, abstract_state_with, entry_of, record_of, show, Converted,
};

thread_local! {
    static CROSS_CHECK: Cell<bool> = const { Cell::new(false) };
    static WHOLE: Cell<u64> = const { Cell::new(0) };
}

/// Events abstracted whole on this thread since it started, the
/// incremental way having failed (an event that does not fit, or a fault of
/// the incremental abstraction: a trace that fits has none).
pub fn abstracted_whole() -> u64 {
    WHOLE.with(Cell::get)
}

/// Abstracts every event both ways on this thread and panics where the
/// two differ (or, with `HIGHWATER_TV_CROSS_CHECK` set, on every thread).
pub fn cross_check(on: bool) {
    CROSS_CHECK.with(|c| c.set(on));
}

pub(crate) fn cross_checking() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    CROSS_CHECK.with(Cell::get)
        || *ENV.get_or_init(|| std::env::var_os("HIGHWATER_TV_CROSS_CHECK").is_some())
}

/// Why an event's cluster could not be abstracted, as the usual way
/// answers: the window cannot show it (the event does not fit), or the
/// abstraction cannot hold it.
pub enum Unabstracted {
    View(String),
    Abstraction(String),
}

/// The logs and records of the last event, converted.
#[derive(Default)]
pub struct Incremental {
    /// The window they were converted through (None: start over).
    window: Option<(u64, u64, usize, u64, i32)>,
    /// Each replica's rebuilt log.
    logs: Vec<UnboundedLog>,
    /// Whether the last event showed each replica's log as rebuilt (not
    /// frozen, nothing served added): then the model's, once it fits, is
    /// the same (see [`Incremental::adopt`]).
    plain: Vec<bool>,
    /// Each replica's frozen log, with the time it was set.
    frozen: Vec<Option<(u64, UnboundedLog)>>,
    /// Shared with the state made from them, which is dropped before the
    /// next event: changed in place then.
    records: UnboundedRecords<RecordHistory<Unbounded>>,
}

impl Incremental {
    /// The cluster `rebuild` holds, seen through `window`, as the model's
    /// state: `abstract_state(cfg, window.view(rebuild.snapshot()))`.
    pub fn abstract_state(
        &mut self,
        cfg: &Config,
        rebuild: &mut Rebuild,
        window: &Window,
    ) -> Result<State<Unbounded>, Unabstracted> {
        let fast = self.convert(rebuild, window).and_then(|converted| {
            let snap = window.view_with(rebuild.snapshot_without_logs(), false)?;
            abstract_state_with(cfg, &snap, Some(converted))
        });
        match fast {
            Ok(s) => {
                if cross_checking() {
                    match whole(cfg, rebuild, window) {
                        Ok(w) if w == s => {}
                        Ok(w) => panic!(
                            "the incremental abstraction differs from the whole one:\n{}\n\
                             whole:\n{}",
                            show(&s),
                            show(&w)
                        ),
                        Err(_) => panic!("the incremental abstraction took an event it cannot"),
                    }
                }
                Ok(s)
            }
            Err(_) => {
                WHOLE.with(|w| w.set(w.get() + 1));
                self.window = None;
                whole(cfg, rebuild, window)
            }
        }
    }

    /// Brings the converted logs and records up to the rebuild's.
    fn convert(
        &mut self,
        rebuild: &mut Rebuild,
        window: &Window,
    ) -> Result<Converted<Unbounded>, String> {
        let n = rebuild.replica_count();
        let start_over = self.window != Some(window.key()) || self.logs.len() != n;
        if start_over {
            self.window = None;
            self.logs = vec![UnboundedLog::default(); n];
            self.frozen = vec![None; n];
            self.records = UnboundedRecords::default();
        }
        let mut logs = Vec::with_capacity(n);
        self.plain = vec![false; n];
        for r in 0..n {
            let id = r as u32;
            let changed = rebuild.take_log_change(id);
            let from = match (start_over, changed) {
                (true, _) => Some(0),
                (false, c) => c,
            };
            if let Some(from) = from {
                // The rebuilt logs hold nothing below the window
                // (`Rebuild::trim`).
                let from = from.max(window.base);
                let keep = from - window.base;
                let log = &mut self.logs[r];
                log.truncate(u32::try_from(keep).map_err(|_| "too long")?);
                append(log, id, rebuild.log_from(id, from), window)?;
            }
            let log = match rebuild.log_source(id) {
                LogSource::Frozen { gen, log } => {
                    let same = matches!(&self.frozen[r], Some((g, _)) if *g == gen);
                    if !same {
                        let mut converted = UnboundedLog::default();
                        append(&mut converted, id, log, window)?;
                        self.frozen[r] = Some((gen, converted));
                    }
                    self.frozen[r]
                        .as_ref()
                        .map(|(_, l)| l.clone())
                        .expect("set")
                }
                LogSource::Rebuilt { extra } => {
                    self.plain[r] = extra.is_empty();
                    let mut log = self.logs[r].clone();
                    append(&mut log, id, extra, window)?;
                    log
                }
            };
            logs.push(log);
        }
        let changed = rebuild.take_record_changes();
        let ids: Box<dyn Iterator<Item = u64>> = match start_over {
            true => Box::new(
                rebuild
                    .records()
                    .keys()
                    .copied()
                    .collect::<Vec<_>>()
                    .into_iter(),
            ),
            false => Box::new(changed.into_iter()),
        };
        for id in ids {
            let h = rebuild
                .records()
                .get(&id)
                .ok_or("a record changed and gone")?;
            let Some((m, h)) = window.view_record(id, h)? else {
                continue;
            };
            let h = record_of::<Unbounded>(&h)?;
            let m = usize::try_from(m).map_err(|_| "too many records")?;
            if m > self.records.len() {
                return Err("a record out of order".into());
            }
            *self.records.slot(m) = h;
        }
        let produced = self.records.len();
        if produced != rebuild.records().len() {
            return Err("records the window does not show".into());
        }
        self.window = Some(window.key());
        Ok(Converted {
            logs,
            records: self.records.clone(),
            produced,
        })
    }
}

impl Incremental {
    /// Takes the model's logs where they are the ones kept, and its records
    /// (`model`: the model's state after the last event, which fitted: its
    /// logs and records are the abstraction's, as `comparable` changes
    /// neither). The kept ones are then the model's own, shared, so that the
    /// next event compares them with the model's at no cost where they did
    /// not change (an equal copy is compared entry by entry). The records
    /// are shared by chunks: the next event that changes one copies its
    /// chunk and the list of chunks, not the table.
    pub fn adopt(&mut self, model: &State<Unbounded>) {
        if self.window.is_none() {
            return;
        }
        for (r, log) in self.logs.iter_mut().enumerate() {
            if self.plain.get(r) == Some(&true) {
                *log = model.replica(r as u8).log.clone();
            }
        }
        if model.records == self.records {
            self.records = model.records.clone();
        }
    }
}

/// Appends `entries` of replica `r`, through `window`, to `log`: each must
/// be shown (none in the settled prefix) at the next offset.
fn append(
    log: &mut UnboundedLog,
    r: u32,
    entries: &[LogEntry],
    window: &Window,
) -> Result<(), String> {
    for e in entries {
        let e = window
            .view_entry(r, e)?
            .ok_or("an entry in the settled prefix")?;
        if e.offset != log.leo() as u64 {
            return Err("an offset gap".into());
        }
        let entry: Entry<Unbounded> = entry_of(&e)?;
        log.append(entry);
    }
    Ok(())
}

/// The usual way: the whole snapshot through the window, abstracted.
fn whole(
    cfg: &Config,
    rebuild: &Rebuild,
    window: &Window,
) -> Result<State<Unbounded>, Unabstracted> {
    let snap: ClusterSnapshot = window
        .view(rebuild.snapshot())
        .map_err(Unabstracted::View)?;
    abstract_state(cfg, &snap).map_err(Unabstracted::Abstraction)
}
