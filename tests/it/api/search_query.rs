//! A turn's search query through the API: each word with where it came from, in a two-turn
//! conversation with a PTKB (real PostgreSQL, the recipe fixture, the real default model); a
//! turn stored before the query was kept still reads, without it.

use serde_json::{json, Value};

use super::turns::{conversation, setup, turn, VEGETARIAN};
use crate::common::{new_user, Client};

/// (text, origin, turn, ptkb_id) of every word of the turn's search query.
fn words(turn: &Value) -> Vec<(&str, &str, Option<u64>, Option<&str>)> {
    turn["search_query"]["words"]
        .as_array()
        .unwrap_or_else(|| panic!("no search query: {turn}"))
        .iter()
        .map(|w| {
            (
                w["text"].as_str().unwrap(),
                w["origin"].as_str().unwrap(),
                w["turn"].as_u64(),
                w["ptkb_id"].as_str(),
            )
        })
        .collect()
}

fn selected_ids(turn: &Value) -> Vec<&str> {
    turn["ptkb_ranking"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["selected"] == true)
        .map(|s| s["id"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_says_where_each_word_of_the_search_query_came_from() {
    let s = setup(true, None).await;
    let alice = new_user(&Client::new(&s.server, None), "alice").await;
    let conv = conversation(&alice, "veg", &VEGETARIAN).await;

    // Turn 1: the rewrite (the utterance speaks of the user, so the rewriter wrote the statement's
    // first word into it), then the content words of the selected statement ("I am vegetarian
    // and never cook meat.": not "I", "am", "and"), which the first stage adds at their weight.
    let first = turn(
        &alice,
        &conv,
        json!({"utterance": "What should I cook for dinner tonight?"}),
    )
    .await;
    assert_eq!(selected_ids(&first), ["1"], "{}", first["ptkb_ranking"]);
    assert_eq!(
        first["search_query"]["text"],
        "What should I cook for dinner tonight? vegetarian vegetarian never cook meat"
    );
    let u = |w| (w, "utterance", None, None);
    let p = |w| (w, "ptkb", None, Some("1"));
    assert_eq!(
        words(&first),
        vec![
            u("What"),
            u("should"),
            u("I"),
            u("cook"),
            u("for"),
            u("dinner"),
            u("tonight"),
            p("vegetarian"),
            p("vegetarian"),
            p("never"),
            p("cook"),
            p("meat"),
        ]
    );

    assert!(
        first["diagnostics"].get("search_query").is_none(),
        "shown once"
    );

    // Turn 2: "it" is turn 1's dinner, written with its words (the phrase "cook for dinner
    // tonight" whole) and words of turn 1's answer (its risotto is "from northern Italy"); the
    // utterance speaks of the user again, so the statement's content words follow: all four
    // origins in one query.
    let second = turn(&alice, &conv, json!({"utterance": "How do I make it?"})).await;
    assert_eq!(second["seq"], 2);
    assert_eq!(selected_ids(&second), ["1"], "{}", second["ptkb_ranking"]);
    assert_eq!(
        second["search_query"]["text"],
        "How do I make cook for dinner tonight Italy? vegetarian vegetarian never cook meat",
        "turn 1 answered: {}",
        first["response_text"]
    );
    assert!(
        first["response_text"]
            .as_str()
            .unwrap()
            .contains("vegetarian"),
        "{}",
        first["response_text"]
    );
    let h = |w| (w, "history", Some(1), None);
    assert_eq!(
        words(&second),
        vec![
            u("How"),
            u("do"),
            u("I"),
            u("make"),
            h("cook"),
            h("for"),
            h("dinner"),
            h("tonight"),
            ("Italy", "answer", Some(1), None),
            ("vegetarian", "answer", Some(1), None),
            p("vegetarian"),
            p("never"),
            p("cook"),
            p("meat"),
        ]
    );

    // Reading the turn again gives the same query.
    let id = second["id"].as_str().unwrap();
    let path = format!("/v1/conversations/{conv}/turns/{id}");
    let stored = alice.get(&path).await;
    assert_eq!(stored.body["turn"], second);

    // A turn stored before the query was kept: read without it, not an error.
    sqlx::query("UPDATE turns SET diagnostics = diagnostics - 'search_query' WHERE id = $1::uuid")
        .bind(id)
        .execute(s.db.store.pool())
        .await
        .unwrap();
    let old = alice.get(&path).await;
    assert_eq!(old.status, 200, "{:?}", old.body);
    let old = &old.body["turn"];
    assert!(old.get("search_query").is_none(), "{old}");
    assert_eq!(old["rewritten_utterance"], second["rewritten_utterance"]);
    s.server.stop().await;
}
