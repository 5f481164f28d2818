//! Apache Kafka itself as a test peer (spec/kafka-cluster.md): a real
//! KRaft cluster of one controller and three brokers, each a `java`
//! process started from the jars `conformance/kafka/setup.sh` fetches,
//! on 127.0.0.1 in a directory of its own; a seeded nemesis that kills,
//! pauses and stops brokers (and cuts an unflushed log tail) and partitions
//! them from the controller or from each other; a producer
//! and a consumer (Kafka's clients, `ClusterClient.java`); and a checker
//! that every acknowledged record is on the final leader's log.
//!
//! - [`programs`]: the built jars, and Java commands run with a time bound.
//! - [`pids`]: every process started, so that Ctrl-C stops them all.
//! - [`node`]: one Kafka process: start, kill -9, SIGTERM, SIGSTOP/SIGCONT.
//! - [`cluster`]: the cluster's configuration, start, readiness and stop.
//! - [`proxy`]: each broker's link to the controller, and the links between
//!   brokers (told apart by the client id of each connection's first
//!   request), which can be held or cut.
//! - [`client`]: the Java client commands (topic, describe, produce, consume).
//! - [`segment`]: cutting a partition's log back to its recovery point.
//! - [`nemesis`]: the seeded, printed, replayable fault schedule.
//! - [`checker`]: acknowledged records against the log read back.
//! - [`soak`]: one seed's run, start to summary ([`summary`]).

pub mod checker;
pub mod client;
pub mod cluster;
pub mod nemesis;
pub mod node;
pub mod pids;
pub mod programs;
pub mod proxy;
pub mod segment;
pub mod soak;
pub mod summary;

/// What goes wrong in the harness, said plainly (never a panic).
pub type Result<T> = std::result::Result<T, String>;

/// The rule sets a run is made under (the binary's `--rules`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rules {
    /// acks=all, min.insync.replicas=2, unclean.leader.election.enable=false.
    Today,
    /// acks=1 (the rest as today).
    Acks1,
    /// min.insync.replicas=1 (the rest as today).
    MinIsr1,
    /// unclean.leader.election.enable=true (the rest as today).
    Unclean,
}

impl Rules {
    pub fn parse(text: &str) -> Result<Rules> {
        match text {
            "today" => Ok(Rules::Today),
            "acks1" => Ok(Rules::Acks1),
            "min-isr-1" => Ok(Rules::MinIsr1),
            "unclean" => Ok(Rules::Unclean),
            other => Err(format!(
                "unknown rules {other:?}: expected today, acks1, min-isr-1 or unclean"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Rules::Today => "today",
            Rules::Acks1 => "acks1",
            Rules::MinIsr1 => "min-isr-1",
            Rules::Unclean => "unclean",
        }
    }

    /// The producer's acks.
    pub fn acks(self) -> &'static str {
        match self {
            Rules::Acks1 => "1",
            _ => "all",
        }
    }

    pub fn min_insync_replicas(self) -> u32 {
        match self {
            Rules::MinIsr1 => 1,
            _ => 2,
        }
    }

    pub fn unclean_leader_election(self) -> bool {
        self == Rules::Unclean
    }
}
