//! Query files for `convrag search --topics`: topics in, a TREC run out.

use std::io::Write;
use std::path::Path;

use rayon::prelude::*;
use serde_json::Value;

use super::search::{Hit, Retriever, SearchOptions, WeightedQuery};
use super::{IndexError, Result};
use crate::collection::CollectionError;
use crate::formats::atomic::write_atomic;
use crate::formats::read_text;

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
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let fail = |reason: String| {
            IndexError::Collection(CollectionError::BadRecord {
                path: path.to_path_buf(),
                line: i as u64 + 1,
                reason,
            })
        };
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

/// Runs every topic and writes a TREC run (`qid Q0 docid rank score tag`) atomically; returns
/// the number of lines written.
pub fn write_run(
    retriever: &dyn Retriever,
    topics: &[Topic],
    options: &SearchOptions,
    run_tag: &str,
    output: &Path,
) -> Result<usize> {
    write_run_with(topics, run_tag, output, |t| {
        retriever.search_with(&WeightedQuery::text(&t.text), options)
    })
}

/// [`write_run`] with any search: `search` gives each topic's ranked hits (called in parallel).
pub fn write_run_with<E, F>(
    topics: &[Topic],
    run_tag: &str,
    output: &Path,
    search: F,
) -> std::result::Result<usize, E>
where
    E: From<IndexError> + Send,
    F: Fn(&Topic) -> std::result::Result<Vec<Hit>, E> + Sync + Send,
{
    if run_tag.is_empty() || run_tag.chars().any(char::is_whitespace) {
        return Err(IndexError::Invalid(format!(
            "run tag {run_tag:?} must be non-empty without spaces"
        ))
        .into());
    }
    let results: Vec<Vec<Hit>> = topics
        .par_iter()
        .map(search)
        .collect::<std::result::Result<_, E>>()?;
    let mut buf = Vec::new();
    let mut lines = 0;
    for (t, hits) in topics.iter().zip(results) {
        for (rank, h) in hits.iter().enumerate() {
            writeln!(
                buf,
                "{} Q0 {} {} {:.6} {}",
                t.id,
                h.id,
                rank + 1,
                h.score,
                run_tag
            )
            .expect("writing to memory");
            lines += 1;
        }
    }
    write_atomic(output, &buf).map_err(IndexError::from)?;
    Ok(lines)
}
