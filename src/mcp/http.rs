//! `POST /mcp`: the streamable HTTP transport. Each POST carries one JSON-RPC message (or a
//! batch); requests are answered with `application/json`, notifications and responses with 202.
//! No session is kept (every request carries the bearer token), so no `Mcp-Session-Id` is issued
//! and `GET /mcp` (a server-to-client stream) answers 405.

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use serde_json::Value;

use super::{classify, handle, Message, RpcError, INVALID_REQUEST, PARSE_ERROR};
use crate::web::error::ApiError;
use crate::web::extract::AuthUser;
use crate::web::schema::{add_keywords, keywords_only};
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
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let user = match AuthUser::from_request(&req, &mut Payload::None).await {
        Ok(AuthUser(user)) => user,
        Err(e) => return Ok(auth_refusal(&e, &body)),
    };
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

/// JSON-RPC's code for a refused token (the implementation-defined server error range).
pub const UNAUTHORIZED: i64 = -32001;

/// A refused token: the HTTP status and `WWW-Authenticate` an MCP client's authorization flow
/// starts from, with a JSON-RPC error body (the request's id when there is one) whose message
/// MCP clients show, and whose `data` has convrag's error code.
fn auth_refusal(error: &ApiError, body: &[u8]) -> HttpResponse {
    let error = error
        .clone()
        .for_client(crate::web::current_request_id().as_deref());
    let id = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|m| m.get("id").cloned())
        .unwrap_or(Value::Null);
    let mut reply = RpcError::new(UNAUTHORIZED, error.message.clone()).response(id);
    reply["error"]["data"] = serde_json::json!({"code": error.code.as_str()});
    error.response_with_body(reply)
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

/// `POST /mcp` reads one JSON-RPC message or a batch, as [`classify`] tells them apart, and
/// answers a batch with an array.
pub struct JsonRpcBody;

impl utoipa::Modify for JsonRpcBody {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::{
            AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, SchemaType, Type,
        };
        use utoipa::openapi::{Ref, RefOr, Schema};
        let needs = |fields: &[&str]| {
            fields.iter().fold(
                ObjectBuilder::new().schema_type(SchemaType::AnyValue),
                |schema, field| schema.required(*field),
            )
        };
        let mut message = ObjectBuilder::new()
            .required("jsonrpc")
            .property(
                "jsonrpc",
                keywords_only(serde_json::json!({"const": "2.0"})),
            )
            .property("method", ObjectBuilder::new().schema_type(Type::String))
            .property(
                "id",
                ObjectBuilder::new()
                    .schema_type(SchemaType::from_iter([Type::String, Type::Number])),
            )
            .property(
                "params",
                ObjectBuilder::new().schema_type(SchemaType::AnyValue),
            )
            .build();
        let kinds = AnyOfBuilder::new()
            .item(needs(&["method"]))
            .item(needs(&["id", "result"]))
            .item(needs(&["id", "error"]))
            .build();
        add_keywords(&mut message.extensions, kinds);
        doc.components
            .get_or_insert_with(Default::default)
            .schemas
            .insert("JsonRpcMessage".into(), message.into());

        let Some(operation) = doc
            .paths
            .paths
            .get_mut("/mcp")
            .and_then(|i| i.post.as_mut())
        else {
            return;
        };
        let reply = OneOfBuilder::new()
            .item(ObjectBuilder::new())
            .item(ArrayBuilder::new().items(ObjectBuilder::new()))
            .build();
        let answered = operation.responses.responses.get_mut("200");
        if let Some(RefOr::T(answered)) = answered {
            if let Some(content) = answered.content.get_mut("application/json") {
                content.schema = Some(RefOr::T(Schema::OneOf(reply)));
            }
        }
        // `anyOf`, not `oneOf`: the two are disjoint anyway (object or array), and schemathesis
        // 4.32.5's coverage phase fails internally on this `oneOf`.
        let body = AnyOfBuilder::new()
            .item(Ref::from_schema_name("JsonRpcMessage"))
            .item(
                ArrayBuilder::new()
                    .min_items(Some(1))
                    .items(Ref::from_schema_name("JsonRpcMessage")),
            )
            .build();
        let content = operation
            .request_body
            .as_mut()
            .and_then(|b| b.content.get_mut("application/json"));
        if let Some(content) = content {
            content.schema = Some(RefOr::T(Schema::AnyOf(body)));
        }
    }
}
