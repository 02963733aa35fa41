//! Retries transient failures (refused connection, 429, 5xx) with exponential backoff. Timeouts
//! are not retried: the caller's latency budget is already spent.

use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{ChatModel, ChatRequest, ChatResponse, ChatStream, Result};

/// Wraps a model; `attempts` counts the first try.
pub struct Retry<M> {
    inner: M,
    attempts: u32,
    first_backoff: Duration,
}

impl<M: ChatModel> Retry<M> {
    pub fn new(inner: M, attempts: u32, first_backoff: Duration) -> Self {
        Self {
            inner,
            attempts: attempts.max(1),
            first_backoff,
        }
    }

    async fn run<'a, T, F>(&'a self, call: F) -> Result<T>
    where
        F: Fn(&'a M) -> BoxFuture<'a, Result<T>>,
    {
        let mut backoff = self.first_backoff;
        let mut attempt = 1;
        loop {
            match call(&self.inner).await {
                Err(e) if e.is_transient() && attempt < self.attempts => {
                    tracing::warn!(attempt, error = %e, "LLM call failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}

impl<M: ChatModel> ChatModel for Retry<M> {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn chat<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(self.run(move |m| m.chat(request)))
    }

    fn chat_stream<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatStream>> {
        Box::pin(self.run(move |m| m.chat_stream(request)))
    }
}
