//! Every HW a leader published, read from its `partition.log` (the
//! `kafka.cluster.Partition` logger at DEBUG, with the host's wall-clock
//! time of each line): `Partition.maybeIncrementLeaderHW` logs "High
//! watermark updated from (offset=A, ...) to (offset=B, ...)" whenever the
//! leader moves its HW. A record below a published HW is committed: what
//! the model calls visible.

use super::metadata::BrokerId;
use super::partition_log::{LeaderStep, PartitionLine};

/// A leader's HW move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HwMove {
    pub broker: BrokerId,
    /// The line's position in the broker's partition.log (1-based).
    pub line: usize,
    /// ms since the epoch, on the host's clock.
    pub at_ms: u64,
    pub high_watermark: u64,
}

/// The HW moves among a broker's leader steps (`partition_log::parse`,
/// which refuses a line that says the HW moved but does not parse: a
/// skipped move would let a committed record go unchecked).
pub fn moves(lines: &[PartitionLine]) -> Vec<HwMove> {
    lines
        .iter()
        .filter_map(|l| match l.step {
            LeaderStep::HighWatermark { to, .. } => Some(HwMove {
                broker: l.broker,
                line: l.line,
                at_ms: l.at_ms,
                high_watermark: to,
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka_trace::partition_log;

    fn parse(broker: BrokerId, partition: &str, log: &str) -> Result<Vec<HwMove>, String> {
        Ok(moves(&partition_log::parse(broker, partition, log)?))
    }

    const LOG: &str = "\
1796308001000 DEBUG [Partition soak-0 broker=2] Recorded replica 3 log end offset (LEO) position 12 and log start offset 0. (kafka.cluster.Partition)
1796308001002 DEBUG [Partition soak-0 broker=2] High watermark updated from (offset=10, segment=[0:1234]) to (offset=12, segment=[0:1300]) (kafka.cluster.Partition)
1796308001003 DEBUG [Partition other-0 broker=2] High watermark updated from (offset=1, segment=[0:1]) to (offset=2, segment=[0:2]) (kafka.cluster.Partition)
";

    #[test]
    fn hw_moves_are_read() {
        assert_eq!(
            parse(2, "soak-0", LOG).unwrap(),
            vec![HwMove {
                broker: 2,
                line: 2,
                at_ms: 1796308001002,
                high_watermark: 12
            }]
        );
    }

    #[test]
    fn a_move_that_does_not_parse_is_named() {
        let err = parse(2, "soak-0", &LOG.replace("to (offset=12", "to (offset=x")).unwrap_err();
        assert!(
            err.contains("line 2") && err.contains("not a number"),
            "{err}"
        );
        let err = parse(2, "soak-0", &LOG.replace("1796308001002 ", "")).unwrap_err();
        assert!(err.contains("no time"), "{err}");
    }
}
