//! convrag through a real PgBouncer (Debian's 1.18) in transaction pooling mode: sqlx's
//! prepared statements break there unless `DATABASE_URL` says `?pgbouncer=true`; with it, two
//! servers with pools of their own serve any user's conversations and turns concurrently; session
//! features (migrating, a batch run's session lock) are refused with a clear error.

use crate::common;
use crate::multinode_support::PgBouncer;

use std::sync::Arc;

use crate::support::fixture;
use common::{new_user, Client, TestDb, ADMIN_TOKEN};
use convrag::api;
use convrag::collection::Format;
use convrag::index::{index_collection, IndexOptions};
use convrag::store::{DbTarget, Store, StoreError};
use convrag::web::AppState;
use serde_json::json;
use sqlx::Connection;

fn sqlstate(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(d) => d.code().map(|c| c.to_string()).unwrap_or_default(),
        other => format!("not a database error: {other}"),
    }
}

fn anonymous(c: &Client) -> Client {
    Client {
        http: c.http.clone(),
        base: c.base.clone(),
        token: None,
    }
}

#[tokio::test]
async fn without_the_switch_sqlx_statements_break_in_transaction_pooling() {
    let db = TestDb::new().await;
    let bouncer = PgBouncer::start(2);
    let plain = sqlx::PgPool::connect(&bouncer.url(&db.name, false))
        .await
        .unwrap();
    // Parse + Sync ends the "transaction": PgBouncer resets the server connection before Bind.
    let e = sqlx::query_scalar::<_, i32>("SELECT $1::int")
        .bind(7)
        .fetch_one(&plain)
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "26000", "{e}");

    let store = Store::connect(&DbTarget::Url(bouncer.url(&db.name, true)))
        .await
        .unwrap();
    let seven: i32 = sqlx::query_scalar("SELECT $1::int")
        .bind(7)
        .fetch_one(store.db())
        .await
        .unwrap();
    assert_eq!(seven, 7);
}

#[tokio::test]
async fn session_features_are_refused_through_pgbouncer() {
    let db = TestDb::new().await;
    let bouncer = PgBouncer::start(2);
    let store = Store::connect(&DbTarget::Url(bouncer.url(&db.name, true)))
        .await
        .unwrap();
    let e = store.lock_run(1, "run").await.err().unwrap();
    assert!(
        matches!(&e, StoreError::Invalid { field: "database_url", message } if message.contains("--worker")),
        "{e}"
    );
    assert!(matches!(
        store.migrate().await,
        Err(StoreError::Invalid {
            field: "database_url",
            ..
        })
    ));

    // A database without convrag's tables is not migrated through PgBouncer: the error says how.
    let fresh = format!("{}_fresh", db.name);
    let mut admin = sqlx::PgConnection::connect(&common::admin_url())
        .await
        .unwrap();
    sqlx::query(&format!("CREATE DATABASE {fresh}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let refused = Store::connect(&DbTarget::Url(bouncer.url(&fresh, true))).await;
    drop(bouncer);
    sqlx::query(&format!("DROP DATABASE {fresh} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .unwrap();
    match refused {
        Err(StoreError::Invalid { field, message }) => {
            assert_eq!(field, "database_url");
            assert!(message.contains("convrag migrate"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn two_servers_through_pgbouncer_serve_every_user_concurrently() {
    let db = TestDb::new().await;
    // Fewer server connections than the two servers' pools (2 × 16): transactions share them.
    // A turn holds one for its whole pipeline (its conversation's row lock), so there must be
    // more than the turns in flight (8 here); see docs/deploy.md.
    let bouncer = PgBouncer::start(10);
    let home = tempfile::tempdir().unwrap();
    let mut config = db.config();
    config.home = home.path().to_path_buf();
    config.database_url = Some(bouncer.url(&db.name, true));
    let mut options = IndexOptions::new("recipes", Format::Jsonl);
    options.inputs = vec![fixture("jsonl/recipes.jsonl")];
    options.threads = 1;
    options.heap_bytes = 16 << 20;
    index_collection(&config.collections_dir(), &options).unwrap();
    let config = Arc::new(config);
    let mut servers = Vec::new();
    for _ in 0..2 {
        let store = Store::connect(&DbTarget::Url(bouncer.url(&db.name, true)))
            .await
            .unwrap();
        servers.push(api::spawn(AppState::new(store, config.clone(), ADMIN_TOKEN)).unwrap());
    }
    let anon: Vec<Client> = servers.iter().map(|s| Client::new(s, None)).collect();

    // Each user works through one server, then reads back through the other.
    let work = (0..8).map(|i| {
        let here = anonymous(&anon[i % 2]);
        let there = anonymous(&anon[(i + 1) % 2]);
        async move {
            let user = new_user(&here, &format!("user{i}")).await;
            let r = user
                .post(
                    "/v1/conversations",
                    json!({"title": format!("c{i}"), "collection": "recipes",
                           "ptkb": [{"text": "I am vegetarian."}]}),
                )
                .await;
            assert_eq!(r.status, 201, "{:?}", r.body);
            let conversation = r.body["conversation"]["id"].as_str().unwrap().to_string();
            let token = user.token.clone().unwrap();
            let elsewhere = there.with_token(&token);
            for utterance in ["How do I make pancakes?", "And without eggs?"] {
                let path = format!("/v1/conversations/{conversation}/turns");
                let r = elsewhere
                    .post(&path, json!({ "utterance": utterance }))
                    .await;
                assert_eq!(r.status, 201, "{:?}", r.body);
            }
            let turns = user
                .get(&format!("/v1/conversations/{conversation}/turns"))
                .await;
            assert_eq!(turns.status, 200, "{:?}", turns.body);
            assert_eq!(turns.body["turns"].as_array().unwrap().len(), 2);
            (token, conversation)
        }
    });
    let users = futures_util::future::join_all(work).await;

    // Another user's conversation is not found, whichever server is asked.
    let (_, first) = &users[0];
    for client in &anon {
        let (token, _) = &users[1];
        let r = client
            .with_token(token)
            .get(&format!("/v1/conversations/{first}"))
            .await;
        assert_eq!(r.status, 404, "{:?}", r.body);
    }
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM turns")
        .fetch_one(db.store.pool())
        .await
        .unwrap();
    assert_eq!(stored, 16);
    for s in servers {
        s.handle.stop(true).await;
    }
}
