//! Where a replay leaves the brokers' directories: checked before any work,
//! so that a long run never ends in an error it could have given at once,
//! and never writes among someone else's files.

use std::path::Path;

/// Whether a directory entry is one a replay writes (`broker-<n>`).
fn is_broker_dir(name: &str) -> bool {
    name.strip_prefix("broker-")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Makes `dir` ready for a replay: created if missing; accepted if empty;
/// with `force`, emptied of the `broker-<n>` directories an earlier replay
/// left (anything else there is refused, force or not).
pub fn replay_dir(dir: &Path, force: bool) -> Result<(), String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()));
        }
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    let mut brokers = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(force && is_broker_dir(&name)) {
            return Err(if force {
                format!(
                    "{} holds {name:?}, which no replay wrote; --force removes only broker-<n> \
                     directories: give a new or empty directory",
                    dir.display()
                )
            } else {
                format!(
                    "{} is not empty; give a new or empty directory, or --force to replace an \
                     earlier replay's broker directories",
                    dir.display()
                )
            });
        }
        brokers.push(entry.path());
    }
    for b in brokers {
        std::fs::remove_dir_all(&b).map_err(|e| format!("cannot remove {}: {e}", b.display()))?;
    }
    Ok(())
}
