use highwater::cluster::concurrent::{self, ConcurrentConfig, Fault, FaultSchedule};
use highwater_conformance::trace_validation::{model_config, validate_file};
use std::time::Duration;

fn main() {
    let n: u64 = std::env::args().nth(1).map_or(5, |s| s.parse().unwrap());
    for seed in 0..n {
        let dir = tempfile::tempdir().unwrap();
        let mut c = ConcurrentConfig::new(3);
        c.duration = Duration::from_millis(300);
        c.max_records = Some(4);
        c.trace = true;
        c.trace_file = Some(dir.path().join("trace.jsonl"));
        c.settle_timeout = Duration::from_secs(3);
        c.replication.replica_lag_time_max_ms = 200;
        c.faults = Some(FaultSchedule {
            first_after: Duration::from_millis(20 + seed * 7 % 60),
            every: Duration::from_millis(80),
            down_for: Duration::from_millis(60),
            faults: vec![
                Fault::CrashLeader {
                    clean: seed % 2 == 0,
                },
                Fault::CrashFollower {
                    clean: seed % 3 == 0,
                },
            ],
        });
        let path = c.trace_file.clone().unwrap();
        let report = concurrent::run(&dir.path().join("run"), c.clone()).unwrap();
        let cfg = model_config(&c);
        match validate_file(&cfg, &c, &path) {
            Ok(s) => println!("seed {seed}: ok {:?} crashes {:?}", s, report.crashes),
            Err(m) => println!("seed {seed}: {m}"),
        }
    }
}
