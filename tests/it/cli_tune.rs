//! `convrag tune` refuses unreadable training data: non-zero exit naming the file (and the line
//! for malformed JSON), and no weights file written.

use std::process::Command;

fn tune(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_convrag"))
        .args(args)
        .output()
        .expect("run convrag")
}

#[test]
fn a_missing_or_malformed_training_file_is_named_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("weights.json");
    let out_arg = output.to_str().unwrap();

    let missing = dir.path().join("missing.json");
    let r = tune(&[
        "tune",
        "rewrite",
        "--train",
        missing.to_str().unwrap(),
        "--output",
        out_arg,
    ]);
    assert!(!r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("missing.json"), "{stderr}");

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"bad json").unwrap();
    let r = tune(&[
        "tune",
        "ptkb",
        "--train",
        bad.to_str().unwrap(),
        "--output",
        out_arg,
    ]);
    assert!(!r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("bad.json:1: invalid JSON"), "{stderr}");
    assert!(!output.exists());
}
