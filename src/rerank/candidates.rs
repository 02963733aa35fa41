//! First-stage candidates with text, from the two formats rerankers are fed in the TREC world:
//!
//! - TREC DL (RankLLM data) JSON: `[{"query": "...", "hits": [{"content", "docid", "qid", "score", "rank"}]}]`
//! - TREC RAG reranker requests, JSON lines: `{"query": {"text", "qid"}, "candidates": [{"docid",
//!   "score", "doc": {"segment" | "contents" | "text", "title"?}}]}`, as
//!   [`crate::formats::trec_rag`] reads them
//!
//! Either may be gzip-compressed (detected by content, not by name). Runs are written by
//! [`crate::formats::trec_run`].

use std::path::Path;

use serde::Deserialize;

use crate::formats::trec_rag;
use crate::formats::trec_run::{self, RankedLine, ScoreFormat};
use crate::formats::FormatError;

use super::{order_by_score, Fusion, PassageRef, RerankError, Reranker, Result};

#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub docid: String,
    /// First-stage (e.g. BM25) score.
    pub score: f32,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct QueryCandidates {
    pub qid: String,
    pub query: String,
    /// In first-stage order (descending score).
    pub candidates: Vec<Candidate>,
}

fn io_err(path: &Path, source: std::io::Error) -> RerankError {
    RerankError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn input_err(path: &Path, line: usize, reason: impl Into<String>) -> RerankError {
    RerankError::Input {
        path: path.to_path_buf(),
        line,
        reason: reason.into(),
    }
}

/// A file problem the shared reader or writer reported, in this area's terms.
fn file_err(path: &Path, e: FormatError) -> RerankError {
    match e {
        FormatError::Io { source, .. } => io_err(path, source),
        FormatError::Parse { line, message, .. } => input_err(path, line, message),
        FormatError::Invalid(reason) => input_err(path, 1, reason),
    }
}

/// Reads a candidates file in either format.
pub fn read_candidates(path: &Path) -> Result<Vec<QueryCandidates>> {
    let text = crate::formats::read_text(path).map_err(|e| file_err(path, e))?;
    match text.trim_start().chars().next() {
        Some('[') => read_trec_dl(path, &text),
        Some('{') => read_rag_jsonl(path, &text),
        Some(c) => Err(input_err(
            path,
            1 + text[..text.len() - text.trim_start().len()]
                .matches('\n')
                .count(),
            format!("expected a JSON array (TREC DL) or JSON lines (TREC RAG), found {c:?}"),
        )),
        None => Err(input_err(path, 1, "empty file: expected candidates")),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Id {
    Num(i64),
    Str(String),
}

impl Id {
    fn into_string(self) -> String {
        match self {
            Id::Num(n) => n.to_string(),
            Id::Str(s) => s,
        }
    }
}

#[derive(Deserialize)]
struct DlEntry {
    query: String,
    #[serde(default)]
    qid: Option<Id>,
    hits: Vec<DlHit>,
}

#[derive(Deserialize)]
struct DlHit {
    content: String,
    docid: Id,
    qid: Id,
    score: f32,
}

fn read_trec_dl(path: &Path, text: &str) -> Result<Vec<QueryCandidates>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let entries: Vec<DlEntry> = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let line = e.inner().line().max(1);
        input_err(path, line, format!("at {}: {}", e.path(), e.inner()))
    })?;
    let starts = top_level_element_lines(text);
    let line_of = |i: usize| starts.get(i).copied().unwrap_or(1);
    let mut out = Vec::with_capacity(entries.len());
    for (i, entry) in entries.into_iter().enumerate() {
        let mut qid = entry.qid.map(Id::into_string);
        let mut candidates = Vec::with_capacity(entry.hits.len());
        for hit in entry.hits {
            let hit_qid = hit.qid.into_string();
            match &qid {
                None => qid = Some(hit_qid),
                Some(q) if *q != hit_qid => {
                    return Err(input_err(
                        path,
                        line_of(i),
                        format!(
                            "query {:?}: hits carry different qids ({q} and {hit_qid})",
                            entry.query
                        ),
                    ))
                }
                Some(_) => {}
            }
            candidates.push(Candidate {
                docid: hit.docid.into_string(),
                score: hit.score,
                text: hit.content,
            });
        }
        let qid = qid.ok_or_else(|| {
            input_err(
                path,
                line_of(i),
                format!(
                    "query {:?} has neither a qid nor hits to take it from",
                    entry.query
                ),
            )
        })?;
        out.push(QueryCandidates {
            qid,
            query: entry.query,
            candidates,
        });
    }
    Ok(out)
}

/// 1-based line where each element of the top-level JSON array starts (a small scanner: strings
/// and nesting only), so errors found after parsing can still name a line.
fn top_level_element_lines(text: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    let (mut depth, mut line) = (0usize, 1usize);
    let (mut in_string, mut escaped, mut expect_element) = (false, false, false);
    for b in text.bytes() {
        if b == b'\n' {
            line += 1;
        }
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        if expect_element && !b.is_ascii_whitespace() && b != b']' {
            lines.push(line);
            expect_element = false;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth == 1 {
                    expect_element = true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => expect_element = true,
            _ => {}
        }
    }
    lines
}

/// TREC RAG reranker requests as read by [`trec_rag::parse_rerank_requests`], with each
/// candidate's text.
fn read_rag_jsonl(path: &Path, text: &str) -> Result<Vec<QueryCandidates>> {
    let requests = trec_rag::parse_rerank_requests(path, text).map_err(|e| file_err(path, e))?;
    if requests.is_empty() {
        return Err(input_err(path, 1, "no reranker requests in the file"));
    }
    let mut out = Vec::with_capacity(requests.len());
    for req in requests {
        let mut candidates = Vec::with_capacity(req.candidates.len());
        for (j, c) in req.candidates.into_iter().enumerate() {
            let doc = c.doc.ok_or_else(|| {
                input_err(path, req.line, format!("candidates[{j}] has no \"doc\""))
            })?;
            // The title carries meaning for MS MARCO v2.1 segments; put it first, as RankLLM does.
            let text = if doc.title.trim().is_empty() {
                doc.segment
            } else {
                format!("{}\n{}", doc.title, doc.segment)
            };
            candidates.push(Candidate {
                docid: c.docid,
                score: c.score as f32,
                text,
            });
        }
        out.push(QueryCandidates {
            qid: req.query.id,
            query: req.query.text,
            candidates,
        });
    }
    Ok(out)
}

/// One line of a TREC run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLine {
    pub qid: String,
    pub docid: String,
    pub rank: usize,
    pub score: f32,
}

/// Writes a TREC run (`qid Q0 docid rank score tag`) atomically, lines in the order given, scores
/// with six decimals as Anserini prints them.
pub fn write_trec_run(path: &Path, lines: &[RunLine], tag: &str) -> Result<()> {
    let lines = lines.iter().map(|l| RankedLine {
        topic_id: &l.qid,
        docid: &l.docid,
        rank: l.rank,
        score: f64::from(l.score),
    });
    trec_run::write_ranked(path, tag, ScoreFormat::Fixed(6), lines).map_err(|e| file_err(path, e))
}

/// Run lines for one query: the first `depth` candidates (by first-stage score) reranked and fused,
/// then the rest in first-stage order with scores below all reranked ones.
pub fn rerank_query(
    reranker: &dyn Reranker,
    q: &QueryCandidates,
    depth: usize,
    fusion: Fusion,
    collection: Option<&str>,
) -> Result<Vec<RunLine>> {
    let first: Vec<f32> = q.candidates.iter().map(|c| c.score).collect();
    let by_first = order_by_score(&first);
    let (head, tail) = by_first.split_at(depth.min(by_first.len()));
    let passages: Vec<PassageRef<'_>> = head
        .iter()
        .map(|&i| PassageRef {
            id: &q.candidates[i].docid,
            text: &q.candidates[i].text,
            ordinal: None,
        })
        .collect();
    let neural = reranker.rerank(&q.query, &passages, collection)?;
    let head_first: Vec<f32> = head.iter().map(|&i| first[i]).collect();
    let fused = fusion.fuse(&head_first, &neural);
    let mut lines = Vec::with_capacity(q.candidates.len());
    for (rank0, j) in order_by_score(&fused).into_iter().enumerate() {
        lines.push(RunLine {
            qid: q.qid.clone(),
            docid: q.candidates[head[j]].docid.clone(),
            rank: rank0 + 1,
            score: fused[j],
        });
    }
    let floor = fused.iter().copied().fold(f32::INFINITY, f32::min);
    let floor = if floor.is_finite() { floor } else { 0.0 };
    for (k, &i) in tail.iter().enumerate() {
        lines.push(RunLine {
            qid: q.qid.clone(),
            docid: q.candidates[i].docid.clone(),
            rank: lines.len() + 1,
            // Strictly below the reranked head and decreasing, so trec_eval keeps this order.
            score: floor - 1.0 - k as f32,
        });
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn reads_trec_dl_json_plain_and_gzip() {
        let dir = tempfile::tempdir().unwrap();
        let json = r#"[
  {"query": "q one", "hits": [
    {"content": "a b", "qid": 7, "docid": "d1", "rank": 1, "score": 2.5},
    {"content": "c", "qid": 7, "docid": "d2", "rank": 2, "score": 1.0}]},
  {"query": "q two", "hits": [{"content": "x", "qid": "8", "docid": 9, "score": 3}]}
]"#;
        let plain = write(dir.path(), "c.json", json);
        let got = read_candidates(&plain).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].qid, "7");
        assert_eq!(got[0].candidates[1].docid, "d2");
        assert_eq!(got[1].candidates[0].docid, "9");
        let gz = dir.path().join("c.json.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, json.as_bytes()).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        assert_eq!(read_candidates(&gz).unwrap(), got);
    }

    #[test]
    fn trec_dl_errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let bad = write(
            dir.path(),
            "bad.json",
            "[\n {\"query\": \"q\", \"hits\": [\n  {\"content\": \"a\", \"qid\": 1, \"docid\": \"d\"}\n ]}\n]\n",
        );
        let text = read_candidates(&bad).unwrap_err().to_string();
        assert!(text.contains("bad.json:3:"), "{text}");
        assert!(text.contains("score"), "{text}");

        let mixed = write(
            dir.path(),
            "mixed.json",
            "[\n {\"query\": \"a\", \"hits\": []},\n {\"query\": \"b\", \"hits\": [\n {\"content\": \"x\", \"qid\": 1, \"docid\": \"d\", \"score\": 1},\n {\"content\": \"y\", \"qid\": 2, \"docid\": \"e\", \"score\": 0}]}\n]",
        );
        let text = read_candidates(&mixed).unwrap_err().to_string();
        assert!(text.contains("mixed.json:2:"), "{text}");
    }

    #[test]
    fn reads_rag_jsonl_and_reports_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let good = r#"{"query": {"text": "t", "qid": "230274"}, "candidates": [{"docid": "msmarco#1", "score": 11.5, "doc": {"url": "u", "title": "Title", "segment": "Body"}}]}"#;
        let p = write(dir.path(), "r.jsonl", &format!("{good}\n{good}\n"));
        let got = read_candidates(&p).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].candidates[0].text, "Title\nBody");
        let p = write(
            dir.path(),
            "bad.jsonl",
            &format!("{good}\n{{\"query\": {{\"text\": \"t\"}}, \"candidates\": []}}\n"),
        );
        let text = read_candidates(&p).unwrap_err().to_string();
        assert!(text.contains("bad.jsonl:2:"), "{text}");
        assert!(text.contains("qid"), "{text}");
    }

    #[test]
    fn run_is_written_atomically_in_trec_format() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run.trec");
        let lines = vec![RunLine {
            qid: "1".into(),
            docid: "d".into(),
            rank: 1,
            score: 0.5,
        }];
        write_trec_run(&out, &lines, "tag").unwrap();
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "1 Q0 d 1 0.500000 tag\n"
        );
        // A failed write (directory missing) leaves nothing behind.
        assert!(write_trec_run(&dir.path().join("no/such/run.trec"), &lines, "t").is_err());
    }
}
