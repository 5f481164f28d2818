//! highwater-model: a stateright model of one Kafka partition's replication
//! (leader election, ISR, high watermark, acks, truncation, crashes), checked
//! exhaustively by the `highwater` CLI.

pub mod actions;
pub mod config;
pub mod controller;
pub mod explorer;
pub mod itf;
pub mod model;
pub mod outdir;
pub mod picture;
pub mod presets;
pub mod progress;
pub mod properties;
pub mod recovery;
pub mod render;
pub mod rerun;
pub mod reshape;
pub mod rules;
pub mod run;
pub mod shape;
pub mod sigpipe;
pub mod state;
pub mod state_diff;
pub mod stateright_explorer;
pub mod symmetry;
pub mod truncation;
pub mod watch;

pub use actions::Action;
pub use config::{Acks, Config, HwCheckpoint, Truncation};
pub use model::{PartitionModel, Trace};
pub use presets::{Expect, Preset, PRESETS};
pub use state::State;
