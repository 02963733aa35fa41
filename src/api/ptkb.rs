//! A conversation's PTKB statements. Changes apply from the next turn on; earlier turns keep
//! the statements they saw (`?at_turn=N` shows them).

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::store::ptkb::Statement;
use crate::store::NewStatement;
use crate::web::error::ApiError;
use crate::web::extract::{parse_uuid, ApiJson, ApiQuery, AuthUser};
use crate::web::AppState;

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StatementInput {
    /// Stable id (unique in the conversation); the next free number when absent.
    #[schema(min_length = 1, max_length = 64, pattern = "IDENTIFIER")]
    pub id: Option<String>,
    #[schema(min_length = 1, max_length = 2000, pattern = "NONBLANK")]
    pub text: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EditStatement {
    #[schema(min_length = 1, max_length = 2000, pattern = "NONBLANK")]
    pub text: String,
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// The PTKB as this turn position (1-based) saw it.
    #[param(minimum = 1, maximum = 2147483647)]
    pub at_turn: Option<i32>,
    /// Every version of every statement.
    #[serde(default)]
    pub history: bool,
}

/// The `{conversation_id}` and `{statement_id}` of a route.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // documents the path; handlers parse it to name it in errors
pub struct StatementPath {
    pub conversation_id: uuid::Uuid,
    #[param(min_length = 1, max_length = 64, pattern = "IDENTIFIER")]
    pub statement_id: String,
}

#[derive(Serialize, ToSchema)]
pub struct StatementList {
    pub statements: Vec<Statement>,
}

#[derive(Serialize, ToSchema)]
pub struct StatementEnvelope {
    pub statement: Statement,
}

/// A statement id from the path: a malformed one names the parameter.
fn statement_key(value: &str) -> Result<&str, ApiError> {
    crate::store::ptkb::validate_statement_id(value)
        .map(|()| value)
        .map_err(|e| ApiError::invalid("statement_id", ApiError::from(e).message))
}

/// `GET /v1/conversations/{conversation_id}/ptkb`
#[utoipa::path(get, path = "/v1/conversations/{conversation_id}/ptkb", operation_id = "list_ptkb",
    tag = "ptkb", params(super::model::ConversationPath, ListQuery),
    responses((status = 200, description = "The statements (current, at a turn, or every version)", body = StatementList)))]
pub async fn list(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: ApiQuery<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_uuid("conversation_id", &path)?;
    // Checked here too so that `history=true` does not hide a bad value.
    if query.0.at_turn.is_some_and(|seq| seq < 1) {
        return Err(ApiError::invalid(
            "at_turn",
            "must be a turn position of 1 or more",
        ));
    }
    let statements = if query.0.history {
        state.conversations.ptkb_history(user.id, id).await?
    } else {
        state
            .conversations
            .ptkb(user.id, id, query.0.at_turn)
            .await?
    };
    Ok(HttpResponse::Ok().json(StatementList { statements }))
}

/// `POST /v1/conversations/{conversation_id}/ptkb`
#[utoipa::path(post, path = "/v1/conversations/{conversation_id}/ptkb", operation_id = "add_ptkb_statement",
    tag = "ptkb", params(super::model::ConversationPath), request_body = StatementInput,
    responses((status = 201, description = "The statement, visible from the next turn", body = StatementEnvelope, links(
        ("EditPtkbStatement" = (operation_id = "edit_ptkb_statement", parameters(
            ("conversation_id" = "$request.path.conversation_id"),
            ("statement_id" = "$response.body#/statement/id")))),
        ("RemovePtkbStatement" = (operation_id = "remove_ptkb_statement", parameters(
            ("conversation_id" = "$request.path.conversation_id"),
            ("statement_id" = "$response.body#/statement/id")))),
    ))))]
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
    let statement = state.conversations.add_statement(user.id, id, new).await?;
    Ok(HttpResponse::Created().json(StatementEnvelope { statement }))
}

/// `PUT /v1/conversations/{conversation_id}/ptkb/{statement_id}`
#[utoipa::path(put, path = "/v1/conversations/{conversation_id}/ptkb/{statement_id}",
    operation_id = "edit_ptkb_statement", tag = "ptkb", params(StatementPath),
    request_body = EditStatement,
    responses((status = 200, description = "The new version, visible from the next turn", body = StatementEnvelope)))]
pub async fn edit(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: ApiJson<EditStatement>,
) -> Result<HttpResponse, ApiError> {
    let (conversation, statement_id) = path.into_inner();
    let id = parse_uuid("conversation_id", &conversation)?;
    let statement_id = statement_key(&statement_id)?;
    let statement = state
        .conversations
        .edit_statement(user.id, id, statement_id, &body.0.text)
        .await?;
    Ok(HttpResponse::Ok().json(StatementEnvelope { statement }))
}

/// `DELETE /v1/conversations/{conversation_id}/ptkb/{statement_id}`
#[utoipa::path(delete, path = "/v1/conversations/{conversation_id}/ptkb/{statement_id}",
    operation_id = "remove_ptkb_statement", tag = "ptkb", params(StatementPath),
    responses((status = 204, description = "Hidden from the next turn on")))]
pub async fn remove(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (conversation, statement_id) = path.into_inner();
    let id = parse_uuid("conversation_id", &conversation)?;
    let statement_id = statement_key(&statement_id)?;
    state
        .conversations
        .remove_statement(user.id, id, statement_id)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
