//! A conversation's PTKB statements. Changes apply from the next turn on; earlier turns keep
//! the statements they saw (`?at_turn=N` shows them).

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::error::ApiError;
use super::extract::{parse_uuid, ApiJson, ApiQuery, AuthUser};
use super::AppState;
use crate::store::NewStatement;

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StatementInput {
    /// Stable id; the next free number when absent.
    pub id: Option<String>,
    pub text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditStatement {
    pub text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// The PTKB as this turn position saw it.
    pub at_turn: Option<i32>,
    /// Every version of every statement.
    #[serde(default)]
    pub history: bool,
}

/// `GET /v1/conversations/{conversation_id}/ptkb`
pub async fn list(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: ApiQuery<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_uuid("conversation_id", &path)?;
    let statements = if query.0.history {
        state.store.ptkb_history(user.id, id).await?
    } else {
        state.store.ptkb(user.id, id, query.0.at_turn).await?
    };
    Ok(HttpResponse::Ok().json(json!({"statements": statements})))
}

/// `POST /v1/conversations/{conversation_id}/ptkb`
pub async fn add(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: ApiJson<StatementInput>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_uuid("conversation_id", &path)?;
    let new = NewStatement {
        id: body.0.id,
        text: body.0.text,
    };
    let statement = state.store.add_statement(user.id, id, new).await?;
    Ok(HttpResponse::Created().json(json!({"statement": statement})))
}

/// `PUT /v1/conversations/{conversation_id}/ptkb/{statement_id}`
pub async fn edit(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: ApiJson<EditStatement>,
) -> Result<HttpResponse, ApiError> {
    let (conversation, statement_id) = path.into_inner();
    let id = parse_uuid("conversation_id", &conversation)?;
    let statement = state
        .store
        .edit_statement(user.id, id, &statement_id, &body.0.text)
        .await?;
    Ok(HttpResponse::Ok().json(json!({"statement": statement})))
}

/// `DELETE /v1/conversations/{conversation_id}/ptkb/{statement_id}`
pub async fn remove(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (conversation, statement_id) = path.into_inner();
    let id = parse_uuid("conversation_id", &conversation)?;
    state
        .store
        .remove_statement(user.id, id, &statement_id)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
