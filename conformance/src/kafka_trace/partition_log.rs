//! A leader's own steps, read from its `partition.log` (the
//! `kafka.cluster.Partition` logger at DEBUG, each line with the host's
//! wall-clock ms first). These are the lines of `Partition.scala` that say
//! what the leader did:
//!
//! - "Recorded replica F log end offset (LEO) position X": a fetch of
//!   follower F from offset X reached the leader
//!   (`Partition.updateFollowerFetchState`, logged last, after the ISR
//!   expansion and HW move the fetch caused);
//! - "High watermark updated from (offset=A, ...) to (offset=B, ...)": the
//!   leader moved its HW (`Partition.maybeIncrementLeaderHW`);
//! - "Submitting ISR state change PendingExpandIsr(newInSyncReplicaId=F":
//!   the leader asks to add F (`Partition.prepareIsrExpand`); from then its
//!   maximal ISR counts F;
//! - "ISR updated to A,B": the controller accepted the leader's change
//!   (`Partition.handleAlterPartitionUpdate`); "Partition state has been
//!   reset to the latest committed state CommittedPartitionState[isr=[A, B]":
//!   it refused it (`Partition.handleAlterPartitionError`).
//!
//! "Ignoring failed ISR update to PendingExpandIsr(...)" changes nothing
//! (the leader had already learnt a newer ISR) and is passed over.
//!
//! Every other line is passed over. A line that names one of these but
//! does not parse is an error: a skipped step would go unchecked.

use super::metadata::BrokerId;
use super::state_change::broker_list;

/// One line of a leader's steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionLine {
    pub broker: BrokerId,
    /// The line's position in the broker's partition.log (1-based).
    pub line: usize,
    /// ms since the epoch, on the host's clock.
    pub at_ms: u64,
    pub step: LeaderStep,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderStep {
    /// A fetch of `follower` from `offset` reached the leader.
    Recorded { follower: BrokerId, offset: u64 },
    /// The leader moved its HW from `from` to `to`.
    HighWatermark { from: u64, to: u64 },
    /// The leader asked the controller to add `follower` to the ISR.
    PendingExpand { follower: BrokerId },
    /// The controller accepted the leader's ISR change: the ISR is `isr`.
    IsrUpdated { isr: Vec<BrokerId> },
}

/// How `Partition.handleAlterPartitionError` names the ISR it goes back to.
const RESET: &str =
    "Partition state has been reset to the latest committed state CommittedPartitionState[isr=[";

/// The leader steps of `partition` (e.g. `soak-0`) in `broker`'s
/// partition.log, in the log's order.
pub fn parse(broker: BrokerId, partition: &str, log: &str) -> Result<Vec<PartitionLine>, String> {
    let ident = format!("[Partition {partition} broker={broker}]");
    let mut out = Vec::new();
    for (n, line) in log.lines().enumerate() {
        if !line.contains(&ident) {
            continue;
        }
        let at = |why: &str| {
            format!(
                "broker {broker} partition.log line {}: {why}: {line}",
                n + 1
            )
        };
        let number = |after: &str, ends: &[char]| -> Result<u64, String> {
            let start = line
                .find(after)
                .ok_or_else(|| at(&format!("no {after:?}")))?
                + after.len();
            let rest = &line[start..];
            let end = rest.find(ends).unwrap_or(rest.len());
            rest[..end]
                .trim()
                .parse()
                .map_err(|_| at(&format!("{after:?} is not followed by a number")))
        };
        let broker_id = |after: &str, ends: &[char]| -> Result<BrokerId, String> {
            BrokerId::try_from(number(after, ends)?).map_err(|_| at("a broker id out of range"))
        };
        let step = if line.contains("] Recorded replica ") {
            LeaderStep::Recorded {
                follower: broker_id("Recorded replica ", &[' '])?,
                offset: number("(LEO) position ", &[' '])?,
            }
        } else if line.contains("] High watermark updated from ") {
            // "from (offset=A, ...) to (offset=B, ...)".
            let hw_after = |key: &str, what: &str| -> Result<u64, String> {
                let start = line.rfind(key).ok_or_else(|| at(&format!("no {what}")))? + key.len();
                let rest = &line[start..];
                let end = rest
                    .find([',', ')'])
                    .ok_or_else(|| at(&format!("no end to {what}")))?;
                rest[..end]
                    .trim()
                    .parse()
                    .map_err(|_| at(&format!("{what} is not a number")))
            };
            LeaderStep::HighWatermark {
                from: hw_after(" updated from (offset=", "the old HW")?,
                to: hw_after(" to (offset=", "the new HW")?,
            }
        } else if line
            .contains("] Submitting ISR state change PendingExpandIsr(newInSyncReplicaId=")
        {
            LeaderStep::PendingExpand {
                follower: broker_id("PendingExpandIsr(newInSyncReplicaId=", &[',', ')'])?,
            }
        } else if let Some(at_reset) = line.find(RESET) {
            // `Partition.handleAlterPartitionError`: the controller refused
            // the change (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED); the
            // leader goes back to the last committed ISR.
            let rest = &line[at_reset + RESET.len()..];
            let end = rest.find(']').ok_or_else(|| at("no end to the ISR"))?;
            LeaderStep::IsrUpdated {
                isr: broker_list(&rest[..end])
                    .ok_or_else(|| at("an ISR member is not a broker id"))?,
            }
        } else if line.contains("] ISR updated to ") {
            let start =
                line.find("] ISR updated to ").expect("just found") + "] ISR updated to ".len();
            let rest = &line[start..];
            let end = rest
                .find([' ', '('])
                .ok_or_else(|| at("no end to the ISR"))?;
            let isr =
                broker_list(&rest[..end]).ok_or_else(|| at("an ISR member is not a broker id"))?;
            LeaderStep::IsrUpdated { isr }
        } else {
            continue;
        };
        let at_ms = line
            .split_whitespace()
            .next()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| at("no time in ms first"))?;
        out.push(PartitionLine {
            broker,
            line: n + 1,
            at_ms,
            step,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
1796356590885 INFO [Partition soak-0 broker=2] Log loaded for partition soak-0 with initial high watermark 0 (kafka.cluster.Partition)
1796356612666 DEBUG [Partition soak-0 broker=2] Submitting ISR state change PendingExpandIsr(newInSyncReplicaId=3, sentLeaderAndIsr=LeaderAndIsr(leader=2, leaderEpoch=1)) (kafka.cluster.Partition)
1796356612671 DEBUG [Partition soak-0 broker=2] Recorded replica 3 log end offset (LEO) position 462 and log start offset 0. (kafka.cluster.Partition)
1796356612737 INFO [Partition soak-0 broker=2] ISR updated to 3,2  and version updated to 3 (kafka.cluster.Partition)
1796356612741 DEBUG [Partition soak-0 broker=2] High watermark updated from (offset=451, segment=[0:7573]) to (offset=462, segment=[0:7744]) (kafka.cluster.Partition)
1796356620462 INFO [Partition soak-0 broker=2] ISR updated to 2 (under-min-isr) and version updated to 4 (kafka.cluster.Partition)
1796356620463 DEBUG [Partition soak-0 broker=2] Ignoring failed ISR update to PendingExpandIsr(newInSyncReplicaId=3, sentLeaderAndIsr=LeaderAndIsr(leader=1)) since we have already updated state to CommittedPartitionState[isr=[3, 2, 1], leaderRecoveryState=RECOVERED] (kafka.cluster.Partition)
1796356620464 INFO [Partition soak-0 broker=2] Failed to alter partition to PendingExpandIsr(newInSyncReplicaId=1, sentLeaderAndIsr=LeaderAndIsr(leader=2)) since the controller rejected the request with INELIGIBLE_REPLICA. Partition state has been reset to the latest committed state CommittedPartitionState[isr=[2, 3], leaderRecoveryState=RECOVERED]. (kafka.cluster.Partition)
1796356620463 DEBUG [Partition other-0 broker=2] High watermark updated from (offset=1, segment=[0:1]) to (offset=2, segment=[0:2]) (kafka.cluster.Partition)
";

    #[test]
    fn every_leader_step_is_read_in_order() {
        let steps: Vec<(usize, u64, LeaderStep)> = parse(2, "soak-0", LOG)
            .unwrap()
            .into_iter()
            .map(|l| (l.line, l.at_ms, l.step))
            .collect();
        assert_eq!(
            steps,
            vec![
                (2, 1796356612666, LeaderStep::PendingExpand { follower: 3 }),
                (
                    3,
                    1796356612671,
                    LeaderStep::Recorded {
                        follower: 3,
                        offset: 462
                    }
                ),
                (4, 1796356612737, LeaderStep::IsrUpdated { isr: vec![3, 2] }),
                (
                    5,
                    1796356612741,
                    LeaderStep::HighWatermark { from: 451, to: 462 }
                ),
                (6, 1796356620462, LeaderStep::IsrUpdated { isr: vec![2] }),
                (8, 1796356620464, LeaderStep::IsrUpdated { isr: vec![2, 3] }),
            ]
        );
    }

    #[test]
    fn a_step_that_does_not_parse_is_named() {
        let err = parse(2, "soak-0", &LOG.replace("position 462", "position x")).unwrap_err();
        assert!(err.contains("line 3") && err.contains("number"), "{err}");
        let err = parse(2, "soak-0", &LOG.replace("to (offset=462", "to (offset=x")).unwrap_err();
        assert!(
            err.contains("line 5") && err.contains("not a number"),
            "{err}"
        );
        let err = parse(2, "soak-0", &LOG.replace("1796356612741 ", "")).unwrap_err();
        assert!(err.contains("no time"), "{err}");
        let err = parse(
            2,
            "soak-0",
            &LOG.replace("updated to 3,2 ", "updated to 3,b "),
        )
        .unwrap_err();
        assert!(err.contains("line 4"), "{err}");
    }
}
