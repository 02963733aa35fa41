//! Users: created by the administrator, each with bearer tokens.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;
use super::extract::{AdminAuth, ApiJson, AuthUser};
use super::AppState;
use crate::store::User;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    /// Unique; surrounding whitespace is trimmed.
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: String,
}

/// A user with a token shown only now.
#[derive(Serialize, ToSchema)]
pub struct CreatedUser {
    pub user: User,
    pub token: String,
}

#[derive(Serialize, ToSchema)]
pub struct UserEnvelope {
    pub user: User,
}

#[derive(Serialize, ToSchema)]
pub struct TokenEnvelope {
    /// `cvr_` and 64 hex digits, shown once.
    #[schema(pattern = "^cvr_[0-9a-f]{64}$")]
    pub token: String,
}

/// `POST /v1/users` (administrator token): creates a user and returns its first token.
#[utoipa::path(post, path = "/v1/users", operation_id = "create_user", tag = "users",
    request_body = CreateUser,
    responses((status = 201, description = "The user and its first token", body = CreatedUser,
        links(("GetMe" = (operation_id = "get_me")))))
)]
pub async fn create(
    _admin: AdminAuth,
    state: web::Data<AppState>,
    body: ApiJson<CreateUser>,
) -> Result<HttpResponse, ApiError> {
    let (user, token) = state.store.create_user(&body.0.name).await?;
    Ok(HttpResponse::Created().json(CreatedUser { user, token }))
}

/// `GET /v1/users/me`: the token's user.
#[utoipa::path(get, path = "/v1/users/me", operation_id = "get_me", tag = "users",
    responses((status = 200, description = "The token's user", body = UserEnvelope)))]
pub async fn me(AuthUser(user): AuthUser) -> HttpResponse {
    HttpResponse::Ok().json(UserEnvelope { user })
}

/// `POST /v1/users/me/tokens`: an additional token for the same user.
#[utoipa::path(post, path = "/v1/users/me/tokens", operation_id = "create_token", tag = "users",
    responses((status = 201, description = "A new token", body = TokenEnvelope)))]
pub async fn create_token(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let token = state.store.create_token(user.id).await?;
    Ok(HttpResponse::Created().json(TokenEnvelope { token }))
}
