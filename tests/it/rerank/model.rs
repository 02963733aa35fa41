//! The real default model (all-MiniLM-L6-v2, fp32 and int8) through ort: scores against Python
//! onnxruntime, ranking sanity, the embedding cache, concurrency, and clear errors.
//!
//! Needs what `scripts/fetch-models.sh` puts in the data directory (CONVRAG_HOME, default
//! ./.convrag of the repository); ORT_DYLIB_PATH overrides the library.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use crate::support::fixture;
use common::{model_dir, ort_library};
use convrag::rerank::{
    EmbeddingLog, MemoryEmbeddingCache, OnnxOptions, OnnxReranker, OwnedPassage, PassageRef,
    RerankError, Reranker,
};

fn open(name: &str) -> OnnxReranker {
    OnnxReranker::open(&model_dir(name), &ort_library(), OnnxOptions::default())
        .unwrap_or_else(|e| panic!("cannot open {name}: {e}"))
}

struct Fixture {
    queries: Vec<String>,
    passages: Vec<(String, String)>,
    json: serde_json::Value,
}

fn minilm_scores() -> Fixture {
    let path = fixture("onnx/minilm_scores.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let queries = json["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q.as_str().unwrap().to_string())
        .collect();
    let passages = json["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().to_string(),
                p["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    Fixture {
        queries,
        passages,
        json,
    }
}

impl Fixture {
    fn refs(&self) -> Vec<PassageRef<'_>> {
        self.passages
            .iter()
            .map(|(id, text)| PassageRef {
                id,
                text,
                ordinal: None,
            })
            .collect()
    }

    fn expected(&self, model: &str, query: usize) -> Vec<f32> {
        self.json["models"][model]["scores"][query]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect()
    }
}

fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol,
            "{what}: passage {i}: convrag {g} vs Python onnxruntime {w}"
        );
    }
}

#[test]
fn fp32_scores_match_python_onnxruntime() {
    let f = minilm_scores();
    let reranker = open("all-MiniLM-L6-v2");
    for (qi, q) in f.queries.iter().enumerate() {
        let got = reranker.rerank(q, &f.refs(), None).unwrap();
        assert_close(&got, &f.expected("all-MiniLM-L6-v2", qi), 1e-4, q);
    }
}

#[test]
fn int8_scores_match_python_onnxruntime() {
    let f = minilm_scores();
    let reranker = open("all-MiniLM-L6-v2-int8");
    for (qi, q) in f.queries.iter().enumerate() {
        let got = reranker.rerank(q, &f.refs(), None).unwrap();
        assert_close(&got, &f.expected("all-MiniLM-L6-v2-int8", qi), 2e-3, q);
    }
}

#[test]
fn relevant_passage_ranks_above_irrelevant_ones() {
    let f = minilm_scores();
    let reranker = open("all-MiniLM-L6-v2");
    let scores = reranker.rerank(&f.queries[0], &f.refs(), None).unwrap();
    let idx = |id: &str| f.passages.iter().position(|(p, _)| p == id).unwrap();
    assert!(
        scores[idx("flea")] > scores[idx("pasta")] + 0.3,
        "{scores:?}"
    );
    assert!(
        scores[idx("flea")] > scores[idx("paris")] + 0.3,
        "{scores:?}"
    );
    let scores = reranker.rerank(&f.queries[1], &f.refs(), None).unwrap();
    let best = convrag::rerank::order_by_score(&scores)[0];
    assert_eq!(f.passages[best].0, "paris", "{scores:?}");
}

#[test]
fn long_passage_is_truncated_to_max_length() {
    let f = minilm_scores();
    let reranker = open("all-MiniLM-L6-v2");
    let (_, long) = f.passages.iter().find(|(id, _)| id == "long").unwrap();
    reranker.embed(&[long.as_str()]).unwrap();
    let s = reranker.stats();
    assert_eq!(s.real_tokens, 256, "{s:?}");
    assert_eq!(s.padded_tokens, 256, "{s:?}");
}

#[test]
fn second_rerank_encodes_no_passage_again_memory_cache() {
    let f = minilm_scores();
    let cache = Arc::new(MemoryEmbeddingCache::new());
    let reranker = open("all-MiniLM-L6-v2").with_cache(cache.clone());
    let first = reranker
        .rerank(&f.queries[0], &f.refs(), Some("fixture"))
        .unwrap();
    let s1 = reranker.stats();
    assert_eq!(s1.sequences, 1 + f.passages.len() as u64, "{s1:?}");
    assert_eq!(cache.len(), f.passages.len());
    // Another query over the same passages: only the query is encoded.
    let second = reranker
        .rerank(&f.queries[1], &f.refs(), Some("fixture"))
        .unwrap();
    let s2 = reranker.stats();
    assert_eq!(s2.sequences - s1.sequences, 1, "{s2:?}");
    assert_eq!(s2.cache_hits, f.passages.len() as u64);
    assert_close(&first, &f.expected("all-MiniLM-L6-v2", 0), 1e-4, "first");
    assert_close(&second, &f.expected("all-MiniLM-L6-v2", 1), 1e-4, "cached");
    // Without a collection nothing is cached or reused.
    reranker.rerank(&f.queries[1], &f.refs(), None).unwrap();
    assert_eq!(
        reranker.stats().sequences - s2.sequences,
        1 + f.passages.len() as u64
    );
}

#[test]
fn disk_cache_is_reused_by_a_new_reranker_and_precompute_fills_it() {
    let f = minilm_scores();
    let dir = tempfile::tempdir().unwrap();
    let a = open("all-MiniLM-L6-v2").with_cache(Arc::new(EmbeddingLog::new(dir.path())));
    // Bulk fill (what `convrag embed` does), resumable: a second call encodes nothing.
    assert_eq!(a.precompute("fx", &f.refs()[..2]).unwrap(), 2);
    assert_eq!(a.precompute("fx", &f.refs()).unwrap(), f.passages.len() - 2);
    assert_eq!(a.precompute("fx", &f.refs()).unwrap(), 0);
    drop(a);
    let b = open("all-MiniLM-L6-v2").with_cache(Arc::new(EmbeddingLog::new(dir.path())));
    let scores = b.rerank(&f.queries[0], &f.refs(), Some("fx")).unwrap();
    assert_eq!(b.stats().sequences, 1, "{:?}", b.stats());
    assert_close(
        &scores,
        &f.expected("all-MiniLM-L6-v2", 0),
        1e-4,
        "from disk",
    );
}

#[test]
fn concurrent_requests_agree_with_sequential_ones() {
    let f = Arc::new(minilm_scores());
    let options = OnnxOptions {
        max_sessions: 2,
        intra_threads: 1,
        ..OnnxOptions::default()
    };
    let reranker = Arc::new(
        OnnxReranker::open(&model_dir("all-MiniLM-L6-v2"), &ort_library(), options).unwrap(),
    );
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let (f, r) = (f.clone(), reranker.clone());
            std::thread::spawn(move || {
                let qi = i % 2;
                (qi, r.rerank(&f.queries[qi], &f.refs(), None).unwrap())
            })
        })
        .collect();
    for h in handles {
        let (qi, scores) = h.join().unwrap();
        assert_close(
            &scores,
            &f.expected("all-MiniLM-L6-v2", qi),
            1e-4,
            "concurrent",
        );
    }
}

#[test]
fn blocking_helper_runs_off_the_async_workers() {
    let f = minilm_scores();
    let reranker: Arc<dyn Reranker> = Arc::new(open("all-MiniLM-L6-v2"));
    let passages: Vec<OwnedPassage> = f
        .passages
        .iter()
        .map(|(id, text)| OwnedPassage {
            id: id.clone(),
            text: text.clone(),
            ordinal: None,
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let scores = rt
        .block_on(convrag::rerank::rerank_blocking(
            reranker,
            f.queries[0].clone(),
            passages,
            None,
        ))
        .unwrap();
    assert_close(
        &scores,
        &f.expected("all-MiniLM-L6-v2", 0),
        1e-4,
        "blocking",
    );
}

#[test]
fn missing_model_directory_is_a_clear_error() {
    let err = OnnxReranker::open(
        Path::new("/nonexistent/models/x"),
        &ort_library(),
        OnnxOptions::default(),
    )
    .err()
    .expect("must fail");
    let text = err.to_string();
    assert!(text.contains("/nonexistent/models/x"), "{text}");
    assert!(text.contains("fetch-models.sh"), "{text}");
}

#[test]
fn malformed_onnx_file_is_a_clear_error_naming_it() {
    let src = model_dir("all-MiniLM-L6-v2");
    let dir = tempfile::tempdir().unwrap();
    for f in ["manifest.json", "tokenizer.json"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::write(
        dir.path().join("model.onnx"),
        b"definitely not a protobuf model",
    )
    .unwrap();
    let err = OnnxReranker::open(dir.path(), &ort_library(), OnnxOptions::default())
        .err()
        .expect("must fail");
    assert!(matches!(err, RerankError::Model { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&dir.path().join("model.onnx").display().to_string()),
        "{text}"
    );
    assert!(text.contains("expected an ONNX model"), "{text}");
}

#[test]
fn malformed_tokenizer_is_a_clear_error_naming_it() {
    let src = model_dir("all-MiniLM-L6-v2");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(src.join("manifest.json"), dir.path().join("manifest.json")).unwrap();
    std::fs::write(dir.path().join("model.onnx"), b"x").unwrap();
    std::fs::write(
        dir.path().join("tokenizer.json"),
        b"{\"not\": \"a tokenizer\"}",
    )
    .unwrap();
    let text = OnnxReranker::open(dir.path(), &ort_library(), OnnxOptions::default())
        .err()
        .expect("must fail")
        .to_string();
    assert!(text.contains("tokenizer.json"), "{text}");
    assert!(
        text.contains("expected a Hugging Face tokenizer.json"),
        "{text}"
    );
}

#[test]
fn wrong_output_name_in_manifest_is_a_clear_error() {
    let src = model_dir("all-MiniLM-L6-v2");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        src.join("tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        std::fs::canonicalize(src.join("model.onnx")).unwrap(),
        dir.path().join("model.onnx"),
    )
    .unwrap();
    let manifest = std::fs::read_to_string(src.join("manifest.json"))
        .unwrap()
        .replace(
            "\"output\": \"last_hidden_state\"",
            "\"output\": \"sentence_embedding\"",
        );
    std::fs::write(dir.path().join("manifest.json"), manifest).unwrap();
    let text = OnnxReranker::open(dir.path(), &ort_library(), OnnxOptions::default())
        .err()
        .expect("must fail")
        .to_string();
    assert!(text.contains("sentence_embedding"), "{text}");
    assert!(text.contains("last_hidden_state"), "{text}");
}

#[test]
fn missing_library_is_a_clear_error_not_a_panic() {
    let err = OnnxReranker::open(
        &model_dir("all-MiniLM-L6-v2"),
        Path::new("/nonexistent/onnxruntime/libonnxruntime.so.1.31.1"),
        OnnxOptions::default(),
    )
    .err()
    .expect("must fail");
    let text = err.to_string();
    assert!(
        text.contains("/nonexistent/onnxruntime/libonnxruntime.so.1.31.1"),
        "{text}"
    );
    assert!(text.contains("expected libonnxruntime.so.1.31.1"), "{text}");
}

#[test]
fn malformed_library_is_a_clear_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libonnxruntime.so.1.31.1");
    std::fs::write(&lib, vec![0u8; 4096]).unwrap();
    let text = OnnxReranker::open(&model_dir("all-MiniLM-L6-v2"), &lib, OnnxOptions::default())
        .err()
        .expect("must fail")
        .to_string();
    assert!(text.contains(&lib.display().to_string()), "{text}");
    assert!(text.contains("not an ELF shared library"), "{text}");
}

#[test]
fn a_shared_library_that_is_not_onnx_runtime_is_refused_by_ort_cleanly() {
    // ONNX Runtime is loaded once per process and other tests of this binary load the real one,
    // so the check runs in a child process of its own (this test, re-run alone).
    // The test's name as the harness knows it: this module's path without the crate's name.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let name =
        format!("{module}::a_shared_library_that_is_not_onnx_runtime_is_refused_by_ort_cleanly");
    if std::env::var_os("CONVRAG_TEST_ORT_CHILD").is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name.as_str(), "--test-threads=1"])
            .env("CONVRAG_TEST_ORT_CHILD", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(
            stdout.contains("1 passed"),
            "the child ran no test: {stdout}"
        );
        return;
    }
    // A real ELF shared object without OrtGetApiBase: passes the file check, ort itself refuses it.
    let candidates = [
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/usr/lib/x86_64-linux-gnu/libz.so.1",
    ];
    // zlib is on every machine this runs on (Debian's base system).
    let lib = candidates
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no libz.so.1 found at {candidates:?}"));
    let text = OnnxReranker::open(&model_dir("all-MiniLM-L6-v2"), lib, OnnxOptions::default())
        .err()
        .expect("must fail")
        .to_string();
    assert!(text.contains("libz.so.1"), "{text}");
    assert!(text.contains("OrtGetApiBase"), "{text}");
}
