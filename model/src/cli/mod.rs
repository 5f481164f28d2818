//! The `highwater` command line, one module per role.

pub mod args;
pub mod check;
pub mod display;
pub mod explore;
pub mod presets;
pub mod replay;
pub mod report;
