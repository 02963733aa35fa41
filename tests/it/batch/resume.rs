//! End to end: an iKAT automatic run over iKAT 2023 test topics (two of them) against a
//! collection of the passages cited in 2023 (../shared/data), with the real reranking model,
//! killed with SIGKILL once some turns are stored, resumed, and compared byte for byte with an
//! uninterrupted run made in another data directory and database (cold embedding cache in both).

use crate::batch_support;
use crate::support::shared_data;

use std::time::{Duration, Instant};

use batch_support::Env;
use serde_json::Value;

const TOPICS: &[&str] = &["9-1", "13-1"];

fn subset(path: &std::path::Path, out: &std::path::Path) -> usize {
    let all: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let kept: Vec<Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| TOPICS.contains(&t["number"].as_str().unwrap()))
        .cloned()
        .collect();
    let turns = kept
        .iter()
        .map(|t| t["turns"].as_array().unwrap().len())
        .sum();
    std::fs::write(out, serde_json::to_string_pretty(&kept).unwrap()).unwrap();
    turns
}

async fn prepared(passages: &std::path::Path, topics: &std::path::Path) -> (Env, usize) {
    let env = Env::new(true).await;
    env.index_without_vectors("ikat23-cited", "ikat-passages", passages);
    let turns = subset(topics, &env.path("topics.json"));
    (env, turns)
}

const RUN: &[&str] = &[
    "run",
    "ikat",
    "--topics",
    "topics.json",
    "--collection",
    "ikat23-cited",
    "--run-type",
    "automatic",
    "--output",
    "auto.json",
    "--trec-output",
    "auto.trec",
    "--depth",
    "10",
    "--passages",
    "10",
    "--jobs",
    "2",
    "--quiet",
];

#[tokio::test]
async fn killed_run_resumes_to_the_same_bytes() {
    let (topics, passages) = (
        shared_data("ikat/official/2023_test_topics.json"),
        shared_data("ikat/official/2023_test_topics_psg_text.jsonl"),
    );

    let (whole, total) = prepared(&passages, &topics).await;
    whole.ok(RUN);
    let expected = whole.read("auto.json");
    let expected_trec = whole.read("auto.trec");

    let (env, _) = prepared(&passages, &topics).await;
    let mut child = env.cmd().args(RUN).spawn().unwrap();
    let started = Instant::now();
    loop {
        let stored = env.stored_turns("auto").await;
        if stored >= 4 {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it could be interrupted"
        );
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no turn stored after 5 minutes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    let stored = env.stored_turns("auto").await as usize;
    assert!(
        stored < total,
        "killed too late: {stored} of {total} turns stored"
    );
    // Nothing half-written: the output appears only when the run is complete.
    assert!(!env.path("auto.json").exists());
    assert!(!env.path("auto.json.meta.json").exists());

    let stderr = env.ok(RUN);
    assert!(
        stderr.contains(&format!(
            "{total} turns ({} computed now, {stored} stored before)",
            total - stored
        )),
        "{stderr}"
    );
    assert!(env.read("auto.json") == expected, "the resumed run differs");
    assert!(env.read("auto.trec") == expected_trec);

    // The run is what it says: valid, every turn reranked by the recorded model.
    let parsed = convrag::formats::ikat::read_topics(&env.path("topics.json")).unwrap();
    let report = convrag::formats::ikat::validate_run_text(
        &expected,
        Some(&parsed),
        &convrag::formats::ValidationContext::default(),
    );
    assert!(report.is_clean(), "{:?}", report.problems);
    let meta: Value = serde_json::from_str(&env.read("auto.json.meta.json")).unwrap();
    assert_eq!(meta["turns"]["resumed"], stored);
    assert_eq!(meta["turns"]["total"], total);
    let model_sha = meta["model"]["sha256"].as_str().unwrap();
    assert_eq!(model_sha.len(), 64);
    assert_eq!(
        meta["model"]["files"]["model.onnx"].as_str().unwrap(),
        model_sha
    );
    let rerankers: Vec<Option<String>> = sqlx::query_scalar(
        "SELECT DISTINCT t.diagnostics->>'reranker' FROM turns t \
         JOIN conversations c ON c.id = t.conversation_id WHERE c.external_id LIKE 'auto/%'",
    )
    .fetch_all(env.db.store.pool())
    .await
    .unwrap();
    assert_eq!(rerankers.len(), 1);
    assert!(
        rerankers[0].as_deref().unwrap().ends_with(&model_sha[..12]),
        "{rerankers:?}"
    );

    // Resuming a complete run recomputes nothing and rewrites the same file.
    let again = env.ok(RUN);
    assert!(
        again.contains(&format!("0 computed now, {total} stored before")),
        "{again}"
    );
    assert!(env.read("auto.json") == expected);
}
