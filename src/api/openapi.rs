//! The OpenAPI document of the API, generated from the code: `#[utoipa::path]` on every handler,
//! `ToSchema` on the bodies the handlers read and write (with the limits they enforce), and the
//! error responses from [`ERRORS`] (each operation's error codes, grouped by their status). What
//! the attributes cannot say is added by typed `utoipa::Modify` impls, one per concern, each
//! beside the code it describes (the MCP body's in `mcp::http`), listed in `modifiers(...)`. A
//! test checks that the document has exactly the operations of [`super::ROUTES`] and that every
//! operation's errors are listed; the served documents are golden files
//! (`tests/golden/openapi/`).
//!
//! The document served by a running server also says what that server can do: without an LLM
//! `generator`/`rewriter` accept only their non-LLM values, without a reranking model `rerank`
//! is only `false` (asking anyway is still answered, with the documented error).

use actix_web::{web, HttpResponse};
use serde_json::Value;
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, ArrayItems, ObjectBuilder, SchemaType, Type,
};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder, Schema};
use utoipa::{Modify, OpenApi, PartialSchema};

use super::assets::StaticFileNames;
use super::collections::UploadParts;
use super::embeddings::EmbeddingInputs;
use super::openai::UserMessages;
use super::responses::ResponseInputs;
use super::runs::QrelsBody;
use super::turns::UtteranceOrRegenerate;
use crate::config::UploadLimits;
use crate::mcp::http::JsonRpcBody;
use crate::web::error::ErrorCode;
use crate::web::schema::{add_keywords, NONBLANK};
use crate::web::AppState;

/// What the document describes beyond the code: this server's optional parts and configured
/// limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// An LLM endpoint is configured (`generator`/`rewriter` = `llm`).
    pub llm: bool,
    /// A reranking model is loaded (`rerank` = `true`).
    pub reranker: bool,
    /// The bi-encoder serves dense and hybrid retrieval (`retrieval` = `dense`, `hybrid`).
    pub dense: bool,
    /// Most files one upload takes (`uploads.max_files`): a longer `files` list is refused with
    /// 413, so the document states it as `maxItems`.
    pub upload_max_files: usize,
}

impl Capabilities {
    /// Every optional part, with the default limits.
    pub const ALL: Capabilities = Capabilities {
        llm: true,
        reranker: true,
        dense: true,
        upload_max_files: UploadLimits::DEFAULT_MAX_FILES,
    };
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "convrag",
        description = "Conversational, personalized retrieval-augmented generation (TREC iKAT style). \
            Every error body is `{\"error\": {\"code\", \"message\", \"field\"}}` except on the \
            OpenAI-compatible routes (OpenAI's error shape) and `/mcp` (JSON-RPC errors)."
    ),
    paths(
        super::assets::index,
        super::assets::file,
        super::health::healthz,
        super::health::readyz,
        super::metrics::scrape,
        document,
        super::users::create,
        super::users::me,
        super::users::delete_me,
        super::users::create_token,
        super::users::list_tokens,
        super::users::revoke_token,
        super::users::disable,
        super::users::enable,
        super::conversations::create,
        super::conversations::list,
        super::conversations::get,
        super::conversations::update,
        super::conversations::delete,
        super::ptkb::list,
        super::ptkb::add,
        super::ptkb::edit,
        super::ptkb::remove,
        super::turns::list,
        super::turns::create,
        super::turns::get,
        super::collections::list,
        super::collections::get,
        super::collections::delete,
        super::collections::create,
        super::collections::upload,
        super::collections::search,
        super::sign_in::sign_in,
        super::openai::models,
        super::openai::model,
        super::openai::chat_completions,
        super::responses::create,
        super::responses::get,
        super::embeddings::create,
        super::profile::list,
        super::profile::add,
        super::profile::remove,
        super::runs::list,
        super::runs::compare,
        super::runs::get,
        super::runs::list_qrels,
        super::runs::put_qrels,
        super::runs::delete,
        super::runs::delete_qrels,
        crate::mcp::http::post,
    ),
    modifiers(
        &NamedPatterns,
        &BearerAuth,
        &LinkFieldNames,
        &HeadersAreText,
        &ErrorResponses,
        &ErrorSchemas,
        &UtteranceOrRegenerate,
        &UserMessages,
        &ResponseInputs,
        &EmbeddingInputs,
        &QrelsBody,
        &UploadParts,
        &JsonRpcBody,
        &StaticFileNames,
        &SseEvents,
    ),
    security(("bearer" = []))
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A user token (`POST /v1/users` returns the first); `POST /v1/users` \
                         itself takes the administrator token.",
                    ))
                    .build(),
            ),
        );
    }
}

impl PartialSchema for ErrorCode {
    fn schema() -> RefOr<Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::Type::String)
            .enum_values(Some(ErrorCode::ALL.iter().map(|c| c.as_str())))
            .description(Some("Stable error code (the status follows from it)."))
            .into()
    }
}

use ErrorCode::{
    AdminRequired, CollectionUnavailable, Conflict, ConversationBusy, DatabaseUnavailable,
    IdempotencyKeyReused, InvalidField, InvalidToken, MalformedJson, MissingToken,
    ModelUnavailable, NotFound, PayloadTooLarge, QuotaExceeded, RateLimited, RequestTimeout,
    TokenExpired, TokenRevoked, UnreadableFile, UnsupportedMediaType, UserDisabled,
};

/// A user's bearer token (`extract::AuthUser`).
const AUTH: &[ErrorCode] = &[
    MissingToken,
    InvalidToken,
    TokenExpired,
    TokenRevoked,
    UserDisabled,
    DatabaseUnavailable,
];
/// An administrator's token (`extract::AdminAuth`).
const ADMIN: &[ErrorCode] = &[
    MissingToken,
    InvalidToken,
    TokenExpired,
    TokenRevoked,
    UserDisabled,
    AdminRequired,
    DatabaseUnavailable,
];
const BODY: &[ErrorCode] = &[
    MalformedJson,
    InvalidField,
    PayloadTooLarge,
    RequestTimeout,
    UnsupportedMediaType,
];
/// A turn answered in OpenAI's shape (chat completions, responses): the conversation's admission.
const ANSWER: &[ErrorCode] = &[
    NotFound,
    Conflict,
    ConversationBusy,
    IdempotencyKeyReused,
    ModelUnavailable,
    CollectionUnavailable,
    QuotaExceeded,
    RateLimited,
];

/// The error codes each operation (by `operationId`) can answer with, beyond `internal`.
pub const ERRORS: &[(&str, &[&[ErrorCode]])] = &[
    ("index", &[]),
    ("static_file", &[&[NotFound]]),
    ("healthz", &[]),
    ("readyz", &[&[DatabaseUnavailable]]),
    ("metrics", &[ADMIN]),
    ("openapi_document", &[]),
    ("create_user", &[ADMIN, BODY, &[Conflict]]),
    ("get_me", &[AUTH]),
    ("delete_me", &[AUTH]),
    ("create_token", &[AUTH, BODY]),
    ("list_tokens", &[AUTH]),
    ("revoke_token", &[AUTH, &[InvalidField, NotFound]]),
    ("disable_user", &[ADMIN, &[InvalidField, NotFound]]),
    ("enable_user", &[ADMIN, &[InvalidField, NotFound]]),
    (
        "create_conversation",
        &[
            AUTH,
            BODY,
            &[NotFound, Conflict, IdempotencyKeyReused, QuotaExceeded],
        ],
    ),
    ("list_conversations", &[AUTH]),
    ("get_conversation", &[AUTH, &[InvalidField, NotFound]]),
    ("update_conversation", &[AUTH, BODY, &[NotFound]]),
    ("sign_in", &[BODY, &[InvalidToken, DatabaseUnavailable]]),
    ("delete_conversation", &[AUTH, &[InvalidField, NotFound]]),
    ("list_ptkb", &[AUTH, &[InvalidField, NotFound]]),
    (
        "add_ptkb_statement",
        &[AUTH, BODY, &[NotFound, Conflict, QuotaExceeded]],
    ),
    ("edit_ptkb_statement", &[AUTH, BODY, &[NotFound]]),
    ("remove_ptkb_statement", &[AUTH, &[InvalidField, NotFound]]),
    ("list_turns", &[AUTH, &[InvalidField, NotFound]]),
    (
        "create_turn",
        &[
            AUTH,
            BODY,
            &[
                NotFound,
                Conflict,
                IdempotencyKeyReused,
                ModelUnavailable,
                CollectionUnavailable,
                RateLimited,
            ],
        ],
    ),
    ("get_turn", &[AUTH, &[InvalidField, NotFound]]),
    ("list_collections", &[AUTH]),
    (
        "get_collection",
        &[AUTH, &[InvalidField, NotFound, CollectionUnavailable]],
    ),
    (
        "delete_collection",
        &[AUTH, &[InvalidField, NotFound, Conflict]],
    ),
    ("create_collection", &[AUTH, BODY, &[Conflict]]),
    (
        "upload_documents",
        &[
            AUTH,
            &[
                InvalidField,
                NotFound,
                Conflict,
                PayloadTooLarge,
                RequestTimeout,
                UnsupportedMediaType,
                UnreadableFile,
                RateLimited,
            ],
        ],
    ),
    (
        "search_collection",
        &[
            AUTH,
            &[
                InvalidField,
                NotFound,
                ModelUnavailable,
                CollectionUnavailable,
                RateLimited,
            ],
        ],
    ),
    ("list_models", &[AUTH]),
    ("get_model", &[AUTH, &[NotFound, CollectionUnavailable]]),
    ("chat_completions", &[AUTH, BODY, ANSWER]),
    ("create_response", &[AUTH, BODY, ANSWER]),
    ("get_response", &[AUTH, &[InvalidField, NotFound]]),
    (
        "create_embeddings",
        &[AUTH, BODY, &[NotFound, ModelUnavailable, RateLimited]],
    ),
    ("list_profile_statements", &[AUTH]),
    (
        "add_profile_statement",
        &[AUTH, BODY, &[Conflict, QuotaExceeded]],
    ),
    (
        "remove_profile_statement",
        &[AUTH, &[InvalidField, NotFound]],
    ),
    ("list_runs", &[AUTH]),
    ("compare_runs", &[AUTH, &[InvalidField, NotFound]]),
    ("get_run", &[AUTH, &[InvalidField, NotFound]]),
    ("list_qrels", &[AUTH]),
    (
        "put_qrels",
        &[
            AUTH,
            &[
                InvalidField,
                PayloadTooLarge,
                RequestTimeout,
                UnsupportedMediaType,
                QuotaExceeded,
            ],
        ],
    ),
    ("delete_qrels", &[AUTH, &[InvalidField, NotFound]]),
    ("delete_run", &[AUTH, &[NotFound]]),
    ("mcp", &[AUTH, &[PayloadTooLarge, RequestTimeout]]),
];

/// Operations whose errors have OpenAI's shape (their clients parse it).
const OPENAI_SHAPED: &[&str] = &[
    "list_models",
    "get_model",
    "chat_completions",
    "create_response",
    "get_response",
    "create_embeddings",
];

/// The document for a server with `capabilities`.
pub fn document_for(capabilities: Capabilities) -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    narrow_to(&mut doc, capabilities);
    doc
}

/// [`document_for`] as JSON.
pub fn document_value(capabilities: Capabilities) -> Value {
    serde_json::to_value(document_for(capabilities)).unwrap_or_default()
}

/// The patterns the annotations name (utoipa takes literals only), as the server checks them:
/// `NONBLANK` [`NONBLANK`], `NOTNUL` any text without NUL, `IDENTIFIER`
/// `store::require_identifier` (collection names, statement ids; lengths are separate).
const PATTERNS: &[(&str, &str)] = &[
    ("NONBLANK", NONBLANK),
    ("NOTNUL", crate::web::schema::NOTNUL),
    ("IDENTIFIER", "^[A-Za-z0-9][A-Za-z0-9._-]*$"),
    // `index::validate_name`: a collection's directory name.
    ("INDEX_NAME", "^[A-Za-z0-9_-][A-Za-z0-9._-]*$"),
    ("MEASURE", crate::service::runs::MEASURE_PATTERN),
];

/// Replaces the pattern names of the annotations by the patterns.
struct NamedPatterns;

impl Modify for NamedPatterns {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        visit_schemas(doc, &mut |schema| {
            let Schema::Object(object) = schema else {
                return;
            };
            let named = PATTERNS
                .iter()
                .find(|(name, _)| object.pattern.as_deref() == Some(name));
            if let Some((_, pattern)) = named {
                object.pattern = Some(pattern.to_string());
            }
        });
    }
}

/// Every operation of the document.
fn operations_mut(doc: &mut utoipa::openapi::OpenApi) -> impl Iterator<Item = &mut Operation> {
    doc.paths.paths.values_mut().flat_map(|item| {
        [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ]
        .into_iter()
        .filter_map(Option::as_mut)
    })
}

/// Calls `f` on every schema written out in the document (components, parameters, bodies,
/// responses) and on every schema inside those; `$ref`s are visited where they are defined.
fn visit_schemas(doc: &mut utoipa::openapi::OpenApi, f: &mut dyn FnMut(&mut Schema)) {
    if let Some(components) = doc.components.as_mut() {
        for schema in components.schemas.values_mut() {
            visit_ref_or(schema, f);
        }
    }
    for operation in operations_mut(doc) {
        for parameter in operation.parameters.iter_mut().flatten() {
            if let Some(schema) = parameter.schema.as_mut() {
                visit_ref_or(schema, f);
            }
        }
        let bodies = operation
            .request_body
            .iter_mut()
            .flat_map(|b| b.content.values_mut());
        for content in bodies {
            if let Some(schema) = content.schema.as_mut() {
                visit_ref_or(schema, f);
            }
        }
        for response in operation.responses.responses.values_mut() {
            let RefOr::T(response) = response else {
                continue;
            };
            for content in response.content.values_mut() {
                if let Some(schema) = content.schema.as_mut() {
                    visit_ref_or(schema, f);
                }
            }
        }
    }
}

fn visit_ref_or(schema: &mut RefOr<Schema>, f: &mut dyn FnMut(&mut Schema)) {
    if let RefOr::T(schema) = schema {
        visit(schema, f);
    }
}

fn visit(schema: &mut Schema, f: &mut dyn FnMut(&mut Schema)) {
    f(schema);
    match schema {
        Schema::Object(object) => {
            for property in object.properties.values_mut() {
                visit_ref_or(property, f);
            }
            if let Some(AdditionalProperties::RefOr(additional)) =
                object.additional_properties.as_deref_mut()
            {
                visit_ref_or(additional, f);
            }
            if let Some(names) = object.property_names.as_deref_mut() {
                visit(names, f);
            }
        }
        Schema::Array(array) => {
            if let ArrayItems::RefOrSchema(items) = &mut array.items {
                visit_ref_or(items, f);
            }
            for item in &mut array.prefix_items {
                visit(item, f);
            }
        }
        Schema::OneOf(one) => one.items.iter_mut().for_each(|s| visit_ref_or(s, f)),
        Schema::AllOf(all) => all.items.iter_mut().for_each(|s| visit_ref_or(s, f)),
        Schema::AnyOf(any) => any.items.iter_mut().for_each(|s| visit_ref_or(s, f)),
        _ => {}
    }
}

/// An optional header is absent or text, never null: utoipa types an `Option` parameter as
/// `["string", "null"]`, and a client (schemathesis, say) then sends the text `null` as a value
/// the document allows, which a UUID header cannot be.
struct HeadersAreText;

impl Modify for HeadersAreText {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::ParameterIn;
        let parameters = operations_mut(doc).flat_map(|op| op.parameters.iter_mut().flatten());
        for parameter in parameters {
            if parameter.parameter_in != ParameterIn::Header {
                continue;
            }
            if let Some(RefOr::T(Schema::Object(schema))) = parameter.schema.as_mut() {
                if schema.schema_type == SchemaType::from_iter([Type::String, Type::Null]) {
                    schema.schema_type = SchemaType::Type(Type::String);
                }
            }
        }
    }
}

/// utoipa 5.4 writes a link's fields in snake case; OpenAPI names them in camel case.
struct LinkFieldNames;

impl Modify for LinkFieldNames {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let responses = operations_mut(doc).flat_map(|op| op.responses.responses.values_mut());
        for response in responses {
            let RefOr::T(response) = response else {
                continue;
            };
            for link in response.links.values_mut() {
                let RefOr::T(link) = link else {
                    continue;
                };
                let mut fields = serde_json::Map::new();
                for (name, value) in [
                    ("operationId", std::mem::take(&mut link.operation_id)),
                    ("operationRef", std::mem::take(&mut link.operation_ref)),
                ] {
                    if !value.is_empty() {
                        fields.insert(name.into(), Value::String(value));
                    }
                }
                if let Some(body) = link.request_body.take() {
                    fields.insert("requestBody".into(), body);
                }
                add_keywords(&mut link.extensions, fields);
            }
        }
    }
}

/// `GET /v1/openapi.json`
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    operation_id = "openapi_document",
    security(()),
    responses((status = 200, description = "This document (OpenAPI 3.1)", content_type = "application/json", body = Object))
)]
pub async fn document(state: web::Data<AppState>) -> HttpResponse {
    let capabilities = Capabilities {
        llm: state.turns.has_llm(),
        reranker: state.turns.reranker().is_some(),
        dense: state.turns.has_vectors(),
        upload_max_files: state.collections.limits().max_files,
    };
    HttpResponse::Ok().json(document_for(capabilities))
}

/// A `text/event-stream` body is described event by event, as clients and schemathesis read it:
/// each event an object with its `data` (a JSON text), and optionally `event`, `id` and `retry`.
struct SseEvents;

impl Modify for SseEvents {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let string = || ObjectBuilder::new().schema_type(Type::String);
        let event = || {
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .description(Some("One server-sent event."))
                .property("data", string())
                .property("event", string())
                .property("id", string())
                .property("retry", ObjectBuilder::new().schema_type(Type::Integer))
                .required("data")
        };
        for operation in operations_mut(doc) {
            for response in operation.responses.responses.values_mut() {
                let RefOr::T(response) = response else {
                    continue;
                };
                if let Some(content) = response.content.get_mut("text/event-stream") {
                    content.schema = Some(event().into());
                }
            }
        }
    }
}

/// Each operation's error codes from [`ERRORS`], one response per status whose body's `code`
/// is one of that status's codes.
struct ErrorResponses;

impl Modify for ErrorResponses {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        for operation in operations_mut(doc) {
            let id = operation.operation_id.clone().unwrap_or_default();
            let Some((_, groups)) = ERRORS.iter().find(|(op, _)| *op == id) else {
                continue;
            };
            let openai = OPENAI_SHAPED.contains(&id.as_str());
            for (status, codes) in by_status(groups) {
                let schema = if openai {
                    Ref::from_schema_name("OpenAiError").into()
                } else if id == "mcp" && matches!(status.to_string().as_str(), "401" | "403") {
                    // A refused token is a JSON-RPC error, which MCP clients show.
                    crate::web::schema::keywords_only(serde_json::json!({
                        "type": "object", "required": ["jsonrpc", "id", "error"],
                        "properties": {"jsonrpc": {"const": "2.0"},
                            "error": {"type": "object", "required": ["code", "message", "data"],
                                "properties": {"code": {"type": "integer"},
                                    "message": {"type": "string"},
                                    "data": {"type": "object", "required": ["code"],
                                        "properties": {"code": {"type": "string"}}}}}}}))
                    .into()
                } else if id == "mcp" {
                    Ref::from_schema_name("Error").into()
                } else {
                    error_schema(&codes)
                };
                let response = ResponseBuilder::new()
                    .description(format!("Error: {}", codes.join(", ")))
                    .content(
                        "application/json",
                        ContentBuilder::new().schema(Some(schema)).build(),
                    )
                    .build();
                operation
                    .responses
                    .responses
                    .entry(status.to_string())
                    .or_insert(RefOr::T(response));
            }
        }
    }
}

/// The codes of `groups` by their status, in the order first named.
fn by_status(groups: &[&[ErrorCode]]) -> Vec<(u16, Vec<&'static str>)> {
    let mut by_status: Vec<(u16, Vec<&str>)> = Vec::new();
    for code in groups.iter().flat_map(|g| g.iter()) {
        let status = code.status().as_u16();
        match by_status.iter_mut().find(|(s, _)| *s == status) {
            Some((_, codes)) if !codes.contains(&code.as_str()) => codes.push(code.as_str()),
            Some(_) => {}
            None => by_status.push((status, vec![code.as_str()])),
        }
    }
    by_status
}

/// The error envelope with `code` limited to `codes`.
fn error_schema(codes: &[&str]) -> RefOr<Schema> {
    let code = ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .enum_values(Some(codes.iter().copied()));
    let error = ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .property("code", code);
    let limits = ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .property("error", error)
        .build();
    let mut schema = AllOfBuilder::new()
        .item(Ref::from_schema_name("Error"))
        .build();
    add_keywords(&mut schema.extensions, limits);
    Schema::AllOf(schema).into()
}

/// The error bodies: ours (`Error`) and OpenAI's (`OpenAiError`).
struct ErrorSchemas;

impl Modify for ErrorSchemas {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let string = || ObjectBuilder::new().schema_type(Type::String);
        let nullable_string =
            || ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::String, Type::Null]));
        let envelope = |error: ObjectBuilder| {
            ObjectBuilder::new()
                .required("error")
                .property("error", error)
                .build()
        };
        let ours = ObjectBuilder::new()
            .required("code")
            .required("message")
            .required("field")
            .property("code", ErrorCode::schema())
            .property("message", string())
            .property(
                "field",
                nullable_string().description(Some(
                    "The request field (body path, query or path parameter) the error is about.",
                )),
            );
        let openai = ObjectBuilder::new()
            .required("message")
            .required("type")
            .required("param")
            .required("code")
            .property("message", string())
            .property(
                "type",
                string().enum_values(Some(["invalid_request_error", "server_error"])),
            )
            .property("param", nullable_string())
            .property("code", string());
        let components = doc.components.get_or_insert_with(Default::default);
        components
            .schemas
            .insert("Error".into(), envelope(ours).into());
        components
            .schemas
            .insert("OpenAiError".into(), envelope(openai).into());
    }
}

/// Leaves out the values this server refuses for want of an LLM, a model or the bi-encoder's
/// vector search.
pub fn narrow_to(doc: &mut utoipa::openapi::OpenApi, capabilities: Capabilities) {
    let schemas = doc.components.as_mut().map(|c| &mut c.schemas);
    let Some(schemas) = schemas else {
        return;
    };
    UploadParts::limit_files(schemas, capabilities.upload_max_files);
    if !capabilities.llm {
        for (name, value) in [
            ("GeneratorChoice", "extractive"),
            ("RewriterChoice", "history"),
        ] {
            if let Some(RefOr::T(Schema::Object(schema))) = schemas.get_mut(name) {
                if let Some(values) = schema.enum_values.as_mut() {
                    values.retain(|v| v == value);
                }
            }
        }
    }
    if !capabilities.dense {
        if let Some(RefOr::T(Schema::Object(schema))) = schemas.get_mut("Retrieval") {
            if let Some(values) = schema.enum_values.as_mut() {
                values.retain(|v| v == "bm25");
            }
        }
    }
    if capabilities.reranker {
        return;
    }
    if let Some(RefOr::T(Schema::Object(turn))) = schemas.get_mut("CreateTurn") {
        if let Some(rerank) = turn.properties.get_mut("rerank") {
            *rerank = ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::Boolean, Type::Null]))
                .enum_values(Some([Value::Bool(false), Value::Null]))
                .description(Some("This server has no reranking model."))
                .into();
        }
    }
    let search =
        operations_mut(doc).find(|op| op.operation_id.as_deref() == Some("search_collection"));
    let params = search
        .into_iter()
        .flat_map(|op| op.parameters.iter_mut().flatten());
    for param in params.filter(|p| p.name == "rerank") {
        param.schema = Some(
            ObjectBuilder::new()
                .schema_type(Type::Boolean)
                .enum_values(Some([false]))
                .into(),
        );
    }
}

/// (method, path) of every operation in the document, upper-case methods.
pub fn operations(doc: &Value) -> Vec<(String, String)> {
    let mut ops = Vec::new();
    if let Some(paths) = doc.get("paths").and_then(|p| p.as_object()) {
        for (path, item) in paths {
            if let Some(item) = item.as_object() {
                for method in item.keys() {
                    if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                        ops.push((method.to_uppercase(), path.clone()));
                    }
                }
            }
        }
    }
    ops.sort();
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `value` with every object's keys sorted, pretty-printed: the golden files' form.
    fn canonical(value: &Value) -> String {
        fn sort(value: &Value) -> Value {
            match value {
                Value::Object(map) => {
                    let mut entries: Vec<_> = map.iter().collect();
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                    Value::Object(
                        entries
                            .into_iter()
                            .map(|(k, v)| (k.clone(), sort(v)))
                            .collect(),
                    )
                }
                Value::Array(items) => Value::Array(items.iter().map(sort).collect()),
                other => other.clone(),
            }
        }
        serde_json::to_string_pretty(&sort(value)).unwrap() + "\n"
    }

    /// The served document is checked in under `tests/golden/openapi/`: a change to it (from an
    /// attribute, a schema or a `Modify`) shows as a diff to review. Regenerate with
    /// `CONVRAG_UPDATE_GOLDEN=1 cargo test --lib api::openapi`.
    #[test]
    fn documents_equal_the_golden_files() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/openapi");
        let cases = [
            ("full.json", Capabilities::ALL),
            (
                "without_llm_or_reranker.json",
                Capabilities {
                    llm: false,
                    reranker: false,
                    dense: false,
                    upload_max_files: 3,
                },
            ),
        ];
        for (name, capabilities) in cases {
            let path = dir.join(name);
            let actual = canonical(&document_value(capabilities));
            if std::env::var_os("CONVRAG_UPDATE_GOLDEN").is_some() {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &actual).unwrap();
                continue;
            }
            let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (CONVRAG_UPDATE_GOLDEN=1 creates it)",
                    path.display()
                )
            });
            assert!(
                expected == actual,
                "{} differs from the document:\n{actual}",
                path.display()
            );
        }
    }

    #[test]
    fn document_matches_the_routes() {
        let mut routes: Vec<(String, String)> = super::super::ROUTES
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        routes.sort();
        assert_eq!(operations(&document_value(Capabilities::ALL)), routes);
    }

    #[test]
    fn header_parameters_are_never_null() {
        let doc = document_value(Capabilities::ALL);
        let mut headers = 0;
        for item in doc["paths"].as_object().unwrap().values() {
            for operation in item.as_object().unwrap().values() {
                let parameters = operation["parameters"].as_array().into_iter().flatten();
                for p in parameters.filter(|p| p["in"] == "header") {
                    headers += 1;
                    assert_eq!(p["schema"]["type"], "string", "{p}");
                }
            }
        }
        assert!(headers >= 3, "the optional headers are documented");
    }

    #[test]
    fn every_operation_lists_its_errors() {
        let mut typed = document_for(Capabilities::ALL);
        let mut ids = Vec::new();
        for operation in operations_mut(&mut typed) {
            let id = operation.operation_id.clone().unwrap();
            assert!(
                ERRORS.iter().any(|(op, _)| *op == id),
                "{id} has no ERRORS entry"
            );
            ids.push(id);
        }
        for (op, _) in ERRORS {
            assert!(ids.iter().any(|id| id == op), "ERRORS names unknown {op}");
        }
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "operationIds are unique");
        let doc = document_value(Capabilities::ALL);
        // A 400 naming fields is documented where a body is read.
        let create = doc.pointer("/paths/~1v1~1conversations/post/responses/400/content/application~1json/schema/properties/error/properties/code/enum");
        assert_eq!(create, Some(&json!(["malformed_json", "invalid_field"])));
    }

    #[test]
    fn a_server_without_llm_or_model_documents_only_what_it_accepts() {
        let doc = document_value(Capabilities {
            llm: false,
            reranker: false,
            dense: false,
            upload_max_files: 3,
        });
        assert_eq!(
            doc.pointer("/components/schemas/GeneratorChoice/enum"),
            Some(&json!(["extractive"]))
        );
        assert_eq!(
            doc.pointer("/components/schemas/UploadForm/properties/files/anyOf/0/maxItems"),
            Some(&json!(3)),
            "a longer upload is refused, so the document says so"
        );
        assert_eq!(
            doc.pointer("/components/schemas/CreateTurn/properties/rerank/enum"),
            Some(&json!([false, null]))
        );
        let full = document_value(Capabilities::ALL);
        assert_eq!(
            full.pointer("/components/schemas/GeneratorChoice/enum"),
            Some(&json!(["extractive", "llm"]))
        );
    }
}
