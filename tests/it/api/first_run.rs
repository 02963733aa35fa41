//! A fresh server's first run: the first user's one-time sign-in link, and the default collection
//! (listed with its progress while it is built, used by new conversations, answered from with
//! the reranker once ready).

use crate::common;

use std::sync::Arc;

use crate::support::fixture;
use common::{Client, TestDb, ADMIN_TOKEN};
use convrag::api;
use convrag::index::background::{BuildState, DefaultCollection};
use convrag::rerank::MemoryEmbeddingCache;
use convrag::web::AppState;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_users_sign_in_link_works_once() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);

    let first = db.store.first_user_sign_in().await.unwrap().unwrap();
    assert!(first.created);
    assert_eq!(first.user.name, "me");
    // Restarted before the link was used: a new link, and the old one no longer works.
    let second = db.store.first_user_sign_in().await.unwrap().unwrap();
    assert!(!second.created);
    assert_eq!(second.user.id, first.user.id);
    assert_ne!(second.code, first.code);
    let stale = anon.post("/v1/sign-in", json!({"code": first.code})).await;
    assert_eq!((stale.status, stale.code()), (401, "invalid_token"));
    assert_eq!(stale.field(), "code");

    let r = anon.post("/v1/sign-in", json!({"code": second.code})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["user"]["name"], "me");
    let me = anon.with_token(r.body["token"].as_str().unwrap());
    let who = me.get("/v1/users/me").await;
    assert_eq!(who.body["user"]["id"], first.user.id);

    // Used: the same link is refused, and later starts print none.
    let again = anon.post("/v1/sign-in", json!({"code": second.code})).await;
    assert_eq!((again.status, again.code()), (401, "invalid_token"));
    assert!(db.store.first_user_sign_in().await.unwrap().is_none());

    let empty = anon.post("/v1/sign-in", json!({"code": "  "})).await;
    assert_eq!(
        (empty.status, empty.code(), empty.field()),
        (400, "invalid_field", "code")
    );
    let extra_field = anon
        .post("/v1/sign-in", json!({"code": "sic_0000", "user": 1}))
        .await;
    assert_eq!(extra_field.status, 400, "{:?}", extra_field.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_link_when_an_administrator_manages_users() {
    let db = TestDb::new().await;
    let server = db.serve();
    let anon = Client::new(&server, None);
    common::new_user(&anon, "alice").await;
    common::new_user(&anon, "bob").await;
    assert!(db.store.first_user_sign_in().await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_collection_is_listed_while_built_and_answers_with_the_reranker() {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let mut config = db.config();
    config.home = home.path().to_path_buf();
    let default = Arc::new(DefaultCollection::new("manual", &fixture("html")));
    let state = AppState::new(db.store.clone(), Arc::new(config.clone()), ADMIN_TOKEN)
        .with_reranker(Arc::new(
            common::default_model().with_cache(Arc::new(MemoryEmbeddingCache::new())),
        ))
        .with_default_collection(default.clone());
    let server = api::spawn(state).unwrap();
    let anon = Client::new(&server, None);
    let user = common::new_user(&anon, "alice").await;

    // Not built yet: listed as pending, the default, and new conversations get it.
    let r = user.get("/v1/collections").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["collections"],
        json!([{"name": "manual", "status": "pending", "progress": 0.0, "default": true,
            "visibility": "shared"}])
    );
    let c = user
        .post("/v1/conversations", json!({"title": "Indexes"}))
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    assert_eq!(c.body["conversation"]["collection"], "manual");
    let conversation = c.body["conversation"]["id"].as_str().unwrap().to_string();
    // Asked before it is built: not "no such collection" but "being prepared", retry later;
    // nothing is stored.
    let (status, retry_after, body) = common::with_retry_after(
        &user,
        reqwest::Method::POST,
        &format!("/v1/conversations/{conversation}/turns"),
        Some(json!({"utterance": "What is a partial index?"})),
    )
    .await;
    assert_eq!((status, retry_after), (503, Some(5)), "{body}");
    assert_eq!(body["error"]["code"], "collection_unavailable", "{body}");
    assert_eq!(body["error"]["field"], "collection");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"manual\" is being prepared (0% done)"),
        "{body}"
    );
    let r = user
        .get(&format!("/v1/conversations/{conversation}/turns"))
        .await;
    assert_eq!(r.body["turns"], json!([]), "{:?}", r.body);
    let r = user.get("/v1/collections/manual/search?q=index").await;
    assert_eq!(r.status, 503, "{:?}", r.body);

    let built = default.clone();
    let collections = config.collections_dir();
    let staging = home.path().join("staging");
    tokio::task::spawn_blocking(move || built.build(&collections, &staging, 1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(default.state(), BuildState::Ready);

    let r = user.get("/v1/collections").await;
    let listed = &r.body["collections"][0];
    assert_eq!(
        (&listed["name"], &listed["status"], &listed["default"]),
        (&json!("manual"), &json!("ready"), &json!(true))
    );
    assert!(listed["passages"].as_u64().unwrap() > 20, "{listed}");

    let t = user
        .post(
            &format!("/v1/conversations/{conversation}/turns"),
            json!({"utterance": "How can I build an index without locking out writes to the table?"}),
        )
        .await;
    assert_eq!(t.status, 201, "{:?}", t.body);
    let turn = &t.body["turn"];
    let passages = turn["passages"].as_array().unwrap();
    assert!(passages[0]["rerank_score"].is_number(), "{turn}");
    assert!(passages
        .iter()
        .all(|p| p["passage_id"].as_str().unwrap().contains(".html#")));
    let cited: Vec<&str> = turn["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["citations"].as_array().unwrap())
        .map(|c| {
            passages[c.as_u64().unwrap() as usize - 1]["passage_id"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert!(
        cited
            .iter()
            .any(|id| id.starts_with("sql-createindex.html#SQL-CREATEINDEX-CONCURRENTLY")),
        "{cited:?}"
    );
}
