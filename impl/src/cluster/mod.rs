//! Drivers that wire replicas, a controller and storage together.
