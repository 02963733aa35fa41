//! Passage collections: list them, search one (BM25, optionally reranked by the neural model
//! and fused with BM25 exactly as a turn's passages are).

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;

use super::error::{ApiError, ErrorCode};
use super::extract::{ApiQuery, AuthUser};
use super::AppState;
use crate::service::{SearchRequest, ServiceError};

/// Largest `k` and rerank depth one request may ask for.
const MAX_K: usize = 1000;
const MAX_DEPTH: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    pub q: String,
    pub k: Option<usize>,
    #[serde(default)]
    pub rerank: bool,
    /// How many BM25 candidates the model rescores (default 100, at least `k`).
    pub depth: Option<usize>,
}

/// `GET /v1/collections`
pub async fn list(_user: AuthUser, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let registry = state.turns.collections().clone();
    let collections = web::block(move || registry.list())
        .await
        .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))??;
    Ok(HttpResponse::Ok().json(json!({"collections": collections})))
}

/// `GET /v1/collections/{name}/search?q=&k=&rerank=&depth=`
pub async fn search(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: ApiQuery<SearchQuery>,
) -> Result<HttpResponse, ApiError> {
    let name = path.into_inner();
    let SearchQuery {
        q,
        k,
        rerank,
        depth,
    } = query.0;
    if q.trim().is_empty() {
        return Err(ApiError::invalid("q", "must not be empty"));
    }
    let k = k.unwrap_or(10);
    if k == 0 || k > MAX_K {
        return Err(ApiError::invalid(
            "k",
            format!("must be between 1 and {MAX_K}"),
        ));
    }
    let depth = depth.unwrap_or(100).max(k);
    if depth > MAX_DEPTH {
        return Err(ApiError::invalid(
            "depth",
            format!("must be at most {MAX_DEPTH}"),
        ));
    }
    let request = SearchRequest {
        collection: name,
        query: q,
        k,
        depth,
        rerank,
    };
    let found = state
        .turns
        .search_as(user.id, &request)
        .await
        .map_err(|e| match e {
            // A server without a model: nothing about this request's fields is wrong.
            ServiceError::Setting(e) if e.unavailable => {
                ApiError::new(ErrorCode::ModelUnavailable, e.reason)
            }
            other => other.into(),
        })?;
    let results: Vec<serde_json::Value> = found
        .passages
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut hit = json!({"rank": i + 1, "id": p.id, "score": p.score,
                "bm25_score": p.retrieval_score, "title": p.title, "url": p.url, "text": p.text});
            if let Some(score) = p.rerank_score {
                hit["rerank_score"] = json!(score);
            }
            hit
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "collection": request.collection,
        "query": request.query,
        "results": results,
        "timings_ms": {"retrieve": found.retrieve_ms, "rerank": found.rerank_ms},
    })))
}
