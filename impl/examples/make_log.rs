//! Writes a small partition log: `cargo run -p highwater --example make_log -- <log dir> [batches]`.
//! Handy for trying `highwater-dump-log` and Kafka's own tools on our files.

use highwater::storage::{LogConfig, LogDir, Record, TopicPartition};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: make_log <log dir> [batches]")?;
    let n: u64 = args.next().map_or(Ok(100), |s| s.parse())?;
    let tp = TopicPartition::new("demo", 0)?;
    let ld = LogDir::open(std::path::Path::new(&dir))?;
    let config = LogConfig {
        segment_bytes: 64 * 1024,
        ..LogConfig::default()
    };
    let (mut log, _) = ld.open_log(&tp, config)?;
    for i in 0..n {
        let recs: Vec<Record> = (0..4)
            .map(|j| {
                Record::new(
                    1_700_000_000_000 + i as i64,
                    format!("record {i}.{j} {}", "x".repeat(200)),
                )
            })
            .collect();
        log.append(&recs, (i / 50) as i32)?;
    }
    let leo = log.log_end_offset();
    log.set_high_watermark(leo)?;
    ld.close(vec![(tp, log)])?;
    println!("wrote {leo} records to {dir}/demo-0");
    Ok(())
}
