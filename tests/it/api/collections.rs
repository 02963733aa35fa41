//! Collections over HTTP: listing, BM25 search, neural reranking, and bad input.
//!
//! Reranking needs what `scripts/fetch-models.sh` installs (CONVRAG_HOME, default ./.convrag).

use crate::common;

use std::sync::Arc;

use common::{new_user, Client, TestDb, ADMIN_TOKEN};
use convrag::api;
use convrag::collection::Format;
use convrag::index::{index_collection, IndexOptions};
use convrag::rerank::{MemoryEmbeddingCache, OnnxReranker};
use convrag::web::AppState;

fn reranker() -> OnnxReranker {
    common::default_model()
}

const PASSAGES: &str = r#"{"id": "p1", "title": "Dens", "text": "Red foxes live in dens and raise their cubs there in spring."}
{"id": "p2", "title": "Bread", "text": "Sourdough bread rises slowly because wild yeast ferments the dough."}
{"id": "p3", "title": "Den", "text": "A den is a small room. Foxes are mentioned here only in passing, fox fox fox."}
{"id": "p4", "title": "Diet", "text": "The red fox's diet is mostly mice and voles, with berries and insects in late summer."}
"#;

async fn setup(with_model: bool) -> (TestDb, api::RunningServer, tempfile::TempDir) {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let mut config = db.config();
    config.home = home.path().to_path_buf();
    let input = home.path().join("passages.jsonl");
    std::fs::write(&input, PASSAGES).unwrap();
    let mut options = IndexOptions::new("demo", Format::Jsonl);
    options.inputs = vec![input];
    options.threads = 1;
    options.heap_bytes = 16 << 20;
    index_collection(&config.collections_dir(), &options).unwrap();
    let mut state = AppState::new(db.store.clone(), Arc::new(config), ADMIN_TOKEN);
    if with_model {
        state = state.with_reranker(Arc::new(
            reranker().with_cache(Arc::new(MemoryEmbeddingCache::new())),
        ));
    }
    let server = api::spawn(state).unwrap();
    (db, server, home)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collections_are_listed_and_searched() {
    let (_db, server, _home) = setup(true).await;
    let anon = Client::new(&server, None);
    assert_eq!(anon.get("/v1/collections").await.status, 401);
    let alice = new_user(&anon, "alice").await;

    let r = alice.get("/v1/collections").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["collections"][0]["name"], "demo");
    assert_eq!(r.body["collections"][0]["passages"], 4);

    let r = alice
        .get("/v1/collections/demo/search?q=fox%20den&k=2")
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let results = r.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["rank"], 1);
    assert!(results[0]["text"].as_str().unwrap().len() > 10);
    assert!(results[0]["rerank_score"].is_null());

    // The model reads meaning: what do red foxes eat? p4 (the red fox's diet) answers it without
    // the word "eat"; p1 (where red foxes live) and p3 (fox, fox, fox) only share words with it.
    // BM25 puts p1 above p4; the model puts p4 first (scores about 0.80, 0.62, 0.46).
    let r = alice
        .get("/v1/collections/demo/search?q=what%20do%20red%20foxes%20eat&k=3&rerank=true&depth=4")
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let results = r.body["results"].as_array().unwrap();
    let ids: Vec<&str> = results.iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["p4", "p1", "p3"], "{results:?}");
    let score = |i: usize, field: &str| results[i][field].as_f64().unwrap();
    assert!(
        score(0, "rerank_score") > score(1, "rerank_score")
            && score(1, "rerank_score") > score(2, "rerank_score"),
        "{results:?}"
    );
    assert!(
        score(1, "bm25_score") > score(0, "bm25_score"),
        "{results:?}"
    );
    assert!(r.body["timings_ms"]["rerank"].is_number());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_searches_get_clear_errors() {
    let (_db, server, _home) = setup(false).await;
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let cases = [
        (
            "/v1/collections/nope/search?q=fox",
            404,
            "not_found",
            "name",
        ),
        (
            "/v1/collections/demo/search?q=%20%20",
            400,
            "invalid_field",
            "q",
        ),
        ("/v1/collections/demo/search", 400, "invalid_field", "q"),
        (
            "/v1/collections/demo/search?q=fox&k=0",
            400,
            "invalid_field",
            "k",
        ),
        (
            "/v1/collections/demo/search?q=fox&k=many",
            400,
            "invalid_field",
            "k",
        ),
        (
            "/v1/collections/demo/search?q=fox&k=5000",
            400,
            "invalid_field",
            "k",
        ),
        (
            "/v1/collections/demo/search?q=fox&depth=100000",
            400,
            "invalid_field",
            "depth",
        ),
        (
            "/v1/collections/demo/search?q=fox&colour=red",
            400,
            "invalid_field",
            "colour",
        ),
        (
            "/v1/collections/.hidden/search?q=fox",
            400,
            "invalid_field",
            "name",
        ),
        // No model loaded in this server.
        (
            "/v1/collections/demo/search?q=fox&rerank=true",
            503,
            "model_unavailable",
            "<no field>",
        ),
    ];
    for (path, status, code, field) in cases {
        let r = alice.get(path).await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (status, code, field),
            "{path}"
        );
    }
    server.stop().await;
}
