//! `highwater-replay`: a historical loss replayed on real files, and clear
//! errors for what cannot be replayed.

mod common;

fn replay(args: &[&str]) -> (i32, String, String) {
    common::binary::run(env!("CARGO_BIN_EXE_highwater-replay"), args)
}

#[test]
fn replays_an_acks_1_loss_and_leaves_kafka_format_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("brokers");
    let (code, out, err) = replay(&["--preset", "acks-1", "--dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("broken on the implementation: acknowledged records survive"),
        "{out}"
    );
    assert!(
        out.contains("broke on the implementation, as in the model"),
        "{out}"
    );
    let segment = dir.join("broker-0/highwater-0/00000000000000000000.log");
    assert!(
        segment.exists(),
        "{} is left for inspection",
        segment.display()
    );

    // The directory now holds data: a second replay refuses to write there,
    // before it searches for the counterexample.
    let (code, out, err) = replay(&["--preset", "acks-1", "--dir", dir.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("is not empty") && err.contains("--force"),
        "{err}"
    );
    assert!(
        !out.contains("finding the shortest"),
        "no search ran: {out}"
    );

    // --force replaces the broker directories an earlier replay left ...
    let (code, out, err) = replay(&[
        "--preset",
        "acks-1",
        "--dir",
        dir.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(segment.exists());
    // ... and nothing a replay did not write.
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    let (code, _, err) = replay(&[
        "--preset",
        "acks-1",
        "--dir",
        dir.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("notes.txt"), "{err}");
    assert!(
        dir.join("notes.txt").exists() && segment.exists(),
        "nothing removed"
    );
}

#[test]
fn refuses_presets_with_nothing_to_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let (code, _, err) = replay(&["--preset", "safe", "--dir", dir]);
    assert_eq!(code, 2);
    assert!(err.contains("breaks nothing"), "{err}");
    let (code, _, err) = replay(&["--preset", "no-such-preset", "--dir", dir]);
    assert_eq!(code, 2);
    assert!(err.contains("hw-truncation"), "lists the presets: {err}");
    let (code, _, _) = replay(&["--dir", dir]);
    assert_eq!(code, 2, "--preset is required");
}
