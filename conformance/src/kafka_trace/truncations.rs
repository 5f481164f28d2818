//! The followers' truncations: each time a follower cut its log at its
//! leader's word, read from its `server.log` (the fetcher thread's INFO
//! lines), and checked against the leader epochs the leaders' lines fixed
//! and against the follower's next fetch.
//!
//! Kafka's follower truncates in two places of `AbstractFetcherThread`:
//!
//! - "Truncating partition P with OffsetTruncationState(offset=X,
//!   completed=C) due to leader epoch and offset EpochEndOffset(...,
//!   leaderEpoch=E', endOffset=O)" (`maybeTruncateToEpochEndOffsets`):
//!   the leader answered a fetch with a diverging epoch, E' ending at O
//!   in its leader epoch cache (`Partition.readRecords`,
//!   `LeaderEpochFileCache.endOffsetFor`; the model's
//!   `truncation::fetch_divergence`), and the follower cut to X;
//! - "Truncating partition P with OffsetTruncationState(offset=X, ...) due
//!   to local high watermark H" (`truncateToHighWatermark`): a follower with
//!   no epoch to send cut to its own HW.
//!
//! What is checked, each a property of the model's truncation rule:
//!
//! - **The leader's answer.** Every epoch's start is fixed by its leader's
//!   "starts at leader epoch E from offset O" line; a leader's cache holds
//!   some of those epochs, and its own last. So an answer E' < E (the
//!   leader's epoch) ends where one of the later epochs up to E starts,
//!   and no later than the leader's own start; an answer E' = E ends at
//!   or past it (its log end). E' must be an epoch some leader began.
//! - **The cut.** A follower never cuts past the leader's end offset:
//!   X <= O (`getOffsetTruncationState`, the model's `truncate_to`).
//! - **The next fetch.** The follower fetches again from X: its next fetch
//!   the leader recorded in that tenure is from X, unless the follower
//!   registered again (a restart) in between.
//!
//! A diverging answer from a leader the trace does not show leading at that
//! time (a stalled leader's tenure ended) is counted, not checked.

use std::fmt;

use super::metadata::BrokerId;
use super::partition_log::{LeaderStep, PartitionLine};
use super::state_change::{log4j_ms, Applied, Role};

/// One truncation a follower logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    pub follower: BrokerId,
    pub leader: BrokerId,
    /// The line's position in the follower's server.log (1-based).
    pub line: usize,
    pub at_ms: u64,
    /// Where the follower cut its log.
    pub offset: u64,
    pub completed: bool,
    pub why: Why,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// The leader's diverging epoch and where it ends.
    Diverging { epoch: i64, end_offset: u64 },
    /// No epoch to send: the follower cut to its own HW.
    LocalHighWatermark,
}

const DIVERGING: &str = " due to leader epoch and offset EpochEndOffset(";
const LOCAL_HW: &str = " due to local high watermark ";

/// The truncations of `partition` (e.g. `soak-0`) in `follower`'s
/// server.log, in the log's order. A line that names one but does not
/// parse is an error: a skipped truncation would go unchecked.
pub fn parse(follower: BrokerId, partition: &str, log: &str) -> Result<Vec<Truncation>, String> {
    let ident = format!("Truncating partition {partition} with ");
    let mut out = Vec::new();
    for (n, line) in log.lines().enumerate() {
        if !line.contains(&ident) || !line.contains("[ReplicaFetcher ") {
            continue;
        }
        let at = |why: &str| format!("broker {follower} server.log line {}: {why}: {line}", n + 1);
        let field = |name: &str| -> Result<&str, String> {
            let start = line.find(name).ok_or_else(|| at(&format!("no {name:?}")))? + name.len();
            let rest = &line[start..];
            Ok(&rest[..rest.find([',', ')', ' ']).unwrap_or(rest.len())])
        };
        let number = |name: &str| -> Result<u64, String> {
            field(name)?
                .parse()
                .map_err(|_| at(&format!("{name:?} is not an offset")))
        };
        let why = if line.contains(DIVERGING) {
            let answer = &line[line.find(DIVERGING).unwrap_or(0)..];
            let in_answer = |name: &str| -> Result<i64, String> {
                let start = answer
                    .find(name)
                    .ok_or_else(|| at(&format!("no {name:?} in the leader's answer")))?
                    + name.len();
                let rest = &answer[start..];
                rest[..rest.find([',', ')']).unwrap_or(rest.len())]
                    .parse()
                    .map_err(|_| at(&format!("{name:?} is not a number")))
            };
            let end_offset = u64::try_from(in_answer("endOffset=")?)
                .map_err(|_| at("the leader's end offset is undefined"))?;
            Why::Diverging {
                epoch: in_answer("leaderEpoch=")?,
                end_offset,
            }
        } else if line.contains(LOCAL_HW) {
            Why::LocalHighWatermark
        } else {
            return Err(at("a truncation for no reason this reader knows"));
        };
        out.push(Truncation {
            follower,
            leader: BrokerId::try_from(number("leaderId=")?)
                .map_err(|_| at("the leader is not a broker id"))?,
            line: n + 1,
            at_ms: log4j_ms(line).ok_or_else(|| at("no log4j time"))?,
            offset: number("(offset=")?,
            completed: field("completed=")? == "true",
            why,
        });
    }
    Ok(out)
}

/// What the followers' truncations showed.
#[derive(Clone, Debug, Default)]
pub struct TruncationValidation {
    pub truncations: usize,
    /// Diverging-epoch answers checked against the leaders' epoch starts.
    pub answers_checked: usize,
    /// Truncations whose next recorded fetch was found, and from the cut.
    pub resumed_checked: usize,
    /// Diverging answers from a leader no leader line shows leading then.
    pub unplaced: usize,
    pub misfit: Option<String>,
    pub misfit_ms: Option<u64>,
}

impl fmt::Display for TruncationValidation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} follower truncations: {} leaders' answers held against the epochs' starts, {} next fetches from the cut; {} under a leader no line shows leading then",
            self.truncations, self.answers_checked, self.resumed_checked, self.unplaced
        )
    }
}

/// Checks every truncation (see the module documentation). `applied`: the
/// brokers' registrations (their leader lines fix each epoch's start);
/// `lines`: the leaders' steps (their recorded fetches).
pub fn validate(
    truncations: &[Truncation],
    applied: &[Applied],
    lines: &[PartitionLine],
) -> TruncationValidation {
    let mut v = TruncationValidation::default();
    // Each epoch's start, from the line of the leader that began it.
    let starts: Vec<(i64, u64)> = applied
        .iter()
        .filter(|a| matches!(a.role, Role::Leader { .. }))
        .map(|a| (a.leader_epoch, a.log_end_offset))
        .collect();
    for t in truncations {
        v.truncations += 1;
        let why = match t.why {
            Why::Diverging { epoch, end_offset } => {
                answer(t, epoch, end_offset, applied, &starts, &mut v)
            }
            Why::LocalHighWatermark => None,
        };
        let why = why.or_else(|| resumed(t, applied, lines, &mut v));
        if let Some(why) = why {
            v.misfit = Some(format!(
                "broker {} (server.log line {}) truncated to {} under leader {}: {why}",
                t.follower, t.line, t.offset, t.leader
            ));
            v.misfit_ms = Some(t.at_ms);
            return v;
        }
    }
    v
}

/// Why the leader's diverging answer `answered` ending at `end_offset`, or
/// the cut, does not fit, if it does not.
fn answer(
    t: &Truncation,
    answered: i64,
    end_offset: u64,
    applied: &[Applied],
    starts: &[(i64, u64)],
    v: &mut TruncationValidation,
) -> Option<String> {
    // The leader's tenure: its latest registration at or before the cut,
    // which must make it leader.
    let Some(tenure) = applied
        .iter()
        .filter(|a| a.broker == t.leader && a.at_ms <= t.at_ms)
        .max_by_key(|a| (a.at_ms, a.line))
        .filter(|a| matches!(a.role, Role::Leader { .. }))
    else {
        v.unplaced += 1;
        return None;
    };
    let (epoch, start) = (tenure.leader_epoch, tenure.log_end_offset);
    v.answers_checked += 1;
    let began = starts.iter().any(|&(e, _)| e == answered);
    let fits = began
        && if answered == epoch {
            end_offset >= start
        } else {
            answered < epoch
                && end_offset <= start
                && starts
                    .iter()
                    .any(|&(e, s)| answered < e && e <= epoch && s == end_offset)
        };
    if !fits {
        return Some(format!(
            "the leader's answer, epoch {answered} ending at {end_offset}, is not in a cache of the epochs leaders began (leader {} leads epoch {epoch} from offset {start}; epochs began at {starts:?})",
            t.leader
        ));
    }
    (t.offset > end_offset)
        .then(|| format!("past the leader's end offset {end_offset} for epoch {answered}"))
}

/// Why the follower's next fetch the leader recorded, before the follower
/// registered again, is not from the cut, if it is not. (A cut to the local
/// HW asks no leader: it may come before the leader's own line.)
fn resumed(
    t: &Truncation,
    applied: &[Applied],
    lines: &[PartitionLine],
    v: &mut TruncationValidation,
) -> Option<String> {
    let again = applied
        .iter()
        .filter(|a| a.broker == t.follower && a.at_ms > t.at_ms)
        .map(|a| a.at_ms)
        .min()
        .unwrap_or(u64::MAX);
    let (line, offset) = lines.iter().find_map(|l| match l.step {
        LeaderStep::Recorded { follower, offset }
            if l.broker == t.leader
                && follower == t.follower
                && (t.at_ms..again).contains(&l.at_ms) =>
        {
            Some((l.line, offset))
        }
        _ => None,
    })?;
    v.resumed_checked += 1;
    (offset != t.offset).then(|| {
        format!(
            "its next fetch the leader recorded (partition.log line {line}) is from {offset}, not from the cut"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIVERGED: &str = "[2026-12-04 16:47:02,101] INFO [ReplicaFetcher replicaId=3, leaderId=1, fetcherId=0] Truncating partition soak-0 with TruncationState(offset=2301, completed=true) due to leader epoch and offset EpochEndOffset(errorCode=0, partition=0, leaderEpoch=0, endOffset=2301) (kafka.server.ReplicaFetcherThread)";
    const FROM_HW: &str = "[2026-12-04 16:46:21,218] INFO [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Truncating partition soak-0 with TruncationState(offset=0, completed=true) due to local high watermark 0 (kafka.server.ReplicaFetcherThread)";

    #[test]
    fn both_kinds_of_truncation_line_are_read() {
        let log = format!("{FROM_HW}\nsomething else\n{DIVERGED}\n");
        let t = parse(3, "soak-0", &log).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].leader, t[0].offset, t[0].line), (3, 0, 1));
        assert_eq!(t[0].why, Why::LocalHighWatermark);
        assert_eq!((t[1].leader, t[1].offset, t[1].line), (1, 2301, 3));
        assert!(t[1].completed);
        assert_eq!(
            t[1].why,
            Why::Diverging {
                epoch: 0,
                end_offset: 2301
            }
        );
        assert!(parse(3, "other-0", &log).unwrap().is_empty());
        let torn = DIVERGED.replace("endOffset=2301", "endOffset=");
        let e = parse(3, "soak-0", &torn).unwrap_err();
        assert!(e.contains("line 1") && e.contains("endOffset"), "{e}");
    }

    fn leader(broker: u32, epoch: i64, from: u64, at_ms: u64) -> Applied {
        Applied {
            broker,
            line: 1,
            at_ms,
            leader_epoch: epoch,
            partition_epoch: epoch,
            log_end_offset: from,
            high_watermark: 0,
            role: Role::Leader { isr: vec![broker] },
        }
    }

    fn diverged(epoch: i64, end_offset: u64, offset: u64, at_ms: u64) -> Truncation {
        Truncation {
            follower: 3,
            leader: 1,
            line: 7,
            at_ms,
            offset,
            completed: true,
            why: Why::Diverging { epoch, end_offset },
        }
    }

    fn recorded(offset: u64, at_ms: u64) -> PartitionLine {
        PartitionLine {
            broker: 1,
            line: 9,
            at_ms,
            step: LeaderStep::Recorded {
                follower: 3,
                offset,
            },
        }
    }

    #[test]
    fn an_answer_and_a_cut_the_epochs_explain_fit_and_others_are_misfits() {
        // Epoch 0 from 0 (broker 3), epoch 1 from 40 (broker 2), epoch 2
        // from 55 (broker 1, leading at 3000 ms).
        let applied = [
            leader(3, 0, 0, 1000),
            leader(2, 1, 40, 2000),
            leader(1, 2, 55, 3000),
        ];
        let fetch = [recorded(40, 3600)];
        // Epoch 0 ends where epoch 1 began (broker 1 had it) or where
        // epoch 2 did (broker 1 never saw epoch 1).
        for end in [40, 55] {
            let v = validate(&[diverged(0, end, 40, 3500)], &applied, &fetch);
            assert_eq!(v.misfit, None);
            assert_eq!((v.answers_checked, v.resumed_checked), (1, 1));
        }
        // Ending where no epoch began: a misfit.
        let v = validate(&[diverged(0, 47, 40, 3500)], &applied, &fetch);
        assert!(v.misfit.unwrap().contains("not in a cache"));
        // A cut past the leader's end offset: a misfit.
        let v = validate(&[diverged(0, 40, 41, 3500)], &applied, &[]);
        assert!(v.misfit.unwrap().contains("past the leader's end offset"));
        // The next fetch not from the cut: a misfit.
        let v = validate(
            &[diverged(0, 40, 40, 3500)],
            &applied,
            &[recorded(38, 3600)],
        );
        assert!(v.misfit.unwrap().contains("not from the cut"));
        // Before broker 1 leads, the truncation is not placed.
        let v = validate(&[diverged(0, 40, 40, 2500)], &applied, &fetch);
        assert_eq!((v.unplaced, v.answers_checked, v.misfit), (1, 0, None));
    }
}
