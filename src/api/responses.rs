//! OpenAI's Responses API over stored conversations, the API that OpenAI's newer clients (the AI
//! SDK's default `openai(model)`, `client.responses.create`) call: `POST /v1/responses` answers
//! one turn and `GET /v1/responses/{id}` reads it back. A response is a stored turn: its id is
//! `resp_` and its message's `msg_` followed by the turn's id, so `previous_response_id` and an
//! `item_reference` to an earlier message name turns of the user's conversations.
//!
//! Which conversation: the one `previous_response_id` or `conversation` names (the input is then
//! the new message only), else the rules of chat completions (a history of two or more messages
//! continues the conversation it matches; one message starts a new one). `instructions` become
//! the conversation's. Admission (validation, rate, quota, the conversation's lease) runs before
//! any byte of a stream, as for chat completions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::openai::{
    answer_style, check_sampling, keyed_messages, name_conversation, page_links, read_request,
    token_bound, whole_answer, AnswerRequest, ConvragOptions,
};
use crate::pipeline::generate::Sampling;
use crate::pipeline::turn::TurnEvent;
use crate::service::chat::{
    answer, count_tokens, usage, Answer, AnswerOptions, AnswerStyle, ChatTurnRequest,
    IncomingMessage, StreamedText,
};
use crate::store::Turn;
use crate::web::error::{ApiError, ErrorCode};
use crate::web::extract::{idempotency_key, AuthUser};
use crate::web::sse::{self, FrameSender};
use crate::web::AppState;

const RESPONSE_PREFIX: &str = "resp_";
const MESSAGE_PREFIX: &str = "msg_";

/// Body of `POST /v1/responses`. Other OpenAI parameters (`include`, `reasoning`, `text`,
/// `tools` with `tool_choice` `auto`, `truncation`, ...) are accepted and ignored: the pipeline's
/// settings decide.
#[derive(Deserialize, ToSchema)]
pub struct ResponsesRequest {
    /// A collection of this server (`GET /v1/models`).
    #[schema(min_length = 1, max_length = 100, pattern = "IDENTIFIER")]
    pub model: String,
    /// The question as text, or input items: messages (`role`, `content` as text or text
    /// parts) and `item_reference`s to earlier responses' messages.
    #[schema(value_type = ResponseInput)]
    pub input: Value,
    /// The conversation's instructions from now on (as a system message of chat completions).
    #[serde(default)]
    pub instructions: Option<String>,
    /// Answer as server-sent `response.*` events.
    #[serde(default)]
    pub stream: bool,
    /// Continues the conversation of this earlier response.
    #[serde(default)]
    #[schema(pattern = "^resp_[0-9a-f]{32}$")]
    pub previous_response_id: Option<String>,
    /// Continues this conversation: its id, as a string or `{"id": ...}`.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = Uuid)]
    pub conversation: Option<Value>,
    /// Only `true`: every answer is stored with its provenance.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub store: Option<bool>,
    /// At most this many words in the answer.
    #[serde(default, deserialize_with = "token_bound")]
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub max_output_tokens: Option<usize>,
    /// Passed to the LLM when it generates.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f64>,
    /// Passed to the LLM when it generates.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1)]
    pub top_p: Option<f64>,
    /// convrag's own options.
    #[serde(default)]
    pub convrag: Option<ConvragOptions>,
}

/// What `input` may be (documented here; read as JSON).
#[derive(ToSchema)]
#[allow(dead_code)]
pub enum ResponseInput {
    Text(String),
    Items(Vec<Object>),
}

/// An arbitrary JSON object (an input item).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Object {}

/// What the server requires of `input` and `instructions`, as JSON Schema: text with some
/// non-blank character, or items of which some user message has text, none holding a NUL in
/// what is read, within the default limits.
pub(super) struct ResponseInputs;

impl utoipa::Modify for ResponseInputs {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use super::openai::content_schema;
        use crate::web::schema::{component_mut, keywords_only, NONBLANK, NOTNUL};
        let Some(request) = component_mut(doc, "ResponsesRequest") else {
            return;
        };
        let limits = crate::config::Limits::default();
        let parts = ["input_text", "output_text", "text"];
        let message = json!({"type": "object", "required": ["role"], "properties": {
                "type": {"const": "message"},
                "role": {"enum": ["user", "assistant", "system", "developer"]},
                "content": content_schema(&parts, false)},
            "if": {"properties": {"role": {"const": "user"}}},
            "then": {"required": ["content"], "properties": {"content": content_schema(&parts, true)}}});
        let reference = json!({"type": "object", "required": ["type", "id"], "properties": {
            "type": {"const": "item_reference"}, "id": {"type": "string",
                "pattern": "^msg_[0-9a-f]{32}$"}}});
        let input = json!({"anyOf": [
            {"type": "string", "minLength": 1,
                "maxLength": limits.utterance_chars.min(limits.message_chars),
                "pattern": NONBLANK},
            {"type": "array", "minItems": 1, "maxItems": limits.chat_messages - 1,
                "contains": {"type": "object", "required": ["role", "content"],
                    "properties": {"role": {"const": "user"},
                        "content": content_schema(&parts, true)}},
                "items": {"anyOf": [message, reference]}},
        ]});
        request
            .properties
            .insert("input".to_string(), keywords_only(input).into());
        let instructions = json!({"type": ["string", "null"], "pattern": NOTNUL,
            "maxLength": crate::store::conversations::MAX_INSTRUCTIONS_CHARS});
        request.properties.insert(
            "instructions".to_string(),
            keywords_only(instructions).into(),
        );
        let id = "^(conv_)?([0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$";
        let conversation = json!({"anyOf": [{"type": "string", "pattern": id},
            {"type": "object", "required": ["id"],
                "properties": {"id": {"type": "string", "pattern": id}}},
            {"type": "null"}]});
        request.properties.insert(
            "conversation".to_string(),
            keywords_only(conversation).into(),
        );
        // A conversation is named one way at a time.
        crate::web::schema::add_keywords(
            &mut request.extensions,
            json!({"if": {"required": ["previous_response_id"],
                    "properties": {"previous_response_id": {"type": "string"}}},
                "then": {"properties": {"conversation": {"type": "null"}}}}),
        );
        if let Some(store) = request.properties.get_mut("store") {
            *store = keywords_only(json!({"enum": [true, null]})).into();
        }
    }
}

/// A request's messages as read from `input` and `instructions`, with where each came from.
struct ReadInput {
    messages: Vec<IncomingMessage>,
    /// The request field of each message, for errors.
    fields: Vec<String>,
}

impl AnswerRequest for ResponsesRequest {
    fn model(&self) -> &str {
        &self.model
    }

    fn convrag(&self) -> Option<&ConvragOptions> {
        self.convrag.as_ref()
    }

    fn check_parameters(&self) -> Result<(), ApiError> {
        if self.store == Some(false) {
            return Err(ApiError::invalid(
                "store",
                "convrag stores every answer with its provenance: omit store or set it to true",
            ));
        }
        check_sampling(self.temperature, self.top_p)?;
        if self.max_output_tokens == Some(0) {
            return Err(ApiError::invalid("max_output_tokens", "must be at least 1"));
        }
        if self.previous_response_id.is_some() && self.conversation.is_some() {
            return Err(ApiError::invalid(
                "conversation",
                "give either conversation or previous_response_id, not both",
            ));
        }
        Ok(())
    }
}

impl ResponsesRequest {
    /// The conversation the request names, if any.
    async fn explicit_conversation(
        &self,
        state: &AppState,
        user_id: i64,
    ) -> Result<Option<Uuid>, ApiError> {
        if let Some(id) = &self.previous_response_id {
            let turn_id = parse_id(id, RESPONSE_PREFIX, "previous_response_id")?;
            let turn = state
                .chat
                .stored_turn(user_id, turn_id, "previous_response_id")
                .await?;
            return Ok(Some(turn.conversation_id));
        }
        let id = match &self.conversation {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(id)) => id.as_str(),
            Some(Value::Object(o)) => o.get("id").and_then(Value::as_str).unwrap_or_default(),
            Some(_) => "",
        };
        let hex = id.strip_prefix("conv_").unwrap_or(id);
        Uuid::parse_str(hex)
            .map(Some)
            .map_err(|_| ApiError::invalid("conversation", format!("{id:?} is not a valid id")))
    }

    /// `instructions` and `input` as the chat service reads messages.
    async fn read_input(&self, state: &AppState, user_id: i64) -> Result<ReadInput, ApiError> {
        let mut read = ReadInput {
            messages: Vec::new(),
            fields: Vec::new(),
        };
        if let Some(instructions) = &self.instructions {
            read.push("system", instructions.clone(), "instructions".to_string());
        }
        match &self.input {
            Value::String(text) => read.push("user", text.clone(), "input".to_string()),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let field = format!("input[{i}]");
                    let Some(item) = item.as_object() else {
                        return Err(ApiError::invalid(field, "must be an object"));
                    };
                    match item.get("type").and_then(Value::as_str) {
                        None | Some("message") => {
                            let role = item.get("role").and_then(Value::as_str).unwrap_or("");
                            let text = content_text(item.get("content")).map_err(|reason| {
                                ApiError::invalid(format!("{field}.content"), reason)
                            })?;
                            read.push(role, text, format!("{field}.content"));
                        }
                        Some("item_reference") => {
                            let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
                            let field = format!("{field}.id");
                            let turn_id = parse_id(id, MESSAGE_PREFIX, &field)?;
                            let turn = state.chat.stored_turn(user_id, turn_id, &field).await?;
                            read.push("assistant", answer(&turn, None).content, field);
                        }
                        // Tool calls and reasoning items: convrag calls no tools.
                        Some(_) => {}
                    }
                }
            }
            _ => {
                return Err(ApiError::invalid(
                    "input",
                    "must be text or a list of input items",
                ))
            }
        }
        Ok(read)
    }

    fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            max_tokens: self
                .max_output_tokens
                .map(|m| m.min(u32::MAX as usize) as u32),
            stop: Vec::new(),
        }
    }
}

impl ReadInput {
    fn push(&mut self, role: &str, text: String, field: String) {
        self.messages.push(IncomingMessage {
            role: role.to_string(),
            text,
        });
        self.fields.push(field);
    }

    /// An error of the chat service (which names `messages[i].content` and `messages`) named as
    /// this request holds the value.
    fn rename(&self, mut e: ApiError) -> ApiError {
        let renamed = e.field.as_deref().and_then(|f| {
            if f == "messages" {
                return Some("input".to_string());
            }
            let i: usize = f
                .strip_prefix("messages[")?
                .strip_suffix("].content")?
                .parse()
                .ok()?;
            self.fields.get(i).cloned()
        });
        if let Some(field) = renamed {
            e.field = Some(field);
        }
        e
    }
}

/// The text of an input message's `content`: a string, or its text parts joined.
fn content_text(content: Option<&Value>) -> Result<String, &'static str> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => Ok(parts
            .iter()
            .filter(|p| {
                matches!(
                    p.get("type").and_then(Value::as_str),
                    Some("input_text" | "output_text" | "text")
                )
            })
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")),
        Some(_) => Err("must be text or a list of content parts"),
    }
}

/// The turn id in `resp_<id>` or `msg_<id>`.
fn parse_id(id: &str, prefix: &str, field: &str) -> Result<Uuid, ApiError> {
    id.strip_prefix(prefix)
        .and_then(|hex| Uuid::parse_str(hex).ok())
        .ok_or_else(|| {
            ApiError::invalid(
                field,
                format!("{id:?} is not an id of the form {prefix}<32 hex digits>"),
            )
        })
}

/// `POST /v1/responses`
#[utoipa::path(post, path = "/v1/responses", operation_id = "create_response", tag = "openai",
    request_body = ResponsesRequest,
    responses((status = 200, description = "A `response` (or, with `stream`, `response.*` events); \
        the `X-Convrag-Conversation-Id` header names the conversation",
        content((Object = "application/json"), (String = "text/event-stream")),
        headers(("X-Convrag-Conversation-Id" = Uuid, description = "The conversation the answer belongs to")))))]
pub async fn create(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> HttpResponse {
    respond(req, payload.into_inner(), state)
        .await
        .unwrap_or_else(|e| e.to_openai_response())
}

async fn respond(
    req: HttpRequest,
    mut payload: Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (user, body) = read_request::<ResponsesRequest>(&req, &mut payload, &state).await?;
    let explicit = body.explicit_conversation(&state, user.id).await?;
    let input = body.read_input(&state, user.id).await?;
    let history = state
        .chat
        .read_history(&input.messages)
        .map_err(|e| input.rename(e.into()))?;
    let key = idempotency_key(
        &req,
        "POST /v1/responses",
        &json!({"model": body.model, "conversation": explicit,
            "input": keyed_messages(&input.messages)}),
    )?;
    let request = ChatTurnRequest {
        history: &history,
        explicit,
        key,
        options: AnswerOptions {
            max_words: body.max_output_tokens,
            sampling: body.sampling(),
        },
        // With a conversation named, the input holds only what is new.
        resends_history: explicit.is_none(),
    };
    let admitted = state
        .chat
        .admit(user.id, &body.model, request)
        .await
        .map_err(|e| input.rename(e.into()))?;
    let conversation_id = admitted.conversation_id;
    let reply = Arc::new(ResponseReply {
        model: body.model.clone(),
        prompt_tokens: input.messages.iter().map(|m| count_tokens(&m.text)).sum(),
        style: answer_style(&body, &req),
        instructions: body.instructions.clone(),
        previous_response_id: body.previous_response_id.clone(),
    });
    if !body.stream {
        return whole_answer(&state, admitted, |turn| reply.response(turn)).await;
    }
    let mut response = sse::stream(|tx| async move {
        let events = Arc::new(ResponseEvents::new(tx));
        // The turn's id is chosen at admission: the stream names the response and its message
        // as they will be stored (an `item_reference` to it finds it later).
        let pending = admitted.turn_id();
        let message_id = format!("{MESSAGE_PREFIX}{}", pending.simple());
        events.send(
            "response.created",
            json!({"response": reply.pending(pending)}),
        );
        events.send(
            "response.in_progress",
            json!({"response": reply.pending(pending)}),
        );
        events.send(
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "message", "id": message_id,
                "status": "in_progress", "role": "assistant", "content": []}}),
        );
        events.send(
            "response.content_part.added",
            json!({"item_id": message_id, "output_index": 0, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
        let stored = admitted.is_stored();
        let mut streamed = StreamedText::default();
        let deltas = Arc::clone(&events);
        let delta_id = message_id.clone();
        let mut on_event = move |e: TurnEvent<'_>| {
            if let Some(text) = streamed.text(&e) {
                deltas.delta(&delta_id, &text);
            }
        };
        match state.chat.answer(admitted, &mut on_event).await {
            Ok(turn) => {
                let answer = reply.answer(&turn);
                if stored {
                    events.delta(&message_id, &answer.content);
                } else if reply.style.sources_as_text {
                    events.delta(&message_id, &answer.sources_text());
                }
                events.finish(&reply, &turn, &message_id);
            }
            Err(e) => events.error(ApiError::from(e)),
        }
    });
    name_conversation(&mut response, conversation_id);
    Ok(response)
}

/// `GET /v1/responses/{id}`: one of the user's responses (a stored turn).
#[utoipa::path(get, path = "/v1/responses/{response_id}", operation_id = "get_response", tag = "openai",
    params(("response_id" = String, Path, description = "A response's id (`resp_...`)", pattern = "^resp_[0-9a-f]{32}$")),
    responses((status = 200, description = "The response", body = Object)))]
pub async fn get(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> HttpResponse {
    let result: Result<HttpResponse, ApiError> = async {
        let AuthUser(user) = AuthUser::from_request(&req, &mut Payload::None).await?;
        let id = path.into_inner();
        let turn_id = parse_id(&id, RESPONSE_PREFIX, "response_id")?;
        let turn = state
            .chat
            .stored_turn(user.id, turn_id, "response_id")
            .await?;
        let model = turn.passages.first().and_then(|p| p.collection.clone());
        let reply = ResponseReply {
            model: model.unwrap_or_default(),
            prompt_tokens: count_tokens(&turn.utterance),
            style: AnswerStyle {
                sources_as_text: false,
                links: page_links(&req),
            },
            instructions: None,
            previous_response_id: None,
        };
        Ok(HttpResponse::Ok().json(reply.response(&turn)))
    }
    .await;
    result.unwrap_or_else(|e| e.to_openai_response())
}

/// The fields of one request's response object.
struct ResponseReply {
    model: String,
    /// The request's messages' tokens by the rule of [`count_tokens`].
    prompt_tokens: usize,
    style: AnswerStyle,
    instructions: Option<String>,
    previous_response_id: Option<String>,
}

impl ResponseReply {
    fn answer(&self, turn: &Turn) -> Answer {
        self.style.answer(turn)
    }

    /// The response as the stream announces it before the turn is stored.
    fn pending(&self, id: Uuid) -> Value {
        let mut response = self.envelope(
            &format!("{RESPONSE_PREFIX}{}", id.simple()),
            chrono::Utc::now().timestamp(),
            "in_progress",
        );
        response["output"] = json!([]);
        response
    }

    fn envelope(&self, id: &str, created_at: i64, status: &str) -> Value {
        json!({
            "id": id, "object": "response", "created_at": created_at, "status": status,
            "model": self.model, "output": [], "usage": null, "error": null,
            "incomplete_details": null, "instructions": self.instructions,
            "previous_response_id": self.previous_response_id, "store": true,
            "parallel_tool_calls": false, "tool_choice": "none", "tools": [],
            "text": {"format": {"type": "text"}}, "truncation": "disabled", "metadata": {},
        })
    }

    /// The stored turn as a completed response.
    fn response(&self, turn: &Turn) -> Value {
        let answer = self.answer(turn);
        let id = format!("{RESPONSE_PREFIX}{}", turn.id.simple());
        let mut response = self.envelope(&id, turn.created_at.timestamp(), "completed");
        response["output"] = json!([message_item(turn, &answer)]);
        let counted = usage(turn, &answer.content, self.prompt_tokens);
        response["usage"] = json!({
            "input_tokens": counted.prompt_tokens, "output_tokens": counted.completion_tokens,
            "total_tokens": counted.total_tokens(),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        });
        response["conversation"] = json!({"id": turn.conversation_id});
        response["convrag"] = json!({"conversation_id": turn.conversation_id,
            "turn_id": turn.id, "turn": turn.seq, "passages": answer.passages,
            "usage_counted_by": counted.counted_by.as_str()});
        response
    }
}

/// The answer as the response's one output message.
fn message_item(turn: &Turn, answer: &Answer) -> Value {
    json!({"type": "message", "id": format!("{MESSAGE_PREFIX}{}", turn.id.simple()),
        "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": answer.content,
            "annotations": annotations(answer), "logprobs": []}]})
}

/// One annotation per cited passage: a `url_citation` when it has a web address, else a
/// `file_citation` naming the passage.
fn annotations(answer: &Answer) -> Vec<Value> {
    answer
        .citations
        .iter()
        .map(|c| match &c.url {
            Some(url) => json!({"type": "url_citation", "start_index": c.start_index,
                "end_index": c.end_index, "url": url, "title": c.title}),
            None => {
                let passage = answer.passages.iter().find(|p| p.n == c.n);
                let file_id = passage.map_or(String::new(), |p| p.passage_id.clone());
                let filename = passage
                    .and_then(|p| p.title.clone())
                    .filter(|t| !t.trim().is_empty())
                    .unwrap_or_else(|| file_id.clone());
                json!({"type": "file_citation", "file_id": file_id, "filename": filename,
                    "index": c.end_index})
            }
        })
        .collect()
}

/// The typed events of a streamed response, numbered in order.
struct ResponseEvents {
    tx: FrameSender,
    sequence: AtomicU64,
}

impl ResponseEvents {
    fn new(tx: FrameSender) -> Self {
        Self {
            tx,
            sequence: AtomicU64::new(0),
        }
    }

    fn send(&self, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence.fetch_add(1, Ordering::SeqCst));
        self.tx.send(sse::event_frame(kind, &data));
    }

    fn delta(&self, item_id: &str, text: &str) {
        if text.is_empty() {
            return;
        }
        self.send(
            "response.output_text.delta",
            json!({"item_id": item_id, "output_index": 0, "content_index": 0, "delta": text,
                "logprobs": []}),
        );
    }

    /// The closing events: annotations, the text, the part and item done, then the completed
    /// response (the stored turn, under its own ids).
    fn finish(&self, reply: &ResponseReply, turn: &Turn, item_id: &str) {
        let answer = reply.answer(turn);
        for (i, annotation) in annotations(&answer).into_iter().enumerate() {
            self.send(
                "response.output_text.annotation.added",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                    "annotation_index": i, "annotation": annotation}),
            );
        }
        let item = message_item(turn, &answer);
        self.send(
            "response.output_text.done",
            json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                "text": answer.content, "logprobs": []}),
        );
        self.send(
            "response.content_part.done",
            json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                "part": item["content"][0]}),
        );
        self.send(
            "response.output_item.done",
            json!({"output_index": 0, "item": item}),
        );
        self.send(
            "response.completed",
            json!({"response": reply.response(turn)}),
        );
    }

    /// A failure after the stream began: OpenAI's error event (flat, and nested as older
    /// clients read it), then the end of the stream.
    fn error(&self, e: ApiError) {
        if e.code == ErrorCode::Internal {
            tracing::error!(message = %e.message, "response turn failed");
        }
        let envelope = e.openai_envelope();
        let error = &envelope["error"];
        let code = if e.code.status().is_server_error() {
            json!("server_error")
        } else {
            error["code"].clone()
        };
        self.send(
            "error",
            json!({"code": code, "message": error["message"], "param": error["param"],
                "error": {"type": error["type"], "code": code, "message": error["message"],
                    "param": error["param"]}}),
        );
    }
}
