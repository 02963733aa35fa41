//! The topic leases of `convrag run … --worker` in PostgreSQL: claims in input order, one holder
//! per topic, a run-out lease taken over (naming the previous holder), finishing only by the
//! holder, and exactly one of many concurrent render claims winning.

use crate::common::TestDb;

use std::time::Duration;

use convrag::store::batch_runs::NewBatchRun;
use convrag::store::{ClaimedTopic, RenderClaim};
use serde_json::json;

const LONG: Duration = Duration::from_secs(60);

#[tokio::test]
async fn leases_hand_out_each_topic_once_and_take_over_dead_workers_topics() {
    let db = TestDb::new().await;
    let store = &db.store;
    let (user, _) = store.create_user("batch").await.unwrap();
    let settings = json!({});
    let run = NewBatchRun {
        name: "r",
        task: "ikat",
        settings: &settings,
        model_id: None,
        model_sha256: None,
        model_files: json!({}),
        collections: json!({}),
        inputs: json!({}),
        convrag_version: "0",
    };
    assert!(store
        .insert_batch_run(user.id, &run)
        .await
        .unwrap()
        .is_some());
    // A second worker recording the same run learns that it exists.
    assert!(store
        .insert_batch_run(user.id, &run)
        .await
        .unwrap()
        .is_none());
    let topics: Vec<String> = ["t1", "t2"].iter().map(|s| s.to_string()).collect();
    store.add_batch_topics(user.id, "r", &topics).await.unwrap();
    store.add_batch_topics(user.id, "r", &topics).await.unwrap();

    let claim = |worker: &'static str, lease: Duration| async move {
        store
            .claim_batch_topic(user.id, "r", worker, lease)
            .await
            .unwrap()
    };
    let first = claim("a", LONG).await.unwrap();
    assert_eq!(first.topic_id, "t1");
    assert_eq!(first.taken_from, None);
    // b's lease runs out at once: b is as good as dead.
    assert_eq!(claim("b", Duration::ZERO).await.unwrap().topic_id, "t2");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        claim("c", LONG).await,
        Some(ClaimedTopic {
            topic_id: "t2".into(),
            taken_from: Some("b".into())
        })
    );
    assert_eq!(claim("d", LONG).await, None);
    assert_eq!(
        store
            .renew_batch_leases(user.id, "r", "a", LONG)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .renew_batch_leases(user.id, "r", "b", LONG)
            .await
            .unwrap(),
        0
    );

    assert!(!store
        .finish_batch_topic(user.id, "r", "b", "t2")
        .await
        .unwrap());
    assert!(store
        .finish_batch_topic(user.id, "r", "c", "t2")
        .await
        .unwrap());
    assert_eq!(store.open_batch_topics(user.id, "r").await.unwrap(), 1);
    // A topic given back is claimable at once.
    store
        .release_batch_topic(user.id, "r", "a", "t1")
        .await
        .unwrap();
    assert_eq!(claim("e", LONG).await.unwrap().topic_id, "t1");
    assert!(store
        .finish_batch_topic(user.id, "r", "e", "t1")
        .await
        .unwrap());
    assert_eq!(store.open_batch_topics(user.id, "r").await.unwrap(), 0);

    let claims = futures_util::future::join_all((0..6).map(|i| {
        let store = store.clone();
        async move {
            store
                .claim_batch_render(user.id, "r", &format!("w{i}"), LONG)
                .await
                .unwrap()
        }
    }))
    .await;
    let mine = claims.iter().filter(|c| **c == RenderClaim::Mine).count();
    assert_eq!(mine, 1, "{claims:?}");
    let winner = (0..6).find(|i| claims[*i] == RenderClaim::Mine).unwrap();
    for c in claims.iter().filter(|c| **c != RenderClaim::Mine) {
        assert_eq!(*c, RenderClaim::Other(format!("w{winner}")));
    }
}
