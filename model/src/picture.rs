//! A state as a picture (SVG), for the web explorer: one lane per replica
//! with its log as boxes (record letter and epoch, coloured by epoch), the
//! HW, LEO and recovery point, its role, epoch, and ISR and ELR membership;
//! the controller's view; what was acknowledged and visible; a record a
//! leader has lost drawn as a ghost where it should be; a stale leader and a
//! fenced broker marked; and the step's action drawn as an arrow where it is
//! a message (a fetch between the two logs).
//!
//! A lane, from its top: the LEO label, the log's boxes, then the HW and
//! recovery point labels; every label inside the lane's border.

use crate::actions::Action;
use crate::properties;
use crate::state::{record_name, replica_name, LeaderView, ReplicaId, State, MAX_RECORDS};
use std::fmt::Write;

const LANE: i32 = 76;
const TOP: i32 = 86;
const LOG_X: i32 = 230;
const BOX: i32 = 46;
const WIDTH: i32 = 880;
/// Where a leader's ISR and fetched LEOs are written: right of the longest
/// log and of a mark one past it.
const KNOWS_X: i32 = LOG_X + (MAX_RECORDS as i32 + 1) * BOX + 24;
/// Where message arrows between the controller and a broker run, right of
/// everything else.
const ARROW_X: i32 = 830;
/// Where a lane's log boxes start and end, below the lane's top (`lane_y`
/// less 4).
const LOG_TOP: i32 = 14;
const LOG_BOTTOM: i32 = 44;

/// One colour per leader epoch.
const EPOCH_COLOURS: [&str; 7] = [
    "#cfe2ff", "#d1e7dd", "#fff3cd", "#f8d7da", "#e2d9f3", "#cff4fc", "#fde2c4",
];

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn lane_y(r: ReplicaId) -> i32 {
    TOP + i32::from(r) * LANE
}

/// The picture of `s`, reached by `action` (None: the initial state);
/// `broken` names the always-properties `s` breaks, explained underneath.
pub fn svg(s: &State, action: Option<&Action>, broken: &[&str]) -> String {
    // Each broken property's explanation, wrapped to the picture's width.
    let notes: Vec<String> = broken
        .iter()
        .flat_map(|name| {
            let why = properties::explain(name, s).unwrap_or_default();
            wrap(&format!("Broken: {name}: {why}"), 100)
        })
        .collect();
    let height = TOP + i32::from(s.n) * LANE + 44 + 18 * notes.len() as i32;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="13" class="highwater-state">"#
    );
    let _ = write!(
        out,
        r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#333"/></marker></defs>"##
    );
    let title = action.map_or("initial state".to_string(), |a| format!("after {a}"));
    let _ = write!(
        out,
        r#"<text x="10" y="20" font-size="15" font-weight="bold" class="step">{}</text>"#,
        escape(&title)
    );
    controller(&mut out, s);
    for r in s.ids() {
        lane(&mut out, s, r);
    }
    if let Some(a) = action {
        message(&mut out, s, a);
    }
    let notes_top = TOP + i32::from(s.n) * LANE + 14;
    history(&mut out, s, notes_top);
    for (i, line) in notes.iter().enumerate() {
        let _ = write!(
            out,
            r##"<text x="10" y="{}" fill="#b02a37" font-weight="bold" class="broken">{}</text>"##,
            notes_top + 22 + 18 * i as i32,
            escape(line)
        );
    }
    out.push_str("</svg>");
    out
}

fn controller(out: &mut String, s: &State) {
    let c = &s.controller;
    let mut text = format!(
        "controller: leader {}, epoch {}, ISR {:?}, ELR {:?}",
        c.leader
            .map_or("none".to_string(), |l| replica_name(l).to_string()),
        c.epoch.map_or("-".to_string(), |e| e.to_string()),
        c.isr,
        c.elr
    );
    if !c.lke.is_empty() {
        text.push_str(&format!(", last known leader {:?}", c.lke));
    }
    if c.recovering {
        text.push_str(", RECOVERING");
    }
    if !c.fenced.is_empty() {
        text.push_str(&format!(", fenced {:?}", c.fenced));
    }
    let _ = write!(
        out,
        r##"<rect x="8" y="32" width="700" height="26" rx="4" fill="#f1f3f5" stroke="#868e96"/><text x="16" y="50" class="controller">{}</text>"##,
        escape(&text)
    );
}

fn lane(out: &mut String, s: &State, r: ReplicaId) {
    let x = s.replica(r);
    let y = lane_y(r);
    let c = &s.controller;
    let name = replica_name(r);
    let (fill, status) = match (x.alive, x.unclean_down) {
        (true, _) => ("#ffffff", String::new()),
        (false, false) => ("#e9ecef", " down".to_string()),
        (false, true) => ("#e9ecef", " DOWN (unclean)".to_string()),
    };
    let _ = write!(
        out,
        r##"<rect x="4" y="{}" width="{}" height="{}" fill="{fill}" stroke="#dee2e6" class="lane" data-replica="{name}"/>"##,
        y - 4,
        WIDTH - 8,
        LANE - 6,
    );
    let role = match x.leader {
        LeaderView::Unknown => "not told".to_string(),
        LeaderView::NoLeader => "no leader".to_string(),
        LeaderView::Replica(l) if l == r => "leader".to_string(),
        LeaderView::Replica(l) => format!("follows {}", replica_name(l)),
    };
    let epoch = x.epoch.map_or("-".to_string(), |e| e.to_string());
    let _ = write!(
        out,
        r#"<text x="14" y="{}" font-size="20" font-weight="bold">{name}</text><text x="40" y="{}">{}{}</text><text x="40" y="{}">epoch {}</text>"#,
        y + 30,
        y + 16,
        escape(&role),
        escape(&status),
        y + 34,
        epoch
    );
    // What sets this broker apart, beside its epoch: a leader whose epoch
    // the controller has moved past, and a broker the controller fenced.
    let controller_epoch = c.epoch.map_or("-".to_string(), |e| e.to_string());
    let stale = x.presumes_leadership(r) && x.epoch < c.epoch;
    let mut bx = 110;
    for (on, label, class, colour, why) in [
        (
            stale,
            "stale",
            "stale-leader",
            "#c92a2a",
            format!("{name} believes it leads in epoch {epoch}; the controller is at epoch {controller_epoch}"),
        ),
        (
            c.fenced.contains(r),
            "fenced",
            "fenced",
            "#495057",
            format!("the controller has fenced {name}: it is not eligible to lead or to join the ISR until it is unfenced"),
        ),
    ] {
        if on {
            bx += badge(out, bx, y + 23, label, colour, Some((class, name, &why)));
        }
    }
    // Membership badges.
    let mut bx = 40;
    for (member, label, colour) in [
        (c.isr.contains(r), "ISR", "#2f9e44"),
        (c.elr.contains(r), "ELR", "#e8590c"),
        (c.leader == Some(r), "named leader", "#1c7ed6"),
    ] {
        if member {
            bx += badge(out, bx, y + 44, label, colour, None);
        }
    }
    // The log, one box per entry.
    for (o, e) in x.log.entries().iter().enumerate() {
        let bx = LOG_X + o as i32 * BOX;
        let colour = EPOCH_COLOURS[e.epoch as usize % EPOCH_COLOURS.len()];
        let _ = write!(
            out,
            r##"<rect x="{bx}" y="{}" width="{}" height="{}" rx="3" fill="{colour}" stroke="#495057" class="entry"/><text x="{}" y="{}" font-size="15">{}{}</text>"##,
            y + LOG_TOP,
            BOX - 4,
            LOG_BOTTOM - LOG_TOP,
            bx + 8,
            y + LOG_TOP + 20,
            record_name(e.id),
            e.epoch
        );
    }
    ghosts(out, s, r);
    // HW, LEO and recovery point as marks along the log. An offset past the
    // longest log (a broken state: "HW <= LEO") is drawn just beyond it,
    // its label saying where it is.
    let at = |offset: u8| LOG_X + i32::from(offset.min(MAX_RECORDS as u8 + 1)) * BOX - 2;
    let past = if x.hw > x.leo() {
        format!(" past LEO {}", x.leo())
    } else {
        String::new()
    };
    let _ = write!(
        out,
        r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#e03131" stroke-width="3" class="hw"/><text x="{3}" y="{2}" fill="#e03131" font-size="11">HW {4}{past}</text>"##,
        at(x.hw),
        y + 6,
        y + 62,
        at(x.hw) + 3,
        x.hw
    );
    let _ = write!(
        out,
        r##"<text x="{}" y="{}" fill="#495057" font-size="11" class="leo" data-replica="{name}">LEO {}</text>"##,
        at(x.leo()) + 3,
        y + 10,
        x.leo()
    );
    if x.recovery_point != x.hw {
        let _ = write!(
            out,
            r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#7048e8" stroke-dasharray="3,2" stroke-width="2"/><text x="{3}" y="{2}" fill="#7048e8" font-size="11">RP {4}</text>"##,
            at(x.recovery_point),
            y + 6,
            y + 53,
            at(x.recovery_point) + 3,
            x.recovery_point
        );
    }
    // What a presumed leader knows: its ISR copy and its followers' LEOs.
    if x.leader == LeaderView::Replica(r) {
        let fetched: Vec<String> = s
            .ids()
            .filter(|&f| f != r)
            .map(|f| {
                let leo = x.follower_leo[f as usize].map_or("-".to_string(), |o| o.to_string());
                format!("{}:{leo}", replica_name(f))
            })
            .collect();
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" font-size="12">ISR {:?}</text><text x="{}" y="{}" font-size="12">fetched {}</text>"#,
            KNOWS_X,
            y + 20,
            x.isr,
            KNOWS_X,
            y + 36,
            escape(&fetched.join(" "))
        );
    }
}

/// A badge at (`x`, `y`): a coloured box with `label` in white, and, when
/// `what` gives (class, replica, explanation), those as its class, its
/// `data-replica` and its tooltip. Returns the width it takes.
fn badge(
    out: &mut String,
    x: i32,
    y: i32,
    label: &str,
    colour: &str,
    what: Option<(&str, char, &str)>,
) -> i32 {
    let w = 8 * label.len() as i32 + 8;
    let (attrs, title) = match what {
        Some((class, r, why)) => (
            format!(r#" class="{class}" data-replica="{r}""#),
            format!("<title>{}</title>", escape(why)),
        ),
        None => (String::new(), String::new()),
    };
    let _ = write!(
        out,
        r##"<rect x="{x}" y="{y}" width="{w}" height="15" rx="3" fill="{colour}"{attrs}>{title}</rect><text x="{}" y="{}" fill="#fff" font-size="11">{label}</text>"##,
        x + 4,
        y + 11
    );
    w + 4
}

/// The records that replica `r`, a presumed leader, should hold and does
/// not (`properties::missing_records`), each drawn as a dashed ghost box at
/// its offset: in the log's row where the log has nothing there, else as a
/// tag above the record that took its place.
fn ghosts(out: &mut String, s: &State, r: ReplicaId) {
    let mut lost: Vec<properties::Missing> = properties::missing_records(s, |h| h.acked)
        .chain(properties::missing_records(s, |h| h.visible))
        .filter(|m| m.leader == r)
        .collect();
    lost.sort_by_key(|m| (m.offset, m.record));
    lost.dedup_by_key(|m| (m.offset, m.record));
    let y = lane_y(r);
    let log = &s.replica(r).log;
    for m in lost {
        // An offset past every slot is drawn in the slot just past them.
        let bx = LOG_X + i32::from(m.offset.min(MAX_RECORDS as u8)) * BOX;
        let why = format!(
            "lost: record {} at offset {}, acknowledged or committed in epoch {}, is not in {}'s log",
            record_name(m.record),
            m.offset,
            m.since,
            replica_name(r)
        );
        let (top, height, label) = if log.get(m.offset).is_some() {
            (y + 1, 12, format!("{} lost", record_name(m.record)))
        } else {
            (
                y + LOG_TOP,
                LOG_BOTTOM - LOG_TOP,
                record_name(m.record).to_string(),
            )
        };
        let _ = write!(
            out,
            r##"<rect x="{bx}" y="{top}" width="{}" height="{height}" rx="3" fill="#fff5f5" stroke="#c92a2a" stroke-dasharray="4,3" class="ghost" data-record="{}" data-replica="{}"><title>{}</title></rect>"##,
            BOX - 4,
            record_name(m.record),
            replica_name(r),
            escape(&why)
        );
        if height > 12 {
            let _ = write!(
                out,
                r##"<text x="{}" y="{}" font-size="15" fill="#c92a2a">{label}</text><text x="{}" y="{}" font-size="9" fill="#c92a2a">lost</text>"##,
                bx + 8,
                top + 17,
                bx + 8,
                top + 27
            );
        } else {
            let _ = write!(
                out,
                r##"<text x="{}" y="{}" font-size="9" fill="#c92a2a">{label}</text>"##,
                bx + 4,
                top + 9
            );
        }
    }
}

/// The action as an arrow, where it is a message between parties: a fetch
/// between the leader's log and the follower's, at the follower's last
/// entry (where the fetched records landed); the controller's messages at
/// the picture's right.
fn message(out: &mut String, s: &State, a: &Action) {
    let mid = |r: ReplicaId| lane_y(r) + LANE / 2 - 6;
    let fetch = |follower: ReplicaId, leader: ReplicaId| {
        let last = s.replica(follower).leo().clamp(1, MAX_RECORDS as u8) - 1;
        let x = LOG_X + i32::from(last) * BOX + BOX - 14;
        let (from, to) = if leader < follower {
            (lane_y(leader) + LOG_BOTTOM, lane_y(follower) + LOG_TOP)
        } else {
            (lane_y(leader) + LOG_TOP, lane_y(follower) + LOG_BOTTOM)
        };
        (x, from, to)
    };
    let (x, from, to, label) = match *a {
        Action::FollowerFetch { follower, leader } => {
            let (x, from, to) = fetch(follower, leader);
            (x, from, to, "fetch")
        }
        Action::FollowerFetchOne { follower, leader } => {
            let (x, from, to) = fetch(follower, leader);
            (x, from, to, "fetch (one record)")
        }
        Action::FollowerFetchPart {
            follower, leader, ..
        } => {
            let (x, from, to) = fetch(follower, leader);
            (x, from, to, "fetch (cut short)")
        }
        Action::BecomeLeader { replica, .. } | Action::BecomeFollower { replica, .. } => {
            (ARROW_X, 45, mid(replica), "LeaderAndIsr")
        }
        Action::LeaderShrinkIsr { leader, .. } | Action::LeaderExpandIsr { leader, .. } => {
            (ARROW_X, mid(leader), 45, "AlterPartition")
        }
        Action::LeaderLearnsIsr { leader } => (ARROW_X, 45, mid(leader), "ISR update"),
        Action::Produce { leader, .. } => (ARROW_X, 20, mid(leader), "produce"),
        Action::Crash { replica, .. } => {
            let y = mid(replica);
            let _ = write!(
                out,
                r##"<text x="{}" y="{}" font-size="26" fill="#e03131" class="crash">✗</text>"##,
                ARROW_X - 10,
                y + 8
            );
            return;
        }
        _ => return,
    };
    // Beside a fetch's arrow its label; left of the controller's. A white
    // halo keeps the label readable over whatever it crosses.
    let (lx, anchor) = if x == ARROW_X {
        (x - 6, "end")
    } else {
        (x + 6, "start")
    };
    let _ = write!(
        out,
        r##"<line x1="{x}" y1="{from}" x2="{x}" y2="{to}" stroke="#333" stroke-width="2" marker-end="url(#arrow)" class="message"/><text x="{lx}" y="{}" font-size="11" text-anchor="{anchor}" stroke="#fff" stroke-width="3" paint-order="stroke" fill="#333">{label}</text>"##,
        (from + to) / 2 + 4
    );
}

/// Splits `text` at spaces into lines of at most about `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let line = lines.last_mut().expect("one line at least");
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(format!("  {word}"));
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}

fn history(out: &mut String, s: &State, y: i32) {
    let facts = |epoch_of: fn(&crate::state::RecordHistory) -> Option<u8>| -> String {
        let items: Vec<String> = s
            .produced_records()
            .iter()
            .enumerate()
            .filter_map(|(id, h)| {
                epoch_of(h).map(|e| format!("{}@{} (epoch {e})", record_name(id as u8), h.offset))
            })
            .collect();
        if items.is_empty() {
            "none".to_string()
        } else {
            items.join(", ")
        }
    };
    let _ = write!(
        out,
        r#"<text x="10" y="{y}" class="history">acknowledged: {}   visible: {}</text>"#,
        escape(&facts(|h| h.acked)),
        escape(&facts(|h| h.visible))
    );
}
