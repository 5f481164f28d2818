#![allow(dead_code)]
//! Running the Kafka programs of `conformance/kafka/` from the differential
//! tests (`kafka_controller.rs`, `kafka_epoch_cache.rs`): built once per test
//! binary by `setup.sh`; outside CI a test skips with a message when Java or
//! Maven is missing, under `CI=true` that fails.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::OnceLock;

/// The Kafka programs, built by `conformance/kafka/setup.sh`.
pub struct Kafka {
    dir: PathBuf,
}

/// Whether this run is CI's: there a missing prerequisite is a failure, not a skip.
pub fn in_ci() -> bool {
    matches!(std::env::var("CI"), Ok(v) if !v.is_empty() && v != "false" && v != "0")
}

/// Writes straight to the process's stderr, past the test harness's capture.
pub fn announce(message: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{message}");
    let _ = err.flush();
}

/// The built programs, or `None` when the test must skip (outside CI only).
pub fn kafka(test: &str) -> Option<&'static Kafka> {
    static BUILT: OnceLock<Result<Kafka, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kafka");
        let setup = dir.join("setup.sh");
        let out = Command::new("bash")
            .arg(&setup)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run bash {}: {e}", setup.display()))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        match out.status.code() {
            Some(0) => {}
            // setup.sh: Java or Maven missing outside CI.
            Some(75) => return Err(text.trim().to_string()),
            _ => panic!("{} failed ({}):\n{text}", setup.display(), out.status),
        }
        Ok(Kafka { dir })
    });
    match built {
        Ok(kafka) => Some(kafka),
        Err(why) if in_ci() => panic!("CI=true and the Kafka programs are unavailable: {why}"),
        Err(why) => {
            announce(&format!(
                "SKIPPED {test}: {why} (outside CI only; under CI=true this fails)"
            ));
            None
        }
    }
}

/// A running Kafka program whose stdout is read line by line.
pub struct Lines {
    child: Child,
    out: BufReader<ChildStdout>,
    args: Vec<String>,
}

impl Kafka {
    /// Starts `kafka.sh ARGS...` (a long run: the JIT compiles hot code).
    pub fn stream(&self, args: &[&str]) -> Lines {
        let mut child = Command::new("bash")
            .arg(self.dir.join("kafka.sh"))
            .args(args)
            .env("JAVA_OPTS", "-XX:+UseSerialGC")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kafka.sh");
        let out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped"));
        Lines {
            child,
            out,
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl Lines {
    /// The next line (without its newline) into `buf`; false at the end.
    pub fn next_line(&mut self, buf: &mut Vec<u8>) -> bool {
        buf.clear();
        let n = self.out.read_until(b'\n', buf).expect("read from kafka.sh");
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        n > 0
    }

    /// Waits for the program; panics unless it succeeded. Returns its stderr.
    pub fn finish(mut self) -> String {
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        let status = self.child.wait().expect("wait for kafka.sh");
        assert!(
            status.success(),
            "kafka.sh {:?} failed ({status}):\n{err}",
            self.args
        );
        err
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        // A test that stops reading early (a failure) ends the program it started.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
