//! Traces as files, in the Informal Trace Format (ITF) that Apalache and
//! Quint write: <https://apalache-mc.org/docs/adr/015adr-trace.html>.
//!
//! A trace is one JSON object: `#meta`, `vars`, `states`, and for a lasso
//! `loop`; each state an object with `#meta.index` and one entry per
//! variable. highwater's state maps to these variables (replicas and
//! records are named by letter, as in the step tables):
//!
//! | variable | ITF value |
//! |---|---|
//! | `replicas` | `#map` from replica name to a record: `alive`, `unclean_down` (bool); `log` (list of `{record, epoch}`); `leo` (int, derived: the log's length); `hw`, `recovery_point`, `hw_checkpoint` (int); `epoch` (option of int); `leader` (variant `Unknown`, `NoLeader` or `Replica` with a name); `isr`, `stale_fetch` (`#set` of names); `follower_leo` (`#map` from name to option of int); `pending_acks` (`#set` of record names) |
//! | `controller` | record: `leader`, `epoch` (options), `isr`, `elr`, `last_known_elr`, `fenced` (sets), `recovering` (bool) |
//! | `requests` | `#map` from epoch to `{leader: option of name, isr: set, later_isrs: list of sets}` (`later_isrs`: the ISRs of the epoch its leader has yet to apply, oldest first; absent is empty; an older trace's `last_isr: set` is read as a list of it, if not empty) |
//! | `records` | list, one per record produced so far (at most four): `{record, offset, acked, visible}` (`acked`, `visible`: option of the lowest epoch) |
//! | `produced`, `clean_crashes`, `unclean_crashes`, `leader_moves` | int |
//! | `mbt::actionTaken` | the action's kind (`init` for the first state), as Quint's model-based testing names it (derived from `action`) |
//! | `action` | the action as a record: `kind` and its arguments (names, epochs, offsets) |
//!
//! An option is a `#set` of at most one element: `{"#set": []}` for none,
//! `{"#set": [v]}` for `v`. A variant is `{"tag": T, "value": v}`, with the
//! empty record `{}` as the value of a tag that carries none. Integers are
//! plain JSON numbers (all are below 256; ITF allows them). This is what
//! both readers we test against load (`tests/itf_readers.rs`): Quint's
//! (`@informalsystems/quint`, which takes any shape) and itf-py (which
//! makes a Python type of every tag and field, so refuses Quint's own
//! `None`, a Python keyword, and a variant value such as Quint's unit
//! `{"#tup": []}` whose key is no Python name). Schema
//! `highwater-itf/1` wrote options as Quint's `Some`/`None` variants and
//! unit as `{"#tup": []}`; the reader still takes both.
//!
//! A progress counterexample is a lasso: the path to a state that cannot
//! heal, the way into the trap every fault-free future of it ends in, and
//! round that trap; `loop` is the index of the state the trap's cycle
//! starts at, and the last state's successor (by a fault-free step, or by
//! stuttering when `loop` is the last index: a trap of one state with no
//! fault-free step) is that state, as in Apalache's and TLC's lassos.
//!
//! `#meta` carries highwater's configuration (`highwater.config`, as
//! `--json` spells it), the property the trace breaks and its kind, so a
//! trace replays under the settings that produced it. The reader refuses a
//! derived field that disagrees with what it is derived from (`leo`,
//! `mbt::actionTaken`, `#meta.index`, each record's name, the number of
//! records listed), since editing it alone changes nothing, and names the
//! field of every value it refuses.

use crate::actions::Action;
use crate::config::Config;
use crate::controller::Election;
use crate::model::{PartitionModel, Trace};
use crate::state::{
    record_name, replica_name, Entry, IsrChain, LeaderView, Log, RecordHistory, ReplicaId,
    ReplicaSet, Request, State, EPOCH_SLOTS, MAX_RECORDS, RECOVERY_EPOCHS,
};
use highwater_checker::Checkable;
use serde_json::{json, Map, Value};

/// The version of highwater's ITF mapping, in `#meta.highwater.schema`.
pub const SCHEMA: &str = "highwater-itf/2";

/// Earlier versions the reader still takes.
const OLDER_SCHEMAS: &[&str] = &["highwater-itf/1"];

/// A trace read back from a file.
#[derive(Clone, Debug)]
pub struct ItfTrace {
    pub config: Config,
    /// The property the trace was written for, if any.
    pub property: Option<String>,
    /// "always" or "progress".
    pub kind: Option<String>,
    /// The states, and for each after the first the action that led to it
    /// when the file names one.
    pub states: Vec<State>,
    pub actions: Vec<Option<Action>>,
    /// A lasso's `loop`: the index of the state the last state's successor
    /// is (the last index: the last state stutters).
    pub loop_index: Option<usize>,
}

impl ItfTrace {
    /// The configuration its steps run under: the run's, and for a progress
    /// trace also the leader epochs recovery may use beyond the bound (its
    /// fault-free future may take them: `recovery::recovery_config`).
    pub fn step_config(&self) -> Config {
        if self.kind.as_deref() == Some("progress") {
            crate::recovery::recovery_config(&self.config, RECOVERY_EPOCHS)
        } else {
            self.config
        }
    }
}

/// A trace's loop, held against the model: the last state's successor, by
/// an enabled action, is the loop state; for a progress trace by a
/// fault-free step (the engine's lassos, `checker/src/lasso.rs`), and a
/// loop at the last state (stuttering) only where no fault-free step is
/// enabled.
pub fn check_loop(t: &ItfTrace) -> Result<()> {
    let Some(l) = t.loop_index else {
        return Ok(());
    };
    let last = t.states.len() - 1;
    let (from, to) = (&t.states[last], &t.states[l]);
    let progress = t.kind.as_deref() == Some("progress");
    let model = PartitionModel::new(t.config);
    let fault_free =
        || highwater_checker::lasso::fault_free_steps(&model, &model.recovery_model(), from);
    if l == last {
        return match fault_free().first() {
            Some((a, _)) if progress => Err(format!(
                "loop: the trace ends stuttering in state {last}, but {a} is enabled there \
                 without a fault"
            )),
            _ => Ok(()),
        };
    }
    let cfg = t.step_config();
    let closes = if progress {
        fault_free().iter().any(|(_, next)| next == to)
    } else {
        let mut enabled = Vec::new();
        crate::actions::enabled(&cfg, from, &mut enabled);
        enabled
            .into_iter()
            .any(|a| crate::actions::apply(&cfg, from, a).as_ref() == Some(to))
    };
    if closes {
        Ok(())
    } else {
        Err(format!(
            "loop: no {}step leads from the last state (state {last}) back to state {l}",
            if progress { "fault-free " } else { "" }
        ))
    }
}

/// The ITF document of `trace`, which breaks `property` (of `kind`); with
/// `loop_index`, a lasso whose last state's successor is that state.
pub fn to_itf(
    cfg: &Config,
    property: &str,
    kind: &str,
    trace: &Trace,
    loop_index: Option<usize>,
) -> Value {
    let states: Vec<Value> = trace
        .iter()
        .enumerate()
        .map(|(i, (s, a))| {
            let mut obj = state_vars(s);
            obj.insert("#meta".into(), json!({ "index": i }));
            obj.insert(
                "mbt::actionTaken".into(),
                json!(a.map_or("init".to_string(), |a| action_kind(&a).to_string())),
            );
            obj.insert(
                "action".into(),
                a.map_or(json!({ "kind": "init" }), |a| action_json(&a)),
            );
            Value::Object(obj)
        })
        .collect();
    let description = match loop_index {
        Some(l) => format!(
            "shortest path to a state where \"{property}\" fails, then a fault-free future that \
             never heals, looping back to state {l}"
        ),
        None => format!("shortest counterexample to \"{property}\""),
    };
    let mut doc = json!({
        "#meta": {
            "format": "ITF",
            "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
            "source": "highwater check",
            "description": description,
            "highwater": {
                "schema": SCHEMA,
                "config": cfg,
                "property": property,
                "kind": kind,
            },
        },
        "vars": [
            "replicas", "controller", "requests", "records", "produced", "clean_crashes",
            "unclean_crashes", "leader_moves", "mbt::actionTaken", "action"
        ],
        "states": states,
    });
    if let Some(l) = loop_index {
        doc["loop"] = json!(l);
    }
    doc
}

/// An option: a set of at most one element.
fn option<T>(x: Option<T>, f: impl Fn(T) -> Value) -> Value {
    json!({ "#set": x.map(f).into_iter().collect::<Vec<_>>() })
}

/// A variant's tag with no value.
fn bare_tag(tag: &str) -> Value {
    json!({ "tag": tag, "value": {} })
}

fn name(r: ReplicaId) -> Value {
    json!(replica_name(r).to_string())
}

fn set(s: ReplicaSet) -> Value {
    json!({ "#set": s.iter().map(name).collect::<Vec<_>>() })
}

fn state_vars(s: &State) -> Map<String, Value> {
    let replicas: Vec<Value> = s
        .ids()
        .map(|r| {
            let x = s.replica(r);
            let leader = match x.leader {
                LeaderView::Unknown => bare_tag("Unknown"),
                LeaderView::NoLeader => bare_tag("NoLeader"),
                LeaderView::Replica(l) => json!({ "tag": "Replica", "value": name(l) }),
            };
            let follower_leo: Vec<Value> = s
                .ids()
                .map(|f| json!([name(f), option(x.follower_leo[f as usize], |o| json!(o))]))
                .collect();
            let pending: Vec<Value> = (0..MAX_RECORDS as u8)
                .filter(|id| x.pending_acks & (1 << id) != 0)
                .map(|id| json!(record_name(id).to_string()))
                .collect();
            json!([
                name(r),
                {
                    "alive": x.alive,
                    "unclean_down": x.unclean_down,
                    "log": x.log.entries().iter().map(|e| json!({
                        "record": record_name(e.id).to_string(),
                        "epoch": e.epoch,
                    })).collect::<Vec<_>>(),
                    "leo": x.leo(),
                    "hw": x.hw,
                    "recovery_point": x.recovery_point,
                    "hw_checkpoint": x.hw_checkpoint,
                    "epoch": option(x.epoch, |e| json!(e)),
                    "leader": leader,
                    "isr": set(x.isr),
                    "follower_leo": { "#map": follower_leo },
                    "stale_fetch": set(x.stale_fetch),
                    "pending_acks": { "#set": pending },
                }
            ])
        })
        .collect();
    let c = &s.controller;
    let requests: Vec<Value> = s
        .requests
        .iter()
        .enumerate()
        .filter_map(|(e, r)| {
            let r = (*r)?;
            Some(json!([
                e,
                {
                    "leader": option(r.leader, name),
                    "isr": set(r.isr),
                    "later_isrs": r.later_isrs.iter().map(set).collect::<Vec<_>>(),
                }
            ]))
        })
        .collect();
    let records: Vec<Value> = s
        .produced_records()
        .iter()
        .enumerate()
        .map(|(id, h)| {
            json!({
                "record": record_name(id as u8).to_string(),
                "offset": h.offset,
                "acked": option(h.acked, |e| json!(e)),
                "visible": option(h.visible, |e| json!(e)),
            })
        })
        .collect();
    let mut m = Map::new();
    m.insert("replicas".into(), json!({ "#map": replicas }));
    m.insert(
        "controller".into(),
        json!({
            "leader": option(c.leader, name),
            "epoch": option(c.epoch, |e| json!(e)),
            "isr": set(c.isr),
            "elr": set(c.elr),
            "last_known_elr": set(c.lke),
            "recovering": c.recovering,
            "fenced": set(c.fenced),
        }),
    );
    m.insert("requests".into(), json!({ "#map": requests }));
    m.insert("records".into(), json!(records));
    m.insert("produced".into(), json!(s.produced));
    m.insert("clean_crashes".into(), json!(s.clean_crashes));
    m.insert("unclean_crashes".into(), json!(s.unclean_crashes));
    m.insert("leader_moves".into(), json!(s.leader_moves));
    m
}

/// The action's kind, as in its display name.
pub fn action_kind(a: &Action) -> &'static str {
    match a {
        Action::ControllerElectLeader { .. } => "ControllerElectLeader",
        Action::ControllerShrinkIsr { .. } => "ControllerShrinkIsr",
        Action::ControllerUnfence { .. } => "ControllerUnfence",
        Action::BecomeLeader { .. } => "BecomeLeader",
        Action::BecomeFollower { .. } => "BecomeFollower",
        Action::Produce { .. } => "Produce",
        Action::FollowerFetch { .. } => "FollowerFetch",
        Action::FollowerFetchOne { .. } => "FollowerFetchOne",
        Action::FollowerFetchPart { .. } => "FollowerFetchPart",
        Action::LeaderAdvanceHw { .. } => "LeaderAdvanceHw",
        Action::LeaderShrinkIsr { .. } => "LeaderShrinkIsr",
        Action::LeaderExpandIsr { .. } => "LeaderExpandIsr",
        Action::LeaderLearnsIsr { .. } => "LeaderLearnsIsr",
        Action::Flush { .. } => "Flush",
        Action::CheckpointHw { .. } => "CheckpointHw",
        Action::Crash { .. } => "Crash",
        Action::Restart { .. } => "Restart",
    }
}

fn election_name(e: Election) -> &'static str {
    match e {
        Election::Clean => "clean",
        Election::Elr => "elr",
        Election::Unclean => "unclean",
        Election::LastKnownLeader => "last-known-leader",
    }
}

/// An action as a structured object: `kind` and its arguments, replicas
/// and records by letter (also used by `--json`).
pub fn action_json(a: &Action) -> Value {
    let r = |x: ReplicaId| replica_name(x).to_string();
    let mut v = match *a {
        Action::ControllerElectLeader { replica, election } => {
            json!({ "replica": r(replica), "election": election_name(election) })
        }
        Action::ControllerShrinkIsr { replica }
        | Action::ControllerUnfence { replica }
        | Action::Flush { replica }
        | Action::CheckpointHw { replica }
        | Action::Restart { replica } => json!({ "replica": r(replica) }),
        Action::BecomeLeader { replica, epoch } | Action::BecomeFollower { replica, epoch } => {
            json!({ "replica": r(replica), "epoch": epoch })
        }
        Action::Produce { leader, record } => {
            json!({ "leader": r(leader), "record": record_name(record).to_string() })
        }
        Action::FollowerFetch { follower, leader }
        | Action::FollowerFetchOne { follower, leader } => {
            json!({ "follower": r(follower), "leader": r(leader) })
        }
        Action::FollowerFetchPart {
            follower,
            leader,
            records,
        } => json!({ "follower": r(follower), "leader": r(leader), "records": records }),
        Action::LeaderAdvanceHw { leader, hw } => json!({ "leader": r(leader), "hw": hw }),
        Action::LeaderShrinkIsr { leader, follower }
        | Action::LeaderExpandIsr { leader, follower } => {
            json!({ "leader": r(leader), "follower": r(follower) })
        }
        Action::LeaderLearnsIsr { leader } => json!({ "leader": r(leader) }),
        Action::Crash { replica, clean } => json!({ "replica": r(replica), "clean": clean }),
    };
    v["kind"] = json!(action_kind(a));
    v
}

// --- Reading -------------------------------------------------------------------
//
// Every error names the value it is about by its path in the document:
// `state 3.replicas.A.hw`, `state 3.records[0].acked`.

type Result<T> = std::result::Result<T, String>;

fn field<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a Value> {
    v.get(key).ok_or_else(|| format!("{at}: missing \"{key}\""))
}

fn int(v: &Value, at: &str) -> Result<u8> {
    let n = v
        .as_u64()
        .or_else(|| v.get("#bigint").and_then(|b| b.as_str()?.parse().ok()))
        .ok_or_else(|| format!("{at}: expected a small non-negative integer, got {v}"))?;
    u8::try_from(n).map_err(|_| format!("{at}: {n} is out of range (0 to 255)"))
}

fn boolean(v: &Value, at: &str) -> Result<bool> {
    v.as_bool()
        .ok_or_else(|| format!("{at}: expected true or false, got {v}"))
}

fn text<'a>(v: &'a Value, at: &str) -> Result<&'a str> {
    v.as_str()
        .ok_or_else(|| format!("{at}: expected a string, got {v}"))
}

fn list<'a>(v: &'a Value, at: &str) -> Result<&'a [Value]> {
    v.as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| format!("{at}: expected a list, got {v}"))
}

fn replica_of(v: &Value, n: u8, at: &str) -> Result<ReplicaId> {
    let s = v
        .as_str()
        .ok_or_else(|| format!("{at}: expected a replica name, got {v}"))?;
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c @ 'A'..='E'), None) if (c as u8 - b'A') < n => Ok(c as u8 - b'A'),
        _ => Err(format!(
            "{at}: {s:?} is not a replica of this partition (A to {})",
            replica_name(n - 1)
        )),
    }
}

fn record_of(v: &Value, at: &str) -> Result<u8> {
    let s = v
        .as_str()
        .ok_or_else(|| format!("{at}: expected a record name, got {v}"))?;
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c @ 'a'..='d'), None) => Ok(c as u8 - b'a'),
        _ => Err(format!("{at}: {s:?} is not a record name (a to d)")),
    }
}

/// A set's elements.
fn set_items<'a>(v: &'a Value, at: &str) -> Result<&'a [Value]> {
    v.get("#set")
        .and_then(|s| s.as_array())
        .map(Vec::as_slice)
        .ok_or_else(|| format!("{at}: expected a #set, got {v}"))
}

/// An option: a set of at most one element, or (schema 1) Quint's
/// `Some`/`None` variant.
fn opt<T>(v: &Value, at: &str, f: impl Fn(&Value, &str) -> Result<T>) -> Result<Option<T>> {
    if let Some(items) = v.get("#set").and_then(|s| s.as_array()) {
        return match items.as_slice() {
            [] => Ok(None),
            [x] => f(x, at).map(Some),
            _ => Err(format!(
                "{at}: an option is a #set of at most one element, got {} elements",
                items.len()
            )),
        };
    }
    match v.get("tag").and_then(|t| t.as_str()) {
        Some("None") => Ok(None),
        Some("Some") => f(field(v, "value", at)?, at).map(Some),
        _ => Err(format!(
            "{at}: expected an option (a #set of at most one element), got {v}"
        )),
    }
}

fn set_of(v: &Value, n: u8, at: &str) -> Result<ReplicaSet> {
    set_items(v, at)?
        .iter()
        .try_fold(ReplicaSet::EMPTY, |acc, x| {
            Ok(acc.with(replica_of(x, n, at)?))
        })
}

fn map_entries<'a>(v: &'a Value, at: &str) -> Result<Vec<(&'a Value, &'a Value)>> {
    let items = v
        .get("#map")
        .and_then(|s| s.as_array())
        .ok_or_else(|| format!("{at}: expected a #map, got {v}"))?;
    items
        .iter()
        .map(|kv| match kv.as_array().map(|a| a.as_slice()) {
            Some([k, v]) => Ok((k, v)),
            _ => Err(format!(
                "{at}: a #map entry is a [key, value] pair, got {kv}"
            )),
        })
        .collect()
}

/// A record (JSON object) and its path: field access that names the field
/// in every error.
struct Rec<'a> {
    v: &'a Value,
    at: String,
}

impl<'a> Rec<'a> {
    fn of(v: &'a Value, at: String) -> Result<Rec<'a>> {
        if v.is_object() {
            Ok(Rec { v, at })
        } else {
            Err(format!("{at}: expected a record, got {v}"))
        }
    }
    fn path(&self, key: &str) -> String {
        format!("{}.{key}", self.at)
    }
    fn get(&self, key: &str) -> Result<&'a Value> {
        field(self.v, key, &self.at)
    }
    fn int(&self, key: &str) -> Result<u8> {
        int(self.get(key)?, &self.path(key))
    }
    fn boolean(&self, key: &str) -> Result<bool> {
        boolean(self.get(key)?, &self.path(key))
    }
    fn set(&self, key: &str, n: u8) -> Result<ReplicaSet> {
        set_of(self.get(key)?, n, &self.path(key))
    }
    fn opt_int(&self, key: &str) -> Result<Option<u8>> {
        opt(self.get(key)?, &self.path(key), int)
    }
    fn opt_replica(&self, key: &str, n: u8) -> Result<Option<ReplicaId>> {
        opt(self.get(key)?, &self.path(key), |v, at| {
            replica_of(v, n, at)
        })
    }
    fn record(&self, key: &str) -> Result<Rec<'a>> {
        Rec::of(self.get(key)?, self.path(key))
    }
}

/// A request's `later_isrs`; absent in traces written before the model
/// kept it, and `last_isr` (its one element) in those written before it
/// kept the chain.
fn later_isrs(r: &Rec, n: u8) -> Result<IsrChain> {
    let isrs = match (r.v.get("later_isrs"), r.v.get("last_isr")) {
        (Some(v), _) => {
            let at = r.path("later_isrs");
            let items = list(v, &at)?;
            let isrs = items.iter().enumerate();
            isrs.map(|(i, x)| set_of(x, n, &format!("{at}.{i}")))
                .collect::<Result<Vec<_>>>()?
        }
        (None, Some(_)) => {
            let last = r.set("last_isr", n)?;
            [last].into_iter().filter(|x| !x.is_empty()).collect()
        }
        (None, None) => Vec::new(),
    };
    IsrChain::of(&isrs).ok_or_else(|| {
        format!(
            "{}: later ISRs {isrs:?}: more than the model holds, or an empty one",
            r.path("later_isrs")
        )
    })
}

/// The value of a variant tag that carries none: the empty record, or
/// (schema 1) Quint's unit, the empty tuple.
fn unit(v: &Value, at: &str) -> Result<()> {
    let empty_record = v.as_object().is_some_and(|o| o.is_empty());
    let empty_tuple = v
        .get("#tup")
        .and_then(|t| t.as_array())
        .is_some_and(|t| t.is_empty());
    if empty_record || empty_tuple {
        Ok(())
    } else {
        Err(format!(
            "{at}: expected {{}} (this tag carries no value), got {v}"
        ))
    }
}

fn leader_view(v: &Value, n: u8, at: &str) -> Result<LeaderView> {
    let tag = v.get("tag").and_then(|t| t.as_str());
    let value = || field(v, "value", at);
    let payload = format!("{at}.value");
    Ok(match tag {
        Some("Unknown") => {
            unit(value()?, &payload)?;
            LeaderView::Unknown
        }
        Some("NoLeader") => {
            unit(value()?, &payload)?;
            LeaderView::NoLeader
        }
        Some("Replica") => LeaderView::Replica(replica_of(value()?, n, &payload)?),
        _ => {
            return Err(format!(
                "{at}: expected a variant tagged Unknown, NoLeader or Replica, got {v}"
            ))
        }
    })
}

fn replica_into(s: &mut State, r: ReplicaId, x: &Rec<'_>) -> Result<()> {
    let n = s.n;
    let mut log = Log::default();
    let entries = list(x.get("log")?, &x.path("log"))?;
    if entries.len() > MAX_RECORDS {
        return Err(format!(
            "{}: {} entries, more than the {MAX_RECORDS} records a log can hold",
            x.path("log"),
            entries.len()
        ));
    }
    for (i, e) in entries.iter().enumerate() {
        let e = Rec::of(e, format!("{}[{i}]", x.path("log")))?;
        log.append(Entry {
            id: record_of(e.get("record")?, &e.path("record"))?,
            epoch: e.int("epoch")?,
        });
    }
    // Derived: written for readers, never read; an edit would change nothing.
    if let Some(leo) = x.v.get("leo") {
        let leo = int(leo, &x.path("leo"))?;
        if leo != log.leo() {
            return Err(format!(
                "{}: {leo}, but the log holds {} entries (the LEO is the log's length: edit \
                 the log)",
                x.path("leo"),
                log.leo()
            ));
        }
    }
    let rep = s.replica_mut(r);
    rep.log = log;
    rep.alive = x.boolean("alive")?;
    rep.unclean_down = x.boolean("unclean_down")?;
    rep.hw = x.int("hw")?;
    rep.recovery_point = x.int("recovery_point")?;
    rep.hw_checkpoint = x.int("hw_checkpoint")?;
    rep.epoch = x.opt_int("epoch")?;
    rep.leader = leader_view(x.get("leader")?, n, &x.path("leader"))?;
    rep.isr = x.set("isr", n)?;
    rep.stale_fetch = x.set("stale_fetch", n)?;
    let at = x.path("follower_leo");
    for (f, leo) in map_entries(x.get("follower_leo")?, &at)? {
        let f = replica_of(f, n, &at)?;
        let at = format!("{at}.{}", replica_name(f));
        rep.follower_leo[f as usize] = opt(leo, &at, int)?;
    }
    let at = x.path("pending_acks");
    for p in set_items(x.get("pending_acks")?, &at)? {
        rep.pending_acks |= 1 << record_of(p, &at)?;
    }
    Ok(())
}

fn state_of(v: &Value, n: u8, at: &str) -> Result<State> {
    let mut s = State {
        n,
        ..State::default()
    };
    let v = Rec::of(v, at.to_string())?;
    let replicas = map_entries(v.get("replicas")?, &v.path("replicas"))?;
    if replicas.len() != n as usize {
        return Err(format!(
            "{}: {} replicas, the configuration has {n}",
            v.path("replicas"),
            replicas.len()
        ));
    }
    for (k, x) in replicas {
        let r = replica_of(k, n, &v.path("replicas"))?;
        let x = Rec::of(x, format!("{}.{}", v.path("replicas"), replica_name(r)))?;
        replica_into(&mut s, r, &x)?;
    }
    let c = v.record("controller")?;
    s.controller.leader = c.opt_replica("leader", n)?;
    s.controller.epoch = c.opt_int("epoch")?;
    s.controller.isr = c.set("isr", n)?;
    s.controller.elr = c.set("elr", n)?;
    s.controller.lke = c.set("last_known_elr", n)?;
    s.controller.recovering = c.boolean("recovering")?;
    s.controller.fenced = c.set("fenced", n)?;
    let at = v.path("requests");
    for (e, r) in map_entries(v.get("requests")?, &at)? {
        let epoch = int(e, &at)? as usize;
        if epoch >= EPOCH_SLOTS {
            return Err(format!(
                "{at}: epoch {epoch} is beyond the model's epochs (0 to {})",
                EPOCH_SLOTS - 1
            ));
        }
        let r = Rec::of(r, format!("{at}.{epoch}"))?;
        s.requests[epoch] = Some(Request {
            leader: r.opt_replica("leader", n)?,
            isr: r.set("isr", n)?,
            later_isrs: later_isrs(&r, n)?,
        });
    }
    s.produced = v.int("produced")?;
    // Derived from `produced`: one history per record produced, as far as
    // the state keeps them.
    let records = list(v.get("records")?, &v.path("records"))?;
    let kept = (s.produced as usize).min(MAX_RECORDS);
    if records.len() != kept {
        return Err(format!(
            "{}: {} listed, but produced is {} (one per record produced, at most \
             {MAX_RECORDS})",
            v.path("records"),
            records.len(),
            s.produced
        ));
    }
    for (i, h) in records.iter().enumerate() {
        let h = Rec::of(h, format!("{}[{i}]", v.path("records")))?;
        let id = record_of(h.get("record")?, &h.path("record"))?;
        if id as usize != i {
            return Err(format!(
                "{}: record {} is listed at position {i} (records are listed in order: \
                 a, b, c, d)",
                h.path("record"),
                record_name(id)
            ));
        }
        s.records[i] = RecordHistory {
            offset: h.int("offset")?,
            acked: h.opt_int("acked")?,
            visible: h.opt_int("visible")?,
        };
    }
    s.clean_crashes = v.int("clean_crashes")?;
    s.unclean_crashes = v.int("unclean_crashes")?;
    s.leader_moves = v.int("leader_moves")?;
    Ok(s)
}

fn action_of(v: &Value, n: u8, at: &str) -> Result<Option<Action>> {
    let v = Rec::of(v, format!("{at}.action"))?;
    let kind = text(v.get("kind")?, &v.path("kind"))?;
    let r = |key: &str| replica_of(v.get(key)?, n, &v.path(key));
    let e = |key: &str| v.int(key);
    Ok(Some(match kind {
        "init" => return Ok(None),
        "ControllerElectLeader" => Action::ControllerElectLeader {
            replica: r("replica")?,
            election: match v.get("election")?.as_str() {
                Some("clean") => Election::Clean,
                Some("elr") => Election::Elr,
                Some("unclean") => Election::Unclean,
                Some("last-known-leader") => Election::LastKnownLeader,
                _ => {
                    return Err(format!(
                        "{}: expected clean, elr, unclean or last-known-leader",
                        v.path("election")
                    ))
                }
            },
        },
        "ControllerShrinkIsr" => Action::ControllerShrinkIsr {
            replica: r("replica")?,
        },
        "ControllerUnfence" => Action::ControllerUnfence {
            replica: r("replica")?,
        },
        "BecomeLeader" => Action::BecomeLeader {
            replica: r("replica")?,
            epoch: e("epoch")?,
        },
        "BecomeFollower" => Action::BecomeFollower {
            replica: r("replica")?,
            epoch: e("epoch")?,
        },
        "Produce" => Action::Produce {
            leader: r("leader")?,
            record: record_of(v.get("record")?, &v.path("record"))?,
        },
        "FollowerFetch" => Action::FollowerFetch {
            follower: r("follower")?,
            leader: r("leader")?,
        },
        "FollowerFetchOne" => Action::FollowerFetchOne {
            follower: r("follower")?,
            leader: r("leader")?,
        },
        "FollowerFetchPart" => Action::FollowerFetchPart {
            follower: r("follower")?,
            leader: r("leader")?,
            records: e("records")?,
        },
        "LeaderAdvanceHw" => Action::LeaderAdvanceHw {
            leader: r("leader")?,
            hw: e("hw")?,
        },
        "LeaderShrinkIsr" => Action::LeaderShrinkIsr {
            leader: r("leader")?,
            follower: r("follower")?,
        },
        "LeaderExpandIsr" => Action::LeaderExpandIsr {
            leader: r("leader")?,
            follower: r("follower")?,
        },
        "LeaderLearnsIsr" => Action::LeaderLearnsIsr {
            leader: r("leader")?,
        },
        "Flush" => Action::Flush {
            replica: r("replica")?,
        },
        "CheckpointHw" => Action::CheckpointHw {
            replica: r("replica")?,
        },
        "Crash" => Action::Crash {
            replica: r("replica")?,
            clean: v.boolean("clean")?,
        },
        "Restart" => Action::Restart {
            replica: r("replica")?,
        },
        other => return Err(format!("{}: unknown action kind {other:?}", v.path("kind"))),
    }))
}

/// The derived fields of state `i`, against what they are derived from:
/// `#meta.index` (its position) and `mbt::actionTaken` (its action's kind).
fn check_derived(v: &Value, i: usize, action: Option<&Action>, at: &str) -> Result<()> {
    if let Some(index) = v.get("#meta").and_then(|m| m.get("index")) {
        let path = format!("{at}.#meta.index");
        if index.as_u64() != Some(i as u64) {
            return Err(format!(
                "{path}: {index}, but it is state {i} of the trace (the index is its position)"
            ));
        }
    }
    if let Some(taken) = v.get("mbt::actionTaken") {
        let path = format!("{at}.mbt::actionTaken");
        let taken = text(taken, &path)?;
        let kind = match (action, v.get("action")) {
            (Some(a), _) => action_kind(a),
            (None, Some(_)) => "init",
            // No action written: nothing to hold it against.
            (None, None) => return Ok(()),
        };
        if taken != kind {
            return Err(format!(
                "{path}: {taken:?}, but the action is {kind:?} (it is derived from `action`: \
                 edit that)"
            ));
        }
    }
    Ok(())
}

/// Reads an ITF trace written by [`to_itf`] (or by hand, or by another tool
/// following the mapping above): its configuration, states and actions.
/// Any value the state's types hold is taken, a broken state's too (an HW
/// past the LEO); what they cannot hold, or a derived field at odds with
/// its source, is refused, naming the field.
pub fn from_itf(text: &str) -> Result<ItfTrace> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let meta = field(&doc, "#meta", "the trace")?;
    let hw = field(meta, "highwater", "#meta")?;
    if let Some(schema) = hw.get("schema") {
        let known = schema
            .as_str()
            .is_some_and(|s| s == SCHEMA || OLDER_SCHEMAS.contains(&s));
        if !known {
            return Err(format!(
                "#meta.highwater.schema: {schema} is not one this highwater reads ({SCHEMA}, {})",
                OLDER_SCHEMAS.join(", ")
            ));
        }
    }
    let config: Config = serde_json::from_value(field(hw, "config", "#meta.highwater")?.clone())
        .map_err(|e| format!("#meta.highwater.config: {e}"))?;
    config
        .validate()
        .map_err(|e| format!("#meta.highwater.config: {e}"))?;
    let states = list(field(&doc, "states", "the trace")?, "states")?;
    if states.is_empty() {
        return Err("states: the trace has no states".to_string());
    }
    let loop_index = match doc.get("loop") {
        None | Some(Value::Null) => None,
        Some(l) => {
            let i = l
                .as_u64()
                .ok_or_else(|| format!("loop: expected the index of a state, got {l}"))?;
            if i >= states.len() as u64 {
                return Err(format!(
                    "loop: {i} is not the index of a state (the trace has {})",
                    states.len()
                ));
            }
            Some(i as usize)
        }
    };
    let mut out = ItfTrace {
        config,
        property: hw
            .get("property")
            .and_then(|p| p.as_str())
            .map(String::from),
        kind: hw.get("kind").and_then(|p| p.as_str()).map(String::from),
        states: Vec::new(),
        actions: Vec::new(),
        loop_index,
    };
    for (i, v) in states.iter().enumerate() {
        let at = format!("state {i}");
        out.states.push(state_of(v, config.replicas, &at)?);
        let action = match v.get("action") {
            Some(a) => action_of(a, config.replicas, &at)?,
            None => None,
        };
        check_derived(v, i, action.as_ref(), &at)?;
        out.actions.push(action);
    }
    Ok(out)
}
