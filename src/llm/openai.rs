//! OpenAI-compatible `/v1/chat/completions` over reqwest (llama.cpp, vLLM, Ollama, OpenAI...).

use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

use super::sse::{SseDecoder, SseEvent};
use super::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, LlmError, Result, StreamItem, Usage,
};
use crate::config::LlmConfig;

/// Longest server error message kept in an error (bodies can be whole HTML pages).
const MAX_ERROR_CHARS: usize = 500;

/// Client of one OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    base_url: String,
    model: String,
    api_key: Option<String>,
    timeout: Duration,
}

impl OpenAiClient {
    /// `base_url` such as `http://127.0.0.1:8000/v1` (a trailing slash is fine). `timeout` bounds
    /// a whole request, streamed body included.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Duration,
    ) -> Result<Self> {
        let base_url = base_url.trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(LlmError::Config(format!(
                "base URL must start with http:// or https://, got {base_url:?}"
            )));
        }
        if timeout.is_zero() {
            return Err(LlmError::Config("timeout must be positive".into()));
        }
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            http,
            base_url,
            model: model.to_string(),
            api_key: api_key.filter(|k| !k.is_empty()),
            timeout,
        })
    }

    /// The client for `config`, or `None` when no endpoint is configured.
    pub fn from_config(config: &LlmConfig) -> Result<Option<Self>> {
        match &config.base_url {
            None => Ok(None),
            Some(url) => Self::new(
                url,
                &config.model,
                config.api_key.clone(),
                Duration::from_secs(config.timeout_secs),
            )
            .map(Some),
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }

    fn body(&self, request: &ChatRequest, stream: bool) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": request.messages,
            "stream": stream,
        });
        if stream {
            // Servers that know it send the token counts in a last chunk; others ignore it.
            body["stream_options"] = json!({"include_usage": true});
        }
        if let Some(n) = request.max_tokens {
            body["max_tokens"] = json!(n);
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(p) = request.top_p {
            body["top_p"] = json!(p);
        }
        if !request.stop.is_empty() {
            body["stop"] = json!(request.stop);
        }
        if let Some(seed) = request.seed {
            body["seed"] = json!(seed);
        }
        body
    }

    fn map_send_error(&self, url: &str, e: reqwest::Error) -> LlmError {
        if e.is_timeout() {
            LlmError::Timeout {
                url: url.to_string(),
                after: self.timeout,
            }
        } else if e.is_connect() {
            LlmError::Connect {
                url: url.to_string(),
                message: root_cause(&e),
            }
        } else if e.is_decode() || e.is_body() {
            LlmError::Malformed {
                url: url.to_string(),
                message: root_cause(&e),
            }
        } else {
            LlmError::Request {
                url: url.to_string(),
                message: root_cause(&e),
            }
        }
    }

    async fn send(&self, request: &ChatRequest, stream: bool) -> Result<reqwest::Response> {
        let url = self.endpoint();
        let mut builder = self.http.post(&url).json(&self.body(request, stream));
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder
            .send()
            .await
            .map_err(|e| self.map_send_error(&url, e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = response.text().await.unwrap_or_default();
        Err(LlmError::Status {
            url,
            status: status.as_u16(),
            message: server_message(&text),
        })
    }

    async fn chat_impl(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let url = self.endpoint();
        let response = self.send(request, false).await?;
        let text = response
            .text()
            .await
            .map_err(|e| self.map_send_error(&url, e))?;
        parse_completion(&text).map_err(|message| LlmError::Malformed { url, message })
    }

    async fn stream_impl(&self, request: &ChatRequest) -> Result<ChatStream> {
        let url = self.endpoint();
        let response = self.send(request, true).await?;
        let timeout = self.timeout;
        let bytes = response.bytes_stream();
        // State: the byte stream, the decoder, queued deltas, and whether the stream is over.
        struct State<S> {
            bytes: S,
            decoder: SseDecoder,
            queue: std::collections::VecDeque<Result<StreamItem>>,
            finished: bool,
        }
        let state = State {
            bytes: Box::pin(bytes),
            decoder: SseDecoder::default(),
            queue: Default::default(),
            finished: false,
        };
        let stream = futures_util::stream::unfold(state, move |mut st| {
            let url = url.clone();
            async move {
                loop {
                    if let Some(item) = st.queue.pop_front() {
                        return Some((item, st));
                    }
                    if st.finished {
                        return None;
                    }
                    let events = match st.bytes.next().await {
                        Some(Ok(chunk)) => st.decoder.feed(&chunk),
                        Some(Err(e)) => {
                            st.finished = true;
                            let err = if e.is_timeout() {
                                LlmError::Timeout {
                                    url: url.clone(),
                                    after: timeout,
                                }
                            } else {
                                LlmError::Request {
                                    url: url.clone(),
                                    message: format!("stream broke: {}", root_cause(&e)),
                                }
                            };
                            return Some((Err(err), st));
                        }
                        None => {
                            st.finished = true;
                            let mut events = st.decoder.finish();
                            if !events.contains(&SseEvent::Done) {
                                events.push(SseEvent::Data(String::new()));
                            }
                            events
                        }
                    };
                    for event in events {
                        match event {
                            SseEvent::Done => {
                                st.finished = true;
                                break;
                            }
                            SseEvent::Data(payload) if payload.is_empty() => {
                                // Body ended without [DONE]: the answer may be cut short.
                                st.queue.push_back(Err(LlmError::Malformed {
                                    url: url.clone(),
                                    message: "stream ended without data: [DONE]".into(),
                                }));
                            }
                            SseEvent::Data(payload) => match parse_chunk(&payload) {
                                Ok((delta, usage)) => {
                                    if let Some(delta) = delta.filter(|d| !d.is_empty()) {
                                        st.queue.push_back(Ok(StreamItem::Content(delta)));
                                    }
                                    if let Some(usage) = usage {
                                        st.queue.push_back(Ok(StreamItem::Usage(usage)));
                                    }
                                }
                                Err(message) => {
                                    st.finished = true;
                                    st.queue.push_back(Err(LlmError::Malformed {
                                        url: url.clone(),
                                        message,
                                    }));
                                    break;
                                }
                            },
                        }
                    }
                }
            }
        });
        Ok(Box::pin(stream))
    }
}

impl ChatModel for OpenAiClient {
    fn name(&self) -> String {
        format!("openai:{}@{}", self.model, self.base_url)
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn chat<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(self.chat_impl(request))
    }

    fn chat_stream<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatStream>> {
        Box::pin(self.stream_impl(request))
    }
}

/// The innermost error message (reqwest wraps hyper wraps io: "Connection refused").
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut messages = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        messages.push(s.to_string());
        source = s.source();
    }
    messages.dedup();
    messages.join(": ")
}

/// The server's own words: `{"error": {"message": ...}}`, `{"detail": ...}`, `{"message": ...}`
/// or the raw body, shortened.
fn server_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let candidate = v
            .pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("detail"))
            .or_else(|| v.get("message"))?;
        Some(match candidate {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    });
    let message = from_json.unwrap_or_else(|| body.trim().to_string());
    let message = if message.is_empty() {
        "(empty body)".to_string()
    } else {
        message
    };
    if message.chars().count() > MAX_ERROR_CHARS {
        let cut: String = message.chars().take(MAX_ERROR_CHARS).collect();
        format!("{cut}…")
    } else {
        message
    }
}

#[derive(Deserialize)]
struct Completion {
    model: Option<String>,
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<Message>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    content: Option<String>,
}

fn parse_completion(body: &str) -> std::result::Result<ChatResponse, String> {
    let mut de = serde_json::Deserializer::from_str(body);
    let completion: Completion = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| format!("{e} (body starts {:?})", prefix(body)))?;
    let choice = completion
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| "no choices in the completion".to_string())?;
    let content = choice
        .message
        .and_then(|m| m.content)
        .ok_or_else(|| "choices[0].message.content is missing".to_string())?;
    Ok(ChatResponse {
        content,
        model: completion.model,
        finish_reason: choice.finish_reason,
        usage: completion.usage,
    })
}

/// `choices[0].delta.content` of one streamed chunk (`None` for role-only or empty chunks) and
/// its `usage` (`null` in every chunk but the last with OpenAI's `include_usage`).
type Chunk = (Option<String>, Option<Usage>);

fn parse_chunk(payload: &str) -> std::result::Result<Chunk, String> {
    let v: Value = serde_json::from_str(payload)
        .map_err(|e| format!("chunk is not JSON ({e}): {:?}", prefix(payload)))?;
    if let Some(err) = v.get("error") {
        return Err(format!("server error in stream: {err}"));
    }
    let usage = match v.get("usage") {
        None | Some(Value::Null) => None,
        Some(u) => Some(
            serde_json::from_value::<Usage>(u.clone())
                .map_err(|e| format!("usage of a chunk is malformed ({e}): {u}"))?,
        ),
    };
    let choices = match v.get("choices").and_then(Value::as_array) {
        Some(choices) => choices,
        // The usage chunk may come without choices.
        None if usage.is_some() => return Ok((None, usage)),
        None => return Err(format!("chunk without choices: {:?}", prefix(payload))),
    };
    let delta = choices
        .first()
        .and_then(|c| c.pointer("/delta/content"))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok((delta, usage))
}

fn prefix(s: &str) -> String {
    s.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_parsing() {
        let r = parse_completion(
            r#"{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi [1]."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}"#,
        )
        .unwrap();
        assert_eq!(r.content, "Hi [1].");
        assert_eq!(r.usage.unwrap().completion_tokens, 3);
        let e = parse_completion(r#"{"choices":[{"message":{"content":5}}]}"#).unwrap_err();
        assert!(e.contains("choices[0].message.content"), "{e}");
        assert!(parse_completion(r#"{"choices":[]}"#)
            .unwrap_err()
            .contains("no choices"));
        assert!(parse_completion("<html>").is_err());
    }

    #[test]
    fn chunk_parsing() {
        assert_eq!(
            parse_chunk(r#"{"choices":[{"delta":{"content":"Hel"}}],"usage":null}"#).unwrap(),
            (Some("Hel".into()), None)
        );
        assert_eq!(
            parse_chunk(r#"{"choices":[{"delta":{"role":"assistant"}}]}"#).unwrap(),
            (None, None)
        );
        let usage = Usage {
            prompt_tokens: 12,
            completion_tokens: 5,
        };
        // OpenAI's last chunk: no choices; llama.cpp's: the finish chunk carries it.
        assert_eq!(
            parse_chunk(r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}"#)
                .unwrap(),
            (None, Some(usage))
        );
        assert_eq!(
            parse_chunk(r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5}}"#)
                .unwrap(),
            (None, Some(usage))
        );
        assert!(parse_chunk(r#"{"usage":{"prompt_tokens":"many"}}"#).is_err());
        assert!(parse_chunk(r#"{"id":"x"}"#).is_err());
        assert!(parse_chunk("nope").is_err());
        assert!(parse_chunk(r#"{"error":{"message":"boom"}}"#)
            .unwrap_err()
            .contains("boom"));
    }

    #[test]
    fn streams_ask_for_usage() {
        let c = OpenAiClient::new("http://h:1/v1", "m", None, Duration::from_secs(1)).unwrap();
        let request = ChatRequest::new(vec![]);
        assert_eq!(
            c.body(&request, true)["stream_options"],
            json!({"include_usage": true})
        );
        assert!(c.body(&request, false).get("stream_options").is_none());
    }

    #[test]
    fn server_messages() {
        assert_eq!(
            server_message(r#"{"error":{"message":"model not found"}}"#),
            "model not found"
        );
        assert_eq!(server_message(r#"{"detail":"bad"}"#), "bad");
        assert_eq!(server_message("  plain  "), "plain");
        assert_eq!(server_message(""), "(empty body)");
        assert!(server_message(&"x".repeat(2000)).chars().count() <= MAX_ERROR_CHARS + 1);
    }

    #[test]
    fn config_validation() {
        assert!(OpenAiClient::new("ftp://x", "m", None, Duration::from_secs(1)).is_err());
        assert!(OpenAiClient::new("http://x", "m", None, Duration::ZERO).is_err());
        let c = OpenAiClient::new(
            "http://h:1/v1/",
            "m",
            Some(String::new()),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(c.endpoint(), "http://h:1/v1/chat/completions");
        assert!(c.api_key.is_none());
        assert!(OpenAiClient::from_config(&LlmConfig::default())
            .unwrap()
            .is_none());
    }
}
