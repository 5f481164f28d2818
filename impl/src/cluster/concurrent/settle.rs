//! The settle phase after the faults: every replica restarted, the run
//! waits until the partition has healed (every replica in the ISR, with the
//! leader's log end and HW), or until `settle_timeout`; and says which
//! followers made no progress at all meanwhile, the sign of a partition
//! stuck for good rather than slow (a follower ignoring its leader's
//! answers, a fetch that is never served).

use std::thread;
use std::time::{Duration, Instant};

use super::Shared;
use crate::replication::ReplicaId;

/// How the settle phase ended.
pub(super) struct Settled {
    pub healed: bool,
    /// Followers behind the leader at the end that made no progress from
    /// the first time they were seen up in the settle phase: a log end
    /// short of the leader's that never moved, or log end and HW that
    /// never moved with the HW short of the leader's.
    pub stalled: Vec<ReplicaId>,
}

/// A replica's log end and HW, if it is up.
fn progress(shared: &Shared, r: ReplicaId) -> Option<(u64, u64)> {
    shared
        .reader(r)
        .map(|x| (x.log_end_offset(), x.high_watermark()))
}

fn healed(shared: &Shared, ids: &[ReplicaId]) -> bool {
    let m = shared.metadata();
    m.leader.is_some_and(|l| {
        m.isr.len() == ids.len()
            && progress(shared, l).is_some_and(|(leo, hw)| {
                hw == leo && ids.iter().all(|&r| progress(shared, r) == Some((leo, leo)))
            })
    })
}

/// Waits for the partition to heal, at most `timeout`.
pub(super) fn settle(shared: &Shared, ids: &[ReplicaId], timeout: Duration) -> Settled {
    let deadline = Instant::now() + timeout;
    let mut first: Vec<Option<(u64, u64)>> = vec![None; ids.len()];
    loop {
        for (i, &r) in ids.iter().enumerate() {
            if first[i].is_none() {
                first[i] = progress(shared, r);
            }
        }
        if healed(shared, ids) {
            return Settled {
                healed: true,
                stalled: Vec::new(),
            };
        }
        if Instant::now() >= deadline {
            break;
        }
        thread::sleep(Duration::from_millis(5));
    }
    let leader = shared.metadata().leader;
    let leader_leo = leader.and_then(|l| progress(shared, l)).map(|(leo, _)| leo);
    let stalled = ids
        .iter()
        .enumerate()
        .filter(|&(_, &r)| Some(r) != leader)
        .filter(|&(i, &r)| {
            let (Some((leo, hw)), Some(end), Some((leo0, hw0))) =
                (progress(shared, r), leader_leo, first[i])
            else {
                return false;
            };
            (leo < end && leo == leo0) || (hw < end && (leo, hw) == (leo0, hw0))
        })
        .map(|(_, &r)| r)
        .collect();
    Settled {
        healed: false,
        stalled,
    }
}
