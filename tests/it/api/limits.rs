//! Configured limits over HTTP, OpenAI chat and MCP: statements per conversation and in a profile,
//! conversations per user, utterance and statement lengths (400/429 naming the field), per-user
//! rates of turns and searches (429 with Retry-After), and a large PTKB inserted in linear time.

use crate::common;

use std::sync::Arc;

use common::{new_user, with_retry_after, Client, TestDb, ADMIN_TOKEN};
use convrag::api::{self, RunningServer};
use convrag::collection::Format;
use convrag::config::Limits;
use convrag::index::{index_collection, IndexOptions};
use convrag::web::AppState;
use serde_json::{json, Value};

const PASSAGES: &str = r#"{"id": "p1", "title": "Soup", "text": "Lentil soup cooks in thirty minutes and needs no meat."}
{"id": "p2", "title": "Bread", "text": "Sourdough bread rises slowly because wild yeast ferments the dough."}
"#;

/// A server with `limits` and a small collection "demo" (extractive answers, no model).
async fn serve_with(limits: Limits) -> (TestDb, RunningServer, tempfile::TempDir) {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let mut config = db.config();
    config.home = home.path().to_path_buf();
    config.limits = limits;
    let input = home.path().join("passages.jsonl");
    std::fs::write(&input, PASSAGES).unwrap();
    let mut options = IndexOptions::new("demo", Format::Jsonl);
    options.inputs = vec![input];
    options.threads = 1;
    options.heap_bytes = 16 << 20;
    index_collection(&config.collections_dir(), &options).unwrap();
    let server = api::spawn(AppState::new(
        db.store.clone(),
        Arc::new(config),
        ADMIN_TOKEN,
    ))
    .unwrap();
    (db, server, home)
}

fn statements(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"text": format!("Fact number {i}.")}))
            .collect(),
    )
}

async fn mcp(client: &Client, tool: &str, arguments: Value) -> Value {
    let r = client
        .post(
            "/mcp",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_counts_and_lengths_are_limited_everywhere() {
    let (_db, server, _home) = serve_with(Limits {
        statements_per_conversation: 5,
        statement_chars: 40,
        ..Limits::default()
    })
    .await;
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;

    // Too many in one request: 400; as many as allowed: created.
    let r = alice
        .post("/v1/conversations", json!({"ptkb": statements(6)}))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "ptkb"),
        "{}",
        r.body
    );
    assert_eq!(
        alice.get("/v1/conversations").await.body["conversations"],
        json!([])
    );
    let r = alice
        .post("/v1/conversations", json!({"ptkb": statements(5)}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let conv = r.body["conversation"]["id"].as_str().unwrap().to_string();
    let ptkb = format!("/v1/conversations/{conv}/ptkb");

    // Full: adding is refused (HTTP and MCP), editing is not; after a removal it fits again.
    let r = alice.post(&ptkb, json!({"text": "One more."})).await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (429, "quota_exceeded", "ptkb"),
        "{}",
        r.body
    );
    assert_eq!(
        r.body["error"]["message"],
        "the conversation holds 5 statements; with 1 more it would hold 6, and it holds at most 5 \
         (remove some first)"
    );
    let result = mcp(
        &alice,
        "add_ptkb",
        json!({"conversation_id": conv, "text": "One more."}),
    )
    .await;
    assert_eq!(result["isError"], true);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("quota_exceeded: ptkb"),
        "{result}"
    );
    let r = alice
        .send(
            "PUT",
            &format!("{ptkb}/1"),
            Some(json!({"text": "Changed."})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        alice
            .send("DELETE", &format!("{ptkb}/2"), None)
            .await
            .status,
        204
    );
    let r = alice.post(&ptkb, json!({"text": "One more."})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["statement"]["id"], "6", "ids are never reused");
    assert_eq!(
        alice.get(&ptkb).await.body["statements"]
            .as_array()
            .unwrap()
            .len(),
        5
    );

    // Lengths: 400 naming the field, on create, add, edit and the profile.
    let long = "x".repeat(41);
    let r = alice
        .post("/v1/conversations", json!({"ptkb": [{"text": long}]}))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "ptkb"),
        "{}",
        r.body
    );
    let r = alice
        .send("PUT", &format!("{ptkb}/1"), Some(json!({"text": long})))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "text"),
        "{}",
        r.body
    );
    let r = alice
        .post("/v1/profile/statements", json!({"text": long}))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "text"),
        "{}",
        r.body
    );
    let result = mcp(&alice, "add_profile", json!({"text": long})).await;
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("invalid_field: text"),
        "{result}"
    );

    // The profile holds as many statements as a conversation; a new conversation takes it, so
    // the profile plus the given statements must fit too.
    for i in 0..5 {
        let r = alice
            .post(
                "/v1/profile/statements",
                json!({"text": format!("I like {i}.")}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let r = alice
        .post("/v1/profile/statements", json!({"text": "I like six."}))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (429, "quota_exceeded", "text"),
        "{}",
        r.body
    );
    assert_eq!(
        r.body["error"]["message"],
        "your profile holds 5 statements, the most it may hold (remove some first)"
    );
    // The counts are the conversation's: the given statements and the profile's together.
    let r = alice
        .post("/v1/conversations", json!({"ptkb": statements(1)}))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (429, "quota_exceeded", "ptkb"),
        "{}",
        r.body
    );
    assert_eq!(
        r.body["error"]["message"],
        "the conversation would start with 6 statements (1 given, 5 from your profile); it holds \
         at most 5 (give fewer, or remove profile statements)"
    );
    let r = alice.post("/v1/conversations", json!({})).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["conversation"]["ptkb_count"], 5);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_per_user_and_utterance_length_are_limited() {
    let (_db, server, _home) = serve_with(Limits {
        conversations_per_user: 2,
        utterance_chars: 30,
        ..Limits::default()
    })
    .await;
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;
    let r = alice
        .post("/v1/conversations", json!({"collection": "demo"}))
        .await;
    let conv = r.body["conversation"]["id"].as_str().unwrap().to_string();
    let turns = format!("/v1/conversations/{conv}/turns");

    // Longer than configured, or than the document's maxLength (10000): 400 naming the field.
    for chars in [31, 10_001] {
        let r = alice
            .post(&turns, json!({"utterance": "x".repeat(chars)}))
            .await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (400, "invalid_field", "utterance"),
            "{}",
            r.body
        );
    }
    let r = alice
        .post(
            &turns,
            json!({"utterance": "How long does lentil soup cook"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        alice.get(&turns).await.body["turns"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // OpenAI chat: a user message is an utterance, named as the request holds it.
    let r = alice
        .post(
            "/v1/chat/completions",
            json!({"model": "demo", "messages": [{"role": "user", "content": "y".repeat(31)}]}),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"]["param"].as_str()),
        (400, Some("messages[0].content")),
        "{}",
        r.body
    );

    // The second conversation is the last one allowed, whichever way it is created.
    assert_eq!(alice.post("/v1/conversations", json!({})).await.status, 201);
    let r = alice.post("/v1/conversations", json!({})).await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (429, "quota_exceeded", "conversations"),
        "{}",
        r.body
    );
    let r = alice
        .post(
            "/v1/chat/completions",
            json!({"model": "demo", "messages": [{"role": "user", "content": "Soup?"}]}),
        )
        .await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "quota_exceeded");
    let result = mcp(
        &alice,
        "ask",
        json!({"collection": "demo", "question": "Soup?"}),
    )
    .await;
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("quota_exceeded: conversations"),
        "{result}"
    );
    assert_eq!(
        alice.get("/v1/conversations").await.body["conversations"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        bob.post("/v1/conversations", json!({})).await.status,
        201,
        "per user"
    );
    // Deleting one makes room.
    assert_eq!(
        alice
            .send("DELETE", &format!("/v1/conversations/{conv}"), None)
            .await
            .status,
        204
    );
    assert_eq!(alice.post("/v1/conversations", json!({})).await.status, 201);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_and_searches_per_minute_are_limited_per_user() {
    let (_db, server, _home) = serve_with(Limits {
        turns_per_minute: 2,
        searches_per_minute: 3,
        ..Limits::default()
    })
    .await;
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;

    let search = "/v1/collections/demo/search?q=soup";
    for _ in 0..3 {
        assert_eq!(alice.get(search).await.status, 200);
    }
    let (status, retry_after, body) =
        with_retry_after(&alice, reqwest::Method::GET, search, None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (429, Some("rate_limited")),
        "{body}"
    );
    assert_eq!(body["error"]["field"], "searches");
    // One search every 20 s at 3 per minute.
    assert!(matches!(retry_after, Some(1..=20)), "{retry_after:?}");
    let result = mcp(
        &alice,
        "search",
        json!({"collection": "demo", "query": "soup"}),
    )
    .await;
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("rate_limited: searches"),
        "{result}"
    );
    assert_eq!(
        bob.get(search).await.status,
        200,
        "another user has their own allowance"
    );

    let r = alice
        .post("/v1/conversations", json!({"collection": "demo"}))
        .await;
    let turns = format!(
        "/v1/conversations/{}/turns",
        r.body["conversation"]["id"].as_str().unwrap()
    );
    assert_eq!(
        alice
            .post(&turns, json!({"utterance": "Soup?"}))
            .await
            .status,
        201
    );
    let r = alice
        .post(
            "/v1/chat/completions",
            json!({"model": "demo", "messages": [{"role": "user", "content": "Bread?"}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (status, retry_after, body) = with_retry_after(
        &alice,
        reqwest::Method::POST,
        &turns,
        Some(json!({"utterance": "More?"})),
    )
    .await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (429, Some("turns")),
        "{body}"
    );
    assert!(matches!(retry_after, Some(1..=30)), "{retry_after:?}");
    assert_eq!(
        alice.get(&turns).await.body["turns"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "nothing stored"
    );
    let r = alice
        .post(
            "/v1/chat/completions",
            json!({"model": "demo", "messages": [{"role": "user", "content": "Rye?"}]}),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (429, Some("rate_limited")),
        "{}",
        r.body
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_ptkb_is_stored_whole_in_order_with_fresh_ids() {
    let (db, server, _home) = serve_with(Limits {
        statements_per_conversation: 100_000,
        ..Limits::default()
    })
    .await;
    // The body limit of the test server is 64 KiB; the store is what a 1 MiB body would reach.
    let user = db.store.create_user("alice").await.unwrap().0;
    let store = db.store.clone().with_limits(Limits {
        statements_per_conversation: 100_000,
        ..Limits::default()
    });
    let mut ptkb: Vec<convrag::store::NewStatement> = (0..20_000)
        .map(|i| convrag::store::NewStatement {
            id: None,
            text: format!("Statement {i}."),
        })
        .collect();
    // An explicit numeric id in the middle moves the numbering on, as before.
    ptkb[10].id = Some("50000".into());
    let conv = store
        .create_conversation(
            user.id,
            convrag::store::NewConversation {
                ptkb,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(conv.ptkb_count, 20_000);
    let stored = store.ptkb(user.id, conv.id, None).await.unwrap();
    assert_eq!(stored.len(), 20_000);
    assert_eq!(stored[0].id, "1");
    assert_eq!(stored[9].id, "10");
    assert_eq!(stored[10].id, "50000");
    assert_eq!(stored[10].text, "Statement 10.");
    assert_eq!(stored[11].id, "50001");
    assert_eq!(stored[11].text, "Statement 11.");
    assert_eq!(stored.last().unwrap().id, "69989");
    let added = store
        .add_statement(
            user.id,
            conv.id,
            convrag::store::NewStatement {
                id: None,
                text: "One more.".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(added.id, "69990");
    // Ids given twice in one request are a conflict naming the field, and nothing is stored.
    let twice = vec![
        convrag::store::NewStatement {
            id: Some("a".into()),
            text: "x".into(),
        },
        convrag::store::NewStatement {
            id: Some("a".into()),
            text: "y".into(),
        },
    ];
    let err = store
        .create_conversation(
            user.id,
            convrag::store::NewConversation {
                ptkb: twice,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            convrag::store::StoreError::Conflict { field: "id", .. }
        ),
        "{err}"
    );
    assert_eq!(store.list_conversations(user.id).await.unwrap().len(), 1);
    server.stop().await;
}
