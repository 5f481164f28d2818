//! The state the driver's threads share rather than send: the controller's
//! published metadata (what clients and leaders read), each replica's HW as
//! published to consumers (and their wake-up), and the producers' record
//! budget. Built on the `sync` shim, so that
//! `RUSTFLAGS="--cfg loom" cargo test -p highwater --release --lib loom`
//! checks them under every interleaving.

use std::time::{Duration, Instant};

use super::Metadata;
use crate::sync::{lock, read, write, AtomicU64, Condvar, Mutex, Ordering, RwLock};

/// The controller's metadata, as published.
#[derive(Debug, Default)]
pub(crate) struct MetadataCell {
    inner: RwLock<Metadata>,
}

impl MetadataCell {
    pub(crate) fn get(&self) -> Metadata {
        read(&self.inner).clone()
    }

    pub(crate) fn publish(&self, m: Metadata) {
        *write(&self.inner) = m;
    }

    /// Publishes `m`, then runs `announce` (the messages that tell of the
    /// change): whoever hears of the change and then reads the metadata
    /// reads `m` or newer, never older (a leader that learns the ISR from
    /// the metadata must not take back an ISR its own answer replaced).
    pub(crate) fn publish_then(&self, m: Metadata, announce: impl FnOnce()) {
        self.publish(m);
        announce();
    }
}

/// A leader's HW as published to its consumers, with the leader epoch it
/// leads in (`None` while the replica is down or not leading: Kafka
/// answers a consumer's fetch to a replica that does not lead with
/// NOT_LEADER_OR_FOLLOWER). The replica thread publishes an HW only once
/// the operation that set it, its checkpoint included, has completed and
/// its event is in the trace (`ReplicaNode::publish_hw`): a consumer never
/// reads below an HW whose checkpoint failed and was set back, nor one the
/// trace has not shown yet. Consumers waiting for the HW to pass their
/// position sleep here and are woken by the publication.
#[derive(Debug, Default)]
pub(crate) struct PublishedHw {
    hw: Mutex<Option<Published>>,
    changed: Condvar,
}

/// An HW a leader published, in the epoch it leads in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Published {
    pub(crate) epoch: crate::replication::LeaderEpoch,
    pub(crate) hw: u64,
}

impl PublishedHw {
    pub(crate) fn get(&self) -> Option<Published> {
        *lock(&self.hw)
    }

    /// Publishes `hw`, then wakes the waiters: the update and the check a
    /// waiter makes before sleeping are under one lock, so no waiter can
    /// check the old value and then sleep through the notification.
    pub(crate) fn publish(&self, hw: Option<Published>) {
        let mut g = lock(&self.hw);
        if *g != hw {
            *g = hw;
            self.changed.notify_all();
        }
    }

    /// Waits until the HW passes `pos` or `timeout` passes; whether it did.
    pub(crate) fn wait_past(&self, pos: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = lock(&self.hw);
        loop {
            if g.is_some_and(|p| p.hw > pos) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = match self.changed.wait_timeout(g, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }
}

/// Takes `n` records from a budget of `max` shared by every producer:
/// false, taking nothing, when fewer than `n` are left. Never lets the
/// producers together exceed `max`.
pub(crate) fn take_records(sent: &AtomicU64, n: u64, max: u64) -> bool {
    let mut current = sent.load(Ordering::SeqCst);
    loop {
        if current + n > max {
            return false;
        }
        match sent.compare_exchange(current, current + n, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return true,
            Err(actual) => current = actual,
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::Arc;
    use loom::sync::mpsc;

    fn isr(m: &Metadata) -> Vec<u32> {
        m.isr.clone()
    }

    /// The controller changes the ISR and answers the leader; the leader,
    /// holding the answer, reads the metadata: it finds the new ISR in
    /// every interleaving. `publish_first` false is the order the driver
    /// once had (answer, then publish), shown to fail.
    fn answer_then_read(publish_first: bool) {
        loom::model(move || {
            let cell = Arc::new(MetadataCell::default());
            cell.publish(Metadata {
                isr: vec![0, 1],
                ..Metadata::default()
            });
            let (tx, rx) = mpsc::channel();
            let c2 = cell.clone();
            let controller = loom::thread::spawn(move || {
                let m = Metadata {
                    isr: vec![0, 1, 2],
                    ..Metadata::default()
                };
                if publish_first {
                    c2.publish_then(m, || tx.send(()).unwrap());
                } else {
                    tx.send(()).unwrap();
                    c2.publish(m);
                }
            });
            rx.recv().unwrap();
            assert_eq!(isr(&cell.get()), vec![0, 1, 2], "a stale ISR read");
            controller.join().unwrap();
        });
    }

    #[test]
    fn loom_metadata_is_published_before_the_change_is_announced() {
        answer_then_read(true);
    }

    #[test]
    fn loom_announcing_before_publishing_is_caught() {
        let caught = std::panic::catch_unwind(|| answer_then_read(false));
        assert!(caught.is_err(), "loom found no stale read");
    }

    /// Two producers share a budget of 3 records, taking 2 at a time:
    /// together they never take more than the budget. `take` is the rule
    /// under test.
    fn budget_holds(take: fn(&AtomicU64, u64, u64) -> bool) {
        loom::model(move || {
            let sent = Arc::new(AtomicU64::new(0));
            let s2 = sent.clone();
            let other = loom::thread::spawn(move || take(&s2, 2, 3));
            let mine = take(&sent, 2, 3);
            let theirs = other.join().unwrap();
            assert!(!(mine && theirs), "both took 2 of 3");
            assert!(sent.load(Ordering::SeqCst) <= 3);
        });
    }

    #[test]
    fn loom_producers_never_exceed_the_record_budget() {
        budget_holds(take_records);
    }

    /// The budget checked, then taken in a second step (deliberately
    /// broken: a check-then-act race): loom finds both producers taking.
    fn take_records_check_then_add(sent: &AtomicU64, n: u64, max: u64) -> bool {
        if sent.load(Ordering::SeqCst) + n > max {
            return false;
        }
        sent.fetch_add(n, Ordering::SeqCst);
        true
    }

    #[test]
    fn loom_a_check_then_take_budget_is_caught() {
        let caught = std::panic::catch_unwind(|| budget_holds(take_records_check_then_add));
        assert!(caught.is_err(), "loom found no overdrawn budget");
    }

    /// A consumer waits for the HW to pass 0 while the replica publishes 1:
    /// it is woken in every interleaving. loom's wait_timeout never times
    /// out by itself, so a lost wake-up is a deadlock loom reports.
    /// `notify_first` is the broken order (wake the waiters, then update
    /// the HW, outside the lock), shown to lose the wake-up.
    fn consumer_wakes(notify_first: bool) {
        loom::model(move || {
            let hw = Arc::new(PublishedHw::default());
            hw.publish(Some(Published { epoch: 0, hw: 0 }));
            let h2 = hw.clone();
            let replica = loom::thread::spawn(move || {
                if notify_first {
                    h2.changed.notify_all();
                    *lock(&h2.hw) = Some(Published { epoch: 0, hw: 1 });
                } else {
                    h2.publish(Some(Published { epoch: 0, hw: 1 }));
                }
            });
            assert!(hw.wait_past(0, Duration::from_secs(3600)));
            replica.join().unwrap();
        });
    }

    #[test]
    fn loom_a_consumer_waiting_for_the_hw_is_woken() {
        consumer_wakes(false);
    }

    #[test]
    fn loom_notifying_before_publishing_the_hw_is_caught() {
        let caught = std::panic::catch_unwind(|| consumer_wakes(true));
        assert!(caught.is_err(), "loom found no lost wake-up");
    }
}
