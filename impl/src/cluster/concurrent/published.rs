//! The state the driver's threads share rather than send: the controller's
//! published metadata (what clients and leaders read), and the producers'
//! record budget. Built on the `sync` shim, so that
//! `RUSTFLAGS="--cfg loom" cargo test -p highwater --release --lib loom`
//! checks them under every interleaving.

use super::Metadata;
use crate::sync::{read, write, AtomicU64, Ordering, RwLock};

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
    /// together they never take more than the budget.
    #[test]
    fn loom_producers_never_exceed_the_record_budget() {
        loom::model(|| {
            let sent = Arc::new(AtomicU64::new(0));
            let s2 = sent.clone();
            let other = loom::thread::spawn(move || take_records(&s2, 2, 3));
            let mine = take_records(&sent, 2, 3);
            let theirs = other.join().unwrap();
            assert!(!(mine && theirs), "both took 2 of 3");
            assert!(sent.load(Ordering::SeqCst) <= 3);
        });
    }
}
