//! A trace file read on a thread of its own, ahead of validation: reading
//! and parsing its JSON lines is about a tenth of validating a full-rate
//! trace, and runs beside the checker on a second core.

use std::path::Path;
use std::sync::mpsc;

use highwater::cluster::concurrent::read_trace_file;
use highwater::cluster::TraceEntry;

/// Entries sent to the validating thread at a time: one message per entry
/// would cost as much as the parse it saves.
const BATCH: usize = 256;

/// Batches read ahead of the one validated: enough to ride out a slow
/// line, while memory stays bounded whatever the trace's length.
const BATCHES_AHEAD: usize = 8;

/// [`read_trace_file`]'s entries, in order, read by a thread that stops at
/// the file's end or once the iterator is dropped (its next send fails).
pub fn read_trace_file_ahead(
    path: &Path,
) -> std::io::Result<impl Iterator<Item = Result<TraceEntry, String>>> {
    let entries = read_trace_file(path)?;
    let (tx, rx) = mpsc::sync_channel::<Vec<Result<TraceEntry, String>>>(BATCHES_AHEAD);
    std::thread::Builder::new()
        .name("trace-reader".into())
        .spawn(move || {
            let mut batch = Vec::with_capacity(BATCH);
            for entry in entries {
                batch.push(entry);
                if batch.len() == BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                    if tx.send(full).is_err() {
                        return;
                    }
                }
            }
            let _ = tx.send(batch);
        })?;
    Ok(rx.into_iter().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read ahead, a trace gives the entries read in line, in order, bad
    /// lines included; dropping the iterator early ends the reader.
    #[test]
    fn entries_read_ahead_are_those_read_in_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let good =
            r#"{"t":1,"a":"Controller","e":{"BrokerRegistered":{"replica":0,"unclean":false}}}"#;
        let mut text = String::new();
        for i in 0..(3 * BATCH + 5) {
            text.push_str(if i == BATCH + 7 { "not json" } else { good });
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        let show = |e: Result<TraceEntry, String>| format!("{e:?}");
        let inline: Vec<String> = read_trace_file(&path).unwrap().map(show).collect();
        let ahead: Vec<String> = read_trace_file_ahead(&path).unwrap().map(show).collect();
        assert_eq!(inline.len(), 3 * BATCH + 5);
        assert!(inline[BATCH + 7].contains(&format!("line {}", BATCH + 8)));
        assert_eq!(ahead, inline);
        let first: Vec<String> = read_trace_file_ahead(&path)
            .unwrap()
            .take(3)
            .map(show)
            .collect();
        assert_eq!(first, inline[..3]);
    }
}
