//! Each broker's log end offset, followed across its tenures: the model's
//! rule that a replica's log shrinks only when it truncates or crashes
//! (`Replica::truncate_to` at a fetch's diverging epoch, and `Crash`),
//! held against every log end offset a broker's own lines show.
//!
//! A broker's lines give its log end offset at these moments, all on its
//! own clock (one JVM):
//!
//! - each registration it applied, leader or follower (`state-change.log`,
//!   `Partition.makeLeader`/`makeFollower`): its log end offset then;
//! - "Truncating to offset X" (`server.log`, `UnifiedLog.truncateTo`, for
//!   whatever reason the log was cut): from then X;
//! - "Completed load of Log(... logEndOffset=N)" (`server.log`,
//!   `LogManager.loadLog` at start-up): from then N, whatever a crash cut.
//!
//! And, as leader, at least (`partition.log`, the same JVM):
//!
//! - the HW it moved to ("High watermark updated ... to B": the HW never
//!   passes the leader's log end, `Partition.maybeIncrementLeaderHW`);
//! - the offset a follower fetched from ("Recorded replica F ... position
//!   X": `Partition.fetchRecords` reads before it records, and a read
//!   past the leader's log end fails with OffsetOutOfRange).
//!
//! Between a cut or a load and the next, the log end offset never goes
//! down: a broker's log only grows by appends as leader and by fetches as
//! follower. A registration whose log end offset is below
//! an earlier one's (or below the cut or load since) with no cut or load
//! between is a misfit: the log lost records no model step removes. This
//! chains the tenures: a leader's line must start at or past what the same
//! broker held when it last followed.

use std::fmt;

use super::metadata::BrokerId;
use super::partition_log::{LeaderStep, PartitionLine};
use super::state_change::{log4j_ms, Applied};

/// A moment from which a broker's log end offset is what the line says,
/// lower than before or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reset {
    pub broker: BrokerId,
    /// The line's position in the broker's server.log (1-based).
    pub line: usize,
    pub at_ms: u64,
    pub log_end_offset: u64,
    /// A load at start-up (else a cut).
    pub loaded: bool,
}

const CUT: &str = "] Truncating to offset ";
const LOADED: &str = "Completed load of Log(";

/// The cuts and loads of `partition` (e.g. `soak-0`) in `broker`'s
/// server.log, in the log's order. A line that names one but does not
/// parse is an error.
pub fn parse(broker: BrokerId, partition: &str, log: &str) -> Result<Vec<Reset>, String> {
    let (topic, index) = partition
        .rsplit_once('-')
        .ok_or_else(|| format!("{partition:?} is not a topic-partition"))?;
    let cut_ident = format!("[UnifiedLog partition={partition}, ");
    let load_ident = format!(" topic={topic}, partition={index}, ");
    let mut out = Vec::new();
    for (n, line) in log.lines().enumerate() {
        let (after, loaded) = if line.contains(&cut_ident) && line.contains(CUT) {
            (CUT, false)
        } else if line.contains(LOADED) && line.contains(&load_ident) {
            ("logEndOffset=", true)
        } else {
            continue;
        };
        let at = |why: &str| format!("broker {broker} server.log line {}: {why}: {line}", n + 1);
        let start = line.find(after).ok_or_else(|| at("no offset"))? + after.len();
        let rest = &line[start..];
        let log_end_offset = rest[..rest.find([')', ' ', ',']).unwrap_or(rest.len())]
            .parse()
            .map_err(|_| at("the offset is not a number"))?;
        out.push(Reset {
            broker,
            line: n + 1,
            at_ms: log4j_ms(line).ok_or_else(|| at("no log4j time"))?,
            log_end_offset,
            loaded,
        });
    }
    Ok(out)
}

/// What following the brokers' log end offsets showed.
#[derive(Clone, Debug, Default)]
pub struct LogEndValidation {
    /// Registrations whose log end offset was held against the broker's
    /// earlier ones.
    pub registrations: usize,
    /// The leaders' HW moves and recorded fetches that bounded their log
    /// end offsets from below.
    pub leader_bounds: usize,
    pub cuts: usize,
    pub loads: usize,
    pub misfit: Option<String>,
    pub misfit_ms: Option<u64>,
}

impl fmt::Display for LogEndValidation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "brokers' log end offsets followed across {} registrations and {} leaders' HW moves and recorded fetches: none went down but at {} cuts and {} loads at start-up",
            self.registrations, self.leader_bounds, self.cuts, self.loads
        )
    }
}

/// One moment a broker's lines show its log end offset.
enum Seen<'a> {
    /// A cut or a load: from here the log end offset is this.
    Reset(&'a Reset),
    /// A registration applied: the log end offset is exactly this.
    Applied(&'a Applied),
    /// A leader's line: the log end offset is at least this.
    AtLeast(&'a PartitionLine, u64),
}

/// Follows each broker's log end offset (see the module documentation).
/// `lines`: the leaders' steps, when kept.
pub fn validate(
    applied: &[Applied],
    resets: &[Reset],
    lines: &[PartitionLine],
) -> LogEndValidation {
    let mut v = LogEndValidation {
        cuts: resets.iter().filter(|r| !r.loaded).count(),
        loads: resets.iter().filter(|r| r.loaded).count(),
        ..LogEndValidation::default()
    };
    let mut brokers: Vec<BrokerId> = applied.iter().map(|a| a.broker).collect();
    brokers.sort_unstable();
    brokers.dedup();
    for broker in brokers {
        // The broker's lines in its own order, a cut or load first within
        // one ms: it may have come on either side of the others there.
        let mut seen: Vec<(u64, Seen)> = applied
            .iter()
            .filter(|a| a.broker == broker)
            .map(|a| (a.at_ms, Seen::Applied(a)))
            .chain(
                resets
                    .iter()
                    .filter(|r| r.broker == broker)
                    .map(|r| (r.at_ms, Seen::Reset(r))),
            )
            .chain(
                lines
                    .iter()
                    .filter(|l| l.broker == broker)
                    .filter_map(|l| match l.step {
                        LeaderStep::HighWatermark { to, .. } => {
                            Some((l.at_ms, Seen::AtLeast(l, to)))
                        }
                        LeaderStep::Recorded { offset, .. } => {
                            Some((l.at_ms, Seen::AtLeast(l, offset)))
                        }
                        _ => None,
                    }),
            )
            .collect();
        seen.sort_by_key(|(at, s)| (*at, !matches!(s, Seen::Reset(_))));
        // The floor: the highest log end offset since the last cut or load,
        // and the line that showed it.
        let mut floor: Option<(u64, String)> = None;
        let mut reset_ms = None;
        for (at, s) in &seen {
            let (value, shown) = match s {
                Seen::Reset(r) => {
                    let what = if r.loaded {
                        "loaded at start-up"
                    } else {
                        "cut"
                    };
                    floor = Some((
                        r.log_end_offset,
                        format!(
                            "{what} to {} (server.log line {})",
                            r.log_end_offset, r.line
                        ),
                    ));
                    reset_ms = Some(*at);
                    continue;
                }
                Seen::Applied(a) => {
                    v.registrations += 1;
                    if let Some((low, shown)) =
                        floor.as_ref().filter(|(low, _)| a.log_end_offset < *low)
                    {
                        v.misfit = Some(format!(
                            "broker {broker} (state-change.log line {}) applied leader epoch {} with log end offset {}, below the {low} it held before ({shown}), with no cut or load between: its log lost records no model step removes",
                            a.line, a.leader_epoch, a.log_end_offset
                        ));
                        v.misfit_ms = Some(*at);
                        return v;
                    }
                    (
                        a.log_end_offset,
                        format!(
                            "state-change.log line {}, leader epoch {}",
                            a.line, a.leader_epoch
                        ),
                    )
                }
                Seen::AtLeast(l, value) => {
                    v.leader_bounds += 1;
                    (*value, format!("partition.log line {}", l.line))
                }
            };
            // Beside a cut or load in the same ms, it may have been before
            // it: it cannot raise the floor.
            if reset_ms != Some(*at) && floor.as_ref().is_none_or(|(low, _)| value > *low) {
                floor = Some((value, shown));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka_trace::state_change::Role;

    #[test]
    fn cuts_and_loads_are_read() {
        let log = "\
[2026-12-04 16:46:21,219] INFO [UnifiedLog partition=soak-0, dir=/d] Truncating to 0 has no effect as the largest offset in the log is -1 (org.apache.kafka.storage.internals.log.UnifiedLog)
[2026-12-04 16:47:02,105] INFO [UnifiedLog partition=soak-0, dir=/d] Truncating to offset 2301 (org.apache.kafka.storage.internals.log.UnifiedLog)
[2026-12-04 20:07:34,861] INFO Completed load of Log(dir=/d/soak-0, topicId=X, topic=soak, partition=0, highWatermark=0, lastStableOffset=0, logStartOffset=0, logEndOffset=4252) with 1 segments, local-log-start-offset 0 and log-end-offset 4252 in 34ms (1/1 completed in /d) (kafka.log.LogManager)
[2026-12-04 20:07:34,861] INFO Completed load of Log(dir=/d/__consumer_offsets-0, topicId=Y, topic=__consumer_offsets, partition=0, highWatermark=0, lastStableOffset=0, logStartOffset=0, logEndOffset=7) with 1 segments (kafka.log.LogManager)
";
        let r = parse(2, "soak-0", log).unwrap();
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(
            (r[0].line, r[0].log_end_offset, r[0].loaded),
            (2, 2301, false)
        );
        assert_eq!(
            (r[1].line, r[1].log_end_offset, r[1].loaded),
            (3, 4252, true)
        );
        let torn = log.replace("offset 2301", "offset x");
        assert!(parse(2, "soak-0", &torn).unwrap_err().contains("line 2"));
    }

    fn applied(at_ms: u64, epoch: i64, log_end_offset: u64) -> Applied {
        Applied {
            broker: 1,
            line: epoch as usize + 1,
            at_ms,
            leader_epoch: epoch,
            partition_epoch: epoch,
            log_end_offset,
            high_watermark: 0,
            role: Role::Follower { leader: Some(2) },
        }
    }

    fn reset(at_ms: u64, log_end_offset: u64, loaded: bool) -> Reset {
        Reset {
            broker: 1,
            line: 9,
            at_ms,
            log_end_offset,
            loaded,
        }
    }

    #[test]
    fn a_log_end_going_down_without_a_cut_or_load_is_a_misfit() {
        let grows = [
            applied(1000, 0, 0),
            applied(2000, 1, 50),
            applied(3000, 2, 80),
        ];
        let v = validate(&grows, &[], &[]);
        assert_eq!((v.registrations, v.misfit), (3, None));
        let shrinks = [
            applied(1000, 0, 0),
            applied(2000, 1, 50),
            applied(3000, 2, 40),
        ];
        let v = validate(&shrinks, &[], &[]);
        let m = v.misfit.unwrap();
        assert!(m.contains("log end offset 40, below the 50"), "{m}");
        assert_eq!(v.misfit_ms, Some(3000));
        // A cut or a load between explains it, but only down to itself.
        for loaded in [false, true] {
            let v = validate(&shrinks, &[reset(2500, 40, loaded)], &[]);
            assert_eq!(v.misfit, None);
            let v = validate(&shrinks, &[reset(2500, 45, loaded)], &[]);
            assert!(v.misfit.unwrap().contains("below the 45"));
        }
        // In the same ms, the cut may have come first; or last, so the
        // registration beside it does not raise the floor.
        let v = validate(&shrinks, &[reset(3000, 30, false)], &[]);
        assert_eq!(v.misfit, None);
        let beside = [
            applied(1000, 0, 50),
            applied(1000, 1, 60),
            applied(2000, 2, 35),
        ];
        let v = validate(&beside, &[reset(1000, 30, false)], &[]);
        assert_eq!(v.misfit, None);
    }

    #[test]
    fn a_leaders_hw_and_its_followers_fetches_bound_its_log_end() {
        let line = |at_ms, step| PartitionLine {
            broker: 1,
            line: 4,
            at_ms,
            step,
        };
        // Broker 1 follows at 0, leads from 1000 ms at 0, moves its HW to
        // 70 and records a fetch from 75, and follows again at 3000 ms.
        let run = |last: u64| {
            let mut leader = applied(1000, 1, 0);
            leader.role = Role::Leader { isr: vec![1] };
            [applied(0, 0, 0), leader, applied(3000, 2, last)]
        };
        let lines = [
            line(1500, LeaderStep::HighWatermark { from: 0, to: 70 }),
            line(
                1600,
                LeaderStep::Recorded {
                    follower: 2,
                    offset: 75,
                },
            ),
        ];
        let v = validate(&run(75), &[], &lines);
        assert_eq!((v.leader_bounds, v.misfit), (2, None));
        let v = validate(&run(74), &[], &lines);
        assert!(v
            .misfit
            .unwrap()
            .contains("below the 75 it held before (partition.log line 4)"));
        let v = validate(&run(74), &[], &lines[..1]);
        assert_eq!(v.misfit, None);
        let v = validate(&run(69), &[], &lines[..1]);
        assert!(v.misfit.unwrap().contains("below the 70"));
    }
}
