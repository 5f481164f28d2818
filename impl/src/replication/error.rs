//! Errors of the replication layer.

use std::fmt;

use super::messages::ApiError;
use super::types::{LeaderEpoch, ReplicaId};

/// Why a replication step did not happen.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The log underneath failed.
    Storage(crate::storage::Error),
    /// A LeaderAndIsr whose epoch the replica does not accept: not newer
    /// than its own (a restarted replica also takes its registration epoch).
    StaleLeaderAndIsr {
        epoch: LeaderEpoch,
        current: Option<LeaderEpoch>,
    },
    /// The step is not enabled in this state; the reason names the rule.
    NotEnabled(String),
    /// A protocol error returned to the caller (for example a produce
    /// refused with NotEnoughReplicas).
    Api(ApiError),
    /// A replica id that is not in the partition's assignment.
    UnknownReplica(ReplicaId),
    /// A configuration value out of range.
    InvalidConfig(String),
    /// A state machine and its log disagree about the log: a bug, reported
    /// rather than acted on.
    Inconsistent(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn not_enabled(why: impl Into<String>) -> Error {
        Error::NotEnabled(why.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Storage(e) => write!(f, "storage: {e}"),
            Error::StaleLeaderAndIsr { epoch, current } => match current {
                Some(c) => write!(
                    f,
                    "LeaderAndIsr for epoch {epoch} is stale: the replica is at epoch {c}"
                ),
                None => write!(f, "LeaderAndIsr for epoch {epoch} is stale"),
            },
            Error::NotEnabled(why) => write!(f, "not enabled: {why}"),
            Error::Api(e) => write!(f, "{e}"),
            Error::UnknownReplica(r) => write!(f, "replica {r} is not assigned to the partition"),
            Error::InvalidConfig(why) => write!(f, "invalid configuration: {why}"),
            Error::Inconsistent(why) => write!(f, "inconsistent: {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Storage(e) => Some(e),
            _ => None,
        }
    }
}

impl From<crate::storage::Error> for Error {
    fn from(e: crate::storage::Error) -> Self {
        Error::Storage(e)
    }
}

impl From<ApiError> for Error {
    fn from(e: ApiError) -> Self {
        Error::Api(e)
    }
}
