//! One Kafka process (the controller or a broker): its directory, its
//! `server.properties`, and the signals the nemesis sends it. The process
//! leads its own process group, is registered in [`pids`], and is killed
//! when the `Node` is dropped.

use std::fs::{File, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::programs::JVM_FLAGS;
use super::{pids, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Controller,
    Broker,
}

pub struct Node {
    pub id: u32,
    pub role: Role,
    /// The node's directory: server.properties, its logs (server.log,
    /// state-change.log, stdout.log) and `data/` (log.dirs).
    pub dir: PathBuf,
    child: Option<Child>,
    paused: bool,
    /// How many times it was started.
    pub starts: u32,
}

impl Node {
    pub fn new(id: u32, role: Role, dir: PathBuf) -> Node {
        Node {
            id,
            role,
            dir,
            child: None,
            paused: false,
            starts: 0,
        }
    }

    pub fn name(&self) -> String {
        match self.role {
            Role::Controller => format!("controller {}", self.id),
            Role::Broker => format!("broker {}", self.id),
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn properties(&self) -> PathBuf {
        self.dir.join("server.properties")
    }

    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    pub fn is_up(&self) -> bool {
        self.child.is_some()
    }

    pub fn is_paused(&self) -> bool {
        self.paused
    }

    fn java(&self, classpath: &str, log4j: &Path) -> Command {
        let mut cmd = Command::new("java");
        cmd.arg("-Xmx384m")
            .args(JVM_FLAGS)
            .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
            .arg(format!("-Dkafka.logs.dir={}", self.dir.display()))
            // state-change.log's times are log4j's local dates: in UTC, so
            // validation can place them beside partition.log's epoch ms.
            .arg("-Duser.timezone=UTC")
            .arg("-cp")
            .arg(classpath);
        cmd
    }

    /// Formats `data/` with Kafka's StorageTool (once, before the first start).
    pub fn format(&self, classpath: &str, log4j: &Path, cluster_id: &str) -> Result<()> {
        let mut cmd = self.java(classpath, log4j);
        cmd.arg("kafka.tools.StorageTool")
            .arg("format")
            .arg("--config")
            .arg(self.properties())
            .arg("--cluster-id")
            .arg(cluster_id)
            .arg("--release-version")
            // 4.4-IV2 turns on eligible.leader.replicas.version=1 (KIP-966);
            // the quorum is static (`controller.quorum.voters`, see cluster.rs).
            .arg("4.4-IV2")
            .stdin(Stdio::null())
            .process_group(0);
        super::programs::run_bounded(
            cmd,
            &format!("StorageTool format for {}", self.name()),
            Duration::from_secs(60),
        )
        .map(|_| ())
    }

    /// Starts `kafka.Kafka server.properties`, its output appended to stdout.log.
    pub fn start(&mut self, classpath: &str, log4j: &Path) -> Result<()> {
        if self.child.is_some() {
            return Err(format!("{} is already running", self.name()));
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("stdout.log"))
            .map_err(|e| format!("cannot open {}/stdout.log: {e}", self.dir.display()))?;
        let log2 = log.try_clone().map_err(|e| format!("stdout.log: {e}"))?;
        let mut cmd = self.java(classpath, log4j);
        cmd.arg("kafka.Kafka")
            .arg(self.properties())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2))
            .process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start java for {}: {e}", self.name()))?;
        pids::register(child.id() as i32);
        self.child = Some(child);
        self.paused = false;
        self.starts += 1;
        Ok(())
    }

    fn signal(&self, signal: libc::c_int) -> Result<()> {
        let pid = self
            .pid()
            .ok_or_else(|| format!("{} is not running", self.name()))?;
        pids::signal_group(pid, signal)
            .map_err(|e| format!("cannot signal {} (pid {pid}): {e}", self.name()))
    }

    /// SIGSTOP: the process stays, silent (no heartbeats, no fetches).
    pub fn pause(&mut self) -> Result<()> {
        self.signal(libc::SIGSTOP)?;
        self.paused = true;
        Ok(())
    }

    pub fn resume(&mut self) -> Result<()> {
        self.signal(libc::SIGCONT)?;
        self.paused = false;
        Ok(())
    }

    /// kill -9 and wait for it.
    pub fn kill(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pid = child.id() as i32;
        let _ = pids::signal_group(pid, libc::SIGKILL);
        let _ = pids::signal_group(pid, libc::SIGCONT);
        let waited = child.wait();
        pids::unregister(pid);
        self.paused = false;
        waited
            .map(|_| ())
            .map_err(|e| format!("waiting for {} (pid {pid}) to die: {e}", self.name()))
    }

    /// SIGTERM (a clean shutdown) and wait up to `limit`, then kill -9.
    /// Returns whether it stopped by itself in time.
    pub fn terminate(&mut self, limit: Duration) -> Result<bool> {
        let name = self.name();
        let Some(child) = self.child.as_mut() else {
            return Ok(true);
        };
        let pid = child.id() as i32;
        if self.paused {
            let _ = pids::signal_group(pid, libc::SIGCONT);
        }
        pids::signal_group(pid, libc::SIGTERM)
            .map_err(|e| format!("cannot signal {name} (pid {pid}): {e}"))?;
        let start = Instant::now();
        while start.elapsed() < limit {
            match child.try_wait() {
                Ok(Some(_)) => {
                    self.child = None;
                    self.paused = false;
                    pids::unregister(pid);
                    // Whatever it left in its group goes too.
                    let _ = pids::signal_group(pid, libc::SIGKILL);
                    return Ok(true);
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => return Err(format!("waiting for {name}: {e}")),
            }
        }
        self.kill()?;
        Ok(false)
    }

    /// Whether the process ended by itself (a crash at start, say).
    pub fn exited(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => {
                let pid = child.id() as i32;
                pids::unregister(pid);
                self.child = None;
                Some(format!("{} exited by itself ({status})", self.name()))
            }
            _ => None,
        }
    }

    /// Whether the latest start got as far as "Kafka Server started" (server.log
    /// is appended to across starts, one such line per start).
    pub fn started(&self) -> bool {
        let text = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        text.matches("Kafka Server started").count() as u32 >= self.starts
    }

    /// The tail of server.log, for an error message.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let mut out = String::new();
        if let Ok(stdout) = std::fs::read_to_string(self.dir.join("stdout.log")) {
            let v: Vec<&str> = stdout.lines().collect();
            out += &v[v.len().saturating_sub(lines)..].join("\n");
            out += "\n";
        }
        let v: Vec<&str> = text.lines().collect();
        out += &v[v.len().saturating_sub(lines)..].join("\n");
        out
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// Creates (truncating) a file with `text`.
pub fn write_file(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    let mut f = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
