//! The OpenAI-compatible chat API: `GET /v1/models` (the collections, as models) and
//! `POST /v1/chat/completions` (a turn of a stored conversation), so existing chat clients and
//! the `openai` SDKs can use convrag. The API key is a convrag user token; errors have OpenAI's
//! shape.
//!
//! Clients resend the whole message history each time. The request continues the user's
//! conversation (started here, for the same model) whose current turns' utterances equal the
//! earlier user messages; when the last user message is already stored as the last turn, the
//! stored answer is returned instead of running the turn again. An explicit conversation id
//! (`X-Convrag-Conversation-Id` header or `metadata.conversation_id`) picks any of the user's
//! conversations instead. System messages become the conversation's instructions, which the
//! LLM generator's prompt carries.

use crate::web::sse;
use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::llm::{ChatMessage as LlmMessage, ChatRequest as LlmRequest};
use crate::pipeline::generate::Sampling;
use crate::pipeline::turn::TurnEvent;
use crate::service::chat::{
    answer, count_tokens, usage, AdmittedChat, Answer, AnswerOptions, AnswerStyle, ChatTurnRequest,
    ChatUsage, CitedPassage, IncomingMessage, PageLinks, StreamedText, PLAIN_LLM_MODEL,
};
use crate::service::embeddings::served_model;
use crate::store::{Turn, User};
use crate::web::error::{ApiError, ErrorCode};
use crate::web::extract::{idempotency_key, parse_uuid, ApiJson, AuthUser};
use crate::web::AppState;

/// Header naming the conversation a chat request continues (also sent back on every answer).
pub const CONVERSATION_HEADER: &str = "X-Convrag-Conversation-Id";

/// The largest `max_tokens` accepted (far above any answer's length; the schema states it).
pub(super) const MAX_TOKEN_BOUND: u64 = 1_000_000;

/// A token bound as JSON Schema reads an integer: `100` and `100.0` alike, within
/// [`MAX_TOKEN_BOUND`].
pub(super) fn token_bound<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<usize>, D::Error> {
    let Some(number) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    let whole = number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= MAX_TOKEN_BOUND as f64)
            .map(|f| f as u64)
    });
    match whole {
        Some(n) if n <= MAX_TOKEN_BOUND => Ok(Some(n as usize)),
        _ => Err(serde::de::Error::custom(format!(
            "must be a whole number from 1 to {MAX_TOKEN_BOUND}"
        ))),
    }
}

/// Body of `POST /v1/chat/completions`. `max_tokens` / `max_completion_tokens` bound the
/// answer's words; `n` above 1, `tools` that must be called and a JSON `response_format` are
/// refused (400 naming the parameter); `tools` with `tool_choice` `auto` or `none` get a plain
/// answer; `temperature`, `top_p`, `stop` and the token bound go to the LLM when it generates;
/// other OpenAI parameters are accepted and ignored: the pipeline's settings decide.
#[derive(Deserialize, ToSchema)]
pub struct ChatRequest {
    /// A collection of this server (`GET /v1/models`).
    #[schema(min_length = 1, max_length = 100, pattern = "IDENTIFIER")]
    pub model: String,
    /// The whole history, with at least one user message: the answer is to the last one (an
    /// answer to it already in the history is answered anew).
    #[schema(min_items = 1)]
    pub messages: Vec<ChatMessage>,
    /// Answer as server-sent `chat.completion.chunk` events.
    #[serde(default)]
    pub stream: bool,
    /// `conversation_id`: the conversation to continue.
    #[serde(default)]
    #[schema(value_type = Option<ChatMetadata>)]
    pub metadata: Option<serde_json::Map<String, Value>>,
    /// With `stream`: `include_usage` adds a last chunk with the token counts.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// At most this many words in the answer.
    #[serde(default, deserialize_with = "token_bound")]
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub max_tokens: Option<usize>,
    /// As `max_tokens`.
    #[serde(default, deserialize_with = "token_bound")]
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub max_completion_tokens: Option<usize>,
    /// Only 1: one answer per turn.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1)]
    pub n: Option<u32>,
    /// Function tools: convrag calls none, so only `tool_choice` `auto` or `none` is served.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    /// `auto` or `none`: a plain answer (`required` or a named function: 400).
    #[serde(default)]
    #[schema(value_type = Option<ToolChoiceMode>)]
    pub tool_choice: Option<Value>,
    /// Only `{"type": "text"}`: answers are cited prose (`json_object`, `json_schema`: 400).
    #[serde(default)]
    #[schema(value_type = Option<TextResponseFormat>)]
    pub response_format: Option<Value>,
    /// Passed to the LLM when it generates (`convrag-llm`, and collections' answers when the
    /// server's generator is the LLM).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f64>,
    /// Passed to the LLM when it generates.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1)]
    pub top_p: Option<f64>,
    /// Passed to the LLM when it generates: a string or strings.
    #[serde(default)]
    #[schema(value_type = Option<StopSequences>)]
    pub stop: Option<Value>,
    /// convrag's own options.
    #[serde(default)]
    pub convrag: Option<ConvragOptions>,
}

/// `convrag` of a chat request.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConvragOptions {
    /// `text`: the answer's text ends with a numbered list of its sources (`Sources:`, then
    /// `[n] title, URL`), for clients that show no annotations; `annotations` (the default):
    /// the sources come only as annotations and the `convrag.passages` field.
    #[serde(default)]
    pub sources: Option<SourcesMode>,
}

impl ConvragOptions {
    /// Whether `options` ask for the sources in the answer's text.
    pub(super) fn sources_as_text(options: Option<&ConvragOptions>) -> bool {
        options
            .and_then(|c| c.sources)
            .is_some_and(|s| s == SourcesMode::Text)
    }
}

/// Where an answer's sources are given.
#[derive(Deserialize, ToSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SourcesMode {
    Annotations,
    Text,
}

/// The `tool_choice` values served.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // documents `ChatRequest::tool_choice`, which is read as JSON
pub enum ToolChoiceMode {
    Auto,
    None,
}

/// The `response_format` served.
#[derive(ToSchema)]
#[allow(dead_code)] // documents `ChatRequest::response_format`, which is read as JSON
pub struct TextResponseFormat {
    #[schema(rename = "type", value_type = String, pattern = "^text$")]
    kind: (),
}

/// Stop sequences: one or several.
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // documents `ChatRequest::stop`, which is read as JSON
pub enum StopSequences {
    One(String),
    Several(Vec<String>),
}

/// `stream_options` of a streamed request.
#[derive(Deserialize, ToSchema)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// A request body of the endpoints that answer a turn (chat completions, responses).
pub(super) trait AnswerRequest: DeserializeOwned + 'static {
    /// The model (a collection) asked.
    fn model(&self) -> &str;

    fn convrag(&self) -> Option<&ConvragOptions>;

    /// Refuses what convrag cannot do rather than ignoring it.
    fn check_parameters(&self) -> Result<(), ApiError>;

    /// How the answer is written for the client of `req`.
    fn answer_style(&self, req: &HttpRequest) -> AnswerStyle {
        AnswerStyle {
            sources_as_text: ConvragOptions::sources_as_text(self.convrag()),
            links: page_links(req),
        }
    }
}

/// Refuses a `temperature` or `top_p` outside OpenAI's ranges.
pub(super) fn check_sampling(temperature: Option<f64>, top_p: Option<f64>) -> Result<(), ApiError> {
    if temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return Err(ApiError::invalid("temperature", "must be between 0 and 2"));
    }
    if top_p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
        return Err(ApiError::invalid("top_p", "must be between 0 and 1"));
    }
    Ok(())
}

/// The authenticated caller and its request body, its parameters and model checked.
pub(super) async fn read_request<T: AnswerRequest>(
    req: &HttpRequest,
    payload: &mut Payload,
    state: &AppState,
) -> Result<(User, T), ApiError> {
    let AuthUser(user) = AuthUser::from_request(req, &mut Payload::None).await?;
    // Unread parts (other OpenAI parameters, other roles' messages, tool items) may hold anything.
    let body = ApiJson::<T, true>::from_request(req, payload).await?.0;
    body.check_parameters()?;
    state.chat.check_model(user.id, body.model()).await?;
    Ok((user, body))
}

/// The messages of a request as its idempotency key hashes them.
pub(super) fn keyed_messages(messages: &[IncomingMessage]) -> Value {
    messages
        .iter()
        .map(|m| json!({"role": m.role, "text": m.text}))
        .collect()
}

/// The whole (not streamed) answer of `admitted`, as `render` writes the turn, naming its
/// conversation.
pub(super) async fn whole_answer<B: Serialize>(
    state: &AppState,
    admitted: AdmittedChat,
    render: impl FnOnce(&Turn) -> B,
) -> Result<HttpResponse, ApiError> {
    let conversation_id = admitted.conversation_id;
    let turn = state.chat.answer(admitted, &mut |_| {}).await?;
    Ok(HttpResponse::Ok()
        .insert_header((CONVERSATION_HEADER, conversation_id.to_string()))
        .json(render(&turn)))
}

impl AnswerRequest for ChatRequest {
    fn model(&self) -> &str {
        &self.model
    }

    fn convrag(&self) -> Option<&ConvragOptions> {
        self.convrag.as_ref()
    }

    /// Refuses several answers, a tool that must be called, a structured answer.
    fn check_parameters(&self) -> Result<(), ApiError> {
        check_sampling(self.temperature, self.top_p)?;
        if let Some(i) = self
            .tools
            .iter()
            .flatten()
            .position(|tool| !tool.is_object())
        {
            return Err(ApiError::invalid(
                format!("tools[{i}]"),
                "must be an object",
            ));
        }
        match &self.stop {
            None | Some(Value::Null | Value::String(_)) => {}
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
            Some(_) => return Err(ApiError::invalid("stop", "must be a string or strings")),
        }
        if self.n.is_some_and(|n| n != 1) {
            return Err(ApiError::invalid(
                "n",
                "only 1 answer per request is supported",
            ));
        }
        for (field, value) in [
            ("max_tokens", self.max_tokens),
            ("max_completion_tokens", self.max_completion_tokens),
        ] {
            if value == Some(0) {
                return Err(ApiError::invalid(field, "must be at least 1"));
            }
        }
        let has_tools = self.tools.as_ref().is_some_and(|t| !t.is_empty());
        match &self.tool_choice {
            None => {}
            Some(Value::String(choice)) if choice == "auto" || choice == "none" => {}
            Some(Value::String(choice)) if choice == "required" => {
                return Err(ApiError::invalid(
                    "tool_choice",
                    "\"required\" is not supported: convrag answers with cited text and calls no tools",
                ))
            }
            Some(Value::Object(_)) if has_tools => {
                return Err(ApiError::invalid(
                    "tool_choice",
                    "a named function is not supported: convrag answers with cited text and calls no tools",
                ))
            }
            Some(_) => {
                return Err(ApiError::invalid(
                    "tool_choice",
                    "must be \"auto\" or \"none\"",
                ))
            }
        }
        if let Some(format) = &self.response_format {
            match format.get("type").and_then(Value::as_str) {
                Some("text") => {}
                Some(kind @ ("json_object" | "json_schema")) => {
                    return Err(ApiError::invalid(
                        "response_format",
                        format!(
                            "{kind:?} is not supported: answers are cited prose (use \"text\")"
                        ),
                    ))
                }
                _ => {
                    return Err(ApiError::invalid(
                        "response_format",
                        "must be {\"type\": \"text\"}",
                    ))
                }
            }
        }
        Ok(())
    }
}

impl ChatRequest {
    /// The sampling parameters the LLM gets when it generates.
    fn sampling(&self) -> Result<Sampling, ApiError> {
        let stop = match &self.stop {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| ApiError::invalid("stop", "must be a string or strings"))?,
            Some(_) => return Err(ApiError::invalid("stop", "must be a string or strings")),
        };
        Ok(Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            max_tokens: self
                .max_tokens
                .or(self.max_completion_tokens)
                .map(|m| m.min(u32::MAX as usize) as u32),
            stop,
        })
    }

    /// The LLM request of a `convrag-llm` completion: every message as given.
    fn plain_request(&self) -> Result<LlmRequest, ApiError> {
        let messages = self
            .messages
            .iter()
            .map(|m| LlmMessage {
                role: m.role.clone(),
                content: m
                    .content
                    .as_ref()
                    .map(MessageContent::text)
                    .unwrap_or_default(),
            })
            .collect();
        let sampling = self.sampling()?;
        let mut request = LlmRequest::new(messages);
        request.temperature = sampling.temperature;
        request.top_p = sampling.top_p;
        request.max_tokens = sampling.max_tokens;
        request.stop = sampling.stop;
        Ok(request)
    }
}

/// A `convrag-llm` completion: the configured LLM answers the messages as they are, with no
/// retrieval, and nothing is stored. Streamed requests get the whole answer in one chunk.
async fn plain_completion(state: &AppState, body: &ChatRequest) -> Result<HttpResponse, ApiError> {
    let request = body.plain_request()?;
    let response = state.chat.plain_completion(&request).await?;
    let prompt_tokens: usize = body.messages.iter().map(ChatMessage::tokens).sum();
    let (prompt, completion) = match response.usage {
        Some(u) => (u.prompt_tokens as usize, u.completion_tokens as usize),
        None => (prompt_tokens, count_tokens(&response.content)),
    };
    let usage = json!({"prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion});
    let finish = response.finish_reason.unwrap_or_else(|| "stop".to_string());
    let id = format!("chatcmpl-{}", Uuid::new_v4().simple());
    let created = chrono::Utc::now().timestamp();
    if !body.stream {
        return Ok(HttpResponse::Ok().json(json!({
            "id": id, "object": "chat.completion", "created": created, "model": body.model,
            "choices": [{"index": 0, "finish_reason": finish, "logprobs": null,
                "message": {"role": "assistant", "content": response.content, "refusal": null}}],
            "usage": usage,
        })));
    }
    let include_usage = body
        .stream_options
        .as_ref()
        .is_some_and(|o| o.include_usage);
    let model = body.model.clone();
    Ok(sse::stream(|tx| async move {
        let chunk = |choices: Value| {
            json!({"id": id, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": choices})
        };
        tx.send(sse_data(
            &chunk(
                json!([{"index": 0, "delta": {"role": "assistant", "content": response.content},
                "finish_reason": null, "logprobs": null}]),
            )
            .to_string(),
        ));
        tx.send(sse_data(
            &chunk(json!([{"index": 0, "delta": {}, "finish_reason": finish, "logprobs": null}]))
                .to_string(),
        ));
        if include_usage {
            let mut last = chunk(json!([]));
            last["usage"] = usage;
            tx.send(sse_data(&last.to_string()));
        }
        tx.send(sse_data("[DONE]"));
    }))
}

/// What `metadata` may say (other keys are ignored).
#[derive(ToSchema)]
#[allow(dead_code)] // documents `ChatRequest::metadata`, which is read as a map
pub struct ChatMetadata {
    /// One of your conversations to continue.
    conversation_id: Option<Uuid>,
}

#[derive(Deserialize, ToSchema)]
pub struct ChatMessage {
    /// `user`, `assistant`, `system` (or `developer`), ...: user and assistant messages are the
    /// conversation's turns, system messages its instructions; other roles are not read.
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
}

/// What [`exchanges`] requires of the messages: at least one user message, and of each user
/// message text (a string, or text parts) that is not blank.
pub(super) struct UserMessages;

impl utoipa::Modify for UserMessages {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{RefOr, Schema};
        let request = crate::web::schema::component_mut(doc, "ChatRequest");
        if let Some(RefOr::T(Schema::Array(messages))) =
            request.and_then(|r| r.properties.get_mut("messages"))
        {
            crate::web::schema::add_keywords(
                &mut messages.extensions,
                json!({"maxItems": crate::config::Limits::default().chat_messages,
                    "contains": {"type": "object", "required": ["role"],
                    "properties": {"role": {"const": "user"}}}}),
            );
        }
        let Some(message) = crate::web::schema::component_mut(doc, "ChatMessage") else {
            return;
        };
        crate::web::schema::add_keywords(
            &mut message.extensions,
            json!({
                "allOf": [{"properties": {"content": content_schema(&["text"], false)}}],
                "if": {"required": ["role"], "properties": {"role": {"const": "user"}}},
                "then": {"required": ["content"],
                    "properties": {"content": content_schema(&["text"], true)}},
            }),
        );
    }
}

/// The JSON Schema of a message's content as the chat service reads it, with the default
/// limits: text, or content parts whose `part_types` are read as text; no NUL in what is read;
/// a user's (`user`) an utterance with some text.
pub(super) fn content_schema(part_types: &[&str], user: bool) -> Value {
    use crate::web::schema::{NONBLANK, NOTNUL};
    let defaults = crate::config::Limits::default();
    let read_parts = json!({"if": {"required": ["type"], "properties": {"type": {"enum": part_types}}},
        "then": {"properties": {"text": {"type": "string", "pattern": NOTNUL}}}});
    if !user {
        let max = defaults.message_chars;
        return json!({"anyOf": [
            {"type": "string", "maxLength": max, "pattern": NOTNUL},
            {"type": "array", "items": read_parts},
            {"type": "null"},
        ]});
    }
    let max = defaults.utterance_chars.min(defaults.message_chars);
    json!({"anyOf": [
        {"type": "string", "minLength": 1, "maxLength": max, "pattern": NONBLANK},
        {"type": "array", "contains": {"type": "object", "required": ["type", "text"],
            "properties": {"type": {"enum": part_types},
                "text": {"type": "string", "maxLength": max, "pattern": NONBLANK}}},
            "items": read_parts},
    ]})
}

/// A message's content: a string, or content parts of which the text parts are read.
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize, ToSchema)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

/// A collection as an OpenAI model.
#[derive(Serialize, ToSchema)]
pub struct ModelCard {
    pub id: String,
    #[schema(value_type = String, pattern = "^model$")]
    pub object: &'static str,
    pub created: i64,
    #[schema(value_type = String)]
    pub owned_by: &'static str,
}

#[derive(Serialize, ToSchema)]
pub struct ModelList {
    #[schema(value_type = String, pattern = "^list$")]
    pub object: &'static str,
    pub data: Vec<ModelCard>,
}

impl ChatMessage {
    /// The message as the chat service reads it.
    fn incoming(&self) -> IncomingMessage {
        IncomingMessage {
            role: self.role.clone(),
            text: self
                .content
                .as_ref()
                .map(MessageContent::text)
                .unwrap_or_default(),
        }
    }

    /// The message's tokens by the rule of [`crate::service::chat::count_tokens`].
    fn tokens(&self) -> usize {
        self.content.as_ref().map_or(0, |c| count_tokens(&c.text()))
    }
}

impl MessageContent {
    fn text(&self) -> String {
        match self {
            MessageContent::Text(t) => t.clone(),
            MessageContent::Parts(parts) => parts
                .iter()
                .filter(|p| p.kind == "text")
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// The plain-LLM model as an OpenAI model.
fn plain_llm_card() -> ModelCard {
    served_card(PLAIN_LLM_MODEL.to_string())
}

/// A model of the server itself (the plain LLM, the embedding model), not a collection.
fn served_card(id: String) -> ModelCard {
    ModelCard {
        id,
        object: "model",
        created: 0,
        owned_by: "convrag",
    }
}

fn model_card(c: crate::service::CollectionView) -> ModelCard {
    ModelCard {
        created: chrono::DateTime::parse_from_rfc3339(&c.created)
            .map(|t| t.timestamp())
            .unwrap_or(0),
        id: c.name,
        object: "model",
        owned_by: "convrag",
    }
}

/// `GET /v1/models`: the collections, each usable as a chat model, the plain LLM when one is
/// configured, and the embedding model (`POST /v1/embeddings`) when a bi-encoder is served.
#[utoipa::path(get, path = "/v1/models", operation_id = "list_models", tag = "openai",
    responses((status = 200, description = "The collections as models", body = ModelList)))]
pub async fn models(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let result: Result<HttpResponse, ApiError> = async {
        let AuthUser(user) = AuthUser::from_request(&req, &mut Payload::None).await?;
        // The shared collections and the user's private ones (another user's are not models).
        let collections = state.collections.list(user.id).await?;
        let mut data: Vec<ModelCard> = collections.into_iter().map(model_card).collect();
        if state.chat.has_llm() {
            data.push(plain_llm_card());
        }
        data.extend(served_model(&state.turns).map(served_card));
        Ok(HttpResponse::Ok().json(ModelList {
            object: "list",
            data,
        }))
    }
    .await;
    result.unwrap_or_else(|e| e.to_openai_response())
}

/// `GET /v1/models/{model}`: one collection as a model (404 in OpenAI's shape when the user
/// sees no collection of that name).
#[utoipa::path(get, path = "/v1/models/{model}", operation_id = "get_model", tag = "openai",
    params(("model" = String, Path, description = "A collection's name")),
    responses((status = 200, description = "The collection as a model", body = ModelCard)))]
pub async fn model(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> HttpResponse {
    let result: Result<HttpResponse, ApiError> = async {
        let AuthUser(user) = AuthUser::from_request(&req, &mut Payload::None).await?;
        let name = path.into_inner();
        if served_model(&state.turns).as_deref() == Some(name.as_str()) {
            return Ok(HttpResponse::Ok().json(served_card(name)));
        }
        state.chat.check_model(user.id, &name).await?;
        if name == PLAIN_LLM_MODEL {
            return Ok(HttpResponse::Ok().json(plain_llm_card()));
        }
        let card = state
            .collections
            .list(user.id)
            .await?
            .into_iter()
            .find(|c| c.name == name)
            .map(model_card)
            .ok_or_else(|| {
                ApiError::from(crate::service::chat::ChatError::UnknownModel(name.clone()))
            })?;
        Ok(HttpResponse::Ok().json(card))
    }
    .await;
    result.unwrap_or_else(|e| e.to_openai_response())
}

/// `POST /v1/chat/completions`
#[utoipa::path(post, path = "/v1/chat/completions", operation_id = "chat_completions", tag = "openai",
    params(("X-Convrag-Conversation-Id" = Option<Uuid>, Header, description = "One of your conversations to continue")),
    request_body = ChatRequest,
    responses((status = 200, description = "A `chat.completion` (or, with `stream`, `chat.completion.chunk` events); \
        the `X-Convrag-Conversation-Id` header names the conversation",
        content((Object = "application/json"), (String = "text/event-stream")),
        headers(("X-Convrag-Conversation-Id" = Uuid, description = "The conversation the answer belongs to")))))]
pub async fn chat_completions(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> HttpResponse {
    chat(req, payload.into_inner(), state)
        .await
        .unwrap_or_else(|e| e.to_openai_response())
}

async fn chat(
    req: HttpRequest,
    mut payload: Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (user, body) = read_request::<ChatRequest>(&req, &mut payload, &state).await?;
    if body.model == PLAIN_LLM_MODEL {
        return plain_completion(&state, &body).await;
    }
    let incoming: Vec<IncomingMessage> = body.messages.iter().map(ChatMessage::incoming).collect();
    let history = state.chat.read_history(&incoming)?;
    let explicit = requested_conversation(&req, body.metadata.as_ref())?;
    let key = idempotency_key(
        &req,
        "POST /v1/chat/completions",
        &json!({"model": body.model, "messages": keyed_messages(&incoming)}),
    )?;
    let options = AnswerOptions {
        max_words: body.max_tokens.or(body.max_completion_tokens),
        sampling: body.sampling()?,
    };
    // Every refusal (rate, quota, busy conversation, validation) happens here, before any
    // byte of a streamed answer: a client sees its proper status, never an error mid-stream.
    let admitted = state
        .chat
        .admit(
            user.id,
            &body.model,
            ChatTurnRequest {
                history: &history,
                explicit,
                key,
                options,
                resends_history: true,
            },
        )
        .await?;
    let conversation_id = admitted.conversation_id;
    let reply = Reply {
        id: format!("chatcmpl-{}", Uuid::new_v4().simple()),
        created: chrono::Utc::now().timestamp(),
        model: body.model.clone(),
        prompt_tokens: body.messages.iter().map(ChatMessage::tokens).sum(),
        style: body.answer_style(&req),
    };

    if !body.stream {
        return whole_answer(&state, admitted, |turn| reply.completion(turn)).await;
    }

    let include_usage = body
        .stream_options
        .as_ref()
        .is_some_and(|o| o.include_usage);
    let mut response = sse::stream(|tx| async move {
        tx.send(reply.chunk(json!({"role": "assistant", "content": ""}), None));
        let stored = admitted.is_stored();
        let events = tx.clone();
        let chunk_reply = reply.clone();
        let mut streamed = StreamedText::default();
        let mut on_event = move |e: TurnEvent<'_>| {
            if let Some(text) = streamed.text(&e) {
                events.send(chunk_reply.chunk(json!({ "content": text }), None));
            }
        };
        match state.chat.answer(admitted, &mut on_event).await {
            Ok(turn) => {
                let answer = answer(&turn, reply.style.links.as_ref());
                let tail = match (stored, reply.style.sources_as_text) {
                    (true, true) => format!("{}{}", answer.content, answer.sources_text()),
                    (true, false) => answer.content,
                    (false, true) => answer.sources_text(),
                    (false, false) => String::new(),
                };
                if !tail.is_empty() {
                    tx.send(reply.chunk(json!({ "content": tail }), None));
                }
                tx.send(reply.final_chunk(&turn));
                if include_usage {
                    tx.send(reply.usage_chunk(&turn));
                }
            }
            Err(e) => {
                let e = ApiError::from(e);
                if e.code == ErrorCode::Internal {
                    tracing::error!(message = %e.message, "chat turn failed");
                }
                tx.send(sse_data(&e.openai_envelope().to_string()));
            }
        }
        tx.send(sse_data("[DONE]"));
    });
    name_conversation(&mut response, conversation_id);
    Ok(response)
}

/// Names the conversation an answer belongs to in [`CONVERSATION_HEADER`] (a streamed answer's
/// response is built before the handler can add headers the builder's way).
pub(super) fn name_conversation(response: &mut HttpResponse, conversation_id: Uuid) {
    if let Ok(value) = header::HeaderValue::from_str(&conversation_id.to_string()) {
        response.headers_mut().insert(
            header::HeaderName::from_static("x-convrag-conversation-id"),
            value,
        );
    }
}

fn sse_data(data: &str) -> web::Bytes {
    sse::data_frame(data)
}

/// The conversation id the request names, if any (header first, then `metadata`).
fn requested_conversation(
    req: &HttpRequest,
    metadata: Option<&serde_json::Map<String, Value>>,
) -> Result<Option<Uuid>, ApiError> {
    if let Some(value) = req.headers().get(CONVERSATION_HEADER) {
        let value = value.to_str().unwrap_or_default();
        return parse_uuid(CONVERSATION_HEADER, value).map(Some);
    }
    match metadata.and_then(|m| m.get("conversation_id")) {
        None => Ok(None),
        Some(Value::String(id)) => parse_uuid("metadata.conversation_id", id).map(Some),
        Some(_) => Err(ApiError::invalid(
            "metadata.conversation_id",
            "must be a string",
        )),
    }
}

/// Links to the page under the origin the client reached this server at.
pub(super) fn page_links(req: &HttpRequest) -> Option<PageLinks> {
    let info = req.connection_info();
    PageLinks::new(&format!("{}://{}", info.scheme(), info.host()))
}

/// The fields every completion and chunk of one request share.
#[derive(Clone)]
struct Reply {
    id: String,
    created: i64,
    model: String,
    /// The request's messages' tokens by the rule of [`count_tokens`].
    prompt_tokens: usize,
    style: AnswerStyle,
}

impl Reply {
    /// The `convrag` field: which conversation and turn answered, the cited passages, and who
    /// counted the usage's tokens (`llm` or `rule`).
    fn convrag(turn: &Turn, passages: &[CitedPassage], usage: &ChatUsage) -> Value {
        json!({"conversation_id": turn.conversation_id, "turn_id": turn.id, "turn": turn.seq,
            "passages": passages, "usage_counted_by": usage.counted_by.as_str()})
    }

    fn completion(&self, turn: &Turn) -> Value {
        let answer = self.answer(turn);
        let annotations = answer.annotations();
        let Answer {
            content, passages, ..
        } = answer;
        let counted = self.counted(turn, &content);
        json!({
            "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                "message": {"role": "assistant", "content": content,
                    "annotations": annotations, "refusal": null}}],
            "usage": Self::usage_json(&counted),
            "convrag": Self::convrag(turn, &passages, &counted),
        })
    }

    fn answer(&self, turn: &Turn) -> Answer {
        self.style.answer(turn)
    }

    /// The turn's token counts (`service::chat::usage`: the LLM's, or by the rule).
    fn counted(&self, turn: &Turn, content: &str) -> ChatUsage {
        usage(turn, content, self.prompt_tokens)
    }

    fn usage_json(usage: &ChatUsage) -> Value {
        json!({"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens()})
    }

    /// The chunk `stream_options.include_usage` asks for: no choices, the usage.
    fn usage_chunk(&self, turn: &Turn) -> web::Bytes {
        let counted = self.counted(turn, &self.answer(turn).content);
        let chunk = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model, "choices": [], "usage": Self::usage_json(&counted),
        });
        sse_data(&chunk.to_string())
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> web::Bytes {
        let chunk = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": null}],
        });
        sse_data(&chunk.to_string())
    }

    /// The last chunk: `finish_reason`, the annotations, and the `convrag` field with the
    /// stored answer (which the streamed text equals unless the LLM failed mid-answer).
    fn final_chunk(&self, turn: &Turn) -> web::Bytes {
        let answer = self.answer(turn);
        let annotations = answer.annotations();
        let Answer {
            content, passages, ..
        } = answer;
        let counted = self.counted(turn, &content);
        let mut convrag = Self::convrag(turn, &passages, &counted);
        convrag["content"] = Value::String(content);
        let chunk = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": {"annotations": annotations},
                "finish_reason": "stop", "logprobs": null}],
            "convrag": convrag,
        });
        sse_data(&chunk.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_bound_is_a_whole_number_written_either_way_and_bounded() {
        let read = |bound: &str| {
            serde_json::from_str::<ChatRequest>(&format!(
                r#"{{"model": "m", "messages": [{{"role": "user", "content": "hi"}}], "max_tokens": {bound}}}"#
            ))
            .map(|r| r.max_tokens)
            .map_err(|e| e.to_string())
        };
        assert_eq!(read("50"), Ok(Some(50)));
        assert_eq!(read("50.0"), Ok(Some(50)));
        assert_eq!(read("null"), Ok(None));
        for bad in ["4.3380150314538316e+24", "1000001", "2.5", "-3"] {
            let err = read(bad).unwrap_err();
            assert!(
                err.contains("whole number from 1 to 1000000"),
                "{bad}: {err}"
            );
        }
        assert!(read("\"9\"").unwrap_err().contains("invalid type: string"));
    }

    #[test]
    fn text_parts_are_joined() {
        let content = MessageContent::Parts(vec![
            ContentPart {
                kind: "text".into(),
                text: Some("one".into()),
            },
            ContentPart {
                kind: "image_url".into(),
                text: None,
            },
            ContentPart {
                kind: "text".into(),
                text: Some("two".into()),
            },
        ]);
        assert_eq!(content.text(), "one\ntwo");
    }
}
