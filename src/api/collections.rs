//! Passage collections: list them, search one (BM25, optionally reranked by the neural model).

use std::sync::Arc;

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;

use super::error::{ApiError, ErrorCode};
use super::extract::{ApiQuery, AuthUser};
use super::AppState;
use crate::index::{Hit, Retriever};
use crate::rerank::{rerank_blocking, OwnedPassage};

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
    let registry = state.collections.clone();
    let collections = web::block(move || registry.list())
        .await
        .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))??;
    Ok(HttpResponse::Ok().json(json!({"collections": collections})))
}

/// `GET /v1/collections/{name}/search?q=&k=&rerank=&depth=`
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
    let reranker = if rerank {
        Some(state.reranker.clone().ok_or_else(|| {
            ApiError::new(
                ErrorCode::ModelUnavailable,
                "no reranking model is loaded (run scripts/fetch-models.sh, see CONVRAG_MODEL_DIR)",
            )
        })?)
    } else {
        None
    };

    let registry = state.collections.clone();
    let (collection, query_text) = (name.clone(), q.clone());
    let first_stage = if reranker.is_some() { depth } else { k };
    let started = std::time::Instant::now();
    let hits: Vec<Hit> =
        web::block(move || registry.get(&collection)?.search(&query_text, first_stage))
            .await
            .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))??;
    let retrieve_ms = started.elapsed().as_secs_f64() * 1000.0;

    let mut results: Vec<serde_json::Value> = Vec::with_capacity(k);
    let mut rerank_ms = None;
    match reranker {
        None => {
            for (i, hit) in hits.into_iter().take(k).enumerate() {
                results.push(
                    json!({"rank": i + 1, "id": hit.id, "score": hit.score, "bm25_score": hit.score,
                    "title": hit.title, "url": hit.url, "text": hit.text}),
                );
            }
        }
        Some(model) => {
            let started = std::time::Instant::now();
            let passages: Vec<OwnedPassage> = hits
                .iter()
                .map(|h| OwnedPassage {
                    id: h.id.clone(),
                    text: h.model_text(),
                })
                .collect();
            let scores =
                rerank_blocking(Arc::clone(&model), q.clone(), passages, Some(name.clone()))
                    .await?;
            rerank_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
            for (i, index) in crate::rerank::order_by_score(&scores)
                .into_iter()
                .take(k)
                .enumerate()
            {
                let hit = &hits[index];
                results.push(json!({"rank": i + 1, "id": hit.id, "score": scores[index], "bm25_score": hit.score,
                    "rerank_score": scores[index], "title": hit.title, "url": hit.url, "text": hit.text}));
            }
        }
    }
    Ok(HttpResponse::Ok().json(json!({
        "collection": name,
        "query": q,
        "results": results,
        "timings_ms": {"retrieve": retrieve_ms, "rerank": rerank_ms},
    })))
}
