//! Dense and hybrid retrieval through the server (issue 33): `GET .../search?retrieval=`, MCP
//! `search`, a turn's `retrieval` setting (stored with the turn), and the refusals when the
//! collection has no passage vectors or the server no bi-encoder.
//!
//! Needs what `scripts/fetch-models.sh` installs (CONVRAG_HOME, default ./.convrag).

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{new_user, Client, TestDb, ADMIN_TOKEN};
use convrag::api;
use convrag::collection::Format;
use convrag::config::Config;
use convrag::index::{index_collection, IndexOptions};
use convrag::progress::NoProgress;
use convrag::rerank::dense::VectorSearch;
use convrag::rerank::embed::{embed_collection, EmbedOptions};
use convrag::rerank::{DiskEmbeddingCache, MemoryEmbeddingCache};
use convrag::web::AppState;
use serde_json::{json, Value};

// Made up: two passages answer "what do red foxes eat" in other words than the query's.
const PASSAGES: &str = r#"{"id": "p1", "title": "Dens", "text": "Red foxes live in dens and raise their cubs there in spring."}
{"id": "p2", "title": "Bread", "text": "Sourdough bread rises slowly because wild yeast ferments the dough."}
{"id": "p3", "title": "Den", "text": "A den is a small room. Foxes are mentioned here only in passing, fox fox fox."}
{"id": "p4", "title": "Diet", "text": "The red fox's diet is mostly mice and voles, with berries and insects in late summer."}
{"id": "p5", "title": "Hunting", "text": "At dusk the vixen stalks rodents in tall grass and pounces on them from above."}
{"id": "p6", "title": "Ovens", "text": "A wood-fired oven bakes loaves in minutes once its floor is hot."}
"#;

const QUERY: &str = "what do red foxes eat";

fn index(config: &Config, name: &str) {
    let input = config.home.join(format!("{name}.jsonl"));
    std::fs::write(&input, PASSAGES).unwrap();
    let mut options = IndexOptions::new(name, Format::Jsonl);
    options.inputs = vec![input];
    options.threads = 1;
    options.heap_bytes = 16 << 20;
    index_collection(&config.collections_dir(), &options).unwrap();
}

/// A server over `animals` (with passage vectors) and `plain` (the same passages, none
/// embedded); with the bi-encoder serving dense retrieval when `vectors`, else only reranking.
async fn setup(vectors: bool) -> (TestDb, api::RunningServer, tempfile::TempDir) {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let mut config = db.config();
    config.home = home.path().to_path_buf();
    config.model_dir = Some(common::model_dir("all-MiniLM-L6-v2"));
    config.ort_dylib_path = Some(common::ort_library());
    index(&config, "animals");
    index(&config, "plain");
    let options = EmbedOptions {
        collection: "animals".to_string(),
        model: None,
        chunk: 4,
    };
    let report = embed_collection(&config, &options, &NoProgress).unwrap();
    assert_eq!(report.encoded, 6);
    let cache = Arc::new(DiskEmbeddingCache::new(config.home.join("embeddings")));
    let state = AppState::new(db.store.clone(), Arc::new(config), ADMIN_TOKEN);
    let state = if vectors {
        let model = common::default_model().with_cache(cache.clone());
        state.with_vector_search(VectorSearch::new(Arc::new(model), cache))
    } else {
        state.with_reranker(Arc::new(
            common::default_model().with_cache(Arc::new(MemoryEmbeddingCache::new())),
        ))
    };
    (db, api::spawn(state).unwrap(), home)
}

async fn search(client: &Client, collection: &str, retrieval: &str) -> Value {
    let q = QUERY.replace(' ', "%20");
    let r = client
        .get(&format!(
            "/v1/collections/{collection}/search?q={q}&k=6&retrieval={retrieval}"
        ))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["retrieval"], retrieval, "{:?}", r.body);
    r.body
}

fn ids(results: &Value) -> Vec<String> {
    results["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

/// Reciprocal-rank fusion (k = 60, ranks from 1) of two rankings, ties by id: what hybrid
/// retrieval must return, computed here from the server's own BM25 and dense rankings.
fn rrf(a: &[String], b: &[String]) -> Vec<(String, f64)> {
    let mut scores: HashMap<&str, f64> = HashMap::new();
    for list in [a, b] {
        for (rank, id) in list.iter().enumerate() {
            *scores.entry(id).or_default() += 1.0 / (60.0 + rank as f64 + 1.0);
        }
    }
    let mut fused: Vec<(String, f64)> = scores
        .into_iter()
        .map(|(id, s)| (id.to_string(), s))
        .collect();
    fused.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    fused
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_by_bm25_dense_and_hybrid() {
    let (_db, server, _home) = setup(true).await;
    let alice = new_user(&Client::new(&server, None), "alice").await;

    let bm25 = search(&alice, "animals", "bm25").await;
    let dense = search(&alice, "animals", "dense").await;
    // BM25 only finds passages sharing the query's words (p5 says "rodents", not "eat" or
    // "fox"); the bi-encoder ranks every passage, the diet first, the bread and oven last.
    let bm25_ids = ids(&bm25);
    assert!(!bm25_ids.contains(&"p5".to_string()), "{bm25}");
    let dense_ids = ids(&dense);
    assert_eq!(dense_ids.len(), 6, "{dense}");
    assert_eq!(dense_ids[0], "p4", "{dense}");
    let tail: Vec<&str> = dense_ids[4..].iter().map(String::as_str).collect();
    assert!(tail.contains(&"p2") && tail.contains(&"p6"), "{dense}");
    // Dense scores are cosines, best first.
    let cosines: Vec<f64> = dense["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["score"].as_f64().unwrap())
        .collect();
    assert!(cosines.windows(2).all(|w| w[0] >= w[1]), "{cosines:?}");
    assert!(
        cosines.iter().all(|c| (-1.0..=1.0).contains(c)),
        "{cosines:?}"
    );

    let hybrid = search(&alice, "animals", "hybrid").await;
    let expected = rrf(&bm25_ids, &dense_ids);
    let got: Vec<(String, f64)> = hybrid["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["id"].as_str().unwrap().to_string(),
                h["score"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got.iter().map(|g| &g.0).collect::<Vec<_>>(),
        expected.iter().map(|e| &e.0).collect::<Vec<_>>(),
        "{hybrid}"
    );
    for ((_, g), (_, e)) in got.iter().zip(&expected) {
        assert!((g - e).abs() < 1e-6, "{got:?} vs {expected:?}");
    }

    // MCP search is the same search.
    let r = alice
        .post(
            "/mcp",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search",
                "arguments": {"collection": "animals", "query": QUERY, "k": 6, "retrieval": "dense"}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let structured = &r.body["result"]["structuredContent"]["results"];
    let mcp_ids: Vec<&str> = structured
        .as_array()
        .unwrap_or_else(|| panic!("{}", r.body))
        .iter()
        .map(|h| h["id"].as_str().unwrap())
        .collect();
    // MCP reranks when a model is loaded; the candidates are dense's, all six of them.
    let mut sorted = mcp_ids.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["p1", "p2", "p3", "p4", "p5", "p6"], "{}", r.body);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_retrieves_as_its_setting_says_and_stores_it() {
    let (_db, server, _home) = setup(true).await;
    let alice = new_user(&Client::new(&server, None), "alice").await;
    let hybrid = ids(&search(&alice, "animals", "hybrid").await);

    let r = alice
        .post(
            "/v1/conversations",
            json!({"title": "foxes", "collection": "animals"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let conversation = r.body["conversation"]["id"].as_str().unwrap().to_string();
    let r = alice
        .post(
            &format!("/v1/conversations/{conversation}/turns"),
            json!({"utterance": QUERY, "retrieval": "hybrid", "rerank": false, "passages": 6,
                "generator": "extractive"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let turn = &r.body["turn"];
    assert_eq!(turn["settings"]["retrieval"], "hybrid", "{turn}");
    assert_eq!(turn["rewritten_utterance"], QUERY, "{turn}");
    let passages: Vec<&str> = turn["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["passage_id"].as_str().unwrap())
        .collect();
    assert_eq!(passages, hybrid, "{turn}");

    // Stored: the conversation's turns read back with the setting.
    let r = alice
        .get(&format!("/v1/conversations/{conversation}/turns"))
        .await;
    assert_eq!(r.body["turns"][0]["settings"]["retrieval"], "hybrid");

    // Without a setting a turn retrieves with BM25.
    let r = alice
        .post(
            &format!("/v1/conversations/{conversation}/turns"),
            json!({"utterance": "And where do they live?", "generator": "extractive"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["turn"]["settings"]["retrieval"], "bm25");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dense_retrieval_without_vectors_is_refused_naming_retrieval() {
    let (_db, server, _home) = setup(true).await;
    let alice = new_user(&Client::new(&server, None), "alice").await;
    let q = QUERY.replace(' ', "%20");
    // A collection nobody embedded: 409, naming the setting and how to compute the vectors.
    for mode in ["dense", "hybrid"] {
        let r = alice
            .get(&format!(
                "/v1/collections/plain/search?q={q}&retrieval={mode}"
            ))
            .await;
        assert_eq!(r.status, 409, "{:?}", r.body);
        assert_eq!(r.body["error"]["code"], "vectors_not_ready", "{:?}", r.body);
        assert_eq!(r.body["error"]["field"], "retrieval", "{:?}", r.body);
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("convrag embed --collection plain"),
            "{message}"
        );
    }
    // BM25 still serves it.
    search(&alice, "plain", "bm25").await;
    // A mode that does not exist.
    let r = alice
        .get(&format!(
            "/v1/collections/animals/search?q={q}&retrieval=sparse"
        ))
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(r.body["error"]["field"], "retrieval", "{:?}", r.body);
    // A turn asking for it on that collection: refused, nothing stored.
    let r = alice
        .post(
            "/v1/conversations",
            json!({"title": "plain", "collection": "plain"}),
        )
        .await;
    let conversation = r.body["conversation"]["id"].as_str().unwrap().to_string();
    let r = alice
        .post(
            &format!("/v1/conversations/{conversation}/turns"),
            json!({"utterance": QUERY, "retrieval": "dense", "generator": "extractive"}),
        )
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert_eq!(r.body["error"]["code"], "vectors_not_ready", "{:?}", r.body);
    assert_eq!(r.body["error"]["field"], "retrieval", "{:?}", r.body);
    let r = alice
        .get(&format!("/v1/conversations/{conversation}/turns"))
        .await;
    assert_eq!(r.body["turns"], json!([]), "{:?}", r.body);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_the_bi_encoders_vectors_refuses_dense_retrieval() {
    let (_db, server, _home) = setup(false).await;
    let alice = new_user(&Client::new(&server, None), "alice").await;
    let q = QUERY.replace(' ', "%20");
    let r = alice
        .get(&format!(
            "/v1/collections/animals/search?q={q}&retrieval=hybrid"
        ))
        .await;
    assert_eq!(r.status, 503, "{:?}", r.body);
    assert_eq!(r.body["error"]["code"], "model_unavailable", "{:?}", r.body);
    assert_eq!(r.body["error"]["field"], "retrieval", "{:?}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("needs the bi-encoder"),
        "{:?}",
        r.body
    );
    search(&alice, "animals", "bm25").await;
    server.stop().await;
}

/// A multipart/form-data body with one `files` part.
fn one_file(name: &str, text: &str) -> (String, Vec<u8>) {
    let boundary = "convrag-retrieval-boundary";
    let body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n\
         Content-Type: text/plain\r\n\r\n{text}\r\n--{boundary}--\r\n"
    );
    (
        format!("multipart/form-data; boundary={boundary}"),
        body.into_bytes(),
    )
}

/// Polls `GET /v1/collections/{name}` until `ready(collection)` holds.
async fn wait_for(client: &Client, name: &str, ready: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..1200 {
        let r = client.get(&format!("/v1/collections/{name}")).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        if ready(&r.body["collection"]) {
            return r.body["collection"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{name} did not get there in 120 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_gets_its_vectors_in_the_background_and_dense_search_serves_it() {
    let (_db, server, _home) = setup(true).await;
    let alice = new_user(&Client::new(&server, None), "alice").await;
    // Listed with their vectors: computed for one, not for the other.
    let r = alice.get("/v1/collections").await;
    let vectors: HashMap<String, Value> = r.body["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["vectors"].clone(),
            )
        })
        .collect();
    assert_eq!(
        vectors["animals"],
        json!({"status": "ready"}),
        "{:?}",
        r.body
    );
    assert_eq!(vectors["plain"], json!({"status": "none"}), "{:?}", r.body);

    let r = alice
        .post("/v1/collections", json!({"name": "garden"}))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let (content_type, body) = one_file(
        "compost.txt",
        "Compost needs green waste and brown waste in equal parts. Turn the heap every two \
         weeks so that air reaches the middle. Kitchen scraps like peelings feed the worms.",
    );
    let r = alice
        .raw(
            "POST",
            "/v1/collections/garden/documents",
            &content_type,
            body,
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let garden = wait_for(&alice, "garden", |c| {
        c["status"] == "ready" && c["vectors"]["status"] == "ready"
    })
    .await;
    assert!(garden["passages"].as_u64().unwrap() >= 1, "{garden}");

    // Dense search over the upload: found by meaning ("rotting food" shares no word with it).
    let r = alice
        .get("/v1/collections/garden/search?q=rotting%20food%20for%20worms&retrieval=dense")
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body["results"].as_array().unwrap().len(),
        1,
        "{:?}",
        r.body
    );
    // Another user does not see it, nor its vectors.
    let bob = new_user(&Client::new(&server, None), "bob").await;
    let r = bob
        .get("/v1/collections/garden/search?q=compost&retrieval=dense")
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    server.stop().await;
}
