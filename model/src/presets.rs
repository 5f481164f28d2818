//! Named configurations, each with the verdict it expects. `safe` runs
//! today's rules; each historical preset is `safe` with as little changed as
//! its failure needs, and names the property it breaks.

use crate::config::{Acks, Config, HwCheckpoint, Truncation};
use crate::properties::*;

/// What a preset's run must show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Every always-property holds, and every sometimes-property is reached
    /// except those listed (which the preset's bounds rule out).
    Holds {
        unreachable: &'static [&'static str],
    },
    /// This always-property (or progress property) has a counterexample.
    Breaks(&'static str),
    /// No always- or progress property has a counterexample (what
    /// `--expect holds` asks of a custom run; sometimes-properties may go
    /// unreached).
    NoCounterexample,
    /// Some always- or progress property has a counterexample
    /// (`--expect counterexample`).
    AnyCounterexample,
}

/// TLC's figures for the TLA+ module a preset mirrors, as published with it.
#[derive(Clone, Copy, Debug)]
pub struct TlcReference {
    pub module: &'static str,
    pub distinct_states: u64,
    pub depth: u32,
}

/// What an exhaustive run of a preset was measured at (a test keeps the
/// state count true; the time is from `cargo bench -p highwater-model` or
/// `highwater check` on a 2-core machine, for warnings and estimates only).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Measured {
    pub unique_states: u64,
    pub seconds: f64,
}

/// The rule that fixed a historical preset's failure: the preset that
/// differs from it by that rule alone (the lesson of the TLA+ modules: the
/// diff between two rules is the bug).
#[derive(Clone, Copy, Debug)]
pub struct FixedBy {
    pub preset: &'static str,
    pub rule: &'static str,
}

#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    pub config: Config,
    pub expect: Expect,
    /// For a historical preset, the rule that fixed its failure.
    pub fixed_by: Option<FixedBy>,
    pub tlc: Option<TlcReference>,
    /// Set for presets checked exhaustively in the tests.
    pub measured: Option<Measured>,
}

/// Today's rules: acks=all, min.insync.replicas=2, truncation on fetch,
/// KIP-320 fencing, KIP-966 ELR.
pub const SAFE: Config = Config {
    replicas: 3,
    records: 2,
    max_epoch: 2,
    min_isr: 2,
    acks: Acks::All,
    truncation: Truncation::OnFetch,
    fencing: true,
    elr: true,
    last_known_leader: true,
    unclean_election: false,
    hw_checkpoint: HwCheckpoint::EveryChange,
    clean_crashes: 0,
    unclean_crashes: 1,
    leader_moves: 2,
    mutation: None,
    knock_out: None,
};

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "safe",
        summary: "today's rules (truncation on fetch, KIP-320 fencing, KIP-966 ELR, acks=all, min.insync.replicas=2): nothing is lost",
        config: SAFE,
        expect: Expect::Holds { unreachable: &[] },
        fixed_by: None,
        tlc: None,
        measured: Some(Measured {
            unique_states: SAFE_UNIQUE_STATES,
            // `highwater check` on 2026-12-02, 2 threads on 2 cores, the
            // machine otherwise idle (120 s while a build ran; 38 s before
            // fenced live brokers were modelled, at 9.4 million states).
            seconds: 65.0,
        }),
    },
    Preset {
        name: "safe-deep",
        summary: "safe, plus a clean crash",
        config: Config {
            clean_crashes: 1,
            ..SAFE
        },
        expect: Expect::Holds { unreachable: &[] },
        fixed_by: None,
        tlc: None,
        measured: None,
    },
    Preset {
        name: "safe-hw-checkpoint",
        summary: "safe with Kafka's periodic HW checkpoint: an unclean crash brings back an older HW; nothing is lost",
        config: Config {
            hw_checkpoint: HwCheckpoint::Periodic,
            ..SAFE
        },
        expect: Expect::Holds { unreachable: &[] },
        fixed_by: None,
        tlc: None,
        measured: None,
    },
    Preset {
        name: "safe-min-isr-3",
        summary: "safe with min.insync.replicas=3, every replica, and one record: the HW moves, and acks=all writes are taken, with exactly min.insync.replicas in the ISR; nothing is lost",
        config: Config {
            records: 1,
            min_isr: 3,
            ..SAFE
        },
        expect: Expect::Holds { unreachable: &[] },
        fixed_by: None,
        tlc: None,
        measured: Some(Measured {
            unique_states: SAFE_MIN_ISR_3_UNIQUE_STATES,
            // `highwater check` on 2026-12-02, 2 threads on 2 cores, the
            // machine loaded by other work (load average 6; 17 s at 8).
            seconds: 9.0,
        }),
    },
    Preset {
        name: "acks-1",
        summary: "acks=1: a write acknowledged by the leader alone is lost when the leader changes",
        config: Config {
            acks: Acks::Leader,
            ..SAFE
        },
        expect: Expect::Breaks(ACKNOWLEDGED_RECORDS_SURVIVE),
        fixed_by: Some(FixedBy {
            preset: "safe",
            rule: "acks=all",
        }),
        tlc: None,
        measured: None,
    },
    Preset {
        name: "min-isr-1",
        summary: "min.insync.replicas=1 without ELR: the leader alone in the ISR acknowledges a write, then loses it",
        config: Config {
            min_isr: 1,
            elr: false,
            ..SAFE
        },
        expect: Expect::Breaks(ACKNOWLEDGED_RECORDS_SURVIVE),
        fixed_by: Some(FixedBy {
            preset: "no-elr",
            rule: "min.insync.replicas=2",
        }),
        tlc: None,
        measured: None,
    },
    Preset {
        name: "unclean-election",
        summary: "unclean leader election: a replica outside the ISR becomes leader without committed records",
        config: Config {
            unclean_election: true,
            elr: false,
            ..SAFE
        },
        expect: Expect::Breaks(COMMITTED_RECORDS_SURVIVE),
        fixed_by: Some(FixedBy {
            preset: "no-elr",
            rule: "unclean leader election off",
        }),
        tlc: None,
        measured: None,
    },
    Preset {
        name: "no-elr",
        summary: "without KIP-966's ELR, the last replica standing shuts down uncleanly and is elected without committed records",
        config: Config {
            elr: false,
            ..SAFE
        },
        expect: Expect::Breaks(COMMITTED_RECORDS_SURVIVE),
        fixed_by: Some(FixedBy {
            preset: "safe",
            rule: "KIP-966's eligible leader replicas",
        }),
        tlc: None,
        measured: None,
    },
    Preset {
        name: "hw-truncation",
        summary: "truncation to the HW (before KIP-101), fenced as today: a follower drops a record its leader commits, then leads without it",
        config: Config {
            truncation: Truncation::Hw,
            ..SAFE
        },
        expect: Expect::Breaks(COMMITTED_RECORDS_SURVIVE),
        fixed_by: Some(FixedBy {
            preset: "epoch-lookup",
            rule: "KIP-101's leader-epoch lookup",
        }),
        tlc: None,
        measured: None,
    },
    Preset {
        name: "epoch-lookup",
        summary: "KIP-101's single epoch lookup, fenced as today: a leader that cannot answer for the follower's epoch sends it back to its HW, below a record the ISR holds",
        config: Config {
            truncation: Truncation::Epoch,
            ..SAFE
        },
        expect: Expect::Breaks(STRONG_ISR),
        fixed_by: Some(FixedBy {
            preset: "kip-279",
            rule: "KIP-279's iterated lookup",
        }),
        tlc: None,
        measured: None,
    },
    Preset {
        name: "kip-279",
        summary: "the rules before truncation on fetch (Kafka 2.1 to 2.6): a new follower finds where to truncate by KIP-279's iterated OffsetsForLeaderEpoch lookup; nothing is lost",
        config: Config {
            truncation: Truncation::EpochIterative,
            ..SAFE
        },
        expect: Expect::Holds { unreachable: &[] },
        fixed_by: None,
        tlc: None,
        measured: None,
    },
    Preset {
        name: "unfenced",
        summary: "KIP-279 without KIP-320's fencing: after fast leader changes an ISR member misses a committed record",
        config: Config {
            truncation: Truncation::EpochIterative,
            fencing: false,
            ..SAFE
        },
        expect: Expect::Breaks(STRONG_ISR),
        fixed_by: Some(FixedBy {
            preset: "kip-279",
            rule: "KIP-320's fencing",
        }),
        tlc: None,
        measured: None,
    },
    Preset {
        name: "tla-kip320",
        summary: "the protocol and bounds of the TLA+ Kip320 module (no acks, no crashes), to compare with TLC",
        config: Config {
            replicas: 3,
            records: 2,
            max_epoch: 2,
            min_isr: 1,
            acks: Acks::None,
            truncation: Truncation::EpochIterative,
            fencing: true,
            elr: false,
            last_known_leader: true,
            unclean_election: false,
            hw_checkpoint: HwCheckpoint::EveryChange,
            clean_crashes: 0,
            unclean_crashes: 0,
            leader_moves: 2,
            mutation: None,
            knock_out: None,
        },
        // The module has no crashes and no acknowledgements (acks=0).
        expect: Expect::Holds {
            unreachable: &[
                SOMETIMES_UNCLEAN_RESTART,
                SOMETIMES_ACKNOWLEDGED,
                SOMETIMES_ACKED_OUTLIVES_LEADER,
            ],
        },
        fixed_by: None,
        tlc: Some(TlcReference {
            module: "Kip320",
            distinct_states: 737_794,
            depth: 26,
        }),
        measured: Some(Measured {
            unique_states: TLA_KIP320_UNIQUE_STATES,
            seconds: 1.0,
        }),
    },
];

impl Preset {
    /// The preset's unique state count, where one is known: measured (and
    /// kept true by a test), or from one run
    /// ([`SAFE_HW_CHECKPOINT_UNIQUE_STATES`]).
    pub fn known_unique_states(&self) -> Option<u64> {
        match (self.measured, self.name) {
            (Some(m), _) => Some(m.unique_states),
            (None, "safe-hw-checkpoint") => Some(SAFE_HW_CHECKPOINT_UNIQUE_STATES),
            (None, _) => None,
        }
    }

    pub fn default_preset() -> &'static Preset {
        &PRESETS[0]
    }

    pub fn find(name: &str) -> Option<&'static Preset> {
        PRESETS.iter().find(|p| p.name == name)
    }

    pub fn names() -> Vec<&'static str> {
        PRESETS.iter().map(|p| p.name).collect()
    }

    pub fn expectation_text(&self) -> String {
        self.expect.text()
    }
}

impl Expect {
    /// The expectation in words.
    pub fn text(&self) -> String {
        match *self {
            Expect::Holds { unreachable: [] } => "everything holds".to_string(),
            Expect::Holds { unreachable } => {
                format!(
                    "everything holds; not reachable: {}",
                    unreachable.join(", ")
                )
            }
            Expect::Breaks(p) => format!("breaks \"{p}\""),
            Expect::NoCounterexample => "no counterexample".to_string(),
            Expect::AnyCounterexample => "a counterexample".to_string(),
        }
    }
}

/// `safe`'s unique state count, as measured by `highwater check` (a test
/// keeps it true).
pub const SAFE_UNIQUE_STATES: u64 = 15_649_930;

/// `safe-hw-checkpoint`'s unique state count, from one run of `highwater
/// check --preset safe-hw-checkpoint` (2026-12-03: 9 minutes 15 s and
/// 12.6 GiB on 2 cores in one process, before the queues were packed; the
/// same on 2 processes, README "Across processes and hosts"): not kept true
/// by a test, so for memory estimates and the index's first size only. It
/// predates the chain of ISRs a leader left behind learns in order
/// (`Request::later_isrs`), which grew `safe` by 0.05 %, and the dropping
/// of requests no replica can take (`actions::dead_request`), which cut
/// `safe` by 24 %; not measured again, so the index starts larger than it
/// needs.
pub const SAFE_HW_CHECKPOINT_UNIQUE_STATES: u64 = 96_292_461;

/// What `highwater check` needs at its peak (resident set) whatever its
/// size, and what each unique state adds: the line through two runs
/// (checker/README.md, "Memory"; 2026-12-03, queues of packed states):
/// `tla-kip320`, 400,807 states, 67.3 MiB, and `safe`, 20,659,040 states,
/// 1,802.1 MiB. `--memory-budget`'s estimates for a preset of known size.
pub const PEAK_BYTES_BASE: u64 = 33 << 20;
pub const PEAK_BYTES_PER_STATE: u64 = 90;

/// What a run of `states` unique states is estimated to need at its peak.
pub fn estimated_peak_bytes(states: u64) -> u64 {
    highwater_checker::memory::estimate(states, PEAK_BYTES_BASE, PEAK_BYTES_PER_STATE)
}

/// `safe-min-isr-3`'s unique state count, as measured by `highwater check
/// --preset safe-min-isr-3` (a test keeps it true).
pub const SAFE_MIN_ISR_3_UNIQUE_STATES: u64 = 1_552_027;

/// `tla-kip320`'s unique state count under symmetry reduction, as measured by
/// `highwater check --preset tla-kip320` (a test keeps it true).
pub const TLA_KIP320_UNIQUE_STATES: u64 = 321_724;

/// Why `tla-kip320`'s count differs from TLC's on the TLA+ Kip320 module
/// (shown by `highwater presets --help`).
pub const TLA_KIP320_DIFFERENCES: &str = "\
tla-kip320 uses the TLA+ Kip320 module's protocol and bounds (3 replicas, 2 records,
leader epochs 0-2, no acks, no crashes), but its state count differs from TLC's
737,794 distinct states because of these modelling choices:
  1. symmetry: replicas are interchangeable, so states that differ only by
     replica names count once (TLC counts each naming);
  2. the leader learns each follower's LEO from its fetch offset, one round late,
     as Kafka does; the module reads the followers' logs directly;
  3. a fetch copies everything the leader has, or (cut short, as by
     replica.fetch.max.bytes) one record; the module copies one record per step;
  4. the leader epoch changes only with leadership (an election, or the leader's
     removal); the module also bumps it when the controller shrinks the ISR;
  5. a request's ISR, once its leader can no longer take it, is dropped (of the
     current epoch's, the members still in the ISR are kept, for the property
     \"a removed follower rejoins\"), a request of an older epoch that no
     replica can take and no leader reads is dropped whole, and so are the
     recovery points once no unclean crash is left;
  6. the leader's HW may also wait for a caught-up follower outside the ISR
     (Kafka's maximal-ISR rule, shouldWaitForReplicaToJoinIsr); the module's
     HW counts the ISR only;
  7. a leader left behind in an epoch the controller has left may still learn
     that epoch's last ISR, as a broker applying a partition's metadata in
     order may (ReplicaManager.applyDelta); without this step the count is
     244,686.";
