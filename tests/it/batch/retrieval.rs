//! `convrag run --retrieval dense|hybrid`: a batch run's first stage is the same as
//! `convrag search --retrieval` (one `FirstStage`), and a collection without passage vectors is
//! refused before anything runs, naming `convrag embed`; the turn benchmark likewise.

use crate::batch_support;

use std::collections::BTreeMap;

use crate::support::fixture;
use batch_support::{s, Env};

/// Each query's (id, score) in a TREC run file, by id: two writers may order tied scores
/// differently (trec_eval reorders ties itself), so runs are compared as scores per passage.
fn scores(path: &std::path::Path) -> BTreeMap<String, Vec<(String, f64)>> {
    let mut out: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        out.entry(f[0].to_string())
            .or_default()
            .push((f[2].to_string(), f[4].parse().unwrap()));
    }
    for hits in out.values_mut() {
        hits.sort_by(|a, b| a.0.cmp(&b.0));
    }
    out
}

fn same_scores(
    a: &BTreeMap<String, Vec<(String, f64)>>,
    b: &BTreeMap<String, Vec<(String, f64)>>,
) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((qa, ha), (qb, hb))| {
            qa == qb
                && ha.len() == hb.len()
                && ha
                    .iter()
                    .zip(hb)
                    .all(|((ia, sa), (ib, sb))| ia == ib && (sa - sb).abs() < 1e-5)
        })
}

/// `convrag pipeline bench-turns` over two turns of `topics` with dense retrieval.
fn bench_args<'a>(topics: &'a str, collection: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "pipeline",
        "bench-turns",
        "--topics",
        topics,
        "--collection",
        collection,
        "--turns",
        "2",
        "--retrieval",
        "dense",
    ];
    args.extend_from_slice(extra);
    args
}

#[tokio::test]
async fn batch_runs_retrieve_as_search_does_and_need_the_vectors() {
    let env = Env::new(true).await;
    // With the model installed, `convrag index` computes the passage vectors.
    env.index(
        "marco",
        "msmarco-v2.1-segmented",
        &fixture("trec_rag/segments.jsonl"),
        None,
    );
    let topics = fixture("trec_rag/topics_2024.tsv");
    for mode in ["dense", "hybrid"] {
        let run = format!("{mode}.trec");
        let searched = format!("{mode}-search.trec");
        env.ok(&[
            "run",
            "trec-rag",
            "--year",
            "2024",
            "--task",
            "r",
            "--topics",
            s(&topics),
            "--collection",
            "marco",
            "--stages",
            "ptkb,rewrite,retrieve",
            "--retrieval",
            mode,
            "--passages",
            "10",
            "--depth",
            "10",
            "--output",
            &run,
            "--quiet",
        ]);
        env.ok(&[
            "search",
            "--collection",
            "marco",
            "--retrieval",
            mode,
            "--k",
            "10",
            "--topics",
            s(&topics),
            "--output",
            &searched,
        ]);
        let batch = scores(&env.path(&run));
        let search = scores(&env.path(&searched));
        assert_eq!(batch.len(), 3, "{mode}: {batch:?}");
        assert!(
            same_scores(&batch, &search),
            "{mode}: {batch:?}\n{search:?}"
        );
    }
    // The turn benchmark runs turns with the same first stage over those vectors.
    let ikat = fixture("ikat/topics_2023.json");
    let out = env.convrag(&bench_args(s(&ikat), "marco", &["--precomputed"]));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("dense retrieval"), "{report}");
    assert!(report.contains("warm: retrieve"), "{report}");
    let err = env.fails(&bench_args(s(&ikat), "marco", &[]));
    assert!(err.contains("--precomputed"), "{err}");
    // A collection indexed without vectors: refused, naming the option and the command.
    let file = fixture("trec_rag/segments.jsonl");
    env.ok(&[
        "index",
        "--collection",
        "bare",
        "--format",
        "msmarco-v2.1-segmented",
        "--no-vectors",
        s(&file),
    ]);
    let err = env.fails(&[
        "run",
        "trec-rag",
        "--year",
        "2024",
        "--task",
        "r",
        "--topics",
        s(&topics),
        "--collection",
        "bare",
        "--retrieval",
        "dense",
        "--output",
        "bare.trec",
        "--quiet",
    ]);
    assert!(err.contains("convrag embed --collection bare"), "{err}");
    assert!(!env.path("bare.trec").exists(), "no half-written run");
    let err = env.fails(&bench_args(s(&ikat), "bare", &["--precomputed"]));
    assert!(err.contains("convrag embed --collection bare"), "{err}");
}
