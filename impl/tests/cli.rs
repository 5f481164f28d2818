//! The `highwater-dump-log` tool, run as a user would.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use highwater::storage::{LogDir, TopicPartition};

fn tool(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_highwater-dump-log"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn make(dir: &Path) -> std::path::PathBuf {
    let tp = TopicPartition::new("demo", 0).unwrap();
    let ld = LogDir::open(dir).unwrap();
    let (mut log, _) = ld.open_log(&tp, small_config()).unwrap();
    fill(&mut log, 40);
    let leo = log.log_end_offset();
    log.set_high_watermark(leo).unwrap();
    ld.close(vec![(tp, log)]).unwrap();
    dir.join("demo-0")
}

#[test]
fn lists_dumps_and_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let part = make(tmp.path());
    let p = part.to_str().unwrap();
    let (code, out, _) = tool(&["segments", p]);
    assert_eq!(code, 0);
    assert!(out.contains("00000000000000000000.log"));
    let (code, out, _) = tool(&["dump", p, "--records", "--print-data", "--max-batches", "3"]);
    assert_eq!(code, 0);
    assert_eq!(out.matches("baseOffset:").count(), 3);
    assert!(out.contains("payload: value-0-0-"));
    let (code, out, _) = tool(&["dump", &format!("{p}/00000000000000000000.index")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("position:"));
    let (code, out, _) = tool(&["verify", p, "--index-interval-bytes", "256"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("verification passed"));
    assert!(!out.contains("differs"), "{out}");
}

#[test]
fn finds_corruption_and_reports_what_recovery_would_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let part = make(tmp.path());
    let p = part.to_str().unwrap();
    // Corrupt the first batch of the last (always recovered) segment.
    let (_, out, _) = tool(&["segments", p]);
    let last = out
        .lines()
        .last()
        .unwrap()
        .split_whitespace()
        .last()
        .unwrap()
        .to_owned();
    let seg = Path::new(&last).to_path_buf();
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[40] ^= 0x20;
    std::fs::write(&seg, &bytes).unwrap();
    let (code, out, _) = tool(&["verify", p]);
    assert_eq!(code, 1);
    assert!(out.contains("CRC-32C mismatch"), "{out}");
    // The recovery point checkpointed at close covers everything, so
    // recovery refuses to cut.
    let (code, out, _) = tool(&["recover", p]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("REFUSE") && out.contains("below the recovery point"),
        "{out}"
    );
    // Below an older recovery point the cut is allowed, and reported.
    let base: u64 = seg.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    let (code, out, _) = tool(&["recover", p, "--recovery-point", &base.to_string()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("WOULD CUT") && out.contains("truncated"),
        "{out}"
    );
    // The original is untouched.
    assert_eq!(std::fs::read(&seg).unwrap(), bytes);
    let (code, out, _) = tool(&[
        "recover",
        &tmp.path().join("demo-0").to_string_lossy(),
        "--clean",
    ]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn usage_and_io_errors() {
    let (code, _, err) = tool(&["verify", "/nonexistent/t-0"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/t-0"));
    let (code, _, _) = tool(&["frobnicate"]);
    assert_eq!(code, 2);
    let (code, out, _) = tool(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("recover") && out.contains("Exit status"));
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("12.log");
    std::fs::write(&bad, b"").unwrap();
    let (code, _, err) = tool(&["dump", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("20 digits"));
}

/// Finding 8 of issue 10: LogAppendTime records are labelled so, an index
/// problem names the index file, and `recover` reports the HW the
/// replication-offset-checkpoint holds.
#[test]
fn labels_timestamp_types_names_index_files_and_reads_the_hw() {
    use highwater::storage::batch::{encode_batch, ProducerInfo};
    use highwater::storage::Record;
    let tmp = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("lat", 0).unwrap();
    let ld = LogDir::open(tmp.path()).unwrap();
    let (mut log, _) = ld.open_log(&tp, small_config()).unwrap();
    let mut b = Vec::new();
    encode_batch(
        &mut b,
        0,
        0,
        ProducerInfo::NONE,
        &[Record::new(5, "a"), Record::new(7, "b")],
    )
    .unwrap();
    b[22] |= 0x08; // LogAppendTime
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    log.append_batch(&mut b, 0).unwrap();
    log.append(&[Record::new(9, "c")], 0).unwrap();
    fill(&mut log, 30);
    log.set_high_watermark(1).unwrap();
    ld.close(vec![(tp, log)]).unwrap();
    let part = tmp.path().join("lat-0");
    let p = part.to_str().unwrap();
    let (code, out, _) = tool(&["dump", p, "--records", "--max-batches", "2"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("| offset: 0 LogAppendTime: 7 "), "{out}");
    assert!(out.contains("| offset: 1 LogAppendTime: 7 "), "{out}");
    assert!(out.contains("| offset: 2 CreateTime: 9 "), "{out}");

    let (code, out, _) = tool(&["recover", p]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("high watermark 1"), "{out}");

    let index = part.join("00000000000000000000.index");
    let mut bytes = std::fs::read(&index).unwrap();
    assert!(bytes.len() >= 8);
    bytes[4] ^= 0x40; // the first entry's position
    std::fs::write(&index, &bytes).unwrap();
    let (code, out, _) = tool(&["verify", p, "--index-interval-bytes", "256"]);
    assert_eq!(code, 1, "{out}");
    let problem = out.lines().find(|l| l.contains("PROBLEM")).unwrap();
    assert!(
        problem.contains("00000000000000000000.index is invalid"),
        "{problem}"
    );
}

/// Finding 7 of issue 10: the dump tool decodes compressed batches. A log
/// written with each `compression.type` dumps every record with its
/// payload (none reported as a decoding problem), names the codec on each
/// batch, and verifies clean.
#[test]
fn dumps_and_verifies_compressed_batches() {
    use highwater::storage::{Codec, CompressionType};
    for codec in Codec::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("z", 0).unwrap();
        let ld = LogDir::open(tmp.path()).unwrap();
        let config = highwater::storage::LogConfig {
            compression_type: CompressionType::Codec(codec),
            ..small_config()
        };
        let (mut log, _) = ld.open_log(&tp, config).unwrap();
        let expected = fill(&mut log, 40);
        let leo = log.log_end_offset();
        log.set_high_watermark(leo).unwrap();
        ld.close(vec![(tp, log)]).unwrap();
        let part = tmp.path().join("z-0");
        let p = part.to_str().unwrap();
        let (code, out, err) = tool(&["dump", p, "--records", "--print-data"]);
        assert_eq!(code, 0, "{codec}: {out}{err}");
        let batches = out.matches("baseOffset:").count();
        assert!(batches > 0, "{codec}: {out}");
        assert_eq!(
            out.matches(&format!("compresscodec: {}", codec.name()))
                .count(),
            batches,
            "{codec}: {out}"
        );
        for (offset, r) in &expected {
            let value = String::from_utf8_lossy(r.value.as_deref().unwrap());
            let line = format!("| offset: {offset} CreateTime: {} ", r.timestamp);
            let printed = out
                .lines()
                .find(|l| l.starts_with(&line))
                .unwrap_or_else(|| panic!("{codec}: no record {offset}:\n{out}"));
            assert!(
                printed.ends_with(&format!(" payload: {value}")),
                "{codec}: {printed}"
            );
        }
        let (code, out, _) = tool(&["verify", p, "--index-interval-bytes", "256"]);
        assert_eq!(code, 0, "{codec}: {out}");
        assert!(out.contains("verification passed"), "{codec}: {out}");
    }
}

/// Item 6 of issue 13: missing and empty directories are errors, never an
/// empty success; a log directory is understood (every partition, its
/// checkpoints); Kafka's flags work; checkpoint files are shown; replicas
/// are shown side by side.
#[test]
fn directories_kafka_flags_checkpoints_and_replicas() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    for args in [
        vec!["verify", missing.to_str().unwrap()],
        vec!["dump", missing.to_str().unwrap()],
        vec!["segments", missing.to_str().unwrap()],
    ] {
        let (code, out, err) = tool(&args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(err.contains("no such file or directory"), "{err}");
    }
    let empty = tmp.path().join("empty-0");
    std::fs::create_dir(&empty).unwrap();
    for cmd in ["verify", "dump", "checkpoints"] {
        let (code, out, err) = tool(&[cmd, empty.to_str().unwrap()]);
        assert_eq!(code, 2, "{cmd}: {out}");
        assert!(err.contains("nothing to inspect"), "{err}");
        assert!(!out.contains("passed"), "{out}");
    }
    let (code, _, err) = tool(&[]);
    assert_eq!(code, 2);
    assert!(err.contains("--files"), "{err}");

    // A broker's log directory: every partition, and its checkpoints.
    let broker = tmp.path().join("broker");
    let part = make(&broker);
    let b = broker.to_str().unwrap();
    let (code, out, _) = tool(&["verify", b, "--index-interval-bytes", "256"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("== ") && out.contains("verification passed: 40 batches"),
        "{out}"
    );
    let (code, out, _) = tool(&["checkpoints", b]);
    assert_eq!(code, 0, "{out}");
    for want in [
        "replication-offset-checkpoint: demo-0 high watermark",
        "recovery-point-offset-checkpoint: demo-0 recovery point",
        "log-start-offset-checkpoint: demo-0 log start offset 0",
        ".kafka_cleanshutdown: present",
        "demo-0/leader-epoch-checkpoint: 0@0 1@",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    let (code, out, _) = tool(&["dump", &format!("{b}/replication-offset-checkpoint")]);
    assert_eq!(code, 0);
    assert!(out.contains("demo 0 "), "{out}");

    // Kafka's kafka-dump-log flags.
    let seg = part.join("00000000000000000000.log");
    let (code, out, _) = tool(&[
        "--files",
        seg.to_str().unwrap(),
        "--deep-iteration",
        "--print-data-log",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("| offset: 0 CreateTime:") && out.contains("payload: value-0-0"),
        "{out}"
    );
    let (code, out, _) = tool(&["dump", "--files", seg.to_str().unwrap(), "--deep-iteration"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("| offset: 0 ") && !out.contains("payload"),
        "{out}"
    );

    // Two replicas side by side: the one that lost its last batch differs.
    let other = tmp.path().join("other");
    let part2 = make(&other);
    let last = std::fs::read_dir(&part2)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .unwrap();
    std::fs::remove_file(&last).unwrap();
    let (code, out, _) = tool(&["compare", b, other.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let header = out.lines().next().unwrap();
    assert!(
        header.contains("broker") && header.contains("other"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("log end offset") && l.ends_with('*')),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("offset 0 ") && !l.ends_with('*')),
        "{out}"
    );
}

/// Finding 5 of issue 10: verify checks epochs across the whole log: an
/// epoch below -1 and a leader-epoch-checkpoint that disagrees with the
/// batches are problems.
#[test]
fn verify_checks_epochs_across_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let part = make(tmp.path());
    let p = part.to_str().unwrap();
    let cp = part.join("leader-epoch-checkpoint");
    let good = std::fs::read_to_string(&cp).unwrap();
    std::fs::write(&cp, good.replacen("1 ", "2 ", 1)).unwrap();
    let (code, out, _) = tool(&["verify", p, "--index-interval-bytes", "256"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("leader-epoch-checkpoint: PROBLEM: says"),
        "{out}"
    );
    std::fs::write(&cp, &good).unwrap();
    let seg = part.join("00000000000000000000.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[12..16].copy_from_slice(&(-3i32).to_be_bytes());
    std::fs::write(&seg, &bytes).unwrap();
    let (code, out, _) = tool(&["verify", p, "--index-interval-bytes", "256"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("has leader epoch -3 (below -1)"), "{out}");
}

/// Unpacks the gzipped fixture directory `impl/tests/fixtures/<name>` into
/// `to`, file by file.
fn unpack_fixture(name: &str, to: &Path) {
    use std::io::Read;
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    fn walk(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), &to.join(&name));
            } else if let Some(stem) = name.strip_suffix(".gz") {
                let mut bytes = Vec::new();
                flate2::read::GzDecoder::new(std::fs::File::open(e.path()).unwrap())
                    .read_to_end(&mut bytes)
                    .unwrap();
                std::fs::write(to.join(stem), bytes).unwrap();
            }
        }
    }
    walk(&from, to);
}

/// Issue 24, item 5: `verify` exited 1 on every directory Kafka closed
/// ("entry 2 (0, 0) does not follow (9, 1098)"), because Kafka leaves the
/// active segment's indexes preallocated. The zero tail is recognised and
/// named; a damaged entry, or a non-zero byte in the tail, still fails.
#[test]
fn verify_passes_a_directory_kafka_closed_and_fails_only_on_damage() {
    let tmp = tempfile::tempdir().unwrap();
    unpack_fixture("kafka-closed", tmp.path());
    let part = tmp.path().join("interop-0");
    let p = part.to_str().unwrap();
    let index = part.join("00000000000000000055.index");
    assert_eq!(std::fs::metadata(&index).unwrap().len(), 10 << 20);
    let pristine = std::fs::read(&index).unwrap();
    let (code, out, _) = tool(&["verify", p]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("verification passed: 19 batches"), "{out}");
    for f in [
        "00000000000000000055.index",
        "00000000000000000055.timeindex",
    ] {
        let line = out.lines().find(|l| l.contains(f)).unwrap();
        assert!(line.contains("preallocated empty slots"), "{line}");
    }
    // Loading rebuilds the active segment's indexes, as Kafka's recovery
    // does, and says it is for the preallocated tail, not damage.
    let (_, report) = highwater::storage::Log::open(
        &part,
        small_config(),
        highwater::storage::LoadParams {
            recovery_point: 65,
            high_watermark: 62,
            clean_shutdown: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(report.repairs.len(), 1, "{report}");
    assert!(
        report.repairs[0]
            .contains("00000000000000000055.index: 1310718 preallocated zero-filled slots"),
        "{report}"
    );
    assert_eq!(report.segments_recovered, vec![55], "{report}");

    // Kafka's file back, damaged.
    for (what, at) in [
        ("a real entry's position", 4),
        ("a byte of the zero tail", 4096),
    ] {
        let mut bytes = pristine.clone();
        bytes[at] ^= 0x10;
        std::fs::write(&index, &bytes).unwrap();
        let (code, out, _) = tool(&["verify", p]);
        assert_eq!(code, 1, "{what}: {out}");
        let problem = out.lines().find(|l| l.contains("PROBLEM")).unwrap();
        assert!(
            problem.contains("00000000000000000055.index is invalid"),
            "{what}: {problem}"
        );
    }
}

/// Issue 24, item 4: `recover` exited 2 on a garbled recovery-point
/// checkpoint (`line 1: unrecognised version "garbage"`) although the
/// library opens the same directory with a repair note; and on one that
/// cannot be read at all. The tool now reads the checkpoints as the
/// library does and prints the library's note.
#[test]
fn recover_agrees_with_the_library_on_bad_broker_checkpoints() {
    for damage in ["garbled", "a directory"] {
        let tmp = tempfile::tempdir().unwrap();
        let part = make(tmp.path());
        let p = part.to_str().unwrap();
        let cp = tmp.path().join("recovery-point-offset-checkpoint");
        std::fs::remove_file(&cp).unwrap();
        std::fs::remove_file(tmp.path().join(".kafka_cleanshutdown")).unwrap();
        if damage == "garbled" {
            std::fs::write(&cp, "garbage\n").unwrap();
        } else {
            std::fs::create_dir(&cp).unwrap();
        }
        let (code, out, err) = tool(&["recover", p]);
        assert_eq!(code, 0, "{damage}: {out}{err}");
        let library = LogDir::open(tmp.path()).unwrap();
        assert_eq!(library.repairs().len(), 1, "{damage}");
        let note = format!("note: {}", library.repairs()[0]);
        assert!(out.contains(&note), "{damage}: {out} lacks {note}");
        // Recovered from offset 0, as the library does, cutting nothing.
        assert!(out.contains("recovery point 0"), "{damage}: {out}");
        assert!(
            out.contains("recovery would cut nothing"),
            "{damage}: {out}"
        );
    }
}
