//! The long tier: tests that would take `cargo test --workspace --release`
//! past its budget (15 minutes with the build, on 2 idle cores) run only
//! with `HIGHWATER_LONG_TESTS=1`, which CI (`.ci/run`) sets. Without it
//! each says that it skipped, and why, and passes without running (one
//! switch for all of them, rather than `#[ignore]`).

use std::io::Write;

/// Whether the long tier runs; if not, says so for `test` (what it costs
/// in `cost`), past the test harness's capture.
pub fn enabled(test: &str, cost: &str) -> bool {
    let on = matches!(std::env::var("HIGHWATER_LONG_TESTS"), Ok(v) if !v.is_empty() && v != "0");
    if !on {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "skipped (long tier, {cost}): {test}; HIGHWATER_LONG_TESTS=1 runs it"
        );
    }
    on
}
