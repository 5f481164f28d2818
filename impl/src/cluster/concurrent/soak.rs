//! Soaking the concurrent driver under a nemesis: the rule sets to run it
//! with (today's, and the historical ones that lose records), and the
//! figures of a run: what was lost, what vanished after it was read, and
//! whether logs disagree below the HW.

use std::time::Duration;

use super::{ConcurrentConfig, Nemesis, NemesisFault, RunReport};
use crate::replication::{Acks, TruncationMode};

/// The rules a soak runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuleSet {
    /// acks=all, min.insync.replicas=2, KIP-320 fencing, KIP-966 ELR,
    /// unclean election off: nothing acknowledged or read may be lost.
    /// (Also by the model's preset name, as each rule set below.)
    #[value(alias = "safe")]
    Today,
    /// acks=1: the leader acknowledges on append.
    #[value(alias = "acks-1")]
    Acks1,
    /// min.insync.replicas=1 without the ELR: the leader alone may commit.
    #[value(alias = "min-isr-1")]
    MinIsr1,
    /// Unclean leader election on (with min.insync.replicas=1, no ELR, as
    /// Kafka's defaults once were).
    #[value(alias = "unclean-election")]
    Unclean,
    /// Followers truncate to their HW (before KIP-101, and before KIP-320's
    /// fencing).
    HwTruncation,
    /// Epoch truncation without KIP-320's fencing of fetches.
    Unfenced,
}

impl RuleSet {
    pub const ALL: [RuleSet; 6] = [
        RuleSet::Today,
        RuleSet::Acks1,
        RuleSet::MinIsr1,
        RuleSet::Unclean,
        RuleSet::HwTruncation,
        RuleSet::Unfenced,
    ];

    /// The strand aimed at the loss these rules allow: acks=1 loses a
    /// record only the leader had (no shrink needed, any crash);
    /// min.insync.replicas=1 without the ELR, one the leader alone
    /// committed and lost in an unclean crash; unclean election, one the
    /// leader alone committed before an out-of-sync follower took over.
    /// Today's rules (and the truncation rule sets, whose losses need
    /// leader changes a strand does not aim at) get the unclean strand
    /// after a shrink, which the ELR must survive.
    pub fn strand(self) -> NemesisFault {
        let (shrink, clean) = match self {
            RuleSet::Acks1 => (false, true),
            RuleSet::Unclean => (true, true),
            RuleSet::MinIsr1 | RuleSet::Today | RuleSet::HwTruncation | RuleSet::Unfenced => {
                (true, false)
            }
        };
        NemesisFault::Strand { shrink, clean }
    }
}

/// A run of `seconds` under `rules` with every nemesis fault, chosen by
/// `seed`; its logs flushed only on a clean shutdown (Kafka's default:
/// an unclean crash loses every record not yet on another replica, which
/// is how min.insync.replicas=1 loses records).
pub fn soak_config(rules: RuleSet, seed: u64, duration: Duration) -> ConcurrentConfig {
    let mut c = ConcurrentConfig::new(3);
    c.duration = duration;
    c.consumers = 1;
    c.producers = 1;
    c.max_in_flight = 4;
    c.replication.replica_lag_time_max_ms = 150;
    c.settle_timeout = Duration::from_secs(10);
    c.nemesis = Some(Nemesis::all(
        seed,
        Duration::from_millis(60),
        Duration::from_millis(150),
    ));

    let r = &mut c.replication;
    match rules {
        RuleSet::Today => {}
        RuleSet::Acks1 => c.acks = Acks::Leader,
        RuleSet::MinIsr1 => {
            r.min_insync_replicas = 1;
            r.elr = false;
        }
        RuleSet::Unclean => {
            r.min_insync_replicas = 1;
            r.elr = false;
            c.unclean_leader_election = true;
        }
        RuleSet::HwTruncation => {
            r.truncation = TruncationMode::Hw;
            r.fencing = false;
            r.elr = false;
        }
        RuleSet::Unfenced => {
            r.truncation = TruncationMode::EpochIterative;
            r.fencing = false;
            r.elr = false;
        }
    }
    c
}

/// Paces a soak so that trace validation can follow it past its faults
/// (`highwater-soak --paced`): producers send bursts of at most 4 records
/// (the model's) and pause 60 ms after each, once every broker up has
/// flushed and checkpointed the burst (however slow the machine), while
/// every broker flushes and checkpoints its HW every 10 ms; between bursts
/// the partition can settle, and validation resumes there. The nemesis is
/// unchanged.
pub fn pace_for_validation(c: &mut ConcurrentConfig) {
    c.max_in_flight = c.max_in_flight.min(4);
    c.records_per_request = 1;
    c.bursts = Some(super::Bursts {
        records: 4,
        pause: Duration::from_millis(60),
    });
    c.flush_interval = Some(Duration::from_millis(10));
    c.replication.hw_checkpoint = crate::replication::HwCheckpointPolicy::IntervalMs(10);
}

/// What one soaked run shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SoakFigures {
    pub records_sent: u64,
    pub acknowledged: u64,
    /// Acknowledged records not at their offset in the final leader's log.
    pub lost: u64,
    /// Records read below an HW that the final leader's log no longer
    /// holds there.
    pub vanished: u64,
    /// Pairs of replicas whose final logs disagree below both HWs.
    pub disagreeing_below_hw: u64,
    pub faults: u64,
    /// Every replica back, caught up and in the ISR after the last fault.
    pub healed: bool,
    /// Followers that made no progress in the whole settle phase.
    pub stalled: u64,
}

impl SoakFigures {
    pub fn of(report: &RunReport) -> SoakFigures {
        let logs = &report.final_logs;
        let hw = |r: usize| {
            report
                .final_states
                .get(r)
                .and_then(|s| s.as_ref())
                .map_or(0, |s| s.high_watermark as usize)
        };
        let mut disagreeing = 0;
        for a in 0..logs.len() {
            for b in a + 1..logs.len() {
                let n = hw(a).min(hw(b));
                let agree =
                    logs[a].len() >= n && logs[b].len() >= n && logs[a][..n] == logs[b][..n];
                disagreeing += u64::from(!agree);
            }
        }
        SoakFigures {
            records_sent: report.records_sent,
            acknowledged: report.acked.len() as u64,
            lost: report.lost_acknowledged().len() as u64,
            vanished: report.consumed_not_in_final_log().len() as u64,
            disagreeing_below_hw: disagreeing,
            faults: report.nemesis_faults.values().sum::<u64>() + report.crashes.len() as u64
                - report
                    .nemesis_faults
                    .iter()
                    .filter(|(k, _)| k.starts_with("Crash"))
                    .map(|(_, v)| v)
                    .sum::<u64>(),
            healed: report.settled,
            stalled: report.stalled_followers.len() as u64,
        }
    }

    /// Anything lost: acknowledged, read, or below an HW.
    pub fn loss(&self) -> bool {
        self.lost > 0 || self.vanished > 0 || self.disagreeing_below_hw > 0
    }
}

#[cfg(test)]
mod names {
    use super::RuleSet;
    use clap::ValueEnum;

    /// Each rule set answers to its own name and to the name of the model's
    /// preset with the same rules (`highwater presets`).
    #[test]
    fn rule_sets_take_the_presets_names_too() {
        for (rules, own, preset) in [
            (RuleSet::Today, "today", "safe"),
            (RuleSet::Acks1, "acks1", "acks-1"),
            (RuleSet::MinIsr1, "min-isr1", "min-isr-1"),
            (RuleSet::Unclean, "unclean", "unclean-election"),
            (RuleSet::HwTruncation, "hw-truncation", "hw-truncation"),
            (RuleSet::Unfenced, "unfenced", "unfenced"),
        ] {
            assert_eq!(RuleSet::from_str(own, false), Ok(rules));
            assert_eq!(RuleSet::from_str(preset, false), Ok(rules), "{preset}");
        }
    }
}
