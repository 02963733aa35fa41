//! `convrag embed`: a collection's embeddings computed once into the disk cache; a second run (or
//! a resumed one) encodes nothing again.

use crate::common;

use std::sync::Arc;

use convrag::collection::Format;
use convrag::config::Config;
use convrag::index::{index_collection, CollectionRegistry, IndexOptions, Retriever};
use convrag::progress::NoProgress;
use convrag::rerank::embed::{embed_collection, EmbedOptions};
use convrag::rerank::{DiskEmbeddingCache, OnnxOptions, OnnxReranker, PassageRef};

#[test]
fn embed_fills_the_cache_once() {
    let model_dir = common::model_dir("all-MiniLM-L6-v2");
    let library = common::ort_library();
    let home = tempfile::tempdir().unwrap();
    let config = Config {
        home: home.path().to_path_buf(),
        model_dir: Some(model_dir.clone()),
        ort_dylib_path: Some(library.clone()),
        ..Config::default()
    };
    let input = home.path().join("p.jsonl");
    let lines: Vec<String> = (0..40)
        .map(|i| format!(r#"{{"id": "p{i}", "title": "T{i}", "text": "Passage number {i} talks about topic {}."}}"#, i % 7))
        .collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    let mut options = IndexOptions::new("demo", Format::Jsonl);
    options.inputs = vec![input];
    options.threads = 1;
    options.heap_bytes = 16 << 20;
    index_collection(&config.collections_dir(), &options).unwrap();

    let args = || EmbedOptions {
        collection: "demo".into(),
        model: None,
        chunk: 16,
    };
    embed_collection(&config, &args(), &NoProgress).unwrap();
    embed_collection(&config, &args(), &NoProgress).unwrap();

    // Every passage is now cached under the text the reranker will use for it.
    let model = OnnxReranker::open(&model_dir, &library, OnnxOptions::default())
        .unwrap()
        .with_cache(Arc::new(DiskEmbeddingCache::new(
            home.path().join("embeddings"),
        )));
    let retriever = CollectionRegistry::new(config.collections_dir())
        .get("demo")
        .unwrap();
    let mut hits = Vec::new();
    retriever
        .for_each_passage(7, |batch| {
            hits.extend_from_slice(batch);
            Ok(())
        })
        .unwrap();
    assert_eq!(hits.len(), 40);
    let texts: Vec<String> = hits.iter().map(|h| h.model_text()).collect();
    let refs: Vec<PassageRef<'_>> = hits
        .iter()
        .zip(&texts)
        .map(|(h, t)| PassageRef { id: &h.id, text: t })
        .collect();
    assert_eq!(
        model.precompute("demo", &refs).unwrap(),
        0,
        "nothing left to encode"
    );
    assert_eq!(retriever.num_passages(), 40);

    let err = embed_collection(
        &config,
        &EmbedOptions {
            collection: "missing".into(),
            ..args()
        },
        &NoProgress,
    )
    .unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}
