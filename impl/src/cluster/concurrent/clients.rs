//! The clients of a concurrent run: producers (keeping requests in flight
//! to the leader the metadata names) and consumers (reading the leader's
//! log below its HW).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::super::trace::{Actor, Event};
use super::report::{AckedRecord, ConsumedRecord};
use super::{ConcurrentConfig, Msg, Shared, PRODUCER_SHIFT};
use crate::replication::log::{read_entries, record_key};
use crate::replication::{Acks, LogEntry, ProduceRequest, ProduceResponse, RecordId};
use crate::storage::{LogReader, Record};

// --- Clients -------------------------------------------------------------------------

#[derive(Default)]
pub(super) struct ProducerResult {
    pub(super) requests: u64,
    pub(super) records: u64,
    pub(super) acked: Vec<AckedRecord>,
    pub(super) errors: BTreeMap<String, u64>,
    pub(super) timeouts: u64,
    pub(super) latencies_us: Vec<u64>,
    /// When the first request was sent and the last answer taken in
    /// (`RunReport::produce_span`).
    pub(super) first_send: Option<Instant>,
    pub(super) last_answer: Option<Instant>,
    /// Requests sent sooner than `RETRY_BACKOFF` after an error answer
    /// (`RunReport::sent_within_backoff`).
    pub(super) sent_within_backoff: u64,
}

/// Files a produce answer under its request: latency and acknowledged
/// records, or the error. Answers to requests already timed out are dropped.
fn record_answer(
    resp: ProduceResponse,
    in_flight: &mut HashMap<u64, (Instant, Vec<RecordId>)>,
    out: &mut ProducerResult,
    shared: &Shared,
) {
    let Some((sent, ids)) = in_flight.remove(&resp.request_id) else {
        return;
    };
    out.last_answer = Some(Instant::now());
    match resp.result {
        Ok((base, epoch)) => {
            out.latencies_us.push(sent.elapsed().as_micros() as u64);
            shared
                .records_acked
                .fetch_add(ids.len() as u64, Ordering::SeqCst);
            shared.stranded.acknowledged(base + ids.len() as u64);
            for (i, id) in ids.into_iter().enumerate() {
                out.acked.push(AckedRecord {
                    id,
                    offset: base + i as u64,
                    epoch,
                });
            }
        }
        Err(e) => *out.errors.entry(e.to_string()).or_default() += 1,
    }
}

/// How long a producer waits after an error answer.
pub(super) const RETRY_BACKOFF: Duration = Duration::from_millis(10);

pub(super) fn run_producer(
    k: usize,
    config: ConcurrentConfig,
    shared: Arc<Shared>,
    replicas: Vec<Sender<Msg>>,
    answers: Receiver<ProduceResponse>,
) -> ProducerResult {
    let mut out = ProducerResult::default();
    let mut seq: u64 = 0;
    let mut in_flight: HashMap<u64, (Instant, Vec<RecordId>)> = HashMap::new();
    let value = vec![b'x'; config.record_bytes];
    let timeout = config.produce_timeout;
    // Kafka's retry.backoff.ms: after an error answer, wait before sending
    // again (without it a producer spins on NotLeaderOrFollower).
    let mut backoff_until = Instant::now();
    let mut errors_seen = 0;
    // When the last error answer was taken in (for `sent_within_backoff`).
    let mut last_error: Option<Instant> = None;
    // `ConcurrentConfig::bursts`: records sent in this burst, and when the
    // next may begin.
    let (mut burst_sent, mut burst_at) = (0u64, Instant::now());
    // When the last burst was answered, while its records reach the ISR.
    let mut answered_at: Option<Instant> = None;
    while !shared.stop_clients.load(Ordering::Relaxed) {
        let errors_now: u64 = out.errors.values().sum();
        if errors_now > errors_seen && config.regress != Some(super::Regression::NoProducerBackoff)
        {
            errors_seen = errors_now;
            backoff_until = Instant::now() + RETRY_BACKOFF;
        }
        while in_flight.len() < config.max_in_flight
            && Instant::now() >= backoff_until.max(burst_at)
        {
            let n = config.records_per_request as u64;
            if let Some(b) = config.bursts.filter(|b| burst_sent + n > b.records.max(n)) {
                if in_flight.is_empty() {
                    // The pause begins once every replica up has the burst
                    // settled (however slow the machine; 20 pauses at most,
                    // for one that does not catch up).
                    let at = *answered_at.get_or_insert_with(Instant::now);
                    if burst_settled(&shared) || at.elapsed() >= 20 * b.pause {
                        burst_sent = 0;
                        burst_at = Instant::now() + b.pause;
                        answered_at = None;
                    }
                }
                break;
            }
            let leader = match config.regress {
                Some(super::Regression::ProduceBeforeLeaderServes) => shared.metadata().leader,
                _ => serving_leader(&shared),
            };
            let Some(leader) = leader else {
                break;
            };
            if let Some(max) = config.max_records {
                if !super::published::take_records(&shared.records_sent, n, max) {
                    break;
                }
            } else {
                shared.records_sent.fetch_add(n, Ordering::SeqCst);
            }
            let request_id = ((k as u64) << PRODUCER_SHIFT) | seq;
            let ids: Vec<RecordId> = (0..config.records_per_request as u64)
                .map(|i| request_id * config.records_per_request as u64 + i)
                .collect();
            seq += 1;
            let records = ids
                .iter()
                .map(|&id| Record {
                    key: Some(record_key(id)),
                    ..Record::new(shared.start.elapsed().as_millis() as i64, value.clone())
                })
                .collect();
            let req = ProduceRequest {
                request_id,
                acks: config.acks,
                records,
            };
            out.requests += 1;
            out.records += ids.len() as u64;
            if last_error.is_some_and(|at| at.elapsed() < RETRY_BACKOFF) {
                out.sent_within_backoff += 1;
            }
            burst_sent += n;
            if replicas[leader as usize]
                .send(Msg::Produce { producer: k, req })
                .is_err()
            {
                break;
            }
            let now = Instant::now();
            out.first_send.get_or_insert(now);
            if config.acks != Acks::None {
                in_flight.insert(request_id, (now, ids));
            } else if seq.is_multiple_of(config.max_in_flight as u64) {
                // No answers to wait for: pace the requests instead.
                thread::sleep(Duration::from_millis(1));
                break;
            }
        }
        match answers.recv_timeout(Duration::from_millis(5)) {
            Ok(resp) => {
                let before: u64 = out.errors.values().sum();
                record_answer(resp, &mut in_flight, &mut out, &shared);
                if out.errors.values().sum::<u64>() > before {
                    last_error = Some(Instant::now());
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                if in_flight.len() >= config.max_in_flight || serving_leader(&shared).is_none() {
                    thread::sleep(Duration::from_micros(200));
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let before = in_flight.len();
        in_flight.retain(|_, (sent, _)| sent.elapsed() < timeout);
        out.timeouts += (before - in_flight.len()) as u64;
    }
    // Answers still in the channel count; the rest time out.
    let deadline = Instant::now() + timeout;
    while !in_flight.is_empty() && Instant::now() < deadline {
        if let Ok(resp) = answers.recv_timeout(Duration::from_millis(10)) {
            record_answer(resp, &mut in_flight, &mut out, &shared);
        }
    }
    out.timeouts += in_flight.len() as u64;
    out
}

/// The leader the metadata names, once it leads in the metadata's epoch
/// (its HW is published in that epoch). A Kafka producer refused with
/// NOT_LEADER_OR_FOLLOWER by a broker that has yet to take its leadership
/// retries the same records; this driver's producers send each record
/// once (one record id, one model record), so they wait instead: records
/// refused there were lost from a run's budget (`max_records`), and its
/// goal could never be met (seen on a busy machine: the first 4 requests
/// refused before the first leader took its LeaderAndIsr, then a 120 s
/// hang).
fn serving_leader(shared: &Shared) -> Option<crate::replication::ReplicaId> {
    let m = shared.metadata();
    let leader = m.leader?;
    let published = shared.published_hw(leader)?.get()?;
    (Some(published.epoch) == m.leader_epoch).then_some(leader)
}

/// Every replica that is up has flushed and checkpointed its HW at the
/// leader's log end (`Shared::settled`).
pub(super) fn burst_settled(shared: &Shared) -> bool {
    let Some(leo) = shared
        .metadata()
        .leader
        .and_then(|l| shared.reader(l))
        .map(|r| r.log_end_offset())
    else {
        return false;
    };
    shared.settled.iter().enumerate().all(|(r, s)| {
        shared.reader(r as crate::replication::ReplicaId).is_none()
            || s.load(Ordering::SeqCst) >= leo
    })
}

/// What a consumer read, and the read errors it met (by error, counted).
#[derive(Default)]
pub(super) struct ConsumerResult {
    pub(super) consumed: Vec<ConsumedRecord>,
    pub(super) errors: BTreeMap<String, u64>,
}

/// How a consumer reads (test-only switches; all off in real runs).
#[derive(Clone, Copy, Default)]
pub(super) struct ConsumerRules {
    /// The order once had (`InjectedFault::HwPublishedBeforeCheckpoint`):
    /// the HW the storage layer publishes as it is set, before its
    /// checkpoint.
    pub(super) storage_hw: bool,
    /// Every other read below the HW fails, the first among them
    /// (`ConcurrentConfig::consumer_reads_fail`): a consumer that read
    /// anything met a failure first.
    pub(super) reads_fail: bool,
    /// Read errors are not counted (`Regression::ConsumerErrorsDropped`).
    pub(super) drop_errors: bool,
    /// Reads the record at the HW too (`InjectedFault::ConsumerReadsPastHw`).
    pub(super) past_hw: bool,
}

/// The error an injected read failure returns.
fn read_failed() -> crate::replication::Error {
    crate::replication::Error::Storage(crate::storage::Error::Io {
        path: std::path::PathBuf::from("consumer"),
        op: "read",
        source: std::io::Error::other("injected read failure"),
    })
}

/// A consumer reads the leader's log below the HW the leader published
/// (`PublishedHw`), and sleeps there until it passes; every read error is
/// counted in its result (the run's `RunReport::consumer_errors`). A read
/// counts, and is traced (`Event::ConsumerRead`), only if the leader still
/// leads in the epoch it was read in once it is done: as Kafka's fetch
/// reads under `Partition.leaderIsrUpdateLock` and checks the leader
/// epoch, a read that a change of leadership overlapped is dropped.
pub(super) fn run_consumer(k: usize, shared: Arc<Shared>, how: ConsumerRules) -> ConsumerResult {
    // Reads below the HW so far (for `reads_fail`).
    let mut reads = 0u64;
    let mut result = ConsumerResult::default();
    let mut pos = 0u64;
    while !shared.stop_clients.load(Ordering::Relaxed) {
        let leader = shared.metadata().leader;
        let source = leader.and_then(|l| {
            let cell = shared.published_hw(l)?;
            Some((l, shared.reader(l)?, cell, cell.get()?))
        });
        let Some((leader, reader, cell, published)) = source else {
            thread::sleep(Duration::from_millis(1));
            continue;
        };
        let hw = if how.storage_hw {
            reader.high_watermark()
        } else {
            published.hw
        };
        // The deliberate off-by-one (`InjectedFault::ConsumerReadsPastHw`).
        let hw = hw + u64::from(how.past_hw && pos <= hw);
        reads += u64::from(pos < hw);
        let read = if how.reads_fail && pos < hw && !reads.is_multiple_of(2) {
            Err(read_failed())
        } else {
            read_entries_below(&reader, pos, hw)
        };
        match read {
            Err(e) => {
                if !how.drop_errors {
                    *result.errors.entry(e.to_string()).or_default() += 1;
                }
                thread::sleep(Duration::from_millis(1));
            }
            Ok(Some(entries)) if !entries.is_empty() => {
                if cell.get().map(|p| p.epoch) != Some(published.epoch) {
                    // Leadership moved while it read: read again.
                    continue;
                }
                let from = pos;
                shared
                    .records_consumed
                    .fetch_add(entries.len() as u64, Ordering::SeqCst);
                for e in &entries {
                    pos = e.offset + 1;
                    result.consumed.push(ConsumedRecord {
                        consumer: k,
                        offset: e.offset,
                        epoch: e.epoch,
                        id: e.record_id,
                    });
                }
                if shared.tracer.enabled() {
                    let event = Event::ConsumerRead {
                        leader,
                        epoch: published.epoch,
                        high_watermark: hw,
                        from,
                        records: entries.iter().map(|e| e.record_id).collect(),
                    };
                    shared
                        .tracer
                        .record(Actor::Consumer(k as u32), event, None, None);
                }
            }
            Ok(_) if how.storage_hw => {
                reader.wait_for_high_watermark(pos, Duration::from_millis(5));
            }
            Ok(_) => {
                cell.wait_past(pos, Duration::from_millis(5));
            }
        }
    }
    result
}

/// Records from `pos` below `hw`, in one read.
fn read_entries_below(
    reader: &LogReader,
    pos: u64,
    hw: u64,
) -> crate::replication::Result<Option<Vec<LogEntry>>> {
    if pos >= hw {
        return Ok(None);
    }
    read_entries(reader, pos, hw).map(Some)
}
