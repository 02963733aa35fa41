//! The HTTP API against real PostgreSQL: every endpoint, bad input, ownership isolation.

use crate::common;

use common::{new_user, Client, TestDb, ADMIN_TOKEN};
use convrag::store::turns::{NewRankedStatement, Sentence, TurnPassage, TurnSlot};
use convrag::store::NewTurn;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_are_created_by_the_admin_only() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);

    let r = anon.post("/v1/users", json!({"name": "alice"})).await;
    assert_eq!((r.status, r.code()), (401, "missing_token"));
    // A token that is no one's is refused as on every route (401), not as a user's (403).
    let r = anon
        .with_token("wrong")
        .post("/v1/users", json!({"name": "alice"}))
        .await;
    assert_eq!((r.status, r.code()), (401, "invalid_token"));

    let admin = anon.with_token(ADMIN_TOKEN);
    let r = admin.post("/v1/users", json!({"name": "alice"})).await;
    assert_eq!(r.status, 201);
    let token = r.body["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("cvr_"));

    let r = admin.post("/v1/users", json!({"name": "alice"})).await;
    assert_eq!((r.status, r.code(), r.field()), (409, "conflict", "name"));
    let r = admin.post("/v1/users", json!({"name": "   "})).await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "name")
    );

    let alice = anon.with_token(&token);
    let r = alice.get("/v1/users/me").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["user"]["name"], "alice");

    // A second token works too; the admin token is not a user token.
    let r = alice.post("/v1/users/me/tokens", json!({})).await;
    assert_eq!(r.status, 201);
    let second = anon.with_token(r.body["token"].as_str().unwrap());
    assert_eq!(
        second.get("/v1/users/me").await.body["user"]["name"],
        "alice"
    );
    let r = admin.get("/v1/users/me").await;
    assert_eq!((r.status, r.code()), (401, "invalid_token"));
    let r = anon.get("/v1/users/me").await;
    assert_eq!((r.status, r.code()), (401, "missing_token"));

    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_the_envelope_naming_the_field() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;

    let r = alice
        .post("/v1/conversations", json!({"title": "t", "colour": "red"}))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "colour")
    );
    let r = alice.post("/v1/conversations", json!({"title": 42})).await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "title")
    );
    let r = alice
        .post(
            "/v1/conversations",
            json!({"ptkb": [{"text": "I like tea."}, {"txt": "x"}]}),
        )
        .await;
    assert_eq!((r.status, r.field()), (400, "ptkb[1].txt"));
    // PostgreSQL text cannot hold NUL: refused up front, naming the field, nothing stored.
    let r = alice
        .post(
            "/v1/conversations",
            json!({"title": "t", "ptkb": [{"text": "tea\u{0}"}]}),
        )
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "ptkb[0].text")
    );
    assert_eq!(
        alice.get("/v1/conversations").await.body["conversations"],
        json!([])
    );
    let r = alice
        .post("/v1/profile/statements", json!({"text": "\u{0}"}))
        .await;
    assert_eq!((r.status, r.field()), (400, "text"));
    // A statement id that cannot exist names the path parameter.
    let conversation = alice.post("/v1/conversations", json!({})).await;
    let id = conversation.body["conversation"]["id"].as_str().unwrap();
    let r = alice
        .send(
            "PUT",
            &format!("/v1/conversations/{id}/ptkb/a%00b"),
            Some(json!({"text": "x"})),
        )
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "statement_id")
    );
    let r = alice
        .send("DELETE", &format!("/v1/conversations/{id}/ptkb/..x"), None)
        .await;
    assert_eq!((r.status, r.field()), (400, "statement_id"));
    let r = alice
        .post("/v1/conversations", json!({"ptkb": [{"text": "  "}]}))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "ptkb")
    );
    let r = alice
        .post("/v1/conversations", json!({"collection": "../../etc"}))
        .await;
    assert_eq!((r.status, r.field()), (400, "collection"));

    let r = alice
        .raw(
            "POST",
            "/v1/conversations",
            "application/json",
            b"{\"title\": ".to_vec(),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "malformed_json"));
    let r = alice
        .raw("POST", "/v1/conversations", "application/json", Vec::new())
        .await;
    assert_eq!((r.status, r.code()), (400, "malformed_json"));
    let r = alice
        .raw("POST", "/v1/conversations", "text/plain", b"{}".to_vec())
        .await;
    assert_eq!((r.status, r.code()), (415, "unsupported_media_type"));
    // The test server's limit is 64 KiB.
    let big = json!({"title": "x".repeat(100 * 1024)});
    let r = alice
        .raw(
            "POST",
            "/v1/conversations",
            "application/json",
            big.to_string().into_bytes(),
        )
        .await;
    assert_eq!((r.status, r.code()), (413, "payload_too_large"));
    let r = alice
        .raw(
            "POST",
            "/v1/conversations",
            "application/json",
            br#"{"title": "x"}"#.to_vec(),
        )
        .await;
    assert_eq!(r.status, 201, "a good body still works: {:?}", r.body);

    // Bad ids and query parameters.
    let r = alice.get("/v1/conversations/not-a-uuid").await;
    assert_eq!((r.status, r.field()), (400, "conversation_id"));
    let r = alice
        .get(&format!("/v1/conversations/{}", uuid::Uuid::new_v4()))
        .await;
    assert_eq!((r.status, r.code()), (404, "not_found"));
    let id = r.body["error"].clone();
    assert!(id.is_object());
    let conv = alice.post("/v1/conversations", json!({})).await.body["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = alice
        .get(&format!("/v1/conversations/{conv}/ptkb?at_turn=abc"))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (400, "invalid_field", "at_turn")
    );
    let r = alice
        .get(&format!("/v1/conversations/{conv}/ptkb?at_turn=0"))
        .await;
    assert_eq!((r.status, r.field()), (400, "at_turn"));
    let r = alice
        .get(&format!("/v1/conversations/{conv}/turns?bogus=1"))
        .await;
    assert_eq!((r.status, r.field()), (400, "bogus"));

    // Unknown routes and wrong methods answer JSON too.
    let r = alice.get("/v1/nothing-here").await;
    assert_eq!((r.status, r.code()), (404, "route_not_found"));
    let r = alice.send("DELETE", "/v1/conversations", None).await;
    assert_eq!((r.status, r.code()), (405, "method_not_allowed"));

    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_and_ptkb_lifecycle() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;

    let r = alice
        .post(
            "/v1/conversations",
            json!({
                "title": "Choosing a university",
                "external_id": "9-1",
                "ptkb": [
                    {"id": "1", "text": "I graduated from Tilburg University."},
                    {"text": "My TOEFL score is 91."},
                    {"id": "7", "text": "I am vegetarian."}
                ]
            }),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let conv = r.body["conversation"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.body["conversation"]["external_id"], "9-1");
    let ids: Vec<&str> = r.body["ptkb"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["1", "2", "7"]);

    // External ids are unique per user.
    let r = alice
        .post("/v1/conversations", json!({"external_id": "9-1"}))
        .await;
    assert_eq!((r.status, r.field()), (409, "external_id"));

    let list = alice.get("/v1/conversations").await;
    assert_eq!(list.body["conversations"].as_array().unwrap().len(), 1);
    assert_eq!(list.body["conversations"][0]["ptkb_count"], 3);

    // Add, edit, remove before any turn: changes apply in place.
    let r = alice
        .post(
            &format!("/v1/conversations/{conv}/ptkb"),
            json!({"text": "I live in Amsterdam."}),
        )
        .await;
    assert_eq!(
        (r.status, r.body["statement"]["id"].as_str()),
        (201, Some("8"))
    );
    let r = alice
        .post(
            &format!("/v1/conversations/{conv}/ptkb"),
            json!({"id": "1", "text": "dup"}),
        )
        .await;
    assert_eq!((r.status, r.field()), (409, "id"));
    let r = alice
        .send(
            "PUT",
            &format!("/v1/conversations/{conv}/ptkb/2"),
            Some(json!({"text": "My TOEFL score is 95."})),
        )
        .await;
    assert_eq!(r.status, 200);
    let r = alice
        .send(
            "PUT",
            &format!("/v1/conversations/{conv}/ptkb/2"),
            Some(json!({"text": ""})),
        )
        .await;
    assert_eq!((r.status, r.field()), (400, "text"));
    let r = alice
        .send(
            "PUT",
            &format!("/v1/conversations/{conv}/ptkb/99"),
            Some(json!({"text": "x"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (404, "not_found"));
    let r = alice
        .send("DELETE", &format!("/v1/conversations/{conv}/ptkb/7"), None)
        .await;
    assert_eq!(r.status, 204);
    let r = alice
        .send("DELETE", &format!("/v1/conversations/{conv}/ptkb/7"), None)
        .await;
    assert_eq!(r.status, 404);

    let r = alice.get(&format!("/v1/conversations/{conv}")).await;
    let texts: Vec<&str> = r.body["ptkb"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "I graduated from Tilburg University.",
            "My TOEFL score is 95.",
            "I live in Amsterdam."
        ]
    );

    // A turn sees the PTKB; later edits do not change what it saw.
    let id = uuid::Uuid::parse_str(&conv).unwrap();
    let user = db.store.user_by_name("alice").await.unwrap().unwrap();
    db.store
        .insert_turn(
            user.id,
            id,
            TurnSlot::Next,
            NewTurn {
                utterance: "Which university should I pick?".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    alice
        .send(
            "PUT",
            &format!("/v1/conversations/{conv}/ptkb/2"),
            Some(json!({"text": "My TOEFL score is 100."})),
        )
        .await;
    alice
        .send("DELETE", &format!("/v1/conversations/{conv}/ptkb/8"), None)
        .await;
    let seen_by_1 = alice
        .get(&format!("/v1/conversations/{conv}/ptkb?at_turn=1"))
        .await;
    let texts: Vec<&str> = seen_by_1.body["statements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "I graduated from Tilburg University.",
            "My TOEFL score is 95.",
            "I live in Amsterdam."
        ]
    );
    let now = alice.get(&format!("/v1/conversations/{conv}/ptkb")).await;
    let texts: Vec<&str> = now.body["statements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "I graduated from Tilburg University.",
            "My TOEFL score is 100."
        ]
    );
    let history = alice
        .get(&format!("/v1/conversations/{conv}/ptkb?history=true"))
        .await;
    assert_eq!(history.body["statements"].as_array().unwrap().len(), 4);

    // Title and collection can change; null clears the collection.
    let r = alice
        .send(
            "PATCH",
            &format!("/v1/conversations/{conv}"),
            Some(json!({"title": "Uni", "collection": null})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["conversation"]["title"], "Uni");
    assert!(r.body["conversation"]["collection"].is_null());

    let r = alice
        .send("DELETE", &format!("/v1/conversations/{conv}"), None)
        .await;
    assert_eq!(r.status, 204);
    let r = alice.get(&format!("/v1/conversations/{conv}")).await;
    assert_eq!(r.status, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_are_stored_whole_and_listed() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let r = alice
        .post(
            "/v1/conversations",
            json!({"ptkb": [{"text": "I am vegetarian."}, {"text": "I live in Delft."}]}),
        )
        .await;
    let conv = uuid::Uuid::parse_str(r.body["conversation"]["id"].as_str().unwrap()).unwrap();
    let user = db.store.user_by_name("alice").await.unwrap().unwrap();

    let turn = NewTurn {
        external_turn_id: Some("1".into()),
        utterance: "What can I cook tonight?".into(),
        rewritten_utterance: Some("vegetarian dinner recipes".into()),
        response_text: Some("Try a lentil curry. Or a mushroom risotto.".into()),
        generator: Some("extractive".into()),
        settings: json!({"k": 100}),
        timings_ms: json!({"ptkb": 3.5, "retrieve": 12.0}),
        ptkb_ranking: vec![
            NewRankedStatement {
                statement_id: "1".into(),
                score: 0.9,
                selected: true,
            },
            NewRankedStatement {
                statement_id: "2".into(),
                score: 0.1,
                selected: false,
            },
        ],
        passages: vec![
            TurnPassage {
                rank: 1,
                passage_id: "doc1#0".into(),
                score: 2.0,
                retrieval_score: Some(11.0),
                rerank_score: Some(2.0),
                used: true,
                text: Some("Lentil curry ...".into()),
                ..Default::default()
            },
            TurnPassage {
                rank: 2,
                passage_id: "doc2#3".into(),
                score: 1.0,
                retrieval_score: Some(10.0),
                rerank_score: Some(1.0),
                used: true,
                ..Default::default()
            },
            TurnPassage {
                rank: 3,
                passage_id: "doc3#1".into(),
                score: 0.5,
                ..Default::default()
            },
        ],
        sentences: vec![
            Sentence {
                text: "Try a lentil curry.".into(),
                citations: vec![1],
            },
            Sentence {
                text: "Or a mushroom risotto.".into(),
                citations: vec![2, 1],
            },
        ],
        ..Default::default()
    };
    let stored = db
        .store
        .insert_turn(user.id, conv, TurnSlot::Next, turn.clone())
        .await
        .unwrap();
    assert_eq!(stored.seq, 1);

    // Regenerate: the old version stays inspectable.
    let mut again = turn.clone();
    again.response_text = Some("Lentil curry.".into());
    again.sentences.truncate(1);
    let regenerated = db
        .store
        .insert_turn(user.id, conv, TurnSlot::Regenerate { seq: 1 }, again)
        .await
        .unwrap();
    assert_eq!((regenerated.seq, regenerated.version), (1, 2));

    let r = alice.get(&format!("/v1/conversations/{conv}/turns")).await;
    assert_eq!(r.status, 200);
    let turns = r.body["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    let t = &turns[0];
    assert_eq!(t["version"], 2);
    assert_eq!(t["ptkb_ranking"][0]["text"], "I am vegetarian.");
    assert_eq!(t["ptkb_ranking"][0]["selected"], true);
    assert_eq!(t["passages"][0]["passage_id"], "doc1#0");
    assert_eq!(t["passages"][0]["used"], true);
    assert_eq!(t["sentences"][0]["citations"], json!([1]));
    assert_eq!(t["timings_ms"]["retrieve"], 12.0);

    let all = alice
        .get(&format!("/v1/conversations/{conv}/turns?all_versions=true"))
        .await;
    let all = all.body["turns"].as_array().unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["sentences"][1]["citations"], json!([2, 1]));
    let first_id = all[0]["id"].as_str().unwrap();
    let r = alice
        .get(&format!("/v1/conversations/{conv}/turns/{first_id}"))
        .await;
    assert_eq!(
        (r.status, r.body["turn"]["is_current"].as_bool()),
        (200, Some(false))
    );

    // Bad turns are refused whole: nothing half-stored.
    let mut bad = turn.clone();
    bad.ptkb_ranking.push(NewRankedStatement {
        statement_id: "42".into(),
        score: 0.0,
        selected: false,
    });
    let err = db
        .store
        .insert_turn(user.id, conv, TurnSlot::Next, bad)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("42"), "{err}");
    let mut bad = turn.clone();
    bad.passages.push(bad.passages[0].clone());
    assert!(db
        .store
        .insert_turn(user.id, conv, TurnSlot::Next, bad)
        .await
        .is_err());
    let r = alice
        .get(&format!("/v1/conversations/{conv}/turns?all_versions=true"))
        .await;
    assert_eq!(r.body["turns"].as_array().unwrap().len(), 2);

    // The database itself refuses a citation to a passage the turn does not have.
    let refused = sqlx::query(
        "INSERT INTO sentence_citations (turn_id, sentence_position, citation_order, passage_rank) VALUES ($1, 0, 5, 9)",
    )
    .bind(stored.id)
    .execute(db.store.pool())
    .await;
    assert!(refused.is_err());

    // A conversation with turns (whose rankings point at its statements) can be deleted whole.
    let r = alice
        .send("DELETE", &format!("/v1/conversations/{conv}"), None)
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(
        alice.get(&format!("/v1/conversations/{conv}")).await.status,
        404
    );
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM turns WHERE conversation_id = $1")
        .bind(conv)
        .fetch_one(db.store.pool())
        .await
        .unwrap();
    assert_eq!(left, 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_users_token_never_reaches_anothers_data() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;

    let r = alice
        .post(
            "/v1/conversations",
            json!({"title": "private", "ptkb": [{"text": "My salary is secret."}]}),
        )
        .await;
    let conv = r.body["conversation"]["id"].as_str().unwrap().to_string();
    let id = uuid::Uuid::parse_str(&conv).unwrap();
    let user = db.store.user_by_name("alice").await.unwrap().unwrap();
    let turn = db
        .store
        .insert_turn(
            user.id,
            id,
            TurnSlot::Next,
            NewTurn {
                utterance: "hello".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();

    let attempts: Vec<(&str, String, Option<serde_json::Value>)> = vec![
        ("GET", format!("/v1/conversations/{conv}"), None),
        (
            "PATCH",
            format!("/v1/conversations/{conv}"),
            Some(json!({"title": "mine"})),
        ),
        ("DELETE", format!("/v1/conversations/{conv}"), None),
        ("GET", format!("/v1/conversations/{conv}/ptkb"), None),
        (
            "GET",
            format!("/v1/conversations/{conv}/ptkb?history=true"),
            None,
        ),
        (
            "POST",
            format!("/v1/conversations/{conv}/ptkb"),
            Some(json!({"text": "x"})),
        ),
        (
            "PUT",
            format!("/v1/conversations/{conv}/ptkb/1"),
            Some(json!({"text": "x"})),
        ),
        ("DELETE", format!("/v1/conversations/{conv}/ptkb/1"), None),
        ("GET", format!("/v1/conversations/{conv}/turns"), None),
        (
            "GET",
            format!("/v1/conversations/{conv}/turns/{}", turn.id),
            None,
        ),
    ];
    for (method, path, body) in attempts {
        let r = bob.send(method, &path, body).await;
        assert_eq!((r.status, r.code()), (404, "not_found"), "{method} {path}");
    }
    assert_eq!(
        bob.get("/v1/conversations").await.body["conversations"],
        json!([])
    );

    // Alice's data is intact.
    let r = alice.get(&format!("/v1/conversations/{conv}")).await;
    assert_eq!(r.body["conversation"]["title"], "private");
    assert_eq!(r.body["ptkb"][0]["text"], "My salary is secret.");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_openapi_and_every_documented_route_is_served() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    assert_eq!(anon.get("/healthz").await.body["status"], "ok");
    assert_eq!(anon.get("/readyz").await.body["status"], "ready");
    let page = reqwest::get(server.url("/")).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("/v1/openapi.json"));
    let doc = anon.get("/v1/openapi.json").await;
    assert_eq!(doc.status, 200);
    assert_eq!(doc.body["openapi"], "3.1.0");

    let fake = uuid::Uuid::new_v4();
    for (method, pattern) in convrag::api::ROUTES.iter().filter(|(_, p)| *p != "/") {
        let path = pattern
            .replace("{conversation_id}", &fake.to_string())
            .replace("{turn_id}", &fake.to_string())
            .replace("{statement_id}", "1")
            .replace("{name}", "none");
        let r = anon.send(method, &path, None).await;
        assert_ne!(
            r.code(),
            "route_not_found",
            "{method} {pattern} is documented but not served"
        );
        assert_ne!(r.code(), "method_not_allowed", "{method} {pattern}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_profile_is_a_quota_not_a_bad_request() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    let alice = new_user(&anon, "alice").await;
    for i in 0..200 {
        let r = alice
            .post(
                "/v1/profile/statements",
                json!({"text": format!("fact {i}")}),
            )
            .await;
        assert_eq!(r.status, 201, "{:?}", r.body);
    }
    let r = alice
        .post("/v1/profile/statements", json!({"text": "one more"}))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (429, "quota_exceeded", "text"),
        "{:?}",
        r.body
    );
    server.stop().await;
}
