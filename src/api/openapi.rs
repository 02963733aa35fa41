//! The OpenAPI document of the API, generated from the code: `#[utoipa::path]` on every handler,
//! `ToSchema` on the bodies the handlers read and write (with the limits they enforce), and the
//! error responses from [`ERRORS`] (each operation's error codes, grouped by their status). A test
//! checks that the document has exactly the operations of [`super::ROUTES`] and that every
//! operation's errors are listed.
//!
//! The document served by a running server also says what that server can do: without an LLM
//! `generator`/`rewriter` accept only their non-LLM values, without a reranking model `rerank`
//! is only `false` (asking anyway is still answered, with the documented error).

use actix_web::{web, HttpResponse};
use serde_json::{json, Map, Value};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{Modify, OpenApi, PartialSchema};

use crate::web::error::ErrorCode;
use crate::web::AppState;

/// What the document describes beyond the code: this server's optional parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// An LLM endpoint is configured (`generator`/`rewriter` = `llm`).
    pub llm: bool,
    /// A reranking model is loaded (`rerank` = `true`).
    pub reranker: bool,
}

impl Capabilities {
    pub const ALL: Capabilities = Capabilities {
        llm: true,
        reranker: true,
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
        super::openai::chat_completions,
        super::profile::list,
        super::profile::add,
        super::profile::remove,
        crate::mcp::http::post,
    ),
    modifiers(&BearerAuth),
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
    AdminRequired, CollectionUnavailable, Conflict, DatabaseUnavailable, IdempotencyKeyReused,
    InvalidField, InvalidToken, MalformedJson, MissingToken, ModelUnavailable, NotFound,
    PayloadTooLarge, QuotaExceeded, RateLimited, TokenExpired, TokenRevoked, UnreadableFile,
    UnsupportedMediaType, UserDisabled,
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
    UnsupportedMediaType,
];

/// The error codes each operation (by `operationId`) can answer with, beyond `internal`.
pub const ERRORS: &[(&str, &[&[ErrorCode]])] = &[
    ("index", &[]),
    ("static_file", &[&[NotFound]]),
    ("healthz", &[]),
    ("readyz", &[&[DatabaseUnavailable]]),
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
                UnsupportedMediaType,
                UnreadableFile,
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
    (
        "chat_completions",
        &[
            AUTH,
            BODY,
            &[
                NotFound,
                Conflict,
                ModelUnavailable,
                CollectionUnavailable,
                RateLimited,
            ],
        ],
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
    ("mcp", &[AUTH, &[PayloadTooLarge]]),
];

/// Operations whose errors have OpenAI's shape (their clients parse it).
const OPENAI_SHAPED: &[&str] = &["list_models", "chat_completions"];

/// The document for a server with `capabilities`.
pub fn document_value(capabilities: Capabilities) -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    expand_patterns(&mut doc);
    link_field_names(&mut doc);
    add_error_responses(&mut doc);
    add_error_schemas(&mut doc);
    require_utterance_or_regenerate(&mut doc);
    describe_chat_messages(&mut doc);
    describe_mcp_body(&mut doc);
    list_static_files(&mut doc);
    narrow_to(&mut doc, capabilities);
    doc
}

/// The patterns the annotations name (utoipa takes literals only), as the server checks them:
/// `NONBLANK` is `store::require_text` (some character that `str::trim` keeps; no NUL, which
/// PostgreSQL text cannot hold), `NOTNUL` any text without NUL, `IDENTIFIER`
/// `store::require_identifier` (collection names, statement ids; lengths are separate).
const PATTERNS: &[(&str, &str)] = &[
    (
        "NONBLANK",
        "^[^\\u0000]*[^\\u0000\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000][^\\u0000]*$",
    ),
    ("NOTNUL", "^[^\\u0000]*$"),
    ("IDENTIFIER", "^[A-Za-z0-9][A-Za-z0-9._-]*$"),
    // `index::validate_name`: a collection's directory name.
    ("INDEX_NAME", "^[A-Za-z0-9_-][A-Za-z0-9._-]*$"),
];

fn expand_patterns(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if key == "pattern" {
                    if let Some((_, pattern)) = PATTERNS
                        .iter()
                        .find(|(name, _)| item.as_str() == Some(name))
                    {
                        *item = json!(pattern);
                    }
                } else {
                    expand_patterns(item);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(expand_patterns),
        _ => {}
    }
}

/// What `openai::user_messages` requires of a user message: text (a string, or text parts)
/// that is not blank.
fn describe_chat_messages(doc: &mut Value) {
    let not_blank = PATTERNS[0].1;
    if let Some(message) = doc
        .pointer_mut("/components/schemas/ChatMessage")
        .and_then(Value::as_object_mut)
    {
        message.insert(
            "if".into(),
            json!({"required": ["role"], "properties": {"role": {"const": "user"}}}),
        );
        message.insert(
            "then".into(),
            json!({"required": ["content"], "properties": {"content": {"anyOf": [
                {"type": "string", "minLength": 1, "maxLength": 10000, "pattern": not_blank},
                {"type": "array", "contains": {"type": "object", "required": ["type", "text"],
                    "properties": {"type": {"const": "text"},
                        "text": {"type": "string", "maxLength": 10000, "pattern": not_blank}}}},
            ]}}}),
        );
    }
    // The last message is the one answered: the user's.
    if let Some(messages) = doc
        .pointer_mut("/components/schemas/ChatRequest/properties/messages")
        .and_then(Value::as_object_mut)
    {
        messages.insert(
            "description".into(),
            json!("The whole history; the last message must be the user's."),
        );
    }
}

/// `POST /mcp` reads one JSON-RPC message or a batch, as `mcp::classify` tells them apart.
fn describe_mcp_body(doc: &mut Value) {
    let message = json!({
        "type": "object",
        "required": ["jsonrpc"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "method": {"type": "string"},
            "id": {"type": ["string", "number"]},
            "params": {},
        },
        "anyOf": [
            {"required": ["method"]},
            {"required": ["id", "result"]},
            {"required": ["id", "error"]},
        ],
    });
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        schemas.insert("JsonRpcMessage".into(), message);
    }
    // A batch is answered with an array.
    if let Some(reply) =
        doc.pointer_mut("/paths/~1mcp/post/responses/200/content/application~1json/schema")
    {
        *reply = json!({"oneOf": [
            {"type": "object"},
            {"type": "array", "items": {"type": "object"}},
        ]});
    }
    if let Some(content) =
        doc.pointer_mut("/paths/~1mcp/post/requestBody/content/application~1json/schema")
    {
        // `anyOf`, not `oneOf`: the two are disjoint anyway (object or array), and schemathesis
        // 4.32.5's coverage phase fails internally on this `oneOf`.
        *content = json!({"anyOf": [
            {"$ref": "#/components/schemas/JsonRpcMessage"},
            {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/JsonRpcMessage"}},
        ]});
    }
}

/// utoipa 5.4 writes a link's fields in snake case; OpenAPI names them in camel case.
fn link_field_names(doc: &mut Value) {
    for operation in operations_mut(doc) {
        let responses = operation
            .get_mut("responses")
            .and_then(Value::as_object_mut);
        for response in responses.into_iter().flat_map(|r| r.values_mut()) {
            let links = response.get_mut("links").and_then(Value::as_object_mut);
            for link in links.into_iter().flat_map(|l| l.values_mut()) {
                let Some(link) = link.as_object_mut() else {
                    continue;
                };
                for (from, to) in [
                    ("operation_id", "operationId"),
                    ("operation_ref", "operationRef"),
                    ("request_body", "requestBody"),
                ] {
                    if let Some(value) = link.remove(from) {
                        link.insert(to.into(), value);
                    }
                }
            }
        }
    }
}

/// `/static/{file}` serves the files of [`super::assets::ASSETS`].
fn list_static_files(doc: &mut Value) {
    let names: Vec<&str> = super::assets::ASSETS.iter().map(|a| a.name).collect();
    if let Some(params) = doc
        .pointer_mut("/paths/~1static~1{file}/get/parameters")
        .and_then(Value::as_array_mut)
    {
        for param in params.iter_mut().filter(|p| p["name"] == "file") {
            param["schema"] = json!({"type": "string", "enum": names});
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
    };
    HttpResponse::Ok().json(document_value(capabilities))
}

fn operations_mut(doc: &mut Value) -> impl Iterator<Item = &mut Map<String, Value>> {
    doc.get_mut("paths")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut())
        .filter_map(Value::as_object_mut)
}

/// Each operation's error codes from [`ERRORS`], one response per status whose body's `code`
/// is one of that status's codes.
fn add_error_responses(doc: &mut Value) {
    for operation in operations_mut(doc) {
        let id = operation
            .get("operationId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let Some((_, groups)) = ERRORS.iter().find(|(op, _)| *op == id) else {
            continue;
        };
        let mut by_status: Vec<(u16, Vec<&str>)> = Vec::new();
        for code in groups.iter().flat_map(|g| g.iter()) {
            let status = code.status().as_u16();
            match by_status.iter_mut().find(|(s, _)| *s == status) {
                Some((_, codes)) if !codes.contains(&code.as_str()) => codes.push(code.as_str()),
                Some(_) => {}
                None => by_status.push((status, vec![code.as_str()])),
            }
        }
        let openai = OPENAI_SHAPED.contains(&id.as_str());
        let Some(responses) = operation
            .get_mut("responses")
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        for (status, codes) in by_status {
            let schema = if openai {
                json!({"$ref": "#/components/schemas/OpenAiError"})
            } else if id == "mcp" {
                json!({"$ref": "#/components/schemas/Error"})
            } else {
                error_schema(&codes)
            };
            let description = format!("Error: {}", codes.join(", "));
            responses.entry(status.to_string()).or_insert(json!({
                "description": description,
                "content": {"application/json": {"schema": schema}},
            }));
        }
    }
}

/// The error envelope with `code` limited to `codes`.
fn error_schema(codes: &[&str]) -> Value {
    json!({
        "allOf": [{"$ref": "#/components/schemas/Error"}],
        "properties": {"error": {"properties": {"code": {"enum": codes}}}},
    })
}

fn add_error_schemas(doc: &mut Value) {
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "required": ["error"],
            "properties": {"error": {
                "type": "object",
                "required": ["code", "message", "field"],
                "properties": {
                    "code": ErrorCode::schema(),
                    "message": {"type": "string"},
                    "field": {"type": ["string", "null"], "description": "The request field (body path, query or path parameter) the error is about."},
                },
            }},
        }),
    );
    schemas.insert(
        "OpenAiError".into(),
        json!({
            "type": "object",
            "required": ["error"],
            "properties": {"error": {
                "type": "object",
                "required": ["message", "type", "param", "code"],
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string", "enum": ["invalid_request_error", "server_error"]},
                    "param": {"type": ["string", "null"]},
                    "code": {"type": "string"},
                },
            }},
        }),
    );
}

/// A turn needs an utterance unless it regenerates an earlier one (which has its own).
fn require_utterance_or_regenerate(doc: &mut Value) {
    if let Some(schema) = doc
        .pointer_mut("/components/schemas/CreateTurn")
        .and_then(Value::as_object_mut)
    {
        schema.insert(
            "anyOf".into(),
            json!([
                {"required": ["utterance"], "properties": {"utterance": {"type": "string"}}},
                {"required": ["regenerate"], "properties": {"regenerate": {"type": "string"}}},
            ]),
        );
    }
}

/// Leaves out the values this server refuses for want of an LLM or a model.
fn narrow_to(doc: &mut Value, capabilities: Capabilities) {
    if !capabilities.llm {
        for (schema, value) in [
            ("GeneratorChoice", "extractive"),
            ("RewriterChoice", "history"),
        ] {
            if let Some(values) = doc
                .pointer_mut(&format!("/components/schemas/{schema}/enum"))
                .and_then(Value::as_array_mut)
            {
                values.retain(|v| v == value);
            }
        }
    }
    if !capabilities.reranker {
        if let Some(rerank) = doc.pointer_mut("/components/schemas/CreateTurn/properties/rerank") {
            *rerank = json!({"type": ["boolean", "null"], "enum": [false, null],
                "description": "This server has no reranking model."});
        }
        for operation in operations_mut(doc) {
            let is_search =
                operation.get("operationId").and_then(Value::as_str) == Some("search_collection");
            let params = operation
                .get_mut("parameters")
                .and_then(Value::as_array_mut);
            for param in params.into_iter().flatten().filter(|_| is_search) {
                if param.get("name").and_then(Value::as_str) == Some("rerank") {
                    param["schema"] = json!({"type": "boolean", "enum": [false]});
                }
            }
        }
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
    fn every_operation_lists_its_errors() {
        let mut doc = document_value(Capabilities::ALL);
        let mut ids = Vec::new();
        for operation in operations_mut(&mut doc) {
            let id = operation["operationId"].as_str().unwrap().to_string();
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
        // A 400 naming fields is documented where a body is read.
        let create = doc.pointer("/paths/~1v1~1conversations/post/responses/400/content/application~1json/schema/properties/error/properties/code/enum");
        assert_eq!(create, Some(&json!(["malformed_json", "invalid_field"])));
    }

    #[test]
    fn a_server_without_llm_or_model_documents_only_what_it_accepts() {
        let doc = document_value(Capabilities {
            llm: false,
            reranker: false,
        });
        assert_eq!(
            doc.pointer("/components/schemas/GeneratorChoice/enum"),
            Some(&json!(["extractive"]))
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
