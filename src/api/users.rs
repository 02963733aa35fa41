//! Users: created by an administrator, each with bearer tokens they can list, add and revoke;
//! a user can delete their account with all their data.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::store::{NewToken, TokenInfo, User};
use crate::web::error::ApiError;
use crate::web::extract::{AdminAuth, ApiJson, AuthToken, AuthUser, OptionalJson};
use crate::web::AppState;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    /// Unique; surrounding whitespace is trimmed.
    #[schema(min_length = 1, max_length = 200, pattern = "NONBLANK")]
    pub name: String,
    /// May use the administrator's routes.
    #[serde(default)]
    pub is_admin: bool,
    /// Lifetime of the first token in seconds, at most ten years, and not past the expiry of
    /// the token making the request (default: it expires with that token, or never if that
    /// token does not expire, as the administrator token).
    #[schema(minimum = 1, maximum = 316224000)]
    pub expires_in_seconds: Option<i64>,
}

/// A user with a token shown only now.
#[derive(Serialize, ToSchema)]
pub struct CreatedUser {
    pub user: User,
    /// `cvr_` and 64 hex digits, shown once.
    #[schema(pattern = "^cvr_[0-9a-f]{64}$")]
    pub token: String,
    pub token_info: TokenInfo,
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
    pub token_info: TokenInfo,
}

#[derive(Serialize, ToSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(names("token_id"))]
#[allow(dead_code)] // documents the path; `parse_id` reads it (to name the field on a bad id)
pub struct TokenPath(#[param(minimum = 1, format = Int64)] i64);

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(names("user_id"))]
#[allow(dead_code)] // documents the path; `parse_id` reads it (to name the field on a bad id)
pub struct UserPath(#[param(minimum = 1, format = Int64)] i64);

/// `POST /v1/users` (administrator): creates a user and returns its first token.
#[utoipa::path(post, path = "/v1/users", operation_id = "create_user", tag = "users",
    request_body = CreateUser,
    responses((status = 201, description = "The user and its first token", body = CreatedUser,
        links(("GetMe" = (operation_id = "get_me")))))
)]
pub async fn create(
    admin: AdminAuth,
    state: web::Data<AppState>,
    body: ApiJson<CreateUser>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let first_token = NewToken {
        name: None,
        expires_in_seconds: body.expires_in_seconds,
    };
    let (user, token_info, token) = state
        .users
        .create(&body.name, body.is_admin, &first_token, admin.expires_at)
        .await?;
    Ok(HttpResponse::Created().json(CreatedUser {
        user,
        token,
        token_info,
    }))
}

/// `GET /v1/users/me`: the token's user.
#[utoipa::path(get, path = "/v1/users/me", operation_id = "get_me", tag = "users",
    responses((status = 200, description = "The token's user", body = UserEnvelope)))]
pub async fn me(AuthUser(user): AuthUser) -> HttpResponse {
    HttpResponse::Ok().json(UserEnvelope { user })
}

/// `DELETE /v1/users/me`: deletes the account and everything it owns, at once.
#[utoipa::path(delete, path = "/v1/users/me", operation_id = "delete_me", tag = "users",
    responses((status = 204, description = "The account and all its data are deleted")))]
pub async fn delete_me(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    state.users.delete_account(user.id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /v1/users/me/tokens`: an additional token for the same user (body optional:
/// `name`, `expires_in_seconds`). It never outlives the token that asks for it.
#[utoipa::path(post, path = "/v1/users/me/tokens", operation_id = "create_token", tag = "users",
    request_body(content = Option<NewToken>, description = "Optional: the token's name and expiry"),
    responses((status = 201, description = "A new token", body = TokenEnvelope)))]
pub async fn create_token(
    caller: AuthToken,
    state: web::Data<AppState>,
    body: OptionalJson<NewToken>,
) -> Result<HttpResponse, ApiError> {
    let (info, token) = state
        .users
        .create_token(caller.user.id, caller.token_id, &body.0, caller.expires_at)
        .await?;
    Ok(HttpResponse::Created().json(TokenEnvelope {
        token,
        token_info: info,
    }))
}

/// `GET /v1/users/me/tokens`: the user's tokens that are not revoked (never the secrets).
#[utoipa::path(get, path = "/v1/users/me/tokens", operation_id = "list_tokens", tag = "users",
    responses((status = 200, description = "The tokens", body = TokenList)))]
pub async fn list_tokens(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let tokens = state.users.tokens(user.id).await?;
    Ok(HttpResponse::Ok().json(TokenList { tokens }))
}

/// `DELETE /v1/users/me/tokens/{token_id}`: revokes one of the user's tokens (another user's: 404).
#[utoipa::path(delete, path = "/v1/users/me/tokens/{token_id}", operation_id = "revoke_token",
    tag = "users", params(TokenPath),
    responses((status = 204, description = "The token is revoked")))]
pub async fn revoke_token(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let token_id = parse_id("token_id", &path)?;
    state.users.revoke_token(user.id, token_id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /v1/users/{user_id}/disable` (administrator): the user's tokens are refused from now on.
#[utoipa::path(post, path = "/v1/users/{user_id}/disable", operation_id = "disable_user",
    tag = "users", params(UserPath),
    responses((status = 200, description = "The user, disabled", body = UserEnvelope)))]
pub async fn disable(
    _admin: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    set_disabled(&state, &path, true).await
}

/// `POST /v1/users/{user_id}/enable` (administrator): the user's tokens work again.
#[utoipa::path(post, path = "/v1/users/{user_id}/enable", operation_id = "enable_user",
    tag = "users", params(UserPath),
    responses((status = 200, description = "The user, enabled", body = UserEnvelope)))]
pub async fn enable(
    _admin: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    set_disabled(&state, &path, false).await
}

/// Disables or enables the user the path names, answering with the user.
async fn set_disabled(
    state: &AppState,
    path: &str,
    disabled: bool,
) -> Result<HttpResponse, ApiError> {
    let user = state
        .users
        .set_disabled(parse_id("user_id", path)?, disabled)
        .await?;
    Ok(HttpResponse::Ok().json(UserEnvelope { user }))
}

fn parse_id(name: &str, value: &str) -> Result<i64, ApiError> {
    value
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::invalid(name, format!("{value:?} is not a valid id")))
}
