//! The conversational turn pipeline (issue 6). Stages 1 and 2 live here: PTKB statement ranking
//! ([`ptkb`]) and query rewriting ([`rewrite`]), both over a [`context::ConversationContext`].
//!
//! Command line (`convrag pipeline ...`, see [`cli`]):
//! - `ptkb --topics F --run-type automatic|manual --output RUN.json [--ranking RUN.trec]`
//! - `rewrite --topics F [--run-type automatic|manual] --output REWRITES.tsv`

pub mod cli;
pub mod context;
pub mod ptkb;
pub mod rewrite;
pub mod terms;

use std::path::PathBuf;

/// Errors of the pipeline area.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// Bad input given to a stage (a malformed option, an unusable context).
    #[error("{0}")]
    Input(String),
    /// A model or scorer failed or answered out of shape.
    #[error("model: {0}")]
    Model(String),
    /// A problem at a known place of an input file (line is 1-based).
    #[error("{}:{line}: {reason}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error(transparent)]
    Format(#[from] crate::formats::FormatError),
}

pub type Result<T, E = PipelineError> = std::result::Result<T, E>;
