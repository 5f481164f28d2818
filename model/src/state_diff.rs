//! The fields in which two states differ, each named by its path in an ITF
//! trace (`replicas.B.hw`, `controller.isr`, `records.a.acked`; see
//! `itf.rs`) so that it can be found in the file: what `highwater replay`
//! prints when a trace's state is not the one its step leads to.

use crate::state::{
    record_name, replica_name, Controller, LeaderView, Log, RecordHistory, Replica, ReplicaSet,
    Request, State, MAX_RECORDS,
};

/// One field that differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldDiff {
    /// The field's path, as the ITF mapping names it.
    pub path: String,
    /// Its value in the first state and in the second.
    pub left: String,
    pub right: String,
}

/// Every field in which `a` and `b` differ, in the order of the ITF
/// mapping; empty exactly when the states are equal. A log that differs in
/// length also shows its `leo`, which the trace writes beside it.
pub fn diff(a: &State, b: &State) -> Vec<FieldDiff> {
    let mut out = Diffs(Vec::new());
    // Destructured whole, here and below, so that a field added to the
    // state does not compile until it is compared.
    let State {
        n,
        replicas,
        controller,
        requests,
        produced,
        records,
        clean_crashes,
        unclean_crashes,
        leader_moves,
    } = a;
    out.field("replica count", n, &b.n, u8::to_string);
    for (r, (x, y)) in replicas.iter().zip(&b.replicas).enumerate() {
        let at = format!("replicas.{}", replica_name(r as u8));
        out.replica(&at, x, y, (*n).max(b.n));
    }
    out.controller(controller, &b.controller);
    for (e, (x, y)) in requests.iter().zip(&b.requests).enumerate() {
        let at = format!("requests.{e}");
        match (x, y) {
            (Some(x), Some(y)) => {
                let Request {
                    leader,
                    isr,
                    later_isrs,
                } = x;
                out.field(&format!("{at}.leader"), leader, &y.leader, |l| {
                    opt_replica(*l)
                });
                out.field(&format!("{at}.isr"), isr, &y.isr, set);
                out.field(
                    &format!("{at}.later_isrs"),
                    later_isrs,
                    &y.later_isrs,
                    |c| {
                        format!(
                            "[{}]",
                            c.iter().map(|x| set(&x)).collect::<Vec<_>>().join(", ")
                        )
                    },
                );
            }
            _ => out.field(&at, x, y, request),
        }
    }
    out.field("produced", produced, &b.produced, u8::to_string);
    for (i, (x, y)) in records.iter().zip(&b.records).enumerate() {
        let at = format!("records.{}", record_name(i as u8));
        let RecordHistory {
            offset,
            acked,
            visible,
        } = x;
        out.field(&format!("{at}.offset"), offset, &y.offset, u8::to_string);
        out.field(&format!("{at}.acked"), acked, &y.acked, opt_int);
        out.field(&format!("{at}.visible"), visible, &y.visible, opt_int);
    }
    out.field(
        "clean_crashes",
        clean_crashes,
        &b.clean_crashes,
        u8::to_string,
    );
    out.field(
        "unclean_crashes",
        unclean_crashes,
        &b.unclean_crashes,
        u8::to_string,
    );
    out.field("leader_moves", leader_moves, &b.leader_moves, u8::to_string);
    out.0
}

struct Diffs(Vec<FieldDiff>);

impl Diffs {
    fn field<T: PartialEq>(&mut self, path: &str, a: &T, b: &T, show: impl Fn(&T) -> String) {
        if a != b {
            self.0.push(FieldDiff {
                path: path.to_string(),
                left: show(a),
                right: show(b),
            });
        }
    }

    /// Replica `at`'s fields; `n` replicas are named in `follower_leo`.
    fn replica(&mut self, at: &str, a: &Replica, b: &Replica, n: u8) {
        let Replica {
            alive,
            log,
            hw,
            recovery_point,
            hw_checkpoint,
            epoch,
            leader,
            isr,
            follower_leo,
            stale_fetch,
            pending_acks,
            unclean_down,
        } = a;
        let p = |f: &str| format!("{at}.{f}");
        self.field(&p("alive"), alive, &b.alive, bool::to_string);
        self.field(
            &p("unclean_down"),
            unclean_down,
            &b.unclean_down,
            bool::to_string,
        );
        self.field(&p("log"), log, &b.log, log_text);
        self.field(&p("leo"), &log.leo(), &b.log.leo(), u8::to_string);
        self.field(&p("hw"), hw, &b.hw, u8::to_string);
        self.field(
            &p("recovery_point"),
            recovery_point,
            &b.recovery_point,
            u8::to_string,
        );
        self.field(
            &p("hw_checkpoint"),
            hw_checkpoint,
            &b.hw_checkpoint,
            u8::to_string,
        );
        self.field(&p("epoch"), epoch, &b.epoch, opt_int);
        self.field(&p("leader"), leader, &b.leader, leader_view);
        self.field(&p("isr"), isr, &b.isr, set);
        for (f, (x, y)) in follower_leo.iter().zip(&b.follower_leo).enumerate() {
            let name = if f < n as usize {
                replica_name(f as u8).to_string()
            } else {
                f.to_string()
            };
            self.field(&p(&format!("follower_leo.{name}")), x, y, opt_int);
        }
        self.field(&p("stale_fetch"), stale_fetch, &b.stale_fetch, set);
        self.field(&p("pending_acks"), pending_acks, &b.pending_acks, |m| {
            record_set(*m)
        });
    }

    fn controller(&mut self, a: &Controller, b: &Controller) {
        let Controller {
            leader,
            epoch,
            isr,
            elr,
            lke,
            recovering,
            fenced,
        } = a;
        self.field("controller.leader", leader, &b.leader, |l| opt_replica(*l));
        self.field("controller.epoch", epoch, &b.epoch, opt_int);
        self.field("controller.isr", isr, &b.isr, set);
        self.field("controller.elr", elr, &b.elr, set);
        self.field("controller.last_known_elr", lke, &b.lke, set);
        self.field(
            "controller.recovering",
            recovering,
            &b.recovering,
            bool::to_string,
        );
        self.field("controller.fenced", fenced, &b.fenced, set);
    }
}

fn opt_int(x: &Option<u8>) -> String {
    x.map_or("none".to_string(), |v| v.to_string())
}

fn opt_replica(x: Option<u8>) -> String {
    x.map_or("none".to_string(), |r| replica_name(r).to_string())
}

fn set(s: &ReplicaSet) -> String {
    format!("{s:?}")
}

fn record_set(mask: u8) -> String {
    let names: Vec<String> = (0..MAX_RECORDS as u8)
        .filter(|id| mask & (1 << id) != 0)
        .map(|id| record_name(id).to_string())
        .collect();
    format!("{{{}}}", names.join(","))
}

fn log_text(l: &Log) -> String {
    format!("{l:?}")
}

fn leader_view(v: &LeaderView) -> String {
    match v {
        LeaderView::Unknown => "unknown".to_string(),
        LeaderView::NoLeader => "no leader".to_string(),
        LeaderView::Replica(r) => replica_name(*r).to_string(),
    }
}

fn request(r: &Option<Request>) -> String {
    r.map_or("none".to_string(), |r| {
        format!("leader {}, isr {:?}", opt_replica(r.leader), r.isr)
    })
}

/// The differences as an aligned table (no newline at the end), `left` and
/// `right` naming the two columns of values.
pub fn table(diffs: &[FieldDiff], left: &str, right: &str) -> String {
    let w0 = diffs
        .iter()
        .map(|d| d.path.len())
        .chain([5])
        .max()
        .unwrap_or(5);
    let w1 = diffs
        .iter()
        .map(|d| d.left.len())
        .chain([left.len()])
        .max()
        .unwrap_or(0);
    let mut lines = vec![format!("  {:<w0$}  {left:<w1$}  {right}", "field")];
    for d in diffs {
        lines.push(format!("  {:<w0$}  {:<w1$}  {}", d.path, d.left, d.right));
    }
    lines.join("\n")
}
