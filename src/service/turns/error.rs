//! The turn service's errors.

use crate::index::IndexError;
use crate::pipeline::turn::SettingError;
use crate::pipeline::PipelineError;
use crate::service::input::InvalidInput;
use crate::service::rate::RateKind;
use crate::store::StoreError;

/// Errors of the turn service.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A requested setting is out of range or needs what this process lacks.
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// Neither an utterance nor an earlier version to take it from.
    #[error("utterance: is required")]
    MissingUtterance,
    /// Retrieval was asked for but the conversation has no collection.
    #[error("collection: the conversation has no collection to retrieve from")]
    NoCollection,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The LLM configuration cannot be used.
    #[error("the LLM configuration (llm.* / CONVRAG_LLM_*) is unusable: {0}")]
    LlmConfig(#[source] PipelineError),
    /// The user started more turns or searches this minute than the limit allows.
    #[error("{}: rate limit of {per_minute} per minute; retry in {retry_after_secs} s", kind.as_str())]
    RateLimited {
        kind: RateKind,
        per_minute: u32,
        retry_after_secs: u64,
    },
    /// What the caller sent breaks the input contract ([`crate::service::input`]).
    #[error(transparent)]
    Input(#[from] InvalidInput),
    /// A stored turn was asked of a service built without a database (benchmarks, evaluation).
    #[error("this turn service stores no turns: it was built without a database")]
    NoStore,
    /// A blocking task panicked or was cancelled.
    #[error("a task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
}

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;
