//! Conformance between the model (`highwater-model`) and the implementation
//! (`highwater`): the only crate that sees both.
//!
//! - [`mapping`]: a model configuration and action as the implementation's
//!   step driver takes them.
//! - [`abstraction`]: the abstraction function, from a snapshot of the
//!   implementation's cluster to the model's state.
//! - [`disk`]: what a down or killed replica's files recover to, read
//!   from copies, for lockstep to compare with the model.
//! - [`lockstep`]: one sequence of model actions run on both, states compared
//!   after every step.
//! - [`replay`]: a model counterexample, to run on the implementation.
//! - [`coverage`]: the share of a state space some runs visited.
//! - [`exhaustive`]: every transition of a configuration's state space,
//!   taken by the implementation in memory.
//! - [`trace_validation`]: a concurrent run's trace, checked event by
//!   event to be a behaviour of the model (spec/trace-validation.md).

pub mod abstraction;
pub mod coverage;
pub mod disk;
pub mod exhaustive;
pub mod kafka_cluster;
pub mod kafka_trace;
pub mod lockstep;
pub mod mapping;
pub mod pictures;
pub mod replay;
pub mod trace_validation;
