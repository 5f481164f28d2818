//! The fault schedule: which broker crashes when, and its restart.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Msg, Shared};
use crate::replication::ReplicaId;

/// A fault the schedule injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// The broker the controller names leader crashes.
    CrashLeader { clean: bool },
    /// A broker that is not the leader crashes (the lowest such id).
    CrashFollower { clean: bool },
    /// The leader's disk fills and it shuts down cleanly, which then fails;
    /// the disk has room again before its restart.
    CrashLeaderOnFullDisk,
}

/// When faults happen: the first after `first_after`, then one every
/// `every`, cycling through `faults`; each crashed broker restarts after
/// `down_for`. A fault waits until every replica is back in the ISR, so
/// that no fault hits a partition still repairing the last one. Each
/// crash and restart is waited for until the broker has handled it (a
/// busy broker reads its messages late), so that a broker stays down
/// `down_for` at least and faults never overlap; producers run until
/// each of `faults` was injected once, however slow the machine (see
/// [`run`](super::run)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSchedule {
    pub first_after: Duration,
    pub every: Duration,
    pub down_for: Duration,
    pub faults: Vec<Fault>,
}

/// Waits until `replica` has handled every message sent to it before;
/// returns at once if its thread is gone.
pub(super) fn handled(replica: &Sender<Msg>) {
    let (reply, answer) = mpsc::channel();
    if replica.send(Msg::Barrier(reply)).is_ok() {
        let _ = answer.recv();
    }
}

/// Injects `schedule`'s faults until the clients stop; says on
/// `round_done` once each of its faults was injected. `when_sent`
/// (`Regression::FaultDoneWhenSent`, deliberately broken): a crash and a
/// restart are taken as done once sent.
pub(super) fn run_faults(
    schedule: FaultSchedule,
    shared: Arc<Shared>,
    replicas: Vec<Sender<Msg>>,
    when_sent: bool,
    round_done: Sender<()>,
) {
    let n = replicas.len() as ReplicaId;
    let stopping = |shared: &Shared| shared.stop_clients.load(Ordering::Relaxed);
    let sleep = |d: Duration, shared: &Shared| {
        let until = Instant::now() + d;
        while Instant::now() < until && !stopping(shared) {
            thread::sleep(Duration::from_millis(2));
        }
    };
    sleep(schedule.first_after, &shared);
    let mut i = 0;
    let mut hits = vec![0u32; n as usize];
    while !stopping(&shared) && !schedule.faults.is_empty() {
        let m = shared.metadata();
        let full = m.isr.len() == n as usize && m.leader.is_some();
        if !full {
            thread::sleep(Duration::from_millis(5));
            continue;
        }
        let fault = schedule.faults[i % schedule.faults.len()];
        let (victim, clean) = match fault {
            Fault::CrashLeader { clean } => (m.leader.expect("checked"), clean),
            Fault::CrashLeaderOnFullDisk => (m.leader.expect("checked"), true),
            Fault::CrashFollower { clean } => {
                // The follower crashed least so far.
                let l = m.leader.expect("checked");
                let r = (0..n)
                    .filter(|&r| r != l)
                    .min_by_key(|&r| (hits[r as usize], std::cmp::Reverse(r)))
                    .unwrap_or(l);
                (r, clean)
            }
        };
        let msg = match fault {
            Fault::CrashLeaderOnFullDisk => Msg::CrashOnFullDisk,
            _ => Msg::Crash { clean },
        };
        let tx = &replicas[victim as usize];
        let incarnation = shared.incarnation(victim);
        let _ = tx.send(msg);
        if !when_sent {
            handled(tx);
            if shared.incarnation(victim) == incarnation {
                // It was down already (the nemesis's doing): this fault
                // is still to come.
                continue;
            }
        }
        i += 1;
        hits[victim as usize] += 1;
        shared
            .crashes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((victim, clean));
        // Restart even when the run is stopping: the settle phase needs it.
        thread::sleep(schedule.down_for);
        if let Some(full) = shared.disk_full.get(victim as usize) {
            full.store(false, Ordering::SeqCst);
        }
        let _ = tx.send(Msg::Restart);
        if !when_sent {
            // Back, registered with the controller: the metadata read
            // next knows of the crash.
            handled(tx);
        }
        if i == schedule.faults.len() {
            let _ = round_done.send(());
        }
        sleep(schedule.every, &shared);
    }
}
