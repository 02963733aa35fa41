//! `convrag rerank` end to end: TREC DL and TREC RAG candidate files in, TREC run out, the disk
//! embedding cache reused by a second process, and malformed input reported as file:line.
//!
//! Needs what `scripts/fetch-models.sh` puts in the data directory (see tests/rerank_model.rs).

use crate::common;

use std::path::Path;
use std::process::Command;

const DL_JSON: &str = r#"[
  {"query": "how long is the life cycle of a flea", "hits": [
    {"content": "Cook the pasta in salted boiling water for eight to ten minutes, then drain it.", "qid": 11, "docid": "pasta", "rank": 1, "score": 9.0},
    {"content": "Paris is the capital and most populous city of France.", "qid": 11, "docid": "paris", "rank": 2, "score": 8.0},
    {"content": "The life cycle of a flea can last anywhere from 20 days to an entire year.", "qid": 11, "docid": "flea", "rank": 3, "score": 7.0}]},
  {"query": "what is the capital of france", "hits": [
    {"content": "Cook the pasta in salted boiling water for eight to ten minutes, then drain it.", "qid": 12, "docid": "pasta", "rank": 1, "score": 5.0},
    {"content": "Paris is the capital and most populous city of France.", "qid": 12, "docid": "paris", "rank": 2, "score": 4.0}]}
]"#;

fn run_lines(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split(' ').map(String::from).collect())
        .collect()
}

#[test]
fn reranks_trec_dl_json_and_reuses_the_disk_cache_across_processes() {
    let home = tempfile::tempdir().unwrap();
    let candidates = home.path().join("cands.json");
    std::fs::write(&candidates, DL_JSON).unwrap();
    let out = home.path().join("run.trec");
    let args = |cmd: &mut Command| {
        cmd.args(["rerank", "--candidates"])
            .arg(&candidates)
            .arg("--output")
            .arg(&out)
            .args(["--collection", "tiny"]);
    };
    let mut first = common::convrag_with_model(home.path());
    args(&mut first);
    let o = first.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    // 2 queries + 3 distinct passages (pasta and paris appear twice but share an id).
    assert!(
        stderr.contains("reranked 2 queries, 5 passages"),
        "{stderr}"
    );
    let lines = run_lines(&out);
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0][0], "11");
    assert_eq!(
        lines[0][2], "flea",
        "the relevant passage moves to the top: {lines:?}"
    );
    assert_eq!(lines[3][2], "paris", "{lines:?}");
    for l in &lines {
        assert_eq!(l.len(), 6);
        assert_eq!(l[1], "Q0");
    }

    // A second process over the same collection encodes only the two queries.
    let mut second = common::convrag_with_model(home.path());
    args(&mut second);
    let o = second.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains(": 2 sequences encoded, 5 cache hits"),
        "{stderr}"
    );
    assert_eq!(run_lines(&out), lines);
}

#[test]
fn depth_and_fusion_shape_the_run() {
    let home = tempfile::tempdir().unwrap();
    let candidates = home.path().join("cands.json");
    std::fs::write(&candidates, DL_JSON).unwrap();
    let out = home.path().join("run.trec");
    let o = common::convrag_with_model(home.path())
        .args([
            "rerank",
            "--depth",
            "2",
            "--fusion",
            "weighted:1.0",
            "--candidates",
        ])
        .arg(&candidates)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = run_lines(&out);
    // Weight 1.0 on BM25 keeps the first-stage order; the candidate beyond depth 2 comes last.
    let q11: Vec<&str> = lines
        .iter()
        .filter(|l| l[0] == "11")
        .map(|l| l[2].as_str())
        .collect();
    assert_eq!(q11, ["pasta", "paris", "flea"]);
    let scores: Vec<f32> = lines
        .iter()
        .filter(|l| l[0] == "11")
        .map(|l| l[4].parse().unwrap())
        .collect();
    assert!(scores[0] > scores[1] && scores[1] > scores[2], "{scores:?}");
}

#[test]
fn reads_trec_rag_reranker_requests() {
    let home = tempfile::tempdir().unwrap();
    let candidates = home.path().join("req.jsonl");
    std::fs::write(
        &candidates,
        concat!(
            r#"{"query": {"text": "capital of france", "qid": "2024-1"}, "candidates": ["#,
            r#"{"docid": "msmarco_v2.1_doc_1#0_1", "score": 3.0, "doc": {"title": "Pasta", "segment": "Boil water and cook pasta."}},"#,
            r#"{"docid": "msmarco_v2.1_doc_2#0_2", "score": 2.0, "doc": {"title": "France", "segment": "Paris is the capital of France."}}]}"#,
            "\n"
        ),
    )
    .unwrap();
    let out = home.path().join("run.trec");
    let o = common::convrag_with_model(home.path())
        .args(["rerank", "--candidates"])
        .arg(&candidates)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = run_lines(&out);
    assert_eq!(lines[0][..3], ["2024-1", "Q0", "msmarco_v2.1_doc_2#0_2"]);
}

#[test]
fn malformed_candidates_exit_nonzero_with_file_and_line_and_leave_no_run() {
    let home = tempfile::tempdir().unwrap();
    let candidates = home.path().join("bad.jsonl");
    std::fs::write(
        &candidates,
        "{\"query\": {\"text\": \"t\", \"qid\": \"1\"}, \"candidates\": []}\n{\"query\": {\"text\": \"t\"}, \"candidates\": []}\n",
    )
    .unwrap();
    let out = home.path().join("run.trec");
    let o = common::convrag_with_model(home.path())
        .args(["rerank", "--candidates"])
        .arg(&candidates)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!("error: {}:2:", candidates.display())),
        "{stderr}"
    );
    assert!(!out.exists());
}

#[test]
fn bad_fusion_and_missing_model_are_reported() {
    let home = tempfile::tempdir().unwrap();
    let candidates = home.path().join("c.json");
    std::fs::write(&candidates, DL_JSON).unwrap();
    let o = common::convrag_with_model(home.path())
        .args([
            "rerank",
            "--fusion",
            "weighted:2",
            "--output",
            "x.trec",
            "--candidates",
        ])
        .arg(&candidates)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid fusion \"weighted:2\""));
    let o = common::convrag_with_model(home.path())
        .args([
            "rerank",
            "--model",
            "/nonexistent/model",
            "--output",
            "x.trec",
            "--candidates",
        ])
        .arg(&candidates)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("error: model /nonexistent/model"),
        "{stderr}"
    );
}

#[test]
fn bench_ann_refuses_bad_arguments_naming_the_argument_file_and_line() {
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let o = common::convrag_with_model(home.path())
            .args(["bench", "ann", "--quiet"])
            .args(args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let stderr = run(&["--vectors", "passages.vec"]);
    assert!(stderr.contains("--queries FILE is required"), "{stderr}");
    let stderr = run(&["--synthetic", "10", "--queries", "q.tsv"]);
    assert!(stderr.contains("--queries"), "{stderr}");

    let queries = home.path().join("queries.tsv");
    std::fs::write(&queries, "q1\thow do fleas live\nno tab on this line\n").unwrap();
    let stderr = run(&["--queries", queries.to_str().unwrap()]);
    assert!(
        stderr.contains("give --collection NAME, --vectors FILE or --synthetic N"),
        "{stderr}"
    );
    // The same arguments, first with a malformed queries file, then with a good one.
    let with_missing_vectors = [
        "--queries",
        queries.to_str().unwrap(),
        "--vectors",
        "missing.vec",
    ];
    let stderr = run(&with_missing_vectors);
    assert!(stderr.contains("queries.tsv:2"), "{stderr}");
    std::fs::write(&queries, "q1\thow do fleas live\n").unwrap();
    let stderr = run(&with_missing_vectors);
    assert!(stderr.contains("missing.vec"), "{stderr}");
    let stderr = run(&[
        "--collection",
        "nowhere",
        "--queries",
        queries.to_str().unwrap(),
    ]);
    assert!(stderr.contains("nowhere"), "{stderr}");
    let stderr = run(&["--synthetic", "10", "--indexes", "exact,faiss"]);
    assert!(stderr.contains("faiss"), "{stderr}");
}
