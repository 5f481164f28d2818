//! The pictures of a real Kafka run (`highwater_conformance::pictures::kafka`),
//! drawn from the kept acks=1 run `tests/kafka_runs/acks1-stall-kill`
//! (validated from its files, no Java) by the soak's drawing code: the
//! timeline shades the stall-kill the summary records, marks the losses
//! the read-back shows (counted here from the files, not the picture's
//! data) and the broken property at its election; the partition ticks
//! each new leader epoch. The loss check fails on a run that lost
//! nothing, the band check on the same run with its fault left out; bad
//! input is an error, never a panic. Reads that vanished are marked at the
//! time they were read, from a reader's lines written beside a copy of the
//! kept run (a constructed reader: the acks=1 run kept no reader); the
//! vanished-read check fails on the run without them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use highwater_conformance::kafka_cluster::nemesis::FaultSpan;
use highwater_conformance::kafka_trace::{validate, KafkaValidation, Observations};
use highwater_conformance::pictures::kafka::{self, Sources};
use highwater_conformance::pictures::{self, colour, fault_colour, svg_colour};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kafka_runs")
        .join(name)
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_default()
}

/// A kept run validated from its files, as `kafka_trace` reads them.
fn validated(dir: &Path, acks_all: bool) -> KafkaValidation {
    let observations = Observations::read_kept(dir).unwrap_or_else(|e| panic!("{e}"));
    validate(&observations, "soak", acks_all).unwrap()
}

fn parse(svg: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(svg).expect("well-formed SVG")
}

fn count(doc: &roxmltree::Document, tag: &str, attr: &str, value: &str) -> usize {
    doc.descendants()
        .filter(|n| n.has_tag_name(tag) && n.attribute(attr) == Some(value))
        .count()
}

fn texts(doc: &roxmltree::Document) -> Vec<String> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect()
}

/// The upper panel's bands of a fault kind.
fn bands(doc: &roxmltree::Document, kind: &str) -> usize {
    let alpha = colour::BAND_ALPHA.to_string();
    doc.descendants()
        .filter(|n| {
            n.has_tag_name("rect")
                && n.attribute("opacity") == Some(alpha.as_str())
                && n.attribute("fill") == Some(svg_colour(fault_colour(kind)).as_str())
        })
        .count()
}

/// Values the producer saw acknowledged and the read-back lacks, from the
/// kept files (the producer's kept lines only).
fn lost_in_files(dir: &Path) -> usize {
    let on_log: HashSet<String> = read(dir, "consumed.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["value"].as_str().map(str::to_string))
        .collect();
    read(dir, "producer.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["outcome"] == "ack")
        .filter(|v| !on_log.contains(&v["value"].to_string()))
        .count()
}

/// The timeline shows `lost` acknowledged records lost (a marker and the
/// count).
fn check_losses(svg: &str, lost: usize) -> Result<(), String> {
    let doc = parse(svg);
    let markers = count(&doc, "circle", "fill", &svg_colour(colour::LOSS));
    let said = format!("● {lost} acknowledged record(s) lost, at their ack");
    if markers == 0 || !texts(&doc).contains(&said) {
        return Err(format!("{markers} loss markers, texts {:?}", texts(&doc)));
    }
    Ok(())
}

/// The timeline shows `vanished` reads gone from the log (a marker and
/// the count).
fn check_vanished(svg: &str, vanished: usize) -> Result<(), String> {
    let doc = parse(svg);
    let markers = count(&doc, "circle", "fill", &svg_colour(colour::VANISHED));
    let said = format!("● {vanished} record(s) read, then gone from the log, at their read");
    if markers == 0 || !texts(&doc).contains(&said) {
        return Err(format!(
            "{markers} vanished-read markers, texts {:?}",
            texts(&doc)
        ));
    }
    Ok(())
}

/// The timeline shades one band per fault of `kind`.
fn check_bands(svg: &str, kind: &str, expected: usize) -> Result<(), String> {
    let n = bands(&parse(svg), kind);
    if n != expected {
        return Err(format!("{n} {kind} bands for {expected} faults"));
    }
    Ok(())
}

#[test]
fn an_acks1_kafka_runs_pictures_show_its_fault_losses_and_elections() {
    let dir = fixture("acks1-stall-kill");
    let v = validated(&dir, false);
    let out = tempfile::tempdir().unwrap();
    let [timeline, partition] =
        kafka::of_run_dir(out.path(), "acks1-stall-kill", &dir, Some(&v), false).unwrap();
    let timeline = std::fs::read_to_string(timeline).unwrap();
    let partition = std::fs::read_to_string(partition).unwrap();

    // The summary's one fault, a stall-kill of the leader.
    let faults = read(&dir, "summary.txt")
        .lines()
        .filter(|l| l.trim_start().starts_with("fault "))
        .count();
    assert_eq!(faults, 1);
    check_bands(&timeline, "stall-kill", faults).unwrap();
    let lost = lost_in_files(&dir);
    assert!(lost > 0, "the kept acks=1 run lost records");
    check_losses(&timeline, lost).unwrap();
    // The property broken at the election, marked.
    let doc = parse(&timeline);
    assert_eq!(v.broken().len(), 1);
    assert_eq!(
        count(&doc, "polyline", "stroke", &svg_colour(colour::BROKEN)),
        1
    );
    assert!(v.misfit().is_none(), "acks=1's loss is no misfit");
    assert_eq!(
        count(&doc, "polyline", "stroke", &svg_colour(colour::MISFIT)),
        0
    );

    // A tick per new leader epoch of the registrations; the leader changed.
    let regs = &v.controller.registrations;
    let epochs = regs
        .windows(2)
        .filter(|w| w[0].leader_epoch != w[1].leader_epoch)
        .count();
    assert!(epochs >= 1 && regs.first().unwrap().leader != regs[1].leader);
    let doc = parse(&partition);
    assert_eq!(
        count(&doc, "polyline", "stroke", &svg_colour(colour::ELECTION)),
        epochs
    );
    assert!(texts(&doc).contains(&format!("{epochs} election(s), each a violet tick")));

    // Shown to fail: the same run with its fault left out has no band.
    let producer: Vec<String> = read(&dir, "producer.jsonl")
        .lines()
        .map(str::to_string)
        .collect();
    let no_fault = kafka::from_sources(&Sources {
        title: "no fault".into(),
        producer: &producer,
        faults: &[],
        faults_note: None,
        validation: Some(&v),
        lost: None,
        vanished: None,
        acks_all: false,
    })
    .unwrap();
    let svg = pictures::timeline::svg(&no_fault.timeline).unwrap();
    eprintln!(
        "the fault left out: {}",
        check_bands(&svg, "stall-kill", faults).unwrap_err()
    );
}

#[test]
fn a_kafka_run_without_loss_has_no_loss_marker() {
    let dir = fixture("today-clean-restart-kill");
    let v = validated(&dir, true);
    let producer: Vec<String> = read(&dir, "producer.jsonl")
        .lines()
        .map(str::to_string)
        .collect();
    // Its read-back lost nothing (tests/kafka_runs/README.md).
    let run = kafka::from_sources(&Sources {
        title: "today".into(),
        producer: &producer,
        faults: &[],
        faults_note: None,
        validation: Some(&v),
        lost: Some(&[]),
        vanished: None,
        acks_all: true,
    })
    .unwrap();
    let svg = pictures::timeline::svg(&run.timeline).unwrap();
    let err = check_losses(&svg, 1).unwrap_err();
    eprintln!("no loss: {err}");
    assert!(err.starts_with("0 loss markers"), "{err}");
    // acks=all: each acknowledgement raises the HW past its offset.
    let last = producer
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["offset"].as_u64())
        .max()
        .unwrap();
    assert!(run.partition.hw.iter().any(|&(_, hw)| hw > last));
}

#[test]
fn bad_kafka_input_is_an_error() {
    let out = tempfile::tempdir().unwrap();
    let missing = out.path().join("no-such-run");
    let err = kafka::of_run_dir(out.path(), "t", &missing, None, true).unwrap_err();
    assert!(err.contains("producer.jsonl"), "{err}");

    let run = out.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("producer.jsonl"), "{\"done\":true,\"sent\":0}\n").unwrap();
    std::fs::write(run.join("faults.jsonl"), "not json\n").unwrap();
    let err = kafka::of_run_dir(out.path(), "t", &run, None, true).unwrap_err();
    assert!(err.contains("faults.jsonl line 1"), "{err}");

    // A fault ending before it began, a producer with nothing: drawn.
    let span = FaultSpan {
        kind: "kill-9".into(),
        broker: 2,
        began_ms: 5_000,
        ended_ms: 1_000,
        kills: Vec::new(),
    };
    std::fs::write(run.join("faults.jsonl"), span.to_line() + "\n").unwrap();
    let [timeline, _] = kafka::of_run_dir(&out.path().join("p"), "t", &run, None, true).unwrap();
    let timeline = std::fs::read_to_string(timeline).unwrap();
    let doc = parse(&timeline);
    assert!(texts(&doc).contains(&"no write was acknowledged".to_string()));
    assert_eq!(bands(&doc, "kill-9"), 1);
}

/// A reader's lines beside a copy of the acks=1 run: two reads the log
/// read back holds at their offsets, one read of a value it holds at
/// another offset and one of a value it holds nowhere (both vanished),
/// read twice. Both are marked once, counted in the title; without the
/// reader's lines the check fails.
#[test]
fn a_kafka_runs_vanished_reads_are_marked_at_their_read() {
    let kept = fixture("acks1-stall-kill");
    let dir = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(&kept).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dir.path().join(f.file_name().unwrap())).unwrap();
    }
    let first_ack = read(&kept, "producer.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["ms"].as_u64())
        .min()
        .unwrap();
    let line = |session: u64, offset: u64, value: &str, after: u64| {
        format!(
            "{{\"session\":{session},\"offset\":{offset},\"value\":\"{value}\",\"ms\":{}}}",
            first_ack + after
        )
    };
    let reads = [
        line(0, 0, "0", 100),
        line(0, 10, "10", 200),
        line(0, 20, "10", 300),
        line(0, 30, "999999", 400),
        line(1, 20, "10", 500),
        r#"{"done":true}"#.to_string(),
    ];
    let out = tempfile::tempdir().unwrap();
    let without = kafka::of_run_dir(out.path(), "no reader", dir.path(), None, false).unwrap();
    let err = check_vanished(&std::fs::read_to_string(&without[0]).unwrap(), 2).unwrap_err();
    eprintln!("no reader: {err}");
    assert!(err.starts_with("0 vanished-read markers"), "{err}");

    std::fs::write(dir.path().join("reads.jsonl"), reads.join("\n") + "\n").unwrap();
    let [timeline, _] = kafka::of_run_dir(out.path(), "reader", dir.path(), None, false).unwrap();
    let timeline = std::fs::read_to_string(timeline).unwrap();
    check_vanished(&timeline, 2).unwrap();
    assert!(
        texts(&parse(&timeline))
            .iter()
            .any(|t| t.contains(", 2 read then vanished,")),
        "the title counts them: {:?}",
        texts(&parse(&timeline))
    );
}
