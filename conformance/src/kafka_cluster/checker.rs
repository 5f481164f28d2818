//! The client-side check: every acknowledged record is on the log read
//! back from the final leader, at the offset it was acknowledged at, and
//! in the order of those offsets. A send that ended in an error or a
//! timeout is indeterminate: its record may be there or not.

use std::collections::BTreeMap;

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
}

impl Verdict {
    /// Whether acknowledged data was lost or rewritten, or foreign data appeared.
    pub fn violated(&self) -> bool {
        !self.lost.is_empty() || !self.moved.is_empty() || !self.unexpected.is_empty()
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
}
