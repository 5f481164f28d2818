//! Conformance between the model and the implementation (lockstep, trace checking, replay).
