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

const PASSAGES: &str = r#"{"id": "p1", "title": "Foxes", "text": "Red foxes live in dens and hunt small rodents at night."}
{"id": "p2", "title": "Bread", "text": "Sourdough bread rises slowly because wild yeast ferments the dough."}
{"id": "p3", "title": "Den", "text": "A den is a small room. Foxes are mentioned here only in passing, fox fox fox."}
{"id": "p4", "title": "Rodents", "text": "Mice and voles are the main prey of the red fox in Europe."}
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

    // The model reads meaning: what do red foxes eat? p4 answers it, p3 only repeats words.
    let r = alice
        .get("/v1/collections/demo/search?q=what%20do%20red%20foxes%20eat&k=3&rerank=true&depth=4")
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let results = r.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert!(results[0]["rerank_score"].is_number());
    let ids: Vec<&str> = results.iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert!(ids[0] == "p4" || ids[0] == "p1", "{ids:?}");
    // p4 answers the question; p3 (about red foxes, not what they eat) must come after it.
    let p4 = ids
        .iter()
        .position(|&i| i == "p4")
        .expect("p4 is in the top 3");
    let p3 = ids.iter().position(|&i| i == "p3").unwrap_or(ids.len());
    assert!(p4 < p3, "{ids:?}");
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
