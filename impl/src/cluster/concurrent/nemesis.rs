//! A Jepsen-style nemesis: faults chosen by seed, one every so often,
//! without waiting for the partition to heal from the last, so that they
//! overlap: clean and unclean crashes of any broker or of the leader, the
//! controller believing a live broker failed (a zombie, fenced until it
//! registers again; fencing the leader briefly is a controlled leader
//! move), a follower paused (a GC pause, a slow disk), and a full disk on
//! one broker (its replica goes offline). Each crashed
//! broker restarts, and each fenced one registers again, after a time
//! also chosen by seed; all do when the run stops.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::clients::burst_settled;
use super::faults::handled;
use super::{CtlMsg, Msg, Shared};
use crate::replication::ReplicaId;

/// A fault the nemesis may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NemesisFault {
    /// Any broker that is up crashes.
    Crash { clean: bool },
    /// The broker the controller names leader crashes.
    CrashLeader { clean: bool },
    /// The controller believes a live broker failed (its registration
    /// lapsed) until it registers again: a zombie.
    Fence,
    /// The leader is fenced briefly: the controller moves leadership.
    LeaderMove,
    /// A follower stops handling messages for a while.
    Pause,
    /// One broker's disk fills: its writes fail, the driver takes it
    /// offline (as Kafka takes a failed log directory offline), and it
    /// restarts once the disk has room again. Its unflushed records are
    /// lost as in an unclean crash.
    FullDisk,
    /// The followers are held (they handle nothing) until the leader
    /// acknowledges a record none of them has, after the ISR shrank to the
    /// leader alone if `shrink`; then the leader crashes and they go on.
    /// This is the schedule each historical loss needs (acks=1: the acked
    /// record was on the leader only; min.insync.replicas=1 and unclean
    /// election: the leader alone committed it), aimed rather than waited
    /// for. Only while every replica is up and in the ISR; the wait for
    /// the shrink and for the acknowledgement is bounded (`STRAND_WAIT`:
    /// today's rules never acknowledge while the followers are held).
    Strand { shrink: bool, clean: bool },
}

/// How long a strand waits for the ISR to shrink and then for a stranded
/// acknowledgement, before it crashes the leader anyway.
const STRAND_WAIT: Duration = Duration::from_secs(5);

/// Watches, during a strand, for acknowledgements of records at or above
/// every follower's log end (records on the leader alone).
#[derive(Debug)]
pub(crate) struct StrandWatch {
    /// The followers' greatest log end while they are held; `u64::MAX`
    /// when no strand is under way.
    above: AtomicU64,
    acks: AtomicU64,
}

impl Default for StrandWatch {
    fn default() -> Self {
        StrandWatch {
            above: AtomicU64::new(u64::MAX),
            acks: AtomicU64::new(0),
        }
    }
}

impl StrandWatch {
    fn watch(&self, followers_end: u64) {
        self.acks.store(0, Ordering::SeqCst);
        self.above.store(followers_end, Ordering::SeqCst);
    }
    fn stop(&self) {
        self.above.store(u64::MAX, Ordering::SeqCst);
    }
    fn acks(&self) -> u64 {
        self.acks.load(Ordering::SeqCst)
    }
    /// A producer was answered for records ending at `end` (exclusive).
    pub(crate) fn acknowledged(&self, end: u64) {
        if end > self.above.load(Ordering::SeqCst) {
            self.acks.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// How the nemesis chooses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nemesis {
    pub seed: u64,
    /// A fault every `every` on average (uniform in half to one and a half).
    pub every: Duration,
    /// A crashed broker stays down, a fenced one fenced, a paused one
    /// paused, up to this long.
    pub max_down: Duration,
    pub faults: Vec<NemesisFault>,
    /// An unclean crash only while no other broker is down after one, or
    /// back but not yet in the ISR: the model's safety claim allows one
    /// unclean crash at a time (unflushed records survive on the other
    /// replicas; when every copy is lost with its page cache, no rule
    /// saves them). Other faults still overlap.
    pub one_unclean_at_a_time: bool,
}

impl Nemesis {
    /// Every kind of fault, one every `every`.
    pub fn all(seed: u64, every: Duration, max_down: Duration) -> Nemesis {
        Nemesis {
            seed,
            every,
            max_down,
            faults: vec![
                NemesisFault::Crash { clean: false },
                NemesisFault::Crash { clean: true },
                NemesisFault::CrashLeader { clean: false },
                NemesisFault::CrashLeader { clean: true },
                NemesisFault::Fence,
                NemesisFault::LeaderMove,
                NemesisFault::Pause,
                NemesisFault::FullDisk,
            ],
            one_unclean_at_a_time: true,
        }
    }
}

/// A small deterministic generator (the choices, not the timing, are the
/// seed's: threads interleave as they will).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
    fn duration(&mut self, max: Duration) -> Duration {
        Duration::from_micros(self.below(max.as_micros().max(1) as u64))
    }
}

enum Undo {
    Restart(ReplicaId),
    /// The fence of a broker ends: it is heard from again, if it is up
    /// when its own thread takes the message (`Msg::Unfence`); one that
    /// crashed meanwhile registers when it restarts.
    Unfence(ReplicaId),
    /// The disk has room again; the broker restarts.
    FreeDisk(ReplicaId),
}

/// A strand (`NemesisFault::Strand`) with `leader` leading and every
/// replica up and in the ISR: holds every follower, waits (at most
/// `STRAND_WAIT` each) for the ISR to shrink to the leader if `shrink`
/// and for an acknowledgement of a record no follower has, crashes the
/// leader, and lets the followers go on. The broker crashed, unless a
/// follower could not be held (its thread is gone).
fn strand(
    leader: ReplicaId,
    shrink: bool,
    clean: bool,
    shared: &Shared,
    replicas: &[Sender<Msg>],
) -> Option<ReplicaId> {
    let followers: Vec<ReplicaId> = (0..replicas.len() as ReplicaId)
        .filter(|&r| r != leader)
        .collect();
    // Dropped on return: the followers go on.
    let mut releases = Vec::new();
    for &f in &followers {
        let (held, is_held) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        replicas[f as usize]
            .send(Msg::Hold {
                held,
                release: released,
            })
            .ok()?;
        releases.push(release);
        is_held.recv().ok()?;
    }
    let followers_end = followers
        .iter()
        .filter_map(|&f| shared.reader(f))
        .map(|r| r.log_end_offset())
        .max()
        .unwrap_or(0);
    shared.stranded.watch(followers_end);
    let wait_for = |done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + STRAND_WAIT;
        while !done() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
    };
    if shrink {
        wait_for(&|| shared.metadata().isr == [leader]);
    }
    wait_for(&|| shared.stranded.acks() > 0);
    shared.stranded.stop();
    let _ = replicas[leader as usize].send(Msg::Crash { clean });
    // Down before the followers go on: none of them fetches the record.
    handled(&replicas[leader as usize]);
    drop(releases);
    Some(leader)
}

/// Runs the nemesis until the clients stop; returns the faults injected,
/// by kind. With `paced` producers (`ConcurrentConfig::bursts`) a strand
/// begins only between bursts, once every replica has the last one
/// settled: the records it strands are then within the model's bounds
/// above a settled prefix, where trace validation can follow them.
pub(super) fn run_nemesis(
    nemesis: Nemesis,
    shared: Arc<Shared>,
    replicas: Vec<Sender<Msg>>,
    controller: Sender<CtlMsg>,
    paced: bool,
) -> BTreeMap<String, u64> {
    let n = replicas.len() as ReplicaId;
    let mut rng = Rng(nemesis.seed ^ 0x5851_f42d_4c95_7f2d);
    let mut injected = BTreeMap::new();
    let mut pending: Vec<(Instant, Undo)> = Vec::new();
    let (mut down, mut fenced) = (vec![false; n as usize], vec![false; n as usize]);
    // Crashed uncleanly, and not yet back in the ISR.
    let mut unclean = vec![false; n as usize];
    let gap = |rng: &mut Rng| nemesis.every / 2 + rng.duration(nemesis.every);
    let mut next = Instant::now() + gap(&mut rng);
    let stopping = || shared.stop_clients.load(Ordering::Relaxed);
    while !stopping() && !nemesis.faults.is_empty() {
        let now = Instant::now();
        pending.retain(|(at, undo)| {
            if *at > now {
                return true;
            }
            match *undo {
                Undo::Restart(r) => {
                    down[r as usize] = false;
                    let _ = replicas[r as usize].send(Msg::Restart);
                }
                Undo::FreeDisk(r) => {
                    shared.disk_full[r as usize].store(false, Ordering::SeqCst);
                    down[r as usize] = false;
                    let _ = replicas[r as usize].send(Msg::Restart);
                }
                Undo::Unfence(r) => {
                    fenced[r as usize] = false;
                    // Through the broker: registered by the nemesis, a
                    // broker whose restart was still queued was taken
                    // back while down, after a clean shutdown it never
                    // had (today's soak, seed 0, 4 x 2 s), and one that
                    // restarted meanwhile was taken to restart again
                    // (unclean soak seed 18).
                    let _ = replicas[r as usize].send(Msg::Unfence);
                }
            }
            false
        });
        if now < next {
            thread::sleep(Duration::from_millis(1));
            continue;
        }
        next = now + gap(&mut rng);
        let fault = nemesis.faults[rng.below(nemesis.faults.len() as u64) as usize];
        let leader = shared.metadata().leader;
        let up: Vec<ReplicaId> = (0..n).filter(|&r| !down[r as usize]).collect();
        let pick = |rng: &mut Rng, from: &[ReplicaId]| {
            (!from.is_empty()).then(|| from[rng.below(from.len() as u64) as usize])
        };
        let until = now + nemesis.max_down / 10 + rng.duration(nemesis.max_down);
        let isr = shared.metadata().isr;
        for (r, u) in unclean.iter_mut().enumerate() {
            // Back in the ISR: its unclean crash is repaired.
            let back = isr.contains(&(r as ReplicaId)) && !down[r];
            *u &= !back;
        }
        let unclean_now = unclean.iter().any(|&u| u);
        // The brokers this fault crashed, and whether cleanly.
        let mut crashes = Vec::new();
        let done = match fault {
            NemesisFault::Crash { clean: false }
            | NemesisFault::CrashLeader { clean: false }
            | NemesisFault::Strand { clean: false, .. }
            | NemesisFault::FullDisk
                if nemesis.one_unclean_at_a_time && unclean_now =>
            {
                None
            }
            NemesisFault::Crash { clean } | NemesisFault::CrashLeader { clean } => {
                let victim = match fault {
                    NemesisFault::Crash { .. } => pick(&mut rng, &up),
                    _ => leader.filter(|l| !down[*l as usize]),
                };
                victim.map(|v| {
                    let _ = replicas[v as usize].send(Msg::Crash { clean });
                    crashes.push((v, clean));
                })
            }
            NemesisFault::Strand { shrink, clean } => {
                let whole = up.len() == n as usize
                    && !fenced.iter().any(|&f| f)
                    && isr.len() == n as usize
                    && (!paced || burst_settled(&shared));
                leader
                    .filter(|_| whole)
                    .and_then(|l| strand(l, shrink, clean, &shared, &replicas))
                    .map(|v| crashes.push((v, clean)))
            }
            NemesisFault::Fence | NemesisFault::LeaderMove => {
                let victim = match fault {
                    NemesisFault::Fence => {
                        let live: Vec<ReplicaId> = up
                            .iter()
                            .copied()
                            .filter(|&r| !fenced[r as usize])
                            .collect();
                        pick(&mut rng, &live)
                    }
                    _ => leader.filter(|l| !down[*l as usize] && !fenced[*l as usize]),
                };
                victim.map(|v| {
                    fenced[v as usize] = true;
                    let _ = controller.send(CtlMsg::BrokerStopped(v));
                    let back = if fault == NemesisFault::LeaderMove {
                        now + Duration::from_millis(5)
                    } else {
                        until
                    };
                    pending.push((back, Undo::Unfence(v)));
                })
            }
            NemesisFault::FullDisk => pick(&mut rng, &up).map(|v| {
                // Down from the nemesis's view: the broker goes offline at
                // its next write, and it is restarted when the disk frees.
                down[v as usize] = true;
                unclean[v as usize] = true;
                shared.disk_full[v as usize].store(true, Ordering::SeqCst);
                pending.push((until, Undo::FreeDisk(v)));
            }),
            NemesisFault::Pause => {
                let followers: Vec<ReplicaId> =
                    up.iter().copied().filter(|&r| Some(r) != leader).collect();
                pick(&mut rng, &followers).map(|v| {
                    let _ = replicas[v as usize].send(Msg::Pause(until - now));
                })
            }
        };
        for (v, clean) in crashes {
            down[v as usize] = true;
            unclean[v as usize] |= !clean;
            shared
                .crashes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((v, clean));
            // A strand may have waited past `until`: the broker is down a
            // while at least.
            let back = until.max(Instant::now() + nemesis.max_down / 10);
            pending.push((back, Undo::Restart(v)));
        }
        if done.is_some() {
            *injected.entry(format!("{fault:?}")).or_default() += 1;
            shared.nemesis_injected.fetch_add(1, Ordering::SeqCst);
        }
    }
    // Everything back, for the settle phase.
    for (_, undo) in pending {
        match undo {
            Undo::Restart(r) => {
                let _ = replicas[r as usize].send(Msg::Restart);
            }
            Undo::FreeDisk(r) => {
                shared.disk_full[r as usize].store(false, Ordering::SeqCst);
                let _ = replicas[r as usize].send(Msg::Restart);
            }
            Undo::Unfence(r) => {
                let _ = replicas[r as usize].send(Msg::Unfence);
            }
        }
    }
    injected
}
