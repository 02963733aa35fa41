//! End to end: one iKAT run computed by two `convrag run … --worker` processes on one database;
//! one is SIGKILLed in the middle of a topic, the other takes the topic over once its lease runs
//! out, finishes the run and alone writes the file, byte-identical to a one-process run. A worker
//! started after the end writes nothing and names the worker that did.

use crate::batch_support;
use crate::support::shared_data;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use batch_support::Env;
use serde_json::Value;

const TOPICS: &[&str] = &["9-1", "13-1"];

fn subset(path: &std::path::Path, out: &std::path::Path) {
    let all: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let kept: Vec<Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| TOPICS.contains(&t["number"].as_str().unwrap()))
        .cloned()
        .collect();
    std::fs::write(out, serde_json::to_string_pretty(&kept).unwrap()).unwrap();
}

async fn prepared(passages: &std::path::Path, topics: &std::path::Path) -> Env {
    let env = Env::new(true).await;
    env.index_without_vectors("ikat23-cited", "ikat-passages", passages);
    subset(topics, &env.path("topics.json"));
    env
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
    "1",
    "--quiet",
];

fn worker(env: &Env, id: &str) -> Child {
    env.cmd()
        .args(RUN)
        .args(["--worker", "--worker-id", id, "--lease", "3"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The topic `worker` holds unfinished and how many of its turns are stored.
async fn held_topic(env: &Env, worker: &str) -> Option<(String, i64)> {
    sqlx::query_as(
        "SELECT l.topic_id, (SELECT count(*) FROM turns t JOIN conversations c \
             ON c.id = t.conversation_id WHERE t.is_current AND c.external_id = 'auto/' || l.topic_id) \
         FROM batch_topic_leases l WHERE l.worker = $1 AND l.done_at IS NULL",
    )
    .bind(worker)
    .fetch_optional(env.db.store.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_killed_worker_is_taken_over_and_one_worker_writes_the_same_bytes() {
    let topics = shared_data("ikat/official/2023_test_topics.json");
    let passages = shared_data("ikat/official/2023_test_topics_psg_text.jsonl");

    let alone = prepared(&passages, &topics).await;
    alone.ok(RUN);
    let expected = alone.read("auto.json");
    let expected_trec = alone.read("auto.trec");

    let env = prepared(&passages, &topics).await;
    let mut a = worker(&env, "a");
    let b = worker(&env, "b");
    let started = Instant::now();
    let (killed_topic, stored_at_kill) = loop {
        if let Some((topic, stored)) = held_topic(&env, "a").await {
            if stored >= 1 {
                break (topic, stored);
            }
        }
        assert!(a.try_wait().unwrap().is_none(), "worker a ended first");
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "worker a stored no turn in 5 minutes"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    a.kill().unwrap(); // SIGKILL: its lease stays until it runs out
    a.wait().unwrap();
    assert!(
        held_topic(&env, "a").await.is_some(),
        "killed after its topic was done"
    );
    let turns_of_killed: usize = serde_json::from_str::<Value>(&env.read("topics.json"))
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["number"] == killed_topic.as_str())
        .map(|t| t["turns"].as_array().unwrap().len())
        .unwrap();
    assert!(
        (stored_at_kill as usize) < turns_of_killed,
        "killed after its topic was complete"
    );

    let out = b.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "worker b failed:\n{stderr}");
    assert!(stderr.contains("took over"), "{stderr}");
    assert!(stderr.contains("auto.json.meta.json"), "{stderr}");
    assert!(
        env.read("auto.json") == expected,
        "the workers' run differs"
    );
    assert!(env.read("auto.trec") == expected_trec);
    let leases: Vec<(String, Option<String>, bool)> = sqlx::query_as(
        "SELECT topic_id, worker, done_at IS NOT NULL FROM batch_topic_leases ORDER BY position",
    )
    .fetch_all(env.db.store.pool())
    .await
    .unwrap();
    assert_eq!(leases.len(), TOPICS.len());
    assert!(
        leases
            .iter()
            .all(|(_, w, done)| *done && w.as_deref() == Some("b")),
        "{leases:?}"
    );

    // A late worker computes nothing, writes nothing and says who wrote the file.
    std::fs::remove_file(env.path("auto.json")).unwrap();
    let late = env.ok(&[RUN, &["--worker", "--worker-id", "c"]].concat());
    assert!(late.contains("0 computed by this worker"), "{late}");
    assert!(late.contains("worker b writes"), "{late}");
    assert!(!env.path("auto.json").exists());

    // A worker never discards the run.
    let refused = env.fails(&[RUN, &["--worker", "--restart"]].concat());
    assert!(refused.contains("--restart"), "{refused}");
}
