//! `convrag embed`: a collection's embeddings computed once into its vector file, by passage
//! ordinal; a second run encodes nothing, an interrupted one resumes where it stopped, and a
//! search's hits are reranked from the file.

use crate::common;

use std::sync::Arc;

use convrag::collection::Format;
use convrag::config::Config;
use convrag::dense::embed::{embed_collection, EmbedOptions};
use convrag::dense::vector_sums::{check_vector_file, VectorCheck, VectorSums};
use convrag::dense::DiskEmbeddingCache;
use convrag::index::checksum::ChecksumManifest;
use convrag::index::{
    embedding_key, index_collection, CollectionRegistry, IndexOptions, Retriever,
};
use convrag::progress::NoProgress;
use convrag::rerank::{OnnxOptions, OnnxReranker, PassageRef, Reranker};

#[test]
fn embed_writes_each_vector_once_and_reranking_reads_them_by_ordinal() {
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
    let first = embed_collection(&config, &args(), &NoProgress).unwrap();
    assert_eq!((first.passages, first.encoded), (40, 40));
    let again = embed_collection(&config, &args(), &NoProgress).unwrap();
    assert_eq!(again.encoded, 0, "nothing left to encode");

    let cache = DiskEmbeddingCache::new(home.path().join("embeddings"));
    let model = OnnxReranker::open(&model_dir, &library, OnnxOptions::default()).unwrap();
    let retriever = CollectionRegistry::new(config.collections_dir())
        .get("demo")
        .unwrap();
    let key = embedding_key("demo", retriever.as_ref());
    let path = cache.vector_path(model.model_sha256(), &key);
    let record = 8 + 4 * 384;
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        32 + 40 * record,
        "one fixed-width record per passage"
    );

    // An interrupted run: 25 records and part of the 26th. The next run cuts the torn record and
    // encodes the 15 passages from ordinal 25 on.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(32 + 25 * record + 100).unwrap();
    drop(file);
    let resumed = embed_collection(&config, &args(), &NoProgress).unwrap();
    assert_eq!(resumed.encoded, 15);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 32 + 40 * record);
    // The completed file's sums are recorded again, with the collection they belong to.
    let sums = VectorSums::read(&path)
        .unwrap()
        .expect("sums of the complete file");
    assert_eq!(sums.bytes, 32 + 40 * record);
    assert_eq!(sums.origin.passages, 40);
    assert_eq!(sums.origin.dim, 384);
    assert_eq!(sums.origin.model, model.model_id());
    let digest = ChecksumManifest::read(&config.collections_dir().join("demo"))
        .unwrap()
        .unwrap()
        .digest();
    assert_eq!(sums.origin.collection_manifest_sha256, Some(digest.clone()));
    assert!(matches!(
        check_vector_file(&path, &digest).unwrap(),
        VectorCheck::Verified { .. }
    ));

    // A search's hits carry ordinals: reranking them reads every passage vector from the file
    // and encodes only the query, with the scores of encoding everything.
    let hits = retriever.search("passage topic 3", 10).unwrap();
    assert_eq!(hits.len(), 10);
    assert!(hits.iter().all(|h| h.ordinal.is_some()));
    let texts: Vec<String> = hits.iter().map(|h| h.model_text()).collect();
    let refs: Vec<PassageRef<'_>> = hits
        .iter()
        .zip(&texts)
        .map(|(h, t)| PassageRef {
            id: &h.id,
            text: t,
            ordinal: h.ordinal,
        })
        .collect();
    let cached = model.with_cache(Arc::new(DiskEmbeddingCache::new(
        home.path().join("embeddings"),
    )));
    let scores = cached.rerank("passage topic 3", &refs, Some(&key)).unwrap();
    let stats = cached.stats();
    assert_eq!(stats.cache_hits, 10, "every vector from the file");
    assert_eq!(stats.sequences, 1, "only the query was encoded");
    let plain = OnnxReranker::open(&model_dir, &library, OnnxOptions::default()).unwrap();
    let want = plain.rerank("passage topic 3", &refs, None).unwrap();
    for (got, want) in scores.iter().zip(&want) {
        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    }
    // A wrong ordinal never yields another passage's vector: it is encoded instead.
    let mut wrong = refs.clone();
    wrong[0].ordinal = wrong[1].ordinal;
    cached.reset_stats();
    let rescored = cached
        .rerank("passage topic 3", &wrong, Some(&key))
        .unwrap();
    assert_eq!(cached.stats().cache_hits, 9);
    assert!((rescored[0] - want[0]).abs() < 1e-5);
    assert_eq!(retriever.num_passages(), 40);

    // The same passages indexed again under the same name (a rebuilt collection, or another
    // user's private one) get a key of their own: no vector of this index is ever read for it.
    let other_home = tempfile::tempdir().unwrap();
    index_collection(&other_home.path().join("collections"), &options).unwrap();
    let other = CollectionRegistry::new(other_home.path().join("collections"))
        .get("demo")
        .unwrap();
    let other_key = embedding_key("demo", other.as_ref());
    assert!(other_key.starts_with("demo.") && key.starts_with("demo."));
    assert_ne!(other_key, key);

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
