//! Chat models behind a small trait: an OpenAI-compatible `/v1/chat/completions` client and
//! wrappers for cross-cutting behaviour (retries), so the generator and the LLM rewriter never
//! depend on one vendor.

mod openai;
mod retry;
mod sse;

pub use openai::OpenAiClient;
pub use retry::Retry;

use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};

/// Errors talking to a chat model. Messages name the endpoint so logs and turn diagnostics say
/// which server failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("LLM endpoint {url} is not reachable: {message}")]
    Connect { url: String, message: String },
    #[error("LLM endpoint {url} did not answer within {} s", after.as_secs_f64())]
    Timeout { url: String, after: Duration },
    #[error("LLM endpoint {url} answered HTTP {status}: {message}")]
    Status {
        url: String,
        status: u16,
        message: String,
    },
    #[error("LLM endpoint {url} sent a malformed response: {message}")]
    Malformed { url: String, message: String },
    #[error("LLM request to {url} failed: {message}")]
    Request { url: String, message: String },
    #[error("invalid LLM configuration: {0}")]
    Config(String),
}

impl LlmError {
    /// Worth retrying: the server may answer next time (refused connection, 429, 5xx).
    pub fn is_transient(&self) -> bool {
        match self {
            LlmError::Connect { .. } => true,
            LlmError::Status { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

pub type Result<T, E = LlmError> = std::result::Result<T, E>;

/// One chat message.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: "system".into(),
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: "user".into(),
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: "assistant".into(),
            content: content.into(),
        }
    }
}

/// A chat completion request (the model name comes from the client's configuration). Kept
/// with a turn's LLM call as sent, so the call can be inspected and replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl ChatRequest {
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            max_tokens: None,
            temperature: None,
            top_p: None,
            stop: Vec::new(),
            seed: None,
        }
    }
}

/// Token counts reported by the server.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u32,
    #[serde(default)]
    pub completion_tokens: u32,
}

/// A finished (non-streamed) completion.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub content: String,
    pub model: Option<String>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
}

impl Usage {
    /// The counts of two calls together.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens.saturating_add(other.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_add(other.completion_tokens),
        }
    }
}

/// One item of a streamed completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamItem {
    /// A content delta.
    Content(String),
    /// The server's token counts for the whole completion (asked for with
    /// `stream_options.include_usage`; usually after the last delta).
    Usage(Usage),
}

/// A streamed completion: content deltas in order, and the usage when the server reports it;
/// the stream ends after `[DONE]`.
pub type ChatStream = BoxStream<'static, Result<StreamItem>>;

/// A chat model. Object safe, so wrappers (`Retry`) and test doubles of *external* servers can
/// stand in for each other behind `Arc<dyn ChatModel>`.
pub trait ChatModel: Send + Sync {
    /// Name for diagnostics, e.g. `openai:smollm2-135m-instruct@http://127.0.0.1:18631/v1`.
    fn name(&self) -> String;
    /// The model name sent to the endpoint.
    fn model(&self) -> &str;
    fn chat<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>>;
    /// Starts a streamed completion; errors before the first byte come back here, later errors as
    /// items of the stream.
    fn chat_stream<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatStream>>;
}
