//! The long tier: tests that would take `cargo test --workspace --release`
//! past its budget (15 minutes with the build, on 2 idle cores) run only
//! with `HIGHWATER_LONG_TESTS=1`, which CI (`.ci/run`) sets. Without it
//! each says that it skipped, and why, and passes without running: one
//! switch for every crate, rather than `#[ignore]`, so that CI runs the
//! whole suite with one command. Test files include this one file with
//! `#[path = "../../testkit/long_tier.rs"] mod long_tier;`.

use std::io::Write;

/// Whether the long tier runs. If not, says that the calling test skipped
/// and what running it costs (`cost`), past the test harness's capture:
/// `if !long_tier::enabled("a minute of search") { return; }`. (Each
/// including file uses one of these two functions or both.)
#[allow(dead_code)]
pub fn enabled(cost: &str) -> bool {
    let on = running();
    if !on {
        // The test harness names each test's thread after the test.
        let current = std::thread::current();
        let test = current.name().unwrap_or("a test");
        let _ = writeln!(
            std::io::stderr().lock(),
            "skipped (long tier: {cost}): {test}; HIGHWATER_LONG_TESTS=1 runs it"
        );
    }
    on
}

/// Whether the long tier runs, for a test that runs in both tiers at
/// different sizes (it says its size itself).
#[allow(dead_code)]
pub fn running() -> bool {
    let on = switched_on("HIGHWATER_LONG_TESTS");
    // CI that forgot the switch would pass without the long tier.
    assert!(
        on || !switched_on("CI"),
        "CI runs the long tier: set HIGHWATER_LONG_TESTS=1 (.ci/run does)"
    );
    on
}

fn switched_on(var: &str) -> bool {
    matches!(std::env::var(var), Ok(v) if !v.is_empty() && v != "0" && v != "false")
}
