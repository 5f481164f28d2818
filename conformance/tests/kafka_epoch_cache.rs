//! The leader epoch cache held against Kafka's own: random sequences of
//! assign / truncateFromEnd / truncateFromStart / endOffsetFor run on Kafka
//! 4.4's `LeaderEpochFileCache` (through `conformance/kafka/`'s
//! `epoch-cache-cases`, which prints every operation, Kafka's answer, the
//! cache and its `leader-epoch-checkpoint` file) and on ours, compared after
//! every operation:
//!
//! - the implementation's `storage::EpochCache`: entries, answers, and the
//!   checkpoint file byte for byte (the cache is written when an operation
//!   changes it, as `storage::Log` does);
//! - the model's `truncation::assign` and `end_offset_for` on every
//!   sequence: entries and answers. The model has no truncation of a cache
//!   (it rebuilds caches from logs), so on the `o` sequences the harness cuts
//!   the model's cache as Kafka's `truncateFromEnd`/`truncateFromStart`
//!   define it, for the later operations to run on the same cache; on the
//!   `l` sequences (a log of at most four records whose epochs rise, as under
//!   KIP-320) the model's `cache_of(log)` must equal Kafka's cache after
//!   every append and truncation of the log.
//!
//! The checkpoint files live on /dev/shm when it exists (both sides fsync
//! every write). [`epoch_caches_agree_with_kafka`] runs 100,000 sequences
//! (seed 0; 20,000 without the long tier) and prints the counts and the time;
//! [`a_perturbed_rule_is_reported`] shows the harness noticing a rule of
//! ours broken on purpose.

mod kafka;
#[path = "../../testkit/long_tier.rs"]
mod long_tier;

use std::fs;
use std::path::Path;
use std::time::Instant;

use highwater::storage::EpochCache;
use highwater_model::state::{Compact, Entry, Log};
use highwater_model::truncation::{assign, cache_of, end_offset_for, EpochCache as ModelCache};
use kafka::{announce, kafka};

/// A rule of ours broken on purpose by the harness.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Perturb {
    None,
    /// endOffsetFor below every known epoch answers UNDEFINED (what Kafka's
    /// javadoc describes for the upgrade era) instead of the requested epoch
    /// and the first start offset (what Kafka's code does).
    BelowFirstEpochUndefined,
}

/// One line of `epoch-cache-cases`.
struct Op<'a> {
    seq: u64,
    log_like: bool,
    op: u8,
    a: i64,
    b: i64,
    answer: &'a str,
    entries: &'a str,
    file: &'a str,
}

fn parse(line: &str) -> Op<'_> {
    let f: Vec<&str> = line.split(' ').collect();
    assert_eq!(f.len(), 8, "an operation line: {line:?}");
    Op {
        seq: f[0].parse().expect("sequence"),
        log_like: f[1] == "l",
        op: f[2].as_bytes()[0],
        a: f[3].parse().expect("argument"),
        b: f[4].parse().expect("argument"),
        answer: f[5],
        entries: f[6],
        file: f[7],
    }
}

fn entries_text(entries: impl Iterator<Item = (i64, i64)>) -> String {
    let v: Vec<String> = entries.map(|(e, o)| format!("{e}:{o}")).collect();
    if v.is_empty() {
        "-".to_string()
    } else {
        v.join(",")
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Kafka's `truncateFromEnd` and `truncateFromStart` on the model's cache.
fn model_truncate(cache: &mut ModelCache, op: u8, offset: i64) {
    match op {
        b'E' => cache.retain(|&(_, s)| i64::from(s) < offset),
        b'S' => {
            let removed = cache
                .iter()
                .take_while(|&&(_, s)| i64::from(s) <= offset)
                .count();
            if removed > 0 {
                let epoch = cache[removed - 1].0;
                cache.drain(..removed);
                cache.insert(0, (epoch, offset as u8));
            }
        }
        _ => unreachable!(),
    }
}

struct Report {
    sequences: u64,
    operations: u64,
    /// Operations after which Kafka's checkpoint file exists, empty, and
    /// ours does not exist yet (an explained difference).
    empty_file_before_first_write: u64,
    disagreements: Vec<String>,
    disagreeing: u64,
    seconds: f64,
}

fn run(test: &str, sequences: u32, perturb: Perturb) -> Option<Report> {
    let kafka = kafka(test)?;
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("temporary directory");
    let (java_dir, our_dir) = (base.path().join("kafka"), base.path().join("ours"));
    fs::create_dir_all(&our_dir).expect("our directory");
    let start = Instant::now();
    let mut lines = kafka.stream(&[
        "epoch-cache-cases",
        "--dir",
        java_dir.to_str().expect("utf-8 path"),
        "--sequences",
        &sequences.to_string(),
        "--seed",
        "0",
    ]);
    let mut report = Report {
        sequences: 0,
        operations: 0,
        empty_file_before_first_write: 0,
        disagreements: Vec::new(),
        disagreeing: 0,
        seconds: 0.0,
    };
    let mut buf = Vec::new();
    let mut current = u64::MAX;
    let mut ours = EpochCache::new(&our_dir, Vec::new());
    let mut model: ModelCache = Vec::new();
    let mut log = Log::default();
    while lines.next_line(&mut buf) {
        let line = std::str::from_utf8(&buf).expect("ASCII");
        let op = parse(line);
        if op.seq != current {
            current = op.seq;
            report.sequences += 1;
            let _ = fs::remove_file(ours.path());
            ours = EpochCache::new(&our_dir, Vec::new());
            model.clear();
            log = Log::default();
        }
        report.operations += 1;
        let mut found: Vec<String> = Vec::new();

        // The implementation.
        let answer = match op.op {
            b'A' => {
                ours.assign(op.a as i32, op.b as u64).expect("write");
                "-".to_string()
            }
            b'E' | b'S' => {
                let offset = op.a as u64;
                let changed = if op.op == b'E' {
                    ours.truncate_from_end(offset)
                } else {
                    ours.truncate_from_start(offset)
                };
                if changed {
                    ours.write().expect("write");
                }
                "-".to_string()
            }
            b'Q' => {
                let mut r = ours.end_offset_for(op.a as i32, op.b as u64);
                let first = ours.entries().first().map(|e| e.epoch);
                if perturb == Perturb::BelowFirstEpochUndefined
                    && first.is_some_and(|f| (op.a as i32) < f)
                {
                    r = None;
                }
                r.map_or("-1:-1".to_string(), |r| {
                    format!("{}:{}", r.epoch, r.end_offset)
                })
            }
            o => panic!("unknown operation {}", o as char),
        };
        if answer != op.answer {
            found.push(format!("implementation answered {answer}"));
        }
        let entries = entries_text(
            ours.entries()
                .iter()
                .map(|e| (i64::from(e.epoch), e.start_offset as i64)),
        );
        if entries != op.entries {
            found.push(format!("implementation holds {entries}"));
        }
        let file = fs::read(ours.path()).map_or("-".to_string(), |b| hex(&b));
        if file == "-" && op.file.is_empty() {
            // Explained (spec/differences.md): Kafka's CheckpointFile creates
            // the file, empty, when the cache is opened; ours is created by
            // the first write. Both read back as no entries.
            report.empty_file_before_first_write += 1;
        } else if file != op.file {
            found.push(format!("implementation's checkpoint is {file}"));
        }

        // The model.
        match op.op {
            b'A' => assign(&mut model, op.a as u8, op.b as u8),
            b'E' | b'S' => model_truncate(&mut model, op.op, op.a),
            _ => {}
        }
        if op.op == b'Q' && op.a >= 0 {
            let mut r = end_offset_for(&model, op.a as u8, op.b as u8);
            if perturb == Perturb::BelowFirstEpochUndefined
                && model.first().is_some_and(|&(f, _)| (op.a as u8) < f)
            {
                r = None;
            }
            let answer = r.map_or("-1:-1".to_string(), |(e, o)| format!("{e}:{o}"));
            if answer != op.answer {
                found.push(format!("model answered {answer}"));
            }
        }
        let model_entries = entries_text(model.iter().map(|&(e, s)| (i64::from(e), i64::from(s))));
        if model_entries != op.entries {
            found.push(format!("model holds {model_entries}"));
        }
        if op.log_like {
            match op.op {
                b'A' => {
                    assert_eq!(op.b, i64::from(log.leo()), "an append at the log end");
                    log.append(Entry {
                        id: log.leo(),
                        epoch: op.a as u8,
                    });
                }
                b'E' => log.truncate(op.a.min(255) as u8),
                _ => {}
            }
            let of_log = cache_of::<Compact>(&log, log.leo());
            let text = entries_text(of_log.iter().map(|&(e, s)| (i64::from(e), i64::from(s))));
            if text != op.entries {
                found.push(format!("model's cache_of(log) is {text}"));
            }
        }

        if !found.is_empty() {
            report.disagreeing += 1;
            if report.disagreements.len() < 20 {
                report
                    .disagreements
                    .push(format!("  {line}  <- Kafka; {}", found.join("; ")));
            }
        }
    }
    let stderr = lines.finish();
    report.seconds = start.elapsed().as_secs_f64();
    let printed = format!(
        "epoch-cache-cases: {} sequences, {} operations",
        report.sequences, report.operations
    );
    assert!(
        stderr.contains(&printed),
        "Kafka's side says {stderr:?}; ours read {} sequences, {} operations",
        report.sequences,
        report.operations
    );
    Some(report)
}

/// 100,000 sequences in the long tier, 20,000 in the README's test
/// command (about 10 s, against a minute).
#[test]
fn epoch_caches_agree_with_kafka() {
    let sequences: u32 = if long_tier::running() {
        100_000
    } else {
        20_000
    };
    let Some(r) = run(
        "kafka_epoch_cache::epoch_caches_agree_with_kafka",
        sequences,
        Perturb::None,
    ) else {
        return;
    };
    announce(&format!(
        "kafka_epoch_cache: {} sequences, {} operations (seed 0) in {:.1} s, {} disagreements; \
         explained: {} operations before any write, where Kafka's checkpoint file exists empty and ours does not yet",
        r.sequences, r.operations, r.seconds, r.disagreeing, r.empty_file_before_first_write
    ));
    assert_eq!(r.sequences, u64::from(sequences));
    assert_eq!(
        r.disagreeing,
        0,
        "our epoch caches disagree with Kafka's LeaderEpochFileCache (SEQ KIND OP A B ANSWER ENTRIES FILE, then ours):\n{}",
        r.disagreements.join("\n")
    );
}

/// The harness notices a broken lookup rule, in the implementation and in
/// the model.
#[test]
fn a_perturbed_rule_is_reported() {
    let Some(r) = run(
        "kafka_epoch_cache::a_perturbed_rule_is_reported",
        2_000,
        Perturb::BelowFirstEpochUndefined,
    ) else {
        return;
    };
    announce(&format!(
        "kafka_epoch_cache (perturbed lookup): {} operations, {} disagreements",
        r.operations, r.disagreeing
    ));
    let text = r.disagreements.join("\n");
    assert!(text.contains("implementation answered"), "{text}");
    assert!(text.contains("model answered"), "{text}");
}
