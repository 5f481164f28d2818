//! spec/history.md stays true: every counterexample it shows is printed,
//! line for line, by the command it names. `HIGHWATER_BLESS=1 cargo test
//! --release -p highwater-model --test history` rewrites the blocks from
//! what the checker prints now (then read the prose around them again).

use std::process::Command;

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/history.md");

/// A documented counterexample: the command's arguments (after `cargo run
/// --release --`), the block shown, and where the block sits in the file.
struct Documented {
    args: Vec<String>,
    block: String,
    span: std::ops::Range<usize>,
}

fn documented(text: &str) -> Vec<Documented> {
    let mut out = Vec::new();
    let mut command: Option<Vec<String>> = None;
    let mut offset = 0;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        offset += line.len();
        let Some(lang) = line.trim_end().strip_prefix("```") else {
            continue;
        };
        let start = offset;
        let mut block = Vec::new();
        for l in lines.by_ref() {
            offset += l.len();
            if l.trim_end() == "```" {
                break;
            }
            block.push(l.trim_end_matches('\n'));
        }
        let end = start + block.iter().map(|l| l.len() + 1).sum::<usize>();
        if lang == "sh" {
            command = block
                .iter()
                .find_map(|l| l.strip_prefix("cargo run --release -- "))
                .map(|args| args.split_whitespace().map(String::from).collect());
        } else if block.first().is_some_and(|l| l.starts_with("Shortest ")) {
            if let Some(args) = command.take() {
                out.push(Documented {
                    args,
                    block: block.join("\n"),
                    span: start..end,
                });
            }
        }
    }
    out
}

/// The section of `printed` whose header names the first property the
/// documented header names, through the line before the next blank line.
fn section<'a>(printed: &'a str, header: &str) -> Option<&'a str> {
    let property = header.split('"').nth(1)?;
    let quoted = format!("\"{property}\"");
    let start = printed
        .match_indices("Shortest ")
        .map(|(i, _)| i)
        .find(|&i| {
            printed[i..]
                .lines()
                .next()
                .is_some_and(|l| l.contains(&quoted))
        })?;
    let rest = &printed[start..];
    let end = rest.find("\n\n").unwrap_or(rest.len());
    Some(&rest[..end])
}

#[test]
fn every_counterexample_in_history_md_is_what_the_checker_prints() {
    let text = std::fs::read_to_string(PATH).expect("spec/history.md is readable");
    let blocks = documented(&text);
    assert!(
        blocks.len() >= 7,
        "history.md shows a counterexample per historical preset (found {})",
        blocks.len()
    );
    let bless = std::env::var_os("HIGHWATER_BLESS").is_some();
    let mut blessed = text.clone();
    for (i, d) in blocks.iter().enumerate().rev() {
        let out = Command::new(env!("CARGO_BIN_EXE_highwater"))
            .args(&d.args)
            .args(["--quiet", "--threads", "2"])
            .output()
            .expect("run highwater");
        let printed = String::from_utf8_lossy(&out.stdout);
        if i == 0 {
            // The comparison notices a one-character change.
            let altered = d.block.replacen("step 1:", "step 1 :", 1);
            assert!(!printed.contains(altered.as_str()));
        }
        if printed.contains(d.block.as_str()) {
            continue;
        }
        let first = d.block.lines().next().unwrap_or_default();
        if bless {
            let now = section(&printed, first)
                .unwrap_or_else(|| panic!("`highwater {}` prints no {first}", d.args.join(" ")));
            blessed.replace_range(d.span.clone(), &format!("{now}\n"));
        } else {
            panic!(
                "`highwater {}` no longer prints what spec/history.md shows \
                 (HIGHWATER_BLESS=1 rewrites it); it prints:\n{printed}",
                d.args.join(" ")
            );
        }
    }
    if bless && blessed != text {
        std::fs::write(PATH, blessed).expect("rewrite spec/history.md");
    }
}

/// The list of presets history.md opens with is what `highwater presets`
/// prints today.
#[test]
fn the_presets_in_history_md_are_what_presets_prints() {
    let text = std::fs::read_to_string(PATH).expect("spec/history.md is readable");
    let start = text
        .find("`highwater presets` prints:\n\n```\n")
        .expect("history.md shows `highwater presets`");
    let block = &text[start..];
    let block = &block[block.find("```\n").unwrap() + 4..];
    let block = &block[..block.find("```").unwrap()];
    let out = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .arg("presets")
        .output()
        .expect("run highwater presets");
    assert_eq!(
        block,
        String::from_utf8_lossy(&out.stdout),
        "spec/history.md's list of presets is out of date"
    );
}
