//! Dense and hybrid retrieval through the server (issue 33): `GET .../search?retrieval=`, MCP
//! `search`, a turn's `retrieval` setting (stored with the turn, with the retrieval that ran and
//! each passage's ranks in BM25's, the bi-encoder's and the fused list), BM25 meanwhile on a
//! collection without passage vectors, the refusal on a server without the bi-encoder, and the
//! turn's query texts encoded once (counted by the real model).
//!
//! Needs what `scripts/fetch-models.sh` installs (CONVRAG_HOME, default ./.convrag).

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{new_user, Client, TestDb, ADMIN_TOKEN};
use convrag::api;
use convrag::collection::Format;
use convrag::config::Config;
use convrag::dense::embed::{embed_collection, EmbedOptions};
use convrag::dense::DiskEmbeddingCache;
use convrag::dense::VectorSearch;
use convrag::index::{index_collection, IndexOptions};
use convrag::progress::NoProgress;
use convrag::rerank::{MemoryEmbeddingCache, OnnxReranker};
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
    let (db, server, home, _) = setup_with_model(vectors).await;
    (db, server, home)
}

/// [`setup`], with the model the server encodes with (its counters).
async fn setup_with_model(
    vectors: bool,
) -> (
    TestDb,
    api::RunningServer,
    tempfile::TempDir,
    Arc<OnnxReranker>,
) {
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
    let (state, model) = if vectors {
        let model = Arc::new(common::default_model().with_cache(cache.clone()));
        let search = VectorSearch::new(model.clone(), cache);
        (state.with_vector_search(search), model)
    } else {
        let model =
            Arc::new(common::default_model().with_cache(Arc::new(MemoryEmbeddingCache::new())));
        (state.with_reranker(model.clone()), model)
    };
    (db, api::spawn(state).unwrap(), home, model)
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
    // Asked for no fusion: the one recommended after hybrid retrieval.
    assert_eq!(turn["settings"]["fusion"], "weighted:0.35", "{turn}");
    assert_eq!(turn["rewritten_utterance"], QUERY, "{turn}");
    let passages: Vec<&str> = turn["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["passage_id"].as_str().unwrap())
        .collect();
    assert_eq!(passages, hybrid, "{turn}");
    assert_eq!(turn["diagnostics"]["retrieval"], "hybrid", "{turn}");
    assert!(
        turn["diagnostics"]["retrieval_fallback"].is_null(),
        "{turn}"
    );
    // Which retriever found each passage: its rank in BM25's list and in the bi-encoder's (as
    // the searches rank them), and in the fused list (the turn's order: not reranked).
    let (bm25, dense) = (
        ids(&search(&alice, "animals", "bm25").await),
        ids(&search(&alice, "animals", "dense").await),
    );
    let rank_in = |list: &[String], id: &str| {
        list.iter()
            .position(|x| x == id)
            .map_or(Value::Null, |i| json!(i + 1))
    };
    let ranks = |turn: &Value| -> Vec<(Value, Value, Value)> {
        turn["passages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["bm25_rank"].clone(),
                    p["dense_rank"].clone(),
                    p["fused_rank"].clone(),
                )
            })
            .collect()
    };
    let expected: Vec<(Value, Value, Value)> = passages
        .iter()
        .enumerate()
        .map(|(i, id)| (rank_in(&bm25, id), rank_in(&dense, id), json!(i + 1)))
        .collect();
    assert_eq!(ranks(turn), expected, "{turn}");
    assert!(
        expected.iter().any(|(b, _, _)| b.is_null()),
        "a passage only the bi-encoder found: {turn}"
    );

    // Stored: the conversation's turns read back with the setting, the retrieval that ran and
    // the ranks.
    let r = alice
        .get(&format!("/v1/conversations/{conversation}/turns"))
        .await;
    assert_eq!(r.body["turns"][0]["settings"]["retrieval"], "hybrid");
    assert_eq!(r.body["turns"][0]["diagnostics"]["retrieval"], "hybrid");
    assert_eq!(ranks(&r.body["turns"][0]), expected, "{:?}", r.body);

    // Without a setting a turn retrieves with BM25.
    let r = alice
        .post(
            &format!("/v1/conversations/{conversation}/turns"),
            json!({"utterance": "And where do they live?", "generator": "extractive"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["turn"]["settings"]["retrieval"], "bm25");
    assert_eq!(r.body["turn"]["diagnostics"]["retrieval"], "bm25");
    let first = &r.body["turn"]["passages"][0];
    assert_eq!(
        (
            &first["bm25_rank"],
            &first["dense_rank"],
            &first["fused_rank"]
        ),
        (&json!(1), &Value::Null, &Value::Null),
        "{first}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dense_retrieval_without_vectors_runs_bm25_meanwhile_and_says_so() {
    let (_db, server, _home) = setup(true).await;
    let alice = new_user(&Client::new(&server, None), "alice").await;
    let q = QUERY.replace(' ', "%20");
    let bm25 = search(&alice, "plain", "bm25").await;
    assert!(bm25.get("retrieval_fallback").is_none(), "{bm25}");
    // A collection nobody embedded: BM25's results, saying what was asked and why not.
    for mode in ["dense", "hybrid"] {
        let r = alice
            .get(&format!(
                "/v1/collections/plain/search?q={q}&k=6&retrieval={mode}"
            ))
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.body["retrieval"], "bm25", "{:?}", r.body);
        assert_eq!(
            r.body["retrieval_fallback"],
            json!({"requested": mode, "reason": "vectors_missing"}),
            "{:?}",
            r.body
        );
        assert_eq!(ids(&r.body), ids(&bm25), "{:?}", r.body);
    }
    // MCP search says so too.
    let r = alice
        .post(
            "/mcp",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search",
                "arguments": {"collection": "plain", "query": QUERY, "k": 6, "retrieval": "hybrid"}}}),
        )
        .await;
    let structured = &r.body["result"]["structuredContent"];
    assert_eq!(structured["retrieval"], "bm25", "{}", r.body);
    assert_eq!(
        structured["retrieval_fallback"],
        json!({"requested": "hybrid", "reason": "vectors_missing"}),
        "{}",
        r.body
    );
    // A mode that does not exist.
    let r = alice
        .get(&format!(
            "/v1/collections/animals/search?q={q}&retrieval=sparse"
        ))
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(r.body["error"]["field"], "retrieval", "{:?}", r.body);
    // A turn asking for it on that collection: answered by BM25, stored with the setting asked
    // for beside the retrieval that ran.
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
            json!({"utterance": QUERY, "retrieval": "dense", "rerank": false, "passages": 6,
                "generator": "extractive"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let turn = &r.body["turn"];
    let passages: Vec<String> = turn["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["passage_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(passages, ids(&bm25), "{turn}");
    let r = alice
        .get(&format!("/v1/conversations/{conversation}/turns"))
        .await;
    let stored = &r.body["turns"][0];
    assert_eq!(stored["settings"]["retrieval"], "dense", "{stored}");
    assert_eq!(stored["diagnostics"]["retrieval"], "bm25", "{stored}");
    assert_eq!(
        stored["diagnostics"]["retrieval_fallback"],
        json!({"requested": "dense", "reason": "vectors_missing"}),
        "{stored}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_encodes_each_query_text_once() {
    let (_db, server, _home, model) = setup_with_model(true).await;
    let alice = new_user(&Client::new(&server, None), "alice").await;
    let r = alice
        .post(
            "/v1/conversations",
            json!({"title": "foxes", "collection": "animals"}),
        )
        .await;
    let conversation = r.body["conversation"]["id"].as_str().unwrap().to_string();
    // Made up: one statement the question is about, one it is not.
    for text in ["I keep chickens in my garden.", "I play the cello."] {
        let r = alice
            .post(
                &format!("/v1/conversations/{conversation}/ptkb"),
                json!({"text": text}),
            )
            .await;
        assert_eq!(r.status, 201, "{:?}", r.body);
    }
    let mut utterances: Vec<String> = Vec::new();
    let mut previous_response: Option<String> = None;
    for utterance in [
        "Do red foxes eat chickens?",
        "And what else do they hunt at dusk?",
    ] {
        let before = model.stats();
        let r = alice
            .post(
                &format!("/v1/conversations/{conversation}/turns"),
                json!({"utterance": utterance, "retrieval": "hybrid", "rerank": true,
                    "passages": 6, "generator": "extractive"}),
            )
            .await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        let after = model.stats();
        let turn = &r.body["turn"];
        assert_eq!(turn["diagnostics"]["retrieval"], "hybrid", "{turn}");
        // The texts the turn's stages embed: PTKB ranking (both rankers of the agreed one) the
        // utterance, the earlier utterances, the conversation so far (they and this one,
        // joined) and the previous response against every statement; retrieval the rewrite and
        // each selected statement's content words (the search query's words after the
        // rewrite's); reranking the rewrite with the statements as written appended.
        let rewrite = turn["rewritten_utterance"].as_str().unwrap().to_string();
        let ranking = turn["ptkb_ranking"].as_array().unwrap();
        let selected: Vec<String> = ranking
            .iter()
            .filter(|s| s["selected"] == true)
            .map(|s| s["text"].as_str().unwrap().to_string())
            .collect();
        let mut texts: std::collections::HashSet<String> = ranking
            .iter()
            .map(|s| s["text"].as_str().unwrap().to_string())
            .collect();
        texts.insert(utterance.to_string());
        texts.extend(utterances.iter().cloned());
        let mut conversation = utterances.clone();
        conversation.push(utterance.to_string());
        texts.insert(conversation.join(" "));
        texts.extend(previous_response.take());
        texts.insert(rewrite.clone());
        let rewrite_words = rewrite
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .count();
        let mut statement_words: Vec<(String, Vec<String>)> = Vec::new();
        for w in &turn["search_query"]["words"].as_array().unwrap()[rewrite_words..] {
            assert_eq!(w["origin"], "ptkb", "{turn}");
            let id = w["ptkb_id"].as_str().unwrap().to_string();
            let word = w["text"].as_str().unwrap().to_string();
            match statement_words.last_mut() {
                Some((last, words)) if *last == id => words.push(word),
                _ => statement_words.push((id, vec![word])),
            }
        }
        assert_eq!(statement_words.len(), selected.len(), "{turn}");
        texts.extend(statement_words.into_iter().map(|(_, w)| w.join(" ")));
        let mut rerank_query = rewrite;
        for s in &selected {
            rerank_query.push(' ');
            rerank_query.push_str(s);
        }
        texts.insert(rerank_query);
        // A reader's answer weighs its candidate sentences' meaning against the reranker's
        // query vector: each distinct sentence not cached by an earlier turn is encoded once,
        // and nothing else.
        let weighed = turn["diagnostics"]["weighed_by_meaning"].as_u64();
        let sentences = turn["diagnostics"]["meaning_encoded"].as_u64();
        if convrag::pipeline::generate::READER_MEANING_WEIGHT > 0.0 {
            let (weighed, encoded) = (weighed.unwrap(), sentences.unwrap());
            assert!(weighed > 0, "{turn}");
            if utterances.is_empty() {
                assert_eq!(
                    encoded, weighed,
                    "nothing cached before the first turn: {turn}"
                );
            } else {
                assert!(
                    encoded < weighed,
                    "the first turn's sentences are cached: {turn}"
                );
            }
        } else {
            assert_eq!((weighed, sentences), (None, None), "{turn}");
        }
        // Each query text once; no passage encoded (their vectors are computed).
        assert_eq!(
            after.queries - before.queries,
            texts.len() as u64,
            "{texts:?}\n{turn}"
        );
        assert_eq!(
            after.sequences - before.sequences,
            texts.len() as u64 + sentences.unwrap_or(0),
            "{texts:?}\n{turn}"
        );
        utterances.push(utterance.to_string());
        previous_response = turn["response_text"].as_str().map(str::to_string);
    }
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
