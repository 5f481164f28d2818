#![allow(dead_code)]
//! The `highwater` binary as the command-line tests run it.

use std::process::{Command, Output};

/// `highwater <args>`, run to its end.
pub fn highwater(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(args)
        .output()
        .expect("run highwater")
}

/// What it printed, stdout then stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
