//! OpenAI's wire format of chat completions and models: the request body with its checks (what
//! convrag refuses rather than ignores), the messages as the chat service reads them, and their
//! JSON Schema beyond what the types say.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::llm::{ChatMessage as LlmMessage, ChatRequest as LlmRequest};
use crate::pipeline::generate::Sampling;
use crate::service::chat::{count_tokens, IncomingMessage};
use crate::web::error::ApiError;

/// The largest `max_tokens` accepted (far above any answer's length; the schema states it).
const MAX_TOKEN_BOUND: u64 = 1_000_000;

/// A token bound as JSON Schema reads an integer: `100` and `100.0` alike, within
/// [`MAX_TOKEN_BOUND`].
pub(in crate::api) fn token_bound<'de, D: serde::Deserializer<'de>>(
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
    pub(in crate::api) fn sources_as_text(options: Option<&ConvragOptions>) -> bool {
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
pub(in crate::api) trait AnswerRequest: DeserializeOwned + 'static {
    /// The model (a collection) asked.
    fn model(&self) -> &str;

    fn convrag(&self) -> Option<&ConvragOptions>;

    /// Refuses what convrag cannot do rather than ignoring it.
    fn check_parameters(&self) -> Result<(), ApiError>;
}

/// Refuses a `temperature` or `top_p` outside OpenAI's ranges.
pub(in crate::api) fn check_sampling(
    temperature: Option<f64>,
    top_p: Option<f64>,
) -> Result<(), ApiError> {
    if temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return Err(ApiError::invalid("temperature", "must be between 0 and 2"));
    }
    if top_p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
        return Err(ApiError::invalid("top_p", "must be between 0 and 1"));
    }
    Ok(())
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
    pub(super) fn sampling(&self) -> Result<Sampling, ApiError> {
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
    pub(super) fn plain_request(&self) -> Result<LlmRequest, ApiError> {
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
pub(in crate::api) struct UserMessages;

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
/// a user's (`user`) an utterance with some text. A user's schema only adds to the schema
/// without `user` on the same value, which keeps NUL out ([`VISIBLE_CHAR`]).
///
/// [`VISIBLE_CHAR`]: crate::web::schema::VISIBLE_CHAR
pub(in crate::api) fn content_schema(part_types: &[&str], user: bool) -> Value {
    use crate::web::schema::{NOTNUL, VISIBLE_CHAR};
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
        {"type": "string", "minLength": 1, "maxLength": max, "pattern": VISIBLE_CHAR},
        {"type": "array", "contains": {"type": "object", "required": ["type", "text"],
            "properties": {"type": {"enum": part_types},
                "text": {"type": "string", "maxLength": max, "pattern": VISIBLE_CHAR}}},
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
    pub(super) fn incoming(&self) -> IncomingMessage {
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
    pub(super) fn tokens(&self) -> usize {
        self.content.as_ref().map_or(0, |c| count_tokens(&c.text()))
    }
}

impl MessageContent {
    pub(super) fn text(&self) -> String {
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
