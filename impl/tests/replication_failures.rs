//! Every transition of a replica completes or leaves it unchanged: scripted
//! runs deliver each input once with a storage failure injected into the
//! operation it asks for (every kind of operation is hit), and the replica,
//! state machine and log, must then be exactly as before the input, with
//! the request that asked answered KAFKA_STORAGE_ERROR where it expects an
//! answer. A log whose failed operations still take effect is caught, so
//! the check can fail.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use highwater::replication::log::record_key;
use highwater::replication::{
    Acks, ApiError, Error, HwCheckpointPolicy, Input, LeaderAndIsr, LogEntry, LogState, MemoryLog,
    MemoryStopped, Output, ProduceRequest, Replica, ReplicaLog, ReplicationConfig, Result,
    StorageDone, StorageOp, Tick, TruncationMode,
};
use highwater::storage::{self, Record, RecoveryReport};

/// What the next operations do: every operation's name is recorded, and
/// with `fail` the next one fails (with `torn`, after taking effect).
#[derive(Debug, Default)]
struct Plan {
    fail: bool,
    torn: bool,
    ops: Vec<&'static str>,
}

/// A memory log that fails when its plan says so.
#[derive(Debug, Clone)]
struct Faulty {
    log: MemoryLog,
    plan: Rc<RefCell<Plan>>,
}

impl ReplicaLog for Faulty {
    type Stopped = MemoryStopped;
    fn state(&self) -> LogState {
        self.log.state()
    }
    fn apply(&mut self, op: StorageOp) -> Result<StorageDone> {
        let mut plan = self.plan.borrow_mut();
        plan.ops.push(op.name());
        if plan.fail {
            plan.fail = false;
            if plan.torn {
                let _ = self.log.apply(op);
            }
            let injected = std::io::Error::other("injected");
            return Err(
                storage::Error::io(std::path::Path::new("memory"), "injected", injected).into(),
            );
        }
        self.log.apply(op)
    }
    fn entries(&self) -> Result<Vec<LogEntry>> {
        self.log.entries()
    }
    fn close(self) -> Result<MemoryStopped> {
        self.log.close()
    }
    fn crash(self) -> Result<MemoryStopped> {
        self.log.crash()
    }
    fn restart(_: &MemoryStopped) -> Result<(Self, RecoveryReport)> {
        unreachable!("these runs do not restart")
    }
}

/// Replicas exchanging messages by hand, each input delivered twice: once
/// with a failure injected (on a copy), once for real.
struct Net {
    replicas: Vec<Replica<Faulty>>,
    plan: Rc<RefCell<Plan>>,
    now: u64,
    /// Failures injected, by operation.
    injected: BTreeMap<&'static str, usize>,
    /// The first replica a failure changed, described.
    violation: Option<String>,
}

impl Net {
    fn new(n: u32, config: ReplicationConfig, torn: bool) -> Net {
        let plan = Rc::new(RefCell::new(Plan {
            torn,
            ..Plan::default()
        }));
        let ids: Vec<u32> = (0..n).collect();
        let replicas = ids
            .iter()
            .map(|&id| {
                let log = Faulty {
                    log: MemoryLog::new(),
                    plan: plan.clone(),
                };
                Replica::new(id, ids.clone(), config.clone(), log, None).unwrap()
            })
            .collect();
        Net {
            replicas,
            plan,
            now: 0,
            injected: BTreeMap::new(),
            violation: None,
        }
    }

    /// Delivers `input` to `r`: first on a copy whose storage operation
    /// (if the input asks for one) fails, which must leave the copy as it
    /// was; then for real.
    fn deliver(&mut self, r: u32, input: Input) -> Vec<Output> {
        self.now += 1;
        let now = self.now;
        let before = self.replicas[r as usize].clone();
        self.plan.borrow_mut().ops.clear();
        let _ = before.clone().handle(now, input.clone());
        let ops = std::mem::take(&mut self.plan.borrow_mut().ops);
        assert!(ops.len() <= 1, "one operation an input: {ops:?}");
        if let [op] = ops[..] {
            self.plan.borrow_mut().fail = true;
            let mut failing = before.clone();
            let result = failing.handle(now, input.clone());
            assert!(matches!(result, Err(Error::Storage(_))), "{op}: {result:?}");
            *self.injected.entry(op).or_default() += 1;
            let changed = failing.core() != before.core() || failing.log().log != before.log().log;
            if changed && self.violation.is_none() {
                self.violation = Some(format!(
                    "replica {r}: a failed {op} changed it\nbefore: {:?}\nafter: {:?}",
                    before.core(),
                    failing.core()
                ));
            }
            self.check_failure_answers(&input, failing.take_failure_answers());
        }
        self.replicas[r as usize].handle(now, input).unwrap()
    }

    /// A produce or a fetch whose operation failed is answered so.
    fn check_failure_answers(&self, input: &Input, answers: Vec<Output>) {
        match input {
            Input::Produce(req) => assert!(
                matches!(&answers[..], [Output::Produce(p)]
                    if p.request_id == req.request_id
                        && p.result == Err(ApiError::KafkaStorageError)),
                "{answers:?}"
            ),
            Input::Fetch(req) => assert!(
                matches!(&answers[..], [Output::FetchResponse { to, response }]
                    if *to == req.replica_id
                        && response.error == Some(ApiError::KafkaStorageError)),
                "{answers:?}"
            ),
            _ => assert!(answers.is_empty(), "{answers:?}"),
        }
    }

    /// Delivers `outputs` from `from`: notices to the others; requests are
    /// carried by the exchanges below.
    fn route(&mut self, from: u32, outputs: Vec<Output>) {
        for o in outputs {
            if let Output::Following { leader } = o {
                for r in 0..self.replicas.len() as u32 {
                    if r != from {
                        let notice = Input::Following {
                            follower: from,
                            leader,
                        };
                        self.deliver(r, notice);
                    }
                }
            }
        }
    }

    /// The LeaderAndIsr of `epoch` to every replica in `to`; followers then
    /// run their OffsetsForLeaderEpoch exchange.
    fn leader_and_isr(&mut self, epoch: i32, leader: u32, isr: &[u32], to: &[u32]) {
        let n = self.replicas.len() as u32;
        let req = LeaderAndIsr {
            leader_epoch: epoch,
            partition_epoch: epoch as u32,
            leader: Some(leader),
            isr: isr.to_vec(),
            replicas: (0..n).collect(),
        };
        for &r in to {
            let out = self.deliver(r, Input::LeaderAndIsr(req.clone()));
            self.route(r, out);
            while self.replicas[r as usize].core().is_truncating() {
                for o in self.deliver(r, Input::Tick(Tick::SendRequest)) {
                    let Output::OffsetsForLeaderEpoch { to, request } = o else {
                        continue;
                    };
                    for a in self.deliver(to, Input::OffsetsForLeaderEpoch(request)) {
                        if let Output::OffsetsForLeaderEpochResponse { response, .. } = a {
                            self.deliver(r, Input::OffsetsForLeaderEpochResponse(response));
                        }
                    }
                }
            }
        }
    }

    fn produce(&mut self, r: u32, id: u64, acks: Acks) {
        let req = ProduceRequest {
            request_id: id,
            acks,
            records: vec![Record {
                key: Some(record_key(id)),
                ..Record::new(id as i64, "v")
            }],
        };
        self.deliver(r, Input::Produce(req));
    }

    fn fetch(&mut self, f: u32) {
        for o in self.deliver(f, Input::Tick(Tick::SendRequest)) {
            let Output::Fetch { to, request } = o else {
                continue;
            };
            for a in self.deliver(to, Input::Fetch(request)) {
                if let Output::FetchResponse { response, .. } = a {
                    self.deliver(f, Input::FetchResponse(response));
                }
            }
        }
    }

    fn tick(&mut self, r: u32, tick: Tick) {
        let out = self.deliver(r, Input::Tick(tick));
        self.route(r, out);
    }

    fn leo(&self, r: u32) -> u64 {
        self.replicas[r as usize].log().state().log_end_offset
    }
}

fn config(mode: TruncationMode, hw_checkpoint: HwCheckpointPolicy) -> ReplicationConfig {
    ReplicationConfig {
        truncation: mode,
        hw_checkpoint,
        ..ReplicationConfig::default()
    }
}

/// Today's rules: appends, reads, HW, flushes, and an OffsetsForLeaderEpoch
/// truncation after a leader change.
fn fenced_run(net: &mut Net) {
    net.leader_and_isr(0, 0, &[0, 1, 2], &[0, 1, 2]);
    net.produce(0, 0, Acks::All);
    net.produce(0, 1, Acks::All);
    net.fetch(1);
    net.fetch(2);
    net.fetch(1);
    net.fetch(2);
    net.tick(0, Tick::AdvanceHw);
    net.fetch(1);
    net.tick(1, Tick::Flush);
    net.tick(0, Tick::CheckpointHw);
    net.produce(0, 2, Acks::Leader);
    assert_eq!((net.leo(0), net.leo(1)), (3, 2));
    // 1 leads epoch 1 without record 2; 0 follows and truncates it away.
    net.leader_and_isr(1, 1, &[0, 1], &[1, 0, 2]);
    assert_eq!(net.leo(0), 2, "truncated by the exchange");
    net.produce(1, 3, Acks::All);
    net.fetch(0);
    net.fetch(0);
    net.tick(1, Tick::AdvanceHw);
    net.fetch(0);
}

/// Old rules, the periodic HW checkpoint: a truncation to the HW on
/// becoming follower, and one on OffsetOutOfRange.
fn hw_run(net: &mut Net) {
    // 1 leads alone and commits two records.
    net.leader_and_isr(0, 1, &[1], &[1]);
    net.produce(1, 0, Acks::Leader);
    net.produce(1, 1, Acks::Leader);
    net.produce(1, 2, Acks::Leader);
    net.tick(1, Tick::AdvanceHw);
    net.tick(1, Tick::CheckpointHw);
    net.produce(1, 3, Acks::Leader);
    // 0, empty, leads epoch 1; 1 follows it and cuts back to its HW, then
    // to 0's LEO on OffsetOutOfRange.
    net.leader_and_isr(1, 0, &[0], &[0, 1]);
    assert_eq!(net.leo(1), 3, "truncated to its HW");
    net.fetch(1);
    assert_eq!(net.leo(1), 0, "cut back to the leader's LEO");
    net.produce(0, 4, Acks::Leader);
    net.fetch(1);
    net.tick(1, Tick::Flush);
}

fn run(torn: bool) -> Net {
    let mut fenced = Net::new(
        3,
        config(
            TruncationMode::EpochIterative,
            HwCheckpointPolicy::EveryChange,
        ),
        torn,
    );
    fenced_run(&mut fenced);
    let hw_rules = ReplicationConfig {
        min_insync_replicas: 1,
        elr: false,
        fencing: false,
        ..config(TruncationMode::Hw, HwCheckpointPolicy::IntervalMs(1))
    };
    let mut hw = Net::new(2, hw_rules, torn);
    hw_run(&mut hw);
    for (op, n) in hw.injected {
        *fenced.injected.entry(op).or_default() += n;
    }
    fenced.violation = fenced.violation.or(hw.violation);
    fenced
}

#[test]
fn a_failed_operation_leaves_the_replica_unchanged() {
    let net = run(false);
    if let Some(v) = net.violation {
        panic!("{v}");
    }
    for op in [
        "append as leader",
        "append as follower",
        "truncate",
        "set high watermark",
        "flush",
        "write checkpoints",
        "read",
    ] {
        assert!(
            net.injected.get(op).is_some_and(|&n| n > 0),
            "no failure injected into a {op}: {:?}",
            net.injected
        );
    }
    println!("failures injected: {:?}", net.injected);
}

#[test]
fn a_log_whose_failed_operations_take_effect_is_caught() {
    let net = run(true);
    let v = net.violation.expect("the torn log went unnoticed");
    println!("{}", v.lines().next().unwrap_or_default());
}
