//! One iKAT topics reader for every command: the same made-up topics in the 2023 layout
//! (tests/fixtures/ikat/topics_2023.json: `number` strings, a `ptkb` object, `turns`,
//! `utterance`, `ptkb_provenance` ids), the 2024 layout (ikat24_topics.json: integer numbers)
//! and the 2025 layout (ikat25_topics.json: a `ptkb` list, `responses`, `user_utterance`,
//! `relevant_ptkbs` texts) give the same references to `eval rewrite`, `eval answers` and
//! `eval ptkb`, and the commands accept each file.

use std::path::PathBuf;
use std::process::Command;

use convrag::eval::ptkb::ptkb_qrels_from_topics;
use convrag::eval::rewrite::{read_texts, TextRole};
use convrag::formats::ikat::{read_topics_with_layout, TopicsLayout};

use crate::support::{fixture, golden_path};

const LAYOUTS: [(&str, TopicsLayout); 3] = [
    ("ikat/topics_2023.json", TopicsLayout::Y2023),
    ("ikat/topics_2024.json", TopicsLayout::Y2024),
    ("ikat/topics_2025.json", TopicsLayout::Y2025),
];

/// The 2024 file numbers its topics 1 and 2 where the others say 1-1 and 2-1.
fn renumbered(key: &str) -> String {
    key.replacen("1_", "1-1_", 1).replacen("2_", "2-1_", 1)
}

#[test]
fn the_layouts_are_recognized() {
    for (name, layout) in LAYOUTS {
        let (topics, found) = read_topics_with_layout(&fixture(name)).unwrap();
        assert_eq!(found, layout, "{name}");
        assert_eq!(topics.iter().map(|t| t.turns.len()).sum::<usize>(), 5);
    }
}

#[test]
fn every_layout_gives_the_same_rewrites_answers_and_ptkb_judgments() {
    let read = |name: &str, role| {
        let texts = read_texts(&fixture(name), role).unwrap();
        texts
            .into_iter()
            .map(|(k, v)| {
                let k = if name == "ikat/topics_2024.json" {
                    renumbered(&k)
                } else {
                    k
                };
                (k, v)
            })
            .collect::<Vec<_>>()
    };
    for role in [
        TextRole::ReferenceRewrite,
        TextRole::RunRewrite,
        TextRole::ReferenceAnswer,
    ] {
        let expected = read("ikat/topics_2023.json", role);
        assert_eq!(expected.len(), 5, "{role:?}");
        for (name, _) in &LAYOUTS[1..] {
            assert_eq!(read(name, role), expected, "{name} {role:?}");
        }
    }
    let answers = read("ikat/topics_2025.json", TextRole::ReferenceAnswer);
    assert_eq!(
        answers[1],
        (
            "1-1_2".to_string(),
            "Lentils, tofu, eggs and dairy give plenty of protein.".to_string()
        )
    );
    let qrels23 = ptkb_qrels_from_topics(&fixture("ikat/topics_2023.json")).unwrap();
    let qrels25 = ptkb_qrels_from_topics(&fixture("ikat/topics_2025.json")).unwrap();
    assert_eq!(qrels23, qrels25);
    assert_eq!(qrels25.len(), 5);
}

/// Runs `convrag ARGS`: (success, standard output, or standard error on failure).
fn convrag(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let ok = out.status.success();
    let text = if ok { out.stdout } else { out.stderr };
    (ok, String::from_utf8_lossy(&text).into_owned())
}

#[test]
fn eval_commands_read_2025_topics() {
    let topics = fixture("ikat/topics_2025.json");
    let topics = topics.to_str().unwrap();
    // The no-rewrite baseline: the raw utterances against the resolved ones.
    let (ok, out) = convrag(&[
        "eval",
        "rewrite",
        "--reference",
        topics,
        "--run",
        topics,
        "--json",
    ]);
    assert!(ok, "{out}");
    assert_eq!(json(&out)["all"]["num_q"], 5);
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("ptkb.trec");
    std::fs::write(
        &run,
        "1-1_1 Q0 1 1 2.0 r\n1-1_1 Q0 4 2 1.0 r\n1-1_2 Q0 3 1 1.0 r\n",
    )
    .unwrap();
    let (ok, out) = convrag(&[
        "eval",
        "ptkb",
        "--topics",
        topics,
        "--run",
        run.to_str().unwrap(),
        "--json",
    ]);
    assert!(ok, "{out}");
    // 1-1_1 judges statements 1 and 4 relevant (its `relevant_ptkbs` texts), 1-1_2 only 1.
    let report = json(&out);
    assert_eq!(report["all"]["num_q"], 5);
    assert_eq!(report["per_query"]["1-1_1"]["P_1"], 1.0);
    assert_eq!(report["per_query"]["1-1_2"]["P_1"], 0.0);
    let answers = dir.path().join("answers.jsonl");
    std::fs::write(
        &answers,
        "{\"id\": \"1-1_2\", \"answer\": \"Lentils, tofu, eggs and dairy give plenty of protein.\"}\n",
    )
    .unwrap();
    let (ok, out) = convrag(&[
        "eval",
        "answers",
        "--reference",
        topics,
        "--run",
        answers.to_str().unwrap(),
        "--json",
    ]);
    assert!(ok, "{out}");
    // The reference answers are the topics' canonical responses.
    let report = json(&out);
    assert_eq!(report["per_query"]["1-1_2"]["EM"], 1.0);
    assert_eq!(report["all"]["num_q"], 5);
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn a_2025_submission_is_judged_like_the_2024_run_of_the_same_turns() {
    let golden = |name: &str| golden_path(&format!("batch/{name}"));
    // The manual runs of batch/golden.rs (2023 topics, 2024 run JSON) and batch/ikat25.rs (the
    // same topics in the 2025 layout, 2025 JSONL with statement texts).
    let report = |topics: &str, run: PathBuf| {
        let topics = fixture(topics);
        let (ok, out) = convrag(&[
            "eval",
            "ptkb",
            "--topics",
            topics.to_str().unwrap(),
            "--run",
            run.to_str().unwrap(),
            "--json",
            "-q",
        ]);
        assert!(ok, "{out}");
        json(&out)
    };
    let from2024 = report("ikat/topics_2023.json", golden("ikat_manual.json"));
    let from2025 = report("ikat/topics_2025.json", golden("ikat25_manual.jsonl"));
    assert_eq!(from2025, from2024);
    assert_eq!(from2025["all"]["num_q"], 5);
    // Without topics the texts cannot be judged.
    let (ok, out) = convrag(&[
        "eval",
        "ptkb",
        "--qrels",
        "/dev/null",
        "--run",
        golden("ikat25_manual.jsonl").to_str().unwrap(),
    ]);
    assert!(!ok && out.contains("give --topics"), "{out}");
}
