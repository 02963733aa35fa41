//! The streamed answer of chat completions: `chat.completion.chunk` events as the turn writes its
//! answer, and [`Reply`], the fields every completion and chunk of one request share.

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use crate::pipeline::turn::TurnEvent;
use crate::service::chat::{
    answer, usage, AdmittedChat, Answer, AnswerStyle, ChatUsage, CitedPassage, StreamedText,
};
use crate::store::Turn;
use crate::web::error::{ApiError, ErrorCode};
use crate::web::sse;
use crate::web::AppState;

/// The answer of `admitted` as events: its text as the turn writes it, what the stored answer
/// adds (all of it when the turn was already stored; its sources when asked as text), the last
/// chunk, the usage when `include_usage`; a failure after admission as OpenAI's error event.
pub(super) fn streamed_answer(
    state: web::Data<AppState>,
    admitted: AdmittedChat,
    reply: Reply,
    include_usage: bool,
) -> HttpResponse {
    sse::stream(|tx| async move {
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
    })
}

pub(super) fn sse_data(data: &str) -> web::Bytes {
    sse::data_frame(data)
}

/// The fields every completion and chunk of one request share.
#[derive(Clone)]
pub(super) struct Reply {
    pub(super) id: String,
    pub(super) created: i64,
    pub(super) model: String,
    /// The request's messages' tokens by the rule of [`crate::service::chat::count_tokens`].
    pub(super) prompt_tokens: usize,
    pub(super) style: AnswerStyle,
}

impl Reply {
    /// The `convrag` field: which conversation and turn answered, the cited passages, and who
    /// counted the usage's tokens (`llm` or `rule`).
    fn convrag(turn: &Turn, passages: &[CitedPassage], usage: &ChatUsage) -> Value {
        json!({"conversation_id": turn.conversation_id, "turn_id": turn.id, "turn": turn.seq,
            "passages": passages, "usage_counted_by": usage.counted_by.as_str()})
    }

    pub(super) fn completion(&self, turn: &Turn) -> Value {
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
