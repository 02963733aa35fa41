//! Batch runs (`convrag run ...`): every official submission format produced through the same
//! turn pipeline and the same PostgreSQL records as the HTTP server.
//!
//! * [`engine`]: topics in parallel (`--jobs`), turns of a topic in order, each turn stored as an
//!   ordinary conversation turn of the `batch` user, or of the user named by `--user`
//!   (conversation external id `<run name>/<topic id>`). The database is the resume journal: stored turns are skipped.
//! * [`record`]: the `batch_runs` row and the `<output>.meta.json` sidecar (settings, model and
//!   input checksums, collection manifests, convrag version); a resume with different facts is
//!   refused, naming them.
//! * [`ikat`], [`trec_rag`], [`qrecc`], [`poleval`]: inputs → topics of turns, and the stored
//!   turns → the submission file, rendered in topic order and validated before it is written
//!   atomically. Because the file is always rendered from the stored records, an interrupted and
//!   resumed run writes the same bytes as an uninterrupted one.
//! * [`task`]: a task with its options ([`task::RunOptions`]) → the task module's planning: a
//!   planned run (topics, settings, recorded facts, rendering); [`plan`]: what the tasks share,
//!   and the execution. The command line (`src/cli/run.rs`) only parses and prints.

pub mod engine;
pub mod ikat;
pub mod interactive;
pub mod plan;
pub mod poleval;
pub mod qrecc;
pub mod record;
pub mod task;
pub mod trec_rag;

use std::path::{Path, PathBuf};

/// The score a submission shows for a stored score (also what the Runs view evaluates).
pub use crate::formats::trec_run::submitted_score;

/// Errors of batch runs.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// A problem at a known place of an input file (line is 1-based).
    #[error("{}:{line}: {message}", path.display())]
    Input {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// An option that cannot be used as given (`option` names it as typed on the command line).
    #[error("{option}: {message}")]
    Option {
        option: &'static str,
        message: String,
    },
    /// The stored run cannot be continued by this invocation.
    #[error("{0}")]
    Resume(String),
    /// Another process stored the topic's next turn first (two workers on one topic, when a
    /// lease ran out while its worker was still computing); nothing of this turn was stored.
    #[error("topic {topic}: turn {seq} was stored by another process meanwhile")]
    TurnTaken { topic: String, seq: i32 },
    /// One turn failed; nothing of it was stored.
    #[error("turn {turn}: {source}")]
    Turn {
        turn: String,
        source: crate::pipeline::PipelineError,
    },
    /// The Simulation API answered outside its contract, or refused a request.
    #[error("Sim.API {endpoint}: {message}")]
    SimApi { endpoint: String, message: String },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Format(#[from] crate::formats::FormatError),
    #[error(transparent)]
    Index(#[from] crate::index::IndexError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub type Result<T, E = BatchError> = std::result::Result<T, E>;

impl From<sqlx::Error> for BatchError {
    fn from(e: sqlx::Error) -> Self {
        BatchError::Store(e.into())
    }
}

impl From<crate::store::Diverged> for BatchError {
    fn from(e: crate::store::Diverged) -> Self {
        BatchError::Resume(e.to_string())
    }
}

impl From<crate::service::ServiceError> for BatchError {
    fn from(e: crate::service::ServiceError) -> Self {
        service_error(None, e)
    }
}

/// The one mapping of the turn service's errors to the batch's, naming the turn when there is
/// one: a pipeline or setting failure is the turn's; what the store refused is not stored.
pub(crate) fn service_error(turn: Option<&str>, e: crate::service::ServiceError) -> BatchError {
    use crate::service::ServiceError;
    use crate::store::StoreError;
    let prefix = turn.map_or(String::new(), |t| format!("turn {t}: "));
    match (turn, e) {
        (Some(turn), ServiceError::Pipeline(source)) => BatchError::Turn {
            turn: turn.to_string(),
            source,
        },
        (Some(turn), ServiceError::Setting(e)) => BatchError::Turn {
            turn: turn.to_string(),
            source: e.into(),
        },
        (_, ServiceError::Store(StoreError::Invalid { field, message })) => {
            BatchError::Resume(format!("{prefix}not stored ({field}: {message})"))
        }
        (_, ServiceError::Input(e)) => BatchError::Resume(format!("{prefix}not stored ({e})")),
        (_, ServiceError::Store(e)) => e.into(),
        (_, ServiceError::Index(e)) => e.into(),
        (
            _,
            e @ (ServiceError::Pipeline(_)
            | ServiceError::Setting(_)
            | ServiceError::MissingUtterance
            | ServiceError::NoCollection
            | ServiceError::LlmConfig(_)
            | ServiceError::NoStore
            | ServiceError::RateLimited { .. }
            | ServiceError::Task(_)),
        ) => BatchError::Resume(format!("{prefix}{e}")),
    }
}

pub(crate) fn option(option: &'static str, message: impl Into<String>) -> BatchError {
    BatchError::Option {
        option,
        message: message.into(),
    }
}

pub(crate) fn input_error(path: &Path, line: usize, message: impl Into<String>) -> BatchError {
    BatchError::Input {
        path: path.to_path_buf(),
        line,
        message: message.into(),
    }
}
