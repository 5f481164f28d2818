//! The README's table of exit statuses, run row by row: each command's
//! verdict line and exit status must be the ones the table gives, so the
//! table cannot drift from the checker.

use std::process::Command;

/// One row: the command's arguments, the start of its verdict line, its
/// exit status.
struct Row {
    args: Vec<String>,
    says: String,
    exit: i32,
}

/// Splits a command line on spaces, keeping "quoted words" together.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            _ => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The rows of the README's exit-status table that name a command.
fn rows() -> Vec<Row> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let rows: Vec<Row> = readme
        .lines()
        .filter(|l| l.starts_with("| `highwater check"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 3, "a row of three cells: {l}");
            let command = cells[0].trim_matches('`');
            let args = words(command).into_iter().skip(1).collect();
            Row {
                args,
                says: cells[1].trim_matches('`').to_string(),
                exit: cells[2]
                    .parse()
                    .unwrap_or_else(|_| panic!("an exit status: {l}")),
            }
        })
        .collect();
    assert!(
        rows.len() >= 20,
        "the README's table was found: {} rows",
        rows.len()
    );
    rows
}

#[test]
fn every_row_of_the_readmes_exit_status_table_is_what_the_checker_does() {
    let mut statuses = std::collections::BTreeSet::new();
    for row in rows() {
        let out = Command::new(env!("CARGO_BIN_EXE_highwater"))
            .args(&row.args)
            .args(["-q", "-t", "2"])
            .output()
            .expect("run highwater");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let line = text
            .lines()
            .find(|l| l.starts_with("verdict:") || l.starts_with("error:"))
            .unwrap_or_else(|| panic!("{:?} printed no verdict or error:\n{text}", row.args));
        assert!(
            line.starts_with(&row.says),
            "{:?}: the verdict line is {line:?}, the README says {:?}",
            row.args,
            row.says
        );
        assert_eq!(
            out.status.code(),
            Some(row.exit),
            "{:?} (the README says {}):\n{text}",
            row.args,
            row.exit
        );
        if !line.starts_with("error:") {
            assert!(
                text.contains(&format!("exit status {}", row.exit)),
                "the report names its exit status: {text}"
            );
        }
        statuses.insert(row.exit);
    }
    // Every status but Ctrl-C's (`cli.rs`) has a row.
    assert_eq!(
        statuses.into_iter().collect::<Vec<_>>(),
        [0, 1, 2, 3, 12, 13, 152],
        "every exit status is shown"
    );
}

#[test]
fn the_json_report_carries_the_exit_status() {
    let out = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args([
            "check",
            "--records",
            "1",
            "--acks",
            "1",
            "--json",
            "-q",
            "-t",
            "2",
        ])
        .output()
        .expect("run highwater");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["exit_status"], 12);
    assert_eq!(out.status.code(), Some(12));
}
