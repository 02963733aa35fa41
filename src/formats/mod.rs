//! Official submission formats: typed readers for every task input, typed writers for every
//! output (byte-exact to the guidelines in `shared/specs/`), and validators that check what the
//! guidelines and the organizers' checking scripts check.
//!
//! One submodule per task family (`trec_rag`, `ikat`, `qrecc`, `poleval`; `ikat25` for the iKAT
//! 2025 JSONL with `ikat25_validate`, the organizers' checker's verdicts) plus shared pieces:
//! TREC run files (`trec_run`), word counting (`words`), Python-`json.dumps`-compatible JSON
//! output (`pyjson`), atomic file output (`atomic`) and the validation report (`validate`).

pub mod atomic;
pub mod cast;
pub mod check;
pub mod ikat;
pub mod ikat25;
pub mod ikat25_validate;
pub mod poleval;
pub mod pyjson;
pub mod qrecc;
pub mod topics;
pub mod trec_rag;
pub mod trec_run;
pub mod validate;
pub mod words;

use std::path::{Path, PathBuf};

pub use validate::{Problem, Report, Severity, ValidationContext};

/// Errors of the format readers and writers.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Malformed input: the file and the 1-based line of the problem.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// An output that would violate its format (the message says which rule).
    #[error("invalid output: {0}")]
    Invalid(String),
}

pub type Result<T, E = FormatError> = std::result::Result<T, E>;

impl FormatError {
    pub(crate) fn parse(path: &Path, line: usize, message: impl Into<String>) -> Self {
        FormatError::Parse {
            path: path.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

/// Reads a whole file as UTF-8, gunzipping it first when it is gzip (by content, whatever its
/// name); errors name the file, and for invalid UTF-8 the line.
pub fn read_text(path: &Path) -> Result<String> {
    let io = |source| FormatError::Io {
        path: path.to_path_buf(),
        source,
    };
    let raw = std::fs::read(path).map_err(io)?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(io)?;
        out
    } else {
        raw
    };
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        FormatError::parse(path, line, "invalid UTF-8")
    })
}

/// Lines of a text file without their terminators (`\n` or `\r\n`), numbered from 1. A final
/// newline does not start an extra line.
pub(crate) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split_terminator('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .enumerate()
        .map(|(i, l)| (i + 1, l))
}

/// A serde_json error as `line N column M: reason` text plus the line it names.
pub(crate) fn json_error_line(e: &serde_json::Error) -> (usize, String) {
    (e.line().max(1), format!("{e}"))
}

/// Parses a whole JSON document for a validator, or records where it is malformed.
pub(crate) fn parse_document(text: &str, report: &mut Report) -> Option<serde_json::Value> {
    match serde_json::from_str(text) {
        Ok(v) => Some(v),
        Err(e) => {
            let (line, msg) = json_error_line(&e);
            report.error(line, format!("invalid JSON: {msg}"));
            None
        }
    }
}

/// Parses a whole JSON document, reporting serde's line and column on failure.
pub(crate) fn parse_json_document(path: &Path, text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| {
        let (line, msg) = json_error_line(&e);
        FormatError::parse(path, line, format!("invalid JSON: {msg}"))
    })
}

/// 1-based line of each occurrence of `"key"` followed by `:` in a JSON text, in order. Used to
/// give best-effort line numbers to records of whole-document JSON files.
pub(crate) fn key_lines(text: &str, key: &str) -> Vec<usize> {
    let needle = format!("\"{key}\"");
    let mut out = Vec::new();
    let mut line = 1;
    let mut last = 0;
    for (pos, _) in text.match_indices(&needle) {
        let rest = text[pos + needle.len()..].trim_start();
        if !rest.starts_with(':') {
            continue;
        }
        line += text[last..pos].bytes().filter(|&b| b == b'\n').count();
        last = pos;
        out.push(line);
    }
    out
}
