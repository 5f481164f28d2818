//! Side-by-side produce benchmark: acks=all produce to a partition of 3
//! replicas on this host, through the implementation's concurrent driver
//! and through a real Apache Kafka 4.4 cluster (the harness of
//! `kafka_cluster`: one KRaft controller and three brokers on 127.0.0.1),
//! in one run; prints the throughput and the p50/p99/max ack latency of
//! each and their ratio. Run it with `conformance/kafka/bench-produce.sh`
//! (a benchmark, not a test).
//!
//! Workload, on both sides: `--records` records, each an 8-byte key (its
//! number) and a `--record-bytes` value, no compression, sent by one
//! producer in produce requests of `--batch-records` records, closed loop:
//! at most `--in-flight` requests' worth of records unacknowledged at a
//! time. acks=all, min.insync.replicas=2, replica.lag.time.max.ms and the
//! flush interval as the harness's cluster has them (6 s, 2 s), and on our
//! side Kafka's defaults for the fetch wait (500 ms), request timeout
//! (30 s) and fetch size (1 MiB).
//!
//! - highwater: `concurrent::run` with `max_in_flight` requests of
//!   `records_per_request` records; a record's ack latency is its
//!   request's, from the producer thread's send into the leader's inbox to
//!   its taking in the answer (in-process channels, no network, no
//!   encoding on the wire); the time is from the first request sent to
//!   the last answer (`RunReport::produce_span`).
//! - Kafka: `ClusterClient.java`'s `produce-bench` (Kafka's producer in
//!   its own JVM, over TCP): batch.size fits exactly `--batch-records`
//!   records, max.in.flight.requests.per.connection `--in-flight`, and a
//!   window of `--in-flight` x `--batch-records` unacknowledged records;
//!   a record's ack latency is from just before `send` to its callback
//!   (so it includes its wait in the accumulator); the time is from the
//!   first timed send to the last callback, after `--warmup-records`
//!   untimed records. The harness runs every JVM with C1 only and the
//!   serial GC (`programs::JVM_FLAGS`: four JVMs share two cores).
//!
//! Percentiles are nearest rank over every record's latency (index
//! round(p / 100 * (n - 1))) on both sides.
//!
//! ```text
//! kafka_produce_bench [--records N] [--record-bytes N] [--batch-records K]
//!                     [--in-flight F] [--linger-ms L] [--warmup-records W]
//!                     [--dir DIR] [--keep]
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use highwater::cluster::concurrent::{self, ConcurrentConfig};
use highwater::replication::Acks;
use highwater_conformance::kafka_cluster::cluster::{
    Cluster, ClusterConfig, FLUSH_MS, REPLICA_LAG_MS,
};
use highwater_conformance::kafka_cluster::programs::{Programs, Setup};
use highwater_conformance::kafka_cluster::{client, pids, Rules};
use serde_json::Value;

const TOPIC: &str = "bench";

#[derive(Parser)]
#[command(about = "acks=all produce: the concurrent driver beside a real Kafka cluster")]
struct Cli {
    /// Records each side sends (timed), a whole number of batches.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    records: u64,
    /// Bytes of each record's value.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(0..=1 << 19))]
    record_bytes: u64,
    /// Records in each produce request (batch).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=4096))]
    batch_records: u64,
    /// Produce requests unacknowledged at once (Kafka's idempotent
    /// producer allows 5 at most).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=5))]
    in_flight: u64,
    /// Kafka's linger.ms: bounds the wait of a batch the window left short
    /// (a full batch goes at once).
    #[arg(long, default_value_t = 100)]
    linger_ms: u64,
    /// Records Kafka's producer sends and flushes untimed first
    /// (connections, metadata, JIT).
    #[arg(long, default_value_t = 2000)]
    warmup_records: u64,
    /// Where both sides' data go (DIR/highwater and DIR/kafka, cleared first).
    #[arg(long, default_value_os_t = std::env::temp_dir().join("highwater-produce-bench"))]
    dir: PathBuf,
    /// Keep both sides' data (and the brokers' logs).
    #[arg(long)]
    keep: bool,
}

/// One side's figures.
struct Figures {
    records: u64,
    seconds: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

impl Figures {
    fn records_per_s(&self) -> f64 {
        self.records as f64 / self.seconds
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = pids::kill_all_on_ctrl_c() {
        eprintln!("{e}");
        return ExitCode::from(2);
    }
    match bench(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kafka_produce_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bench(cli: &Cli) -> Result<(), String> {
    if !cli.records.is_multiple_of(cli.batch_records) {
        return Err(format!(
            "--records ({}) must be a whole number of batches of --batch-records ({})",
            cli.records, cli.batch_records
        ));
    }
    let programs = match Programs::setup()? {
        Setup::Ready(p) => p,
        Setup::Missing(why) => return Err(format!("cannot run Kafka: {why}")),
    };
    let (ours_dir, kafka_dir) = (cli.dir.join("highwater"), cli.dir.join("kafka"));
    for d in [&ours_dir, &kafka_dir] {
        if d.exists() {
            std::fs::remove_dir_all(d).map_err(|e| format!("cannot clear {}: {e}", d.display()))?;
        }
    }
    println!(
        "workload: {} records of {} B values (8 B keys) in requests of {} records, \
         {} requests in flight, acks=all, 3 replicas, min.insync.replicas=2; data under {}",
        cli.records,
        cli.record_bytes,
        cli.batch_records,
        cli.in_flight,
        cli.dir.display()
    );
    println!("load average before: {}", load_average());

    let ours = highwater_side(cli, &ours_dir)?;
    println!(
        "highwater: {:.3} s, p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        ours.seconds, ours.p50_ms, ours.p99_ms, ours.max_ms
    );
    if !cli.keep {
        let _ = std::fs::remove_dir_all(&ours_dir);
    }
    // On failure the brokers' logs stay for a look.
    let kafka = kafka_side(cli, &programs, &kafka_dir)
        .map_err(|e| format!("{e} (the cluster's logs are under {})", kafka_dir.display()))?;
    println!("load average after: {}", load_average());
    if !cli.keep {
        let _ = std::fs::remove_dir_all(&kafka_dir);
    }

    let mib = |f: &Figures| f.records_per_s() * cli.record_bytes as f64 / (1 << 20) as f64;
    let rows = [
        ("records/s", ours.records_per_s(), kafka.records_per_s()),
        ("MiB/s of values", mib(&ours), mib(&kafka)),
        ("p50 ack ms", ours.p50_ms, kafka.p50_ms),
        ("p99 ack ms", ours.p99_ms, kafka.p99_ms),
        ("max ack ms", ours.max_ms, kafka.max_ms),
    ];
    println!();
    println!(
        "{:<16} {:>12} {:>12} {:>22}",
        "", "highwater", "kafka", "ratio highwater/kafka"
    );
    for (what, a, b) in rows {
        println!("{what:<16} {a:>12.3} {b:>12.3} {:>22.2}", a / b);
    }
    println!(
        "(throughput ratio > 1: highwater moved more; latency ratio < 1: highwater acknowledged sooner)"
    );
    Ok(())
}

/// The concurrent driver under the cluster's rules and the workload.
fn highwater_side(cli: &Cli, dir: &Path) -> Result<Figures, String> {
    let mut c = ConcurrentConfig::new(3);
    c.acks = Acks::All;
    c.replication.min_insync_replicas = Rules::Today.min_insync_replicas() as usize;
    c.replication.replica_lag_time_max_ms = REPLICA_LAG_MS;
    c.flush_interval = Some(Duration::from_millis(FLUSH_MS));
    c.producers = 1;
    c.max_in_flight = cli.in_flight as usize;
    c.records_per_request = cli.batch_records as usize;
    c.record_bytes = cli.record_bytes as usize;
    c.max_records = Some(cli.records);
    c.until.acknowledged = Some(cli.records);
    c.duration = Duration::ZERO;
    // Kafka's defaults, which the harness's brokers keep:
    // replica.fetch.wait.max.ms, request.timeout.ms (a slow answer is
    // measured, not dropped), replica.fetch.max.bytes.
    c.fetch_max_wait = Duration::from_millis(500);
    c.request_timeout = Duration::from_secs(30);
    c.produce_timeout = Duration::from_secs(30);
    c.replication.replica_fetch_max_bytes = 1 << 20;
    c.goal_timeout = Duration::from_secs(600);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let report = concurrent::run(dir, c).map_err(|e| format!("the concurrent driver: {e}"))?;
    let acked = report.acked.len() as u64;
    if acked != cli.records
        || !report.produce_errors.is_empty()
        || report.produce_timeouts != 0
        || !report.errors.is_empty()
        || !report.unmet_goals.is_empty()
    {
        return Err(format!(
            "the concurrent driver acknowledged {acked} of {} records (errors {:?}, \
             timeouts {}, replica errors {:?}, unmet goals {:?})",
            cli.records,
            report.produce_errors,
            report.produce_timeouts,
            report.errors,
            report.unmet_goals
        ));
    }
    let seconds = report
        .produce_span
        .ok_or("the concurrent driver reports no produce span")?
        .as_secs_f64();
    // Every request holds `batch_records` records, each acknowledged with
    // its request: a record's latency is its request's.
    let lat = &report.ack_latencies_us;
    let ms = |p: f64| percentile(lat, cli.batch_records, p) as f64 / 1e3;
    Ok(Figures {
        records: cli.records,
        seconds,
        p50_ms: ms(50.0),
        p99_ms: ms(99.0),
        max_ms: lat.last().copied().unwrap_or(0) as f64 / 1e3,
    })
}

/// Nearest rank (index round(p / 100 * (n - 1)), as the Java side) over
/// `sorted` with each value standing for `each` records.
fn percentile(sorted: &[u64], each: u64, p: f64) -> u64 {
    let n = sorted.len() as u64 * each;
    if n == 0 {
        return 0;
    }
    let i = ((p / 100.0) * (n - 1) as f64).round() as u64;
    sorted[((i / each) as usize).min(sorted.len() - 1)]
}

/// The harness's cluster: started, the topic made and fully in sync, the
/// Java producer run, and the cluster stopped whatever happened.
fn kafka_side(cli: &Cli, programs: &Programs, dir: &Path) -> Result<Figures, String> {
    eprintln!("starting 1 controller + 3 brokers under {}", dir.display());
    let mut cluster = Cluster::start(programs, &ClusterConfig::new(Rules::Today), dir)?;
    eprintln!("cluster up in {:.1}s", cluster.started_in.as_secs_f64());
    let result = produce_on(cli, programs, &cluster);
    // Stopped on success and failure alike (Drop kills whatever this leaves).
    match cluster.stop() {
        Ok(killed) if !killed.is_empty() => eprintln!("had to kill -9 at the end: {killed:?}"),
        Ok(_) => {}
        Err(e) => eprintln!("stopping the cluster: {e}"),
    }
    let line = result?;
    println!("kafka:     {line}");
    let v: Value =
        serde_json::from_str(&line).map_err(|e| format!("produce-bench printed {line:?}: {e}"))?;
    let num = |k: &str| {
        v[k].as_f64()
            .ok_or_else(|| format!("produce-bench printed no {k}: {line}"))
    };
    if num("errors")? != 0.0 {
        return Err(format!("Kafka's producer met errors: {line}"));
    }
    // Batches of another size than asked would make the sides unequal.
    if let Ok(per) = num("records-per-request-avg") {
        if (per - cli.batch_records as f64).abs() > 0.5 {
            eprintln!(
                "warning: Kafka's requests held {per:.1} records on average, not {}",
                cli.batch_records
            );
        }
    }
    Ok(Figures {
        records: num("records")? as u64,
        seconds: num("seconds")?,
        p50_ms: num("p50_ms")?,
        p99_ms: num("p99_ms")?,
        max_ms: num("max_ms")?,
    })
}

/// The Java producer's summary line.
fn produce_on(cli: &Cli, programs: &Programs, cluster: &Cluster) -> Result<String, String> {
    let bootstrap = cluster.bootstrap();
    client::create_topic(programs, bootstrap, TOPIC)?;
    let (state, full) = client::wait_full_isr(programs, bootstrap, TOPIC, Duration::from_secs(60));
    if !full {
        return Err(format!(
            "topic {TOPIC} not fully in sync within 60 s: {state:?}"
        ));
    }
    let args: Vec<String> = [
        ("bootstrap", bootstrap.to_string()),
        ("topic", TOPIC.to_string()),
        ("records", cli.records.to_string()),
        ("record-bytes", cli.record_bytes.to_string()),
        ("batch-records", cli.batch_records.to_string()),
        ("in-flight", cli.in_flight.to_string()),
        ("linger-ms", cli.linger_ms.to_string()),
        ("warmup-records", cli.warmup_records.to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [format!("--{k}"), v])
    .collect();
    // Bounded: 5 minutes, and a millisecond a record beyond.
    let limit = Duration::from_secs(300) + Duration::from_millis(cli.records + cli.warmup_records);
    let out = programs.run_client("produce-bench", &args, limit)?;
    out.lines()
        .find(|l| l.starts_with('{'))
        .map(str::to_string)
        .ok_or_else(|| format!("produce-bench printed no summary: {out:?}"))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
