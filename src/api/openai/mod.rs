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
//!
//! `wire` holds OpenAI's request and response types, `stream` the streamed answer.

mod stream;
mod wire;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::{json, Value};
use uuid::Uuid;

use self::stream::{sse_data, streamed_answer, Reply};
pub(super) use self::wire::{
    check_sampling, content_schema, token_bound, AnswerRequest, UserMessages,
};
pub use self::wire::{
    ChatMessage, ChatMetadata, ChatRequest, ContentPart, ConvragOptions, MessageContent, ModelCard,
    ModelList, SourcesMode, StopSequences, StreamOptions, TextResponseFormat, ToolChoiceMode,
};
use crate::service::chat::{
    count_tokens, AdmittedChat, AnswerOptions, AnswerStyle, ChatTurnRequest, IncomingMessage,
    PageLinks, PLAIN_LLM_MODEL,
};
use crate::service::embeddings::served_model;
use crate::store::{Turn, User};
use crate::web::error::ApiError;
use crate::web::extract::{idempotency_key, parse_uuid, ApiJson, AuthUser};
use crate::web::sse;
use crate::web::AppState;

/// Header naming the conversation a chat request continues (also sent back on every answer).
pub const CONVERSATION_HEADER: &str = "X-Convrag-Conversation-Id";

/// The authenticated caller and its request body, its parameters and model checked.
pub(in crate::api) async fn read_request<T: AnswerRequest>(
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
pub(in crate::api) fn keyed_messages(messages: &[IncomingMessage]) -> Value {
    messages
        .iter()
        .map(|m| json!({"role": m.role, "text": m.text}))
        .collect()
}

/// The whole (not streamed) answer of `admitted`, as `render` writes the turn, naming its
/// conversation.
pub(in crate::api) async fn whole_answer<B: Serialize>(
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
        style: answer_style(&body, &req),
    };

    if !body.stream {
        return whole_answer(&state, admitted, |turn| reply.completion(turn)).await;
    }

    let include_usage = body
        .stream_options
        .as_ref()
        .is_some_and(|o| o.include_usage);
    let mut response = streamed_answer(state, admitted, reply, include_usage);
    name_conversation(&mut response, conversation_id);
    Ok(response)
}

/// Names the conversation an answer belongs to in [`CONVERSATION_HEADER`] (a streamed answer's
/// response is built before the handler can add headers the builder's way).
pub(in crate::api) fn name_conversation(response: &mut HttpResponse, conversation_id: Uuid) {
    if let Ok(value) = header::HeaderValue::from_str(&conversation_id.to_string()) {
        response.headers_mut().insert(
            header::HeaderName::from_static("x-convrag-conversation-id"),
            value,
        );
    }
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
pub(in crate::api) fn page_links(req: &HttpRequest) -> Option<PageLinks> {
    let info = req.connection_info();
    PageLinks::new(&format!("{}://{}", info.scheme(), info.host()))
}

/// How the answer is written for the client of `req`.
pub(in crate::api) fn answer_style(body: &impl AnswerRequest, req: &HttpRequest) -> AnswerStyle {
    AnswerStyle {
        sources_as_text: ConvragOptions::sources_as_text(body.convrag()),
        links: page_links(req),
    }
}
