//! Whole conversations through `POST /v1/conversations/{id}/turns`: real PostgreSQL, a real
//! index built from a fixture collection, the real default model (scripts/fetch-models.sh) and,
//! for the LLM tests, the real LLM server (`CONVRAG_TEST_LLM_URL`, started by scripts/test.sh;
//! without it those tests FAIL on purpose rather than skip silently).

use crate::common;
use crate::support::{fixture, serve_command, ServeProcess};

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::{default_model, new_user, Client, TestDb, ADMIN_TOKEN};
use convrag::api::{self, RunningServer};
use convrag::collection::Format;
use convrag::config::Config;
use convrag::index::{index_collection, IndexOptions};
use convrag::rerank::MemoryEmbeddingCache;
use convrag::web::AppState;
use serde_json::{json, Value};

/// Indexes the recipe fixture as collection `recipes` under `home`.
pub(crate) fn index_recipes(config: &Config) {
    let mut options = IndexOptions::new("recipes", Format::Jsonl);
    options.inputs = vec![fixture("jsonl/recipes.jsonl")];
    options.threads = 1;
    options.heap_bytes = 16 << 20;
    index_collection(&config.collections_dir(), &options).unwrap();
}

pub(crate) struct Setup {
    pub(crate) db: TestDb,
    pub(crate) server: RunningServer,
    _home: tempfile::TempDir,
}

pub(crate) async fn setup(with_model: bool, llm_url: Option<String>) -> Setup {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let mut config = db.config();
    config.home = home.path().to_path_buf();
    if let Some(url) = llm_url {
        config.llm.base_url = Some(url);
        config.llm.model = "smollm2-135m-instruct".into();
        config.llm.timeout_secs = 300;
    }
    index_recipes(&config);
    let mut state = AppState::new(db.store.clone(), Arc::new(config), ADMIN_TOKEN);
    if with_model {
        state = state.with_reranker(Arc::new(
            default_model().with_cache(Arc::new(MemoryEmbeddingCache::new())),
        ));
    }
    let server = api::spawn(state).unwrap();
    Setup {
        db,
        server,
        _home: home,
    }
}

pub(crate) async fn conversation(client: &Client, title: &str, ptkb: &[&str]) -> String {
    let statements: Vec<Value> = ptkb.iter().map(|t| json!({ "text": t })).collect();
    let r = client
        .post(
            "/v1/conversations",
            json!({"title": title, "collection": "recipes", "ptkb": statements}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    r.body["conversation"]["id"].as_str().unwrap().to_string()
}

pub(crate) async fn turn(client: &Client, conversation: &str, body: Value) -> Value {
    let r = client
        .post(&format!("/v1/conversations/{conversation}/turns"), body)
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    r.body["turn"].clone()
}

fn passage_ids(turn: &Value) -> Vec<String> {
    turn["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["passage_id"].as_str().unwrap().to_string())
        .collect()
}

/// A passage's `cited_spans`: within its text, sorted, not overlapping, none where no sentence
/// cites it.
fn check_cited_spans(p: &Value, cited: bool) {
    let spans = p["cited_spans"].as_array().unwrap();
    if !cited {
        assert!(spans.is_empty(), "an uncited passage has cited spans: {p}");
    }
    let chars = p["text"].as_str().unwrap().chars().count() as u64;
    let mut end = 0;
    for span in spans {
        let (s, e) = (
            span["start"].as_u64().unwrap(),
            span["end"].as_u64().unwrap(),
        );
        assert!(
            end <= s && s < e && e <= chars,
            "span {span} after {end}, text of {chars}: {p}"
        );
        end = e;
    }
}

/// Each extractive sentence standing in a passage it cites is inside one of that passage's cited
/// spans (at least one sentence does).
fn check_extractive_spans(passages: &[Value], sentences: &[Value]) {
    let mut found = 0;
    for s in sentences {
        let text = s["text"].as_str().unwrap();
        for c in s["citations"].as_array().unwrap() {
            let p = &passages[c.as_u64().unwrap() as usize - 1];
            let passage = p["text"].as_str().unwrap();
            let Some(at) = passage.find(text) else {
                continue;
            };
            let start = passage[..at].chars().count() as u64;
            let end = start + text.chars().count() as u64;
            let covered = p["cited_spans"].as_array().unwrap().iter().any(|span| {
                span["start"].as_u64().unwrap() <= start && end <= span["end"].as_u64().unwrap()
            });
            assert!(covered, "{text:?} is not in a cited span of {p}");
            found += 1;
        }
    }
    assert!(
        found > 0,
        "no extractive sentence stands in a passage it cites: {sentences:?}"
    );
}

/// What every stored turn must satisfy: citations point to this turn's passages, `used` is
/// exactly the cited set, every sentence cites, the word limit holds, stages were timed.
pub(crate) fn check_turn_invariants(turn: &Value, max_words: usize) {
    let passages = turn["passages"].as_array().unwrap();
    let n = passages.len() as u64;
    assert!(n > 0, "{turn}");
    for (i, p) in passages.iter().enumerate() {
        assert_eq!(p["rank"], i as u64 + 1);
        assert!(p["retrieval_score"].is_number());
        assert!(p["text"].as_str().unwrap().len() > 10);
    }
    let sentences = turn["sentences"].as_array().unwrap();
    assert!(!sentences.is_empty(), "{turn}");
    let mut cited = HashSet::new();
    for s in sentences {
        let citations = s["citations"].as_array().unwrap();
        assert!(!citations.is_empty(), "uncited sentence {s}");
        for c in citations {
            let rank = c.as_u64().unwrap();
            assert!((1..=n).contains(&rank), "citation {rank} outside 1..={n}");
            cited.insert(rank);
        }
    }
    for p in passages {
        let rank = p["rank"].as_u64().unwrap();
        assert_eq!(p["used"].as_bool().unwrap(), cited.contains(&rank), "{p}");
        check_cited_spans(p, cited.contains(&rank));
    }
    if turn["generator"] == "extractive" {
        check_extractive_spans(passages, sentences);
    }
    let text = turn["response_text"].as_str().unwrap();
    let words = text.split_whitespace().count();
    assert!(words <= max_words, "{words} words > {max_words}: {text}");
    let joined: Vec<&str> = sentences
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(joined.join(" "), text);
    for stage in ["ptkb", "rewrite", "retrieve", "generate", "total"] {
        assert!(turn["timings_ms"][stage].is_number(), "{stage}: {turn}");
    }
}

pub(crate) const VEGETARIAN: [&str; 3] = [
    "I am vegetarian and never cook meat.",
    "I am allergic to peanuts.",
    "My car is an old Volvo.",
];
const BEEF_LOVER: [&str; 3] = [
    "I love to cook beef steaks on the grill.",
    "I live in Texas.",
    "My car is an old Volvo.",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ptkb_and_history_change_rewrites_and_passages() {
    let s = setup(true, None).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;
    let veg = conversation(&alice, "veg", &VEGETARIAN).await;
    let beef = conversation(&alice, "beef", &BEEF_LOVER).await;

    let ask = json!({"utterance": "What should I cook for dinner tonight?"});
    let t_veg = turn(&alice, &veg, ask.clone()).await;
    let t_beef = turn(&alice, &beef, ask.clone()).await;
    for t in [&t_veg, &t_beef] {
        check_turn_invariants(t, 250);
        assert_eq!(t["seq"], 1);
        assert_eq!(t["generator"], "extractive");
        assert!(t["timings_ms"]["rerank"].is_number());
        assert!(t["passages"][0]["rerank_score"].is_number());
        let ranking = t["ptkb_ranking"].as_array().unwrap();
        assert_eq!(ranking.len(), 3, "every statement is ranked");
        let car = ranking
            .iter()
            .find(|r| r["text"].as_str().unwrap().contains("Volvo"))
            .unwrap();
        assert_eq!(car["selected"], false, "{ranking:?}");
        assert!(ranking.iter().any(|r| r["selected"] == true), "{ranking:?}");
    }
    // The selected statements personalize the rewrite and the passages.
    assert_ne!(t_veg["rewritten_utterance"], t_beef["rewritten_utterance"]);
    assert_ne!(passage_ids(&t_veg), passage_ids(&t_beef));
    let top_veg = t_veg["passages"][0]["text"]
        .as_str()
        .unwrap()
        .to_lowercase();
    let top_beef = t_beef["passages"][0]["text"]
        .as_str()
        .unwrap()
        .to_lowercase();
    assert!(top_veg.contains("vegetarian"), "{top_veg}");
    assert!(top_beef.contains("beef"), "{top_beef}");

    // What the API answered is what was stored.
    let stored = alice
        .get(&format!(
            "/v1/conversations/{veg}/turns/{}",
            t_veg["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(stored.body["turn"], t_veg);

    // History: "it" in the second turn is resolved from the first; the same words opening a
    // conversation are rewritten differently and retrieve other passages.
    let follow = json!({"utterance": "How long does it take to prepare?"});
    let second = turn(&alice, &veg, follow.clone()).await;
    check_turn_invariants(&second, 250);
    assert_eq!(second["seq"], 2);
    let fresh = conversation(&alice, "fresh", &VEGETARIAN).await;
    let first = turn(&alice, &fresh, follow).await;
    assert_ne!(second["rewritten_utterance"], first["rewritten_utterance"]);
    assert_ne!(
        second["rewritten_utterance"].as_str().unwrap(),
        "How long does it take to prepare?"
    );
    assert_ne!(passage_ids(&second), passage_ids(&first));
    assert_eq!(second["diagnostics"]["history_turns"], 1);
    assert_eq!(first["diagnostics"]["history_turns"], 0);

    // Editing a statement changes the next turn, not the earlier ones.
    let r = alice
        .send(
            "PUT",
            &format!("/v1/conversations/{beef}/ptkb/1"),
            Some(json!({"text": "I am vegetarian and never cook meat."})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let again = turn(&alice, &beef, ask).await;
    assert_ne!(passage_ids(&again), passage_ids(&t_beef));
    let earlier = alice
        .get(&format!(
            "/v1/conversations/{beef}/turns/{}",
            t_beef["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(earlier.body["turn"], t_beef);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn word_limits_settings_and_regeneration() {
    let s = setup(true, None).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;
    let conv = conversation(&alice, "veg", &VEGETARIAN).await;
    let t1 = turn(
        &alice,
        &conv,
        json!({"utterance": "Which vegetarian dishes can I cook in under forty minutes?",
               "max_words": 30, "passages": 5}),
    )
    .await;
    check_turn_invariants(&t1, 30);
    assert_eq!(t1["passages"].as_array().unwrap().len(), 5);
    assert_eq!(t1["settings"]["limit"]["max_words"], 30);

    // A manual rewrite replaces the automatic one.
    let manual = turn(
        &alice,
        &conv,
        json!({"utterance": "and with lentils?", "rewrite": "red lentil soup recipe time"}),
    )
    .await;
    assert_eq!(manual["rewritten_utterance"], "red lentil soup recipe time");
    assert_eq!(manual["diagnostics"]["rewrite_method"], "manual");
    assert_eq!(manual["passages"][0]["passage_id"], "r08");

    // Regenerate turn 1 without reranking: a new current version; the first stays readable.
    let t1b = turn(
        &alice,
        &conv,
        json!({"regenerate": t1["id"], "rerank": false, "max_words": 250}),
    )
    .await;
    check_turn_invariants(&t1b, 250);
    assert_eq!(t1b["seq"], 1);
    assert_eq!(t1b["version"], 2);
    assert_eq!(t1b["utterance"], t1["utterance"]);
    assert!(t1b["passages"][0]["rerank_score"].is_null());
    assert!(t1b["timings_ms"]["rerank"].is_null());
    let current = alice.get(&format!("/v1/conversations/{conv}/turns")).await;
    let turns = current.body["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0]["id"], t1b["id"]);
    let all = alice
        .get(&format!("/v1/conversations/{conv}/turns?all_versions=true"))
        .await;
    let all = all.body["turns"].as_array().unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0]["id"], t1["id"]);
    assert_eq!(all[0]["is_current"], false);
    assert_eq!(
        all[0]["passages"], t1["passages"],
        "the earlier version is intact"
    );
    s.server.stop().await;
}

/// Parses a `text/event-stream` body into (event, data) pairs.
pub(crate) fn parse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = String::new();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = e.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (
                event,
                serde_json::from_str(&data).expect("event data is JSON"),
            )
        })
        .collect()
}

async fn stream_turn(client: &Client, conversation: &str, body: Value) -> Vec<(String, Value)> {
    let response = client
        .http
        .post(format!(
            "{}/v1/conversations/{conversation}/turns",
            client.base
        ))
        .bearer_auth(client.token.as_deref().unwrap())
        .header("accept", "text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    parse_events(&response.text().await.unwrap())
}

/// The streamed events describe the final turn: PTKB, rewrite and passages as stored, the
/// sentences (after the last restart) equal the stored ones, and the final `turn` event is the
/// stored turn.
async fn check_stream_matches_store(
    client: &Client,
    conversation: &str,
    events: &[(String, Value)],
) {
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(&names[..3], ["ptkb", "rewrite", "passages"], "{names:?}");
    assert_eq!(*names.last().unwrap(), "turn", "{names:?}");
    let final_turn = &events.last().unwrap().1["turn"];
    let stored = client
        .get(&format!(
            "/v1/conversations/{conversation}/turns/{}",
            final_turn["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(&stored.body["turn"], final_turn);
    assert_eq!(
        events[0].1["ptkb_ranking"].as_array().unwrap().len(),
        final_turn["ptkb_ranking"].as_array().unwrap().len()
    );
    for (streamed, stored) in events[0].1["ptkb_ranking"]
        .as_array()
        .unwrap()
        .iter()
        .zip(final_turn["ptkb_ranking"].as_array().unwrap())
    {
        assert_eq!(streamed["id"], stored["id"]);
        assert_eq!(streamed["selected"], stored["selected"]);
    }
    assert_eq!(
        events[1].1["rewritten_utterance"],
        final_turn["rewritten_utterance"]
    );
    assert_eq!(events[1].1["search_query"], final_turn["search_query"]);
    assert!(
        final_turn["search_query"]["words"].is_array(),
        "{final_turn}"
    );
    let streamed_ids: Vec<&Value> = events[2].1["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["passage_id"])
        .collect();
    let stored_ids: Vec<&Value> = final_turn["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["passage_id"])
        .collect();
    assert_eq!(streamed_ids, stored_ids);
    let last_restart = names.iter().rposition(|n| *n == "restart");
    let sentences: Vec<Value> = events
        .iter()
        .enumerate()
        .filter(|(i, (e, _))| e == "sentence" && last_restart.is_none_or(|r| *i > r))
        .map(|(_, (_, d))| json!({"text": d["text"], "citations": d["citations"]}))
        .collect();
    assert_eq!(&Value::Array(sentences), &final_turn["sentences"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_delivers_the_same_turn_as_json() {
    let s = setup(true, None).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;
    let conv = conversation(&alice, "veg", &VEGETARIAN).await;
    let events = stream_turn(
        &alice,
        &conv,
        json!({"utterance": "What should I cook for dinner tonight?"}),
    )
    .await;
    check_stream_matches_store(&alice, &conv, &events).await;
    let streamed = events.last().unwrap().1["turn"].clone();
    check_turn_invariants(&streamed, 250);

    // The same request as JSON (a regeneration with the same settings) gives the same turn:
    // extractive generation and the pipeline are deterministic.
    let json_turn = turn(&alice, &conv, json!({"regenerate": streamed["id"]})).await;
    for field in [
        "rewritten_utterance",
        "response_text",
        "sentences",
        "passages",
        "ptkb_ranking",
        "generator",
        "settings",
    ] {
        assert_eq!(json_turn[field], streamed[field], "{field}");
    }
    assert_eq!(json_turn["version"], 2);

    // Errors found before the stream starts are ordinary JSON errors.
    let response = alice
        .http
        .post(format!("{}/v1/conversations/{conv}/turns", alice.base))
        .bearer_auth(alice.token.as_deref().unwrap())
        .header("accept", "text/event-stream")
        .json(&json!({"utterance": ""}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["field"], "utterance");
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_turn_requests_get_clear_errors_and_store_nothing() {
    let s = setup(false, None).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;
    let conv = conversation(&alice, "veg", &VEGETARIAN).await;
    let path = format!("/v1/conversations/{conv}/turns");
    let ok = json!({"utterance": "What should I cook?"});
    let cases = [
        (json!({}), 400, "utterance"),
        (json!({"utterance": "   "}), 400, "utterance"),
        (json!({"utterance": 3}), 400, "utterance"),
        (json!({"utterance": "x", "colour": "red"}), 400, "colour"),
        (
            json!({"utterance": "x", "generator": "llm"}),
            400,
            "generator",
        ),
        (
            json!({"utterance": "x", "generator": "gpt"}),
            400,
            "generator",
        ),
        (
            json!({"utterance": "x", "rewriter": "llm"}),
            400,
            "rewriter",
        ),
        (json!({"utterance": "x", "rewriter": "t5"}), 400, "rewriter"),
        (json!({"utterance": "x", "rerank": true}), 503, "rerank"),
        (json!({"utterance": "x", "passages": 0}), 400, "passages"),
        (
            json!({"utterance": "x", "rerank_depth": 5000}),
            400,
            "rerank_depth",
        ),
        (json!({"utterance": "x", "max_words": 0}), 400, "max_words"),
        (json!({"utterance": "x", "rewrite": ""}), 400, "rewrite"),
        (json!({"regenerate": "not-a-uuid"}), 400, "regenerate"),
        (
            json!({"regenerate": "00000000-0000-0000-0000-000000000000"}),
            409,
            "regenerate",
        ),
    ];
    for (body, status, field) in cases {
        let r = alice.post(&path, body.clone()).await;
        assert_eq!(r.status, status, "{body} -> {:?}", r.body);
        assert_eq!(r.field(), field, "{body} -> {:?}", r.body);
    }
    assert_eq!(anon.post(&path, ok.clone()).await.status, 401);
    let r = bob.post(&path, ok.clone()).await;
    assert_eq!(r.status, 404, "another user's conversation is not found");

    // A conversation without a collection, and one whose collection is not indexed.
    let r = alice
        .post("/v1/conversations", json!({"title": "none"}))
        .await;
    let none = r.body["conversation"]["id"].as_str().unwrap().to_string();
    let r = alice
        .post(&format!("/v1/conversations/{none}/turns"), ok.clone())
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (409, "conflict", "collection"),
        "{:?}",
        r.body
    );
    // A collection that does not exist cannot be named (like another user's private one).
    let r = alice
        .post(
            "/v1/conversations",
            json!({"title": "missing", "collection": "nowhere"}),
        )
        .await;
    assert_eq!((r.status, r.field()), (404, "collection"), "{:?}", r.body);

    // Nothing was stored by the failures; a good request still works (BM25 only here).
    let r = alice.get(&path).await;
    assert_eq!(r.body["turns"].as_array().unwrap().len(), 0);
    let t = turn(&alice, &conv, ok).await;
    check_turn_invariants(&t, 250);
    assert!(t["passages"][0]["rerank_score"].is_null());
    assert_eq!(t["seq"], 1);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_turns_of_one_conversation_are_serialized() {
    let s = setup(false, None).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;
    let conv = conversation(&alice, "veg", &VEGETARIAN).await;
    let utterances = [
        "What should I cook for dinner tonight?",
        "Is lentil soup quick to make?",
        "What about falafel?",
        "Which dishes are safe with my allergy?",
    ];
    let alice = Arc::new(alice);
    let tasks: Vec<_> = utterances
        .iter()
        .map(|u| {
            let (alice, conv) = (Arc::clone(&alice), conv.clone());
            let u = u.to_string();
            tokio::spawn(async move { turn(&alice, &conv, json!({ "utterance": u })).await })
        })
        .collect();
    let mut seqs = Vec::new();
    for t in tasks {
        let t = t.await.unwrap();
        // Each turn saw every turn stored before it: none ran on a stale history.
        assert_eq!(
            t["diagnostics"]["history_turns"].as_i64().unwrap(),
            t["seq"].as_i64().unwrap() - 1,
            "{t}"
        );
        seqs.push(t["seq"].as_i64().unwrap());
    }
    seqs.sort_unstable();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    s.server.stop().await;
}

// ---- the real LLM ----

fn llm_url() -> String {
    std::env::var("CONVRAG_TEST_LLM_URL").expect(
        "CONVRAG_TEST_LLM_URL is not set: start the LLM with scripts/llm-server.sh start \
         (scripts/test.sh does)",
    )
}

/// A chat client's sampling parameters reach the LLM that writes a collection's answer: they are
/// stored with the turn's settings, and the model's reply ends at the client's stop sequence (a
/// space: one word), which the server's own settings never ask for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_sampling_parameters_reach_the_llm() {
    let s = setup(true, Some(llm_url())).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;
    let r = alice
        .post(
            "/v1/chat/completions",
            json!({"model": "recipes",
                "messages": [{"role": "user", "content": "How long does lentil soup take to cook?"}],
                "temperature": 0.25, "top_p": 0.5, "max_tokens": 200, "stop": [" "]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let conversation = r.body["convrag"]["conversation_id"].as_str().unwrap();
    let turns = alice
        .get(&format!("/v1/conversations/{conversation}/turns"))
        .await;
    assert_eq!(turns.status, 200, "{:?}", turns.body);
    let t = &turns.body["turns"][0];
    let sampling = &t["settings"]["sampling"];
    assert_eq!(
        *sampling,
        json!({"temperature": 0.25, "top_p": 0.5, "max_tokens": 200, "stop": [" "]}),
        "{t}"
    );
    let llm = &t["diagnostics"]["llm"];
    assert_eq!(llm["model"], "smollm2-135m-instruct", "{t}");
    let raw = llm["raw_output"].as_str().unwrap();
    assert!(!raw.trim().is_empty(), "{t}");
    assert!(
        !raw.trim().contains(' '),
        "the reply stops at the first space: {raw:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_turns_stream_and_keep_citations_valid() {
    let s = setup(true, Some(llm_url())).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;
    let conv = conversation(&alice, "veg", &VEGETARIAN).await;
    // Short answers keep the tiny model quick on a busy machine.
    let t = turn(
        &alice,
        &conv,
        json!({"utterance": "How long does lentil soup take to cook?", "max_words": 60, "passages": 3}),
    )
    .await;
    check_turn_invariants(&t, 60);
    let llm = &t["diagnostics"]["llm"];
    assert_eq!(llm["model"], "smollm2-135m-instruct", "{t}");
    // The model's answer is used (temperature 0, seed 42: the same reply every run), every
    // sentence citing one of the 3 passages shown (check_turn_invariants).
    assert_eq!(t["generator"], "llm:smollm2-135m-instruct", "{t}");
    assert!(t["diagnostics"]["fallback"].is_null(), "{t}");
    assert!(t["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["citations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| (1..=3).contains(&c.as_u64().unwrap()))));

    let events = stream_turn(
        &alice,
        &conv,
        json!({"utterance": "Is it vegetarian?", "max_words": 60, "passages": 3}),
    )
    .await;
    check_stream_matches_store(&alice, &conv, &events).await;
    check_turn_invariants(&events.last().unwrap().1["turn"], 60);

    // The LLM rewriter: the model is asked with the history. SmolLM2-135M answers the question
    // instead of rewriting it, so the guard refuses the reply and the history-aware rewrite
    // stands in, saying why. Which refusal depends on the tiny model's reply (a function of the
    // request on one CPU, scripts/llm_server.py; other CPUs may round differently): an answer
    // dropping some of the utterance's content words, or the transcript continued
    // ("Assistant: …"); both are refusals.
    // (`rewrite_llm::tests::a_faithful_rewrite_passes` covers a reply the guard accepts.)
    let t = turn(
        &alice,
        &conv,
        json!({"utterance": "How much salt goes into it?", "rewriter": "llm",
            "generator": "extractive", "passages": 3}),
    )
    .await;
    check_turn_invariants(&t, 250);
    assert_eq!(t["settings"]["rewriter"], "llm", "{t}");
    let raw = t["diagnostics"]["rewrite_llm_output"].as_str();
    assert!(raw.is_some(), "the model answered: {t}");
    let rewrite = t["rewritten_utterance"].as_str().unwrap();
    assert!(!rewrite.trim().is_empty() && !rewrite.contains('\n'), "{t}");
    assert_eq!(t["diagnostics"]["rewrite_method"], "history", "{t}");
    let fallback = &t["diagnostics"]["rewrite_fallback"];
    let reason = fallback["reason"].as_str().unwrap();
    match fallback["kind"].as_str() {
        Some("dropped_content") => {
            // "keeps N of the utterance's 2 content words": fewer than the guard's share.
            let kept = reason
                .strip_prefix("the model's reply keeps ")
                .and_then(|r| r.split_once(" of the utterance's 2 content words"))
                .and_then(|(n, _)| n.parse::<usize>().ok());
            assert!(kept.is_some_and(|n| n < 2), "{t}");
        }
        Some("unusable_output") => assert!(
            reason.starts_with("the model continued the conversation"),
            "{t}"
        ),
        _ => panic!("the reply is refused as an answer: {t}"),
    }
    assert!(
        rewrite.contains("lentil soup"),
        "the history filled in: {t}"
    );
    // A supplied rewrite wins over the LLM rewriter, and the model is not asked.
    let t = turn(
        &alice,
        &conv,
        json!({"utterance": "And pepper?", "rewriter": "llm", "generator": "extractive",
            "rewrite": "How much pepper goes into lentil soup?", "passages": 3}),
    )
    .await;
    assert_eq!(t["diagnostics"]["rewrite_method"], "manual", "{t}");
    assert_eq!(
        t["rewritten_utterance"],
        "How much pepper goes into lentil soup?"
    );
    assert!(t["diagnostics"]["rewrite_llm_output"].is_null(), "{t}");
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_down_falls_back_to_extractive_and_says_so() {
    // A port nothing listens on: the endpoint is down.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let s = setup(false, Some(format!("http://127.0.0.1:{port}/v1"))).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;
    let conv = conversation(&alice, "veg", &VEGETARIAN).await;
    let t = turn(
        &alice,
        &conv,
        json!({"utterance": "What should I cook for dinner tonight?"}),
    )
    .await;
    check_turn_invariants(&t, 250);
    assert_eq!(t["generator"], "extractive");
    assert_eq!(t["settings"]["generator"], "llm");
    assert_eq!(t["diagnostics"]["fallback"]["kind"], "unreachable", "{t}");
    assert!(t["diagnostics"]["fallback"]["reason"]
        .as_str()
        .unwrap()
        .contains(&port.to_string()));
    // The LLM rewriter falls back to the history-aware rewrite and says so.
    let t = turn(
        &alice,
        &conv,
        json!({"utterance": "Which of them is quickest?", "rewriter": "llm"}),
    )
    .await;
    check_turn_invariants(&t, 250);
    assert_eq!(t["diagnostics"]["rewrite_method"], "history", "{t}");
    assert_eq!(
        t["diagnostics"]["rewrite_fallback"]["kind"], "llm_error",
        "{t}"
    );
    assert!(t["rewritten_utterance"]
        .as_str()
        .unwrap()
        .starts_with("Which of"));
    s.server.stop().await;
}

// ---- a crash between stages ----

/// A real TCP peer that accepts the LLM request and never answers: the turn is stuck in its
/// generation stage (after PTKB, rewrite, retrieval and reranking ran) when the server dies.
pub(crate) struct SilentLlm {
    pub(crate) port: u16,
    pub(crate) connected: tokio::sync::mpsc::UnboundedReceiver<()>,
}

pub(crate) async fn silent_llm() -> SilentLlm {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, connected) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            use tokio::io::AsyncReadExt;
            let mut buf = vec![0u8; 65536];
            // Wait for the request to arrive, then hold the socket open without answering.
            let _ = socket.read(&mut buf).await;
            let _ = tx.send(());
            held.push(socket);
        }
    });
    SilentLlm { port, connected }
}

pub(crate) fn spawn_serve(config: &Config, llm_port: u16) -> ServeProcess {
    ServeProcess::start(
        serve_command()
            .env("CONVRAG_HOME", &config.home)
            .env("DATABASE_URL", config.database_url.as_deref().unwrap())
            .env("CONVRAG_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("CONVRAG_BIND", "127.0.0.1:0")
            .env(
                "CONVRAG_LLM_BASE_URL",
                format!("http://127.0.0.1:{llm_port}/v1"),
            )
            .env("CONVRAG_LLM_MODEL", "silent")
            .env("CONVRAG_LLM_TIMEOUT_SECS", "600")
            // The killed server's lease on the conversation expires soon, so the next turn runs.
            .env("CONVRAG_TURN_LEASE_SECS", "3")
            .stderr(std::process::Stdio::inherit()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_stages_leaves_no_partial_turn() {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let mut config = db.config();
    config.home = home.path().to_path_buf();
    index_recipes(&config);
    let mut llm = silent_llm().await;

    let mut server = spawn_serve(&config, llm.port);
    let url = server.url.clone();
    let http = reqwest::Client::new();
    let token: Value = http
        .post(format!("{url}/v1/users"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "alice"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = token["token"].as_str().unwrap().to_string();
    let r: Value = http
        .post(format!("{url}/v1/conversations"))
        .bearer_auth(&token)
        .json(&json!({"title": "veg", "collection": "recipes", "ptkb": [{"text": VEGETARIAN[0]}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let conv = r["conversation"]["id"].as_str().unwrap().to_string();

    let pending = {
        let (http, url, token, conv) = (http.clone(), url.clone(), token.clone(), conv.clone());
        tokio::spawn(async move {
            http.post(format!("{url}/v1/conversations/{conv}/turns"))
                .bearer_auth(&token)
                .json(&json!({"utterance": "What should I cook for dinner tonight?", "generator": "llm"}))
                .send()
                .await
        })
    };
    // The generation stage has started: the earlier stages are done, the turn is not stored.
    tokio::time::timeout(Duration::from_secs(120), llm.connected.recv())
        .await
        .expect("the turn reached its generation stage")
        .unwrap();
    server.kill();
    assert!(
        pending.await.unwrap().is_err(),
        "the request died with the server"
    );

    let mut server = spawn_serve(&config, llm.port);
    let url = server.url.clone();
    let turns: Value = http
        .get(format!(
            "{url}/v1/conversations/{conv}/turns?all_versions=true"
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(turns["turns"], json!([]), "no partial turn");
    let ptkb: Value = http
        .get(format!("{url}/v1/conversations/{conv}/ptkb"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        ptkb["statements"][0]["text"], VEGETARIAN[0],
        "nothing stored is lost"
    );
    // The conversation is not left locked: the next turn runs and takes position 1.
    let r = http
        .post(format!("{url}/v1/conversations/{conv}/turns"))
        .bearer_auth(&token)
        .json(&json!({"utterance": "What should I cook for dinner tonight?", "generator": "extractive"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let t: Value = r.json().await.unwrap();
    assert_eq!(t["turn"]["seq"], 1);
    server.kill();
}

/// A search with `rerank=true` and a turn whose rewrite is the same query (manual rewrite, no
/// statements to select, same depth) rank the same candidates identically: one retrieval,
/// reranking and fusion code path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_and_turn_rank_alike() {
    let s = setup(true, None).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;
    let conv = conversation(&alice, "plain", &[]).await;
    let query = "quick vegetarian dinner with beans";
    let t = turn(
        &alice,
        &conv,
        json!({"utterance": "What could I make tonight?", "rewrite": query,
               "rerank": true, "rerank_depth": 20, "passages": 8}),
    )
    .await;
    assert_eq!(t["rewritten_utterance"], query);
    assert!(t["passages"][0]["rerank_score"].is_number(), "{t}");
    let r = alice
        .get("/v1/collections/recipes/search?q=quick%20vegetarian%20dinner%20with%20beans&k=8&rerank=true&depth=20")
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // Scores are f32 in the pipeline (stored as f64): compare them as computed.
    let searched: Vec<(String, f32)> = r.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["id"].as_str().unwrap().to_string(),
                h["score"].as_f64().unwrap() as f32,
            )
        })
        .collect();
    let turned: Vec<(String, f32)> = t["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["passage_id"].as_str().unwrap().to_string(),
                p["score"].as_f64().unwrap() as f32,
            )
        })
        .collect();
    assert_eq!(searched.len(), 8, "{searched:?}");
    assert_eq!(searched, turned);
    // The scores are the fused ones, not the model's alone.
    let neural: Vec<f32> = r.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["rerank_score"].as_f64().unwrap() as f32)
        .collect();
    assert_ne!(neural, searched.iter().map(|(_, s)| *s).collect::<Vec<_>>());
    s.server.stop().await;
}
