//! Accounts over HTTP against real PostgreSQL: tokens listed, named, expiring and revoked;
//! disabled users refused everywhere; administrators among the users; deleting an account with
//! every row that refers to it.

use crate::common;

use common::{new_user, Client, TestDb, ADMIN_TOKEN};
use convrag::store::turns::{NewRankedStatement, Sentence, TurnPassage, TurnSlot};
use convrag::store::NewTurn;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_listed_named_expire_and_are_revoked() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;

    let r = alice
        .post(
            "/v1/users/me/tokens",
            json!({"name": "laptop", "expires_in_seconds": 3600}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let laptop = alice.with_token(r.body["token"].as_str().unwrap());
    let laptop_id = r.body["token_info"]["id"].as_i64().unwrap();
    assert_eq!(r.body["token_info"]["name"], "laptop");
    assert!(r.body["token_info"]["expires_at"].is_string());
    // No body at all: an unnamed token that does not expire.
    let r = alice.send("POST", "/v1/users/me/tokens", None).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body["token_info"]["expires_at"].is_null());

    assert_eq!(
        laptop.get("/v1/users/me").await.body["user"]["name"],
        "alice"
    );
    let r = alice.get("/v1/users/me/tokens").await;
    assert_eq!(r.status, 200);
    let tokens = r.body["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 3, "{}", r.body);
    assert!(
        !r.body.to_string().contains("cvr_"),
        "secrets never listed: {}",
        r.body
    );
    assert!(
        tokens
            .iter()
            .any(|t| t["id"] == laptop_id && t["name"] == "laptop"),
        "{}",
        r.body
    );
    // The token that made the request has been used.
    assert!(tokens.iter().any(|t| t["last_used_at"].is_string()));
    assert_eq!(
        bob.get("/v1/users/me/tokens").await.body["tokens"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Bad expiries name the field.
    for (body, field) in [
        (json!({"expires_in_seconds": 0}), "expires_in_seconds"),
        (
            json!({"expires_in_seconds": 400_000_000}),
            "expires_in_seconds",
        ),
        (json!({"expires_in_seconds": 1.5}), "expires_in_seconds"),
        // A lifetime is a duration; an absolute expiry is no field of the request.
        (json!({"expires_at": "2999-01-01T00:00:00Z"}), "expires_at"),
        (json!({"name": " "}), "name"),
        (json!({"scope": "all"}), "scope"),
    ] {
        let r = alice.post("/v1/users/me/tokens", body.clone()).await;
        assert_eq!((r.status, r.field()), (400, field), "{body}: {}", r.body);
    }
    let admin = anon.with_token(ADMIN_TOKEN);
    let r = admin
        .post(
            "/v1/users",
            json!({"name": "carol", "expires_in_seconds": -1}),
        )
        .await;
    assert_eq!((r.status, r.field()), (400, "expires_in_seconds"));
    assert!(
        db.store.user_by_name("carol").await.unwrap().is_none(),
        "nothing half-created"
    );
    let r = admin
        .post(
            "/v1/users",
            json!({"name": "carol", "expires_in_seconds": 600}),
        )
        .await;
    assert_eq!(r.status, 201);
    assert!(r.body["token_info"]["expires_at"].is_string());

    // Another user's token id is not found; the owner revokes it; it then says "revoked".
    let path = format!("/v1/users/me/tokens/{laptop_id}");
    let r = bob.send("DELETE", &path, None).await;
    assert_eq!((r.status, r.code()), (404, "not_found"));
    assert_eq!(
        laptop.get("/v1/users/me").await.status,
        200,
        "bob revoked nothing"
    );
    assert_eq!(alice.send("DELETE", &path, None).await.status, 204);
    let r = laptop.get("/v1/conversations").await;
    assert_eq!((r.status, r.code()), (401, "token_revoked"));
    assert_eq!(alice.send("DELETE", &path, None).await.status, 404);
    let r = alice.send("DELETE", "/v1/users/me/tokens/abc", None).await;
    assert_eq!((r.status, r.field()), (400, "token_id"));
    assert_eq!(
        alice.get("/v1/users/me/tokens").await.body["tokens"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // The body may be left out, or be JSON `null` (the document allows both): a token with
    // nothing asked.
    let r = alice
        .raw(
            "POST",
            "/v1/users/me/tokens",
            "application/json",
            b"null".to_vec(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body["token_info"]["name"].is_null(), "{}", r.body);

    // An expired token (its expiry moved into the past in the database).
    let r = alice
        .post("/v1/users/me/tokens", json!({"expires_in_seconds": 60}))
        .await;
    let short = alice.with_token(r.body["token"].as_str().unwrap());
    sqlx::query(
        "UPDATE api_tokens SET created_at = now() - interval '2 hours', \
         expires_at = now() - interval '1 hour' WHERE id = $1",
    )
    .bind(r.body["token_info"]["id"].as_i64().unwrap())
    .execute(db.store.pool())
    .await
    .unwrap();
    let r = short.get("/v1/users/me").await;
    assert_eq!((r.status, r.code()), (401, "token_expired"));
    let r = anon.with_token("cvr_unknown").get("/v1/users/me").await;
    assert_eq!((r.status, r.code()), (401, "invalid_token"));
    server.stop().await;
}

/// A token never expires later than the token that made it: without an expiry it expires with
/// that token, a later one is refused naming the field. The administrator token does not
/// expire, so what it makes need not either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_never_outlives_the_token_that_made_it() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let r = alice
        .post("/v1/users/me/tokens", json!({"expires_in_seconds": 3600}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let hour = alice.with_token(r.body["token"].as_str().unwrap());
    let limit = r.body["token_info"]["expires_at"].clone();
    assert!(limit.is_string(), "{}", r.body);

    // Nothing asked: it expires with the token that made it, and so does its own child.
    let r = hour.send("POST", "/v1/users/me/tokens", None).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["token_info"]["expires_at"], limit, "{}", r.body);
    let child = alice.with_token(r.body["token"].as_str().unwrap());
    let r = child
        .post("/v1/users/me/tokens", json!({"name": "grandchild"}))
        .await;
    assert_eq!(r.body["token_info"]["expires_at"], limit, "{}", r.body);
    // Both left null is neither (the document says one of them is absent or null).
    let r = hour
        .post("/v1/users/me/tokens", json!({"expires_in_seconds": null}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["token_info"]["expires_at"], limit, "{}", r.body);
    // Sooner is fine; later is refused with the field named.
    let r = hour
        .post("/v1/users/me/tokens", json!({"expires_in_seconds": 60}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    for (body, field) in [(json!({"expires_in_seconds": 7200}), "expires_in_seconds")] {
        let r = hour.post("/v1/users/me/tokens", body.clone()).await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (400, "invalid_field", field),
            "{body}: {}",
            r.body
        );
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("when the token making this request expires"),
            "{}",
            r.body
        );
    }

    // An administrator's expiring token: the users it creates get no longer.
    let admin = anon.with_token(ADMIN_TOKEN);
    let r = admin
        .post(
            "/v1/users",
            json!({"name": "root", "is_admin": true, "expires_in_seconds": 3600}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let root_limit = r.body["token_info"]["expires_at"].clone();
    let root = anon.with_token(r.body["token"].as_str().unwrap());
    let r = root.post("/v1/users", json!({"name": "dave"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["token_info"]["expires_at"], root_limit);
    let r = root
        .post(
            "/v1/users",
            json!({"name": "erin", "is_admin": true, "expires_in_seconds": 7200}),
        )
        .await;
    assert_eq!(
        (r.status, r.field()),
        (400, "expires_in_seconds"),
        "{}",
        r.body
    );
    assert!(db.store.user_by_name("erin").await.unwrap().is_none());
    // The administrator token itself does not expire.
    let r = admin.post("/v1/users", json!({"name": "frank"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body["token_info"]["expires_at"].is_null());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_users_are_refused_everywhere_until_enabled() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let admin = anon.with_token(ADMIN_TOKEN);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;
    let alice_id = alice.get("/v1/users/me").await.body["user"]["id"]
        .as_i64()
        .unwrap();
    assert_eq!(
        alice
            .post("/v1/conversations", json!({"title": "kept"}))
            .await
            .status,
        201
    );

    // Only administrators disable: bob cannot; an administrator user can.
    let disable = format!("/v1/users/{alice_id}/disable");
    let r = bob.post(&disable, json!({})).await;
    assert_eq!((r.status, r.code()), (403, "admin_required"));
    let r = admin
        .post("/v1/users", json!({"name": "root", "is_admin": true}))
        .await;
    assert_eq!(r.body["user"]["is_admin"], true);
    let root = anon.with_token(r.body["token"].as_str().unwrap());
    let r = root.send("POST", &disable, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body["user"]["disabled_at"].is_string());
    let r = root.send("POST", "/v1/users/999999/disable", None).await;
    assert_eq!((r.status, r.code()), (404, "not_found"));

    // Every kind of route refuses the disabled user's token with the same code.
    let conversations = alice.get("/v1/conversations").await;
    assert_eq!(
        (conversations.status, conversations.code()),
        (403, "user_disabled")
    );
    for (method, path, body) in [
        ("GET", "/v1/users/me", None),
        ("GET", "/v1/users/me/tokens", None),
        ("POST", "/v1/users/me/tokens", None),
        ("POST", "/v1/conversations", Some(json!({"title": "x"}))),
        ("GET", "/v1/profile/statements", None),
        ("GET", "/v1/collections", None),
        ("GET", "/v1/collections/any/search?q=x", None),
        ("DELETE", "/v1/users/me", None),
        (
            "POST",
            "/mcp",
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
        ),
    ] {
        let r = alice.send(method, path, body).await;
        // MCP answers with a JSON-RPC error, convrag's code in its data.
        let code = match path {
            "/mcp" => r.body["error"]["data"]["code"].as_str().unwrap_or_default(),
            _ => r.code(),
        };
        assert_eq!((r.status, code), (403, "user_disabled"), "{method} {path}");
    }
    // The OpenAI-compatible routes answer in OpenAI's shape with the same code.
    let r = alice.get("/v1/models").await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body["error"]["code"], "user_disabled");
    assert_eq!(
        bob.get("/v1/conversations").await.status,
        200,
        "others unaffected"
    );

    // Enabled again: the same token works and the data is still there.
    let r = admin
        .send("POST", &format!("/v1/users/{alice_id}/enable"), None)
        .await;
    assert_eq!(r.status, 200);
    assert!(r.body["user"]["disabled_at"].is_null());
    let r = alice.get("/v1/conversations").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["conversations"][0]["title"], "kept");
    server.stop().await;
}

/// Rows of every table whose columns refer to users, conversations or turns (by name or by
/// foreign key), counted for the given ids.
async fn referring_rows(
    db: &TestDb,
    user_id: i64,
    conversations: &[uuid::Uuid],
    turns: &[uuid::Uuid],
) -> Vec<(String, String, i64)> {
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT c.table_name::text, c.column_name::text, c.data_type::text \
         FROM information_schema.columns c JOIN information_schema.tables t \
           ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
         WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' \
           AND c.table_name <> '_sqlx_migrations' \
         ORDER BY 1, 2",
    )
    .fetch_all(db.store.pool())
    .await
    .unwrap();
    let foreign: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT kcu.table_name::text, kcu.column_name::text, ccu.table_name::text \
         FROM information_schema.table_constraints tc \
         JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = tc.constraint_name \
           AND kcu.table_schema = tc.table_schema \
         JOIN information_schema.constraint_column_usage ccu ON ccu.constraint_name = tc.constraint_name \
           AND ccu.table_schema = tc.table_schema \
         WHERE tc.constraint_type = 'FOREIGN KEY' AND tc.table_schema = 'public' \
           AND ccu.column_name = 'id'",
    )
    .fetch_all(db.store.pool())
    .await
    .unwrap();
    let mut counts = Vec::new();
    for (table, column, data_type) in &columns {
        let references = |target: &str| {
            foreign
                .iter()
                .any(|(t, c, to)| t == table && c == column && to == target)
        };
        let is_id_of = |target: &str, name: &str| {
            references(target) || (column == name) || (table == target && column == "id")
        };
        let sql = format!("SELECT count(*) FROM {table} WHERE {column} = ANY($1)");
        let query = sqlx::query_scalar::<_, i64>(&sql);
        let query = if is_id_of("users", "user_id") && data_type == "bigint" {
            query.bind(vec![user_id])
        } else if is_id_of("conversations", "conversation_id") && data_type == "uuid" {
            query.bind(conversations.to_vec())
        } else if is_id_of("turns", "turn_id") && data_type == "uuid" {
            query.bind(turns.to_vec())
        } else {
            continue;
        };
        let count = query.fetch_one(db.store.pool()).await.unwrap();
        counts.push((table.clone(), column.clone(), count));
    }
    counts
}

/// A user with data in every table: conversations with PTKB and a turn with rankings, passages,
/// sentences and citations; profile statements; a chat conversation; a batch run; two tokens.
async fn user_with_everything(
    db: &TestDb,
    client: &Client,
) -> (i64, Vec<uuid::Uuid>, Vec<uuid::Uuid>) {
    let store = &db.store;
    let user = client.get("/v1/users/me").await.body["user"].clone();
    let user_id = user["id"].as_i64().unwrap();
    assert_eq!(
        client
            .post(
                "/v1/profile/statements",
                json!({"text": "I cycle to work."})
            )
            .await
            .status,
        201
    );
    assert_eq!(
        client
            .post("/v1/users/me/tokens", json!({"name": "second"}))
            .await
            .status,
        201
    );
    let r = client
        .post(
            "/v1/conversations",
            json!({"title": "t", "ptkb": [{"text": "I am vegetarian."}]}),
        )
        .await;
    let conv = uuid::Uuid::parse_str(r.body["conversation"]["id"].as_str().unwrap()).unwrap();
    let turn = NewTurn {
        utterance: "What can I cook?".into(),
        response_text: Some("Lentil curry.".into()),
        generator: Some("extractive".into()),
        ptkb_ranking: vec![NewRankedStatement {
            statement_id: "1".into(),
            score: 0.9,
            selected: true,
        }],
        passages: vec![TurnPassage {
            rank: 1,
            passage_id: "doc1#0".into(),
            score: 1.0,
            used: true,
            ..Default::default()
        }],
        sentences: vec![Sentence {
            text: "Lentil curry.".into(),
            citations: vec![1],
        }],
        ..Default::default()
    };
    let stored = store
        .insert_turn(user_id, conv, TurnSlot::Next, turn)
        .await
        .unwrap();
    let chat = store
        .create_chat_conversation(user_id, "somewhere", "chat", None, &[])
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO batch_runs (user_id, name, task, settings, convrag_version) \
         VALUES ($1, 'run1', 'ikat', '{}', 'test')",
    )
    .bind(user_id)
    .execute(store.pool())
    .await
    .unwrap();
    (user_id, vec![conv, chat], vec![stored.id])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_account_removes_every_row_of_the_user_and_nothing_else() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;
    let (alice_id, alice_convs, alice_turns) = user_with_everything(&db, &alice).await;
    let (bob_id, bob_convs, bob_turns) = user_with_everything(&db, &bob).await;

    let before = referring_rows(&db, alice_id, &alice_convs, &alice_turns).await;
    // The enumeration sees every kind of row the user has (so the check below can fail).
    for table in [
        "users",
        "api_tokens",
        "conversations",
        "ptkb_statements",
        "turns",
        "turn_ptkb_rankings",
        "turn_passages",
        "response_sentences",
        "sentence_citations",
        "profile_statements",
        "chat_conversations",
        "batch_runs",
    ] {
        assert!(
            before.iter().any(|(t, _, n)| t == table && *n > 0),
            "{table} holds none of alice's rows: {before:?}"
        );
    }
    let bob_before = referring_rows(&db, bob_id, &bob_convs, &bob_turns).await;

    let r = alice.send("DELETE", "/v1/users/me", None).await;
    assert_eq!(r.status, 204, "{}", r.body);

    let after = referring_rows(&db, alice_id, &alice_convs, &alice_turns).await;
    let left: Vec<_> = after.iter().filter(|(_, _, n)| *n > 0).collect();
    assert!(left.is_empty(), "rows of alice left: {left:?}");
    assert_eq!(
        referring_rows(&db, bob_id, &bob_convs, &bob_turns).await,
        bob_before,
        "bob's rows are untouched"
    );
    let r = alice.get("/v1/users/me").await;
    assert_eq!((r.status, r.code()), (401, "invalid_token"));
    assert_eq!(
        bob.get("/v1/conversations").await.body["conversations"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // The name is free again.
    new_user(&anon, "alice").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_for_an_account_deleted_meanwhile_are_unauthorized_not_server_errors() {
    // A request authenticates, then the account is deleted by another request, then the first
    // one writes: found by schemathesis as a 500 (foreign key violation) on POST
    // /v1/users/me/tokens racing DELETE /v1/users/me. Now each such write is "unknown token".
    use convrag::store::users::{AuthFailure, NewToken};
    use convrag::store::{NewConversation, StoreError};
    let db = TestDb::new().await;
    let (user, _token) = db.store.create_user("gone").await.unwrap();
    db.store.delete_user(user.id).await.unwrap();
    let unknown = |r: StoreError| matches!(r, StoreError::Unauthorized(AuthFailure::Unknown));

    let token = db
        .store
        .create_token_with(user.id, &NewToken::default(), None)
        .await;
    assert!(unknown(token.unwrap_err()));
    let conversation = db
        .store
        .create_conversation(
            user.id,
            NewConversation {
                title: "t".into(),
                external_id: None,
                collection: None,
                instructions: None,
                ptkb: Vec::new(),
            },
        )
        .await;
    assert!(unknown(conversation.unwrap_err()));
    let collection = db
        .store
        .create_private_collection(user.id, "notes", 5)
        .await;
    assert!(unknown(collection.unwrap_err()));
}
