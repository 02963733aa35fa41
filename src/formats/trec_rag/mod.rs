//! TREC RAG 2024 and 2025: topics, the AG task's inputs (ranked list + reranker requests) and the
//! answer files (2024 format; 2025 Format 1 and Format 2), with their validators.
//!
//! One file per part: `requests` (the AG task's reranker requests, the one reader of them),
//! `answers` (the answer records and their writer) and `validate_answers` (what the guidelines
//! and the organizers' checkers require of an answer file); topics here.

mod answers;
mod requests;
mod validate_answers;

use std::collections::HashSet;
use std::path::Path;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::{json_error_line, numbered_lines, read_text, FormatError, Result};

pub use answers::*;
pub use requests::*;
pub use validate_answers::*;

/// Largest `references` list (both years: "a maximum of only 20 segments is allowed").
pub const MAX_REFERENCES: usize = 20;
/// Longest answer in words (2024 guidelines: "upto a maximum of 400 words"; the 2025 checker
/// trims to the same limit).
pub const MAX_WORDS: usize = 400;

/// A topic: its id and its text (the 2024 one-sentence query or the 2025 narrative).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    /// 1-based line (JSONL/TSV) or best-effort line (JSON array) where the topic is.
    pub line: usize,
    pub id: String,
    pub text: String,
}

/// Reads a TREC RAG 2024 topics TSV: `topic_id<TAB>text` per line (CRLF accepted).
pub fn read_topics_tsv(path: &Path) -> Result<Vec<Topic>> {
    parse_topics_tsv(path, &read_text(path)?)
}

fn parse_topics_tsv(path: &Path, text: &str) -> Result<Vec<Topic>> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (line, l) in numbered_lines(text) {
        if l.trim().is_empty() {
            continue;
        }
        let Some((id, t)) = l.split_once('\t') else {
            return Err(FormatError::parse(
                path,
                line,
                "expected `topic_id<TAB>text`",
            ));
        };
        let id = id.trim();
        if id.is_empty() || t.trim().is_empty() {
            return Err(FormatError::parse(path, line, "empty topic id or text"));
        }
        if !seen.insert(id.to_string()) {
            return Err(FormatError::parse(
                path,
                line,
                format!("duplicate topic id {id:?}"),
            ));
        }
        out.push(Topic {
            line,
            id: id.to_string(),
            text: t.to_string(),
        });
    }
    Ok(out)
}

/// Reads TREC RAG 2025 narrative topics in any published layout: a JSON array (the guidelines'
/// example, `{"id", "narrative"}`), JSON lines (`{"id", "title"}` as in the released
/// `topics.rag25.test.jsonl`, or `{"id", "narrative"}`), or `id<TAB>narrative` TSV (the dev
/// topics). Ids may be strings or integers.
pub fn read_rag25_topics(path: &Path) -> Result<Vec<Topic>> {
    let text = read_text(path)?;
    let first = text.trim_start().chars().next();
    let mut topics = Vec::new();
    match first {
        Some('[') => {
            let doc = super::parse_json_document(path, &text)?;
            let lines = super::key_lines(&text, "id");
            let Value::Array(items) = doc else {
                unreachable!()
            };
            for (i, item) in items.iter().enumerate() {
                let line = lines.get(i).copied().unwrap_or(1);
                topics.push(topic_from_json(item).map_err(|m| {
                    FormatError::parse(path, line, format!("topic #{}: {m}", i + 1))
                })?);
                topics.last_mut().unwrap().line = line;
            }
        }
        Some('{') => {
            for (line, l) in numbered_lines(&text) {
                if l.trim().is_empty() {
                    continue;
                }
                let v: Value = serde_json::from_str(l).map_err(|e| {
                    FormatError::parse(
                        path,
                        line,
                        format!("invalid JSON: {}", json_error_line(&e).1),
                    )
                })?;
                let mut t = topic_from_json(&v).map_err(|m| FormatError::parse(path, line, m))?;
                t.line = line;
                topics.push(t);
            }
        }
        _ => topics = parse_topics_tsv(path, &text)?,
    }
    let mut seen = HashSet::new();
    for t in &topics {
        if !seen.insert(t.id.clone()) {
            return Err(FormatError::parse(
                path,
                t.line,
                format!("duplicate topic id {:?}", t.id),
            ));
        }
    }
    Ok(topics)
}

fn topic_from_json(v: &Value) -> std::result::Result<Topic, String> {
    let obj = v.as_object().ok_or("expected a JSON object")?;
    let id = match obj
        .get("id")
        .or_else(|| obj.get("narrative_id"))
        .or_else(|| obj.get("qid"))
    {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => n.to_string(),
        Some(_) => return Err("`id` must be a non-empty string or an integer".into()),
        None => return Err("missing `id`".into()),
    };
    let text = ["narrative", "title", "text"]
        .iter()
        .find_map(|k| obj.get(*k))
        .ok_or("missing `narrative` (or `title`, `text`)")?
        .as_str()
        .ok_or("the narrative must be a string")?
        .to_string();
    Ok(Topic { line: 0, id, text })
}

/// A string id that may be written as a JSON string or integer.
pub(super) fn id_string<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => Ok(s),
        Value::Number(n) if n.is_u64() || n.is_i64() => Ok(n.to_string()),
        other => Err(serde::de::Error::custom(format!(
            "expected a string or integer id, found {other}"
        ))),
    }
}

/// Which answer layout a file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerFormat {
    Rag24,
    Rag25Format1,
    Rag25Format2,
}
