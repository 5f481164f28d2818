//! The cluster: one KRaft controller and N brokers on 127.0.0.1, each a
//! process with its own directory under the cluster's, configured for
//! short runs (a 6 s broker session, 1 s heartbeats, a flush and recovery
//! point checkpoint every 2 s so that an unflushed tail is small and
//! known). Each broker reaches the controller through a proxy of its own
//! ([`proxy`](super::proxy)), so that the nemesis can partition one broker
//! from the controller; and each broker's peers reach it through a proxy in
//! front of its inter-broker listener, which tells the peers apart by the
//! client id of their requests, so that the nemesis can partition one
//! broker from another. Clients (the producer, the consumer, Admin) use
//! another listener, direct. Started, waited for (every broker registered
//! and unfenced), and stopped; every process is killed when the `Cluster`
//! is dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::node::{write_file, Node, Role};
use super::programs::Programs;
use super::proxy::{Link, Proxy};
use super::{client, Result, Rules};

pub const CONTROLLER_ID: u32 = 100;
pub const SESSION_TIMEOUT_MS: u64 = 6000;
pub const HEARTBEAT_MS: u64 = 1000;
/// A paused follower leaves the ISR after this long (Kafka's default is 30 s).
pub const REPLICA_LAG_MS: u64 = 6000;
/// Kafka flushes a log and checkpoints its recovery point this often here
/// (by default it never flushes on its own and checkpoints every 60 s), from
/// 1 s after a broker starts (`log.initial.task.delay.ms`, by default 30 s:
/// longer than a short run, and every restart starts it again).
pub const FLUSH_MS: u64 = 2000;

pub struct ClusterConfig {
    pub brokers: u32,
    pub rules: Rules,
    /// Bound on the start, until every broker is unfenced.
    pub start_timeout: Duration,
}

impl ClusterConfig {
    pub fn new(rules: Rules) -> ClusterConfig {
        ClusterConfig {
            brokers: 3,
            rules,
            start_timeout: Duration::from_secs(150),
        }
    }
}

pub struct Cluster {
    pub dir: PathBuf,
    pub controller: Node,
    pub brokers: Vec<Node>,
    classpath: String,
    log4j: PathBuf,
    bootstrap: String,
    /// Each broker's link to the controller, by broker id.
    controller_links: Vec<(u32, Proxy)>,
    /// The proxy in front of each broker's inter-broker listener (the
    /// address its peers fetch from), by broker id: the links from its
    /// peers to it.
    peer_links: Vec<(u32, Proxy)>,
    /// From the first process started to every broker unfenced.
    pub started_in: Duration,
}

/// Free ports on 127.0.0.1 for the nodes' listeners, all held until every
/// one is chosen so none repeats. They are taken below the kernel's
/// ephemeral range (`ip_local_port_range`): a port from that range, free
/// when chosen, was once taken by an outgoing connection (or a proxy's
/// listener) in the minute before the broker bound it ("Address already
/// in use", CI). Where the range cannot be read, any free port.
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let below = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok());
    let listeners: Vec<TcpListener> = match below.filter(|&b| b > LOWEST_PORT + 1_000) {
        Some(below) => {
            // From a point that differs between processes, so that two
            // harnesses started together do not try the same ports first.
            let span = below - LOWEST_PORT;
            let first = (std::process::id() % u32::from(span)) as u16;
            (0..span)
                .map(|i| LOWEST_PORT + (first + i) % span)
                .filter_map(|port| TcpListener::bind(("127.0.0.1", port)).ok())
                .take(n)
                .collect()
        }
        None => (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0"))
            .collect::<std::io::Result<_>>()
            .map_err(|e| format!("cannot bind 127.0.0.1:0: {e}"))?,
    };
    if listeners.len() < n {
        return Err(format!(
            "only {} free ports on 127.0.0.1, {n} needed",
            listeners.len()
        ));
    }
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()).map_err(|e| e.to_string()))
        .collect()
}

/// The lowest port `free_ports` takes (below it, well-known and
/// registered services).
const LOWEST_PORT: u16 = 10_000;

const LOG4J: &str = "\
status = warn
appender.server.type = File
appender.server.name = server
appender.server.fileName = ${sys:kafka.logs.dir}/server.log
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = [%d] %p %m (%c)%n
appender.state.type = File
appender.state.name = state
appender.state.fileName = ${sys:kafka.logs.dir}/state-change.log
appender.state.layout.type = PatternLayout
appender.state.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.server.ref = server
logger.state.name = state.change.logger
logger.state.level = TRACE
logger.state.additivity = false
logger.state.appenderRef.state.ref = state
appender.partition.type = File
appender.partition.name = partition
appender.partition.fileName = ${sys:kafka.logs.dir}/partition.log
appender.partition.layout.type = PatternLayout
appender.partition.layout.pattern = %d{UNIX_MILLIS} %p %m (%c)%n
logger.partition.name = kafka.cluster.Partition
logger.partition.level = DEBUG
logger.partition.additivity = false
logger.partition.appenderRef.partition.ref = partition
";

impl Cluster {
    /// Writes every node's configuration under `dir` (which must be empty
    /// or absent), formats their storage, starts them and waits until
    /// every broker is registered and unfenced.
    pub fn start(programs: &Programs, config: &ClusterConfig, dir: &Path) -> Result<Cluster> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        // The controller's; each broker's client listener; each broker's
        // inter-broker listener (behind its proxy).
        let n = config.brokers as usize;
        let ports = free_ports(1 + 2 * n)?;
        let quorum = format!("127.0.0.1:{}", ports[0]);
        let controller_addr = ([127, 0, 0, 1], ports[0]).into();
        // A static quorum (`controller.quorum.voters`), so that each node
        // reaches the controller at the address its own configuration names:
        // a broker's is its proxy. (A dynamic quorum would hand every broker
        // the controller's own endpoint from the KRaftVoters record.)
        let controller_links = (1..=config.brokers)
            .map(|id| Proxy::start(controller_addr).map(|p| (id, p)))
            .collect::<Result<Vec<_>>>()?;
        let peer_links = (1..=config.brokers)
            .map(|id| {
                let replication = ([127, 0, 0, 1], ports[n + id as usize]).into();
                Proxy::start(replication).map(|p| (id, p))
            })
            .collect::<Result<Vec<_>>>()?;
        let rules = config.rules;
        let common = format!(
            "controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             min.insync.replicas={}\n\
             unclean.leader.election.enable={}\n\
             broker.session.timeout.ms={SESSION_TIMEOUT_MS}\n\
             broker.heartbeat.interval.ms={HEARTBEAT_MS}\n\
             replica.lag.time.max.ms={REPLICA_LAG_MS}\n\
             log.flush.interval.ms={FLUSH_MS}\n\
             log.flush.scheduler.interval.ms=1000\n\
             log.flush.offset.checkpoint.interval.ms={FLUSH_MS}\n\
             log.initial.task.delay.ms=1000\n\
             offsets.topic.replication.factor=1\n\
             group.initial.rebalance.delay.ms=0\n\
             auto.create.topics.enable=false\n",
            rules.min_insync_replicas(),
            rules.unclean_leader_election(),
        );
        let log4j = dir.join("log4j2.properties");
        write_file(&log4j, LOG4J)?;
        let classpath = programs.server_classpath()?;

        let mut controller = Node::new(CONTROLLER_ID, Role::Controller, dir.join("controller"));
        let mut brokers: Vec<Node> = (1..=config.brokers)
            .map(|id| Node::new(id, Role::Broker, dir.join(format!("broker-{id}"))))
            .collect();
        let mut bootstrap = Vec::new();
        for node in std::iter::once(&controller).chain(brokers.iter()) {
            std::fs::create_dir_all(&node.dir)
                .map_err(|e| format!("cannot create {}: {e}", node.dir.display()))?;
            let own = match node.role {
                Role::Controller => format!(
                    "process.roles=controller\nnode.id={}\nlisteners=CONTROLLER://{quorum}\n\
                     controller.quorum.voters={CONTROLLER_ID}@{quorum}\n",
                    node.id
                ),
                Role::Broker => {
                    let addr = format!("127.0.0.1:{}", ports[node.id as usize]);
                    bootstrap.push(addr.clone());
                    let port_of = |links: &[(u32, Proxy)]| {
                        links
                            .iter()
                            .find(|(id, _)| *id == node.id)
                            .map(|(_, p)| p.port())
                            .ok_or("no proxy for a broker")
                    };
                    let link = port_of(&controller_links)?;
                    let peers = port_of(&peer_links)?;
                    let replication = format!("127.0.0.1:{}", ports[n + node.id as usize]);
                    // Clients bootstrap from PLAINTEXT and are answered with
                    // PLAINTEXT addresses; followers fetch from the leader's
                    // REPLICATION address, which is its proxy's.
                    format!(
                        "process.roles=broker\nnode.id={}\n\
                         listeners=PLAINTEXT://{addr},REPLICATION://{replication}\n\
                         advertised.listeners=PLAINTEXT://{addr},REPLICATION://127.0.0.1:{peers}\n\
                         inter.broker.listener.name=REPLICATION\n\
                         controller.quorum.voters={CONTROLLER_ID}@127.0.0.1:{link}\n",
                        node.id
                    )
                }
            };
            let props = format!("{own}log.dirs={}\n{common}", node.data_dir().display());
            write_file(&node.properties(), &props)?;
        }
        // A fixed cluster id: runs differ by directory, not by id.
        let cluster_id = "aGlnaHdhdGVyLWthZmthLQ";
        for node in std::iter::once(&controller).chain(brokers.iter()) {
            node.format(&classpath, &log4j, cluster_id)?;
        }
        let started = Instant::now();
        controller.start(&classpath, &log4j)?;
        for b in brokers.iter_mut() {
            b.start(&classpath, &log4j)?;
        }
        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            controller,
            brokers,
            classpath,
            log4j,
            bootstrap: bootstrap.join(","),
            controller_links,
            peer_links,
            started_in: Duration::ZERO,
        };
        cluster.wait_unfenced(programs, config.start_timeout)?;
        cluster.started_in = started.elapsed();
        Ok(cluster)
    }

    /// The brokers' addresses, for a client's bootstrap.servers.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    pub fn broker(&mut self, id: u32) -> Result<&mut Node> {
        self.brokers
            .iter_mut()
            .find(|b| b.id == id)
            .ok_or_else(|| format!("no broker {id}"))
    }

    /// Sets broker `id`'s link to the controller.
    pub fn set_controller_link(&self, id: u32, link: Link) -> Result<()> {
        self.controller_links
            .iter()
            .find(|(b, _)| *b == id)
            .map(|(_, p)| p.set(link))
            .ok_or_else(|| format!("no broker {id}"))
    }

    /// Sets the link from broker `from` to broker `to`: the connections
    /// `from` opens to `to`'s inter-broker listener (its fetches from `to`
    /// when `to` leads, and their answers).
    pub fn set_peer_link(&self, from: u32, to: u32, link: Link) -> Result<()> {
        if from == to || !self.peer_links.iter().any(|(b, _)| *b == from) {
            return Err(format!("no link from broker {from} to broker {to}"));
        }
        self.peer_links
            .iter()
            .find(|(b, _)| *b == to)
            .map(|(_, p)| p.set_from(from, link))
            .ok_or_else(|| format!("no broker {to}"))
    }

    /// The broker ids.
    pub fn broker_ids(&self) -> Vec<u32> {
        self.brokers.iter().map(|b| b.id).collect()
    }

    /// What each proxy saw: how many connections began with each client
    /// id, one line per proxy.
    pub fn proxy_clients(&self) -> String {
        let mut out = String::new();
        let proxies = self
            .controller_links
            .iter()
            .map(|(id, p)| (format!("broker-{id} to the controller"), p))
            .chain(
                self.peer_links
                    .iter()
                    .map(|(id, p)| (format!("peers to broker-{id}"), p)),
            );
        for (name, p) in proxies {
            let clients: Vec<String> = p
                .clients()
                .iter()
                .map(|(c, n)| format!("{c} x{n}"))
                .collect();
            out += &format!("{name}: {}\n", clients.join(", "));
        }
        out
    }

    /// Starts a broker that is down.
    pub fn restart(&mut self, id: u32) -> Result<()> {
        let (classpath, log4j) = (self.classpath.clone(), self.log4j.clone());
        self.broker(id)?.start(&classpath, &log4j)
    }

    /// Waits until every broker is registered and unfenced; fails early,
    /// with its log, when a process has died.
    pub fn wait_unfenced(&mut self, programs: &Programs, limit: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            for node in std::iter::once(&mut self.controller).chain(self.brokers.iter_mut()) {
                if let Some(why) = node.exited() {
                    return Err(format!("{why}; its log ends:\n{}", node.log_tail(20)));
                }
            }
            let left = limit.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(format!(
                    "the brokers were not all unfenced within {limit:?}; logs under {}",
                    self.dir.display()
                ));
            }
            // One try of at most 10 s, so that a dead process is noticed between tries.
            match client::wait_brokers(
                programs,
                &self.bootstrap,
                self.brokers.len(),
                left.min(Duration::from_secs(10)),
            ) {
                Ok(()) => return Ok(()),
                Err(_) => continue,
            }
        }
    }

    /// Waits (at most `limit`) until every running node's latest start is
    /// complete: the metadata a client reads is only current after that.
    pub fn wait_started(&mut self, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            let all = std::iter::once(&mut self.controller)
                .chain(self.brokers.iter_mut())
                .all(|n| n.exited().is_none() && (!n.is_up() || n.started()));
            if all {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }

    /// Opens every link, resumes every paused process and starts every
    /// stopped one.
    pub fn heal(&mut self) -> Result<Vec<String>> {
        let mut done = Vec::new();
        for (id, proxy) in &self.controller_links {
            if proxy.link() != Link::Open {
                proxy.set(Link::Open);
                done.push(format!("opened broker-{id}'s link to the controller"));
            }
        }
        for (to, proxy) in &self.peer_links {
            for (from, _) in proxy.closed_sources() {
                proxy.set_from(from, Link::Open);
                done.push(format!("opened the link from broker-{from} to broker-{to}"));
            }
        }
        let (classpath, log4j) = (self.classpath.clone(), self.log4j.clone());
        for node in std::iter::once(&mut self.controller).chain(self.brokers.iter_mut()) {
            if node.is_paused() {
                node.resume()?;
                done.push(format!("resumed {}", node.name()));
            }
            if let Some(why) = node.exited() {
                done.push(why);
            }
            if !node.is_up() {
                node.start(&classpath, &log4j)?;
                done.push(format!("started {}", node.name()));
            }
        }
        Ok(done)
    }

    /// Stops every process cleanly (brokers first), kill -9 past a bound.
    /// Returns the processes that had to be killed.
    pub fn stop(&mut self) -> Result<Vec<String>> {
        let mut killed = Vec::new();
        for node in self
            .brokers
            .iter_mut()
            .chain(std::iter::once(&mut self.controller))
        {
            if !node.terminate(Duration::from_secs(30))? {
                killed.push(node.name());
            }
        }
        Ok(killed)
    }
}
