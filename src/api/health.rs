//! Liveness and readiness.

use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::web::error::{ApiError, ErrorCode};
use crate::web::AppState;

#[derive(Serialize, ToSchema)]
pub struct Health {
    #[schema(value_type = String, pattern = "^ok$")]
    pub status: &'static str,
    #[schema(value_type = String)]
    pub version: &'static str,
}

#[derive(Serialize, ToSchema)]
pub struct Readiness {
    #[schema(value_type = String, pattern = "^ready$")]
    pub status: &'static str,
    #[schema(value_type = String, pattern = "^ok$")]
    pub database: &'static str,
}

/// The process is up and serving HTTP.
#[utoipa::path(get, path = "/healthz", operation_id = "healthz", tag = "health", security(()),
    responses((status = 200, description = "Up", body = Health)))]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
    })
}

/// The database answers; 503 with the envelope when it does not.
#[utoipa::path(get, path = "/readyz", operation_id = "readyz", tag = "health", security(()),
    responses((status = 200, description = "Ready to serve", body = Readiness)))]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    if state.users.database_ready().await {
        Ok(HttpResponse::Ok().json(Readiness {
            status: "ready",
            database: "ok",
        }))
    } else {
        Err(ApiError::new(
            ErrorCode::DatabaseUnavailable,
            "the database does not answer",
        ))
    }
}
