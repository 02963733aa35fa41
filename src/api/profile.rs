//! The user's profile statements: copied into the PTKB of every conversation created afterwards.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;

use super::error::ApiError;
use super::extract::{ApiJson, AuthUser};
use super::AppState;

/// Body of `POST /v1/profile/statements`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddStatement {
    pub text: String,
}

/// `GET /v1/profile/statements`
pub async fn list(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let statements = state.store.profile_statements(user.id).await?;
    Ok(HttpResponse::Ok().json(json!({ "statements": statements })))
}

/// `POST /v1/profile/statements`
pub async fn add(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    body: ApiJson<AddStatement>,
) -> Result<HttpResponse, ApiError> {
    let statement = state
        .store
        .add_profile_statement(user.id, &body.0.text)
        .await?;
    Ok(HttpResponse::Created().json(json!({ "statement": statement })))
}

/// `DELETE /v1/profile/statements/{statement_id}`
pub async fn remove(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_statement_id(&path)?;
    state.store.remove_profile_statement(user.id, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

pub fn parse_statement_id(value: &str) -> Result<i64, ApiError> {
    value
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::invalid("statement_id", format!("{value:?} is not a valid id")))
}
