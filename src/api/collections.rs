//! Passage collections: list them (the shared ones and the user's private ones), search one
//! (BM25, optionally reranked by the neural model and fused with BM25 exactly as a turn's
//! passages are), create a private one and upload documents into it.

use actix_multipart::Multipart;
use std::time::Duration;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::TryStreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use crate::dense::Retrieval;
use crate::pipeline::turn::{RetrievalFallback, SettingField};
use crate::service::{SearchRequest, ServiceError, UploadedFile};
use crate::web::error::{ApiError, ErrorCode};
use crate::web::extract::{ApiJson, ApiQuery, AuthUser};
use crate::web::AppState;

/// Largest `k` and rerank depth one request may ask for.

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
    /// How many first-stage candidates the model rescores (default 100, at least `k`).
    #[param(minimum = 0, maximum = 1000)]
    pub depth: Option<usize>,
    /// The first stage: `bm25` (default), `dense` or `hybrid` (reciprocal-rank fusion of both).
    /// While the collection's passage vectors are building or absent, BM25 serves instead
    /// (the response's `retrieval` and `retrieval_fallback` say so).
    pub retrieval: Option<Retrieval>,
}

/// The `{name}` of a collection route.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // documents the path
pub struct CollectionPath {
    /// A collection name (`GET /v1/collections`).
    #[param(min_length = 1, max_length = 128, pattern = "INDEX_NAME")]
    pub name: String,
}

/// One passage found.
#[derive(Serialize, ToSchema)]
pub struct SearchHit {
    /// 1-based.
    pub rank: usize,
    pub id: String,
    /// The score the ranking is ordered by (fused when reranked).
    pub score: f32,
    /// The first stage's score: BM25's (`hybrid` too, which the reranker fuses with; there a
    /// passage BM25 did not return has the lowest BM25 score among the candidates) or the
    /// cosine (`dense`).
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
    /// The first stage that found the candidates.
    pub retrieval: Retrieval,
    /// Present when `retrieval` is BM25 standing in for the dense or hybrid retrieval asked for
    /// (the collection's passage vectors are building or absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrieval_fallback: Option<RetrievalFallback>,
    pub results: Vec<SearchHit>,
    pub timings_ms: SearchTimings,
}

/// `GET /v1/collections`: the shared collections and the user's private ones; the default
/// collection is marked, and listed with its progress while `serve` is still preparing it.
#[utoipa::path(get, path = "/v1/collections", operation_id = "list_collections", tag = "collections",
    responses((status = 200, description = "`{\"collections\": [...]}`: the collections you see", body = Object)))]
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
#[utoipa::path(get, path = "/v1/collections/{name}", operation_id = "get_collection", tag = "collections",
    params(CollectionPath),
    responses((status = 200, description = "`{\"collection\": {...}}`", body = Object)))]
pub async fn get(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let collection = state.collections.get(user.id, &path).await?;
    Ok(HttpResponse::Ok().json(json!({"collection": collection})))
}

/// `DELETE /v1/collections/{name}`: deletes one of the user's private collections, its
/// documents and its index. Conversations that used it keep their turns; their next turn names
/// another collection.
#[utoipa::path(delete, path = "/v1/collections/{name}", operation_id = "delete_collection", tag = "collections",
    params(CollectionPath),
    responses((status = 204, description = "The collection, its documents and its index are deleted")))]
pub async fn delete(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.collections.delete(user.id, &path).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCollection {
    /// Unique among the collections you see.
    #[schema(min_length = 1, max_length = 100, pattern = "IDENTIFIER")]
    pub name: String,
}

/// `POST /v1/collections`: a new, empty private collection of the user.
#[utoipa::path(post, path = "/v1/collections", operation_id = "create_collection", tag = "collections",
    request_body = CreateCollection,
    responses((status = 201, description = "`{\"collection\": {...}}`: the new, empty collection", body = Object, links(
        ("GetCollection" = (operation_id = "get_collection",
            parameters(("name" = "$response.body#/collection/name")))),
    ))))]
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
#[utoipa::path(post, path = "/v1/collections/{name}/documents", operation_id = "upload_documents",
    tag = "collections", params(CollectionPath),
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 202, description = "`{\"collection\": {...}}`: indexing in the background", body = Object)))]
pub async fn upload(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    payload: Multipart,
) -> Result<HttpResponse, ApiError> {
    // Everything that can refuse the upload is checked before the body is read.
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let permit = state
        .collections
        .admit_upload(user.id, &path, declared)
        .await?;
    let limits = state.collections.limits();
    // The idle timeout alone lets a byte every few seconds hold a slot for ever.
    let deadline = limits.deadline(declared);
    let files = tokio::time::timeout(
        deadline,
        read_files(payload, limits, permit.remaining_bytes),
    )
    .await
    .map_err(|_| {
        ApiError::field(
            ErrorCode::RequestTimeout,
            "files",
            format!(
                "the upload did not arrive within its deadline of {} s \
                     (uploads.deadline_secs, uploads.min_bytes_per_sec)",
                deadline.as_secs()
            ),
        )
    })??;
    let collection = state.collections.upload(user.id, &path, files).await?;
    drop(permit);
    Ok(HttpResponse::Accepted().json(json!({"collection": collection})))
}

/// The next chunk of a multipart stream, refused when the client sends nothing for `idle`
/// (`uploads.body_idle_secs`).
async fn next_within<T, S>(stream: &mut S, idle: Duration) -> Result<Option<T>, ApiError>
where
    S: futures_util::Stream<Item = Result<T, actix_multipart::MultipartError>> + Unpin,
{
    match tokio::time::timeout(idle, stream.try_next()).await {
        Ok(next) => {
            next.map_err(|e| ApiError::invalid("files", format!("malformed multipart body: {e}")))
        }
        Err(_) => Err(ApiError::new(
            ErrorCode::RequestTimeout,
            format!(
                "the request body sent nothing for {} s (uploads.body_idle_secs)",
                idle.as_secs()
            ),
        )),
    }
}

/// The `files` parts of a multipart body, each spooled to a temporary file as it arrives, refusing
/// (without reading further) a file above the size limit, a part beyond the count limit, or more
/// bytes than the collection can still take.
async fn read_files(
    mut payload: Multipart,
    limits: crate::config::UploadLimits,
    remaining_bytes: u64,
) -> Result<Vec<UploadedFile>, ApiError> {
    let idle = Duration::from_secs(limits.body_idle_secs);
    let mut files = Vec::new();
    let mut received = 0u64;
    while let Some(mut part) = next_within(&mut payload, idle).await? {
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
        // A part sent without a file name (`curl -F 'files=<notes.txt'`, a form's text field)
        // is a document too, named by its place; having no extension, it is read by its contents.
        let file_name = disposition
            .as_ref()
            .and_then(|d| d.get_filename())
            .filter(|name| !name.is_empty())
            .map_or_else(|| format!("document-{}", index + 1), str::to_string);
        let mut spool = tempfile::NamedTempFile::new().map_err(spool_error)?;
        let mut len = 0u64;
        while let Some(chunk) = next_within(&mut part, idle).await? {
            len += chunk.len() as u64;
            received += chunk.len() as u64;
            if len > limits.max_file_bytes {
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
            if received > remaining_bytes {
                return Err(ApiError::field(
                    ErrorCode::PayloadTooLarge,
                    "files",
                    format!(
                        "the collection can take {remaining_bytes} more bytes \
                         (uploads.max_collection_bytes)"
                    ),
                ));
            }
            std::io::Write::write_all(&mut spool, &chunk).map_err(spool_error)?;
        }
        files.push(UploadedFile {
            file_name,
            file: spool,
            len,
        });
    }
    Ok(files)
}

fn spool_error(e: std::io::Error) -> ApiError {
    ApiError::new(
        ErrorCode::Internal,
        format!("cannot spool the upload to a temporary file: {e}"),
    )
}

/// The body of an upload.
#[derive(ToSchema)]
#[allow(dead_code)] // documents the multipart body `read_files` reads
pub struct UploadForm {
    /// The documents: at least one, at most `uploads.max_files` (configuration) in one request,
    /// each at most `uploads.max_file_bytes`. A file is typed by its name's extension (.txt,
    /// .text, .md, .markdown, .html, .htm, .pdf) and its contents must agree; a name without an
    /// extension, or a part without a file name, is read by its contents: a PDF, else UTF-8 text.
    files: Vec<String>,
}

/// What [`UploadForm`]'s schema states beyond utoipa's attributes: no other parts than `files`
/// (`read_files` refuses them by name), and each part's text as the server reads a part whose
/// name does not type it: some character that is neither white space nor a byte order mark (a
/// blank text has nothing to index), no NUL. A file typed by its extension (a PDF, say) is
/// judged by that type's reader, which is beyond a schema and described in words.
pub(super) struct UploadParts;

impl utoipa::Modify for UploadParts {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::AdditionalProperties;
        let Some(form) = crate::web::schema::component_mut(doc, "UploadForm") else {
            return;
        };
        form.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(false)));
        let Some(files) = form.properties.get_mut("files") else {
            return;
        };
        let description = match files {
            utoipa::openapi::RefOr::T(utoipa::openapi::Schema::Array(array)) => {
                array.description.clone()
            }
            _ => None,
        };
        // No `type` for a part: a multipart part is text whatever it holds (a number is its
        // digits), so only a string's text can break the rule, and the pattern states it. One
        // part is what a one-element list is on the wire, so `files` may be either.
        let part = json!({"minLength": 1, "pattern": crate::web::schema::DOCUMENT_TEXT});
        let mut single = part.clone();
        single["not"] = json!({"type": "array"});
        let mut schema = crate::web::schema::keywords_only(json!({
            "anyOf": [{"type": "array", "minItems": 1, "items": part}, single],
        }));
        schema.description = description;
        *files = utoipa::openapi::RefOr::T(utoipa::openapi::Schema::Object(schema));
    }
}

impl UploadParts {
    /// States `uploads.max_files` as the list's `maxItems`: a longer list is refused with 413.
    pub(super) fn limit_files(
        schemas: &mut std::collections::BTreeMap<
            String,
            utoipa::openapi::RefOr<utoipa::openapi::Schema>,
        >,
        max_files: usize,
    ) {
        use utoipa::openapi::{RefOr, Schema};
        let Some(RefOr::T(Schema::Object(form))) = schemas.get_mut("UploadForm") else {
            return;
        };
        let Some(RefOr::T(Schema::Object(files))) = form.properties.get_mut("files") else {
            return;
        };
        let list = files
            .extensions
            .as_mut()
            .and_then(|keywords| keywords.get_mut("anyOf"))
            .and_then(|any_of| any_of.get_mut(0));
        if let Some(list) = list {
            list["maxItems"] = json!(max_files);
        }
    }
}

/// `GET /v1/collections/{name}/search?q=&k=&rerank=&depth=`
#[utoipa::path(get, path = "/v1/collections/{name}/search", operation_id = "search_collection",
    tag = "collections", params(CollectionPath, SearchQuery),
    responses((status = 200, description = "The passages found", body = SearchResults)))]
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
        retrieval,
    } = query.0;
    let k = k.unwrap_or(10);
    let request = SearchRequest {
        user_id: Some(user.id),
        collection: name,
        query: q,
        k,
        depth: depth.unwrap_or(100).max(k),
        rerank,
        retrieval: retrieval.unwrap_or_default(),
    };
    request.check("q")?;
    let found = state
        .turns
        .search_as(user.id, &request)
        .await
        .map_err(|e| match e {
            // A server without a model: nothing about this request's fields is wrong.
            ServiceError::Setting(e) if e.unavailable && e.field == SettingField::Rerank => {
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
        retrieval: found.retrieval,
        retrieval_fallback: found.fallback,
        results,
        timings_ms: SearchTimings {
            retrieve: found.retrieve_ms,
            rerank: found.rerank_ms,
        },
    }))
}
