//! Liveness and readiness.

use actix_web::{web, HttpResponse};
use serde_json::json;

use super::error::{ApiError, ErrorCode};
use super::AppState;

/// The process is up and serving HTTP.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

/// The database answers; 503 with the envelope when it does not.
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    if state.store.ping().await {
        Ok(HttpResponse::Ok().json(json!({"status": "ready", "database": "ok"})))
    } else {
        Err(ApiError::new(
            ErrorCode::DatabaseUnavailable,
            "the database does not answer",
        ))
    }
}
