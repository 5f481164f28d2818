//! Every process the harness starts, by PID, so that a Ctrl-C handler
//! stops exactly those (each leads its own process group) and nothing
//! else.

use std::collections::BTreeSet;
use std::sync::Mutex;

static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

pub fn register(pid: i32) {
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).insert(pid);
}

pub fn unregister(pid: i32) {
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).remove(&pid);
}

/// Sends `signal` to the process group each registered process leads.
pub fn signal_group(pid: i32, signal: libc::c_int) -> std::io::Result<()> {
    // SAFETY: kill(2) with a negative PID signals that process group; no memory is shared.
    let rc = unsafe { libc::kill(-pid, signal) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Kills (SIGCONT first, so a paused one dies at once) every registered
/// process group: for a Ctrl-C handler, which then exits.
pub fn kill_all() -> Vec<i32> {
    let live: Vec<i32> = LIVE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .collect();
    for &pid in &live {
        let _ = signal_group(pid, libc::SIGKILL);
        let _ = signal_group(pid, libc::SIGCONT);
    }
    live
}

/// Installs the Ctrl-C handler every binary that starts Kafka needs: each
/// java process leads its own process group, so a terminal's Ctrl-C
/// reaches only the binary; it kills every registered process, says which,
/// and exits 130.
pub fn kill_all_on_ctrl_c() -> Result<(), String> {
    ctrlc::set_handler(|| {
        let killed = kill_all();
        eprintln!("interrupted: killed {} processes {killed:?}", killed.len());
        std::process::exit(130);
    })
    .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))
}
