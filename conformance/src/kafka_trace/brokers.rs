//! The brokers' half: what each broker applied, held against the
//! controller's validated registrations, and the model's properties
//! checked where a broker's line shows its log.
//!
//! - Each registration a broker applied (leader or follower, at a leader
//!   epoch and partition epoch) must be the one the controller wrote at
//!   that partition epoch: same leader epoch (which the controller's half
//!   rebuilt by the model's epoch rule, so this checks that rule against
//!   the epochs Kafka really used), same leader, and for a leader the
//!   same ISR. Otherwise the trace does not fit.
//! - `HW <= LEO` (the model's `HW_WITHIN_LOG`) on every line.
//! - `acknowledged records survive` (the model's
//!   `ACKNOWLEDGED_RECORDS_SURVIVE`) at every election a broker's line
//!   shows: a record the producer saw acknowledged before the controller
//!   wrote the election (both on this host's wall clock) is on the new
//!   leader's log at its offset. The line gives the new leader's log end
//!   offset, so a record at or past it is not there; that a record below
//!   it is the same record is left to the client-side check of the log
//!   read back at the end.
//! - `committed records survive` (the model's `COMMITTED_RECORDS_SURVIVE`)
//!   at the same elections: the highest HW any leader published before the
//!   controller wrote the election (its `partition.log`, same clock) is at
//!   most the new leader's log end offset. And with the consumer's reads as
//!   the evidence of visibility: a record the consumer read before the
//!   election (it was below some leader's HW then) sits below the new
//!   leader's log end offset.
//! - Each loss is reported once: once an election has cut the log at its
//!   leader's log end offset, what stood at or above that cut before it is
//!   known lost, and a later election is held only against what was
//!   committed, read or acknowledged since, or below the cut ([`Cuts`]).

use std::fmt;

use highwater_model::properties::{
    ACKNOWLEDGED_RECORDS_SURVIVE, COMMITTED_RECORDS_SURVIVE, HW_WITHIN_LOG,
};

use super::controller::Registration;
use super::hw::HwMove;
use super::state_change::{Applied, Role};

/// An acknowledged record, with when the producer saw its acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    pub value: u64,
    pub offset: u64,
    pub at_ms: u64,
}

/// A record the consumer beside the producer read: it was below some
/// leader's HW (visible, the model's committed) at `at_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Visible {
    pub offset: u64,
    pub value: String,
    pub at_ms: u64,
}

/// A model property broken at a validated step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broken {
    pub property: &'static str,
    pub why: String,
    /// When: the CreateTime of the registration the line applied (of the
    /// election, for an election's check).
    pub at_ms: u64,
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.property, self.why)
    }
}

#[derive(Clone, Debug, Default)]
pub struct BrokerValidation {
    /// Lines held against the controller's registrations.
    pub applied: usize,
    /// Leaders' lines (elections) at which the records were checked, and
    /// how many acknowledgements came before them.
    pub elections_checked: usize,
    /// None when the acknowledgements had no times.
    pub acks_before_elections: Option<usize>,
    /// HW moves published before the elections checked; None when the
    /// brokers' partition.log was not kept.
    pub hw_moves_before_elections: Option<usize>,
    /// Records the consumer read before the elections checked; None when
    /// no consumer's reads were kept.
    pub reads_before_elections: Option<usize>,
    pub broken: Vec<Broken>,
    pub misfit: Option<String>,
    /// The CreateTime of the registration the misfit line applied, when
    /// the controller wrote one.
    pub misfit_ms: Option<u64>,
}

/// Holds every broker's applied registrations against the controller's.
pub fn validate(
    applied: &[Applied],
    registrations: &[Registration],
    acks: Option<&[Ack]>,
    hw_moves: Option<&[HwMove]>,
    reads: Option<&[Visible]>,
) -> BrokerValidation {
    let mut v = BrokerValidation {
        acks_before_elections: acks.map(|_| 0),
        hw_moves_before_elections: hw_moves.map(|_| 0),
        reads_before_elections: reads.map(|_| 0),
        ..BrokerValidation::default()
    };
    let mut moves: Vec<HwMove> = hw_moves.unwrap_or_default().to_vec();
    moves.sort_by_key(|m| m.at_ms);
    // Acknowledgements by time, to find those before an election at once.
    let mut by_time: Vec<Ack> = acks.unwrap_or_default().to_vec();
    by_time.sort_by_key(|a| a.at_ms);
    let mut reads_by_time: Vec<Visible> = reads.unwrap_or_default().to_vec();
    reads_by_time.sort_by_key(|r| r.at_ms);
    let cuts = Cuts(
        applied
            .iter()
            .filter(|a| matches!(a.role, Role::Leader { .. }))
            .filter_map(|a| Some((election(a, registrations)?.create_ms, a.log_end_offset)))
            .collect(),
    );
    for a in applied {
        v.applied += 1;
        let Some(r) = registration(a, registrations) else {
            v.misfit = Some(format!(
                "broker {} (state-change.log line {}) applied partition epoch {}, which the controller never wrote (it wrote {})",
                a.broker,
                a.line,
                a.partition_epoch,
                registrations.len()
            ));
            return v;
        };
        let fits = r.leader_epoch == a.leader_epoch
            && match &a.role {
                Role::Leader { isr } => r.leader == Some(a.broker) && same_set(isr, &r.isr),
                Role::Follower { leader } => *leader == r.leader && r.leader != Some(a.broker),
            };
        if !fits {
            v.misfit = Some(format!(
                "broker {} (state-change.log line {}) applied {:?} at leader epoch {}, partition epoch {}; the controller's registration there is {r}",
                a.broker, a.line, a.role, a.leader_epoch, a.partition_epoch
            ));
            v.misfit_ms = Some(r.create_ms);
            return v;
        }
        if a.high_watermark > a.log_end_offset {
            v.broken.push(Broken {
                property: HW_WITHIN_LOG,
                why: format!(
                    "broker {} (line {}) has HW {} above its log end offset {}",
                    a.broker, a.line, a.high_watermark, a.log_end_offset
                ),
                at_ms: r.create_ms,
            });
        }
        if !matches!(a.role, Role::Leader { .. }) {
            continue;
        }
        let elected = election(a, registrations).unwrap_or(r);
        let at = elected.create_ms;
        v.elections_checked += 1;
        if hw_moves.is_some() {
            let before = &moves[..moves.partition_point(|m| m.at_ms < elected.create_ms)];
            v.hw_moves_before_elections = v.hw_moves_before_elections.map(|n| n + before.len());
            if let Some(top) = before
                .iter()
                .max_by_key(|m| cuts.surviving(m.at_ms, at, m.high_watermark))
            {
                if cuts.surviving(top.at_ms, at, top.high_watermark) > a.log_end_offset {
                    v.broken.push(Broken {
                        property: COMMITTED_RECORDS_SURVIVE,
                        at_ms: elected.create_ms,
                        why: format!(
                            "broker {} became leader in epoch {} (elected at metadata offset {}) with log end offset {}, but broker {} had published HW {} before that election (partition.log line {})",
                            a.broker,
                            a.leader_epoch,
                            elected.offset,
                            a.log_end_offset,
                            top.broker,
                            top.high_watermark,
                            top.line
                        ),
                    });
                }
            }
        }
        if reads.is_some() {
            let before = reads_by_time.partition_point(|r| r.at_ms < elected.create_ms);
            v.reads_before_elections = v.reads_before_elections.map(|n| n + before);
            let gone: Vec<&Visible> = reads_by_time[..before]
                .iter()
                .filter(|r| r.offset >= a.log_end_offset && !cuts.lost(r.at_ms, at, r.offset))
                .collect();
            if let Some(first) = gone.iter().min_by_key(|r| r.offset) {
                v.broken.push(Broken {
                    property: COMMITTED_RECORDS_SURVIVE,
                    at_ms: elected.create_ms,
                    why: format!(
                        "broker {} became leader in epoch {} (elected at metadata offset {}) with log end offset {}, but the consumer had read {} records at or above it before that election (the first: value {:?} at offset {}, read at {} ms)",
                        a.broker,
                        a.leader_epoch,
                        elected.offset,
                        a.log_end_offset,
                        gone.len(),
                        first.value,
                        first.offset,
                        first.at_ms
                    ),
                });
            }
        }
        if acks.is_some() {
            let before = by_time.partition_point(|ack| ack.at_ms < elected.create_ms);
            v.acks_before_elections = v.acks_before_elections.map(|n| n + before);
            let missing: Vec<&Ack> = by_time[..before]
                .iter()
                .filter(|ack| {
                    ack.offset >= a.log_end_offset && !cuts.lost(ack.at_ms, at, ack.offset)
                })
                .collect();
            if let Some(first) = missing.iter().min_by_key(|ack| ack.offset) {
                v.broken.push(Broken {
                    property: ACKNOWLEDGED_RECORDS_SURVIVE,
                    why: format!(
                        "broker {} became leader in epoch {} (elected at metadata offset {}) with log end offset {}, but {} records acknowledged before that election sit at or above it (the first: value {} at offset {})",
                        a.broker,
                        a.leader_epoch,
                        elected.offset,
                        a.log_end_offset,
                        missing.len(),
                        first.value,
                        first.offset
                    ),
                    at_ms: elected.create_ms,
                });
            }
        }
    }
    v
}

/// The controller's registration a broker's line applied.
fn registration<'r>(a: &Applied, registrations: &'r [Registration]) -> Option<&'r Registration> {
    usize::try_from(a.partition_epoch)
        .ok()
        .and_then(|e| registrations.get(e))
        .filter(|r| r.partition_epoch == a.partition_epoch)
}

/// The registration that first named the leader epoch of a broker's line:
/// the election.
fn election<'r>(a: &Applied, registrations: &'r [Registration]) -> Option<&'r Registration> {
    let r = registration(a, registrations)?;
    registrations
        .iter()
        .find(|e| e.leader_epoch == r.leader_epoch)
}

/// Every election, with when the controller wrote it and where it cut the
/// log (its new leader's log end offset): what stood at or above a cut
/// before that election is gone and was reported there, so a later
/// election does not report it again.
struct Cuts(Vec<(u64, u64)>);

impl Cuts {
    /// How much of a HW published at `at_ms` survived the elections after
    /// it and before the one at `election_ms`.
    fn surviving(&self, at_ms: u64, election_ms: u64, high_watermark: u64) -> u64 {
        self.0
            .iter()
            .filter(|&&(t, _)| at_ms < t && t < election_ms)
            .fold(high_watermark, |hw, &(_, cut)| hw.min(cut))
    }

    /// Whether the record at `offset`, seen at `at_ms`, was cut by an
    /// election between then and the one at `election_ms`.
    fn lost(&self, at_ms: u64, election_ms: u64, offset: u64) -> bool {
        self.surviving(at_ms, election_ms, offset + 1) <= offset
    }
}

fn same_set(a: &[u32], b: &[u32]) -> bool {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registration(leader: u32, leader_epoch: i64, partition_epoch: i64, ms: u64) -> Registration {
        Registration {
            leader: Some(leader),
            leader_epoch,
            partition_epoch,
            isr: vec![leader],
            elr: vec![],
            lke: vec![],
            recovering: false,
            offset: partition_epoch as u64 * 10,
            create_ms: ms,
        }
    }

    fn leader(broker: u32, epoch: i64, log_end_offset: u64) -> Applied {
        Applied {
            broker,
            line: 1,
            at_ms: 0,
            leader_epoch: epoch,
            partition_epoch: epoch,
            log_end_offset,
            high_watermark: 0,
            role: Role::Leader { isr: vec![broker] },
        }
    }

    fn visible(offset: u64, at_ms: u64) -> Visible {
        Visible {
            offset,
            value: offset.to_string(),
            at_ms,
        }
    }

    #[test]
    fn a_record_read_before_an_election_above_the_new_leaders_log_end_breaks_committed_records_survive(
    ) {
        // Broker 1 leads from 1000 ms, broker 2 is elected at 2000 ms with
        // a log ending at offset 5.
        let registrations = [registration(1, 0, 0, 1000), registration(2, 1, 1, 2000)];
        let applied = [leader(1, 0, 0), leader(2, 1, 5)];
        // Offsets 0-6 read before the election: 5 and 6 are gone; offset 9,
        // read after it, is not evidence against it.
        let reads: Vec<Visible> = (0..7)
            .map(|o| visible(o, 1500))
            .chain([visible(9, 2500)])
            .collect();
        let v = validate(&applied, &registrations, None, None, Some(&reads));
        assert_eq!(v.misfit, None);
        assert_eq!(v.reads_before_elections, Some(7));
        assert_eq!(v.broken.len(), 1, "{:?}", v.broken);
        assert_eq!(v.broken[0].property, COMMITTED_RECORDS_SURVIVE);
        assert!(
            v.broken[0].why.contains("read 2 records"),
            "{}",
            v.broken[0]
        );
        // Read only below the new leader's log end: nothing broken.
        let v = validate(&applied, &registrations, None, None, Some(&reads[..5]));
        assert!(v.broken.is_empty(), "{:?}", v.broken);
        // No reads kept: not checked.
        let v = validate(&applied, &registrations, None, None, None);
        assert_eq!(v.reads_before_elections, None);
    }

    #[test]
    fn a_loss_is_reported_at_the_election_that_cut_it_and_not_again() {
        // Broker 1 leads from 1000 ms; broker 2 is elected at 2000 ms with
        // a log ending at 5, broker 3 at 3000 ms with one ending at 5 too,
        // broker 1 at 4000 ms with one ending at 3.
        let registrations = [
            registration(1, 0, 0, 1000),
            registration(2, 1, 1, 2000),
            registration(3, 2, 2, 3000),
            registration(1, 3, 3, 4000),
        ];
        let applied = [
            leader(1, 0, 0),
            leader(2, 1, 5),
            leader(3, 2, 5),
            leader(1, 3, 3),
        ];
        // Offsets 0-6 read before the first election: 5 and 6 are lost
        // there and only there; 3 and 4 are lost at the last.
        let reads: Vec<Visible> = (0..7).map(|o| visible(o, 1500)).collect();
        let v = validate(&applied, &registrations, None, None, Some(&reads));
        let whys: Vec<String> = v.broken.iter().map(|b| b.why.clone()).collect();
        assert_eq!(v.broken.len(), 2, "{whys:?}");
        assert!(whys[0].contains("epoch 1") && whys[0].contains("read 2 records"));
        assert!(whys[1].contains("epoch 3") && whys[1].contains("read 2 records"));
        assert!(whys[1].contains("offset 3"), "{}", whys[1]);
    }
}
