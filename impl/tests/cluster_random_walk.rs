//! Random walks over the step driver under today's rules (the model's
//! `safe-deep` preset, with more records and epochs than the model checks):
//! after every step, the model's always-properties hold on the files.

use highwater::cluster::{ClusterSnapshot, StepAction, StepCluster, StepConfig};
use highwater::replication::Error;
use proptest::prelude::*;

const MAX_RECORDS: u64 = 4;
const MAX_EPOCH: i32 = 6;

/// Every action worth trying now, with a weight that favours progress
/// (fetches, HW, ISR repair) over churn (crashes, elections); the driver
/// refuses those not enabled.
fn candidates(c: &StepCluster, s: &ClusterSnapshot) -> Vec<(StepAction, u32)> {
    let n = c.config().replicas;
    let ctl = c.controller();
    let next_epoch = ctl.leader_epoch().map_or(0, |e| e + 1);
    let later = c.now() + c.config().replication.replica_lag_time_max_ms + 2;
    let mut out = Vec::new();
    for r in 0..n {
        let rep = s.replica(r).unwrap();
        if let Some(election) = ctl.election_kind(r) {
            if next_epoch <= MAX_EPOCH {
                let w = if ctl.leader().is_none() { 6 } else { 1 };
                out.push((
                    StepAction::ControllerElectLeader {
                        replica: r,
                        election,
                    },
                    w,
                ));
            }
        }
        if ctl.may_shrink_isr(r) && (ctl.leader() != Some(r) || next_epoch <= MAX_EPOCH) {
            let w = if rep.alive { 1 } else { 6 };
            out.push((StepAction::ControllerShrinkIsr { replica: r }, w));
        }
        if let Some(p) = c.partition(r) {
            for (&epoch, req) in ctl.requests() {
                if !p.accepts_leader_and_isr(epoch) {
                    continue;
                }
                if req.leader == Some(r) {
                    out.push((StepAction::BecomeLeader { replica: r, epoch }, 10));
                } else {
                    out.push((StepAction::BecomeFollower { replica: r, epoch }, 10));
                }
            }
            if p.is_leader() {
                if (s.records.len() as u64) < MAX_RECORDS {
                    let record = s.records.len() as u64;
                    out.push((StepAction::Produce { leader: r, record }, 6));
                }
                // Now, or once the lag has passed for followers outside
                // the ISR (the step driver offers both, as the model).
                let mut hws: Vec<u64> = [p.advanced_hw(c.now() + 1), p.advanced_hw(later)]
                    .into_iter()
                    .flatten()
                    .collect();
                hws.dedup();
                for hw in hws {
                    out.push((StepAction::LeaderAdvanceHw { leader: r, hw }, 10));
                }
                for f in (0..n).filter(|&f| f != r) {
                    if p.isr().contains(&f) && p.is_out_of_sync(f, later) {
                        out.push((
                            StepAction::LeaderShrinkIsr {
                                leader: r,
                                follower: f,
                            },
                            2,
                        ));
                    }
                    if !ctl.isr().contains(&f) && p.is_caught_up_for_isr(f) {
                        out.push((
                            StepAction::LeaderExpandIsr {
                                leader: r,
                                follower: f,
                            },
                            10,
                        ));
                    }
                }
            }
            if let Some(l) = p.fetching_from() {
                out.push((
                    StepAction::FollowerFetch {
                        follower: r,
                        leader: l,
                    },
                    12,
                ));
            }
            if rep.recovery_point < rep.log_end_offset {
                out.push((StepAction::Flush { replica: r }, 2));
            }
            if s.clean_crashes < 1 {
                out.push((
                    StepAction::Crash {
                        replica: r,
                        clean: true,
                    },
                    1,
                ));
            }
            if s.unclean_crashes < 1 {
                out.push((
                    StepAction::Crash {
                        replica: r,
                        clean: false,
                    },
                    1,
                ));
            }
        } else {
            out.push((StepAction::Restart { replica: r }, 4));
        }
    }
    out
}

fn pick(cands: &[(StepAction, u32)], choice: u16) -> StepAction {
    let total: u32 = cands.iter().map(|(_, w)| w).sum();
    let mut at = u32::from(choice) % total;
    for &(a, w) in cands {
        if at < w {
            return a;
        }
        at -= w;
    }
    cands[0].0
}

/// The model's always-properties, on a snapshot.
fn check(s: &ClusterSnapshot) -> Result<(), String> {
    match s.broken_properties().first() {
        Some(b) => Err(format!("{}: {}", b.property, b.detail)),
        None => Ok(()),
    }
}

fn walk(config: StepConfig, choices: &[u16]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut c = StepCluster::new(dir.path(), config).unwrap();
    let mut steps = Vec::new();
    for &choice in choices {
        let s = c.snapshot().unwrap();
        let cands = candidates(&c, &s);
        if cands.is_empty() {
            break;
        }
        let action = pick(&cands, choice);
        match c.apply(action) {
            Ok(()) => steps.push(action),
            // Refused produce requests (NotEnoughReplicas) are not enabled
            // in the model either.
            Err(Error::NotEnabled(_)) | Err(Error::Api(_)) => continue,
            Err(e) => {
                return Err(TestCaseError::fail(format!(
                    "{action:?} failed: {e}\nafter {steps:#?}"
                )))
            }
        }
        let s = c.snapshot().unwrap();
        if let Err(why) = check(&s) {
            return Err(TestCaseError::fail(format!(
                "{why}\nafter {steps:#?}\n{s:#?}"
            )));
        }
    }
    let s = c.snapshot().unwrap();
    eprintln!(
        "steps {} records {} visible {} acked {} epoch {:?} crashes {}+{}",
        steps.len(),
        s.records.len(),
        s.records.values().filter(|h| h.visible.is_some()).count(),
        s.records.values().filter(|h| h.acked.is_some()).count(),
        s.controller.leader_epoch,
        s.clean_crashes,
        s.unclean_crashes
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, max_shrink_iters: 200, ..ProptestConfig::default() })]
    #[test]
    fn safe_rules_keep_every_property(choices in proptest::collection::vec(any::<u16>(), 40..120)) {
        walk(StepConfig::new(3), &choices)?;
    }
}
