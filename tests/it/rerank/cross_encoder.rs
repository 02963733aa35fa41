//! The cross-encoder path, on a tiny random BERT cross-encoder whose logits were computed by an
//! independent numpy forward pass (scripts/rerank-make-fixtures.py). Its ranking quality is
//! meaningless: this checks input construction ([CLS] q [SEP] p [SEP], segment ids, truncation that
//! keeps the query whole) and logit extraction, not relevance.

use crate::common;

use std::path::PathBuf;

use crate::support::fixture;
use common::ort_library;
use convrag::rerank::{ModelKind, OnnxOptions, OnnxReranker, PassageRef, Reranker};

fn fixture_dir() -> PathBuf {
    fixture("onnx/tiny-cross-encoder")
}

#[test]
fn tiny_cross_encoder_logits_match_numpy_and_query_stays_whole() {
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture_dir().join("expected.json")).unwrap(),
    )
    .unwrap();
    let query = expected["query"].as_str().unwrap();
    let passages: Vec<(String, String)> = expected["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().into(),
                p["text"].as_str().unwrap().into(),
            )
        })
        .collect();
    let refs: Vec<PassageRef<'_>> = passages
        .iter()
        .map(|(id, text)| PassageRef {
            id,
            text,
            ordinal: None,
        })
        .collect();
    let want: Vec<f32> = expected["logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    let lengths: u64 = expected["sequence_lengths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();

    // Batch size 4 so the six pairs take two length-sorted batches.
    let options = OnnxOptions {
        batch_size: 4,
        ..OnnxOptions::default()
    };
    let reranker = OnnxReranker::open(&fixture_dir(), &ort_library(), options).unwrap();
    assert_eq!(reranker.kind(), ModelKind::CrossEncoder);
    let got = reranker
        .rerank(query, &refs, Some("ignored-for-cross-encoders"))
        .unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() < 1e-4, "pair {i}: convrag {g} vs numpy {w}");
    }
    let s = reranker.stats();
    // Same token counts as the reference's inputs: the long passage was cut to fit 24 tokens with
    // the query whole.
    assert_eq!(s.real_tokens, lengths, "{s:?}");
    assert_eq!(s.batches, 2);
    assert_eq!(s.sequences, passages.len() as u64);
    assert!(s.padded_tokens >= s.real_tokens);
}

#[test]
fn cross_encoder_refuses_embedding() {
    let reranker =
        OnnxReranker::open(&fixture_dir(), &ort_library(), OnnxOptions::default()).unwrap();
    let text = reranker.embed(&["x"]).unwrap_err().to_string();
    assert!(text.contains("BiEncoder"), "{text}");
}
