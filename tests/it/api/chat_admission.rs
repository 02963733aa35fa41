//! What real chat traffic does to `/v1/chat/completions`: refusals before a stream opens,
//! nothing stored for a refused request, explicit sessions, bounded imports, NUL in any role,
//! citations numbered for clients, unknown OpenAI endpoints, CORS for SDK headers, and MCP's
//! refused tokens as JSON-RPC errors. Real HTTP, real PostgreSQL, the diet fixture.

use crate::common;

use common::{new_user, Client};
use serde_json::{json, Value};

use super::openai::{assistant, chat, markers, setup_with, user};

/// The user's conversations.
async fn conversations(client: &Client) -> Vec<Value> {
    let r = client.get("/v1/conversations").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["conversations"].as_array().unwrap().clone()
}

/// A streamed chat request: status, `Retry-After`, content type and body text.
async fn stream(client: &Client, messages: Vec<Value>) -> (u16, Option<String>, String, String) {
    let response = client
        .http
        .post(format!("{}/v1/chat/completions", client.base))
        .bearer_auth(client.token.as_deref().unwrap())
        .json(&json!({"model": "diet", "stream": true, "messages": messages}))
        .send()
        .await
        .unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let (status, retry, kind) = (
        response.status().as_u16(),
        header("retry-after"),
        header("content-type").unwrap_or_default(),
    );
    (status, retry, kind, response.text().await.unwrap())
}

#[tokio::test]
async fn a_refused_request_stores_nothing_and_its_refusal_comes_before_the_stream() {
    let s = setup_with(|c| c.limits.turns_per_minute = 3).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let first = chat(&alice, vec![user("What is a quick vegetarian dinner?")]).await;
    assert_eq!(first.status, 200, "{:?}", first.body);

    // Two earlier exchanges imported and a new turn: three turns, with two left this minute.
    let history = vec![
        user("Which lentils cook fast?"),
        assistant("Red lentils."),
        user("And beans?"),
        assistant("Soak them first."),
        user("What is TOAST?"),
    ];
    let (status, retry, kind, body) = stream(&alice, history.clone()).await;
    assert_eq!(status, 429, "{body}");
    assert!(kind.starts_with("application/json"), "{kind}: {body}");
    assert!(retry.unwrap().parse::<u64>().unwrap() >= 1);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], "rate_limited", "{error}");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    // Nothing of it was stored.
    assert_eq!(conversations(&alice).await.len(), 1);

    // More turns than a minute allows can never be admitted: refused as input.
    let mut long = Vec::new();
    for i in 0..4 {
        long.push(user(&format!("Question {i} about dinner?")));
        long.push(assistant("An answer."));
    }
    long.push(user("One more?"));
    let r = chat(&alice, long).await;
    assert_eq!(
        (r.status, r.body["error"]["param"].as_str()),
        (400, Some("messages")),
        "{:?}",
        r.body
    );

    // The next new chat gets a conversation of its own, titled by its own question.
    let next = chat(&alice, vec![user("How do I cook chickpeas?")]).await;
    assert_eq!(next.status, 200, "{:?}", next.body);
    assert_ne!(
        next.body["convrag"]["conversation_id"],
        first.body["convrag"]["conversation_id"]
    );
    let stored = conversations(&alice).await;
    assert_eq!(stored.len(), 2);
    let titles: Vec<&str> = stored
        .iter()
        .map(|c| c["title"].as_str().unwrap())
        .collect();
    assert!(titles.contains(&"How do I cook chickpeas?"), "{titles:?}");
}

#[tokio::test]
async fn nul_in_any_role_and_oversized_imports_are_refused_with_nothing_stored() {
    let s = setup_with(|c| c.max_body_bytes = 4 << 20).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let cases = [
        (
            vec![
                json!({"role": "system", "content": "Be brief.\u{0}"}),
                user("Hi?"),
            ],
            "messages[0].content",
        ),
        (
            vec![
                user("Lentils?"),
                assistant("Red\u{0} ones."),
                user("Beans?"),
            ],
            "messages[1].content",
        ),
        (vec![user("Lentils\u{0}?")], "messages[0].content"),
        (
            vec![
                user("Lentils?"),
                assistant(&"x".repeat(1_000_000)),
                user("Beans?"),
            ],
            "messages[1].content",
        ),
    ];
    for (messages, field) in cases {
        let r = chat(&alice, messages).await;
        assert_eq!(r.status, 400, "{field}: {:?}", r.body);
        assert_eq!(r.body["error"]["param"], field, "{:?}", r.body);
        assert_eq!(r.body["error"]["code"], "invalid_field");
    }
    // 25,001 messages: refused before anything is read into a conversation.
    let many: Vec<Value> = (0..25_001).map(|i| user(&format!("q{i}"))).collect();
    let r = chat(&alice, many).await;
    assert_eq!(
        (r.status, r.body["error"]["param"].as_str()),
        (400, Some("messages")),
        "{:?}",
        r.body
    );
    assert!(conversations(&alice).await.is_empty());
}

#[tokio::test]
async fn a_single_message_starts_its_own_conversation_and_a_history_continues_its_match() {
    let s = setup_with(|_| {}).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let q1 = "What is a quick vegetarian dinner?";
    // Ten end users of one backend asking the same first question at once: ten sessions.
    let requests = (0..10).map(|_| chat(&alice, vec![user(q1)]));
    let replies = futures_util::future::join_all(requests).await;
    let mut ids: Vec<String> = replies
        .iter()
        .map(|r| {
            assert_eq!(r.status, 200, "{:?}", r.body);
            assert_eq!(r.body["convrag"]["turn"], 1);
            r.body["convrag"]["conversation_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 10, "one conversation per request");
    assert_eq!(conversations(&alice).await.len(), 10);

    // The history of one of them continues that one (the newest with those utterances).
    let last = &replies[9].body;
    let answer = last["choices"][0]["message"]["content"].as_str().unwrap();
    let r = chat(
        &alice,
        vec![user(q1), assistant(answer), user("How much protein?")],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["convrag"]["turn"], 2);
    assert!(ids.contains(
        &r.body["convrag"]["conversation_id"]
            .as_str()
            .unwrap()
            .to_string()
    ));
    assert_eq!(conversations(&alice).await.len(), 10);
}

#[tokio::test]
async fn citations_are_numbered_from_one_with_one_annotation_per_passage_and_sources_on_request() {
    let s = setup_with(|_| {}).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let r = alice
        .post(
            "/v1/chat/completions",
            json!({"model": "diet", "convrag": {"sources": "text"},
                "messages": [user("What is a quick vegetarian dinner with lentils?")]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let message = &r.body["choices"][0]["message"];
    let content = message["content"].as_str().unwrap();
    let (answer, sources) = content.split_once("\n\nSources:").expect(content);
    let numbers = markers(answer);
    assert!(!numbers.is_empty(), "{content}");
    // In order of first use: each new number is the next one.
    let mut seen: Vec<u64> = Vec::new();
    for n in &numbers {
        if !seen.contains(n) {
            assert_eq!(*n, seen.len() as u64 + 1, "{answer}");
            seen.push(*n);
        }
    }
    let annotations = message["annotations"].as_array().unwrap();
    assert_eq!(annotations.len(), seen.len(), "one per cited passage");
    for a in annotations {
        // Every fixture passage has its web address.
        let url = a["url_citation"]["url"].as_str().unwrap();
        assert!(url.starts_with("https://example.org/"), "{a}");
    }
    let passages = r.body["convrag"]["passages"].as_array().unwrap();
    let listed: Vec<u64> = passages.iter().map(|p| p["n"].as_u64().unwrap()).collect();
    assert_eq!(listed, seen);
    for (line, n) in sources.lines().skip(1).zip(&seen) {
        assert!(line.starts_with(&format!("[{n}] ")), "{sources}");
    }
    assert_eq!(sources.lines().skip(1).count(), seen.len(), "{sources}");
    // Without the option the answer has no list.
    let plain = chat(
        &alice,
        vec![user("What is a quick vegetarian dinner with lentils?")],
    )
    .await;
    let text = plain.body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    assert!(!text.contains("Sources:"), "{text}");
}

#[tokio::test]
async fn openai_endpoints_not_served_answer_404_in_openai_shape_and_sdk_headers_pass_cors() {
    let s = setup_with(|c| c.cors_origins = vec!["http://app.example".to_string()]).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    for path in [
        "/v1/completions",
        "/v1/audio/speech",
        "/v1/images/generations",
    ] {
        let r = alice
            .post(path, json!({"model": "diet", "input": "hi"}))
            .await;
        assert_eq!(r.status, 404, "{path}: {:?}", r.body);
        assert_eq!(r.body["error"]["type"], "invalid_request_error");
        assert_eq!(r.body["error"]["code"], "route_not_found");
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("POST /v1/chat/completions")
                && message.contains("POST /v1/embeddings"),
            "{message}"
        );
    }
    // openai-node's preflight from an allowed origin asks for its own headers.
    let response = alice
        .http
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/v1/chat/completions", alice.base),
        )
        .header("Origin", "http://app.example")
        .header("Access-Control-Request-Method", "POST")
        .header(
            "Access-Control-Request-Headers",
            "authorization,content-type,x-stainless-os,x-stainless-retry-count",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let allowed = response.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(allowed.contains("x-stainless-os"), "{allowed}");
    assert_eq!(
        response.headers()["access-control-allow-origin"],
        "http://app.example"
    );
    assert!(response
        .headers()
        .get("access-control-allow-credentials")
        .is_none());
    // Another origin is still refused.
    let response = alice
        .http
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/v1/chat/completions", alice.base),
        )
        .header("Origin", "http://elsewhere.example")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .unwrap();
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
}

#[tokio::test]
async fn a_refused_mcp_token_is_a_json_rpc_error_with_401() {
    let s = setup_with(|_| {}).await;
    let anon = Client::new(&s.server, None);
    let stranger = anon.with_token("not-a-token");
    let response = stranger
        .http
        .post(format!("{}/mcp", stranger.base))
        .bearer_auth("not-a-token")
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert!(response.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Bearer"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], 7);
    assert_eq!(body["error"]["code"], -32001);
    assert_eq!(body["error"]["data"]["code"], "invalid_token");
    assert!(!body["error"]["message"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn a_passage_without_a_web_address_links_to_its_view_in_the_page() {
    let s = setup_with(|config| {
        let dir = config.home.join("notes-input");
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("notes.jsonl");
        std::fs::write(
            &input,
            concat!(
                r#"{"id": "n1", "title": "Sourdough starter", "text": "Feed a sourdough starter with equal weights of flour and water every day to keep it active."}"#,
                "\n",
                r#"{"id": "n2", "title": "Proofing", "text": "Dough proofs faster in a warm kitchen; a cold proof in the fridge overnight gives more flavour."}"#,
                "\n"
            ),
        )
        .unwrap();
        let mut options = convrag::index::IndexOptions::new("notes", convrag::collection::Format::Jsonl);
        options.inputs = vec![input];
        options.threads = 1;
        options.heap_bytes = 16 << 20;
        convrag::index::index_collection(&config.collections_dir(), &options).unwrap();
    })
    .await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let question = user("How often do I feed a sourdough starter?");
    let r = alice
        .post(
            "/v1/chat/completions",
            json!({"model": "notes", "messages": [question], "convrag": {"sources": "text"}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let conversation = r.body["convrag"]["conversation_id"].as_str().unwrap();
    let turn = r.body["convrag"]["turn_id"].as_str().unwrap();
    let page = format!("{}/#/c/{conversation}/t/{turn}/p/", alice.base);
    let annotations = r.body["choices"][0]["message"]["annotations"]
        .as_array()
        .unwrap();
    assert!(!annotations.is_empty(), "{:?}", r.body);
    let stored = alice
        .get(&format!("/v1/conversations/{conversation}/turns/{turn}"))
        .await;
    for a in annotations {
        let url = a["url_citation"]["url"].as_str().unwrap();
        let rank: i64 = url.strip_prefix(&page).expect(url).parse().unwrap();
        // The link names a passage of the turn it cites.
        let passages = stored.body["turn"]["passages"].as_array().unwrap();
        assert!(passages.iter().any(|p| p["rank"] == rank), "{url}");
    }
    // The Sources list gives the same links.
    let content = r.body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(content.contains(&page), "{content}");

    // The Responses API cites them as url_citation too (every passage has an address now).
    let r = alice
        .post(
            "/v1/responses",
            json!({"model": "notes", "input": "What does a cold proof give?"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    for a in r.body["output"][0]["content"][0]["annotations"]
        .as_array()
        .unwrap()
    {
        assert_eq!(a["type"], "url_citation", "{a}");
        assert!(
            a["url"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{}/#/c/", alice.base)),
            "{a}"
        );
    }
}
