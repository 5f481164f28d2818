//! The Kafka jars `conformance/kafka/setup.sh` builds and fetches, and the
//! `java` command lines run from them.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{pids, Result};

/// Small heaps and a quick-starting JIT: four JVMs share two cores.
pub const JVM_FLAGS: &[&str] = &["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k"];

/// Where the built programs are, or why they are not there.
pub enum Setup {
    Ready(Programs),
    /// Java or Maven is missing (setup.sh's exit status 75): a test skips outside CI.
    Missing(String),
}

pub struct Programs {
    /// conformance/kafka
    pub dir: PathBuf,
}

impl Programs {
    /// Runs setup.sh (idempotent), which builds the jar and fetches Kafka 4.4.
    pub fn setup() -> Result<Setup> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kafka");
        let script = dir.join("setup.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run bash {}: {e}", script.display()))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        match out.status.code() {
            Some(0) => {}
            Some(75) => return Ok(Setup::Missing(text.trim().to_string())),
            _ => {
                return Err(format!(
                    "{} failed ({}):\n{text}",
                    script.display(),
                    out.status
                ))
            }
        }
        let programs = Programs { dir };
        for needed in [
            programs.jar(),
            programs.lib(),
            programs.dir.join("target/broker-lib"),
        ] {
            if !needed.exists() {
                return Err(format!(
                    "{} succeeded but {} is missing",
                    script.display(),
                    needed.display()
                ));
            }
        }
        Ok(Setup::Ready(programs))
    }

    fn jar(&self) -> PathBuf {
        self.dir.join("target/highwater-kafka-interop.jar")
    }

    fn lib(&self) -> PathBuf {
        self.dir.join("target/lib")
    }

    /// The brokers' and controller's classpath: Kafka with log4j as its
    /// SLF4J binding (the client programs discard logs with slf4j-nop).
    pub fn server_classpath(&self) -> Result<String> {
        let mut parts = vec![self.jar()];
        for dir in [self.lib(), self.dir.join("target/broker-lib")] {
            let entries = std::fs::read_dir(&dir)
                .map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
            let mut jars: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "jar"))
                .filter(|p| {
                    !p.file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .starts_with("slf4j-nop")
                })
                .collect();
            jars.sort();
            parts.extend(jars);
        }
        Ok(join(&parts))
    }

    /// The client programs' classpath (Main's commands; logs discarded).
    pub fn client_classpath(&self) -> String {
        format!("{}:{}/*", self.jar().display(), self.lib().display())
    }

    /// `java ... CLASS` on the client classpath (our programs, and Kafka's
    /// own tools such as `DumpLogSegments`), its own process group.
    pub fn tool(&self, class: &str) -> Command {
        let mut cmd = Command::new("java");
        cmd.arg("-Xmx256m")
            .args(JVM_FLAGS)
            .arg("-cp")
            .arg(self.client_classpath())
            .arg(class)
            .stdin(Stdio::null())
            .process_group(0);
        cmd
    }

    /// `java ... dev.highwater.kafka.Main COMMAND ARGS`.
    pub fn client(&self, command: &str, args: &[String]) -> Command {
        let mut cmd = self.tool("dev.highwater.kafka.Main");
        cmd.arg(command).args(args);
        cmd
    }

    /// Runs a client command to its end, killed past `limit`; returns its stdout.
    pub fn run_client(&self, command: &str, args: &[String], limit: Duration) -> Result<String> {
        run_bounded(
            self.client(command, args),
            &format!("Main {command}"),
            limit,
        )
    }
}

fn join(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// Runs `cmd` (stdout and stderr captured), killing its process group past `limit`.
pub fn run_bounded(mut cmd: Command, what: &str, limit: Duration) -> Result<String> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let pid = child.id() as i32;
    pids::register(pid);
    // Drain both pipes on threads so a chatty program never blocks on a full pipe.
    let mut out_pipe = child.stdout.take().expect("piped");
    let mut err_pipe = child.stderr.take().expect("piped");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() > limit => {
                let _ = pids::signal_group(pid, libc::SIGKILL);
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                let _ = pids::signal_group(pid, libc::SIGKILL);
                let _ = child.wait();
                pids::unregister(pid);
                return Err(format!("waiting for {what}: {e}"));
            }
        }
    };
    pids::unregister(pid);
    let out = out_t.join().unwrap_or_default();
    let err = err_t.join().unwrap_or_default();
    match status {
        Some(s) if s.success() => Ok(out),
        Some(s) => Err(format!("{what} failed ({s}): {}", err.trim())),
        None => Err(format!(
            "{what} did not end within {limit:?}: {}",
            err.trim()
        )),
    }
}
