//! A Model Context Protocol server: agents search collections, ask (run a turn and get the
//! answer with its cited passages), and read and change the PTKB and the profile, as tools; the
//! user's conversations are resources.
//!
//! The protocol lives here once, server-side: `POST /mcp` (the streamable HTTP transport, JSON
//! replies, bearer token) answers the JSON-RPC 2.0 messages, and `convrag mcp` ([`stdio`]) is a
//! bridge from stdio to that route. rmcp, the maintained Rust crate, serves through axum/tower
//! and not actix-web, so the few messages needed are implemented here: `initialize`,
//! `notifications/initialized`, `ping`, `tools/list`, `tools/call`, `resources/list`,
//! `resources/templates/list`, `resources/read` (handshake revisions 2024-11-05 to 2025-11-25).

pub mod http;
pub mod resources;
pub mod tools;

use serde_json::{json, Value};

use crate::store::User;
use crate::web::AppState;

/// Revisions of the `initialize` handshake this server speaks, oldest first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// A JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn response(&self, id: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": self.code, "message": self.message}})
    }
}

/// The version the server answers `initialize` with: the client's when supported, else the
/// newest this server speaks (the client then decides whether it can continue).
pub fn negotiate_version(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| PROTOCOL_VERSIONS.iter().find(|v| **v == r))
        .copied()
        .unwrap_or(PROTOCOL_VERSIONS[PROTOCOL_VERSIONS.len() - 1])
}

/// What a JSON-RPC message is.
#[derive(Debug, PartialEq)]
pub enum Message<'a> {
    Request {
        id: Value,
        method: &'a str,
        params: Value,
    },
    /// A notification, or a response to a request of ours: nothing to answer.
    NoReply,
    Invalid {
        id: Value,
        reason: &'static str,
    },
}

pub fn classify(message: &Value) -> Message<'_> {
    let Some(object) = message.as_object() else {
        return Message::Invalid {
            id: Value::Null,
            reason: "a JSON-RPC message must be an object",
        };
    };
    let id = object.get("id").cloned();
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Message::Invalid {
            id: id
                .filter(|id| id.is_string() || id.is_number())
                .unwrap_or(Value::Null),
            reason: "jsonrpc must be \"2.0\"",
        };
    }
    // MCP: an id is a string or a number, never null.
    if let Some(id) = id.as_ref().filter(|id| !(id.is_string() || id.is_number())) {
        return Message::Invalid {
            id: id.clone(),
            reason: "id must be a string or a number",
        };
    }
    match (object.get("method"), id) {
        (Some(Value::String(method)), Some(id)) if id.is_string() || id.is_number() => {
            Message::Request {
                id,
                method,
                params: object.get("params").cloned().unwrap_or(Value::Null),
            }
        }
        (Some(Value::String(_)), None) => Message::NoReply,
        (Some(_), id) => Message::Invalid {
            id: id.unwrap_or(Value::Null),
            reason: "method must be a string and id a string or number",
        },
        (None, Some(_)) if object.contains_key("result") || object.contains_key("error") => {
            Message::NoReply
        }
        (None, id) => Message::Invalid {
            id: id.unwrap_or(Value::Null),
            reason: "not a JSON-RPC request, notification or response",
        },
    }
}

/// Answers one JSON-RPC message for `user`: the response for a request, `None` otherwise.
pub async fn handle(state: &AppState, user: &User, message: &Value) -> Option<Value> {
    match classify(message) {
        Message::NoReply => None,
        Message::Invalid { id, reason } => {
            Some(RpcError::new(INVALID_REQUEST, reason).response(id))
        }
        Message::Request { id, method, params } => {
            match dispatch(state, user, method, &params).await {
                Ok(result) => Some(json!({"jsonrpc": "2.0", "id": id, "result": result})),
                Err(e) => Some(e.response(id)),
            }
        }
    }
}

async fn dispatch(
    state: &AppState,
    user: &User,
    method: &str,
    params: &Value,
) -> Result<Value, RpcError> {
    match method {
        "initialize" => Ok(initialize_result(
            params.get("protocolVersion").and_then(Value::as_str),
        )),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": tools::definitions() })),
        "tools/call" => {
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| RpcError::new(INVALID_PARAMS, "params.name must name a tool"))?;
            let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
            tools::call(state, user, name, arguments).await
        }
        "resources/list" => resources::list(state, user).await,
        "resources/templates/list" => Ok(resources::templates()),
        "resources/read" => {
            let uri = params
                .get("uri")
                .and_then(Value::as_str)
                .ok_or_else(|| RpcError::new(INVALID_PARAMS, "params.uri must be a string"))?;
            resources::read(state, user, uri).await
        }
        other => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!("method {other:?} is not supported"),
        )),
    }
}

fn initialize_result(requested: Option<&str>) -> Value {
    json!({
        "protocolVersion": negotiate_version(requested),
        "capabilities": {
            "tools": {"listChanged": false},
            "resources": {"listChanged": false, "subscribe": false},
        },
        "serverInfo": {"name": "convrag", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "convrag answers questions from passage collections with cited passages, \
            personalized by statements about the user (the PTKB of each conversation, and the \
            profile copied into every new conversation). Use `ask` for answers, `search` for raw \
            passages.",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_negotiated() {
        assert_eq!(negotiate_version(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate_version(Some("2024-11-05")), "2024-11-05");
        assert_eq!(negotiate_version(Some("2099-01-01")), "2025-11-25");
        assert_eq!(negotiate_version(None), "2025-11-25");
    }

    #[test]
    fn messages_are_classified() {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        assert_eq!(
            classify(&request),
            Message::Request {
                id: json!(1),
                method: "ping",
                params: Value::Null
            }
        );
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(classify(&notification), Message::NoReply);
        let response = json!({"jsonrpc": "2.0", "id": "a", "result": {}});
        assert_eq!(classify(&response), Message::NoReply);
        assert!(matches!(
            classify(&json!([1])),
            Message::Invalid {
                id: Value::Null,
                ..
            }
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc": "2.0", "id": 3, "method": 5})),
            Message::Invalid { .. }
        ));
        // Only JSON-RPC 2.0: a missing or other `jsonrpc` is an invalid request.
        for version in [json!(null), json!({}), json!("1.0"), json!(2.0)] {
            let message = json!({"jsonrpc": version, "id": 4, "method": "ping"});
            assert_eq!(
                classify(&message),
                Message::Invalid {
                    id: json!(4),
                    reason: "jsonrpc must be \"2.0\""
                }
            );
        }
        assert!(matches!(
            classify(&json!({"id": 5, "method": "ping"})),
            Message::Invalid { .. }
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"})),
            Message::Invalid { .. }
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc": "2.0", "id": 7})),
            Message::Invalid { .. }
        ));
    }

    #[test]
    fn initialize_declares_tools_and_resources() {
        let result = initialize_result(Some("2025-03-26"));
        assert_eq!(result["protocolVersion"], "2025-03-26");
        assert!(result["capabilities"]["tools"].is_object());
        assert!(result["capabilities"]["resources"].is_object());
        assert_eq!(result["serverInfo"]["name"], "convrag");
    }

    #[test]
    fn errors_carry_the_request_id() {
        let e = RpcError::new(METHOD_NOT_FOUND, "nope").response(json!(9));
        assert_eq!(e["id"], 9);
        assert_eq!(e["error"]["code"], -32601);
    }
}
