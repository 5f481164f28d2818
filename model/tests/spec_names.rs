//! spec/ and the READMEs stay true to the code: every Rust name and file
//! they cite exists. A name is a backquoted identifier with `_` or `::`
//! (`controller::election_kind`, `may_leader_expand`); it resolves when its
//! last segment is a word of some Rust source (a function, test, type,
//! field or macro-generated test). A file is a backquoted path ending in
//! .rs, .md, .java, .sh, .toml or .json.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file under `dir` with one of `exts`, skipping build output.
fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name == "target" || name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            files(&p, exts, out);
        } else if exts.iter().any(|x| name.ends_with(x)) {
            out.push(p);
        }
    }
}

/// The words of all Rust sources.
fn code_words() -> std::collections::HashSet<String> {
    let mut sources = Vec::new();
    files(&root(), &[".rs"], &mut sources);
    let mut words = std::collections::HashSet::new();
    for f in sources {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for w in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if !w.is_empty() {
                words.insert(w.to_string());
            }
        }
    }
    words
}

fn is_name(tok: &str) -> bool {
    let t = tok.trim_end_matches("()");
    (t.contains('_') || t.contains("::"))
        && t.split("::").all(|seg| {
            !seg.is_empty()
                && seg
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

fn is_file(tok: &str) -> bool {
    [".rs", ".md", ".java", ".sh", ".toml", ".json"]
        .iter()
        .any(|x| tok.ends_with(x))
        && tok
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
}

/// Unresolved citations of one document: (token, why).
fn unresolved(doc: &Path, words: &std::collections::HashSet<String>) -> Vec<String> {
    let text = std::fs::read_to_string(doc).unwrap_or_default();
    let mut bad = Vec::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 0 || part.contains('\n') {
            continue;
        }
        let tok = part.trim();
        if is_name(tok) {
            let last = tok
                .trim_end_matches("()")
                .rsplit("::")
                .next()
                .unwrap_or(tok);
            if !words.contains(last) {
                bad.push(format!("{tok} (no such name in the Rust sources)"));
            }
        } else if is_file(tok) {
            let here = doc.parent().unwrap_or(&root()).join(tok);
            let mut all = Vec::new();
            files(&root(), &[tok.rsplit('/').next().unwrap_or(tok)], &mut all);
            let found = root().join(tok).exists()
                || here.exists()
                || all.iter().any(|p| p.to_string_lossy().ends_with(tok));
            if !found {
                bad.push(format!("{tok} (no such file)"));
            }
        }
    }
    bad
}

fn documents() -> Vec<PathBuf> {
    let mut docs = Vec::new();
    files(&root().join("spec"), &[".md"], &mut docs);
    for r in [
        "README.md",
        "model/README.md",
        "impl/README.md",
        "conformance/README.md",
    ] {
        docs.push(root().join(r));
    }
    docs
}

#[test]
fn every_code_name_and_file_the_docs_cite_exists() {
    let words = code_words();
    let mut report = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        checked += 1;
        for b in unresolved(&doc, &words) {
            report.push(format!("{}: {b}", doc.display()));
        }
    }
    assert!(checked >= 8, "the documents were found");
    assert!(report.is_empty(), "stale citations:\n{}", report.join("\n"));
}

#[test]
fn a_stale_citation_is_noticed() {
    let words = code_words();
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("stale.md");
    // Built here, so that this source does not itself contain the names.
    let missing = format!("{}_{}", "renamed", "away");
    let file = format!("model/src/{}.rs", "gone_away");
    std::fs::write(
        &doc,
        format!("See `controller::election_kind` and `controller::{missing}`, and `{file}`."),
    )
    .unwrap();
    let bad = unresolved(&doc, &words);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad[0].contains(&missing));
    assert!(bad[1].contains(&file));
}
