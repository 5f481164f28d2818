//! The two logs a replica runs on, [`MemoryLog`] and [`DiskLog`] (Kafka's
//! format on real files), have the same semantics: the same random
//! sequences of storage operations, crashes and restarts included, leave
//! them with the same state, the same records and the same answers. A log
//! broken on purpose (a crash that keeps what was never flushed) is told
//! apart, so the comparison can fail.

use highwater::replication::log::record_key;
use highwater::replication::{
    DiskLog, DiskLogConfig, LogEntry, LogState, MemoryLog, ReplicaLog, Result, StoppedImage,
    StorageDone, StorageOp,
};
use highwater::storage::batch::{encode_batch, ProducerInfo};
use highwater::storage::{LogConfig, Record, RecoveryReport, TopicPartition};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};

/// One step of a random run, relative to the log as it stands.
#[derive(Debug, Clone)]
enum Step {
    /// A leader's batch of `n` records; `bump` starts a new epoch.
    Leader {
        n: u8,
        bump: bool,
    },
    /// A follower's batches (`n` records each) and the leader's HW, `back`
    /// records below the new LEO (255: far above it); `bad` puts the first
    /// batch at a wrong offset.
    Follower {
        batches: u8,
        n: u8,
        bump: bool,
        bad: bool,
        back: u8,
        checkpoint: bool,
    },
    /// Truncation `back` records below the LEO (0: at the LEO, a no-op).
    Truncate {
        back: u8,
        checkpoint: bool,
    },
    /// The HW `back` records below the LEO; 255 asks one above it.
    Hw {
        back: u8,
        checkpoint: bool,
    },
    Flush,
    Checkpoints,
    Read {
        back: u8,
        max_bytes: u16,
    },
    Crash,
    Close,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (1u8..4, any::<bool>()).prop_map(|(n, bump)| Step::Leader { n, bump }),
        4 => (
            (1u8..3, 1u8..3, any::<bool>(), prop::bool::weighted(0.1)),
            (prop_oneof![0u8..4, Just(255u8)], any::<bool>()),
        )
            .prop_map(|((batches, n, bump, bad), (back, checkpoint))| Step::Follower {
                batches,
                n,
                bump,
                bad,
                back,
                checkpoint,
            }),
        3 => (0u8..6, any::<bool>())
            .prop_map(|(back, checkpoint)| Step::Truncate { back, checkpoint }),
        3 => (prop_oneof![0u8..5, Just(255u8)], any::<bool>())
            .prop_map(|(back, checkpoint)| Step::Hw { back, checkpoint }),
        2 => Just(Step::Flush),
        1 => Just(Step::Checkpoints),
        2 => (0u8..6, 1u16..600).prop_map(|(back, max_bytes)| Step::Read { back, max_bytes }),
        1 => Just(Step::Crash),
        1 => Just(Step::Close),
    ]
}

/// Records `first..first + n`, each keyed by its id, values of varied size.
fn records(first: u64, n: u8) -> Vec<Record> {
    (first..first + u64::from(n))
        .map(|id| Record {
            key: Some(record_key(id)),
            ..Record::new(id as i64, "v".repeat(10 + (id as usize * 37) % 90))
        })
        .collect()
}

/// The operation a step stands for on a log in `state`; `next_id` and
/// `epoch` move on as records are made. Epochs never go down: the file
/// log's recovery refuses a log whose epochs do (see the ignored test).
fn op(s: &Step, state: &LogState, next_id: &mut u64, epoch: &mut i32) -> StorageOp {
    let leo = state.log_end_offset;
    let below = |back: u8| leo.saturating_sub(u64::from(back));
    match *s {
        Step::Leader { n, bump } => {
            *epoch += i32::from(bump);
            let rs = records(*next_id, n);
            *next_id += u64::from(n);
            StorageOp::AppendAsLeader {
                records: rs,
                epoch: *epoch,
            }
        }
        Step::Follower {
            batches,
            n,
            bump,
            bad,
            back,
            checkpoint,
        } => {
            *epoch += i32::from(bump);
            let mut bytes = Vec::new();
            let mut base = leo + u64::from(bad);
            for _ in 0..batches {
                let rs = records(*next_id, n);
                *next_id += u64::from(n);
                encode_batch(&mut bytes, base, *epoch, ProducerInfo::NONE, &rs).unwrap();
                base += u64::from(n);
            }
            let high_watermark = if back == 255 {
                u64::MAX
            } else {
                base.saturating_sub(u64::from(back))
            };
            StorageOp::AppendAsFollower {
                batches: bytes,
                high_watermark,
                checkpoint,
            }
        }
        Step::Truncate { back, checkpoint } => StorageOp::Truncate {
            offset: if back == 0 { leo + 1 } else { below(back) },
            checkpoint,
        },
        Step::Hw { back, checkpoint } => StorageOp::SetHighWatermark {
            hw: if back == 255 { leo + 1 } else { below(back) },
            checkpoint,
        },
        Step::Flush => StorageOp::Flush,
        Step::Checkpoints => StorageOp::WriteCheckpoints,
        Step::Read { back, max_bytes } => StorageOp::Read {
            from: below(back),
            max_bytes: usize::from(max_bytes),
        },
        Step::Crash | Step::Close => unreachable!("not an operation"),
    }
}

fn report_offsets(r: &RecoveryReport) -> (bool, u64, u64, u64, u64) {
    (
        r.clean_shutdown,
        r.log_start_offset,
        r.log_end_offset,
        r.recovery_point,
        r.high_watermark,
    )
}

fn summary<T>(r: &Result<T>) -> &'static str {
    if r.is_ok() {
        "ok"
    } else {
        "error"
    }
}

/// Runs `steps` on both logs; the first difference, described.
fn compare<A: ReplicaLog, B: ReplicaLog>(
    mut a: A,
    mut b: B,
    steps: &[Step],
) -> std::result::Result<(), String>
where
    A::Stopped: std::fmt::Debug,
{
    let (mut next_id, mut epoch) = (0u64, 0i32);
    for (i, s) in steps.iter().enumerate() {
        let at = |what: String| format!("step {i} ({s:?}): {what}");
        match s {
            Step::Crash | Step::Close => {
                let clean = matches!(s, Step::Close);
                let stop = |clean, l: A| if clean { l.close() } else { l.crash() };
                let sa = stop(clean, a).map_err(|e| at(e.to_string()))?;
                let sb =
                    if clean { b.close() } else { b.crash() }.map_err(|e| at(e.to_string()))?;
                let image: Option<StoppedImage> = A::read_stopped(&sa)
                    .transpose()
                    .map_err(|e| at(e.to_string()))?;
                let (ra, rep_a) = A::restart(&sa).map_err(|e| at(e.to_string()))?;
                let (rb, rep_b) = B::restart(&sb).map_err(|e| at(e.to_string()))?;
                if report_offsets(&rep_a) != report_offsets(&rep_b) {
                    return Err(at(format!("restarts differ: {rep_a:?} / {rep_b:?}")));
                }
                if let Some(img) = image {
                    let st = ra.state();
                    let read = (img.log, img.high_watermark, img.recovery_point);
                    let restarted = (ra.entries().unwrap(), st.high_watermark, st.recovery_point);
                    if read != restarted {
                        return Err(at(format!("read back {read:?}, restarted {restarted:?}")));
                    }
                }
                a = ra;
                b = rb;
            }
            _ => {
                let o = op(s, &a.state(), &mut next_id, &mut epoch);
                let (x, y): (Result<StorageDone>, Result<StorageDone>) =
                    (a.apply(o.clone()), b.apply(o));
                if summary(&x) != summary(&y) {
                    return Err(at(format!(
                        "{} / {}: {:?} / {:?}",
                        summary(&x),
                        summary(&y),
                        x.err().map(|e| e.to_string()),
                        y.err().map(|e| e.to_string())
                    )));
                }
                if let (Ok(x), Ok(y)) = (&x, &y) {
                    if x != y {
                        return Err(at(format!("completions differ: {x:?} / {y:?}")));
                    }
                }
            }
        }
        let (sa, sb) = (a.state(), b.state());
        if sa != sb {
            return Err(at(format!("states differ: {sa:?} / {sb:?}")));
        }
        let (ea, eb): (Vec<LogEntry>, Vec<LogEntry>) = (a.entries().unwrap(), b.entries().unwrap());
        if ea != eb {
            return Err(at(format!("records differ: {ea:?} / {eb:?}")));
        }
    }
    Ok(())
}

fn disk_log(dir: &std::path::Path) -> DiskLog {
    let config = DiskLogConfig {
        log: LogConfig {
            // Small segments: truncations and crashes cross them.
            segment_bytes: 400,
            index_interval_bytes: 64,
            ..LogConfig::default()
        },
        ..DiskLogConfig::new(TopicPartition::new("t", 0).unwrap())
    };
    DiskLog::open(dir, &config).unwrap().0
}

const CASES: u32 = 120;

fn runner() -> TestRunner {
    let config = RunnerConfig {
        cases: CASES,
        failure_persistence: None,
        ..RunnerConfig::default()
    };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

#[test]
fn the_memory_log_behaves_as_the_file_log() {
    let started = std::time::Instant::now();
    let strategy = prop::collection::vec(step(), 1..60);
    runner()
        .run(&strategy, |steps| {
            let dir = tempfile::tempdir().unwrap();
            compare(MemoryLog::new(), disk_log(dir.path()), &steps).map_err(TestCaseError::fail)
        })
        .unwrap();
    println!(
        "{CASES} random runs of up to 60 operations agreed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// A memory log whose crash keeps what was never flushed: the broken rule
/// the comparison must notice.
#[derive(Debug)]
struct KeepsUnflushed(MemoryLog);

impl ReplicaLog for KeepsUnflushed {
    type Stopped = <MemoryLog as ReplicaLog>::Stopped;
    fn state(&self) -> LogState {
        self.0.state()
    }
    fn apply(&mut self, op: StorageOp) -> Result<StorageDone> {
        self.0.apply(op)
    }
    fn entries(&self) -> Result<Vec<LogEntry>> {
        self.0.entries()
    }
    fn close(self) -> Result<Self::Stopped> {
        self.0.close()
    }
    fn crash(self) -> Result<Self::Stopped> {
        let mut log = self.0;
        log.apply(StorageOp::Flush)?;
        log.crash()
    }
    fn restart(stopped: &Self::Stopped) -> Result<(Self, RecoveryReport)> {
        MemoryLog::restart(stopped).map(|(l, r)| (KeepsUnflushed(l), r))
    }
}

#[test]
fn a_crash_that_keeps_unflushed_records_is_noticed() {
    let strategy = prop::collection::vec(step(), 1..60);
    let result = runner().run(&strategy, |steps| {
        let dir = tempfile::tempdir().unwrap();
        compare(
            KeepsUnflushed(MemoryLog::new()),
            disk_log(dir.path()),
            &steps,
        )
        .map_err(TestCaseError::fail)
    });
    let err = result.expect_err("the broken crash went unnoticed");
    println!("noticed: {err}");
}

/// A log whose epochs go down (an unfenced follower that fetched a later
/// epoch, then led an earlier one) is taken by both logs and, after an
/// unclean crash, kept by both, as Kafka's `LogSegment.recover` keeps it.
/// The file log's recovery once called it corrupt ("leader epoch 0 after
/// epoch 1") and refused to open (finding 3 of issue 10).
#[test]
fn epochs_that_go_down_survive_an_unclean_crash() {
    let dir = tempfile::tempdir().unwrap();
    // The epoch goes down by hand: epoch 1, then a leader's append in 0.
    let mut a = MemoryLog::new();
    let mut b = disk_log(dir.path());
    for epoch in [1, 0] {
        let o = StorageOp::AppendAsLeader {
            records: records(epoch as u64, 1),
            epoch,
        };
        a.apply(o.clone()).unwrap();
        b.apply(o).unwrap();
    }
    compare(a, b, &[Step::Flush, Step::Crash]).unwrap();
}
