//! OpenAI's Responses API over stored conversations, over real HTTP against real PostgreSQL and
//! the diet fixture (extractive answers): a response is a stored turn, `previous_response_id`
//! and `item_reference` name earlier turns, streams send the typed events in order, and
//! refusals come before the stream.

use crate::common;

use common::{new_user, Client};
use serde_json::{json, Value};

use super::openai::{markers, setup_with};

async fn create(client: &Client, body: Value) -> common::Reply {
    client.post("/v1/responses", body).await
}

/// The text of a response's one message.
fn text(response: &Value) -> &str {
    response["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
}

async fn turns(client: &Client, conversation: &str) -> Vec<Value> {
    let r = client
        .get(&format!("/v1/conversations/{conversation}/turns"))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["turns"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_response_is_a_stored_turn_continued_by_its_id_and_read_back() {
    let s = setup_with(|_| {}).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let first = create(
        &alice,
        json!({"model": "diet", "input": "What is a quick vegetarian dinner?",
            "instructions": "Answer briefly."}),
    )
    .await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let r = &first.body;
    assert_eq!(r["object"], "response");
    assert_eq!(r["status"], "completed");
    assert!(r["id"].as_str().unwrap().starts_with("resp_"));
    assert!(r["created_at"].is_i64());
    let message = &r["output"][0];
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert!(message["id"].as_str().unwrap().starts_with("msg_"));
    let answer = text(r);
    let numbers = markers(answer);
    assert!(!numbers.is_empty(), "{answer}");
    let annotations = message["content"][0]["annotations"].as_array().unwrap();
    assert!(!annotations.is_empty());
    for a in annotations {
        // The fixture's passages have web addresses.
        assert_eq!(a["type"], "url_citation", "{a}");
        let span: String = answer
            .chars()
            .skip(a["start_index"].as_u64().unwrap() as usize)
            .take((a["end_index"].as_u64().unwrap() - a["start_index"].as_u64().unwrap()) as usize)
            .collect();
        assert!(span.starts_with('[') && span.ends_with(']'), "{span}");
    }
    let usage = &r["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap()
    );
    let conversation = r["convrag"]["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(r["conversation"]["id"], conversation.as_str());
    let c = alice
        .get(&format!("/v1/conversations/{conversation}"))
        .await;
    assert_eq!(c.body["conversation"]["instructions"], "Answer briefly.");

    // previous_response_id continues that conversation with the new message only.
    let second = create(
        &alice,
        json!({"model": "diet", "previous_response_id": r["id"],
            "input": [{"role": "user", "content": [{"type": "input_text",
                "text": "How much protein does it have?"}]}]}),
    )
    .await;
    assert_eq!(second.status, 200, "{:?}", second.body);
    assert_eq!(
        second.body["convrag"]["conversation_id"],
        conversation.as_str()
    );
    assert_eq!(second.body["convrag"]["turn"], 2);
    assert_eq!(second.body["previous_response_id"], r["id"]);
    let stored = turns(&alice, &conversation).await;
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[1]["utterance"], "How much protein does it have?");

    // A whole history whose assistant message is a reference to the first response's message:
    // it matches the stored conversation and becomes its next turn.
    let third = create(
        &alice,
        json!({"model": "diet", "input": [
            {"role": "user", "content": "What is a quick vegetarian dinner?"},
            {"type": "item_reference", "id": message["id"]},
            {"role": "user", "content": "How much protein does it have?"},
            {"role": "assistant", "content": text(&second.body)},
            {"role": "user", "content": "Is it spicy?"}]}),
    )
    .await;
    assert_eq!(third.status, 200, "{:?}", third.body);
    assert_eq!(
        third.body["convrag"]["conversation_id"],
        conversation.as_str()
    );
    assert_eq!(third.body["convrag"]["turn"], 3);

    // Read back by id; another user's id is not found.
    let id = second.body["id"].as_str().unwrap();
    let read = alice.get(&format!("/v1/responses/{id}")).await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    assert_eq!(read.body["id"], id);
    assert_eq!(text(&read.body), text(&second.body));
    let bob = new_user(&anon, "bob").await;
    let r = bob.get(&format!("/v1/responses/{id}")).await;
    assert_eq!(
        (r.status, r.body["error"]["param"].as_str()),
        (404, Some("response_id"))
    );
    let r = create(
        &bob,
        json!({"model": "diet", "previous_response_id": id, "input": "More?"}),
    )
    .await;
    assert_eq!(
        (r.status, r.body["error"]["param"].as_str()),
        (404, Some("previous_response_id")),
        "{:?}",
        r.body
    );
    let r = create(
        &bob,
        json!({"model": "diet", "input": [{"type": "item_reference", "id": message["id"]},
            {"role": "user", "content": "More?"}]}),
    )
    .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    assert_eq!(r.body["error"]["param"], "input[0].id");
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_request_field_with_nothing_stored() {
    let s = setup_with(|_| {}).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let cases = [
        (json!({"model": "diet", "input": "  "}), "input"),
        (json!({"model": "diet", "input": "a\u{0}b"}), "input"),
        (
            json!({"model": "diet", "input": "Hi?", "instructions": "Be\u{0} brief."}),
            "instructions",
        ),
        (
            json!({"model": "diet", "input": [{"role": "assistant", "content": "x"},
                {"role": "user", "content": [{"type": "input_text", "text": "a\u{0}"}]}]}),
            "input[1].content",
        ),
        (
            json!({"model": "diet", "input": [{"role": "system", "content": "x"}]}),
            "input",
        ),
        (json!({"model": "diet", "input": 7}), "input"),
        (
            json!({"model": "diet", "input": "Hi?", "store": false}),
            "store",
        ),
        (
            json!({"model": "diet", "input": "Hi?", "previous_response_id": "resp_x"}),
            "previous_response_id",
        ),
    ];
    for (body, field) in cases {
        let r = create(&alice, body.clone()).await;
        assert_eq!(r.status, 400, "{body}: {:?}", r.body);
        assert_eq!(r.body["error"]["param"], field, "{body}: {:?}", r.body);
        assert_eq!(r.body["error"]["type"], "invalid_request_error");
    }
    let r = alice.get("/v1/conversations").await;
    assert_eq!(r.body["conversations"], json!([]));
}

/// The `data` of each event of a response stream, with its `event` name.
fn events(stream: &str) -> Vec<(String, Value)> {
    stream
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut name = String::new();
            let mut data = Value::Null;
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(d).unwrap();
                }
            }
            (name, data)
        })
        .collect()
}

#[tokio::test]
async fn a_streamed_response_sends_the_typed_events_in_order_and_refusals_before_it() {
    let s = setup_with(|c| c.limits.turns_per_minute = 2).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let send = |body: Value| {
        alice
            .http
            .post(format!("{}/v1/responses", alice.base))
            .bearer_auth(alice.token.as_deref().unwrap())
            .json(&body)
            .send()
    };
    let response = send(json!({"model": "diet", "stream": true,
        "input": "What is a quick vegetarian dinner?"}))
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    let stream = response.text().await.unwrap();
    let events = events(&stream);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    let expected_start = [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    assert_eq!(&names[..4], expected_start, "{names:?}");
    let expected_end = [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ];
    assert_eq!(&names[names.len() - 4..], expected_end, "{names:?}");
    for (i, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        assert_eq!(data["sequence_number"], i as u64);
    }
    let item_id = events[2].1["item"]["id"].as_str().unwrap();
    let deltas: String = events
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .map(|(_, d)| {
            assert_eq!(d["item_id"], item_id);
            d["delta"].as_str().unwrap()
        })
        .collect();
    let completed = &events.last().unwrap().1["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(text(completed), deltas);
    // The streamed ids are the stored ones: the created response is the completed one.
    assert_eq!(events[0].1["response"]["id"], completed["id"]);
    assert_eq!(completed["output"][0]["id"], item_id);
    let annotations = names
        .iter()
        .filter(|n| **n == "response.output_text.annotation.added")
        .count();
    assert_eq!(
        annotations,
        completed["output"][0]["content"][0]["annotations"]
            .as_array()
            .unwrap()
            .len()
    );

    // The second turn this minute is admitted; the third is refused before any event.
    let r = create(
        &alice,
        json!({"model": "diet", "input": "Which lentils cook fast?"}),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let refused = send(json!({"model": "diet", "stream": true, "input": "Beans?"}))
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().get("retry-after").is_some());
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    let r = alice.get("/v1/conversations").await;
    assert_eq!(r.body["conversations"].as_array().unwrap().len(), 2);
}
