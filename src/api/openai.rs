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
//! conversations instead.

use crate::web::sse;
use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::pipeline::generate::GenerationEvent;
use crate::pipeline::turn::TurnEvent;
use crate::service::chat::{answer, render_sentence, Answer, ResolvedChat};
use crate::store::Turn;
use crate::web::error::{ApiError, ErrorCode};
use crate::web::extract::{parse_uuid, ApiJson, AuthUser};
use crate::web::AppState;

/// Header naming the conversation a chat request continues (also sent back on every answer).
pub const CONVERSATION_HEADER: &str = "X-Convrag-Conversation-Id";

const MAX_MESSAGE_CHARS: usize = 10_000;

/// Body of `POST /v1/chat/completions`. Other OpenAI parameters (temperature, ...) are accepted
/// and ignored: the pipeline's settings decide.
#[derive(Deserialize, ToSchema)]
pub struct ChatRequest {
    /// A collection of this server (`GET /v1/models`).
    #[schema(min_length = 1, max_length = 100, pattern = "IDENTIFIER")]
    pub model: String,
    /// The whole history; the last message must be the user's.
    #[schema(min_items = 1)]
    pub messages: Vec<ChatMessage>,
    /// Answer as server-sent `chat.completion.chunk` events.
    #[serde(default)]
    pub stream: bool,
    /// `conversation_id`: the conversation to continue.
    #[serde(default)]
    #[schema(value_type = Option<ChatMetadata>)]
    pub metadata: Option<serde_json::Map<String, Value>>,
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
    /// `user`, `assistant`, `system`, ...; only user messages are read.
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
}

/// What [`user_messages`] requires of a user message: text (a string, or text parts) that is
/// not blank.
pub(super) struct UserMessages;

impl utoipa::Modify for UserMessages {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let Some(message) = crate::web::schema::component_mut(doc, "ChatMessage") else {
            return;
        };
        let not_blank = crate::web::schema::NONBLANK;
        crate::web::schema::add_keywords(
            &mut message.extensions,
            json!({
                "if": {"required": ["role"], "properties": {"role": {"const": "user"}}},
                "then": {"required": ["content"], "properties": {"content": {"anyOf": [
                    {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE_CHARS,
                        "pattern": not_blank},
                    {"type": "array", "contains": {"type": "object", "required": ["type", "text"],
                        "properties": {"type": {"const": "text"},
                            "text": {"type": "string", "maxLength": MAX_MESSAGE_CHARS,
                                "pattern": not_blank}}}},
                ]}}},
            }),
        );
    }
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

/// `GET /v1/models`: the collections, each usable as a chat model.
#[utoipa::path(get, path = "/v1/models", operation_id = "list_models", tag = "openai",
    responses((status = 200, description = "The collections as models", body = ModelList)))]
pub async fn models(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let result: Result<HttpResponse, ApiError> = async {
        let AuthUser(user) = AuthUser::from_request(&req, &mut Payload::None).await?;
        // The shared collections and the user's private ones (another user's are not models).
        let collections = state.collections.list(user.id).await?;
        let data = collections
            .into_iter()
            .map(|c| ModelCard {
                created: chrono::DateTime::parse_from_rfc3339(&c.created)
                    .map(|t| t.timestamp())
                    .unwrap_or(0),
                id: c.name,
                object: "model",
                owned_by: "convrag",
            })
            .collect();
        Ok(HttpResponse::Ok().json(ModelList {
            object: "list",
            data,
        }))
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
    let AuthUser(user) = AuthUser::from_request(&req, &mut Payload::None).await?;
    // Unread parts (other OpenAI parameters, other roles' messages) may hold anything.
    let body = ApiJson::<ChatRequest, true>::from_request(&req, &mut payload)
        .await?
        .0;
    state.chat.check_model(user.id, &body.model).await?;
    let utterances = user_messages(&body.messages)?;
    // Refused before a conversation is looked up or created for it.
    if let Some(last) = utterances.last() {
        state.chat.check_utterance(last)?;
    }
    let explicit = requested_conversation(&req, body.metadata.as_ref())?;
    let ResolvedChat {
        conversation_id,
        stored,
    } = state
        .chat
        .resolve(user.id, &body.model, &utterances, explicit)
        .await?;
    let reply = Reply {
        id: format!("chatcmpl-{}", Uuid::new_v4().simple()),
        created: chrono::Utc::now().timestamp(),
        model: body.model.clone(),
    };
    let utterance = utterances.last().cloned().unwrap_or_default();

    if !body.stream {
        let turn = match stored {
            Some(turn) => turn,
            None => {
                state
                    .chat
                    .run_turn(user.id, conversation_id, &utterance, &mut |_| {})
                    .await?
            }
        };
        return Ok(HttpResponse::Ok()
            .insert_header((CONVERSATION_HEADER, conversation_id.to_string()))
            .json(reply.completion(&turn)));
    }

    let mut response = sse::stream(|tx| async move {
        tx.send(reply.chunk(json!({"role": "assistant", "content": ""}), None));
        let result = match stored {
            Some(turn) => {
                tx.send(reply.chunk(json!({"content": answer(&turn).content}), None));
                Ok(turn)
            }
            None => {
                let events = tx.clone();
                let chunk_reply = reply.clone();
                let mut sent = 0usize;
                let mut on_event = move |e: TurnEvent<'_>| {
                    if let Some(text) = streamed_text(&e, &mut sent) {
                        events.send(chunk_reply.chunk(json!({ "content": text }), None));
                    }
                };
                state
                    .chat
                    .run_turn(user.id, conversation_id, &utterance, &mut on_event)
                    .await
                    .map_err(ApiError::from)
            }
        };
        let last = match result {
            Ok(turn) => reply.final_chunk(&turn),
            Err(e) => {
                if e.code == ErrorCode::Internal {
                    tracing::error!(message = %e.message, "chat turn failed");
                }
                sse_data(&e.openai_envelope().to_string())
            }
        };
        tx.send(last);
        tx.send(sse_data("[DONE]"));
    });
    if let (Ok(name), Ok(value)) = (
        header::HeaderName::from_bytes(CONVERSATION_HEADER.as_bytes()),
        header::HeaderValue::from_str(&conversation_id.to_string()),
    ) {
        response.headers_mut().insert(name, value);
    }
    Ok(response)
}

/// The text a pipeline event adds to a streamed answer: each sentence with its markers,
/// separated by spaces; after a restart (the LLM failed mid-answer) the fallback answer
/// follows as a new paragraph.
fn streamed_text(event: &TurnEvent<'_>, sent: &mut usize) -> Option<String> {
    match event {
        TurnEvent::Generation(GenerationEvent::Sentence { sentence, .. }) => {
            let ranks: Vec<i32> = sentence.citations.iter().map(|c| *c as i32 + 1).collect();
            let text = render_sentence(&sentence.text, &ranks);
            let text = if *sent == 0 { text } else { format!(" {text}") };
            *sent += 1;
            Some(text)
        }
        TurnEvent::Generation(GenerationEvent::Restart { .. }) => {
            *sent = 0;
            Some("\n\n".to_string())
        }
        _ => None,
    }
}

fn sse_data(data: &str) -> web::Bytes {
    sse::data_frame(data)
}

/// The user messages' texts, in order; the last message must be the user's.
pub fn user_messages(messages: &[ChatMessage]) -> Result<Vec<String>, ApiError> {
    let Some(last) = messages.last() else {
        return Err(ApiError::invalid("messages", "must not be empty"));
    };
    if last.role != "user" {
        return Err(ApiError::invalid(
            format!("messages[{}].role", messages.len() - 1),
            "the last message must be the user's",
        ));
    }
    let mut texts = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        if message.role != "user" {
            continue;
        }
        let text = message
            .content
            .as_ref()
            .map(MessageContent::text)
            .unwrap_or_default();
        if text.trim().is_empty() {
            return Err(ApiError::invalid(
                format!("messages[{i}].content"),
                "a user message needs text",
            ));
        }
        if text.contains('\0') {
            return Err(ApiError::invalid(
                format!("messages[{i}].content"),
                "must not contain NUL characters",
            ));
        }
        if text.chars().count() > MAX_MESSAGE_CHARS {
            return Err(ApiError::invalid(
                format!("messages[{i}].content"),
                format!("must be at most {MAX_MESSAGE_CHARS} characters"),
            ));
        }
        texts.push(text);
    }
    Ok(texts)
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

/// The fields every completion and chunk of one request share.
#[derive(Clone)]
struct Reply {
    id: String,
    created: i64,
    model: String,
}

impl Reply {
    /// The `convrag` field: which conversation and turn answered, and the cited passages.
    fn convrag(turn: &Turn, passages: Vec<Value>) -> Value {
        json!({"conversation_id": turn.conversation_id, "turn_id": turn.id, "turn": turn.seq,
            "passages": passages})
    }

    fn completion(&self, turn: &Turn) -> Value {
        let Answer {
            content,
            annotations,
            passages,
        } = answer(turn);
        let words = content.split_whitespace().count();
        json!({
            "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                "message": {"role": "assistant", "content": content,
                    "annotations": annotations, "refusal": null}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": words, "total_tokens": words},
            "convrag": Self::convrag(turn, passages),
        })
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
        let Answer {
            content,
            annotations,
            passages,
        } = answer(turn);
        let mut convrag = Self::convrag(turn, passages);
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

    fn message(role: &str, text: &str) -> ChatMessage {
        ChatMessage {
            role: role.to_string(),
            content: Some(MessageContent::Text(text.to_string())),
        }
    }

    #[test]
    fn user_messages_are_read_in_order() {
        let messages = [
            message("system", "be brief"),
            message("user", "a"),
            message("assistant", "b"),
            message("user", "c"),
        ];
        assert_eq!(user_messages(&messages).unwrap(), ["a", "c"]);
        let e = user_messages(&messages[..3]).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("messages[2].role"));
        let e = user_messages(&[message("user", "  ")]).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("messages[0].content"));
        assert_eq!(
            user_messages(&[]).unwrap_err().field.as_deref(),
            Some("messages")
        );
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
