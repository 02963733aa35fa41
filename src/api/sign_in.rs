//! Signing in from the link `serve` prints on a fresh server: a one-time code for a token.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::web::error::{ApiError, ErrorCode};
use crate::web::extract::ApiJson;
use crate::web::AppState;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    /// The code of the link `serve` printed.
    #[schema(min_length = 1, pattern = "NONBLANK")]
    pub code: String,
}

/// The code's user and a token shown only now.
#[derive(Serialize, ToSchema)]
pub struct SignedIn {
    pub user: crate::store::User,
    /// `cvr_` and 64 hex digits, shown once.
    #[schema(pattern = "^cvr_[0-9a-f]{64}$")]
    pub token: String,
}

/// `POST /v1/sign-in` (no token): spends a sign-in code and returns a new token of its user.
#[utoipa::path(post, path = "/v1/sign-in", operation_id = "sign_in", tag = "users", security(()),
    request_body = SignIn,
    responses((status = 200, description = "The code's user and a new token", body = SignedIn)))]
pub async fn sign_in(
    state: web::Data<AppState>,
    body: ApiJson<SignIn>,
) -> Result<HttpResponse, ApiError> {
    let code = body.0.code.trim().to_string();
    if code.is_empty() {
        return Err(ApiError::invalid("code", "must not be empty"));
    }
    match state.users.redeem_sign_in_code(&code).await? {
        Some((user, token)) => Ok(HttpResponse::Ok().json(SignedIn { user, token })),
        None => Err(ApiError::field(
            ErrorCode::InvalidToken,
            "code",
            "this sign-in link was already used or has expired; restart the server for a new one \
             or ask your administrator for a token",
        )),
    }
}
