//! The AG task's reranker requests: one JSON line per topic, its query and its candidate
//! segments in first-stage order. The one reader of them, for the batch runs and `convrag rerank`.

use std::path::Path;

use serde::Deserialize;

use super::id_string;
use crate::formats::{numbered_lines, read_text, FormatError, Result};

/// The query of a reranker request: `{"qid"|"id"|"narrative_id", "text"|"narrative"}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RequestQuery {
    // Named `qid` as in the published files, so a missing id is reported by that name.
    #[serde(
        rename = "qid",
        alias = "id",
        alias = "narrative_id",
        deserialize_with = "id_string"
    )]
    pub id: String,
    #[serde(alias = "narrative")]
    pub text: String,
}

/// Segment fields carried by a reranker request candidate.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SegmentFields {
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub headings: String,
    /// The passage: `segment` in MS MARCO v2.1 requests, `contents` or `text` in other
    /// collections' (Pyserini's JSON documents).
    #[serde(alias = "contents", alias = "text")]
    pub segment: String,
    #[serde(default)]
    pub start_char: Option<u64>,
    #[serde(default)]
    pub end_char: Option<u64>,
}

/// One candidate segment.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Candidate {
    #[serde(deserialize_with = "id_string")]
    pub docid: String,
    pub score: f64,
    #[serde(default)]
    pub doc: Option<SegmentFields>,
}

/// One line of a reranker-request JSONL file. The candidates' order is the ranking (a reranked
/// file keeps the first-stage scores, so scores need not be sorted).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RerankRequest {
    #[serde(skip)]
    pub line: usize,
    pub query: RequestQuery,
    pub candidates: Vec<Candidate>,
}

/// Reads a reranker-request JSONL file (plain or `.gz`).
pub fn read_rerank_requests(path: &Path) -> Result<Vec<RerankRequest>> {
    parse_rerank_requests(path, &read_text(path)?)
}

/// [`read_rerank_requests`] over text already read from `path` (errors name `path`).
pub fn parse_rerank_requests(path: &Path, text: &str) -> Result<Vec<RerankRequest>> {
    let mut out = Vec::new();
    for (line, l) in numbered_lines(text) {
        if l.trim().is_empty() {
            continue;
        }
        let de = &mut serde_json::Deserializer::from_str(l);
        let mut r: RerankRequest = serde_path_to_error::deserialize(de).map_err(|e| {
            let path_s = e.path().to_string();
            let inner = e.into_inner();
            let col = inner.column();
            FormatError::parse(path, line, format!("at `{path_s}` (column {col}): {inner}"))
        })?;
        r.line = line;
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_may_be_integers_and_the_passage_contents_or_text() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        let first = r#"{"query": {"qid": 5, "text": "q"}, "candidates": [{"docid": 9, "score": 2, "doc": {"contents": "c"}}, {"docid": "x", "score": 1.5, "doc": {"text": "t", "title": "T"}}]}"#;
        std::fs::write(&p, format!("{first}\n")).unwrap();
        let reqs = super::read_rerank_requests(&p).unwrap();
        assert_eq!(reqs[0].query.id, "5");
        let c = &reqs[0].candidates;
        assert_eq!((c[0].docid.as_str(), c[0].score), ("9", 2.0));
        assert_eq!(c[0].doc.as_ref().unwrap().segment, "c");
        assert_eq!(c[1].doc.as_ref().unwrap().segment, "t");
        std::fs::write(
            &p,
            format!("{first}\n{{\"query\": {{\"text\": \"q\"}}, \"candidates\": []}}\n"),
        )
        .unwrap();
        let e = super::read_rerank_requests(&p).unwrap_err().to_string();
        assert!(e.contains("r.jsonl:2:") && e.contains("`qid`"), "{e}");
    }
}
