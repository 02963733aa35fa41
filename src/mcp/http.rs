//! `POST /mcp`: the streamable HTTP transport. Each POST carries one JSON-RPC message (or a
//! batch); requests are answered with `application/json`, notifications and responses with 202.
//! No session is kept (every request carries the bearer token), so no `Mcp-Session-Id` is issued
//! and `GET /mcp` (a server-to-client stream) answers 405.

use actix_web::{web, HttpResponse};
use serde_json::Value;

use super::{classify, handle, Message, RpcError, INVALID_REQUEST, PARSE_ERROR};
use crate::web::error::ApiError;
use crate::web::extract::AuthUser;
use crate::web::AppState;

/// `POST /mcp`. A message that is not a JSON-RPC request, notification or response (or a batch
/// holding one, or an empty batch) is refused with 400 and the JSON-RPC error, as the
/// streamable HTTP transport asks; requests are answered with 200 even when the JSON-RPC
/// result is an error.
#[utoipa::path(post, path = "/mcp", operation_id = "mcp", tag = "mcp",
    request_body(content = Object, description = "A JSON-RPC 2.0 message or a batch of them (see `JsonRpcMessage`)"),
    responses(
        (status = 200, description = "The JSON-RPC response(s)", body = Object),
        (status = 202, description = "Only notifications or responses: nothing to answer"),
        (status = 400, description = "Not JSON, or not a JSON-RPC message: a JSON-RPC error (id null or the message's)", body = Object),
    ))]
pub async fn post(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let message: Value = match serde_json::from_slice(&body) {
        Ok(message) => message,
        Err(e) => {
            let error = RpcError::new(PARSE_ERROR, format!("malformed JSON: {e}"));
            return Ok(HttpResponse::BadRequest().json(error.response(Value::Null)));
        }
    };
    if let Some(error) = invalid(&message) {
        return Ok(HttpResponse::BadRequest().json(error));
    }
    let reply = match message {
        Value::Array(batch) => {
            let mut replies = Vec::new();
            for message in &batch {
                replies.extend(handle(&state, &user, message).await);
            }
            (!replies.is_empty()).then_some(Value::Array(replies))
        }
        message => handle(&state, &user, &message).await,
    };
    Ok(match reply {
        Some(reply) => HttpResponse::Ok().json(reply),
        None => HttpResponse::Accepted().finish(),
    })
}

/// The JSON-RPC error for a body that is no message: an empty batch, or any part that is not a
/// request, notification or response.
fn invalid(message: &Value) -> Option<Value> {
    let messages = match message {
        Value::Array(batch) if batch.is_empty() => {
            return Some(RpcError::new(INVALID_REQUEST, "an empty batch").response(Value::Null))
        }
        Value::Array(batch) => batch.iter().collect(),
        single => vec![single],
    };
    messages.into_iter().find_map(|m| match classify(m) {
        Message::Invalid { id, reason } => {
            Some(RpcError::new(INVALID_REQUEST, reason).response(id))
        }
        _ => None,
    })
}
