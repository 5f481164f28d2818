//! What each broker applied, read from its `state-change.log`: every time
//! it took a partition registration as leader or follower
//! (`Partition.makeLeader` and `Partition.makeFollower` log these lines),
//! with the leader epoch and partition epoch it applied, its log end
//! offset and HW at that moment, and the ISR or leader it was given. Lines
//! are in the broker's own order; different brokers' lines are not ordered
//! with each other.

use super::metadata::{BrokerId, Brokers};

/// One registration a broker applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub broker: BrokerId,
    /// The line's position in the broker's log (1-based), to name it.
    pub line: usize,
    pub leader_epoch: i64,
    pub partition_epoch: i64,
    /// The broker's log end offset when it applied the registration.
    pub log_end_offset: u64,
    pub high_watermark: u64,
    pub role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Leader {
        isr: Brokers,
    },
    /// Following `leader` (None: the registration names no leader).
    Follower {
        leader: Option<BrokerId>,
    },
}

/// The registrations of `partition` (e.g. `soak-0`) that `broker`'s
/// state-change log shows applied. Lines about other partitions, and
/// "Skipped the become-..." lines (a registration the broker already had),
/// are not applications. A line that names the partition's start as
/// leader or follower but does not parse is an error.
pub fn parse(broker: BrokerId, partition: &str, log: &str) -> Result<Vec<Applied>, String> {
    let leader_mark = format!("] Leader {partition} ");
    let follower_mark = format!("] Follower {partition} starts");
    let mut out = Vec::new();
    for (n, line) in log.lines().enumerate() {
        let at = |why: &str| {
            format!(
                "broker {broker} state-change.log line {}: {why}: {line}",
                n + 1
            )
        };
        let leader = line.contains(&leader_mark) && line.contains(" starts at leader epoch ");
        let follower = line.contains(&follower_mark);
        if !leader && !follower {
            continue;
        }
        let num = |key: &str, end: &[char]| -> Result<i64, String> {
            let start = line.find(key).ok_or_else(|| at(&format!("no {key:?}")))? + key.len();
            let rest = &line[start..];
            let stop = rest.find(end).unwrap_or(rest.len());
            rest[..stop]
                .trim()
                .parse()
                .map_err(|_| at(&format!("{key:?} is not a number")))
        };
        let offset = |key: &str, end: &[char]| -> Result<u64, String> {
            u64::try_from(num(key, end)?).map_err(|_| at(&format!("{key:?} is negative")))
        };
        let role = if leader {
            let start = line.find(", ISR [").ok_or_else(|| at("no ISR"))? + ", ISR [".len();
            let stop = line[start..].find(']').ok_or_else(|| at("no ISR end"))?;
            let isr = line[start..start + stop]
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| {
                    s.trim()
                        .parse()
                        .map_err(|_| at("an ISR member is not a broker id"))
                })
                .collect::<Result<Vec<BrokerId>, String>>()?;
            Role::Leader { isr }
        } else {
            let leader = num("Current leader is ", &['.'])?;
            Role::Follower {
                leader: BrokerId::try_from(leader).ok(),
            }
        };
        out.push(Applied {
            broker,
            line: n + 1,
            leader_epoch: num("starts at leader epoch ", &[' '])?,
            partition_epoch: num("with partition epoch ", &[' ', ','])?,
            log_end_offset: offset(" from offset ", &[' '])?,
            high_watermark: offset("high watermark ", &[',', '.'])?,
            role,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
[2026-12-03 14:23:23,347] INFO [Broker id=2] Creating new partition soak-0 with topic id F. (state.change.logger)
[2026-12-03 14:23:23,438] INFO [Broker id=2] Leader soak-0 with topic id Some(F) starts at leader epoch 0 from offset 0 with partition epoch 0, high watermark 0, ISR [2,3,1], adding replicas [] and removing replicas [] . Previous leader None and previous leader epoch was -1. (state.change.logger)
[2026-12-03 14:23:27,971] INFO [Broker id=2] Follower soak-0 starts at leader epoch 1 from offset 578 with partition epoch 1 and high watermark 577. Current leader is 3. Previous leader Some(2) and previous leader epoch was 0. (state.change.logger)
[2026-12-03 14:23:36,075] INFO [Broker id=2] Skipped the become-follower state change for soak-0 with topic id Some(F), partition registration PartitionRegistration(leader=3) (state.change.logger)
";

    #[test]
    fn leader_and_follower_lines_are_read() {
        let applied = parse(2, "soak-0", LOG).unwrap();
        assert_eq!(
            applied,
            vec![
                Applied {
                    broker: 2,
                    line: 2,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    log_end_offset: 0,
                    high_watermark: 0,
                    role: Role::Leader { isr: vec![2, 3, 1] },
                },
                Applied {
                    broker: 2,
                    line: 3,
                    leader_epoch: 1,
                    partition_epoch: 1,
                    log_end_offset: 578,
                    high_watermark: 577,
                    role: Role::Follower { leader: Some(3) },
                },
            ]
        );
        assert!(parse(2, "other-0", LOG).unwrap().is_empty());
    }

    #[test]
    fn a_start_line_that_does_not_parse_is_named() {
        let broken = LOG.replace("from offset 578", "from offset x");
        let err = parse(2, "soak-0", &broken).unwrap_err();
        assert!(
            err.contains("line 3") && err.contains("from offset"),
            "{err}"
        );
    }
}
