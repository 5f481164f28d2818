//! The processes of a distributed check, and the connections timely's
//! communication layer runs over.
//!
//! timely's own set-up (`-n`, `-p`, `-h`) listens on `localhost`, retries a
//! connection forever and prints its waiting on standard output, where
//! process 0 prints the report. So the sockets are made here: each process
//! listens on its own address of the host file, connects to every process
//! before it (retrying until a deadline) and accepts every process after
//! it, and each side checks in a handshake that the other runs the same
//! check (a token of its settings). The connected sockets are handed to
//! timely (`initialize_networking_from_sockets`), which exchanges the
//! workers' data over them.

use std::any::Any;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};
use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
use timely::communication::allocator::ProcessBuilder;
use timely::communication::{AllocatorBuilder, Hooks};

/// Where the workers of a check run: `workers` threads in each of
/// `processes` processes, this one being `process`; `addresses` (the host
/// file's lines) says where each process listens.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub workers: usize,
    pub processes: usize,
    pub process: usize,
    /// One `host:port` per process (unused for one process).
    pub addresses: Vec<String>,
    /// How long a process waits for the others to start.
    pub connect_timeout: Duration,
    /// The same for every process of one check (a hash of its settings):
    /// a process started with other settings is refused.
    pub token: u64,
}

impl Cluster {
    /// `workers` threads in this one process.
    pub fn threads(workers: usize) -> Cluster {
        Cluster {
            workers,
            processes: 1,
            process: 0,
            addresses: Vec::new(),
            connect_timeout: Duration::from_secs(60),
            token: 0,
        }
    }

    /// Every worker of the check.
    pub fn peers(&self) -> usize {
        self.workers * self.processes
    }

    /// The addresses of `processes` processes on this host, from `port` on.
    pub fn localhost(processes: usize, port: u16) -> Vec<String> {
        (0..processes)
            .map(|i| format!("127.0.0.1:{}", usize::from(port) + i))
            .collect()
    }

    /// Checks the numbers against each other.
    pub fn validate(&self) -> Result<(), String> {
        if self.workers == 0 {
            return Err("--workers must be at least 1".into());
        }
        if self.processes == 0 {
            return Err("--processes must be at least 1".into());
        }
        if self.process >= self.processes {
            return Err(format!(
                "--process {} is not one of the {} processes (0 to {})",
                self.process,
                self.processes,
                self.processes - 1
            ));
        }
        if self.processes > 1 && self.addresses.len() < self.processes {
            return Err(format!(
                "{} processes need {} addresses, one per line of the host file; it has {}",
                self.processes,
                self.processes,
                self.addresses.len()
            ));
        }
        Ok(())
    }
}

/// A host file's addresses: one `host:port` per line, blank lines and
/// `#` comments skipped.
pub fn read_hostfile(path: &std::path::Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the host file {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect())
}

/// timely's allocators for this process's workers, and what must live as
/// long as they do (the network threads).
pub(crate) fn allocators(
    cluster: &Cluster,
) -> Result<(Vec<AllocatorBuilder>, Box<dyn Any + Send>), String> {
    cluster.validate()?;
    if cluster.processes == 1 {
        let config = if cluster.workers == 1 {
            timely::CommunicationConfig::Thread
        } else {
            timely::CommunicationConfig::Process(cluster.workers)
        };
        return config.try_build();
    }
    let sockets = connect(cluster)?;
    let hooks = Hooks::default();
    let local = ProcessBuilder::new_typed_vector(
        cluster.workers,
        hooks.refill.clone(),
        hooks.spill.clone(),
    );
    let (builders, guard) =
        initialize_networking_from_sockets(local, sockets, cluster.process, cluster.workers, hooks)
            .map_err(|e| format!("cannot start the network threads: {e}"))?;
    Ok((
        builders.into_iter().map(AllocatorBuilder::Tcp).collect(),
        Box::new(guard),
    ))
}

/// Marks a handshake as highwater's.
const MAGIC: u64 = u64::from_le_bytes(*b"hwcheck1");

fn hello(cluster: &Cluster) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, v) in [
        MAGIC,
        cluster.token,
        cluster.process as u64,
        (cluster.processes * 1_000_000 + cluster.workers) as u64,
    ]
    .iter()
    .enumerate()
    {
        out[i * 8..][..8].copy_from_slice(&v.to_le_bytes());
    }
    out
}

/// Reads the other side's handshake: its process index, once it is shown
/// to run the same check.
fn read_hello(stream: &mut TcpStream, cluster: &Cluster, addr: &str) -> Result<usize, String> {
    let mut buf = [0u8; 32];
    stream
        .read_exact(&mut buf)
        .map_err(|e| format!("no handshake from {addr}: {e}"))?;
    let word = |i: usize| u64::from_le_bytes(buf[i * 8..][..8].try_into().expect("8 bytes"));
    if word(0) != MAGIC {
        return Err(format!("{addr} is not a highwater check process"));
    }
    let process = word(2) as usize;
    if word(1) != cluster.token {
        return Err(format!(
            "process {process} (at {addr}) runs another check: its settings differ from this one's"
        ));
    }
    if word(3) != (cluster.processes * 1_000_000 + cluster.workers) as u64 {
        return Err(format!(
            "process {process} (at {addr}) was started with other --processes or --workers"
        ));
    }
    Ok(process)
}

/// One connected socket per other process (None for this one).
fn connect(cluster: &Cluster) -> Result<Vec<Option<TcpStream>>, String> {
    let me = cluster.process;
    let n = cluster.processes;
    let own = &cluster.addresses[me];
    let listener = TcpListener::bind(own).map_err(|e| {
        format!("process {me} cannot listen on {own} (its line of the host file): {e}")
    })?;
    let deadline = Instant::now() + cluster.connect_timeout;
    let mut sockets: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    // A process before this one may still be reaching the ones before it.
    let timeout = Some(cluster.connect_timeout.max(Duration::from_secs(1)));
    for (i, addr) in cluster.addresses.iter().enumerate().take(me) {
        let mut stream = loop {
            match TcpStream::connect(addr) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!(
                        "process {me} could not reach process {i} at {addr} within {} s: {e}",
                        cluster.connect_timeout.as_secs()
                    ))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(timeout)
            .map_err(|e| e.to_string())?;
        stream
            .write_all(&hello(cluster))
            .map_err(|e| format!("cannot greet process {i} at {addr}: {e}"))?;
        let theirs = read_hello(&mut stream, cluster, addr)?;
        if theirs != i {
            return Err(format!(
                "{addr} is process {theirs}, but the host file gives it to process {i}"
            ));
        }
        stream.set_read_timeout(None).map_err(|e| e.to_string())?;
        sockets[i] = Some(stream);
    }
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    while sockets[me + 1..].iter().any(Option::is_none) {
        match listener.accept() {
            Ok((mut stream, peer)) => {
                let peer = peer.to_string();
                stream.set_nonblocking(false).map_err(|e| e.to_string())?;
                stream.set_nodelay(true).map_err(|e| e.to_string())?;
                stream
                    .set_read_timeout(timeout)
                    .map_err(|e| e.to_string())?;
                let theirs = read_hello(&mut stream, cluster, &peer)?;
                if theirs <= me || theirs >= n || sockets[theirs].is_some() {
                    return Err(format!(
                        "{peer} says it is process {theirs}, which this process does not expect"
                    ));
                }
                stream
                    .write_all(&hello(cluster))
                    .map_err(|e| format!("cannot greet process {theirs} at {peer}: {e}"))?;
                stream.set_read_timeout(None).map_err(|e| e.to_string())?;
                sockets[theirs] = Some(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<String> = (me + 1..n)
                        .filter(|&i| sockets[i].is_none())
                        .map(|i| i.to_string())
                        .collect();
                    return Err(format!(
                        "process {me} waited {} s on {own} for process(es) {} to connect",
                        cluster.connect_timeout.as_secs(),
                        missing.join(", ")
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(format!("process {me} cannot accept on {own}: {e}")),
        }
    }
    Ok(sockets)
}
