//! Topic files whatever their task: query files for `convrag search --topics` (TSV or JSON
//! lines) and conversations (iKAT of any year, or CAsT 2019, 2020 and 2022 converted to the iKAT
//! shape). The task-specific readers (`trec_rag`, `ikat`, `cast`) stay with their formats; these
//! pick among them.

use std::path::Path;

use serde_json::Value;

use super::cast::{is_cast_topics, read_cast_topics};
use super::ikat::{self, IkatTopic};
use super::{numbered_lines, read_text, FormatError, Result};

/// A query of a topics file.
#[derive(Debug, Clone, PartialEq)]
pub struct Topic {
    pub id: String,
    pub text: String,
}

/// Reads topics as TSV (`id<TAB>text`) or JSONL (`{"id"|"qid", "text"|"query"|"title"}`,
/// where `query` may itself be `{"qid","text"}` as in reranker requests).
pub fn read_topics(path: &Path) -> Result<Vec<Topic>> {
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (i, line) in numbered_lines(&text) {
        if line.trim().is_empty() {
            continue;
        }
        let fail = |reason: String| FormatError::parse(path, i, reason);
        let topic = if line.trim_start().starts_with('{') {
            json_topic(line).map_err(fail)?
        } else {
            tsv_topic(line).map_err(fail)?
        };
        out.push(topic);
    }
    Ok(out)
}

fn json_topic(line: &str) -> std::result::Result<Topic, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
    let s = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let q = v.get("query");
    let id = ["id", "qid", "topic_id"]
        .iter()
        .find_map(|k| v.get(*k).and_then(s))
        .or_else(|| q.and_then(|q| q.get("qid")).and_then(s))
        .ok_or("missing \"id\" (or \"qid\")")?;
    let text = ["text", "title"]
        .iter()
        .find_map(|k| v.get(*k).and_then(s))
        .or_else(|| q.and_then(s))
        .or_else(|| q.and_then(|q| q.get("text")).and_then(s))
        .ok_or("missing \"text\" (or \"query\"/\"title\")")?;
    Ok(Topic { id, text })
}

fn tsv_topic(line: &str) -> std::result::Result<Topic, String> {
    let (id, text) = line.split_once('\t').ok_or("expected id<TAB>text")?;
    let id = id.trim();
    if id.is_empty() {
        return Err("empty topic id".into());
    }
    Ok(Topic {
        id: id.to_string(),
        text: text.trim().to_string(),
    })
}

/// Reads iKAT topics, or CAsT topics converted to the same shape.
pub fn read_conversations(path: &Path) -> Result<Vec<IkatTopic>> {
    let text = read_text(path)?;
    match serde_json::from_str::<Value>(&text) {
        Ok(value) if is_cast_topics(&value) => read_cast_topics(path, &text, &value),
        // The iKAT reader reports JSON errors with their line.
        _ => ikat::read_topics(path),
    }
}
