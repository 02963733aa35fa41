//! The Runs view: the user's stored batch runs (`convrag run … --user NAME`) measured against
//! judgments they uploaded, and two runs compared turn by turn (`service::runs`).

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::service::runs::{QrelsPermit, RunComparison, RunReport, RunsError};
use crate::store::runs::{QrelsInfo, RunListing};
use crate::web::error::{ApiError, ErrorCode};
use crate::web::extract::{read_body, ApiQuery, AuthUser};
use crate::web::AppState;

#[derive(Serialize, ToSchema)]
pub struct RunList {
    /// Newest first.
    pub runs: Vec<RunListing>,
}

#[derive(Serialize, ToSchema)]
pub struct QrelsList {
    pub qrels: Vec<QrelsInfo>,
}

#[derive(Serialize, ToSchema)]
pub struct QrelsEnvelope {
    pub qrels: QrelsInfo,
}

/// The `{run}` of `GET /v1/runs/{run}`.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // documents the path; the handler reads it as a string
pub struct RunPath {
    /// The run's name (`--run-name`).
    pub run: String,
}

/// The `{name}` of `PUT` and `DELETE /v1/qrels/{name}`.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // documents the path; the handler reads it as a string
pub struct QrelsPath {
    #[param(pattern = "IDENTIFIER", max_length = 100)]
    pub name: String,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ReportQuery {
    /// Name of the user's judgments (`PUT /v1/qrels/{name}`).
    pub qrels: String,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CompareQuery {
    /// Run A.
    pub a: String,
    /// Run B (differences are B − A; A itself gives every turn a tie).
    pub b: String,
    /// Name of the user's judgments.
    pub qrels: String,
    /// One measure as `convrag eval` names it: `ndcg_cut.10`, `P.10`, `recall.100`, `map`.
    #[param(default = "ndcg_cut.10", pattern = "MEASURE")]
    pub measure: Option<String>,
}

/// `GET /v1/runs`
#[utoipa::path(get, path = "/v1/runs", operation_id = "list_runs", tag = "runs",
    responses((status = 200, description = "Your stored batch runs", body = RunList)))]
pub async fn list(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let runs = state.runs.list(user.id).await?;
    Ok(HttpResponse::Ok().json(RunList { runs }))
}

/// `GET /v1/runs/compare`
#[utoipa::path(get, path = "/v1/runs/compare", operation_id = "compare_runs", tag = "runs",
    params(CompareQuery),
    responses((status = 200, description = "Both runs turn by turn: rewrites, selected PTKB statements, top passages with grades, the measure and B − A", body = RunComparison)))]
pub async fn compare(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    query: ApiQuery<CompareQuery>,
) -> Result<HttpResponse, ApiError> {
    let q = query.0;
    let measure = q.measure.as_deref().unwrap_or("ndcg_cut.10");
    let comparison = state
        .runs
        .compare(user.id, &q.a, &q.b, &q.qrels, measure)
        .await?;
    Ok(HttpResponse::Ok().json(comparison))
}

/// `GET /v1/runs/{run}`
#[utoipa::path(get, path = "/v1/runs/{run}", operation_id = "get_run", tag = "runs",
    params(RunPath, ReportQuery),
    responses((status = 200, description = "The run's summary measures and every turn's", body = RunReport)))]
pub async fn get(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: ApiQuery<ReportQuery>,
) -> Result<HttpResponse, ApiError> {
    let report = state.runs.report(user.id, &path, &query.0.qrels).await?;
    Ok(HttpResponse::Ok().json(report))
}

/// `DELETE /v1/runs/{run}`
#[utoipa::path(delete, path = "/v1/runs/{run}", operation_id = "delete_run", tag = "runs",
    params(RunPath),
    responses((status = 204, description = "Deleted, with the run's conversations and turns")))]
pub async fn delete(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.runs.delete_run(user.id, &path).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `GET /v1/qrels`
#[utoipa::path(get, path = "/v1/qrels", operation_id = "list_qrels", tag = "runs",
    responses((status = 200, description = "Your judgments", body = QrelsList)))]
pub async fn list_qrels(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let qrels = state.runs.list_qrels(user.id).await?;
    Ok(HttpResponse::Ok().json(QrelsList { qrels }))
}

/// `PUT /v1/qrels/{name}`
#[utoipa::path(put, path = "/v1/qrels/{name}", operation_id = "put_qrels", tag = "runs",
    params(QrelsPath),
    request_body(content = String, content_type = "text/plain",
        description = "TREC qrels: a `query iteration document grade` line per judgment (fields of printable ASCII; `#` comments and blank lines allowed), at most `limits.qrels_bytes`"),
    responses((status = 200, description = "Stored (replacing judgments of that name)", body = QrelsEnvelope)))]
pub async fn put_qrels(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    // Everything that can refuse the text from its headers is checked before it is read.
    text_content_type(&req)?;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let permit = state.runs.admit_qrels(user.id, &path, declared).await?;
    let text = text_body(&state, &permit, declared, payload).await?;
    let qrels = state.runs.put_qrels(permit, user.id, &path, text).await?;
    Ok(HttpResponse::Ok().json(QrelsEnvelope { qrels }))
}

/// `DELETE /v1/qrels/{name}`
#[utoipa::path(delete, path = "/v1/qrels/{name}", operation_id = "delete_qrels", tag = "runs",
    params(QrelsPath),
    responses((status = 204, description = "Deleted")))]
pub async fn delete_qrels(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.runs.delete_qrels(user.id, &path).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The body of `PUT /v1/qrels/{name}`: TREC qrels text as the server reads it
/// ([`crate::service::runs::QRELS_PATTERN`]).
pub(super) struct QrelsBody;

impl utoipa::Modify for QrelsBody {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let put = doc
            .paths
            .paths
            .get_mut("/v1/qrels/{name}")
            .and_then(|item| item.put.as_mut());
        let body = put.and_then(|op| op.request_body.as_mut());
        let Some(content) = body.and_then(|b| b.content.get_mut("text/plain")) else {
            return;
        };
        content.schema = Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(crate::service::runs::QRELS_PATTERN.as_str()))
                .into(),
        );
    }
}

/// Refuses a body declared as anything but `text/plain`.
fn text_content_type(req: &HttpRequest) -> Result<(), ApiError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.to_ascii_lowercase());
    if let Some(ct) = content_type {
        let essence = ct.split(';').next().unwrap_or_default().trim().to_string();
        if essence != "text/plain" {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                format!("expected Content-Type: text/plain (TREC qrels), got {essence:?}"),
            ));
        }
    }
    Ok(())
}

/// A UTF-8 body of at most the permit's `limits.qrels_bytes`, within `limits.body_read_secs`.
async fn text_body(
    state: &AppState,
    permit: &QrelsPermit,
    declared: Option<u64>,
    payload: web::Payload,
) -> Result<String, ApiError> {
    let max = permit.max_bytes;
    let mut payload = payload.into_inner();
    let expected = declared.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let body = read_body(
        &mut payload,
        max,
        expected,
        state.config.limits.body_read_secs,
        || RunsError::TooLarge { max }.into(),
        |e| ApiError::invalid("body", format!("cannot read: {e}")),
    )
    .await?;
    let text = String::from_utf8(body.into())
        .map_err(|_| ApiError::invalid("body", "is not UTF-8 text"))?;
    if text.contains('\0') {
        return Err(ApiError::invalid("body", "contains a NUL character"));
    }
    Ok(text)
}
