//! Reliability under faults: turns waiting on an LLM that never answers hold no database
//! connection; a conversation's lease serializes its turns, a dead holder's lease is taken over
//! and a superseded holder cannot commit (fencing); `Idempotency-Key` retries replay the stored
//! result. Real PostgreSQL, real HTTP, a real loopback TCP peer as the silent LLM.

use std::sync::Arc;
use std::time::Duration;

use crate::api::turns::{
    check_turn_invariants, conversation, index_recipes, parse_events, silent_llm, turn, VEGETARIAN,
};
use crate::common::{new_user, Client, TestDb, ADMIN_TOKEN};
use convrag::api::{self, RunningServer};
use convrag::config::Config;
use convrag::store::{
    DbTarget, IdempotencyKey, NewConversation, NewTurn, Store, StoreError, StoreOptions, TurnSlot,
};
use convrag::web::AppState;
use serde_json::{json, Value};

/// A store on `db` with its own pool sizes and lease timing.
async fn store_with(db: &TestDb, options: StoreOptions) -> Store {
    Store::connect_with(&DbTarget::Url(db.url.clone()), options)
        .await
        .unwrap()
}

struct Server {
    _db: TestDb,
    _home: tempfile::TempDir,
    server: RunningServer,
}

/// The API over the recipe collection on `store`, answering with `llm_port`'s LLM (if any).
async fn serve(db: TestDb, store: Store, llm: Option<(u16, u64)>) -> Server {
    let home = tempfile::tempdir().unwrap();
    let mut config: Config = db.config();
    config.home = home.path().to_path_buf();
    if let Some((port, timeout_secs)) = llm {
        config.llm.base_url = Some(format!("http://127.0.0.1:{port}/v1"));
        config.llm.model = "silent".into();
        config.llm.timeout_secs = timeout_secs;
    }
    index_recipes(&config);
    let server = api::spawn(AppState::new(store, Arc::new(config), ADMIN_TOKEN)).unwrap();
    Server {
        _db: db,
        _home: home,
        server,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_waiting_on_a_silent_llm_leave_the_database_to_everyone_else() {
    let db = TestDb::new().await;
    const POOL: u32 = 4;
    let store = store_with(
        &db,
        StoreOptions {
            pool_size: POOL,
            auth_pool_size: 2,
            ..StoreOptions::default()
        },
    )
    .await;
    let mut llm = silent_llm().await;
    let s = serve(db, store, Some((llm.port, 600))).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;

    // As many turns as the pool has connections, each stuck in its LLM call.
    let mut stuck = Vec::new();
    for i in 0..POOL {
        let conv = conversation(&alice, &format!("stuck {i}"), &VEGETARIAN).await;
        let client = alice.with_token(alice.token.as_deref().unwrap());
        stuck.push(tokio::spawn(async move {
            client
                .post(
                    &format!("/v1/conversations/{conv}/turns"),
                    json!({"utterance": "What should I cook tonight?", "generator": "llm"}),
                )
                .await
        }));
    }
    for _ in 0..POOL {
        tokio::time::timeout(Duration::from_secs(120), llm.connected.recv())
            .await
            .expect("every stuck turn reached the LLM")
            .unwrap();
    }

    // Everyone else is served: user creation, token lookup, listing, a turn elsewhere.
    let bob = new_user(&anon, "bob").await;
    let r = bob.get("/v1/users/me").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = bob.get("/v1/conversations").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let conv = conversation(&bob, "bob's", &VEGETARIAN).await;
    let t = turn(
        &bob,
        &conv,
        json!({"utterance": "Is lentil soup quick to make?", "generator": "extractive"}),
    )
    .await;
    check_turn_invariants(&t, 250);
    let r = bob.get(&format!("/v1/conversations/{conv}/turns")).await;
    assert_eq!(r.body["turns"].as_array().unwrap().len(), 1);
    // The stuck user too, in another conversation.
    let other = conversation(&alice, "other", &VEGETARIAN).await;
    let t = turn(
        &alice,
        &other,
        json!({"utterance": "What about falafel?", "generator": "extractive"}),
    )
    .await;
    assert_eq!(t["seq"], 1);
    assert!(
        stuck.iter().all(|t| !t.is_finished()),
        "the stuck turns are still waiting for the LLM"
    );
    for t in stuck {
        t.abort();
    }
    s.server.stop().await;
}

fn new_turn(utterance: &str) -> NewTurn {
    NewTurn {
        utterance: utterance.into(),
        response_text: Some("An answer.".into()),
        ..NewTurn::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_serialize_expire_and_fence() {
    let db = TestDb::new().await;
    let short_wait = StoreOptions {
        turn_wait: Duration::ZERO,
        ..StoreOptions::default()
    };
    let (store, impatient) = (
        store_with(&db, StoreOptions::default()).await,
        store_with(&db, short_wait).await,
    );
    let (user, _) = store.create_user("alice").await.unwrap();
    let conv = store
        .create_conversation(
            user.id,
            NewConversation {
                title: "c".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .id;

    // A running turn holds the conversation: another turn, a PTKB edit and a deletion that
    // will not wait are refused as busy; another user's lease request does not find it.
    let running = store
        .begin_turn(user.id, conv, TurnSlot::Next)
        .await
        .unwrap();
    let busy = impatient.begin_turn(user.id, conv, TurnSlot::Next).await;
    assert!(matches!(busy, Err(StoreError::Busy)), "{:?}", busy.err());
    let edit = impatient
        .add_statement(
            user.id,
            conv,
            convrag::store::NewStatement {
                id: None,
                text: "I like soup.".into(),
            },
        )
        .await;
    assert!(matches!(edit, Err(StoreError::Busy)), "{edit:?}");
    let deleted = impatient.delete_conversation(user.id, conv).await;
    assert!(matches!(deleted, Err(StoreError::Busy)), "{deleted:?}");
    let (mallory, _) = store.create_user("mallory").await.unwrap();
    let theirs = store.begin_turn(mallory.id, conv, TurnSlot::Next).await;
    assert!(matches!(theirs, Err(StoreError::NotFound { .. })));

    // Dropped: the lease is released (not left to expire: it has 30 s to run) and nothing stored.
    drop(running);
    let next = store
        .begin_turn(user.id, conv, TurnSlot::Next)
        .await
        .unwrap();
    assert_eq!(next.seq, 1);
    assert!(store
        .list_turns(user.id, conv, true)
        .await
        .unwrap()
        .is_empty());

    // Fencing: `next` stalls past its lease (its expiry is forced), another turn takes the
    // conversation over; the stalled one cannot commit, the new one can.
    sqlx::query(
        "UPDATE conversations SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(conv)
    .execute(store.pool())
    .await
    .unwrap();
    let taker = store
        .begin_turn(user.id, conv, TurnSlot::Next)
        .await
        .unwrap();
    let late = next.commit(&store, new_turn("stalled")).await;
    assert!(matches!(late, Err(StoreError::LeaseLost)), "{late:?}");
    let stored = taker.commit(&store, new_turn("took over")).await.unwrap();
    assert_eq!((stored.seq, stored.utterance.as_str()), (1, "took over"));

    // A crashed holder's lease (never renewed, never released) expires and is taken over.
    sqlx::query(
        "UPDATE conversations SET lease_holder = gen_random_uuid(), \
         lease_expires_at = now() + interval '1 second' WHERE id = $1",
    )
    .bind(conv)
    .execute(store.pool())
    .await
    .unwrap();
    let after_crash = store
        .begin_turn(user.id, conv, TurnSlot::Next)
        .await
        .unwrap();
    let stored = after_crash
        .commit(&store, new_turn("after the crash"))
        .await
        .unwrap();
    assert_eq!(stored.seq, 2);
    let turns = store.list_turns(user.id, conv, true).await.unwrap();
    let utterances: Vec<&str> = turns.iter().map(|t| t.utterance.as_str()).collect();
    assert_eq!(utterances, ["took over", "after the crash"]);
    // The commit released the lease: an impatient PTKB edit goes through at once.
    impatient
        .add_statement(
            user.id,
            conv,
            convrag::store::NewStatement {
                id: None,
                text: "I like soup.".into(),
            },
        )
        .await
        .unwrap();
}

/// `POST` with an `Idempotency-Key`; the reply with its replay header.
async fn post_keyed(
    client: &Client,
    path: &str,
    key: &str,
    body: &Value,
    stream: bool,
) -> (u16, Option<String>, String) {
    let mut request = client
        .http
        .post(format!("{}{path}", client.base))
        .bearer_auth(client.token.as_deref().unwrap())
        .header("Idempotency-Key", key)
        .json(body);
    if stream {
        request = request.header("accept", "text/event-stream");
    }
    let r = request.send().await.unwrap();
    let replayed = r
        .headers()
        .get("idempotent-replayed")
        .map(|v| v.to_str().unwrap().to_string());
    (r.status().as_u16(), replayed, r.text().await.unwrap())
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_replay_refuse_and_validate() {
    let db = TestDb::new().await;
    let store = db.store.clone();
    let s = serve(db, store, None).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;

    // Conversations: the retry answers with the first result and creates nothing.
    let body = json!({"title": "keyed", "collection": "recipes", "external_id": "9-1",
        "ptkb": [{"text": VEGETARIAN[0]}]});
    let (status, replayed, first) =
        post_keyed(&alice, "/v1/conversations", "c-1", &body, false).await;
    assert_eq!((status, replayed), (201, None), "{first}");
    let (status, replayed, again) =
        post_keyed(&alice, "/v1/conversations", "c-1", &body, false).await;
    assert_eq!(
        (status, replayed.as_deref()),
        (201, Some("true")),
        "{again}"
    );
    assert_eq!(json_of(&first), json_of(&again));
    assert_eq!(json_of(&first)["ptkb"][0]["text"], VEGETARIAN[0]);
    let listed = alice.get("/v1/conversations").await;
    assert_eq!(listed.body["conversations"].as_array().unwrap().len(), 1);
    let other = json!({"title": "other"});
    let (status, _, refused) = post_keyed(&alice, "/v1/conversations", "c-1", &other, false).await;
    assert_eq!(status, 409, "{refused}");
    let refused = json_of(&refused);
    assert_eq!(refused["error"]["code"], "idempotency_key_reused");
    assert_eq!(refused["error"]["field"], "Idempotency-Key");
    let too_long = "k".repeat(256);
    for bad in ["has space", too_long.as_str()] {
        let (status, _, text) = post_keyed(&alice, "/v1/conversations", bad, &other, false).await;
        assert_eq!(status, 400, "{text}");
        assert_eq!(json_of(&text)["error"]["field"], "Idempotency-Key");
    }
    // Keys are per user: bob's "c-1" is his own.
    let bob = new_user(&alice, "bob").await;
    let (status, replayed, _) = post_keyed(&bob, "/v1/conversations", "c-1", &other, false).await;
    assert_eq!((status, replayed), (201, None));

    // Turns, JSON: replayed with the same body, refused with another.
    let conv = json_of(&first)["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/v1/conversations/{conv}/turns");
    let ask = json!({"utterance": "What should I cook for dinner tonight?"});
    let (status, _, first) = post_keyed(&alice, &path, "t-1", &ask, false).await;
    assert_eq!(status, 201, "{first}");
    let (status, replayed, again) = post_keyed(&alice, &path, "t-1", &ask, false).await;
    assert_eq!((status, replayed.as_deref()), (201, Some("true")));
    assert_eq!(json_of(&first), json_of(&again));
    let (status, _, refused) =
        post_keyed(&alice, &path, "t-1", &json!({"utterance": "Soup?"}), false).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(json_of(&refused)["error"]["code"], "idempotency_key_reused");
    // The same key on a conversation creation is another request too.
    let (status, _, _) = post_keyed(&alice, "/v1/conversations", "t-1", &other, false).await;
    assert_eq!(status, 409);

    // Streams: a replayed stream is the one final `turn` event of the stored turn; a streamed
    // turn retried as JSON answers with that turn.
    let (status, replayed, text) = post_keyed(&alice, &path, "t-1", &ask, true).await;
    assert_eq!((status, replayed.as_deref()), (200, Some("true")));
    let events = parse_events(&text);
    assert_eq!(events.len(), 1, "{text}");
    assert_eq!(events[0].0, "turn");
    assert_eq!(events[0].1, json_of(&first));
    let follow = json!({"utterance": "Is lentil soup quick to make?"});
    let (status, replayed, text) = post_keyed(&alice, &path, "t-2", &follow, true).await;
    assert_eq!((status, replayed), (200, None));
    let events = parse_events(&text);
    assert!(events.len() > 1, "{text}");
    let streamed = &events.last().unwrap().1;
    let (status, _, again) = post_keyed(&alice, &path, "t-2", &follow, false).await;
    assert_eq!(status, 201);
    assert_eq!(&json_of(&again), streamed);
    let turns = alice.get(&format!("{path}?all_versions=true")).await;
    let seqs: Vec<i64> = turns.body["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2], "one turn per key");
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_while_the_first_attempt_runs_waits_and_replays() {
    let db = TestDb::new().await;
    let store = db.store.clone();
    let mut llm = silent_llm().await;
    // The LLM never answers; after 3 s the turn falls back to an extractive answer and is stored.
    let s = serve(db, store, Some((llm.port, 3))).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;
    let conv = conversation(&alice, "veg", &VEGETARIAN).await;
    let path = format!("/v1/conversations/{conv}/turns");
    let ask = json!({"utterance": "What should I cook for dinner tonight?", "generator": "llm"});
    let first = {
        let (alice, path, ask) = (
            alice.with_token(alice.token.as_deref().unwrap()),
            path.clone(),
            ask.clone(),
        );
        tokio::spawn(async move { post_keyed(&alice, &path, "k", &ask, false).await })
    };
    tokio::time::timeout(Duration::from_secs(120), llm.connected.recv())
        .await
        .expect("the first attempt reached the LLM")
        .unwrap();
    // The client gave up on the first attempt and retries while it still runs.
    let (status, replayed, retried) = post_keyed(&alice, &path, "k", &ask, false).await;
    let (first_status, first_replayed, first) = first.await.unwrap();
    assert_eq!((first_status, first_replayed), (201, None), "{first}");
    assert_eq!(
        (status, replayed.as_deref()),
        (201, Some("true")),
        "{retried}"
    );
    assert_eq!(json_of(&first), json_of(&retried));
    assert_eq!(
        json_of(&first)["turn"]["diagnostics"]["fallback"]["kind"],
        "timeout"
    );
    let turns = alice.get(&format!("{path}?all_versions=true")).await;
    assert_eq!(turns.body["turns"].as_array().unwrap().len(), 1);
    s.server.stop().await;
}

/// A key's record goes with its conversation: retrying a creation after the conversation was
/// deleted creates a new one (found right afterwards) instead of replaying the deleted one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_records_go_with_their_conversation() {
    let db = TestDb::new().await;
    let store = db.store.clone();
    let s = serve(db, store, None).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;
    let body = json!({"title": "keyed"});
    let (status, _, first) = post_keyed(&alice, "/v1/conversations", "c-del", &body, false).await;
    assert_eq!(status, 201, "{first}");
    let first_id = json_of(&first)["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let deleted = alice
        .http
        .delete(format!("{}/v1/conversations/{first_id}", alice.base))
        .bearer_auth(alice.token.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    let (status, replayed, again) =
        post_keyed(&alice, "/v1/conversations", "c-del", &body, false).await;
    assert_eq!((status, replayed), (201, None), "{again}");
    let again_id = json_of(&again)["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(again_id, first_id);
    let found = alice.get(&format!("/v1/conversations/{again_id}")).await;
    assert_eq!(found.status, 200, "{:?}", found.body);
    // And the retry of that one replays it, as before.
    let (status, replayed, third) =
        post_keyed(&alice, "/v1/conversations", "c-del", &body, false).await;
    assert_eq!((status, replayed.as_deref()), (201, Some("true")));
    assert_eq!(json_of(&third), json_of(&again));
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_records_expire_and_are_purged() {
    let db = TestDb::new().await;
    let keep = db.store.clone();
    let forget = store_with(
        &db,
        StoreOptions {
            idempotency_retention: Duration::ZERO,
            ..StoreOptions::default()
        },
    )
    .await;
    let (user, _) = keep.create_user("alice").await.unwrap();
    let key = IdempotencyKey::new("k", "POST /v1/conversations", &json!({"title": "a"})).unwrap();
    let new = || NewConversation {
        title: "a".into(),
        ..Default::default()
    };
    let (first, replayed) = keep
        .create_conversation_keyed(user.id, new(), Some(&key))
        .await
        .unwrap();
    assert!(!replayed);
    let (again, replayed) = keep
        .create_conversation_keyed(user.id, new(), Some(&key))
        .await
        .unwrap();
    assert!(replayed);
    assert_eq!(again, first);
    // Past its retention the key names nothing: the request runs again ...
    let (third, replayed) = forget
        .create_conversation_keyed(user.id, new(), Some(&key))
        .await
        .unwrap();
    assert!(!replayed);
    assert_ne!(third.conversation.id, first.conversation.id);
    // ... and the purge deletes expired records (here: the third's, the first's went before it).
    assert_eq!(forget.purge_idempotency_keys().await.unwrap(), 1);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM idempotency_keys")
        .fetch_one(keep.pool())
        .await
        .unwrap();
    assert_eq!(left, 0);
    assert_eq!(keep.list_conversations(user.id).await.unwrap().len(), 2);
}
