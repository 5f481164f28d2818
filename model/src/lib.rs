//! The stateright model of one Kafka partition.
