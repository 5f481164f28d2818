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
    /// When the broker wrote the line: ms since the epoch, read from
    /// log4j's `[yyyy-MM-dd HH:mm:ss,SSS]` in UTC (the cluster's JVMs run
    /// with `-Duser.timezone=UTC`), on the same clock as `partition.log`'s.
    pub at_ms: u64,
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
            let isr = broker_list(&line[start..start + stop])
                .ok_or_else(|| at("an ISR member is not a broker id"))?;
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
            at_ms: log4j_ms(line).ok_or_else(|| at("no [yyyy-MM-dd HH:mm:ss,SSS] time first"))?,
            leader_epoch: num("starts at leader epoch ", &[' '])?,
            partition_epoch: num("with partition epoch ", &[' ', ','])?,
            log_end_offset: offset(" from offset ", &[' '])?,
            high_watermark: offset("high watermark ", &[',', '.'])?,
            role,
        });
    }
    Ok(out)
}

/// A leader told of its partition's new ISR by the metadata, in a leader
/// epoch it already had: "Skipped the become-leader state change ... since
/// it is already the leader with leader epoch E. Current high watermark H,
/// ISR [A,B]" (`Partition.makeLeader` returning false; the ISR is applied
/// all the same). This is how a leader learns an ISR the controller
/// changed on its own (a fenced follower).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsrLearnt {
    pub broker: BrokerId,
    pub line: usize,
    pub at_ms: u64,
    pub leader_epoch: i64,
    pub isr: Brokers,
}

/// Every [`IsrLearnt`] line of `partition` in `broker`'s state-change log.
pub fn parse_isr_learnt(
    broker: BrokerId,
    partition: &str,
    log: &str,
) -> Result<Vec<IsrLearnt>, String> {
    let mark = format!("Skipped the become-leader state change for {partition} ");
    let mut out = Vec::new();
    for (n, line) in log.lines().enumerate() {
        if !line.contains(&mark) {
            continue;
        }
        let at = |why: &str| {
            format!(
                "broker {broker} state-change.log line {}: {why}: {line}",
                n + 1
            )
        };
        // A registration older than the partition epoch the leader already
        // has (an AlterPartition answer told it a newer one first) is
        // skipped whole: nothing, not even its ISR, is applied
        // (`Partition.makeLeader`'s first check).
        let stale = "since the leader is already at a newer partition epoch ";
        if let Some(start) = line.find(stale) {
            let newer = number_before(&line[start + stale.len()..], '.')
                .ok_or_else(|| at("the newer partition epoch is not a number"))?;
            let skipped = line
                .find("partitionEpoch=")
                .and_then(|s| number_before(&line[s + "partitionEpoch=".len()..], ')'))
                .ok_or_else(|| at("no partitionEpoch in the skipped registration"))?;
            if skipped >= newer {
                return Err(at(&format!(
                    "a registration of partition epoch {skipped} skipped as older than {newer}"
                )));
            }
            continue;
        }
        let key = "already the leader with leader epoch ";
        let start = line.find(key).ok_or_else(|| at("no leader epoch"))? + key.len();
        let rest = &line[start..];
        let leader_epoch = rest[..rest.find('.').unwrap_or(rest.len())]
            .trim()
            .parse()
            .map_err(|_| at("the leader epoch is not a number"))?;
        let start = line.rfind(", ISR [").ok_or_else(|| at("no ISR"))? + ", ISR [".len();
        let stop = line[start..].find(']').ok_or_else(|| at("no ISR end"))?;
        let isr = broker_list(&line[start..start + stop])
            .ok_or_else(|| at("an ISR member is not a broker id"))?;
        out.push(IsrLearnt {
            broker,
            line: n + 1,
            at_ms: log4j_ms(line).ok_or_else(|| at("no [yyyy-MM-dd HH:mm:ss,SSS] time first"))?,
            leader_epoch,
            isr,
        });
    }
    Ok(out)
}

/// The number `text` starts with, up to `end`.
fn number_before(text: &str, end: char) -> Option<i64> {
    text[..text.find(end)?].trim().parse().ok()
}

/// Broker ids as Kafka prints a list: "2,3", "2, 3" or "" (none).
pub fn broker_list(list: &str) -> Option<Brokers> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().ok())
        .collect()
}

/// ms since the epoch of a line that starts with log4j's default
/// `[yyyy-MM-dd HH:mm:ss,SSS]`, read as UTC.
pub fn log4j_ms(line: &str) -> Option<u64> {
    let stamp = line.strip_prefix('[')?.get(..23)?;
    let b = stamp.as_bytes();
    let separators = [
        (4, b'-'),
        (7, b'-'),
        (10, b' '),
        (13, b':'),
        (16, b':'),
        (19, b','),
    ];
    if separators.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let field = |r: std::ops::Range<usize>| stamp.get(r)?.parse::<u64>().ok();
    let (year, month, day) = (field(0..4)?, field(5..7)?, field(8..10)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let secs = days_from_civil(year, month, day)? * 86_400
        + field(11..13)? * 3600
        + field(14..16)? * 60
        + field(17..19)?;
    Some(secs * 1000 + field(20..23)?)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar
/// (years from 1970): the usual era-based count.
fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    let y = if month <= 2 {
        year.checked_sub(1)?
    } else {
        year
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).checked_sub(719_468)
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
                    at_ms: 1796307803438,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    log_end_offset: 0,
                    high_watermark: 0,
                    role: Role::Leader { isr: vec![2, 3, 1] },
                },
                Applied {
                    broker: 2,
                    line: 3,
                    at_ms: 1796307807971,
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
    fn log4j_times_are_read_as_utc_ms() {
        // 1796356612642 is 2026-12-04T03:56:52.642Z.
        assert_eq!(
            log4j_ms("[2026-12-04 03:56:52,642] INFO x"),
            Some(1_796_356_612_642)
        );
        assert_eq!(log4j_ms("[1970-01-01 00:00:00,001] x"), Some(1));
        assert_eq!(
            log4j_ms("[2024-02-29 00:00:00,000] x"),
            Some(1_709_164_800_000)
        );
        for bad in [
            "2026-12-04 03:56:52,642",
            "[2026-13-04 03:56:52,642]",
            "[2026-12-04T03:56:52,642]",
            "[2026-12",
        ] {
            assert_eq!(log4j_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_isr_a_leader_learns_is_read() {
        let log = "[2026-12-04 03:56:52,769] INFO [Broker id=2] Skipped the become-leader state change for soak-0 with topic id Some(F), partition registration PartitionRegistration(isr=[2, 3], leader=2, leaderEpoch=1, partitionEpoch=3) and isNew=false since it is already the leader with leader epoch 1. Current high watermark 462, ISR [2,3], adding replicas [] and removing replicas []. (state.change.logger)";
        assert_eq!(
            parse_isr_learnt(2, "soak-0", log).unwrap(),
            vec![IsrLearnt {
                broker: 2,
                line: 1,
                at_ms: 1_796_356_612_769,
                leader_epoch: 1,
                isr: vec![2, 3]
            }]
        );
        assert!(parse_isr_learnt(2, "soak-0", &log.replace("ISR [2,3]", "ISR [2,x]")).is_err());
        assert!(parse_isr_learnt(2, "other-0", log).unwrap().is_empty());
    }

    #[test]
    fn a_registration_older_than_the_leaders_is_skipped_whole() {
        let log = "[2026-12-04 23:32:20,347] INFO [Broker id=1] Skipped the become-leader state change for soak-0 with topic id Some(F), partition registration PartitionRegistration(replicas=[1, 2, 3], isr=[1, 2], elr=[], leader=1, leaderRecoveryState=RECOVERED, leaderEpoch=2, partitionEpoch=6) and isNew=false since the leader is already at a newer partition epoch 7. (state.change.logger)";
        assert_eq!(parse_isr_learnt(1, "soak-0", log).unwrap(), vec![]);
        // Kafka skips only an older one: one that is not is not Kafka's line.
        let err = parse_isr_learnt(
            1,
            "soak-0",
            &log.replace("partitionEpoch=6", "partitionEpoch=7"),
        )
        .unwrap_err();
        assert!(
            err.contains("line 1") && err.contains("partition epoch 7 skipped as older than 7"),
            "{err}"
        );
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
