//! A command whose reader goes away (`highwater check | head`) ends as a
//! Unix tool does, killed by SIGPIPE, instead of panicking in `println!`:
//! Rust starts programs with SIGPIPE ignored, so a write to a closed pipe
//! is an error, and `println!` panics on it.
//!
//! Only for commands that write to their standard output and hold no
//! sockets: a server (`highwater explore`) must keep SIGPIPE ignored, or a
//! browser closing a connection mid-answer would kill it.

/// Restores SIGPIPE's default action. Call first thing in `main`, before any
/// thread starts.
pub fn end_when_stdout_closes() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default has no
    // preconditions; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
