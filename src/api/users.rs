//! Users: created by the administrator, each with bearer tokens.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;

use super::error::ApiError;
use super::extract::{AdminAuth, ApiJson, AuthUser};
use super::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    pub name: String,
}

/// `POST /v1/users` (administrator token): creates a user and returns its first token.
pub async fn create(
    _admin: AdminAuth,
    state: web::Data<AppState>,
    body: ApiJson<CreateUser>,
) -> Result<HttpResponse, ApiError> {
    let (user, token) = state.store.create_user(&body.0.name).await?;
    Ok(HttpResponse::Created().json(json!({"user": user, "token": token})))
}

/// `GET /v1/users/me`: the token's user.
pub async fn me(AuthUser(user): AuthUser) -> HttpResponse {
    HttpResponse::Ok().json(json!({"user": user}))
}

/// `POST /v1/users/me/tokens`: an additional token for the same user.
pub async fn create_token(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let token = state.store.create_token(user.id).await?;
    Ok(HttpResponse::Created().json(json!({"token": token})))
}
