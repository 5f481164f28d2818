//! The client-side check: every acknowledged record is on the log read
//! back from the final leader, at the offset it was acknowledged at, and
//! in the order of those offsets. A send that ended in an error or a
//! timeout is indeterminate: its record may be there or not. And what the
//! consumer beside the producer read during the run (`check_reads`):
//! nothing read then vanished from that final log, reads in offset order
//! within each of the consumer's sessions, and no value read that the
//! producer did not send.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One send's outcome, as the producer printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Acked { value: u64, offset: u64 },
    Indeterminate { value: u64, error: String },
}

/// One record read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub offset: u64,
    pub value: String,
}

/// One record the consumer beside the producer read during the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    /// The consumer's session: one unbroken run of positions (a new one
    /// after Kafka said the position was no longer valid, or an error).
    pub session: u64,
    pub offset: u64,
    pub value: String,
    /// The wall clock (ms since the epoch) when it was read.
    pub ms: u64,
}

/// What the consumer read, against the final log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reads {
    /// Records read (a record read in two sessions counts twice).
    pub reads: u64,
    pub sessions: u64,
    /// The errors the consumer printed (and went on after).
    pub errors: u64,
    /// The first of them.
    pub first_error: Option<String>,
    /// Whether the consumer ended with its final line (it was not killed).
    pub done: bool,
    /// Distinct (offset, value) pairs read.
    pub distinct: u64,
    /// Read at an offset the final log does not hold with that value:
    /// (offset, value read, what the final log holds there, if anything),
    /// each pair once, in offset order.
    pub vanished: Vec<(u64, String, Option<String>)>,
    /// Reads at or below the offset read before them in the same session:
    /// (session, offset before, offset).
    pub out_of_order: Vec<(u64, u64, u64)>,
    /// Values read that no send produced (not a number, or never sent).
    pub unsent: Vec<Read>,
}

impl Reads {
    pub fn violated(&self) -> bool {
        !self.vanished.is_empty() || !self.out_of_order.is_empty() || !self.unsent.is_empty()
    }
}

/// Checks what the consumer read during the run against the final log and
/// the `sent` values: a record read at offset o with value v has vanished
/// when the final log does not hold v at o.
pub fn check_reads(
    sent: u64,
    reads: &[Read],
    errors: &[String],
    done: bool,
    log: &[Record],
) -> Reads {
    let at: HashMap<u64, &str> = log.iter().map(|r| (r.offset, r.value.as_str())).collect();
    let mut out = Reads {
        reads: reads.len() as u64,
        errors: errors.len() as u64,
        first_error: errors.first().cloned(),
        done,
        ..Reads::default()
    };
    let mut seen: BTreeSet<(u64, &str)> = BTreeSet::new();
    let mut sessions: BTreeSet<u64> = BTreeSet::new();
    let mut last: HashMap<u64, u64> = HashMap::new();
    for r in reads {
        sessions.insert(r.session);
        if let Some(&before) = last.get(&r.session) {
            if r.offset <= before {
                out.out_of_order.push((r.session, before, r.offset));
            }
        }
        last.insert(r.session, r.offset);
        if !matches!(r.value.parse::<u64>(), Ok(v) if v < sent) {
            out.unsent.push(r.clone());
        }
        if seen.insert((r.offset, r.value.as_str())) && at.get(&r.offset) != Some(&r.value.as_str())
        {
            out.vanished.push((
                r.offset,
                r.value.clone(),
                at.get(&r.offset).map(|v| v.to_string()),
            ));
        }
    }
    out.sessions = sessions.len() as u64;
    out.distinct = seen.len() as u64;
    out.vanished.sort();
    out
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub sent: u64,
    pub acknowledged: u64,
    pub indeterminate: u64,
    /// Acknowledged values not on the log at all.
    pub lost: Vec<u64>,
    /// Acknowledged values on the log at another offset than acknowledged
    /// (the acknowledged offset was rewritten): (value, acked, found).
    pub moved: Vec<(u64, u64, u64)>,
    /// Values on the log more than once.
    pub duplicated: Vec<u64>,
    /// Records on the log that no send produced (not a number, or never sent).
    pub unexpected: Vec<Record>,
    /// Indeterminate sends whose record is on the log.
    pub indeterminate_present: u64,
    pub log_length: u64,
    /// What the consumer beside the producer read, when one ran.
    pub reads: Option<Reads>,
}

impl Verdict {
    /// Whether acknowledged data was lost or rewritten, or foreign data
    /// appeared, or a record read vanished (or reads came out of order, or
    /// read a value never sent).
    pub fn violated(&self) -> bool {
        !self.lost.is_empty()
            || !self.moved.is_empty()
            || !self.unexpected.is_empty()
            || self.reads.as_ref().is_some_and(Reads::violated)
    }

    /// How many distinct records read vanished (0 when no consumer ran).
    pub fn vanished(&self) -> usize {
        self.reads.as_ref().map_or(0, |r| r.vanished.len())
    }
}

/// Checks the outcomes of `sent` sends against the log read back.
pub fn check(sent: u64, outcomes: &[Outcome], log: &[Record]) -> Verdict {
    let mut v = Verdict {
        sent,
        log_length: log.len() as u64,
        ..Verdict::default()
    };
    let mut at: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for r in log {
        match r.value.parse::<u64>() {
            Ok(value) if value < sent => at.entry(value).or_default().push(r.offset),
            _ => v.unexpected.push(r.clone()),
        }
    }
    v.duplicated = at
        .iter()
        .filter(|(_, o)| o.len() > 1)
        .map(|(&val, _)| val)
        .collect();
    for outcome in outcomes {
        match outcome {
            Outcome::Acked { value, offset } => {
                v.acknowledged += 1;
                match at.get(value) {
                    None => v.lost.push(*value),
                    Some(offsets) if !offsets.contains(offset) => {
                        v.moved.push((*value, *offset, offsets[0]))
                    }
                    Some(_) => {}
                }
            }
            Outcome::Indeterminate { value, .. } => {
                v.indeterminate += 1;
                if at.contains_key(value) {
                    v.indeterminate_present += 1;
                }
            }
        }
    }
    v.lost.sort_unstable();
    v.moved.sort_unstable();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(values: &[(u64, &str)]) -> Vec<Record> {
        values
            .iter()
            .map(|&(offset, v)| Record {
                offset,
                value: v.into(),
            })
            .collect()
    }

    #[test]
    fn a_complete_log_passes_and_a_missing_acknowledged_record_is_lost() {
        let outcomes = vec![
            Outcome::Acked {
                value: 0,
                offset: 0,
            },
            Outcome::Indeterminate {
                value: 1,
                error: "timeout".into(),
            },
            Outcome::Acked {
                value: 2,
                offset: 1,
            },
        ];
        let ok = check(3, &outcomes, &log(&[(0, "0"), (1, "2")]));
        assert!(!ok.violated(), "{ok:?}");
        assert_eq!((ok.acknowledged, ok.indeterminate), (2, 1));
        let lost = check(3, &outcomes, &log(&[(0, "0")]));
        assert_eq!(lost.lost, vec![2]);
        assert!(lost.violated());
        let moved = check(3, &outcomes, &log(&[(0, "0"), (1, "1"), (2, "2")]));
        assert_eq!(moved.moved, vec![(2, 1, 2)]);
        let foreign = check(3, &outcomes, &log(&[(0, "0"), (1, "2"), (2, "x")]));
        assert_eq!(foreign.unexpected.len(), 1);
    }

    fn read(session: u64, offset: u64, value: &str) -> Read {
        Read {
            session,
            offset,
            value: value.into(),
            ms: 0,
        }
    }

    #[test]
    fn a_read_record_absent_from_the_final_log_has_vanished() {
        let outcomes = vec![
            Outcome::Acked {
                value: 0,
                offset: 0,
            },
            Outcome::Acked {
                value: 1,
                offset: 1,
            },
            Outcome::Acked {
                value: 2,
                offset: 2,
            },
        ];
        // An unclean election: offsets 1 and 2 were read, then the new
        // leader's log held only offset 0, and value 2 was written again at 1.
        let reads = vec![
            read(0, 0, "0"),
            read(0, 1, "1"),
            read(0, 2, "2"),
            read(1, 1, "2"),
        ];
        let final_log = log(&[(0, "0"), (1, "2")]);
        let r = check_reads(3, &reads, &["truncated".into()], true, &final_log);
        assert_eq!(
            r.vanished,
            vec![
                (1, "1".to_string(), Some("2".to_string())),
                (2, "2".to_string(), None)
            ]
        );
        assert_eq!((r.reads, r.sessions, r.distinct), (4, 2, 4));
        assert!(r.out_of_order.is_empty() && r.unsent.is_empty());
        assert!(r.violated());
        let mut v = check(3, &outcomes, &final_log);
        v.reads = Some(r);
        assert_eq!(v.vanished(), 2);
        assert!(v.violated());

        // The same reads against a log that kept them: nothing vanished.
        let kept = log(&[(0, "0"), (1, "1"), (2, "2")]);
        let ok = check_reads(3, &reads[..3], &[], true, &kept);
        assert!(!ok.violated(), "{ok:?}");
        let mut v = check(3, &outcomes, &kept);
        v.reads = Some(ok);
        assert!(!v.violated());
    }

    #[test]
    fn reads_out_of_order_in_a_session_or_of_values_never_sent_fail() {
        let kept = log(&[(0, "0"), (1, "1"), (2, "2")]);
        let back = check_reads(
            3,
            &[read(0, 0, "0"), read(0, 2, "2"), read(0, 1, "1")],
            &[],
            true,
            &kept,
        );
        assert_eq!(back.out_of_order, vec![(0, 2, 1)]);
        assert!(back.vanished.is_empty() && back.violated());
        // A new session may start again below: not out of order.
        let again = check_reads(
            3,
            &[read(0, 0, "0"), read(0, 1, "1"), read(1, 0, "0")],
            &[],
            true,
            &kept,
        );
        assert!(!again.violated(), "{again:?}");
        assert_eq!(again.distinct, 2);
        let foreign = check_reads(3, &[read(0, 0, "7"), read(0, 1, "x")], &[], true, &kept);
        assert_eq!(foreign.unsent.len(), 2);
        assert!(foreign.violated());
    }
}
