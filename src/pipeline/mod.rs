//! The conversational turn pipeline. Each stage is a trait with real implementations:
//! PTKB statement ranking ([`ptkb`]), query rewriting ([`rewrite`]), both over a
//! [`context::ConversationContext`], and response generation with citations ([`generate`]).
//! This module holds the types the stages share.
//!
//! Command line (`convrag pipeline ...`, the binary's `cli::pipeline`; loops in `crate::tune::topics`):
//! - `ptkb --topics F --run-type automatic|manual --output RUN.json [--ranking RUN.trec]`
//! - `rewrite --topics F [--run-type automatic|manual] --output REWRITES.tsv`
//!
//! `convrag tune rewrite|ptkb` (`crate::tune`) fits the learned parts ([`learned`]) on training topics.

pub mod context;
pub mod generate;
pub mod learned;
pub mod meaning;
pub mod page_examples;
pub mod ptkb;
pub mod ptkb_calibrated;
pub mod ptkb_zero_shot;
pub mod query;
pub mod rewrite;
pub mod rewrite_llm;
pub mod turn;

/// Term analysis, shared with the PTKB ranker and generation.
pub use rewrite::terms;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Errors of the pipeline area.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// Bad input given to a stage (a malformed option, an unusable context).
    #[error("{0}")]
    Input(String),
    /// A turn setting out of range or unusable here (`field` names it, as the API reports it).
    #[error("{field}: {reason}")]
    Setting { field: &'static str, reason: String },
    /// A model or scorer failed or answered out of shape.
    #[error("model: {0}")]
    Model(String),
    /// The neural model failed on a text it was given.
    #[error("model: {0}")]
    ModelFailed(#[source] crate::rerank::RerankError),
    /// A problem at a known place of an input file (line is 1-based).
    #[error("{}:{line}: {reason}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error(transparent)]
    Format(#[from] crate::formats::FormatError),
    #[error(transparent)]
    Retrieval(#[from] crate::index::IndexError),
    #[error(transparent)]
    Rerank(#[from] crate::rerank::RerankError),
    /// Dense or hybrid first-stage retrieval.
    #[error(transparent)]
    Dense(#[from] crate::dense::DenseError),
    #[error(transparent)]
    Generate(#[from] generate::GenerateError),
    /// A stage's task panicked or was cancelled.
    #[error("a stage task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
}

pub type Result<T, E = PipelineError> = std::result::Result<T, E>;

/// A retrieved (and possibly reranked) passage as the later stages see it, in final rank order.
/// Minimal on purpose: retrieval/reranking may add fields (scores per stage, collection, ...);
/// generation only reads `text` (and `title` for the prompt) and `score` (as a prior).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Passage {
    /// Collection passage id (e.g. `clueweb22-en0000-00-00000:3`, `msmarco_v2.1_doc_..._0#3_1`).
    pub id: String,
    pub title: Option<String>,
    pub url: Option<String>,
    pub text: String,
    /// Final ranking score (higher is better); only its order matters to generation.
    pub score: f64,
}
