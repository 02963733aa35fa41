//! Reading a conversation's turns. Running a turn (`POST .../turns`) arrives with the pipeline.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;

use super::error::ApiError;
use super::extract::{parse_uuid, ApiQuery, AuthUser};
use super::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Include earlier versions of regenerated turns.
    #[serde(default)]
    pub all_versions: bool,
}

/// `GET /v1/conversations/{conversation_id}/turns`
pub async fn list(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: ApiQuery<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_uuid("conversation_id", &path)?;
    let turns = state
        .store
        .list_turns(user.id, id, query.0.all_versions)
        .await?;
    Ok(HttpResponse::Ok().json(json!({"turns": turns})))
}

/// `GET /v1/conversations/{conversation_id}/turns/{turn_id}`
pub async fn get(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (conversation, turn) = path.into_inner();
    let id = parse_uuid("conversation_id", &conversation)?;
    let turn_id = parse_uuid("turn_id", &turn)?;
    let turn = state.store.turn(user.id, id, turn_id).await?;
    Ok(HttpResponse::Ok().json(json!({"turn": turn})))
}
