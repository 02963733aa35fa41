//! Built-in evaluation: trec_eval-exact ranking measures, PTKB ranking, query rewriting (ROUGE-1),
//! answers (SQuAD F1/EM, TREC RAG answer statistics) and PolEval NDCG@10.
//!
//! Every number convrag reports about quality comes from here, and each family is checked against
//! its reference tool (trec_eval 9.0.x through pytrec_eval-terrier, `rouge-score`, the SQuAD script)
//! by the tests under `tests/eval_*.rs`.
//!
//! Readers report the file and the 1-based line of every problem (`EvalError::Parse`); the rules
//! for duplicates and unknown queries follow trec_eval and are documented in [`trec`].
//!
//! Command line (`convrag eval ...`, in the binary's `cli::eval`):
//! - `ranking --qrels F --run F [-m ndcg_cut.10 ...] [-l N] [-c] [-q] [--json]`
//! - `ptkb --qrels F|--topics F --run F` (iKAT run file or TREC/JSON run)
//! - `rewrite --reference F --run F [--stem]`
//! - `answers --reference F --run F` (SQuAD F1/EM) or `answers --rag F` (TREC RAG statistics)
//! - `poleval --expected F --out F [--in F]`
//! - `compare --qrels F --run A --run B [-m ...]`, `compare-ptkb`, `compare-rewrite`: paired
//!   significance tests between runs ([`compare`], [`stats`]), text / `--json F` / `--html F`
//!
//! Text output uses trec_eval's layout (`measure<TAB>qid|all<TAB>value`, 4 decimals); `--json`
//! prints `{"all": {...}, "per_query": {...}}` at full precision; `-o FILE` writes atomically.
//!
//! Reference values: `scripts/eval-reference.py` regenerates the reference files under
//! `tests/fixtures` (trec_eval's C code through pytrec_eval-terrier, rouge-score, NLTK). JSON
//! numbers are parsed with serde_json's `float_roundtrip` (correctly rounded), as Python does:
//! run scores decide ties.

pub mod answers;
pub mod compare;
pub mod compare_report;
pub mod expected;
pub mod measures;
pub mod poleval;
pub mod ptkb;
pub mod rewrite;
pub mod rouge;
pub mod stats;
pub mod trec;

use std::path::{Path, PathBuf};

pub use measures::{evaluate, EvalOptions, Evaluation, Measure};
pub use trec::{read_qrels, read_run, Qrels, Run};

/// Errors of the evaluation area.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A problem at a known place of an input file (line is 1-based).
    #[error("{}:{line}: {reason}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    /// A problem with a whole input file (no single line to blame).
    #[error("{}: {reason}", path.display())]
    File { path: PathBuf, reason: String },
    /// A bad measure name or option.
    #[error("{0}")]
    Usage(String),
    /// An input in an official format (iKAT topics) that does not parse.
    #[error(transparent)]
    Format(#[from] crate::formats::FormatError),
}

pub type Result<T, E = EvalError> = std::result::Result<T, E>;

impl EvalError {
    pub(crate) fn parse(path: &Path, line: usize, reason: impl Into<String>) -> Self {
        EvalError::Parse {
            path: path.to_path_buf(),
            line,
            reason: reason.into(),
        }
    }
    pub(crate) fn file(path: &Path, reason: impl Into<String>) -> Self {
        EvalError::File {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
    /// A serde_json error, placed at its line (serde_json counts lines from 1).
    pub(crate) fn json(path: &Path, err: &serde_json::Error) -> Self {
        EvalError::parse(path, err.line().max(1), err.to_string())
    }
}

/// Reads a whole file as UTF-8 (gzip decompressed first), naming the file and line of problems.
pub fn read_text(path: &Path) -> Result<String> {
    use crate::formats::FormatError;
    crate::formats::read_text(path).map_err(|e| match e {
        FormatError::Io { path, source } => EvalError::Io { path, source },
        FormatError::Parse {
            path,
            line,
            message,
        } => EvalError::Parse {
            path,
            line,
            reason: message,
        },
        other => EvalError::file(path, other.to_string()),
    })
}
