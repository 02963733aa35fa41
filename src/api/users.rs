//! Users: created by an administrator, each with bearer tokens they can list, add and revoke;
//! a user can delete their account with all their data.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;

use super::error::ApiError;
use super::extract::{AdminAuth, ApiJson, AuthUser, OptionalJson};
use super::AppState;
use crate::store::NewToken;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    pub name: String,
    /// May use the administrator's routes.
    #[serde(default)]
    pub is_admin: bool,
    /// Lifetime of the first token (default: it does not expire).
    pub expires_in_seconds: Option<i64>,
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// `POST /v1/users` (administrator): creates a user and returns its first token.
pub async fn create(
    _admin: AdminAuth,
    state: web::Data<AppState>,
    body: ApiJson<CreateUser>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let first_token = NewToken {
        name: None,
        expires_in_seconds: body.expires_in_seconds,
        expires_at: body.expires_at,
    };
    let (user, info, token) = state
        .store
        .create_user_with(&body.name, body.is_admin, &first_token)
        .await?;
    Ok(HttpResponse::Created().json(json!({"user": user, "token": token, "token_info": info})))
}

/// `GET /v1/users/me`: the token's user.
pub async fn me(AuthUser(user): AuthUser) -> HttpResponse {
    HttpResponse::Ok().json(json!({"user": user}))
}

/// `DELETE /v1/users/me`: deletes the account and everything it owns, at once.
pub async fn delete_me(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    state.store.delete_user(user.id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /v1/users/me/tokens`: an additional token for the same user (body optional:
/// `name`, `expires_in_seconds` or `expires_at`).
pub async fn create_token(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    body: OptionalJson<NewToken>,
) -> Result<HttpResponse, ApiError> {
    let (info, token) = state.store.create_token_with(user.id, &body.0).await?;
    Ok(HttpResponse::Created().json(json!({"token": token, "token_info": info})))
}

/// `GET /v1/users/me/tokens`: the user's tokens that are not revoked (never the secrets).
pub async fn list_tokens(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let tokens = state.store.list_tokens(user.id).await?;
    Ok(HttpResponse::Ok().json(json!({"tokens": tokens})))
}

/// `DELETE /v1/users/me/tokens/{token_id}`: revokes one of the user's tokens (another user's: 404).
pub async fn revoke_token(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let token_id = parse_id("token_id", &path)?;
    state.store.revoke_token(user.id, token_id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /v1/users/{user_id}/disable` (administrator): the user's tokens are refused from now on.
pub async fn disable(
    _admin: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let user = state
        .store
        .set_user_disabled(parse_id("user_id", &path)?, true)
        .await?;
    Ok(HttpResponse::Ok().json(json!({"user": user})))
}

/// `POST /v1/users/{user_id}/enable` (administrator): the user's tokens work again.
pub async fn enable(
    _admin: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let user = state
        .store
        .set_user_disabled(parse_id("user_id", &path)?, false)
        .await?;
    Ok(HttpResponse::Ok().json(json!({"user": user})))
}

fn parse_id(name: &str, value: &str) -> Result<i64, ApiError> {
    value
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::invalid(name, format!("{value:?} is not a valid id")))
}
