//! Failures the client cannot fix: every response names its request (`X-Request-Id`), and a
//! server-side failure answers with that id only, never the database's or a driver's words.

use crate::common;

use common::{new_user, Client, TestDb};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_has_a_request_id() {
    let db = TestDb::new().await;
    let server = db.serve();
    let http = reqwest::Client::new();
    let mut seen = std::collections::HashSet::new();
    for path in ["/healthz", "/v1/conversations", "/no/such/route"] {
        let response = http.get(server.url(path)).send().await.unwrap();
        let id = response
            .headers()
            .get("x-request-id")
            .unwrap_or_else(|| panic!("{path}: no X-Request-Id"))
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(id.len(), 32, "{path}: {id}");
        assert!(seen.insert(id), "{path}: ids are per request");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_failure_shows_only_the_request_id() {
    let db = TestDb::new().await;
    let server = db.serve();
    let alice = new_user(&Client::new(&server, None), "alice").await;
    let r = alice
        .post("/v1/conversations", json!({"title": "t", "ptkb": []}))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let id = r.body["conversation"]["id"].as_str().unwrap().to_string();
    // Break this test's own database under the running server.
    sqlx::query("DROP TABLE sentence_citations, response_sentences, turn_passages, turn_ptkb_rankings, turns CASCADE")
        .execute(db.store.pool())
        .await
        .unwrap();

    let response = reqwest::Client::new()
        .get(server.url(&format!("/v1/conversations/{id}/turns")))
        .bearer_auth(alice.token.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 500);
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "internal", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert_eq!(message, format!("internal error (request id {request_id})"));
    let text = body.to_string().to_lowercase();
    for leak in [
        "relation",
        "turns\\\"",
        "does not exist",
        "sqlx",
        "database error",
    ] {
        assert!(!text.contains(leak), "{leak:?} in {body}");
    }
    server.stop().await;
}

/// A field the document limits (a length, a count) is refused with 400 naming it, whatever
/// the limit; 413 is only for a body over the size limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_violations_answer_400_and_only_oversized_bodies_413() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let over = "x".repeat(2001); // statements: maxLength 2000
    let r = alice
        .post("/v1/profile/statements", json!({"text": over}))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "text"),
        "{}",
        r.body
    );
    let r = alice.post("/v1/conversations", json!({})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let ptkb = format!(
        "/v1/conversations/{}/ptkb",
        r.body["conversation"]["id"].as_str().unwrap()
    );
    let r = alice.post(&ptkb, json!({"text": over})).await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "text"),
        "{}",
        r.body
    );
    // More statements than a conversation holds (200), in one request.
    let many: Vec<_> = (0..201).map(|i| json!({"text": format!("F{i}")})).collect();
    let r = alice.post("/v1/conversations", json!({"ptkb": many})).await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "ptkb"),
        "{}",
        r.body
    );
    // A body over the limit (64 KiB on the test server) is the one 413.
    let huge = "x".repeat(70 * 1024);
    let r = alice.post(&ptkb, json!({"text": huge})).await;
    assert_eq!(
        (r.status, r.code()),
        (413, "payload_too_large"),
        "{}",
        r.body
    );
    server.stop().await;
}
