//! Dense and hybrid first-stage retrieval (issue 33): exact cosine over a collection's passage
//! vectors against a Python onnxruntime reference, RRF with BM25 on Cranfield, the vectors
//! `convrag index` computes, and the error when they are missing.
//!
//! Reference: `tests/golden/cranfield/python-dense-top10.trec` (`scripts/dense-reference.py`,
//! README there). Relevance is binary (cranqrel codes 1..4 relevant), the convention under which
//! the issue's figures were measured: its dense 0.3995 / 0.7724 is reproduced exactly.

use crate::common;
use crate::support::copy_dir;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, OnceLock};

use convrag::collection::Format;
use convrag::config::Config;
use convrag::dense::embed::{embed_collection, EmbedOptions, EmbedReport};
use convrag::dense::DiskEmbeddingCache;
use convrag::dense::{DenseError, DenseRetriever, FirstStage, HybridOptions, Retrieval};
use convrag::eval::{evaluate, EvalOptions, Measure, Qrels, Run};
use convrag::index::{
    index_collection, CollectionRegistry, IndexOptions, SearchOptions, WeightedQuery,
};
use convrag::progress::NoProgress;
use convrag::rerank::{OnnxOptions, OnnxReranker};

const PYTHON_TOP10: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/golden/cranfield/python-dense-top10.trec"
);

/// "To 3 decimals": a score within 5e-4 of the reference's; two documents the reference scores
/// within 1e-3 of each other may trade places.
const SCORE_TOLERANCE: f32 = 5e-4;
const TIE: f32 = 1e-3;

/// Hybrid (RRF k = 60 of BM25's and dense's top 1000) on Cranfield: the issue's goal.
const HYBRID_NDCG: f64 = 0.43;
const HYBRID_RECALL: f64 = 0.78;

fn config(home: &Path) -> Config {
    Config {
        home: home.to_path_buf(),
        model_dir: Some(common::model_dir("all-MiniLM-L6-v2")),
        ort_dylib_path: Some(common::ort_library()),
        ..Config::default()
    }
}

fn first_stage(config: &Config, collection: &str) -> Result<FirstStage, DenseError> {
    let model = OnnxReranker::open(
        &config.default_model_dir(),
        &config.ort_library_path(),
        OnnxOptions::default(),
    )?;
    let retriever = CollectionRegistry::new(config.collections_dir()).get(collection)?;
    let cache = DiskEmbeddingCache::new(config.home.join("embeddings"));
    let dense = DenseRetriever::open(&cache, Arc::new(model), collection, retriever)?;
    FirstStage::with_dense(dense, HybridOptions::default())
}

/// Python's top 10 per query: (docid, score) by rank.
fn python_top10() -> HashMap<String, Vec<(String, f32)>> {
    let mut run: HashMap<String, Vec<(String, f32)>> = HashMap::new();
    for line in std::fs::read_to_string(PYTHON_TOP10).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        run.entry(f[0].to_string())
            .or_default()
            .push((f[2].to_string(), f[4].parse().unwrap()));
    }
    run
}

/// Where convrag's top 10 differs from the reference beyond 3 decimals, a line saying how.
fn difference(qid: &str, convrag: &[(String, f32)], python: &[(String, f32)]) -> Option<String> {
    let reference: HashMap<&str, f32> = python.iter().map(|(d, s)| (d.as_str(), *s)).collect();
    let fine = convrag.len() == python.len()
        && convrag.iter().zip(python).all(|((d, s), (pd, ps))| {
            let same_place = d == pd
                || reference
                    .get(d.as_str())
                    .is_some_and(|r| (r - ps).abs() <= TIE);
            let same_score = reference
                .get(d.as_str())
                .is_none_or(|r| (r - s).abs() <= SCORE_TOLERANCE);
            same_place && same_score
        });
    (!fine).then(|| format!("query {qid}: convrag {convrag:?} vs Python {python:?}"))
}

#[test]
fn three_decimal_comparison_allows_reference_ties_only() {
    let hits = |v: &[(&str, f32)]| -> Vec<(String, f32)> {
        v.iter().map(|(d, s)| (d.to_string(), *s)).collect()
    };
    let python = hits(&[("a", 0.7), ("b", 0.6995), ("c", 0.5)]);
    assert_eq!(
        difference(
            "1",
            &hits(&[("a", 0.7002), ("b", 0.6995), ("c", 0.5)]),
            &python
        ),
        None
    );
    assert_eq!(
        difference(
            "1",
            &hits(&[("b", 0.6995), ("a", 0.7), ("c", 0.5)]),
            &python
        ),
        None
    );
    assert!(difference(
        "1",
        &hits(&[("a", 0.7), ("c", 0.5), ("b", 0.6995)]),
        &python
    )
    .is_some());
    assert!(difference(
        "1",
        &hits(&[("a", 0.701), ("b", 0.6995), ("c", 0.5)]),
        &python
    )
    .is_some());
    assert!(difference("1", &hits(&[("a", 0.7), ("b", 0.6995)]), &python).is_some());
}

/// nDCG@10 and recall@100 as trec_eval computes them, relevance binary.
fn measure(run: &Run, codes: &HashMap<String, HashMap<String, i32>>) -> (f64, f64) {
    let mut qrels = Qrels::default();
    for (q, docs) in codes {
        for (d, code) in docs {
            qrels.insert(q, d, i64::from(*code > 0)).unwrap();
        }
    }
    let measures = Measure::parse_all(&["ndcg_cut.10", "recall.100"]).unwrap();
    let e = evaluate(&qrels, run, &measures, &EvalOptions::default());
    (e.all[0], e.all[1])
}

/// A data directory holding Cranfield indexed as `cran` with its passage vectors: a copy of one
/// made once per test process, since encoding the 1,398 passages is most of a test's work.
fn cranfield_home(data: &Path) -> tempfile::TempDir {
    static EMBEDDED: OnceLock<tempfile::TempDir> = OnceLock::new();
    let embedded = EMBEDDED.get_or_init(|| {
        let home = tempfile::Builder::new()
            .prefix("cranfield-embedded")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let config = config(home.path());
        let mut o = IndexOptions::new("cran", Format::Smart);
        o.inputs = vec![data.join("cran.all.1400")];
        o.heap_bytes = 64 << 20;
        index_collection(&config.collections_dir(), &o).unwrap();
        let report = embed_cranfield(&config);
        assert_eq!(report.encoded, 1398);
        home
    });
    let home = tempfile::tempdir().unwrap();
    copy_dir(embedded.path(), home.path());
    home
}

/// `convrag embed --collection cran` (a rerun resumes or finds nothing to do).
fn embed_cranfield(config: &Config) -> EmbedReport {
    let options = EmbedOptions {
        collection: "cran".into(),
        model: None,
        chunk: 256,
    };
    embed_collection(config, &options, &NoProgress).unwrap()
}

#[test]
fn cranfield_dense_matches_python_and_hybrid_beats_bm25_and_dense() {
    let data = crate::support::shared_data("classic-ir/cranfield");
    let home = cranfield_home(&data);
    let config = config(home.path());
    let stage = first_stage(&config, "cran").unwrap();

    let queries = crate::index::cranfield::queries(&data);
    let codes = crate::index::cranfield::qrels(&data);
    let mut options = SearchOptions::top(1000);
    options.with_fields = false;
    let mut figures = HashMap::new();
    let mut dense_top10 = HashMap::new();
    for mode in [Retrieval::Bm25, Retrieval::Dense, Retrieval::Hybrid] {
        let mut run = Run::default();
        for (i, q) in queries.iter().enumerate() {
            let qid = (i + 1).to_string();
            let hits = stage
                .search(mode, &WeightedQuery::text(q), &options)
                .unwrap();
            // BM25 finds only passages sharing a term with the query.
            if mode != Retrieval::Bm25 {
                assert_eq!(hits.len(), 1000, "{mode} query {qid}");
            }
            if mode == Retrieval::Dense {
                let top: Vec<(String, f32)> = hits
                    .iter()
                    .take(10)
                    .map(|h| (h.id.clone(), h.score))
                    .collect();
                dense_top10.insert(qid.clone(), top);
            }
            for h in hits {
                run.push(&qid, h.id, f64::from(h.score));
            }
        }
        let (ndcg, recall) = measure(&run, &codes);
        eprintln!("Cranfield {mode}: nDCG@10 {ndcg:.4}, R@100 {recall:.4} (binary relevance)");
        figures.insert(mode, (ndcg, recall));
    }

    let python = python_top10();
    assert_eq!(python.len(), 225, "{PYTHON_TOP10}");
    let differences: Vec<String> = python
        .iter()
        .filter_map(|(qid, top)| difference(qid, &dense_top10[qid], top))
        .collect();
    assert!(
        differences.is_empty(),
        "dense top 10 differs from Python onnxruntime's on {} of 225 queries:\n{}",
        differences.len(),
        differences.join("\n")
    );

    // The issue's figures for the same model searched exactly in Python.
    let (dense_ndcg, dense_recall) = figures[&Retrieval::Dense];
    assert!(
        (dense_ndcg - 0.3995).abs() < 0.001,
        "dense nDCG@10 {dense_ndcg:.4}"
    );
    assert!(
        (dense_recall - 0.7724).abs() < 0.001,
        "dense R@100 {dense_recall:.4}"
    );
    let (bm25_ndcg, bm25_recall) = figures[&Retrieval::Bm25];
    let (hybrid_ndcg, hybrid_recall) = figures[&Retrieval::Hybrid];
    assert!(
        hybrid_ndcg > bm25_ndcg.max(dense_ndcg) && hybrid_recall > bm25_recall.max(dense_recall),
        "hybrid {hybrid_ndcg:.4}/{hybrid_recall:.4} does not beat bm25 {bm25_ndcg:.4}/{bm25_recall:.4} and dense"
    );
    assert!(
        hybrid_ndcg >= HYBRID_NDCG,
        "hybrid nDCG@10 {hybrid_ndcg:.4}"
    );
    assert!(
        hybrid_recall >= HYBRID_RECALL,
        "hybrid R@100 {hybrid_recall:.4}"
    );

    // A turn (no history, no PTKB) reranking its candidates with the fusion a turn asking for
    // the mode gets, as the server runs it: BM25's top 100 fused at weight 0.2; hybrid's top 200
    // (BM25's and the bi-encoder's 100 each) fused with BM25's own scores at 0.35, since the
    // reranker is the bi-encoder that found half of them (BENCHMARKS.md, "Hybrid turns"). The
    // figures are pinned so that a change to either is seen.
    let (bm25_turn, bm25_turn_recall) = turn_figures(&config, &queries, &codes, Retrieval::Bm25);
    let (hybrid_turn, hybrid_turn_recall) =
        turn_figures(&config, &queries, &codes, Retrieval::Hybrid);
    eprintln!(
        "Cranfield turns, 100 candidates reranked: bm25 nDCG@10 {bm25_turn:.4}, R@100 \
         {bm25_turn_recall:.4}; hybrid nDCG@10 {hybrid_turn:.4}, R@100 {hybrid_turn_recall:.4}"
    );
    assert!(
        hybrid_turn >= bm25_turn,
        "hybrid turns nDCG@10 {hybrid_turn:.4} below bm25 turns {bm25_turn:.4}"
    );
    assert!(
        hybrid_turn_recall > bm25_turn_recall,
        "hybrid turns R@100 {hybrid_turn_recall:.4}, bm25 turns {bm25_turn_recall:.4}"
    );
    for (what, got, measured) in [
        ("bm25 turns nDCG@10", bm25_turn, 0.4350),
        ("hybrid turns nDCG@10", hybrid_turn, 0.4392),
        ("hybrid turns R@100", hybrid_turn_recall, 0.7917),
    ] {
        assert!((got - measured).abs() < 0.001, "{what} {got:.4}");
    }
}

/// nDCG@10 and R@100 of turns over Cranfield's queries whose first stage is `mode`, the 100
/// candidates reranked by the model (the turn service the server runs, without generation).
fn turn_figures(
    config: &Config,
    queries: &[String],
    codes: &HashMap<String, HashMap<String, i32>>,
    mode: Retrieval,
) -> (f64, f64) {
    use convrag::dense::VectorSearch;
    use convrag::pipeline::context::ConversationContext;
    use convrag::pipeline::turn::{PassageSource, TurnSettings};
    use convrag::service::{TurnService, WithoutVectors};

    let cache = Arc::new(DiskEmbeddingCache::new(config.home.join("embeddings")));
    let model = common::default_model().with_cache(cache.clone());
    let search = VectorSearch::new(Arc::new(model), cache);
    let service = TurnService::from_config(config, Some(search.reranker()))
        .unwrap()
        .with_vectors(Some(search));
    let settings = TurnSettings {
        generate: false,
        rerank: true,
        depth: 100,
        passages: 100,
        retrieval: mode,
        // What a turn asking for `mode` resolves to.
        fusion: mode.recommended_fusion(),
        ..TurnSettings::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut run = Run::default();
    runtime.block_on(async {
        let target = service
            .retrieval_target(None, "cran", mode, WithoutVectors::Refuse)
            .await
            .unwrap();
        for (i, q) in queries.iter().enumerate() {
            let output = service
                .run_unstored(
                    ConversationContext::new(q.clone()),
                    Some(PassageSource::Collection(target.clone())),
                    &settings,
                    &mut |_| {},
                )
                .await
                .unwrap();
            let qid = (i + 1).to_string();
            for p in output.passages {
                run.push(&qid, p.id, f64::from(p.score));
            }
        }
    });
    measure(&run, codes)
}

fn run_ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn index_computes_vectors_and_search_without_them_names_convrag_embed() {
    let home = tempfile::tempdir().unwrap();
    let input = home.path().join("p.jsonl");
    let lines = [
        r#"{"id": "flea", "title": "Fleas", "text": "The life cycle of a flea lasts from 20 days to a year."}"#,
        r#"{"id": "paris", "title": "Paris", "text": "Paris is the capital and most populous city of France."}"#,
        r#"{"id": "pasta", "title": "Pasta", "text": "Cook the pasta in salted boiling water for ten minutes."}"#,
    ];
    std::fs::write(&input, lines.join("\n")).unwrap();
    let index = |name: &str, extra: &[&str]| {
        run_ok(
            common::convrag_with_model(home.path())
                .args([
                    "index",
                    "--quiet",
                    "--format",
                    "jsonl",
                    "--collection",
                    name,
                ])
                .args(extra)
                .arg(&input),
        )
    };
    index("with", &[]);
    index("without", &["--no-vectors"]);
    let search = |name: &str, mode: &str| {
        common::convrag_with_model(home.path())
            .args(["search", "--json", "--k", "2", "--collection", name])
            .args(["--retrieval", mode, "which city is the French capital"])
            .output()
            .unwrap()
    };
    for mode in ["dense", "hybrid"] {
        let o = search("with", mode);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let first: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().next().unwrap())
                .unwrap();
        assert_eq!(first["id"], "paris", "{mode}");

        let o = search("without", mode);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{mode} without vectors succeeded");
        assert!(
            stderr.contains("\"without\"") && stderr.contains("convrag embed --collection without"),
            "{stderr}"
        );
    }
    // `convrag embed` fills them; then dense works there too.
    run_ok(common::convrag_with_model(home.path()).args([
        "embed",
        "--quiet",
        "--collection",
        "without",
    ]));
    assert!(search("without", "dense").status.success());
}

#[test]
fn partly_embedded_vectors_are_refused_until_finished() {
    let home = tempfile::tempdir().unwrap();
    let config = config(home.path());
    let input = home.path().join("p.jsonl");
    let lines: Vec<String> = (0..30)
        .map(|i| {
            format!(
                r#"{{"id": "p{i}", "text": "Passage {i} is about topic {}."}}"#,
                i % 4
            )
        })
        .collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    let mut o = IndexOptions::new("demo", Format::Jsonl);
    o.inputs = vec![input];
    o.threads = 1;
    o.heap_bytes = 16 << 20;
    index_collection(&config.collections_dir(), &o).unwrap();
    let err = first_stage(&config, "demo").err().unwrap();
    assert!(matches!(err, DenseError::Missing { .. }), "{err}");

    let options = EmbedOptions {
        collection: "demo".into(),
        model: None,
        chunk: 8,
    };
    embed_collection(&config, &options, &NoProgress).unwrap();
    let stage = first_stage(&config, "demo").unwrap();
    let hits = stage
        .search(
            Retrieval::Dense,
            &WeightedQuery::text("topic 3"),
            &SearchOptions::top(5),
        )
        .unwrap();
    assert_eq!(hits.len(), 5);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));

    // An interrupted fill: 20 of 30 records.
    let vec_file = std::fs::read_dir(home.path().join("embeddings"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "vec"))
        .unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&vec_file)
        .unwrap();
    file.set_len(32 + 20 * (8 + 4 * 384)).unwrap();
    drop(file);
    let err = first_stage(&config, "demo").err().unwrap().to_string();
    assert!(
        err.contains("20 of 30") && err.contains("convrag embed --collection demo"),
        "{err}"
    );
}

/// The vector file of the only collection embedded under `home`.
fn vector_file(home: &Path) -> std::path::PathBuf {
    std::fs::read_dir(home.join("embeddings"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "vec"))
        .unwrap()
}

/// `config`'s cache (graphs from its `dense.ann_min_vectors`), opened afresh: no graph loaded.
fn dense_retriever(config: &Config, collection: &str) -> DenseRetriever {
    let retriever = CollectionRegistry::new(config.collections_dir())
        .get(collection)
        .unwrap();
    let cache = DiskEmbeddingCache::for_config(config);
    DenseRetriever::open(
        &cache,
        Arc::new(common::default_model()),
        collection,
        retriever,
    )
    .unwrap()
}

/// Issue 33's approximate first stage: Cranfield's vectors with `dense.ann_min_vectors` 1 get an
/// hnsw_rs graph beside them, which dense search then uses; a rerun keeps it; `collection
/// verify` checks it; a collection below the threshold has none and is searched exactly.
#[test]
fn cranfield_dense_through_its_graph_recalls_the_exact_top_10() {
    use convrag::dense::ann::{ExactIndex, IndexKind, VectorIndex, VectorSource};
    use convrag::dense::graph::{graph_files, GraphSums};

    let data = crate::support::shared_data("classic-ir/cranfield");
    let home = cranfield_home(&data);
    let mut config = config(home.path());
    config.dense.ann_min_vectors = 1;
    // Complete vectors of a collection above the threshold get their graph.
    assert_eq!(embed_cranfield(&config).encoded, 0);
    let vectors = vector_file(home.path());
    let [graph, graph_data] = graph_files(&vectors);
    assert!(
        graph.is_file() && graph_data.is_file(),
        "{}",
        graph.display()
    );
    let sums = GraphSums::read(&vectors).unwrap().unwrap();
    let source = Arc::new(VectorSource::open(std::slice::from_ref(&vectors)).unwrap());
    assert_eq!(sums.vectors, source.len());
    assert_eq!(
        (sums.m, sums.ef_construction, sums.ef_search),
        (32, 200, 128)
    );

    // A rerun finds the graph of these vectors and keeps it.
    let written = std::fs::metadata(&graph).unwrap().modified().unwrap();
    let again = embed_cranfield(&config);
    assert_eq!(again.encoded, 0);
    assert_eq!(
        std::fs::metadata(&graph).unwrap().modified().unwrap(),
        written,
        "the graph was built again"
    );

    // Dense search through the graph against the exact scan, over Cranfield's 225 queries.
    let dense = dense_retriever(&config, "cran");
    assert_eq!(dense.search_kind(), IndexKind::HnswRs);
    let exact = ExactIndex::new(source);
    let queries = crate::index::cranfield::queries(&data);
    assert_eq!(queries.len(), 225);
    let mut found = 0;
    for q in &queries {
        let vector = dense.embed_query(&WeightedQuery::text(q)).unwrap();
        let want: Vec<u64> = exact
            .search(&vector, 10)
            .unwrap()
            .iter()
            .map(|n| n.0)
            .collect();
        let got = dense.search_vector(&vector, 10, false).unwrap();
        assert_eq!(got.len(), 10);
        found += got
            .iter()
            .filter(|h| h.ordinal.is_some_and(|o| want.contains(&o)))
            .count();
    }
    let recall = found as f64 / (10 * queries.len()) as f64;
    eprintln!("Cranfield dense through the hnsw_rs graph: recall@10 {recall:.4} against exact");
    assert!(recall >= 0.95, "recall@10 {recall:.4}");

    // `collection verify` checks the graph, and names its file once one byte of it changed.
    let verify = || {
        common::convrag_with_model(home.path())
            .args(["collection", "verify", "cran"])
            .output()
            .unwrap()
    };
    let o = verify();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("nearest-neighbour graph") && stdout.contains("files match"),
        "{stdout}"
    );
    let mut bytes = std::fs::read(&graph).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&graph, &bytes).unwrap();
    let o = verify();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "verify passed a changed graph");
    assert!(
        stderr.contains(&graph.display().to_string()) && stderr.contains("differs"),
        "{stderr}"
    );
    // Nor does dense search trust it: it scans exactly.
    assert_eq!(
        dense_retriever(&config, "cran").search_kind(),
        IndexKind::Exact
    );

    // Below the threshold the collection has no graph (the one left is removed) and dense
    // search is the exact scan's.
    config.dense.ann_min_vectors = 2000;
    embed_cranfield(&config);
    assert!(!graph.exists() && !graph_data.exists());
    assert!(GraphSums::read(&vectors).unwrap().is_none());
    let dense = dense_retriever(&config, "cran");
    assert_eq!(dense.search_kind(), IndexKind::Exact);
    let vector = dense
        .embed_query(&WeightedQuery::text(&queries[0]))
        .unwrap();
    let got: Vec<u64> = dense
        .search_vector(&vector, 10, false)
        .unwrap()
        .iter()
        .filter_map(|h| h.ordinal)
        .collect();
    let want: Vec<u64> = exact
        .search(&vector, 10)
        .unwrap()
        .iter()
        .map(|n| n.0)
        .collect();
    assert_eq!(got, want);
}
