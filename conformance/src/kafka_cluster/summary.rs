//! What one run saw, as printed at its end (and written to summary.txt).

use std::fmt;
use std::time::Duration;

use super::checker::Verdict;
use super::client::PartitionState;
use super::nemesis::Applied;
use super::Rules;
use crate::kafka_trace::KafkaValidation;

pub struct Summary {
    pub seed: Option<u64>,
    pub rules: Rules,
    pub started_in: Duration,
    pub verdict: Verdict,
    pub faults: Vec<Applied>,
    /// Every broker back, unfenced, and all three replicas in the ISR, within the bound.
    pub healed: bool,
    pub healed_in: Duration,
    pub leaders: Vec<i64>,
    pub final_state: Option<PartitionState>,
    pub took: Duration,
    /// The run's observations validated against the model, or why they
    /// could not be.
    pub validation: std::result::Result<KafkaValidation, String>,
}

impl Summary {
    /// Whether the run lost (or rewrote) acknowledged data, or a record a
    /// consumer read vanished from the final log (or reads broke order, or
    /// read a value never sent).
    pub fn lost(&self) -> bool {
        self.verdict.violated()
    }

    /// The first observation the model does not explain, or why the
    /// observations could not be validated at all.
    pub fn misfit(&self) -> Option<String> {
        match &self.validation {
            Ok(v) => v.misfit(),
            Err(e) => Some(format!("not validated: {e}")),
        }
    }

    /// Whether the leader changed at any point (a fault took effect).
    pub fn leader_changed(&self) -> bool {
        self.leaders.windows(2).any(|w| w[0] != w[1])
    }
}

/// The rule set a run's `summary.txt` (this summary, as printed) names on
/// its first line ("seed 3 rules acks1: sent ..."); None when it names
/// none this binary knows.
pub fn rules_named(summary_txt: &str) -> Option<Rules> {
    let first = summary_txt.lines().next()?;
    let after = &first[first.find(" rules ")? + " rules ".len()..];
    Rules::parse(&after[..after.find(':')?]).ok()
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = &self.verdict;
        let seed = self.seed.map_or("fixed".to_string(), |s| s.to_string());
        writeln!(
            f,
            "seed {seed} rules {}: sent {} acknowledged {} indeterminate {} ({} of them on the log) lost {}{}",
            self.rules.name(),
            v.sent,
            v.acknowledged,
            v.indeterminate,
            v.indeterminate_present,
            v.lost.len(),
            match &v.reads {
                Some(r) => format!(
                    " read {} ({} distinct, {} sessions, {} errors) vanished {}",
                    r.reads,
                    r.distinct,
                    r.sessions,
                    r.errors,
                    r.vanished.len()
                ),
                None => " (no consumer)".to_string(),
            }
        )?;
        writeln!(
            f,
            "  faults {} healed {} (in {:.1}s) log {} records, cluster started in {:.1}s, run took {:.1}s",
            self.faults.len(),
            if self.healed { "yes" } else { "no" },
            self.healed_in.as_secs_f64(),
            v.log_length,
            self.started_in.as_secs_f64(),
            self.took.as_secs_f64()
        )?;
        writeln!(f, "  leaders over the run: {:?}", self.leaders)?;
        for a in &self.faults {
            writeln!(f, "  fault {a}")?;
        }
        if let Some(s) = &self.final_state {
            writeln!(
                f,
                "  final partition: leader {} ISR {:?} ELR {:?}",
                s.leader, s.isr, s.elr
            )?;
        }
        let show = |n: usize| n.min(10);
        if !v.lost.is_empty() {
            writeln!(
                f,
                "  LOST acknowledged values (first {}): {:?}",
                show(v.lost.len()),
                &v.lost[..show(v.lost.len())]
            )?;
        }
        if !v.moved.is_empty() {
            writeln!(
                f,
                "  MOVED acknowledged values (value, acked offset, found offset; first {}): {:?}",
                show(v.moved.len()),
                &v.moved[..show(v.moved.len())]
            )?;
        }
        if !v.unexpected.is_empty() {
            writeln!(f, "  UNEXPECTED records: {}", v.unexpected.len())?;
        }
        if let Some(r) = &v.reads {
            if !r.vanished.is_empty() {
                writeln!(
                    f,
                    "  VANISHED reads (offset, value read, final log's value there; first {}): {:?}",
                    show(r.vanished.len()),
                    &r.vanished[..show(r.vanished.len())]
                )?;
            }
            if !r.out_of_order.is_empty() {
                writeln!(
                    f,
                    "  OUT OF ORDER reads (session, offset before, offset; first {}): {:?}",
                    show(r.out_of_order.len()),
                    &r.out_of_order[..show(r.out_of_order.len())]
                )?;
            }
            if !r.unsent.is_empty() {
                writeln!(f, "  UNSENT values read: {}", r.unsent.len())?;
            }
            if let Some(e) = &r.first_error {
                writeln!(f, "  the consumer's first error (of {}): {e}", r.errors)?;
            }
            if !r.done {
                writeln!(f, "  the consumer did not print its last line")?;
            }
        }
        if !v.duplicated.is_empty() {
            writeln!(f, "  duplicated values: {}", v.duplicated.len())?;
        }
        match &self.validation {
            Ok(validation) => write!(f, "  {validation}"),
            Err(e) => writeln!(f, "  NOT VALIDATED: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_rules_are_read_from_its_summary() {
        let first = "seed fixed rules acks1: sent 4150 acknowledged 4150 lost 1621\n  faults 1\n";
        assert_eq!(rules_named(first), Some(Rules::Acks1));
        assert_eq!(
            rules_named("seed 3 rules min-isr-1: sent 1"),
            Some(Rules::MinIsr1)
        );
        assert_eq!(rules_named("seed 3 rules sloppy: sent 1"), None);
        assert_eq!(rules_named(""), None);
    }
}
