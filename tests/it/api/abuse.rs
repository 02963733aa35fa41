//! What a caller sends cannot grow the server without bound or outlast its welcome (issue 53):
//! administrator routes keep a refused token's reason, revoking a token revokes the tokens made
//! with it, qrels are bounded per text and per user and can be deleted, and request bodies have
//! a total read deadline. `scripts/abuse-test.sh` replays the same against a real process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common;

use common::{new_user, Client, TestDb, ADMIN_TOKEN};
use convrag::api::{self, RunningServer};
use convrag::config::Limits;
use convrag::web::AppState;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn serve_with(db: &TestDb, limits: Limits) -> RunningServer {
    let mut config = db.config();
    config.limits = limits;
    api::spawn(AppState::new(
        db.store.clone(),
        Arc::new(config),
        ADMIN_TOKEN,
    ))
    .unwrap()
}

/// `n` bytes of valid qrels text (lines of `q 0 dNNNNNN 1`).
fn qrels_of(n: usize) -> Vec<u8> {
    let mut text = Vec::with_capacity(n + 32);
    let mut i = 0;
    while text.len() < n {
        text.extend_from_slice(format!("q 0 d{i} 1\n").as_bytes());
        i += 1;
    }
    text.truncate(n);
    // The last line must stay whole: cut back to the last newline and pad with a comment.
    let cut = text.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    text.truncate(cut);
    text.resize(n, b' ');
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn administrator_routes_keep_the_reason_a_token_is_refused() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let admin = anon.with_token(ADMIN_TOKEN);
    let r = admin
        .post("/v1/users", json!({"name": "root", "is_admin": true}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let root_id = r.body["token_info"]["id"].as_i64().unwrap();
    let root = anon.with_token(r.body["token"].as_str().unwrap());
    let r = root
        .post("/v1/users/me/tokens", json!({"name": "spare"}))
        .await;
    let spare_id = r.body["token_info"]["id"].as_i64().unwrap();
    let spare = anon.with_token(r.body["token"].as_str().unwrap());
    let alice_id = alice.get("/v1/users/me").await.body["user"]["id"]
        .as_i64()
        .unwrap();
    let disable = format!("/v1/users/{alice_id}/disable");

    // A valid non-administrator's token is 403; a valid administrator's works.
    let r = alice.send("POST", &disable, None).await;
    assert_eq!((r.status, r.code()), (403, "admin_required"));
    assert_eq!(spare.send("POST", &disable, None).await.status, 200);

    // An unknown token is 401 invalid_token, not 403.
    let r = anon
        .with_token("cvr_unknown")
        .send("POST", &disable, None)
        .await;
    assert_eq!((r.status, r.code()), (401, "invalid_token"), "{}", r.body);

    // The administrator's token, expired: 401 token_expired.
    sqlx::query(
        "UPDATE api_tokens SET created_at = now() - interval '2 hours', \
         expires_at = now() - interval '1 hour' WHERE id = $1",
    )
    .bind(root_id)
    .execute(db.store.pool())
    .await
    .unwrap();
    let r = root.send("POST", &disable, None).await;
    assert_eq!((r.status, r.code()), (401, "token_expired"), "{}", r.body);
    let r = root.get("/metrics").await;
    assert_eq!((r.status, r.code()), (401, "token_expired"), "{}", r.body);

    // Revoked: 401 token_revoked.
    sqlx::query("UPDATE api_tokens SET revoked_at = now() WHERE id = $1")
        .bind(spare_id)
        .execute(db.store.pool())
        .await
        .unwrap();
    let r = spare.send("POST", &disable, None).await;
    assert_eq!((r.status, r.code()), (401, "token_revoked"), "{}", r.body);
    server.stop().await;
}

/// A token minted with `client`'s token: its id and a client using it.
async fn mint(client: &Client) -> (i64, Client) {
    let r = client.send("POST", "/v1/users/me/tokens", None).await;
    assert_eq!(r.status, 201, "{}", r.body);
    (
        r.body["token_info"]["id"].as_i64().unwrap(),
        client.with_token(r.body["token"].as_str().unwrap()),
    )
}

async fn put(client: &Client, name: &str, body: Vec<u8>) -> common::Reply {
    let path = format!("/v1/qrels/{name}");
    client.raw("PUT", &path, "text/plain", body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_revokes_the_tokens_made_with_it() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    // alice → parent → child → grandchild; alice → sibling.
    let (parent_id, parent) = mint(&alice).await;
    let (_, child) = mint(&parent).await;
    let (_, grandchild) = mint(&child).await;
    let (_, sibling) = mint(&alice).await;
    for client in [&parent, &child, &grandchild, &sibling] {
        assert_eq!(client.get("/v1/conversations").await.status, 200);
    }

    // Revoking the parent (with alice's own token) revokes its descendants, not its sibling
    // nor the token that made it.
    let path = format!("/v1/users/me/tokens/{parent_id}");
    assert_eq!(alice.send("DELETE", &path, None).await.status, 204);
    for client in [&parent, &child, &grandchild] {
        let r = client.get("/v1/conversations").await;
        assert_eq!((r.status, r.code()), (401, "token_revoked"), "{}", r.body);
    }
    assert_eq!(sibling.get("/v1/conversations").await.status, 200);
    assert_eq!(alice.get("/v1/conversations").await.status, 200);
    let listed = alice.get("/v1/users/me/tokens").await.body["tokens"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(listed, 2, "alice's first token and the sibling");
    // Already revoked: not found, as before.
    assert_eq!(alice.send("DELETE", &path, None).await.status, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qrels_are_bounded_per_text_and_per_user_and_can_be_deleted() {
    let db = TestDb::new().await;
    let server = serve_with(
        &db,
        Limits {
            qrels_bytes: 1000,
            qrels_per_user: 2,
            qrels_bytes_per_user: 1500,
            ..Limits::default()
        },
    );
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;

    // Larger than limits.qrels_bytes: 413 naming it.
    let r = put(&alice, "big", qrels_of(1001)).await;
    assert_eq!(
        (r.status, r.code()),
        (413, "payload_too_large"),
        "{}",
        r.body
    );
    assert_eq!(r.field(), "body");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limits.qrels_bytes"),
        "{}",
        r.body
    );
    // Without a declared length, reading stops at the first byte beyond the limit.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        qrels_of(4000).chunks(500).map(|c| Ok(c.to_vec())).collect();
    let r = alice
        .http
        .put(format!("{}/v1/qrels/chunked", alice.base))
        .bearer_auth(alice.token.as_deref().unwrap())
        .header("content-type", "text/plain")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);

    // Exactly the limit is stored, counted.
    let r = put(&alice, "a", qrels_of(1000)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body["qrels"]["judgments"].as_i64().unwrap() > 50);
    // The user's bytes: 1000 + 800 > 1500 is 429 naming limits.qrels_bytes_per_user, from the
    // declared length.
    let r = put(&alice, "b", qrels_of(800)).await;
    assert_eq!((r.status, r.code()), (429, "quota_exceeded"), "{}", r.body);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("limits.qrels_bytes_per_user"));
    // Replacing judgments does not count their old text.
    let r = put(&alice, "a", qrels_of(900)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = put(&alice, "b", qrels_of(100)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // The user's count: a third is 429 naming limits.qrels_per_user.
    let r = put(&alice, "c", qrels_of(10)).await;
    assert_eq!((r.status, r.code()), (429, "quota_exceeded"), "{}", r.body);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("limits.qrels_per_user"));
    // Other users have their own quota.
    assert_eq!(put(&bob, "a", qrels_of(900)).await.status, 200);

    // DELETE: another user's are not found; the owner's are deleted, and room is made.
    let r = bob.send("DELETE", "/v1/qrels/b", None).await;
    assert_eq!((r.status, r.code()), (404, "not_found"));
    assert_eq!(alice.send("DELETE", "/v1/qrels/a", None).await.status, 204);
    assert_eq!(alice.send("DELETE", "/v1/qrels/a", None).await.status, 404);
    let r = alice.send("DELETE", "/v1/qrels/bad%20name", None).await;
    assert_eq!((r.status, r.field()), (400, "name"));
    let names: Vec<String> = alice.get("/v1/qrels").await.body["qrels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["b"]);
    assert_eq!(put(&alice, "c", qrels_of(10)).await.status, 200);
    assert_eq!(bob.get("/v1/qrels").await.body["qrels"][0]["name"], "a");
    server.stop().await;
}

/// Sends `head` then the body a byte at a time every `every`, until the server answers;
/// returns the answer's status, its body and when it came.
async fn trickle(
    server: &RunningServer,
    head: &str,
    every: Duration,
    give_up: Duration,
) -> (u16, String, Duration) {
    let started = Instant::now();
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < give_up {
        match tokio::time::timeout(every, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                answer.extend_from_slice(&buf[..n]);
                if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                    // The head is in; give the body a moment.
                    if let Ok(Ok(n)) =
                        tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf))
                            .await
                    {
                        answer.extend_from_slice(&buf[..n]);
                    }
                    break;
                }
            }
            // Nothing yet: one more byte of the body (the server may have stopped reading).
            Err(_) => {
                if stream.write_all(b" ").await.is_err() {
                    continue;
                }
            }
        }
    }
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no answer within {give_up:?}: {text:?}"));
    (status, text, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_are_cut_at_their_deadline() {
    let db = TestDb::new().await;
    let server = serve_with(
        &db,
        Limits {
            body_read_secs: 2,
            ..Limits::default()
        },
    );
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let token = alice.token.clone().unwrap();
    let every = Duration::from_millis(300);
    let give_up = Duration::from_secs(15);

    // A JSON body sent a byte at a time, never idle for long, on a route without a token.
    let head = format!(
        "POST /v1/sign-in HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: 10000\r\n\r\n{{\"code\": \"",
        server.addr
    );
    let (status, text, took) = trickle(&server, &head, every, give_up).await;
    assert_eq!(status, 408, "{text}");
    assert!(text.contains("\"request_timeout\""), "{text}");
    assert!(text.contains("limits.body_read_secs"), "{text}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(6),
        "{took:?}"
    );

    // A qrels text, the same.
    let head = format!(
        "PUT /v1/qrels/slow HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: text/plain\r\nContent-Length: 10000\r\n\r\nq 0 d 1\n",
        server.addr
    );
    let (status, text, took) = trickle(&server, &head, every, give_up).await;
    assert_eq!(status, 408, "{text}");
    assert!(text.contains("\"request_timeout\""), "{text}");
    assert!(took < Duration::from_secs(6), "{took:?}");

    // MCP reads its body with actix's own extractor: the deadline holds there too.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n{{",
        server.addr
    );
    let (status, text, took) = trickle(&server, &head, every, give_up).await;
    assert_eq!(status, 408, "{text}");
    assert!(took < Duration::from_secs(6), "{took:?}");

    // A body in time is read as before.
    let r = alice
        .post("/v1/conversations", json!({"title": "on time"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    server.stop().await;
}
