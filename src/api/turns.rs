//! A conversation's turns: run one (`POST`, JSON or a server-sent event stream), read them back.

use crate::service::conversations::ConversationError;
use crate::store::StoreError;
use crate::web::sse;
use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::model::{stream_event, StreamEvent, TurnEnvelope, TurnsEnvelope};
use crate::dense::Retrieval;
use crate::pipeline::turn::{GeneratorChoice, RewriterChoice, TurnEvent};
use crate::service::{Begun, RequestedSettings, SettingLimits, TurnContext, TurnRequest};
use crate::store::{Turn, TurnSlot};
use crate::web::error::{ApiError, ErrorCode};
use crate::web::extract::{
    idempotency_key, parse_uuid, ApiJson, ApiQuery, AuthUser, REPLAYED_HEADER,
};
use crate::web::AppState;

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Include earlier versions of regenerated turns.
    #[serde(default)]
    pub all_versions: bool,
}

/// Body of `POST .../turns`.
#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTurn {
    /// What the user said (optional when regenerating: the earlier version's utterance).
    #[schema(min_length = 1, max_length = 10000, pattern = "NONBLANK")]
    pub utterance: Option<String>,
    /// Id of a turn to regenerate: a new version at its position.
    #[schema(value_type = Option<uuid::Uuid>)]
    pub regenerate: Option<String>,
    /// Default: `llm` when the server has an LLM, else `extractive`.
    pub generator: Option<GeneratorChoice>,
    /// Rerank with the neural model (default: when a model is loaded).
    pub rerank: Option<bool>,
    /// BM25 candidates retrieved (and reranked).
    #[schema(minimum = 1, maximum = 1000)]
    pub rerank_depth: Option<usize>,
    /// Passages kept with the turn and shown to the generator.
    #[schema(minimum = 1, maximum = 100)]
    pub passages: Option<usize>,
    /// Longest answer, in words.
    #[schema(minimum = 1, maximum = 2000)]
    pub max_words: Option<usize>,
    /// A manual rewrite used instead of the automatic one.
    #[schema(min_length = 1, max_length = 10000, pattern = "NONBLANK")]
    pub rewrite: Option<String>,
    /// Who rewrites the utterance: `history` (default) or `llm`.
    pub rewriter: Option<RewriterChoice>,
    /// The first stage: `bm25` (default), `dense` (the bi-encoder over the collection's passage
    /// vectors) or `hybrid` (both, fused by reciprocal rank). While the collection's vectors are
    /// building or absent the turn runs BM25 and says so: `diagnostics.retrieval` is the first
    /// stage that ran, `diagnostics.retrieval_fallback` what was asked and why not.
    pub retrieval: Option<Retrieval>,
}

/// A turn needs an utterance unless it regenerates an earlier one (which has its own).
pub(super) struct UtteranceOrRegenerate;

impl utoipa::Modify for UtteranceOrRegenerate {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, SchemaType, Type};
        let Some(turn) = crate::web::schema::component_mut(doc, "CreateTurn") else {
            return;
        };
        let given = |field: &str| {
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .required(field)
                .property(field, ObjectBuilder::new().schema_type(Type::String))
        };
        let either = AnyOfBuilder::new()
            .item(given("utterance"))
            .item(given("regenerate"))
            .build();
        crate::web::schema::add_keywords(&mut turn.extensions, either);
    }
}

/// The `{conversation_id}` and `{turn_id}` of a route.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // documents the path; handlers parse it to name it in errors
pub struct TurnPath {
    pub conversation_id: uuid::Uuid,
    pub turn_id: uuid::Uuid,
}

impl CreateTurn {
    fn requested_settings(&self) -> RequestedSettings {
        RequestedSettings {
            generator: self.generator,
            rewriter: self.rewriter,
            rerank: self.rerank,
            depth: self.rerank_depth,
            passages: self.passages,
            max_words: self.max_words,
            retrieval: self.retrieval,
            ..RequestedSettings::default()
        }
    }
}

/// One server-sent event.
fn sse(event: StreamEvent, data: &Value) -> web::Bytes {
    sse::event_frame(event.as_str(), data)
}

fn json_value<T: serde::Serialize>(value: T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

fn wants_event_stream(req: &HttpRequest) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

/// The answer to a retry whose `Idempotency-Key` names a stored turn: the JSON turn (201), or for
/// an event stream a stream of the one final `turn` event (the whole stored turn).
fn replay(req: &HttpRequest, turn: Turn) -> HttpResponse {
    let envelope = TurnEnvelope::from(turn);
    if wants_event_stream(req) {
        let frame = sse(StreamEvent::Turn, &json_value(envelope));
        return HttpResponse::Ok()
            .content_type("text/event-stream")
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .insert_header((REPLAYED_HEADER, "true"))
            .body(frame);
    }
    HttpResponse::Created()
        .insert_header((REPLAYED_HEADER, "true"))
        .json(envelope)
}

/// `POST /v1/conversations/{conversation_id}/turns`: runs the pipeline for an utterance and
/// stores the whole turn atomically. The turn holds the conversation's lease while it runs, so
/// concurrent turns of one conversation are serialized and each sees the one before. With an
/// `Idempotency-Key`, a retry answers with the turn the first request stored.
#[utoipa::path(post, path = "/v1/conversations/{conversation_id}/turns", operation_id = "create_turn",
    tag = "turns", request_body = CreateTurn,
    params(super::model::ConversationPath,
        ("Idempotency-Key" = Option<String>, Header, max_length = 255, pattern = "^[!-~]+$",
            description = "A retry with the same key and body answers with the turn the first request stored")),
    responses(
        (status = 201, description = "The stored turn", body = TurnEnvelope, links(
            ("GetTurn" = (operation_id = "get_turn", parameters(
                ("conversation_id" = "$request.path.conversation_id"),
                ("turn_id" = "$response.body#/turn/id")))),
        )),
        (status = 200, description = "With `Accept: text/event-stream`: the turn's events \
            (`ptkb`, `rewrite`, `passages`, `sentence`, `restart`, then `turn` or `error`)",
            content_type = "text/event-stream", body = String),
    ))]
pub async fn create(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
    body: ApiJson<CreateTurn>,
) -> Result<HttpResponse, ApiError> {
    let conversation_id = parse_uuid("conversation_id", &path)?;
    let body = body.0;
    let route = format!("POST /v1/conversations/{conversation_id}/turns");
    let key = idempotency_key(&req, &route, &body)?;
    if let Some(u) = &body.utterance {
        state.turns.check_utterance("utterance", u)?;
    } else if body.regenerate.is_none() {
        return Err(ApiError::invalid(
            "utterance",
            "is required (unless regenerate names a turn)",
        ));
    }
    if let Some(r) = &body.rewrite {
        // A manual rewrite is a query a person wrote: an utterance's rule.
        state.turns.check_utterance("rewrite", r)?;
    }
    let settings = state.turns.resolve(
        &body.requested_settings(),
        state.turns.chat_defaults(),
        SettingLimits::API,
    )?;
    let slot = match &body.regenerate {
        None => TurnSlot::Next,
        Some(id) => {
            let turn_id = parse_uuid("regenerate", id)?;
            let earlier = state
                .conversations
                .turn(user.id, conversation_id, turn_id)
                .await
                .map_err(|e| match e {
                    // The conversation is there (the target); the turn named in the body is not.
                    ConversationError::Store(StoreError::NotFound { entity: "turn" }) => {
                        ApiError::field(
                            ErrorCode::Conflict,
                            "regenerate",
                            "no such turn in this conversation",
                        )
                    }
                    other => other.into(),
                })?;
            TurnSlot::Regenerate { seq: earlier.seq }
        }
    };
    let mut request = TurnRequest::new(body.utterance, settings);
    request.context = TurnContext::Stored {
        manual_rewrite: body.rewrite,
    };
    let admission = state.turns.admit_turns(user.id, 1, "utterance")?;
    let turn = match state
        .turns
        .begin_admitted(admission, user.id, conversation_id, slot, request, key)
        .await?
    {
        Begun::Started(turn) => *turn,
        Begun::Replayed(turn) => return Ok(replay(&req, *turn)),
    };

    if !wants_event_stream(&req) {
        let turn = turn.run(&mut |_| {}).await?;
        return Ok(HttpResponse::Created().json(TurnEnvelope::from(turn)));
    }

    let collection = turn.collection().unwrap_or_default().to_string();
    // The task outlives the request's scope: it reports failures under the request's id.
    let request_id = crate::web::current_request_id();
    Ok(sse::stream(|tx| async move {
        let events = tx.clone();
        let mut on_event = move |e: TurnEvent<'_>| {
            let (event, data) = stream_event(e, &collection);
            events.send(sse(event, &data));
        };
        let frame = match turn.run(&mut on_event).await.map_err(ApiError::from) {
            Ok(turn) => sse(StreamEvent::Turn, &json_value(TurnEnvelope::from(turn))),
            Err(e) => sse(
                StreamEvent::Error,
                &e.for_client(request_id.as_deref()).envelope(),
            ),
        };
        tx.send(frame);
    }))
}

/// `GET /v1/conversations/{conversation_id}/turns`
#[utoipa::path(get, path = "/v1/conversations/{conversation_id}/turns", operation_id = "list_turns",
    tag = "turns", params(super::model::ConversationPath, ListQuery),
    responses((status = 200, description = "The turns in order", body = TurnsEnvelope)))]
pub async fn list(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: ApiQuery<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_uuid("conversation_id", &path)?;
    let turns = state
        .conversations
        .turns(user.id, id, query.0.all_versions)
        .await?;
    Ok(HttpResponse::Ok().json(TurnsEnvelope {
        turns: turns.into_iter().map(Into::into).collect(),
    }))
}

/// `GET /v1/conversations/{conversation_id}/turns/{turn_id}`
#[utoipa::path(get, path = "/v1/conversations/{conversation_id}/turns/{turn_id}", operation_id = "get_turn",
    tag = "turns", params(TurnPath),
    responses((status = 200, description = "The turn", body = TurnEnvelope)))]
pub async fn get(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (conversation, turn) = path.into_inner();
    let id = parse_uuid("conversation_id", &conversation)?;
    let turn_id = parse_uuid("turn_id", &turn)?;
    let turn = state.conversations.turn(user.id, id, turn_id).await?;
    Ok(HttpResponse::Ok().json(TurnEnvelope::from(turn)))
}
