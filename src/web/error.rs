//! The one place where errors become HTTP responses.
//!
//! Every error body is `{"error": {"code": "...", "message": "...", "field": ...}}`. Codes are stable
//! snake_case strings listed in [`ErrorCode`]; domain errors are mapped with exhaustive `match`es so a
//! new variant cannot go unmapped.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::collection::CollectionError;
use crate::dense::DenseError;
use crate::index::IndexError;
use crate::pipeline::generate::GenerateError;
use crate::pipeline::turn::{SettingError, SettingField};
use crate::pipeline::PipelineError;
use crate::rerank::RerankError;
use crate::service::chat::ChatError;
use crate::service::conversations::ConversationError;
use crate::service::embeddings::EmbeddingError;
use crate::service::input::InvalidInput;
use crate::service::runs::RunsError;
use crate::service::users::UserError;
use crate::service::{CollectionServiceError, FileProblem, ServiceError};
use crate::store::{AuthFailure, EmbeddedError, StoreError};

/// Stable error codes of the HTTP API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    MalformedJson,
    InvalidField,
    UnsupportedMediaType,
    PayloadTooLarge,
    RequestTimeout,
    UnreadableFile,
    MissingToken,
    InvalidToken,
    AdminRequired,
    TokenExpired,
    TokenRevoked,
    UserDisabled,
    QuotaExceeded,
    RateLimited,
    NotFound,
    RouteNotFound,
    MethodNotAllowed,
    Conflict,
    ConversationBusy,
    IdempotencyKeyReused,
    DatabaseUnavailable,
    ModelUnavailable,
    CollectionUnavailable,
    Internal,
}

impl ErrorCode {
    /// The code table: HTTP status and wire name of every code.
    pub const fn describe(self) -> (StatusCode, &'static str) {
        match self {
            ErrorCode::MalformedJson => (StatusCode::BAD_REQUEST, "malformed_json"),
            ErrorCode::InvalidField => (StatusCode::BAD_REQUEST, "invalid_field"),
            ErrorCode::UnsupportedMediaType => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            ErrorCode::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            ErrorCode::RequestTimeout => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            ErrorCode::UnreadableFile => (StatusCode::UNPROCESSABLE_ENTITY, "unreadable_file"),
            ErrorCode::MissingToken => (StatusCode::UNAUTHORIZED, "missing_token"),
            ErrorCode::InvalidToken => (StatusCode::UNAUTHORIZED, "invalid_token"),
            ErrorCode::AdminRequired => (StatusCode::FORBIDDEN, "admin_required"),
            ErrorCode::TokenExpired => (StatusCode::UNAUTHORIZED, "token_expired"),
            ErrorCode::TokenRevoked => (StatusCode::UNAUTHORIZED, "token_revoked"),
            ErrorCode::UserDisabled => (StatusCode::FORBIDDEN, "user_disabled"),
            ErrorCode::QuotaExceeded => (StatusCode::TOO_MANY_REQUESTS, "quota_exceeded"),
            ErrorCode::RateLimited => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            ErrorCode::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            ErrorCode::RouteNotFound => (StatusCode::NOT_FOUND, "route_not_found"),
            ErrorCode::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            ErrorCode::Conflict => (StatusCode::CONFLICT, "conflict"),
            ErrorCode::ConversationBusy => (StatusCode::CONFLICT, "conversation_busy"),
            ErrorCode::IdempotencyKeyReused => (StatusCode::CONFLICT, "idempotency_key_reused"),
            ErrorCode::DatabaseUnavailable => {
                (StatusCode::SERVICE_UNAVAILABLE, "database_unavailable")
            }
            ErrorCode::ModelUnavailable => (StatusCode::SERVICE_UNAVAILABLE, "model_unavailable"),
            ErrorCode::CollectionUnavailable => {
                (StatusCode::SERVICE_UNAVAILABLE, "collection_unavailable")
            }
            ErrorCode::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    pub const ALL: [ErrorCode; 24] = [
        ErrorCode::MalformedJson,
        ErrorCode::InvalidField,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::PayloadTooLarge,
        ErrorCode::RequestTimeout,
        ErrorCode::UnreadableFile,
        ErrorCode::MissingToken,
        ErrorCode::InvalidToken,
        ErrorCode::AdminRequired,
        ErrorCode::TokenExpired,
        ErrorCode::TokenRevoked,
        ErrorCode::UserDisabled,
        ErrorCode::QuotaExceeded,
        ErrorCode::RateLimited,
        ErrorCode::NotFound,
        ErrorCode::RouteNotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Conflict,
        ErrorCode::ConversationBusy,
        ErrorCode::IdempotencyKeyReused,
        ErrorCode::DatabaseUnavailable,
        ErrorCode::ModelUnavailable,
        ErrorCode::CollectionUnavailable,
        ErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        self.describe().1
    }

    pub fn status(self) -> StatusCode {
        self.describe().0
    }
}

/// Creates every error code's series at zero (see `service::turns::register_llm_series`).
pub fn register_error_series() {
    for code in ErrorCode::ALL {
        crate::metrics::metrics()
            .errors
            .with_label_values(&[code.as_str(), code.status().as_str()]);
    }
}

/// An error as the API reports it.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub field: Option<String>,
    /// Seconds after which a rate-limited request may be retried (`Retry-After`).
    pub retry_after: Option<u64>,
}

#[derive(Serialize)]
struct Envelope<'a> {
    error: Body<'a>,
}

#[derive(Serialize)]
struct Body<'a> {
    code: &'static str,
    message: &'a str,
    field: Option<&'a str>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field: None,
            retry_after: None,
        }
    }

    pub fn field(code: ErrorCode, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field: Some(field.into()),
            retry_after: None,
        }
    }

    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::field(ErrorCode::InvalidField, field, message)
    }

    /// The error as a client may see it: internal and database errors are logged with the
    /// request id and replaced by a message naming only the id (no SQL, driver or LLM text, no
    /// endpoint URLs); other errors are about the request and pass unchanged.
    pub fn for_client(self, request_id: Option<&str>) -> ApiError {
        let public = match self.code {
            ErrorCode::Internal => "internal error",
            ErrorCode::DatabaseUnavailable => "database unavailable, try again shortly",
            _ => return self,
        };
        let id = request_id.unwrap_or("none");
        tracing::error!(request_id = id, code = self.code.as_str(), message = %self.message, "request failed");
        ApiError {
            message: format!("{public} (request id {id})"),
            ..self
        }
    }

    pub fn to_response(&self) -> HttpResponse {
        self.response_builder().json(self.envelope())
    }

    /// The error's status and headers with another body: an adapter whose protocol has its
    /// own error shape (MCP's JSON-RPC) keeps what HTTP clients read from the status line.
    pub fn response_with_body(&self, body: serde_json::Value) -> HttpResponse {
        self.response_builder().json(body)
    }

    /// The status, with `Retry-After` when the error says when to retry.
    fn response_builder(&self) -> actix_web::HttpResponseBuilder {
        let status = self.code.status();
        crate::metrics::metrics()
            .errors
            .with_label_values(&[self.code.as_str(), status.as_str()])
            .inc();
        let mut builder = HttpResponse::build(status);
        if let Some(seconds) = self.retry_after {
            builder.insert_header((actix_web::http::header::RETRY_AFTER, seconds.to_string()));
        }
        // RFC 6750: a refused bearer token says which scheme the resource wants; MCP clients
        // start their authorization flow from it.
        if self.code.status() == StatusCode::UNAUTHORIZED {
            let error = match self.code {
                ErrorCode::MissingToken => "Bearer realm=\"convrag\"",
                _ => "Bearer realm=\"convrag\", error=\"invalid_token\"",
            };
            builder.insert_header((actix_web::http::header::WWW_AUTHENTICATE, error));
        }
        builder
    }

    /// The error envelope as JSON (also sent as the `error` event of a stream).
    pub fn envelope(&self) -> serde_json::Value {
        serde_json::to_value(Envelope {
            error: Body {
                code: self.code.as_str(),
                message: &self.message,
                field: self.field.as_deref(),
            },
        })
        .unwrap_or_default()
    }
}

impl ApiError {
    /// The error in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`), for the
    /// OpenAI-compatible routes only (`/v1/models`, `/v1/chat/completions`), whose clients parse it.
    pub fn openai_envelope(&self) -> serde_json::Value {
        let status = self.code.status();
        let code = match self.code {
            ErrorCode::MissingToken | ErrorCode::InvalidToken => "invalid_api_key",
            ErrorCode::NotFound if self.field.as_deref() == Some("model") => "model_not_found",
            other => other.as_str(),
        };
        let kind = if status.is_server_error() {
            "server_error"
        } else {
            "invalid_request_error"
        };
        // OpenAI's own 429s name no parameter.
        let param = match self.code {
            ErrorCode::RateLimited => None,
            _ => self.field.as_deref(),
        };
        serde_json::json!({"error": {"message": self.message, "type": kind, "param": param, "code": code}})
    }

    pub fn to_openai_response(&self) -> HttpResponse {
        if self.code == ErrorCode::Internal {
            tracing::error!(message = %self.message, "internal error");
        }
        self.response_builder().json(self.openai_envelope())
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}: {field}: {}", self.code.as_str(), self.message),
            None => write!(f, "{}: {}", self.code.as_str(), self.message),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.code.status()
    }

    fn error_response(&self) -> HttpResponse {
        self.clone()
            .for_client(super::current_request_id().as_deref())
            .to_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { entity } => {
                ApiError::new(ErrorCode::NotFound, format!("{entity} not found"))
            }
            StoreError::Conflict { field, message } => {
                ApiError::field(ErrorCode::Conflict, field, message)
            }
            StoreError::Invalid { field, message } => ApiError::invalid(field, message),
            StoreError::QuotaExceeded { field, message } => {
                ApiError::field(ErrorCode::QuotaExceeded, field, message)
            }
            StoreError::Unauthorized(failure) => {
                let code = match failure {
                    AuthFailure::Unknown => ErrorCode::InvalidToken,
                    AuthFailure::Expired => ErrorCode::TokenExpired,
                    AuthFailure::Revoked => ErrorCode::TokenRevoked,
                    AuthFailure::UserDisabled => ErrorCode::UserDisabled,
                };
                ApiError::new(code, failure.to_string())
            }
            StoreError::Busy | StoreError::LeaseLost => {
                ApiError::new(ErrorCode::ConversationBusy, e.to_string())
            }
            StoreError::KeyReused => ApiError::field(
                ErrorCode::IdempotencyKeyReused,
                crate::store::idempotency::HEADER,
                "this key was already used with a different request; use a new key per request",
            ),
            StoreError::Unavailable(message) => ApiError::new(
                ErrorCode::DatabaseUnavailable,
                format!("the database is unavailable, try again shortly ({message})"),
            ),
            StoreError::Migrate(e) => ApiError::new(ErrorCode::Internal, format!("migration: {e}")),
            StoreError::Database(e) => ApiError::new(ErrorCode::Internal, format!("database: {e}")),
        }
    }
}

impl From<CollectionServiceError> for ApiError {
    fn from(e: CollectionServiceError) -> Self {
        match e {
            CollectionServiceError::File {
                field,
                problem,
                reason,
            } => {
                let code = match problem {
                    FileProblem::TooLarge => ErrorCode::PayloadTooLarge,
                    FileProblem::WrongType => ErrorCode::UnsupportedMediaType,
                    FileProblem::Empty => ErrorCode::InvalidField,
                    FileProblem::Unreadable => ErrorCode::UnreadableFile,
                };
                ApiError::field(code, field, reason)
            }
            CollectionServiceError::NoFiles => {
                ApiError::invalid("files", "at least one file is required")
            }
            CollectionServiceError::Store(e) => e.into(),
            CollectionServiceError::Index(e) => e.into(),
            CollectionServiceError::Busy(reason) => ApiError {
                retry_after: Some(5),
                ..ApiError::field(ErrorCode::RateLimited, "files", reason)
            },
            CollectionServiceError::Io { .. } | CollectionServiceError::Task(_) => {
                ApiError::new(ErrorCode::Internal, e.to_string())
            }
        }
    }
}

impl From<EmbeddedError> for ApiError {
    fn from(e: EmbeddedError) -> Self {
        match e {
            EmbeddedError::BinariesNotFound
            | EmbeddedError::NoUnprivilegedUser
            | EmbeddedError::Directory { .. }
            | EmbeddedError::DirectoryIo { .. }
            | EmbeddedError::Command { .. }
            | EmbeddedError::Spawn { .. } => {
                ApiError::new(ErrorCode::DatabaseUnavailable, e.to_string())
            }
        }
    }
}

impl From<IndexError> for ApiError {
    fn from(e: IndexError) -> Self {
        match e {
            IndexError::NotFound { name, .. } => ApiError::field(
                ErrorCode::NotFound,
                "name",
                format!("no collection named {name:?}"),
            ),
            IndexError::InvalidName(_) => ApiError::invalid("name", e.to_string()),
            IndexError::Refused { .. } => ApiError::field(
                ErrorCode::CollectionUnavailable,
                "collection",
                e.to_string(),
            ),
            IndexError::Preparing { .. } => ApiError {
                retry_after: Some(5),
                ..ApiError::field(
                    ErrorCode::CollectionUnavailable,
                    "collection",
                    e.to_string(),
                )
            },
            IndexError::Invalid(message) => ApiError::invalid("q", message),
            IndexError::Collection(e) => e.into(),
            IndexError::Tantivy { .. } | IndexError::Io { .. } | IndexError::Manifest { .. } => {
                ApiError::new(ErrorCode::Internal, e.to_string())
            }
        }
    }
}

impl From<CollectionError> for ApiError {
    fn from(e: CollectionError) -> Self {
        match e {
            CollectionError::Io { .. }
            | CollectionError::BadRecord { .. }
            | CollectionError::Other(_) => ApiError::new(ErrorCode::Internal, e.to_string()),
        }
    }
}

impl From<RerankError> for ApiError {
    fn from(e: RerankError) -> Self {
        match e {
            RerankError::Library { .. } | RerankError::Model { .. } | RerankError::Cache { .. } => {
                ApiError::new(ErrorCode::ModelUnavailable, e.to_string())
            }
            RerankError::Fusion(_) => ApiError::invalid("fusion", e.to_string()),
            RerankError::Input { .. }
            | RerankError::Io { .. }
            | RerankError::Tokenize(_)
            | RerankError::Inference(_)
            | RerankError::Join(_) => ApiError::new(ErrorCode::Internal, e.to_string()),
        }
    }
}

impl From<DenseError> for ApiError {
    fn from(e: DenseError) -> Self {
        match e {
            // Turns and searches of the server run BM25 while a collection's vectors are not
            // ready (only batch runs refuse), so reaching here is a bug.
            DenseError::Missing { .. } | DenseError::Incomplete { .. } => {
                ApiError::new(ErrorCode::Internal, e.to_string())
            }
            DenseError::NoModel(_) => {
                ApiError::field(ErrorCode::ModelUnavailable, "retrieval", e.to_string())
            }
            DenseError::RrfK(_) => ApiError::invalid("rrf_k", e.to_string()),
            DenseError::Graph(_) => ApiError::new(ErrorCode::Internal, e.to_string()),
            DenseError::Index(e) => e.into(),
            DenseError::Model(e) => e.into(),
        }
    }
}

impl From<PipelineError> for ApiError {
    fn from(e: PipelineError) -> Self {
        match e {
            PipelineError::Setting { field, reason } => ApiError::invalid(field, reason),
            PipelineError::Input(message) => ApiError::new(ErrorCode::InvalidField, message),
            PipelineError::Model(message) => ApiError::new(ErrorCode::ModelUnavailable, message),
            PipelineError::ModelFailed(e) => {
                ApiError::new(ErrorCode::ModelUnavailable, e.to_string())
            }
            PipelineError::Retrieval(e) => e.into(),
            PipelineError::Rerank(e) => e.into(),
            PipelineError::Dense(e) => e.into(),
            PipelineError::Generate(e) => e.into(),
            PipelineError::Parse { .. } | PipelineError::Format(_) | PipelineError::Task(_) => {
                ApiError::new(ErrorCode::Internal, e.to_string())
            }
        }
    }
}

/// A turn setting as `POST .../turns` names it (the BM25 depth is its `rerank_depth`).
impl From<SettingError> for ApiError {
    fn from(e: SettingError) -> Self {
        let field = match e.field {
            SettingField::Depth => "rerank_depth",
            other => other.as_str(),
        };
        let code = if e.unavailable {
            ErrorCode::ModelUnavailable
        } else {
            ErrorCode::InvalidField
        };
        ApiError::field(code, field, e.reason)
    }
}

impl From<InvalidInput> for ApiError {
    fn from(e: InvalidInput) -> Self {
        ApiError::invalid(e.field, e.reason)
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::Setting(e) => e.into(),
            ServiceError::MissingUtterance => ApiError::invalid("utterance", "is required"),
            // The request is fine; the conversation is not ready for it.
            ServiceError::NoCollection => ApiError::field(
                ErrorCode::Conflict,
                "collection",
                "the conversation has no collection to retrieve from (PATCH it with one)",
            ),
            ServiceError::Store(e) => e.into(),
            ServiceError::Input(e) => e.into(),
            ServiceError::RateLimited {
                kind,
                per_minute,
                retry_after_secs,
            } => ApiError {
                retry_after: Some(retry_after_secs),
                ..ApiError::field(
                    ErrorCode::RateLimited,
                    kind.as_str(),
                    format!(
                        "at most {per_minute} {} per minute; retry in {retry_after_secs} s",
                        kind.as_str()
                    ),
                )
            },
            ServiceError::Index(e) => e.into(),
            ServiceError::Pipeline(e) => e.into(),
            ServiceError::LlmConfig(_) | ServiceError::NoStore | ServiceError::Task(_) => {
                ApiError::new(ErrorCode::Internal, e.to_string())
            }
        }
    }
}

impl From<ConversationError> for ApiError {
    fn from(e: ConversationError) -> Self {
        match e {
            ConversationError::UnknownCollection(name) => ApiError::field(
                ErrorCode::NotFound,
                "collection",
                format!("no collection named {name:?}"),
            ),
            ConversationError::InvalidCollection(e) => {
                ApiError::invalid("collection", e.to_string())
            }
            ConversationError::Service(e) => e.into(),
            ConversationError::Store(e) => e.into(),
        }
    }
}

impl From<RunsError> for ApiError {
    fn from(e: RunsError) -> Self {
        match e {
            RunsError::NotFound { field, .. } => {
                ApiError::field(ErrorCode::NotFound, field.as_str(), e.to_string())
            }
            RunsError::Invalid { field, reason } => ApiError::invalid(field.as_str(), reason),
            RunsError::TooLarge { .. } => {
                ApiError::field(ErrorCode::PayloadTooLarge, "body", e.to_string())
            }
            RunsError::Task(_) => ApiError::new(ErrorCode::Internal, e.to_string()),
            RunsError::Store(e) => e.into(),
        }
    }
}

impl From<UserError> for ApiError {
    fn from(e: UserError) -> Self {
        match e {
            UserError::Store(e) => e.into(),
            UserError::Collections(e) => e.into(),
        }
    }
}

impl From<EmbeddingError> for ApiError {
    fn from(e: EmbeddingError) -> Self {
        match e {
            EmbeddingError::NoModel | EmbeddingError::UnknownModel { .. } => {
                let message = e.to_string();
                let message = message.strip_prefix("model: ").unwrap_or(&message);
                ApiError::field(ErrorCode::NotFound, "model", message)
            }
            EmbeddingError::Input(e) => e.into(),
            EmbeddingError::Service(e) => e.into(),
            EmbeddingError::Model(e) => e.into(),
            EmbeddingError::Task(_) => ApiError::new(ErrorCode::Internal, e.to_string()),
        }
    }
}

impl From<ChatError> for ApiError {
    fn from(e: ChatError) -> Self {
        match e {
            ChatError::UnknownModel(model) => ApiError::field(
                ErrorCode::NotFound,
                "model",
                format!(
                    "the model {model:?} does not exist (GET /v1/models lists the collections)"
                ),
            ),
            ChatError::UnknownResponse { field } => {
                ApiError::field(ErrorCode::NotFound, field, "no such response")
            }
            ChatError::UnknownConversation => ApiError::field(
                ErrorCode::NotFound,
                "conversation_id",
                "no such conversation",
            ),
            ChatError::NoLlm => ApiError::field(ErrorCode::NotFound, "model", e.to_string()),
            ChatError::Llm(_) => ApiError::new(ErrorCode::ModelUnavailable, e.to_string()),
            ChatError::Service(e) => e.into(),
            ChatError::Store(e) => e.into(),
        }
    }
}

impl From<GenerateError> for ApiError {
    fn from(e: GenerateError) -> Self {
        match e {
            GenerateError::InvalidRequest(message) => {
                ApiError::new(ErrorCode::InvalidField, message)
            }
            GenerateError::Llm(_) | GenerateError::Prompt { .. } => {
                ApiError::new(ErrorCode::Internal, e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_snake_case() {
        let mut seen = HashSet::new();
        for code in ErrorCode::ALL {
            let name = code.as_str();
            assert!(seen.insert(name), "duplicate code {name}");
            assert!(
                name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{name}"
            );
            assert!(code.status().is_client_error() || code.status().is_server_error());
        }
    }

    #[test]
    fn store_errors_map_to_statuses() {
        let e: ApiError = StoreError::NotFound {
            entity: "conversation",
        }
        .into();
        assert_eq!(e.code.status(), StatusCode::NOT_FOUND);
        let e: ApiError = StoreError::Unavailable("down".into()).into();
        assert_eq!(e.code.status(), StatusCode::SERVICE_UNAVAILABLE);
        let e: ApiError = StoreError::Invalid {
            field: "text",
            message: "must not be empty".into(),
        }
        .into();
        assert_eq!(e.field.as_deref(), Some("text"));
    }

    #[tokio::test]
    async fn a_panicked_stage_is_internal_and_hidden() {
        let join = tokio::spawn(async { panic!("stage blew up at postgres://secret@db") })
            .await
            .unwrap_err();
        let e: ApiError = PipelineError::Task(join).into();
        assert_eq!(e.code, ErrorCode::Internal);
        let shown = e.for_client(Some("abc"));
        assert_eq!(shown.message, "internal error (request id abc)");
    }

    #[test]
    fn database_errors_do_not_reach_clients() {
        let e: ApiError =
            StoreError::Unavailable("connection refused at 10.0.0.7:5432".into()).into();
        let shown = e.for_client(Some("r1"));
        assert_eq!(shown.code, ErrorCode::DatabaseUnavailable);
        assert!(!shown.message.contains("10.0.0.7"), "{}", shown.message);
        assert!(shown.message.ends_with("(request id r1)"));
        // Errors about the request itself are shown as they are.
        let e = ApiError::invalid("utterance", "must not be empty").for_client(Some("r2"));
        assert_eq!(e.message, "must not be empty");
    }
}
