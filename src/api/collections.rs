//! Passage collections: list them, search one (BM25, optionally reranked by the neural model
//! and fused with BM25 exactly as a turn's passages are).

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorCode};
use super::extract::{ApiQuery, AuthUser};
use super::AppState;
use crate::index::CollectionInfo;
use crate::service::{SearchRequest, ServiceError};

/// Largest `k` and rerank depth one request may ask for.
const MAX_K: usize = 1000;
const MAX_DEPTH: usize = 1000;

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// The query.
    #[param(min_length = 1, pattern = "NONBLANK")]
    pub q: String,
    /// Passages returned (default 10).
    #[param(minimum = 1, maximum = 1000)]
    pub k: Option<usize>,
    /// Rescore with the neural model and fuse with BM25 (needs a loaded model).
    #[serde(default)]
    pub rerank: bool,
    /// How many BM25 candidates the model rescores (default 100, at least `k`).
    #[param(minimum = 0, maximum = 1000)]
    pub depth: Option<usize>,
}

/// The `{name}` of a collection route.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // documents the path
pub struct CollectionPath {
    /// A collection name (`GET /v1/collections`).
    #[param(min_length = 1, max_length = 100, pattern = "IDENTIFIER")]
    pub name: String,
}

#[derive(Serialize, ToSchema)]
pub struct CollectionList {
    pub collections: Vec<CollectionInfo>,
}

/// One passage found.
#[derive(Serialize, ToSchema)]
pub struct SearchHit {
    /// 1-based.
    pub rank: usize,
    pub id: String,
    /// The score the ranking is ordered by (fused when reranked).
    pub score: f32,
    pub bm25_score: f32,
    /// Only when reranked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank_score: Option<f32>,
    pub title: String,
    pub url: String,
    pub text: String,
}

#[derive(Serialize, ToSchema)]
pub struct SearchTimings {
    pub retrieve: f64,
    /// `null` when not reranked.
    pub rerank: Option<f64>,
}

#[derive(Serialize, ToSchema)]
pub struct SearchResults {
    pub collection: String,
    pub query: String,
    pub results: Vec<SearchHit>,
    pub timings_ms: SearchTimings,
}

/// `GET /v1/collections`
#[utoipa::path(get, path = "/v1/collections", operation_id = "list_collections", tag = "collections",
    responses((status = 200, description = "The indexed collections", body = CollectionList)))]
pub async fn list(_user: AuthUser, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let registry = state.turns.collections().clone();
    let collections = web::block(move || registry.list())
        .await
        .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))??;
    Ok(HttpResponse::Ok().json(CollectionList { collections }))
}

/// `GET /v1/collections/{name}/search?q=&k=&rerank=&depth=`
#[utoipa::path(get, path = "/v1/collections/{name}/search", operation_id = "search_collection",
    tag = "collections", params(CollectionPath, SearchQuery),
    responses((status = 200, description = "The passages found", body = SearchResults)))]
pub async fn search(
    _user: AuthUser,
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
    if q.contains('\0') {
        return Err(ApiError::invalid("q", "must not contain NUL characters"));
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
    let found = state.turns.search(&request).await.map_err(|e| match e {
        // A server without a model: nothing about this request's fields is wrong.
        ServiceError::Setting(e) if e.unavailable => {
            ApiError::new(ErrorCode::ModelUnavailable, e.reason)
        }
        other => other.into(),
    })?;
    let results = found
        .passages
        .into_iter()
        .enumerate()
        .map(|(i, p)| SearchHit {
            rank: i + 1,
            id: p.id,
            score: p.score,
            bm25_score: p.retrieval_score,
            rerank_score: p.rerank_score,
            title: p.title,
            url: p.url,
            text: p.text,
        })
        .collect();
    Ok(HttpResponse::Ok().json(SearchResults {
        collection: request.collection,
        query: request.query,
        results,
        timings_ms: SearchTimings {
            retrieve: found.retrieve_ms,
            rerank: found.rerank_ms,
        },
    }))
}
