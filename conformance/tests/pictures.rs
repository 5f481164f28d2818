//! The pictures of a soak run (`highwater_conformance::pictures`): drawn
//! from a short seeded run's trace, each SVG is well-formed and holds what
//! the run did, counted from other sources than the picture's data: a
//! band per crash the nemesis recorded and per fence it injected, a tick
//! per election in the trace, the HW's last value the final leader's HW.
//! The same checks fail on data with a fault or an election dropped.
//! Bad input (no trace file, an empty trace) gives an error or an empty
//! picture, never a panic.

use std::time::Duration;

use highwater::cluster::concurrent::{read_trace_file, soak_config, NemesisFault, RuleSet};
use highwater::cluster::{Actor, Event, TraceEntry};
use highwater_conformance::pictures::{self, colour, data, fault_colour, svg_colour};
use highwater_conformance::trace_validation::validated_run;

/// The SVG, parsed (a picture that is not well-formed XML fails here).
fn parse(svg: &str) -> roxmltree::Document<'_> {
    let doc = roxmltree::Document::parse(svg).expect("well-formed SVG");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc
}

/// The elements of `tag` whose `attr` is `value`.
fn count(doc: &roxmltree::Document, tag: &str, attr: &str, value: &str) -> usize {
    doc.descendants()
        .filter(|n| n.has_tag_name(tag) && n.attribute(attr) == Some(value))
        .count()
}

/// The fault bands of the timeline's upper panel of one colour.
fn bands(doc: &roxmltree::Document, kinds: &[&str]) -> usize {
    let alpha = colour::BAND_ALPHA.to_string();
    let fills: Vec<String> = kinds.iter().map(|k| svg_colour(fault_colour(k))).collect();
    doc.descendants()
        .filter(|n| {
            n.has_tag_name("rect")
                && n.attribute("opacity") == Some(alpha.as_str())
                && n.attribute("fill")
                    .is_some_and(|f| fills.iter().any(|c| c == f))
        })
        .count()
}

fn texts<'a>(doc: &'a roxmltree::Document) -> Vec<&'a str> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(str::trim))
        .collect()
}

/// What the run did, from the nemesis's records, the trace and the final
/// states: what the pictures must show.
struct Expected {
    crashes: usize,
    fences: usize,
    elections: usize,
    final_hw: u64,
}

/// Checks the timeline: its fault bands against the faults expected.
fn check_timeline(svg: &str, e: &Expected) -> Result<(), String> {
    let doc = parse(svg);
    let crashes = bands(&doc, &["crash", "unclean crash"]);
    let fences = bands(&doc, &["fence"]);
    if (crashes, fences) != (e.crashes, e.fences) {
        return Err(format!(
            "{crashes} crash and {fences} fence bands for {} crashes and {} fences",
            e.crashes, e.fences
        ));
    }
    Ok(())
}

/// Checks the partition: a tick per election, the HW's last value.
fn check_partition(svg: &str, e: &Expected) -> Result<(), String> {
    let doc = parse(svg);
    let ticks = count(&doc, "polyline", "stroke", &svg_colour(colour::ELECTION));
    if ticks != e.elections {
        return Err(format!(
            "{ticks} election ticks for {} elections",
            e.elections
        ));
    }
    let hw = format!("HW {}", e.final_hw);
    if !texts(&doc).contains(&hw.as_str()) {
        return Err(format!("no `{hw}` at the HW line's end: {:?}", texts(&doc)));
    }
    Ok(())
}

#[test]
fn a_soak_runs_pictures_show_its_faults_elections_and_final_hw() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = soak_config(RuleSet::Today, 3, Duration::from_secs(1));
    // The faults the trace records (a pause is not traced).
    if let Some(n) = config.nemesis.as_mut() {
        n.faults = vec![
            NemesisFault::Crash { clean: true },
            NemesisFault::Crash { clean: false },
            NemesisFault::CrashLeader { clean: true },
            NemesisFault::Fence,
        ];
    }
    config.until.nemesis_faults = Some(4);
    config.settle_timeout = Duration::from_secs(60);
    let run = validated_run(config, dir.path()).unwrap();
    let trace_file = dir.path().join("trace.jsonl");
    let trace: Vec<TraceEntry> = read_trace_file(&trace_file)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    let report = &run.report;
    let leader = report.controller.leader.expect("a leader at the end");
    let expected = Expected {
        crashes: report.crashes.len(),
        fences: report.nemesis_faults.get("Fence").copied().unwrap_or(0) as usize,
        elections: trace
            .iter()
            .filter(|e| {
                e.actor == Actor::Controller
                    && matches!(e.event, Event::ControllerElectLeader { .. })
            })
            .count(),
        final_hw: report.final_states[leader as usize]
            .as_ref()
            .expect("the leader is up")
            .high_watermark,
    };
    assert!(
        expected.crashes > 0 && expected.elections > 1,
        "a run with faults"
    );

    let out = tempfile::tempdir().unwrap();
    let [timeline, partition] =
        pictures::of_validated_run(out.path(), "a soak", &trace_file, &run).unwrap();
    let timeline = std::fs::read_to_string(timeline).unwrap();
    let partition = std::fs::read_to_string(partition).unwrap();
    check_timeline(&timeline, &expected).unwrap();
    check_partition(&partition, &expected).unwrap();

    // Every acknowledged record is counted once, at its answer.
    let drawn = data::from_trace(&trace, "a soak", &[], &[]);
    let acked: u64 = drawn.timeline.acks.iter().map(|a| a.records).sum();
    assert_eq!(acked, report.acked.len() as u64, "records acknowledged");

    // Shown to fail: a fault dropped, an election dropped.
    let mut wrong = drawn.clone();
    wrong.timeline.faults.pop();
    let svg = pictures::timeline::svg(&wrong.timeline).unwrap();
    let err = check_timeline(&svg, &expected).unwrap_err();
    eprintln!("a fault dropped: {err}");
    let mut wrong = drawn;
    wrong.partition.elections.remove(0);
    let svg = pictures::partition::svg(&wrong.partition).unwrap();
    let err = check_partition(&svg, &expected).unwrap_err();
    eprintln!("an election dropped: {err}");
}

#[test]
fn a_loss_and_a_misfit_are_marked() {
    let t = data::Timeline {
        title: "marks".into(),
        end: 2.0,
        losses: vec![
            data::Mark {
                at: 0.5,
                label: "record 7 lost".into(),
            },
            data::Mark {
                at: 0.6,
                label: "record 8 lost".into(),
            },
        ],
        misfits: vec![data::Mark {
            at: 1.5,
            label: "event 40 does not fit".into(),
        }],
        ..data::Timeline::default()
    };
    let svg = pictures::timeline::svg(&t).unwrap();
    let doc = parse(&svg);
    assert_eq!(count(&doc, "circle", "fill", &svg_colour(colour::LOSS)), 2);
    assert_eq!(
        count(&doc, "polyline", "stroke", &svg_colour(colour::MISFIT)),
        1
    );
}

#[test]
fn bad_input_gives_an_error_or_an_empty_picture() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-trace.jsonl");
    let err = data::from_trace_file(&missing, "t", &[], &[]).unwrap_err();
    assert!(err.contains("no-such-trace.jsonl"), "{err}");

    let garbled = dir.path().join("garbled.jsonl");
    std::fs::write(&garbled, "not json\n").unwrap();
    let err = data::from_trace_file(&garbled, "t", &[], &[]).unwrap_err();
    assert!(err.contains("line 1"), "{err}");

    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let run = data::from_trace_file(&empty, "an empty trace", &[], &[]).unwrap();
    let [timeline, partition] = pictures::write(&dir.path().join("pictures"), &run).unwrap();
    let timeline = std::fs::read_to_string(timeline).unwrap();
    assert!(texts(&parse(&timeline)).contains(&"no write was acknowledged"));
    let partition = std::fs::read_to_string(partition).unwrap();
    assert!(texts(&parse(&partition)).contains(&"no HW traced"));
}
