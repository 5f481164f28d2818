//! spec/history.md stays true: every counterexample it shows is printed,
//! line for line, by the command it names.

use std::process::Command;

/// (command arguments after `cargo run --release --`, the block shown).
fn documented() -> Vec<(Vec<String>, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/history.md");
    let text = std::fs::read_to_string(path).expect("spec/history.md is readable");
    let mut out = Vec::new();
    let mut command: Option<Vec<String>> = None;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(lang) = line.strip_prefix("```") else {
            continue;
        };
        let block: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        if lang == "sh" {
            command = block
                .iter()
                .find_map(|l| l.strip_prefix("cargo run --release -- "))
                .map(|args| args.split_whitespace().map(String::from).collect());
        } else if block.first().is_some_and(|l| l.starts_with("Shortest ")) {
            if let Some(args) = command.take() {
                out.push((args, block.join("\n")));
            }
        }
    }
    out
}

#[test]
fn every_counterexample_in_history_md_is_what_the_checker_prints() {
    let blocks = documented();
    assert!(
        blocks.len() >= 7,
        "history.md shows a counterexample per historical preset (found {})",
        blocks.len()
    );
    for (i, (args, block)) in blocks.iter().enumerate() {
        let out = Command::new(env!("CARGO_BIN_EXE_highwater"))
            .args(args)
            .args(["--quiet", "--threads", "2"])
            .output()
            .expect("run highwater");
        let printed = String::from_utf8_lossy(&out.stdout);
        if i == 0 {
            // The comparison notices a one-character change.
            let altered = block.replacen("step 1:", "step 1 :", 1);
            assert!(!printed.contains(altered.as_str()));
        }
        assert!(
            printed.contains(block.as_str()),
            "`highwater {}` no longer prints what spec/history.md shows; it prints:\n{printed}",
            args.join(" ")
        );
    }
}
