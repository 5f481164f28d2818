//! A process that goes away mid-run, said as an error.
//!
//! timely's network threads panic when a connection to another process
//! fails (`timely communication error: reading data: Connection reset by
//! peer`), and the worker and calling threads then panic in turn (a
//! poisoned queue, a joined thread that panicked). Left alone that is four
//! backtraces and exit status 101 for what is an ordinary event of a run
//! across hosts: a process killed, a host lost. A panic hook notes the
//! first such failure and keeps those panics quiet; the search, which runs
//! timely under `catch_unwind`, returns it as an error. Any other panic is
//! left to the hook before it.

use std::sync::{Mutex, Once};

/// The first connection failure seen in this process.
static FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// The failure noted since the last call, if any.
pub(crate) fn take() -> Option<String> {
    FAILURE.lock().unwrap_or_else(|p| p.into_inner()).take()
}

fn noted() -> bool {
    FAILURE.lock().unwrap_or_else(|p| p.into_inner()).is_some()
}

/// Whether a panic is timely's, on a network thread, about a connection.
fn is_connection_failure(thread: &str, message: &str) -> bool {
    (thread.starts_with("timely:send") || thread.starts_with("timely:recv"))
        && message.contains("timely communication error")
}

/// Whether a panic follows from a connection failure already noted: the
/// worker's queue poisoned by the network thread, the calling thread
/// joining a network thread that panicked.
fn is_consequence(message: &str) -> bool {
    message.contains("MergeQueue poisoned")
        || message.contains("Send thread panic")
        || message.contains("Recv thread panic")
}

/// Installs the hook, once per process.
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let thread = std::thread::current().name().unwrap_or("").to_string();
            if is_connection_failure(&thread, &message) {
                let mut f = FAILURE.lock().unwrap_or_else(|p| p.into_inner());
                f.get_or_insert(message);
                return;
            }
            if noted() && is_consequence(&message) {
                return;
            }
            before(info);
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_timely_network_threads_note_a_failure() {
        let m = "timely communication error: reading data: Connection reset by peer";
        assert!(is_connection_failure("timely:recv-1", m));
        assert!(is_connection_failure("timely:send-0", m));
        // A worker's own panic is a bug, not a lost process: shown.
        assert!(!is_connection_failure("timely:work-0", m));
        assert!(!is_connection_failure(
            "timely:recv-1",
            "index out of bounds"
        ));
        assert!(is_consequence("MergeQueue poisoned."));
        assert!(!is_consequence("attempt to subtract with overflow"));
    }
}
