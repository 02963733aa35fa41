//! `POST /mcp`: the streamable HTTP transport. Each POST carries one JSON-RPC message (or a
//! batch); requests are answered with `application/json`, notifications and responses with 202.
//! No session is kept (every request carries the bearer token), so no `Mcp-Session-Id` is issued
//! and `GET /mcp` (a server-to-client stream) answers 405.

use actix_web::{web, HttpResponse};
use serde_json::Value;

use super::{handle, RpcError, PARSE_ERROR};
use crate::api::error::ApiError;
use crate::api::extract::AuthUser;
use crate::api::AppState;

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
