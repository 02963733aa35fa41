//! Passage collections: list them (the shared ones and the user's private ones), search one
//! (BM25, optionally reranked by the neural model and fused with BM25 exactly as a turn's
//! passages are), create a private one and upload documents into it.

use actix_multipart::Multipart;
use actix_web::{web, HttpResponse};
use futures_util::TryStreamExt;
use serde::Deserialize;
use serde_json::json;

use super::error::{ApiError, ErrorCode};
use super::extract::{ApiJson, ApiQuery, AuthUser};
use super::AppState;
use crate::service::{SearchRequest, ServiceError, UploadedFile};

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

/// `GET /v1/collections`: the shared collections and the user's private ones; the default
/// collection is marked, and listed with its progress while `serve` is still preparing it.
pub async fn list(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let collections = state.collections.list(user.id).await?;
    let default = state.default_collection.as_ref().map(|d| d.status());
    let is_default = |name: &str| default.as_ref().is_some_and(|d| d.name == name);
    let mut items: Vec<(String, serde_json::Value)> = collections
        .into_iter()
        .map(|c| {
            let mut item = json!(c);
            item["default"] = json!(is_default(&c.name));
            (c.name, item)
        })
        .collect();
    if let Some(d) = default.filter(|d| !items.iter().any(|(name, _)| *name == d.name)) {
        let mut item = json!(d);
        item["visibility"] = json!("shared");
        item["default"] = json!(true);
        items.push((d.name, item));
        items.sort_by(|a, b| a.0.cmp(&b.0));
    }
    let items: Vec<serde_json::Value> = items.into_iter().map(|(_, item)| item).collect();
    Ok(HttpResponse::Ok().json(json!({"collections": items})))
}

/// `GET /v1/collections/{name}`: one collection, with the progress of an upload being indexed.
pub async fn get(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let collection = state.collections.get(user.id, &path).await?;
    Ok(HttpResponse::Ok().json(json!({"collection": collection})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateCollection {
    pub name: String,
}

/// `POST /v1/collections`: a new, empty private collection of the user.
pub async fn create(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    body: ApiJson<CreateCollection>,
) -> Result<HttpResponse, ApiError> {
    let collection = state.collections.create(user.id, &body.0.name).await?;
    Ok(HttpResponse::Created().json(json!({"collection": collection})))
}

/// `POST /v1/collections/{name}/documents` (multipart/form-data, parts named `files`): checks
/// every file, then indexes them in the background; 202 with the collection's status.
pub async fn upload(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    payload: Multipart,
) -> Result<HttpResponse, ApiError> {
    let files = read_files(payload, state.collections.limits()).await?;
    let collection = state.collections.upload(user.id, &path, files).await?;
    Ok(HttpResponse::Accepted().json(json!({"collection": collection})))
}

/// The `files` parts of a multipart body, refusing (without reading further) a file above the
/// size limit or a part beyond the count limit.
async fn read_files(
    mut payload: Multipart,
    limits: crate::config::UploadLimits,
) -> Result<Vec<UploadedFile>, ApiError> {
    let malformed = |e: actix_multipart::MultipartError| {
        ApiError::invalid("files", format!("malformed multipart body: {e}"))
    };
    let mut files = Vec::new();
    while let Some(mut part) = payload.try_next().await.map_err(malformed)? {
        let disposition = part.content_disposition().cloned();
        let field_name = disposition
            .as_ref()
            .and_then(|d| d.get_name())
            .unwrap_or("");
        if field_name != "files" {
            return Err(ApiError::invalid(
                field_name,
                "unknown part; upload documents as parts named \"files\"",
            ));
        }
        let index = files.len();
        if index >= limits.max_files {
            return Err(ApiError::field(
                ErrorCode::PayloadTooLarge,
                "files",
                format!(
                    "more than the {} files allowed in one upload (uploads.max_files)",
                    limits.max_files
                ),
            ));
        }
        let file_name = disposition
            .as_ref()
            .and_then(|d| d.get_filename())
            .unwrap_or("")
            .to_string();
        if file_name.is_empty() {
            return Err(ApiError::invalid(
                format!("files[{index}]"),
                "has no file name",
            ));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = part.try_next().await.map_err(malformed)? {
            if (bytes.len() + chunk.len()) as u64 > limits.max_file_bytes {
                return Err(ApiError::field(
                    ErrorCode::PayloadTooLarge,
                    format!("files[{index}]"),
                    format!(
                        "{file_name:?} is too large: more than the {} bytes allowed \
                         (uploads.max_file_bytes)",
                        limits.max_file_bytes
                    ),
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
        files.push(UploadedFile { file_name, bytes });
    }
    Ok(files)
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
        user_id: Some(user.id),
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
