//! The user's profile statements: copied into the PTKB of every conversation created afterwards.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::store::profile::ProfileStatement;
use crate::web::error::ApiError;
use crate::web::extract::{ApiJson, AuthUser};
use crate::web::AppState;

/// Body of `POST /v1/profile/statements`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddStatement {
    #[schema(min_length = 1, max_length = 2000, pattern = "NONBLANK")]
    pub text: String,
}

#[derive(Serialize, ToSchema)]
pub struct ProfileStatementList {
    /// Oldest first.
    pub statements: Vec<ProfileStatement>,
}

#[derive(Serialize, ToSchema)]
pub struct ProfileStatementEnvelope {
    pub statement: ProfileStatement,
}

/// The `{statement_id}` of a profile route.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // documents the path; the handler parses it to name it in errors
pub struct ProfileStatementPath {
    #[param(minimum = 1)]
    pub statement_id: i64,
}

/// `GET /v1/profile/statements`
#[utoipa::path(get, path = "/v1/profile/statements", operation_id = "list_profile_statements",
    tag = "profile", responses((status = 200, description = "Your profile", body = ProfileStatementList)))]
pub async fn list(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let statements = state.conversations.profile(user.id).await?;
    Ok(HttpResponse::Ok().json(ProfileStatementList { statements }))
}

/// `POST /v1/profile/statements`
#[utoipa::path(post, path = "/v1/profile/statements", operation_id = "add_profile_statement",
    tag = "profile", request_body = AddStatement,
    responses((status = 201, description = "The statement (new conversations start with it)", body = ProfileStatementEnvelope, links(
        ("RemoveProfileStatement" = (operation_id = "remove_profile_statement",
            parameters(("statement_id" = "$response.body#/statement/id")))),
    ))))]
pub async fn add(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    body: ApiJson<AddStatement>,
) -> Result<HttpResponse, ApiError> {
    let statement = state
        .conversations
        .add_profile_statement(user.id, &body.0.text)
        .await?;
    Ok(HttpResponse::Created().json(ProfileStatementEnvelope { statement }))
}

/// `DELETE /v1/profile/statements/{statement_id}`
#[utoipa::path(delete, path = "/v1/profile/statements/{statement_id}", operation_id = "remove_profile_statement",
    tag = "profile", params(ProfileStatementPath),
    responses((status = 204, description = "Removed (conversations already started keep it)")))]
pub async fn remove(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_statement_id(&path)?;
    state
        .conversations
        .remove_profile_statement(user.id, id)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

pub fn parse_statement_id(value: &str) -> Result<i64, ApiError> {
    value
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::invalid("statement_id", format!("{value:?} is not a valid id")))
}
