//! `convrag validate ikat25` against the organizers' checker: each broken submission under
//! tests/fixtures/ikat/runs_2025 (made-up lines over the made-up topics
//! tests/fixtures/ikat/topics_2025.json) was checked by `validate_trec_ikat25.py`
//! (irlabamsterdam/iKAT, 2025/scripts, commit 05399308a3cf4eb56b35bed8bee0771e4f8f1404; MIT; not
//! part of this repository), and what it said is tests/golden/ikat25/validate_NAME.txt:
//!
//! ```text
//! cd DIR && cp tests/fixtures/ikat/runs_2025/NAME.jsonl tests/fixtures/ikat/topics_2025.json . &&
//! PYTHONHASHSEED=0 python3 validate_trec_ikat25.py --input NAME.jsonl --topics ikat25_topics.json \
//!   > NAME.out 2> NAME.err; echo "[exit] $?"; test -e NAME.jsonl.fixed && echo "[fixed] yes"
//! ```
//!
//! (Python 3.11.7; the golden file is the standard output, `[exit] N`, `[fixed] yes|no`,
//! `[stderr]` and the standard error, of a traceback only its first and last line.) convrag must reach every verdict: the same errors and
//! warnings on the same lines (the checker's fixes as warnings), the same missing and additional
//! turns, the same exit status, and no file written.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use convrag::formats::ikat;
use convrag::formats::ikat25_validate::{check_text, FindingKind};
use convrag::formats::Severity;

use crate::support::{fixture, golden_text};

fn topics_path() -> PathBuf {
    fixture("ikat/topics_2025.json")
}

/// One verdict: (line, "error" | "warning", message); line 0 is the file.
type Said = BTreeSet<(usize, &'static str, String)>;

/// What a checker concluded about a file.
#[derive(Debug, PartialEq)]
struct Verdict {
    said: Said,
    /// The exception that stopped the checker.
    crash: Option<String>,
    exit: i32,
    fixed: bool,
}

/// `metadata missing keys: {'b', 'a'}` prints a Python set, in hash order: sort it.
fn normalize(message: &str) -> String {
    match message.split_once(": {") {
        Some((head, set)) if head == "metadata missing keys" => {
            let mut items: Vec<&str> = set.trim_end_matches('}').split(", ").collect();
            items.sort();
            format!("{head}: {{{}}}", items.join(", "))
        }
        _ => message.to_string(),
    }
}

/// Reads the golden record of the official checker's output.
fn official(name: &str) -> Verdict {
    let text = golden_text(&format!("ikat25/validate_{name}.txt"));
    let (stdout, rest) = text.split_once("[exit] ").unwrap();
    let (exit, rest) = rest.split_once("\n[fixed] ").unwrap();
    let (fixed, stderr) = rest.split_once("\n[stderr]\n").unwrap();
    let mut said = Said::new();
    let mut block: Option<usize> = None;
    let number = |s: &str| s.parse::<usize>().unwrap();
    for l in stdout.lines() {
        if let Some(rest) = l.strip_prefix("[Line ") {
            let (n, what) = rest.split_once("] ").unwrap();
            if what == "❌ ERRORS:" {
                block = Some(number(n));
            } else if what.starts_with("❌ JSON decode error: ") {
                said.insert((number(n), "error", "JSON decode error".into()));
            } else if let Some(w) = what.strip_prefix("WARNING: ") {
                said.insert((number(n), "warning", w.to_string()));
            } else {
                panic!("unexpected line {l:?}");
            }
        } else if let Some(rest) = l.strip_prefix("[Fix-") {
            let (n, what) = rest.split_once("] ").unwrap();
            if let Some(w) = what.strip_prefix("WARNING: ") {
                said.insert((number(n), "warning", w.to_string()));
            } else if what.starts_with("response_length=") {
                said.insert((number(n), "warning", what.to_string()));
            } else {
                // "references length=N > 1000. Trimming..." comes with its warning; "references
                // must be a dict" is printed by the fixer and decides nothing.
                assert!(what.starts_with("references "), "{l:?}");
            }
        } else if l == "[File] ❌ ERROR:" {
            block = Some(0);
        } else if let Some(e) = l.strip_prefix("Error: ") {
            if !e.starts_with("Total ") {
                said.insert((block.unwrap(), "error", normalize(e)));
            }
        }
    }
    Verdict {
        said,
        crash: stderr
            .contains("Traceback")
            .then(|| stderr.trim_end().lines().last().unwrap().to_string()),
        exit: exit.trim().parse().unwrap(),
        fixed: fixed.trim() == "yes",
    }
}

/// convrag's verdict, in the same terms.
fn convrag_verdict(name: &str) -> Verdict {
    let topics = ikat::read_topics(&topics_path()).unwrap();
    let text = std::fs::read_to_string(fixture(&format!("ikat/runs_2025/{name}.jsonl"))).unwrap();
    let findings = check_text(&text, &topics);
    let mut said = Said::new();
    let mut crash = None;
    for f in &findings {
        match &f.kind {
            FindingKind::Crash(e) => crash = Some(e.clone()),
            FindingKind::JsonDecode(_) => {
                said.insert((f.line, "error", "JSON decode error".into()));
            }
            kind => {
                let severity = match kind.severity() {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                };
                said.insert((f.line, severity, normalize(&kind.official())));
            }
        }
    }
    let errors = findings
        .iter()
        .any(|f| f.kind.severity() == Severity::Error);
    Verdict {
        said,
        crash,
        exit: i32::from(errors),
        fixed: findings.iter().any(|f| f.kind.is_fix()),
    }
}

const FIXTURES: &[&str] = &[
    "good",
    "bad_metadata",
    "bad_citations",
    "too_long",
    "turns",
    "bad_ids",
    "too_many_references",
    "crash",
];

#[test]
fn every_verdict_of_the_official_checker_is_reproduced() {
    for name in FIXTURES {
        let official = official(name);
        assert_eq!(convrag_verdict(name), official, "{name}");
    }
    // The golden records are not empty of findings: the fixtures break what they say they break.
    assert!(official("good").said.is_empty() && official("good").exit == 0);
    assert!(!official("too_long").said.is_empty() && official("too_long").fixed);
    assert!(official("crash").crash.is_some());
}

#[test]
fn the_crash_is_placed_on_its_line() {
    let topics = ikat::read_topics(&topics_path()).unwrap();
    let text = std::fs::read_to_string(fixture("ikat/runs_2025/crash.jsonl")).unwrap();
    let findings = check_text(&text, &topics);
    let last = findings.last().unwrap();
    assert_eq!(last.line, 2);
    assert!(matches!(last.kind, FindingKind::Crash(_)));
    // The checker stops there: line 3's turn is not counted, nor are missing turns reported.
    assert_eq!(findings.len(), 1);
}

#[test]
fn the_command_exits_as_the_official_checker_and_fixes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for name in FIXTURES {
        let file = dir.path().join(format!("{name}.jsonl"));
        std::fs::copy(fixture(&format!("ikat/runs_2025/{name}.jsonl")), &file).unwrap();
        let before = std::fs::read(&file).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_convrag"))
            .args(["validate", "ikat25"])
            .arg(&file)
            .arg("--topics")
            .arg(topics_path())
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(official(name).exit),
            "{name}: {stdout}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), before, "{name}");
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files, FIXTURES.iter().position(|n| n == name).unwrap() + 1);
    }
    // Each problem names the file and line.
    let out = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .args(["validate", "ikat25"])
        .arg(fixture("ikat/runs_2025/bad_metadata.jsonl"))
        .arg("--topics")
        .arg(topics_path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("bad_metadata.jsonl:2: error: invalid metadata.run_type: only_response"),
        "{stdout}"
    );
    // The topics are required, as they are by the official checker.
    let out = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .args(["validate", "ikat25"])
        .arg(fixture("ikat/runs_2025/good.jsonl"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--topics"));
}
