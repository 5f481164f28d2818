//! Trace validation throughput: `cargo bench -p highwater-conformance
//! --bench trace_validation` runs seeded concurrent runs with faults
//! (`HIGHWATER_TV_RUNS`, default 40), validates each trace file, and prints
//! validation's events per second beside the rate at which the driver
//! produced those events (events over the span of the trace), in the same
//! process. Then one long run whose window keeps moving
//! (`HIGHWATER_TV_LONG_SECONDS`, default 4): validation's events per second
//! on its first quarter and on the whole trace, side by side (a ratio near
//! 1: the cost per event does not grow with the trace, since the rebuild
//! drops what the window dropped, `Rebuild::trim`).

use std::time::Instant;

use highwater::cluster::concurrent::read_trace_file;
use highwater_conformance::trace_validation::{model_config, seeded_config, validate_file};

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runs: u64 = std::env::var("HIGHWATER_TV_RUNS")
        .ok()
        .map_or(40, |v| v.parse().expect("a number of runs"));
    let (mut events, mut span_us, mut validate_s, mut validated, mut bytes) =
        (0u64, 0u64, 0.0, 0, 0);
    for seed in 0..runs {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("trace.jsonl");
        let config = seeded_config(seed, &path);
        highwater::cluster::concurrent::run(&dir.path().join("cluster"), config.clone())
            .expect("the run");
        bytes += std::fs::metadata(&path).map_or(0, |m| m.len());
        // The driver's own rate: events over the trace's span.
        let (mut n, mut first, mut last) = (0u64, None, 0u64);
        for e in read_trace_file(&path).expect("the trace").flatten() {
            n += 1;
            first.get_or_insert(e.micros);
            last = e.micros;
        }
        let started = Instant::now();
        let ok = validate_file(&model_config(&config), &config, &path);
        validate_s += started.elapsed().as_secs_f64();
        if ok.as_ref().is_ok_and(|s| s.whole()) {
            validated += 1;
        }
        events += n;
        span_us += last - first.unwrap_or(last);
    }
    let driver = events as f64 / (span_us as f64 / 1e6);
    let validation = events as f64 / validate_s;
    println!("trace validation: {runs} seeded runs with faults, {validated} validated whole");
    println!(
        "{events} events, {bytes} trace bytes ({:.0} bytes/event)",
        bytes as f64 / events as f64
    );
    println!("driver:     {driver:>12.0} events/s (events over the traces' spans)");
    println!("validation: {validation:>12.0} events/s (reading, rebuilding, checking)");
    println!(
        "ratio:      {:>12.1} x the driver's rate",
        validation / driver
    );
    linearity();
}

/// A long run without faults, flushed and its HW checkpointed at every
/// change so that the window keeps moving: events per second validating
/// its first quarter and the whole.
fn linearity() {
    use highwater::cluster::concurrent::ConcurrentConfig;
    use std::io::{BufRead, Write};
    use std::time::Duration;
    let seconds: f64 = std::env::var("HIGHWATER_TV_LONG_SECONDS")
        .ok()
        .map_or(4.0, |v| v.parse().expect("seconds"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("trace.jsonl");
    let mut config = ConcurrentConfig::new(3);
    config.duration = Duration::from_secs_f64(seconds);
    config.max_in_flight = 1;
    config.consumers = 1;
    config.flush_interval = Some(Duration::from_millis(5));
    config.replication.hw_checkpoint = highwater::replication::HwCheckpointPolicy::EveryChange;
    config.trace = true;
    config.trace_file = Some(path.clone());
    let report = highwater::cluster::concurrent::run(&dir.path().join("cluster"), config.clone())
        .expect("the run");
    let lines: Vec<String> = std::io::BufReader::new(std::fs::File::open(&path).expect("trace"))
        .lines()
        .map(|l| l.expect("a line"))
        .collect();
    let quarter = dir.path().join("quarter.jsonl");
    let mut out = std::fs::File::create(&quarter).expect("a file");
    for l in &lines[..lines.len() / 4] {
        writeln!(out, "{l}").expect("written");
    }
    let rate = |p: &std::path::Path| {
        let started = Instant::now();
        let summary = validate_file(&model_config(&config), &config, p).expect("fits");
        let s = started.elapsed().as_secs_f64();
        (summary.events as f64 / s, summary)
    };
    let (first, _) = rate(&quarter);
    let (whole, summary) = rate(&path);
    println!(
        "long run:   {} records, {} events, window moved {} times over {} offsets",
        report.records_sent,
        lines.len(),
        summary.window_moves,
        summary.offsets_dropped
    );
    println!("first quarter: {first:>9.0} events/s");
    println!("whole trace:   {whole:>9.0} events/s");
    println!(
        "ratio:         {:>9.2} (whole / first quarter)",
        whole / first
    );
}
