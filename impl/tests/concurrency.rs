//! One writer, many readers: readers never see past the published log end
//! (or the high watermark, when they ask for it), and every batch they get
//! checks, while the writer appends, rolls and truncates.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::*;
use highwater::storage::{Error, LoadParams, Record};

#[test]
fn readers_see_only_published_valid_data() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(
        &tmp.path().join("t-0"),
        small_config(),
        LoadParams::default(),
    );
    let done = Arc::new(AtomicBool::new(false));
    // The writer starts once every reader has read once: the readers run
    // while it writes however late the threads are scheduled (the check
    // that each read was otherwise a race with the writer's end).
    let started = Arc::new(Barrier::new(4));
    let mut handles = Vec::new();
    for id in 0..3u64 {
        let reader = log.reader();
        let done = done.clone();
        let started = started.clone();
        handles.push(thread::spawn(move || {
            let mut reads = 0u64;
            let mut next = 0;
            let mut waited = false;
            while !done.load(Ordering::SeqCst) {
                let consumer = id == 0;
                let bound = if consumer {
                    reader.high_watermark()
                } else {
                    u64::MAX
                };
                match reader.read(next, 1000, bound) {
                    Ok(data) => {
                        for b in data.batches() {
                            // Everything served was published...
                            assert!(b.header.last_offset() < data.log_end_offset);
                            if consumer {
                                assert!(b.header.last_offset() < bound);
                            }
                            // ...and is the record the writer wrote there.
                            for (o, r) in b.decode_records().unwrap() {
                                assert_eq!(r.value.unwrap(), format!("v{o}").into_bytes());
                            }
                        }
                        next = if data.records.is_empty() {
                            0
                        } else {
                            data.next_offset
                        };
                        reads += 1;
                    }
                    // A truncation moved the end below where we were.
                    Err(Error::OffsetOutOfRange { .. }) => next = 0,
                    Err(e) => panic!("reader {id}: {e}"),
                }
                if !waited {
                    waited = true;
                    started.wait();
                }
            }
            reads
        }));
    }
    started.wait();
    for round in 0..30u64 {
        for _ in 0..40 {
            let o = log.log_end_offset();
            let recs: Vec<Record> = (0..3)
                .map(|k| Record::new(1, format!("v{}", o + k)))
                .collect();
            log.append(&recs, round as i32).unwrap();
            if o % 7 == 0 {
                let leo = log.log_end_offset();
                log.set_high_watermark(leo - leo % 3).unwrap();
            }
        }
        // Truncate a little now and then; data rewritten after it is the
        // same value at the same offset, so readers can check content.
        if round % 5 == 4 {
            let to = log.log_end_offset() - 9;
            log.truncate_to(to).unwrap();
        }
    }
    // A waiter wakes when data arrives.
    let reader = log.reader();
    let end = log.log_end_offset();
    let waiter = thread::spawn(move || reader.wait_for_end_offset(end, Duration::from_secs(20)));
    thread::sleep(Duration::from_millis(50));
    log.append(&[Record::new(1, format!("v{end}"))], 30)
        .unwrap();
    assert!(waiter.join().unwrap());
    assert!(!log
        .reader()
        .wait_for_end_offset(end + 5, Duration::from_millis(10)));

    done.store(true, Ordering::SeqCst);
    for h in handles {
        assert!(h.join().unwrap() > 0);
    }
    assert_eq!(read_all(&log, 0).len() as u64, log.log_end_offset());
}

#[test]
fn handles_cross_threads() {
    fn send<T: Send>() {}
    fn sync<T: Send + Sync>() {}
    send::<highwater::storage::Log>();
    sync::<highwater::storage::LogReader>();
}
