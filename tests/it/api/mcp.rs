//! The MCP server over its streamable HTTP transport (`POST /mcp`): the handshake, the tools,
//! the resources and the errors, over real HTTP against real PostgreSQL and a real index.

use crate::api::openai::setup;
use crate::common::{new_user, Client};

use serde_json::{json, Value};

/// Posts one JSON-RPC message; returns the status and the body (Null when empty).
async fn rpc(client: &Client, message: Value) -> (u16, Value) {
    let mut request = client
        .http
        .post(format!("{}/mcp", client.base))
        .header("accept", "application/json, text/event-stream")
        .json(&message);
    if let Some(token) = &client.token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    (status, body)
}

async fn call(client: &Client, id: u64, tool: &str, arguments: Value) -> Value {
    let (status, body) = rpc(
        client,
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], id);
    body["result"].clone()
}

#[tokio::test]
async fn handshake_tools_and_resources() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;

    let (status, body) = rpc(
        &alice,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["result"]["protocolVersion"], "2025-06-18");
    let (status, body) = rpc(
        &alice,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!((status, body), (202, Value::Null));
    let (_, body) = rpc(
        &alice,
        json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}),
    )
    .await;
    assert_eq!(body, json!({"jsonrpc": "2.0", "id": "p", "result": {}}));
    let (_, body) = rpc(
        &alice,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let names: Vec<&str> = body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"search") && names.contains(&"ask") && names.contains(&"add_ptkb"));

    let result = call(
        &alice,
        3,
        "search",
        json!({"collection": "diet", "query": "peanut allergy", "k": 3}),
    )
    .await;
    assert_eq!(result["isError"], false, "{result}");
    let results = result["structuredContent"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert!(results[0]["text"]
        .as_str()
        .unwrap()
        .to_lowercase()
        .contains("peanut"));
    assert!(result["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("[1] "));

    let result = call(
        &alice,
        4,
        "ask",
        json!({"collection": "diet", "question": "What should I check when I eat out?"}),
    )
    .await;
    assert_eq!(result["isError"], false, "{result}");
    let answer = &result["structuredContent"];
    let conversation = answer["conversation_id"].as_str().unwrap().to_string();
    assert_eq!(answer["turn"], 1);
    let text = answer["answer"].as_str().unwrap();
    let cited: Vec<u64> = answer["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["n"].as_u64().unwrap())
        .collect();
    assert!(!cited.is_empty());
    for n in &cited {
        assert!(text.contains(&format!("[{n}]")), "{text}");
    }

    let result = call(
        &alice,
        5,
        "add_ptkb",
        json!({"conversation_id": conversation, "text": "I have a peanut allergy."}),
    )
    .await;
    assert_eq!(result["isError"], false, "{result}");
    let result = call(
        &alice,
        6,
        "list_ptkb",
        json!({"conversation_id": conversation}),
    )
    .await;
    assert_eq!(
        result["structuredContent"]["statements"][0]["text"],
        "I have a peanut allergy."
    );
    let result = call(
        &alice,
        7,
        "ask",
        json!({"conversation_id": conversation, "question": "What should I check when I eat out?"}),
    )
    .await;
    assert_eq!(result["structuredContent"]["turn"], 2);
    assert!(result["structuredContent"]["ptkb_used"].is_array());
    let result = call(
        &alice,
        8,
        "remove_ptkb",
        json!({"conversation_id": conversation, "statement_id": "1"}),
    )
    .await;
    assert_eq!(result["isError"], false, "{result}");
    let result = call(
        &alice,
        9,
        "list_ptkb",
        json!({"conversation_id": conversation}),
    )
    .await;
    assert_eq!(result["structuredContent"]["statements"], json!([]));

    let result = call(
        &alice,
        10,
        "add_profile",
        json!({"text": "I live in Edinburgh."}),
    )
    .await;
    let profile_id = result["structuredContent"]["statement"]["id"]
        .as_i64()
        .unwrap();
    let result = call(&alice, 11, "list_profile", json!({})).await;
    assert_eq!(
        result["structuredContent"]["statements"][0]["text"],
        "I live in Edinburgh."
    );
    let result = call(&alice, 12, "remove_profile", json!({"id": profile_id})).await;
    assert_eq!(result["isError"], false, "{result}");

    let (_, body) = rpc(
        &alice,
        json!({"jsonrpc": "2.0", "id": 13, "method": "resources/list"}),
    )
    .await;
    let resources = body["result"]["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 1);
    let uri = resources[0]["uri"].as_str().unwrap();
    assert_eq!(uri, format!("convrag://conversations/{conversation}"));
    let (_, body) = rpc(
        &alice,
        json!({"jsonrpc": "2.0", "id": 14, "method": "resources/read", "params": {"uri": uri}}),
    )
    .await;
    let contents = &body["result"]["contents"][0];
    assert_eq!(contents["mimeType"], "application/json");
    let stored: Value = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
    assert_eq!(stored["turns"].as_array().unwrap().len(), 2);
    // Turn 2 ranked the statement added before it; turn 1 had none.
    assert_eq!(stored["turns"][0]["ptkb_ranking"], json!([]));
    assert_eq!(
        stored["turns"][1]["ptkb_ranking"][0]["text"],
        "I have a peanut allergy."
    );

    // Bob sees none of it.
    let bob = new_user(&anon, "bob").await;
    let result = call(
        &bob,
        1,
        "ask",
        json!({"conversation_id": conversation, "question": "more?"}),
    )
    .await;
    assert_eq!(result["isError"], true);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("conversation_id"),
        "{result}"
    );
    let result = call(
        &bob,
        2,
        "list_ptkb",
        json!({"conversation_id": conversation}),
    )
    .await;
    assert_eq!(result["isError"], true);
    let (_, body) = rpc(
        &bob,
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": uri}}),
    )
    .await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let (_, body) = rpc(
        &bob,
        json!({"jsonrpc": "2.0", "id": 4, "method": "resources/list"}),
    )
    .await;
    assert_eq!(body["result"]["resources"], json!([]));
    let result = call(&bob, 5, "remove_profile", json!({"id": profile_id})).await;
    assert_eq!(result["isError"], true);
}

#[tokio::test]
async fn protocol_errors() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;

    let (status, body) = rpc(&anon, json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).await;
    assert_eq!(status, 401);
    // A JSON-RPC error, which MCP clients show; convrag's code in its data.
    assert_eq!(body["error"]["code"], -32001);
    assert_eq!(body["error"]["data"]["code"], "missing_token");
    assert_eq!(body["id"], 1);

    let r = alice
        .raw("POST", "/mcp", "application/json", b"{not json".to_vec())
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["code"], -32700);
    assert_eq!(r.body["id"], Value::Null);

    let (_, body) = rpc(
        &alice,
        json!({"jsonrpc": "2.0", "id": 2, "method": "sampling/nothing"}),
    )
    .await;
    assert_eq!(body["error"]["code"], -32601);
    let (_, body) = rpc(
        &alice,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope"}}),
    )
    .await;
    assert_eq!(body["error"]["code"], -32602);
    // Not a JSON-RPC message (alone, in a batch, or no message at all): refused with 400.
    let (status, body) = rpc(&alice, json!({"jsonrpc": "2.0", "id": 4, "method": 7})).await;
    assert_eq!((status, &body["error"]["code"]), (400, &json!(-32600)));
    let (status, body) = rpc(
        &alice,
        json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
    )
    .await;
    assert_eq!((status, &body["error"]["code"]), (400, &json!(-32600)));
    let (status, body) = rpc(
        &alice,
        json!([{"jsonrpc": "2.0", "id": 5, "method": "ping"}, 17]),
    )
    .await;
    assert_eq!((status, &body["error"]["code"]), (400, &json!(-32600)));
    let (status, _) = rpc(&alice, json!([])).await;
    assert_eq!(status, 400);

    // Bad tool arguments are tool errors naming the argument.
    let result = call(&alice, 5, "search", json!({"collection": "diet"})).await;
    assert_eq!(result["isError"], true);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("query"),
        "{result}"
    );
    let result = call(
        &alice,
        6,
        "search",
        json!({"collection": "nope", "query": "x"}),
    )
    .await;
    assert_eq!(result["isError"], true);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("collection"),
        "{result}"
    );
    let result = call(&alice, 7, "ask", json!({"question": "x"})).await;
    assert_eq!(result["isError"], true);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("collection"),
        "{result}"
    );

    // A batch: answers for the requests only.
    let (status, body) = rpc(
        &alice,
        json!([
            {"jsonrpc": "2.0", "id": 8, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ]),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body, json!([{"jsonrpc": "2.0", "id": 8, "result": {}}]));

    let r = alice.get("/mcp").await;
    assert_eq!(r.status, 405);
}
