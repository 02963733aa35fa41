//! The OpenAI-compatible chat API and profile statements, over real HTTP against real
//! PostgreSQL and a real index of the diet fixture (extractive answers: no LLM needed).

use crate::common;

use std::sync::Arc;

use crate::support::fixture;
use common::{new_user, Client, TestDb, ADMIN_TOKEN};
use convrag::api::{self, RunningServer};
use convrag::collection::Format;
use convrag::index::{index_collection, IndexOptions};
use convrag::web::AppState;
use serde_json::{json, Value};

pub struct Setup {
    _db: TestDb,
    pub server: RunningServer,
    _home: tempfile::TempDir,
}

/// A server with the `diet` collection, extractive answers and no reranking model.
pub async fn setup() -> Setup {
    setup_with(|_| {}).await
}

/// As [`setup`], with the configuration changed by `change`.
pub async fn setup_with(change: impl FnOnce(&mut convrag::config::Config)) -> Setup {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let mut config = db.config();
    config.home = home.path().to_path_buf();
    change(&mut config);
    let mut options = IndexOptions::new("diet", Format::Jsonl);
    options.inputs = vec![fixture("jsonl/diet.jsonl")];
    options.threads = 1;
    options.heap_bytes = 16 << 20;
    index_collection(&config.collections_dir(), &options).unwrap();
    let state = AppState::new(db.store.clone(), Arc::new(config), ADMIN_TOKEN);
    let server = api::spawn(state).unwrap();
    Setup {
        _db: db,
        server,
        _home: home,
    }
}

pub(crate) fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

pub(crate) fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

pub(crate) async fn chat(client: &Client, messages: Vec<Value>) -> common::Reply {
    client
        .post(
            "/v1/chat/completions",
            json!({"model": "diet", "messages": messages}),
        )
        .await
}

/// A chat request with an `Idempotency-Key`; the answer's body.
async fn keyed_chat(client: &Client, messages: Vec<Value>, key: &str) -> Value {
    let r = client
        .http
        .post(format!("{}/v1/chat/completions", client.base))
        .bearer_auth(client.token.as_deref().unwrap())
        .header("Idempotency-Key", key)
        .json(&json!({"model": "diet", "messages": messages}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

async fn turn_count(client: &Client, conversation: &str) -> usize {
    let r = client
        .get(&format!("/v1/conversations/{conversation}/turns"))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["turns"].as_array().unwrap().len()
}

/// The `[n]` numbers of an answer, in order.
pub(crate) fn markers(content: &str) -> Vec<u64> {
    let re = regex::Regex::new(r"\[(\d+)\]").unwrap();
    re.captures_iter(content)
        .map(|c| c[1].parse().unwrap())
        .collect()
}

/// Every marker names a returned passage, and each marker has its `url_citation` annotation.
fn check_citations(body: &Value) {
    let message = &body["choices"][0]["message"];
    let content = message["content"].as_str().unwrap();
    let numbers = markers(content);
    assert!(!numbers.is_empty(), "no [n] markers in {content:?}");
    let passages = body["convrag"]["passages"].as_array().unwrap();
    let cited: Vec<u64> = passages.iter().map(|p| p["n"].as_u64().unwrap()).collect();
    for n in &numbers {
        assert!(
            cited.contains(n),
            "[{n}] names no returned passage ({cited:?})"
        );
    }
    for p in passages {
        assert!(numbers.contains(&p["n"].as_u64().unwrap()), "uncited {p}");
        assert!(p["text"].as_str().unwrap().len() > 20);
    }
    // One annotation per cited passage, at its first marker; numbers from 1 in order of use.
    let mut distinct: Vec<u64> = Vec::new();
    for n in &numbers {
        if !distinct.contains(n) {
            assert_eq!(*n, distinct.len() as u64 + 1, "{content}");
            distinct.push(*n);
        }
    }
    let annotations = message["annotations"].as_array().unwrap();
    assert_eq!(annotations.len(), distinct.len());
    let chars: Vec<char> = content.chars().collect();
    for a in annotations {
        assert_eq!(a["type"], "url_citation");
        let c = &a["url_citation"];
        let (start, end) = (
            c["start_index"].as_u64().unwrap() as usize,
            c["end_index"].as_u64().unwrap() as usize,
        );
        let marker: String = chars[start..end].iter().collect();
        assert!(
            marker.starts_with('[') && marker.ends_with(']'),
            "{marker:?}"
        );
        assert!(c["url"]
            .as_str()
            .unwrap()
            .starts_with("https://example.org/"));
    }
}

#[tokio::test]
async fn models_are_the_collections_and_errors_have_openai_shape() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let r = alice.get("/v1/models").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["object"], "list");
    assert_eq!(r.body["data"][0]["id"], "diet");
    assert_eq!(r.body["data"][0]["object"], "model");

    for client in [Client::new(&s.server, None), anon.with_token("not-a-token")] {
        for (method, path) in [("GET", "/v1/models"), ("POST", "/v1/chat/completions")] {
            let r = client
                .send(
                    method,
                    path,
                    (method == "POST").then(|| json!({"model": "diet", "messages": [user("hi")]})),
                )
                .await;
            assert_eq!(r.status, 401, "{path}: {:?}", r.body);
            assert_eq!(r.body["error"]["code"], "invalid_api_key", "{:?}", r.body);
            assert_eq!(r.body["error"]["type"], "invalid_request_error");
            assert!(r.body["error"]["message"].as_str().unwrap().len() > 5);
        }
    }

    let r = alice
        .post(
            "/v1/chat/completions",
            json!({"model": "nope", "messages": [user("hi")]}),
        )
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    assert_eq!(r.body["error"]["code"], "model_not_found");
    assert_eq!(r.body["error"]["param"], "model");

    let r = chat(
        &alice,
        vec![
            json!({"role": "system", "content": "be brief"}),
            assistant("hello"),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["param"], "messages");
    assert_eq!(r.body["error"]["code"], "invalid_field");

    let r = alice
        .post("/v1/chat/completions", json!({"messages": [user("hi")]}))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["param"], "model");

    let r = alice
        .raw(
            "POST",
            "/v1/chat/completions",
            "application/json",
            b"{\"model\": ".to_vec(),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["code"], "malformed_json");
    assert!(r.body["error"].get("field").is_none(), "OpenAI shape only");
    // Nothing was stored by the refused requests.
    let r = alice.get("/v1/conversations").await;
    assert_eq!(r.body["conversations"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn resent_histories_continue_the_stored_conversation() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let q1 = "What is a quick vegetarian dinner?";
    let q2 = "How much protein does it have?";

    let first = chat(&alice, vec![user(q1)]).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.body["object"], "chat.completion");
    assert_eq!(first.body["model"], "diet");
    assert_eq!(first.body["choices"][0]["finish_reason"], "stop");
    check_citations(&first.body);
    let conversation = first.body["convrag"]["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(first.body["convrag"]["turn"], 1);
    assert_eq!(turn_count(&alice, &conversation).await, 1);

    // A request with an `Idempotency-Key`, sent again: the retry is answered with the turn the
    // first stored.
    let keyed = keyed_chat(&alice, vec![user("Which lentils cook fast?")], "retry-1").await;
    let retried = keyed_chat(&alice, vec![user("Which lentils cook fast?")], "retry-1").await;
    assert_eq!(retried["convrag"]["turn_id"], keyed["convrag"]["turn_id"]);
    assert_eq!(
        retried["choices"][0]["message"]["content"],
        keyed["choices"][0]["message"]["content"]
    );
    let listed = |r: common::Reply| r.body["conversations"].as_array().unwrap().len();
    assert_eq!(listed(alice.get("/v1/conversations").await), 2);

    // A single message is a new session, even one asked before: its own conversation.
    let again = chat(&alice, vec![user(q1)]).await;
    assert_eq!(again.status, 200, "{:?}", again.body);
    let newest = again.body["convrag"]["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(newest, conversation);
    assert_eq!(again.body["convrag"]["turn"], 1);
    assert_eq!(listed(alice.get("/v1/conversations").await), 3);

    // The history that ends with the answer to its last message asks for it anew: a second
    // version of turn 1 of the newest conversation holding that history.
    let answered = again.body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    let anew = chat(&alice, vec![user(q1), assistant(answered)]).await;
    assert_eq!(anew.status, 200, "{:?}", anew.body);
    assert_eq!(anew.body["convrag"]["conversation_id"], newest.as_str());
    assert_eq!(anew.body["convrag"]["turn"], 1);
    assert_ne!(
        anew.body["convrag"]["turn_id"],
        again.body["convrag"]["turn_id"]
    );
    assert_eq!(turn_count(&alice, &newest).await, 1);
    let r = alice
        .get(&format!(
            "/v1/conversations/{newest}/turns?all_versions=true"
        ))
        .await;
    assert_eq!(r.body["turns"].as_array().unwrap().len(), 2, "{:?}", r.body);

    // The history with the answer and a follow-up: turn 2 of the same conversation.
    let answer = anew.body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    let history = vec![user(q1), assistant(answer), user(q2)];
    let second = chat(&alice, history.clone()).await;
    assert_eq!(second.status, 200, "{:?}", second.body);
    check_citations(&second.body);
    assert_eq!(second.body["convrag"]["conversation_id"], newest.as_str());
    assert_eq!(second.body["convrag"]["turn"], 2);
    assert_eq!(turn_count(&alice, &newest).await, 2);
    let resent = keyed_chat(&alice, history, "retry-2").await;
    assert_eq!(
        resent["convrag"]["turn_id"],
        second.body["convrag"]["turn_id"]
    );
    assert_eq!(turn_count(&alice, &newest).await, 2);
    assert_eq!(listed(alice.get("/v1/conversations").await), 3);

    // An explicit id continues that conversation whatever the history says.
    let r = alice
        .post(
            "/v1/chat/completions",
            json!({"model": "diet", "messages": [user("Which lentils cook fast?")],
                "metadata": {"conversation_id": conversation}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["convrag"]["conversation_id"], conversation.as_str());
    assert_eq!(r.body["convrag"]["turn"], 2);
    assert_eq!(turn_count(&alice, &conversation).await, 2);
}

#[tokio::test]
async fn another_users_conversations_are_not_found() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;
    let q1 = "What is a quick vegetarian dinner?";
    let first = chat(&alice, vec![user(q1)]).await;
    let conversation = first.body["convrag"]["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();

    let r = bob
        .post(
            "/v1/chat/completions",
            json!({"model": "diet", "messages": [user("more?")],
                "metadata": {"conversation_id": conversation}}),
        )
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    assert_eq!(r.body["error"]["param"], "conversation_id");
    let mut request = bob
        .http
        .post(format!("{}/v1/chat/completions", bob.base))
        .bearer_auth(bob.token.as_deref().unwrap())
        .header("X-Convrag-Conversation-Id", &conversation)
        .json(&json!({"model": "diet", "messages": [user("more?")]}));
    request = request.header("Accept", "application/json");
    let r = request.send().await.unwrap();
    assert_eq!(r.status(), 404);

    // Bob resending Alice's history gets a conversation of his own.
    let answer = first.body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    let r = chat(
        &bob,
        vec![user(q1), assistant(answer), user("How much protein?")],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_ne!(r.body["convrag"]["conversation_id"], conversation.as_str());
    // Alice's first exchange is imported as Bob's turn 1; his question is turn 2.
    assert_eq!(r.body["convrag"]["turn"], 2);
    assert_eq!(turn_count(&alice, &conversation).await, 1);
}

#[tokio::test]
async fn streaming_sends_chunks_then_done() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let response = alice
        .http
        .post(format!("{}/v1/chat/completions", alice.base))
        .bearer_auth(alice.token.as_deref().unwrap())
        .json(&json!({"model": "diet", "stream": true,
            "messages": [user("What is a quick vegetarian dinner?")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let conversation = response.headers()["x-convrag-conversation-id"]
        .to_str()
        .unwrap()
        .to_string();
    let text = response.text().await.unwrap();
    let data: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").expect("data events only"))
        .collect();
    assert_eq!(*data.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(chunks.len() >= 3, "role, content, final: {text}");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let mut content = String::new();
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["id"], chunks[0]["id"]);
        content.push_str(c["choices"][0]["delta"]["content"].as_str().unwrap_or(""));
    }
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["convrag"]["conversation_id"], conversation.as_str());
    assert_eq!(last["convrag"]["content"], content.as_str());
    assert!(!markers(&content).is_empty(), "{content}");
    assert_eq!(turn_count(&alice, &conversation).await, 1);
}

#[tokio::test]
async fn profile_statements_join_new_conversations() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;
    let statement = "I am vegetarian and cook dinner for my family.";
    let r = alice
        .post("/v1/profile/statements", json!({ "text": statement }))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let id = r.body["statement"]["id"].as_i64().unwrap();
    let r = alice
        .post("/v1/profile/statements", json!({ "text": "  " }))
        .await;
    assert_eq!((r.status, r.field()), (400, "text"));
    let r = alice.post("/v1/profile/statements", json!({})).await;
    assert_eq!((r.status, r.field()), (400, "text"));
    let r = alice.get("/v1/profile/statements").await;
    assert_eq!(r.body["statements"][0]["text"], statement);
    assert_eq!(
        bob.get("/v1/profile/statements").await.body["statements"],
        json!([])
    );
    // Bob cannot remove Alice's statement.
    let r = bob
        .send("DELETE", &format!("/v1/profile/statements/{id}"), None)
        .await;
    assert_eq!((r.status, r.code()), (404, "not_found"));
    let r = bob.send("DELETE", "/v1/profile/statements/abc", None).await;
    assert_eq!((r.status, r.field()), (400, "statement_id"));

    // A chat conversation and an API conversation both start with it in their PTKB.
    let r = chat(&alice, vec![user("What should I cook for dinner tonight?")]).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let chat_conversation = r.body["convrag"]["conversation_id"].as_str().unwrap();
    let r = alice
        .get(&format!("/v1/conversations/{chat_conversation}"))
        .await;
    let texts: Vec<&str> = r.body["ptkb"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, [statement]);
    let r = alice
        .post(
            "/v1/conversations",
            json!({"title": "t", "ptkb": [{"text": "I cycle to work."}]}),
        )
        .await;
    let texts: Vec<&str> = r.body["ptkb"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["I cycle to work.", statement]);
    // Bob's conversations do not get it.
    let r = bob.post("/v1/conversations", json!({"title": "t"})).await;
    assert_eq!(r.body["ptkb"], json!([]));

    let r = alice
        .send("DELETE", &format!("/v1/profile/statements/{id}"), None)
        .await;
    assert_eq!(r.status, 204);
    let r = alice.post("/v1/conversations", json!({"title": "u"})).await;
    assert_eq!(r.body["ptkb"], json!([]));
    // The conversation created earlier keeps its copy.
    let r = alice
        .get(&format!("/v1/conversations/{chat_conversation}"))
        .await;
    assert_eq!(r.body["ptkb"][0]["text"], statement);
}

#[tokio::test]
async fn extractive_usage_is_counted_by_the_rule_and_system_messages_are_instructions() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let r = chat(
        &alice,
        vec![
            json!({"role": "system", "content": "  Answer briefly.  "}),
            user("What is a quick vegetarian dinner?"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let usage = &r.body["usage"];
    // "Answer briefly ." and "What is a quick vegetarian dinner ?": 3 + 7 tokens by the rule.
    assert_eq!(usage["prompt_tokens"], 10);
    let content = r.body["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(
        usage["completion_tokens"],
        convrag::service::chat::count_tokens(content)
    );
    assert_eq!(r.body["convrag"]["usage_counted_by"], "rule");
    let id = r.body["convrag"]["conversation_id"].as_str().unwrap();
    let c = alice.get(&format!("/v1/conversations/{id}")).await;
    assert_eq!(c.body["conversation"]["instructions"], "Answer briefly.");
    // The extractive turn records no LLM call.
    let turns = alice.get(&format!("/v1/conversations/{id}/turns")).await;
    assert_eq!(turns.body["turns"][0]["generator"], "extractive");
    assert!(turns.body["turns"][0]["diagnostics"]["llm"].is_null());

    // Blank system messages are none; a resent unchanged one changes nothing.
    let r = chat(
        &alice,
        vec![
            json!({"role": "system", "content": " "}),
            user("What is a quick vegetarian dinner?"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let c = alice.get(&format!("/v1/conversations/{id}")).await;
    assert_eq!(c.body["conversation"]["instructions"], "Answer briefly.");
    let r = chat(
        &alice,
        vec![
            json!({"role": "system", "content": "x".repeat(3000)}),
            json!({"role": "developer", "content": "y".repeat(1001)}),
            user("hello"),
        ],
    )
    .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(r.body["error"]["param"], "messages[1].content");
}
