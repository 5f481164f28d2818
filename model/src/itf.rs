//! Traces as files, in the Informal Trace Format (ITF) that Apalache and
//! Quint write: <https://apalache-mc.org/docs/adr/015adr-trace.html>.
//!
//! A trace is one JSON object: `#meta`, `vars`, and `states`, each state an
//! object with `#meta.index` and one entry per variable. highwater's state
//! maps to these variables (replicas and records are named by letter, as
//! in the step tables):
//!
//! | variable | ITF value |
//! |---|---|
//! | `replicas` | `#map` from replica name to a record: `alive`, `unclean_down` (bool); `log` (list of `{record, epoch}`); `leo`, `hw`, `recovery_point`, `hw_checkpoint` (int); `epoch` (option of int); `leader` (variant `Unknown`, `NoLeader` or `Replica` with a name); `isr`, `stale_fetch` (`#set` of names); `follower_leo` (`#map` from name to option of int); `pending_acks` (`#set` of record names) |
//! | `controller` | record: `leader`, `epoch` (options), `isr`, `elr`, `last_known_elr`, `fenced` (sets), `recovering` (bool) |
//! | `requests` | `#map` from epoch to `{leader: option of name, isr: set}` |
//! | `records` | list, one per record produced so far: `{record, offset, acked, visible}` (`acked`, `visible`: option of the lowest epoch) |
//! | `produced`, `clean_crashes`, `unclean_crashes`, `leader_moves` | int |
//! | `mbt::actionTaken` | the action's kind (`init` for the first state), as Quint's model-based testing names it |
//! | `action` | the action as a record: `kind` and its arguments (names, epochs, offsets) |
//!
//! Options and variants are Quint's sum types: `{"tag": "Some", "value": v}`
//! and `{"tag": "None", "value": {"#tup": []}}`. `#meta` carries
//! highwater's configuration (`highwater.config`, as `--json` spells it),
//! the property the trace breaks and its kind, so a trace replays under the
//! settings that produced it.

use crate::actions::Action;
use crate::config::Config;
use crate::controller::Election;
use crate::graph::Trace;
use crate::state::{
    record_name, replica_name, Entry, LeaderView, Log, RecordHistory, ReplicaId, ReplicaSet,
    Request, State, EPOCH_SLOTS, MAX_RECORDS,
};
use serde_json::{json, Map, Value};

/// The version of highwater's ITF mapping, in `#meta.highwater.schema`.
pub const SCHEMA: &str = "highwater-itf/1";

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
}

/// The ITF document of `trace`, which breaks `property` (of `kind`).
pub fn to_itf(cfg: &Config, property: &str, kind: &str, trace: &Trace) -> Value {
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
    json!({
        "#meta": {
            "format": "ITF",
            "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
            "source": "highwater check",
            "description": format!("shortest counterexample to \"{property}\""),
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
    })
}

fn some(v: Value) -> Value {
    json!({ "tag": "Some", "value": v })
}

fn none() -> Value {
    json!({ "tag": "None", "value": { "#tup": [] } })
}

fn option<T>(x: Option<T>, f: impl Fn(T) -> Value) -> Value {
    x.map_or_else(none, |v| some(f(v)))
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
                LeaderView::Unknown => json!({ "tag": "Unknown", "value": { "#tup": [] } }),
                LeaderView::NoLeader => json!({ "tag": "NoLeader", "value": { "#tup": [] } }),
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
            Some(json!([e, { "leader": option(r.leader, name), "isr": set(r.isr) }]))
        })
        .collect();
    let records: Vec<Value> = s.records[..s.produced as usize]
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

type Result<T> = std::result::Result<T, String>;

fn field<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a Value> {
    v.get(key).ok_or_else(|| format!("{at}: missing \"{key}\""))
}

fn int(v: &Value, at: &str) -> Result<u8> {
    let n = v
        .as_u64()
        .or_else(|| v.get("#bigint").and_then(|b| b.as_str()?.parse().ok()))
        .ok_or_else(|| format!("{at}: expected a small non-negative integer, got {v}"))?;
    u8::try_from(n).map_err(|_| format!("{at}: {n} is out of range"))
}

fn boolean(v: &Value, at: &str) -> Result<bool> {
    v.as_bool()
        .ok_or_else(|| format!("{at}: expected true or false, got {v}"))
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

fn opt<T>(v: &Value, at: &str, f: impl Fn(&Value) -> Result<T>) -> Result<Option<T>> {
    match v.get("tag").and_then(|t| t.as_str()) {
        Some("None") => Ok(None),
        Some("Some") => f(field(v, "value", at)?).map(Some),
        _ => Err(format!(
            "{at}: expected an option (tag Some or None), got {v}"
        )),
    }
}

fn set_of(v: &Value, n: u8, at: &str) -> Result<ReplicaSet> {
    let items = v
        .get("#set")
        .and_then(|s| s.as_array())
        .ok_or_else(|| format!("{at}: expected a #set, got {v}"))?;
    items.iter().try_fold(ReplicaSet::EMPTY, |acc, x| {
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

fn state_of(v: &Value, n: u8, at: &str) -> Result<State> {
    let mut s = State {
        n,
        ..State::default()
    };
    let replicas = map_entries(field(v, "replicas", at)?, &format!("{at}.replicas"))?;
    if replicas.len() != n as usize {
        return Err(format!(
            "{at}: {} replicas, the configuration has {n}",
            replicas.len()
        ));
    }
    for (k, x) in replicas {
        let r = replica_of(k, n, at)?;
        let at = format!("{at}.replicas.{}", replica_name(r));
        let at = at.as_str();
        let mut log = Log::default();
        let entries = field(x, "log", at)?
            .as_array()
            .ok_or_else(|| format!("{at}.log: expected a list"))?;
        if entries.len() > MAX_RECORDS {
            return Err(format!("{at}.log: more than {MAX_RECORDS} entries"));
        }
        for e in entries {
            log.append(Entry {
                id: record_of(field(e, "record", at)?, at)?,
                epoch: int(field(e, "epoch", at)?, at)?,
            });
        }
        let rep = s.replica_mut(r);
        rep.log = log;
        rep.alive = boolean(field(x, "alive", at)?, at)?;
        rep.unclean_down = boolean(field(x, "unclean_down", at)?, at)?;
        rep.hw = int(field(x, "hw", at)?, at)?;
        rep.recovery_point = int(field(x, "recovery_point", at)?, at)?;
        rep.hw_checkpoint = int(field(x, "hw_checkpoint", at)?, at)?;
        rep.epoch = opt(field(x, "epoch", at)?, at, |e| int(e, at))?;
        let leader = field(x, "leader", at)?;
        rep.leader = match leader.get("tag").and_then(|t| t.as_str()) {
            Some("Unknown") => LeaderView::Unknown,
            Some("NoLeader") => LeaderView::NoLeader,
            Some("Replica") => LeaderView::Replica(replica_of(field(leader, "value", at)?, n, at)?),
            _ => {
                return Err(format!(
                    "{at}.leader: expected Unknown, NoLeader or Replica"
                ))
            }
        };
        rep.isr = set_of(field(x, "isr", at)?, n, at)?;
        rep.stale_fetch = set_of(field(x, "stale_fetch", at)?, n, at)?;
        for (f, leo) in map_entries(field(x, "follower_leo", at)?, at)? {
            let f = replica_of(f, n, at)?;
            rep.follower_leo[f as usize] = opt(leo, at, |o| int(o, at))?;
        }
        let pending = field(x, "pending_acks", at)?
            .get("#set")
            .and_then(|p| p.as_array())
            .ok_or_else(|| format!("{at}.pending_acks: expected a #set"))?;
        for p in pending {
            rep.pending_acks |= 1 << record_of(p, at)?;
        }
    }
    let c = field(v, "controller", at)?;
    let cat = format!("{at}.controller");
    s.controller.leader = opt(field(c, "leader", &cat)?, &cat, |l| replica_of(l, n, &cat))?;
    s.controller.epoch = opt(field(c, "epoch", &cat)?, &cat, |e| int(e, &cat))?;
    s.controller.isr = set_of(field(c, "isr", &cat)?, n, &cat)?;
    s.controller.elr = set_of(field(c, "elr", &cat)?, n, &cat)?;
    s.controller.lke = set_of(field(c, "last_known_elr", &cat)?, n, &cat)?;
    s.controller.recovering = boolean(field(c, "recovering", &cat)?, &cat)?;
    s.controller.fenced = set_of(field(c, "fenced", &cat)?, n, &cat)?;
    for (e, r) in map_entries(field(v, "requests", at)?, at)? {
        let epoch = int(e, at)? as usize;
        if epoch >= EPOCH_SLOTS {
            return Err(format!(
                "{at}.requests: epoch {epoch} is beyond the model's epochs"
            ));
        }
        s.requests[epoch] = Some(Request {
            leader: opt(field(r, "leader", at)?, at, |l| replica_of(l, n, at))?,
            isr: set_of(field(r, "isr", at)?, n, at)?,
        });
    }
    let records = field(v, "records", at)?
        .as_array()
        .ok_or_else(|| format!("{at}.records: expected a list"))?;
    if records.len() > MAX_RECORDS {
        return Err(format!("{at}.records: more than {MAX_RECORDS}"));
    }
    for (i, h) in records.iter().enumerate() {
        if record_of(field(h, "record", at)?, at)? as usize != i {
            return Err(format!("{at}.records: record {i} is out of order"));
        }
        s.records[i] = RecordHistory {
            offset: int(field(h, "offset", at)?, at)?,
            acked: opt(field(h, "acked", at)?, at, |e| int(e, at))?,
            visible: opt(field(h, "visible", at)?, at, |e| int(e, at))?,
        };
    }
    s.produced = int(field(v, "produced", at)?, at)?;
    if s.produced as usize != records.len() {
        return Err(format!(
            "{at}: produced is {} but {} records are listed",
            s.produced,
            records.len()
        ));
    }
    s.clean_crashes = int(field(v, "clean_crashes", at)?, at)?;
    s.unclean_crashes = int(field(v, "unclean_crashes", at)?, at)?;
    s.leader_moves = int(field(v, "leader_moves", at)?, at)?;
    // Logs and offsets within bounds, so that no later step indexes past them.
    for r in s.ids() {
        let x = s.replica(r);
        if x.hw > x.leo() || x.recovery_point > x.leo() {
            return Err(format!(
                "{at}: replica {}'s HW or recovery point is past its log end",
                replica_name(r)
            ));
        }
    }
    Ok(s)
}

fn action_of(v: &Value, n: u8, at: &str) -> Result<Option<Action>> {
    let kind = field(v, "kind", at)?
        .as_str()
        .ok_or_else(|| format!("{at}.kind: expected a string"))?;
    let r = |key: &str| replica_of(field(v, key, at)?, n, at);
    let e = |key: &str| int(field(v, key, at)?, at);
    Ok(Some(match kind {
        "init" => return Ok(None),
        "ControllerElectLeader" => Action::ControllerElectLeader {
            replica: r("replica")?,
            election: match field(v, "election", at)?.as_str() {
                Some("clean") => Election::Clean,
                Some("elr") => Election::Elr,
                Some("unclean") => Election::Unclean,
                Some("last-known-leader") => Election::LastKnownLeader,
                _ => {
                    return Err(format!(
                        "{at}.election: expected clean, elr, unclean or last-known-leader"
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
            record: record_of(field(v, "record", at)?, at)?,
        },
        "FollowerFetch" => Action::FollowerFetch {
            follower: r("follower")?,
            leader: r("leader")?,
        },
        "FollowerFetchOne" => Action::FollowerFetchOne {
            follower: r("follower")?,
            leader: r("leader")?,
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
            clean: boolean(field(v, "clean", at)?, at)?,
        },
        "Restart" => Action::Restart {
            replica: r("replica")?,
        },
        other => return Err(format!("{at}: unknown action kind {other:?}")),
    }))
}

/// Reads an ITF trace written by [`to_itf`] (or by hand, or by another tool
/// following the mapping above): its configuration, states and actions.
pub fn from_itf(text: &str) -> Result<ItfTrace> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let meta = field(&doc, "#meta", "the trace")?;
    let hw = field(meta, "highwater", "#meta")?;
    let config: Config = serde_json::from_value(field(hw, "config", "#meta.highwater")?.clone())
        .map_err(|e| format!("#meta.highwater.config: {e}"))?;
    config
        .validate()
        .map_err(|e| format!("#meta.highwater.config: {e}"))?;
    let states = field(&doc, "states", "the trace")?
        .as_array()
        .ok_or("\"states\" is not a list")?;
    if states.is_empty() {
        return Err("the trace has no states".to_string());
    }
    let mut out = ItfTrace {
        config,
        property: hw
            .get("property")
            .and_then(|p| p.as_str())
            .map(String::from),
        kind: hw.get("kind").and_then(|p| p.as_str()).map(String::from),
        states: Vec::new(),
        actions: Vec::new(),
    };
    for (i, v) in states.iter().enumerate() {
        let at = format!("state {i}");
        out.states.push(state_of(v, config.replicas, &at)?);
        out.actions.push(match v.get("action") {
            Some(a) => action_of(a, config.replicas, &at)?,
            None => None,
        });
    }
    Ok(out)
}
