//! The explorer's picture of a state (`picture::svg`), read back as SVG
//! elements: labels stay inside their replica's lane, a lost record is
//! drawn where it should be, a stale leader and a fenced broker are
//! marked, and a fetch is drawn between the two logs.
//!
//! The states are built by hand from the initial state, each with just
//! what the picture must show.

use highwater_model::actions::Action;
use highwater_model::picture;
use highwater_model::presets::SAFE;
use highwater_model::properties::{self, ACKNOWLEDGED_RECORDS_SURVIVE};
use highwater_model::state::{Entry, LeaderView, RecordHistory};
use highwater_model::{PartitionModel, State};

const A: u8 = 0;
const B: u8 = 1;
const C: u8 = 2;

/// One SVG element: its name and attributes, and the text it holds.
#[derive(Debug)]
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    text: String,
}

impl Element {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    fn num(&self, key: &str) -> f64 {
        self.attr(key)
            .unwrap_or_else(|| panic!("{key} on {self:?}"))
            .parse()
            .unwrap_or_else(|e| panic!("{key} on {self:?}: {e}"))
    }
    fn class(&self) -> &str {
        self.attr("class").unwrap_or("")
    }
}

/// The picture's elements, in order (enough of an XML reader for the
/// picture's flat output: no comments, attributes in double quotes).
fn elements(svg: &str) -> Vec<Element> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        rest = &rest[start + 1..];
        if rest.starts_with('/') {
            continue;
        }
        let end = rest.find('>').expect("a tag ends");
        let tag = rest[..end].trim_end_matches('/');
        let (name, mut attrs_text) = tag.split_once(' ').unwrap_or((tag, ""));
        let mut attrs = Vec::new();
        while let Some(eq) = attrs_text.find("=\"") {
            let key = attrs_text[..eq].trim().to_string();
            let after = &attrs_text[eq + 2..];
            let close = after.find('"').expect("a quoted value");
            attrs.push((key, after[..close].to_string()));
            attrs_text = &after[close + 1..];
        }
        let text = rest[end + 1..].split('<').next().unwrap_or("").to_string();
        out.push(Element {
            name: name.to_string(),
            attrs,
            text,
        });
        rest = &rest[end + 1..];
    }
    out
}

fn of_class<'a>(els: &'a [Element], class: &str) -> Vec<&'a Element> {
    els.iter().filter(|e| e.class() == class).collect()
}

/// The lane of replica `r`: (x, y, width, height).
fn lane(els: &[Element], r: char) -> (f64, f64, f64, f64) {
    let e = els
        .iter()
        .find(|e| e.class() == "lane" && e.attr("data-replica") == Some(&r.to_string()))
        .unwrap_or_else(|| panic!("lane {r}"));
    (e.num("x"), e.num("y"), e.num("width"), e.num("height"))
}

fn initial() -> State {
    PartitionModel::new(SAFE).init_state()
}

/// Replica `r` alive, believing it leads in `epoch`, with `log`.
fn leading(s: &mut State, r: u8, epoch: u8, log: &[(u8, u8)]) {
    let x = s.replica_mut(r);
    x.alive = true;
    x.leader = LeaderView::Replica(r);
    x.epoch = Some(epoch);
    for &(id, epoch) in log {
        x.log.append(Entry { id, epoch });
    }
}

/// acks=1's loss: A, leader of epoch 0, acknowledged a@0 alone; the
/// controller moved leadership to B (epoch 1), whose log is empty; A still
/// believes it leads.
fn acks_1_loss() -> State {
    let mut s = initial();
    leading(&mut s, A, 0, &[(0, 0)]);
    leading(&mut s, B, 1, &[]);
    s.controller.leader = Some(B);
    s.controller.epoch = Some(1);
    s.produced = 1;
    s.records[0] = RecordHistory {
        offset: 0,
        acked: Some(0),
        visible: None,
    };
    s
}

#[test]
fn the_state_built_here_breaks_acknowledged_records_survive() {
    // The states below are what they claim to be.
    let why = properties::explain(ACKNOWLEDGED_RECORDS_SURVIVE, &acks_1_loss());
    assert!(why.is_some_and(|w| w.contains("a@0") && w.contains("missing on B")));
}

#[test]
fn leo_labels_stay_inside_their_lane() {
    let mut s = acks_1_loss();
    leading(&mut s, C, 1, &[(0, 0), (1, 1), (2, 1), (3, 1)]);
    let svg = picture::svg(&s, None, &[]);
    let els = elements(&svg);
    let labels: Vec<&Element> = els.iter().filter(|e| e.text.starts_with("LEO ")).collect();
    assert_eq!(labels.len(), 3, "one LEO label a lane:\n{svg}");
    for (label, r) in labels.iter().zip(['A', 'B', 'C']) {
        let (x, y, w, h) = lane(&els, r);
        let size = label.num("font-size");
        let (lx, ly) = (label.num("x"), label.num("y"));
        // The baseline less the font size is the top of its glyphs.
        assert!(
            ly - size >= y && ly <= y + h,
            "lane {r}'s LEO label at y {ly} (size {size}) crosses its lane, y {y} to {}",
            y + h
        );
        assert!(lx >= x && lx < x + w, "lane {r}'s LEO label at x {lx}");
    }
}

#[test]
fn a_lost_record_is_drawn_as_a_ghost_where_the_leader_lacks_it() {
    let s = acks_1_loss();
    let svg = picture::svg(&s, None, &[ACKNOWLEDGED_RECORDS_SURVIVE]);
    let els = elements(&svg);
    let ghosts = of_class(&els, "ghost");
    assert_eq!(ghosts.len(), 1, "one lost record:\n{svg}");
    let g = ghosts[0];
    assert_eq!(g.attr("data-record"), Some("a"));
    assert_eq!(g.attr("data-replica"), Some("B"));
    // In B's lane, where offset 0 is drawn (A's a0 box is at offset 0).
    let (_, y, _, h) = lane(&els, 'B');
    assert!(g.num("y") >= y && g.num("y") + g.num("height") <= y + h);
    let a0 = of_class(&els, "entry")[0];
    assert_eq!(g.num("x"), a0.num("x"), "at offset 0");
    assert!(g.attr("stroke-dasharray").is_some(), "a ghost is dashed");

    // Nothing is lost once B holds the record.
    let mut kept = s;
    kept.replica_mut(B).log.append(Entry { id: 0, epoch: 0 });
    let svg = picture::svg(&kept, None, &[]);
    assert!(of_class(&elements(&svg), "ghost").is_empty(), "{svg}");

    // B holds another record there: the ghost is still drawn, at offset 0.
    let mut overwritten = s;
    overwritten
        .replica_mut(B)
        .log
        .append(Entry { id: 1, epoch: 1 });
    let svg = picture::svg(&overwritten, None, &[]);
    let els = elements(&svg);
    let ghosts = of_class(&els, "ghost");
    assert_eq!(ghosts.len(), 1, "{svg}");
    assert_eq!(ghosts[0].num("x"), a0.num("x"));
}

#[test]
fn a_stale_leader_is_marked() {
    let s = acks_1_loss();
    let svg = picture::svg(&s, None, &[]);
    let els = elements(&svg);
    let stale = of_class(&els, "stale-leader");
    assert_eq!(
        stale.len(),
        1,
        "A leads in epoch 0, the controller is at 1:\n{svg}"
    );
    assert_eq!(stale[0].attr("data-replica"), Some("A"));
    // B leads in the controller's epoch: not stale.
    let mut current = s;
    current.replica_mut(A).leader = LeaderView::Replica(B);
    let svg = picture::svg(&current, None, &[]);
    assert!(
        of_class(&elements(&svg), "stale-leader").is_empty(),
        "{svg}"
    );
}

#[test]
fn a_fenced_broker_has_a_badge() {
    let mut s = acks_1_loss();
    s.controller.fenced = s.controller.fenced.with(C);
    let svg = picture::svg(&s, None, &[]);
    let els = elements(&svg);
    let fenced = of_class(&els, "fenced");
    assert_eq!(fenced.len(), 1, "{svg}");
    assert_eq!(fenced[0].attr("data-replica"), Some("C"));
    let (_, y, _, h) = lane(&els, 'C');
    assert!(fenced[0].num("y") >= y && fenced[0].num("y") <= y + h);
    let svg = picture::svg(&acks_1_loss(), None, &[]);
    assert!(of_class(&elements(&svg), "fenced").is_empty(), "{svg}");
}

#[test]
fn a_fetch_is_drawn_between_the_two_logs() {
    for (follower, leader) in [(C, A), (A, C), (B, A)] {
        let mut s = initial();
        leading(&mut s, leader, 0, &[(0, 0), (1, 0)]);
        let f = s.replica_mut(follower);
        f.alive = true;
        f.leader = LeaderView::Replica(leader);
        f.epoch = Some(0);
        f.log.append(Entry { id: 0, epoch: 0 });
        let svg = picture::svg(&s, Some(&Action::FollowerFetch { follower, leader }), &[]);
        let els = elements(&svg);
        let arrows = of_class(&els, "message");
        assert_eq!(arrows.len(), 1, "{svg}");
        let arrow = arrows[0];
        assert_eq!(arrow.name, "line");
        // Within the logs' columns: no further right than the last box.
        let right = of_class(&els, "entry")
            .iter()
            .map(|e| e.num("x") + e.num("width"))
            .fold(0.0, f64::max);
        let left = of_class(&els, "entry")
            .iter()
            .map(|e| e.num("x"))
            .fold(f64::MAX, f64::min);
        for x in [arrow.num("x1"), arrow.num("x2")] {
            assert!(
                x >= left && x <= right,
                "{follower} <- {leader}: the arrow at x {x}, the logs from {left} to {right}"
            );
        }
        // From the leader's lane to the follower's.
        let name = |r: u8| (b'A' + r) as char;
        let (_, ly, _, lh) = lane(&els, name(leader));
        let (_, fy, _, fh) = lane(&els, name(follower));
        let (y1, y2) = (arrow.num("y1"), arrow.num("y2"));
        assert!(y1 >= ly && y1 <= ly + lh, "starts in the leader's lane");
        assert!(y2 >= fy && y2 <= fy + fh, "ends in the follower's lane");
    }
}
