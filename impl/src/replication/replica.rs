//! [`Replica`]: a [`Partition`] state machine on the log it replicates. It
//! is the one place where the state machine's storage operations meet a
//! [`ReplicaLog`]: each input is stepped, every operation asked for is
//! performed and its completion stepped in turn, until the transition has
//! messages to send. Drivers (the step driver, the concurrent driver, the
//! exhaustive conformance run) hold replicas, never logs and state
//! machines apart, so the two cannot drift.

use super::error::Result;
use super::log::{ReplicaLog, StorageFailed, StorageOp};
use super::messages::Output;
use super::partition::{Input, Partition, Ready};
use super::types::{HwCheckpointPolicy, LeaderEpoch, ReplicaId, ReplicationConfig};

/// One replica: its state machine and its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica<L> {
    core: Partition,
    log: L,
    /// Answers the state machine made to an operation that failed.
    failure_answers: Vec<Output>,
}

impl<L: ReplicaLog> Replica<L> {
    /// A replica starting (or restarting) on `log`; see [`Partition::new`].
    pub fn new(
        id: ReplicaId,
        replicas: Vec<ReplicaId>,
        config: ReplicationConfig,
        mut log: L,
        registered_epoch: Option<LeaderEpoch>,
    ) -> Result<Replica<L>> {
        // Every change includes the one a restart makes: recovery may have
        // clamped the HW below the file's.
        let state = log.state();
        if config.hw_checkpoint == HwCheckpointPolicy::EveryChange
            && state.hw_checkpoint != state.high_watermark
        {
            log.apply(StorageOp::WriteCheckpoints)?;
        }
        let core = Partition::new(id, replicas, config, log.state(), registered_epoch)?;
        Ok(Replica {
            core,
            log,
            failure_answers: Vec::new(),
        })
    }

    /// The state machine.
    pub fn core(&self) -> &Partition {
        &self.core
    }
    /// Sets the state machine's request timeout; see
    /// [`Partition::set_request_timeout_ms`].
    pub fn set_request_timeout_ms(&mut self, ms: u64) {
        self.core.set_request_timeout_ms(ms);
    }
    /// See [`Partition::set_correlation_base`].
    pub fn set_correlation_base(&mut self, base: u64) {
        self.core.set_correlation_base(base);
    }
    /// The log, to read.
    pub fn log(&self) -> &L {
        &self.log
    }
    /// Gives the log back (on shutdown or crash); producers still waiting
    /// get no answer, as when a broker goes away.
    pub fn into_log(self) -> L {
        self.log
    }

    /// Takes `input` at `now` and runs its transition to the end. `Err`
    /// before any operation is a refusal (nothing changed); a storage
    /// failure stops the transition where it failed, the replica as it was
    /// before that operation, and is returned (the answers the state
    /// machine then made wait in [`take_failure_answers`](Self::take_failure_answers)).
    pub fn handle(&mut self, now: u64, input: Input) -> Result<Vec<Output>> {
        let mut ready = self.core.step(now, input)?;
        loop {
            let op = match ready {
                Ready::Send(out) => return Ok(out),
                Ready::Persist(op) => op,
            };
            match self.log.apply(op) {
                Ok(done) => ready = self.core.step(now, Input::Storage(Ok(done)))?,
                Err(e) => {
                    let failed = StorageFailed {
                        state: self.log.state(),
                    };
                    if let Ok(Ready::Send(out)) = self.core.step(now, Input::Storage(Err(failed))) {
                        self.failure_answers.extend(out);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// The answers made to operations that failed, since the last call.
    pub fn take_failure_answers(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.failure_answers)
    }
}
