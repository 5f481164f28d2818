//! Publication of the log's offsets from the one writer to many readers.
//!
//! This is the whole of what readers and the writer share about progress;
//! it is kept small so that loom can check it (`RUSTFLAGS="--cfg loom"
//! cargo test -p highwater --release --lib loom`).
//!
//! Protocol:
//! - The writer first makes a batch's bytes readable (writes them to the
//!   segment file and stores the segment's size), and only then publishes
//!   the new log end offset with [`Published::publish_end`]. Every access
//!   is `SeqCst` (so at least Release/Acquire): a reader that loads the end
//!   offset finds every byte below it written.
//! - The high watermark is published the same way and never above the end
//!   offset; readers clamp to the end offset anyway.
//! - Readers may wait for the end offset to pass an offset. A waiter
//!   registers (an atomic increment) before it checks; the writer checks
//!   for waiters (an atomic read-modify-write) after it publishes. The two
//!   read-modify-writes are ordered, so either the writer sees the waiter
//!   and notifies it under the mutex, or the waiter sees the new offset: no
//!   wake-up is lost.
//!
//! Lowering the end offset (truncation) is done while the writer holds the
//! segment list's write lock, which excludes every reader (see `log.rs`).

use std::time::Duration;

use crate::sync::{lock, AtomicU64, Condvar, Mutex, Ordering};

/// Offsets published to readers.
#[derive(Debug)]
pub(crate) struct Published {
    log_end_offset: AtomicU64,
    high_watermark: AtomicU64,
    log_start_offset: AtomicU64,
    waiters: AtomicU64,
    mutex: Mutex<()>,
    changed: Condvar,
}

impl Published {
    pub(crate) fn new(log_start_offset: u64, log_end_offset: u64, high_watermark: u64) -> Self {
        Published {
            log_end_offset: AtomicU64::new(log_end_offset),
            high_watermark: AtomicU64::new(high_watermark),
            log_start_offset: AtomicU64::new(log_start_offset),
            waiters: AtomicU64::new(0),
            mutex: Mutex::new(()),
            changed: Condvar::new(),
        }
    }

    /// The published log end offset; all bytes below it are readable.
    pub(crate) fn log_end_offset(&self) -> u64 {
        self.log_end_offset.load(Ordering::SeqCst)
    }

    pub(crate) fn high_watermark(&self) -> u64 {
        self.high_watermark.load(Ordering::SeqCst)
    }

    pub(crate) fn log_start_offset(&self) -> u64 {
        self.log_start_offset.load(Ordering::SeqCst)
    }

    /// Publishes a new end offset (after its bytes are written) and wakes
    /// waiters.
    pub(crate) fn publish_end(&self, log_end_offset: u64) {
        self.log_end_offset.store(log_end_offset, Ordering::SeqCst);
        self.wake();
    }

    /// Publishes a high watermark; the caller keeps it <= the end offset.
    pub(crate) fn publish_high_watermark(&self, hw: u64) {
        self.high_watermark.store(hw, Ordering::SeqCst);
        self.wake();
    }

    pub(crate) fn publish_log_start(&self, log_start_offset: u64) {
        self.log_start_offset
            .store(log_start_offset, Ordering::SeqCst);
    }

    fn wake(&self) {
        // A read-modify-write, not a load: it reads the latest count in the
        // counter's modification order, so it either sees a waiter that
        // registered, or the waiter's registration (also an RMW) comes after
        // it and synchronises with it, and the waiter then sees the new
        // offsets. A plain load would need SeqCst's store-load ordering,
        // which loom does not model (it reports a lost wake-up).
        if self.waiters.fetch_add(0, Ordering::SeqCst) > 0 {
            // Taking the mutex orders this notify after a waiter's check.
            let _g = lock(&self.mutex);
            self.changed.notify_all();
        }
    }

    /// Waits until `done(self)` holds or `timeout` passes; returns whether
    /// it holds. `done` reads the published offsets.
    pub(crate) fn wait_until(&self, timeout: Duration, done: impl Fn(&Self) -> bool) -> bool {
        if done(self) {
            return true;
        }
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + timeout;
        let mut guard = lock(&self.mutex);
        let result = loop {
            if done(self) {
                break true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                break false;
            }
            guard = match self.changed.wait_timeout(guard, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        };
        drop(guard);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::Arc;
    use loom::sync::atomic::AtomicU64 as Slot;

    /// A writer fills two slots, publishing each (and the HW too with
    /// `with_hw`); a reader loads `bound` and finds every slot below it
    /// written, and the end offset it loads next not below it.
    fn readers_below(with_hw: bool, bound: fn(&Published) -> u64) {
        loom::model(move || {
            let p = Arc::new(Published::new(0, 0, 0));
            let slots = Arc::new([Slot::new(0), Slot::new(0)]);
            let (p2, s2) = (p.clone(), slots.clone());
            let writer = loom::thread::spawn(move || {
                for i in 0..2u64 {
                    s2[i as usize].store(i + 1, Ordering::Relaxed);
                    p2.publish_end(i + 1);
                    if with_hw {
                        p2.publish_high_watermark(i + 1);
                    }
                }
            });
            let bound = bound(&p);
            assert!(p.log_end_offset() >= bound, "bound above the end offset");
            for i in 0..bound {
                assert_eq!(slots[i as usize].load(Ordering::Relaxed), i + 1);
            }
            writer.join().unwrap();
        });
    }

    /// Readers that load the end offset find every slot below it written,
    /// even with relaxed slot accesses: the publication orders them.
    #[test]
    fn loom_readers_never_see_unwritten_data() {
        readers_below(false, Published::log_end_offset);
    }

    /// A consumer bounded by the HW finds every slot below the HW written,
    /// and never an HW above the end offset it then loads.
    #[test]
    fn loom_consumers_below_the_hw_see_written_data() {
        readers_below(true, Published::high_watermark);
    }

    /// A waiter for `done` is never left sleeping after `publish` makes it
    /// true. loom's wait_timeout never times out by itself, so a lost
    /// wake-up shows up as a deadlock loom reports.
    fn wakes(end: u64, publish: fn(&Published), done: fn(&Published) -> bool) {
        loom::model(move || {
            let p = Arc::new(Published::new(0, end, 0));
            let p2 = p.clone();
            let writer = loom::thread::spawn(move || publish(&p2));
            assert!(p.wait_until(Duration::from_secs(3600), done));
            writer.join().unwrap();
        });
    }

    /// A waiter for the end offset is never left sleeping after it passes.
    #[test]
    fn loom_no_lost_wakeup() {
        wakes(0, |p| p.publish_end(1), |p| p.log_end_offset() >= 1);
    }

    /// A consumer waiting for the HW to pass an offset is woken.
    #[test]
    fn loom_no_lost_wakeup_for_the_hw() {
        wakes(
            1,
            |p| p.publish_high_watermark(1),
            |p| p.high_watermark() >= 1,
        );
    }
}
