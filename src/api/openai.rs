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

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::error::{ApiError, ErrorCode};
use super::extract::{parse_uuid, ApiJson, AuthUser};
use super::AppState;
use crate::pipeline::generate::GenerationEvent;
use crate::pipeline::turn::{TurnEvent, TurnSettings};
use crate::service::{RequestedSettings, SettingLimits, TurnRequest, TurnService};
use crate::store::{Turn, TurnSlot};

/// Header naming the conversation a chat request continues (also sent back on every answer).
pub const CONVERSATION_HEADER: &str = "X-Convrag-Conversation-Id";

const MAX_MESSAGE_CHARS: usize = 10_000;

/// Body of `POST /v1/chat/completions`. Other OpenAI parameters (temperature, ...) are accepted
/// and ignored: the pipeline's settings decide.
#[derive(Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub stream: bool,
    /// `conversation_id`: the conversation to continue.
    #[serde(default)]
    pub metadata: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
}

/// A message's content: a string, or content parts of which the text parts are read.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
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
pub async fn models(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let result: Result<HttpResponse, ApiError> = async {
        let AuthUser(user) = AuthUser::from_request(&req, &mut Payload::None).await?;
        // The shared collections and the user's private ones (another user's are not models).
        let collections = state.collections.list(user.id).await?;
        let data: Vec<Value> = collections
            .iter()
            .map(|c| {
                let created = chrono::DateTime::parse_from_rfc3339(&c.created)
                    .map(|t| t.timestamp())
                    .unwrap_or(0);
                json!({"id": c.name, "object": "model", "created": created, "owned_by": "convrag"})
            })
            .collect();
        Ok(HttpResponse::Ok().json(json!({"object": "list", "data": data})))
    }
    .await;
    result.unwrap_or_else(|e| e.to_openai_response())
}

/// `POST /v1/chat/completions`
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
    let body = ApiJson::<ChatRequest>::from_request(&req, &mut payload)
        .await?
        .0;
    check_model(&state, user.id, &body.model).await?;
    let utterances = user_messages(&body.messages)?;
    // Refused before a conversation is looked up or created for it.
    if let Some(last) = utterances.last() {
        TurnService::check_utterance(&state.store, last)?;
    }
    let explicit = requested_conversation(&req, body.metadata.as_ref())?;
    let (conversation_id, stored) =
        resolve_conversation(&state, user.id, &body.model, &utterances, explicit).await?;
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
                run_chat_turn(&state, user.id, conversation_id, &utterance, &mut |_| {}).await?
            }
        };
        return Ok(HttpResponse::Ok()
            .insert_header((CONVERSATION_HEADER, conversation_id.to_string()))
            .json(reply.completion(&turn)));
    }

    // Streaming: the turn runs in its own task and reports sentences through a channel; the
    // response body is the channel. The turn is stored even if the client goes away mid-stream.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<web::Bytes>();
    actix_web::rt::spawn(async move {
        let _ = tx.send(reply.chunk(json!({"role": "assistant", "content": ""}), None));
        let result = match stored {
            Some(turn) => {
                let _ = tx.send(reply.chunk(json!({"content": answer(&turn).content}), None));
                Ok(turn)
            }
            None => {
                let events = tx.clone();
                let chunk_reply = reply.clone();
                let mut sent = 0usize;
                let mut on_event = move |e: TurnEvent<'_>| {
                    if let Some(text) = streamed_text(&e, &mut sent) {
                        let _ = events.send(chunk_reply.chunk(json!({ "content": text }), None));
                    }
                };
                run_chat_turn(&state, user.id, conversation_id, &utterance, &mut on_event).await
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
        let _ = tx.send(last);
        let _ = tx.send(sse_data("[DONE]"));
    });
    let body = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|frame| frame.map(Ok::<_, std::convert::Infallible>))
    });
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .insert_header((CONVERSATION_HEADER, conversation_id.to_string()))
        .streaming(body))
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
    web::Bytes::from(format!("data: {data}\n\n"))
}

/// The model must name a collection of this server. Opens only that collection (kept open by
/// the registry), not every one as listing them does: this runs on every chat request.
async fn check_model(state: &AppState, user_id: i64, model: &str) -> Result<(), ApiError> {
    use crate::index::IndexError;
    use crate::service::ServiceError;
    match state.turns.visible_retriever(Some(user_id), model).await {
        Ok(_) => Ok(()),
        Err(ServiceError::Index(IndexError::NotFound { .. } | IndexError::InvalidName(_))) => {
            Err(ApiError::field(
                ErrorCode::NotFound,
                "model",
                format!(
                    "the model {model:?} does not exist (GET /v1/models lists the collections)"
                ),
            ))
        }
        Err(other) => Err(other.into()),
    }
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

/// The conversation the request continues, and its stored last turn when the request's last
/// user message is already that turn (a resent history).
async fn resolve_conversation(
    state: &AppState,
    user_id: i64,
    model: &str,
    utterances: &[String],
    explicit: Option<Uuid>,
) -> Result<(Uuid, Option<Turn>), ApiError> {
    let earlier = &utterances[..utterances.len() - 1];
    let (conversation_id, answered) = match explicit {
        Some(id) => {
            let stored =
                state
                    .store
                    .current_utterances(user_id, id)
                    .await
                    .map_err(|e| match e {
                        crate::store::StoreError::NotFound { .. } => ApiError::field(
                            ErrorCode::NotFound,
                            "conversation_id",
                            "no such conversation",
                        ),
                        other => other.into(),
                    })?;
            (id, stored == utterances)
        }
        None => {
            let store = &state.store;
            if let Some(m) = store
                .chat_conversation_with_turns(user_id, model, utterances)
                .await?
            {
                (m.conversation_id, true)
            } else if let Some(m) = store
                .chat_conversation_with_turns(user_id, model, earlier)
                .await?
            {
                (m.conversation_id, false)
            } else {
                let title = title_of(&utterances[0]);
                let id = store
                    .create_chat_conversation(user_id, model, &title)
                    .await?;
                (id, false)
            }
        }
    };
    if !answered {
        return Ok((conversation_id, None));
    }
    let turns = state
        .store
        .list_turns(user_id, conversation_id, false)
        .await?;
    Ok((conversation_id, turns.into_iter().last()))
}

/// A conversation's title from its first message: its first 80 characters.
fn title_of(first: &str) -> String {
    let line = first.lines().next().unwrap_or_default().trim();
    let mut title: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        title.push('…');
    }
    title
}

/// Runs one turn of the conversation with the server's default settings (the LLM when
/// configured, reranking when a model is loaded) and stores it. The one place the chat API
/// drives the turn lifecycle.
pub async fn run_chat_turn(
    state: &AppState,
    user_id: i64,
    conversation_id: Uuid,
    utterance: &str,
    on_event: &mut (dyn FnMut(TurnEvent<'_>) + Send),
) -> Result<Turn, ApiError> {
    let settings = state.turns.resolve(
        &RequestedSettings::default(),
        TurnSettings::default(),
        SettingLimits::API,
    )?;
    let request = TurnRequest::new(Some(utterance.to_string()), settings);
    let turn = state
        .turns
        .begin(
            &state.store,
            user_id,
            conversation_id,
            TurnSlot::Next,
            request,
        )
        .await?;
    Ok(turn.run(on_event).await?)
}

/// A sentence with its citation markers, placed before its final punctuation:
/// `"Lentils are quick [1][3]."`.
pub fn render_sentence(text: &str, ranks: &[i32]) -> String {
    let markers: String = ranks.iter().map(|r| format!("[{r}]")).collect();
    if markers.is_empty() {
        return text.to_string();
    }
    let trimmed = text.trim_end();
    match trimmed.char_indices().last() {
        Some((i, '.' | '!' | '?')) => {
            format!("{} {markers}{}", trimmed[..i].trim_end(), &trimmed[i..])
        }
        _ => format!("{trimmed} {markers}"),
    }
}

/// A turn's answer as the chat API returns it.
pub struct Answer {
    /// The sentences with their `[n]` markers.
    pub content: String,
    /// OpenAI `url_citation` annotations, one per marker (character offsets into `content`).
    pub annotations: Vec<Value>,
    /// The cited passages; `n` is the number in the markers.
    pub passages: Vec<Value>,
}

/// Where a passage can be found: its URL, or a `convrag:` reference when it has none.
fn passage_url(turn: &Turn, rank: i32) -> (String, String) {
    let passage = turn.passages.iter().find(|p| p.rank == rank);
    let url = passage
        .and_then(|p| p.url.clone())
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| {
            let (collection, id) = passage
                .map(|p| {
                    (
                        p.collection.clone().unwrap_or_default(),
                        p.passage_id.clone(),
                    )
                })
                .unwrap_or_default();
            format!("convrag:passage/{collection}/{id}")
        });
    let title = passage.and_then(|p| p.title.clone()).unwrap_or_default();
    (url, title)
}

pub fn answer(turn: &Turn) -> Answer {
    let mut content = String::new();
    let mut annotations = Vec::new();
    for sentence in &turn.sentences {
        if !content.is_empty() {
            content.push(' ');
        }
        let rendered = render_sentence(&sentence.text, &sentence.citations);
        let offset = content.chars().count();
        for rank in &sentence.citations {
            let marker = format!("[{rank}]");
            if let Some(byte) = rendered.find(&marker) {
                let start = offset + rendered[..byte].chars().count();
                let (url, title) = passage_url(turn, *rank);
                annotations.push(json!({"type": "url_citation", "url_citation": {
                    "start_index": start, "end_index": start + marker.chars().count(),
                    "url": url, "title": title}}));
            }
        }
        content.push_str(&rendered);
    }
    let passages = turn
        .passages
        .iter()
        .filter(|p| p.used)
        .map(|p| {
            json!({"n": p.rank, "passage_id": p.passage_id, "collection": p.collection,
                "title": p.title, "url": p.url, "text": p.text, "score": p.score})
        })
        .collect();
    Answer {
        content,
        annotations,
        passages,
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

    #[test]
    fn markers_go_before_the_final_punctuation() {
        assert_eq!(
            render_sentence("Lentils are quick.", &[1, 3]),
            "Lentils are quick [1][3]."
        );
        assert_eq!(render_sentence("No stop", &[2]), "No stop [2]");
        assert_eq!(render_sentence("Uncited.", &[]), "Uncited.");
    }

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
