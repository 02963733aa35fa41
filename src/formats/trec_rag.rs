//! TREC RAG 2024 and 2025: topics, the AG task's inputs (ranked list + reranker requests) and the
//! answer files (2024 format; 2025 Format 1 and Format 2), with their validators.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use once_cell::sync::Lazy;
use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::validate::{Report, ValidationContext};
use super::{
    atomic, json_error_line, numbered_lines, pyjson, read_text, words, FormatError, Result,
};

/// Largest `references` list (both years: "a maximum of only 20 segments is allowed").
pub const MAX_REFERENCES: usize = 20;
/// Longest answer in words (2024 guidelines: "upto a maximum of 400 words"; the 2025 checker
/// trims to the same limit).
pub const MAX_WORDS: usize = 400;

/// MS MARCO v2.1 segment id, the pattern the organizers' checkers use.
static MARCO_SEGMENT: Lazy<Regex> =
    Lazy::new(|| Regex::new(r"^msmarco_v2\.1_doc_\d+_\d+#\d+_\d+$").unwrap());

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
fn id_string<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => Ok(s),
        Value::Number(n) if n.is_u64() || n.is_i64() => Ok(n.to_string()),
        other => Err(serde::de::Error::custom(format!(
            "expected a string or integer id, found {other}"
        ))),
    }
}

/// The query of a reranker request: `{"id"|"qid"|"narrative_id", "text"|"narrative"}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RequestQuery {
    #[serde(alias = "qid", alias = "narrative_id", deserialize_with = "id_string")]
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
    pub segment: String,
    #[serde(default)]
    pub start_char: Option<u64>,
    #[serde(default)]
    pub end_char: Option<u64>,
}

/// One candidate segment.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Candidate {
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
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (line, l) in numbered_lines(&text) {
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

/// One answer sentence with citations as zero-based indices into `references`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sentence {
    pub text: String,
    pub citations: Vec<usize>,
}

/// One answer sentence of 2025 Format 2: citations are segment ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentenceIds {
    pub text: String,
    pub citations: Vec<String>,
}

/// One line of a TREC RAG 2024 AG/RAG output file, fields in the guidelines' order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag24Answer {
    pub run_id: String,
    pub topic_id: String,
    pub topic: String,
    pub references: Vec<String>,
    pub response_length: usize,
    pub answer: Vec<Sentence>,
}

impl Rag24Answer {
    /// Builds an answer, computing `response_length` the way the organizers count words.
    pub fn new(
        run_id: &str,
        topic: &Topic,
        references: Vec<String>,
        answer: Vec<Sentence>,
    ) -> Self {
        let response_length =
            words::trec_rag_response_length(answer.iter().map(|s| s.text.as_str()));
        Rag24Answer {
            run_id: run_id.to_string(),
            topic_id: topic.id.clone(),
            topic: topic.text.clone(),
            references,
            response_length,
            answer,
        }
    }
}

/// `metadata` of a 2025 answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag25Metadata {
    pub team_id: String,
    pub run_id: String,
    /// `automatic` or `manual`.
    #[serde(rename = "type")]
    pub run_type: String,
}

/// One line of a TREC RAG 2025 Format 1 file (citations are indices into `references`, each
/// sentence's citations sorted from highest to lowest support).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag25Answer {
    pub metadata: Rag25Metadata,
    pub narrative_id: String,
    pub narrative: String,
    pub references: Vec<String>,
    pub response_length: usize,
    pub answer: Vec<Sentence>,
}

/// One line of a TREC RAG 2025 Format 2 file (citations are segment ids; no `references`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag25AnswerIds {
    pub metadata: Rag25Metadata,
    pub narrative_id: String,
    pub narrative: String,
    pub response_length: usize,
    pub answer: Vec<SentenceIds>,
}

/// `metadata` in the layout of the organizers' 2025 tooling (Ragnarök's
/// `convert_to_trec25_format.py` output, required by `check_trec_rag25_gen.py`): the
/// narrative id and text move into `metadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag25CheckerMetadata {
    pub team_id: String,
    pub run_id: String,
    #[serde(rename = "type")]
    pub run_type: String,
    pub narrative_id: String,
    pub narrative: String,
}

/// A Format 1 answer in the organizers' checker layout (see [`Rag25CheckerMetadata`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag25AnswerCheckerLayout {
    pub metadata: Rag25CheckerMetadata,
    pub references: Vec<String>,
    pub response_length: usize,
    pub answer: Vec<Sentence>,
}

/// Orders citations from highest to lowest support (ties keep their given order; NaN last), as
/// 2025 asks: "sorted from highest to lowest citation support".
pub fn sort_by_support<T>(cited: Vec<(T, f64)>) -> Vec<T> {
    let mut cited = cited;
    cited.sort_by(|a, b| {
        let ka = if a.1.is_nan() { f64::NEG_INFINITY } else { a.1 };
        let kb = if b.1.is_nan() { f64::NEG_INFINITY } else { b.1 };
        kb.total_cmp(&ka)
    });
    cited.into_iter().map(|(c, _)| c).collect()
}

impl Rag25Answer {
    /// Builds a Format 1 answer; each sentence's citations come with their support and are
    /// sorted by it.
    pub fn new(
        metadata: Rag25Metadata,
        topic: &Topic,
        references: Vec<String>,
        sentences: Vec<(String, Vec<(usize, f64)>)>,
    ) -> Self {
        let answer: Vec<Sentence> = sentences
            .into_iter()
            .map(|(text, cites)| Sentence {
                text,
                citations: sort_by_support(cites),
            })
            .collect();
        Rag25Answer {
            metadata,
            narrative_id: topic.id.clone(),
            narrative: topic.text.clone(),
            references,
            response_length: words::trec_rag_response_length(
                answer.iter().map(|s| s.text.as_str()),
            ),
            answer,
        }
    }

    /// The same answer in the organizers' checker layout. The guidelines put `narrative_id`
    /// and `narrative` at the top level, but the official 2025 checker rejects a line whose
    /// `metadata` lacks `narrative_id`; this layout satisfies both readers of the file.
    pub fn to_checker_layout(&self) -> Rag25AnswerCheckerLayout {
        Rag25AnswerCheckerLayout {
            metadata: Rag25CheckerMetadata {
                team_id: self.metadata.team_id.clone(),
                run_id: self.metadata.run_id.clone(),
                run_type: self.metadata.run_type.clone(),
                narrative_id: self.narrative_id.clone(),
                narrative: self.narrative.clone(),
            },
            references: self.references.clone(),
            response_length: self.response_length,
            answer: self.answer.clone(),
        }
    }

    /// The same answer in Format 2 (citation indices replaced by segment ids).
    pub fn to_format2(&self) -> Result<Rag25AnswerIds> {
        let answer = self
            .answer
            .iter()
            .map(|s| {
                let citations = s
                    .citations
                    .iter()
                    .map(|&i| {
                        self.references.get(i).cloned().ok_or_else(|| {
                            FormatError::Invalid(format!(
                                "citation {i} outside references ({})",
                                self.references.len()
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(SentenceIds {
                    text: s.text.clone(),
                    citations,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Rag25AnswerIds {
            metadata: self.metadata.clone(),
            narrative_id: self.narrative_id.clone(),
            narrative: self.narrative.clone(),
            response_length: self.response_length,
            answer,
        })
    }
}

/// Which answer layout a file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerFormat {
    Rag24,
    Rag25Format1,
    Rag25Format2,
}

/// Renders answer records as JSONL (one `json.dumps` line each).
pub fn render_jsonl<T: Serialize>(records: &[T]) -> Result<String> {
    let mut out = String::new();
    for r in records {
        out.push_str(&pyjson::to_string(r)?);
        out.push('\n');
    }
    Ok(out)
}

/// Renders, validates (against `topics` when given) and atomically writes an answer file.
/// Refuses to write when the validator finds an error.
pub fn write_answers<T: Serialize>(
    path: &Path,
    records: &[T],
    format: AnswerFormat,
    topics: Option<&[Topic]>,
    ctx: &ValidationContext,
) -> Result<()> {
    let text = render_jsonl(records)?;
    let report = validate_answers_text(&text, format, topics, ctx);
    if report.has_errors() {
        return Err(FormatError::Invalid(report.error_summary()));
    }
    atomic::write_atomic(path, text.as_bytes())
}

/// Validates a TREC RAG answer JSONL text. Checks (each with its source in the report
/// documentation): JSON per line, field presence and types, one run id (and team id), topic
/// ids and texts against the official topics, one answer per topic, references (at most 20,
/// MS MARCO v2.1 segment ids, no duplicates, in the collection), citations (integers within
/// `references` for 2024/Format 1, segment ids for Format 2, no duplicates), the 400-word limit
/// and `response_length` equal to the organizers' word count.
pub fn validate_answers_text(
    text: &str,
    format: AnswerFormat,
    topics: Option<&[Topic]>,
    ctx: &ValidationContext,
) -> Report {
    let mut report = Report::default();
    let official: Option<HashMap<&str, &str>> = topics.map(|ts| {
        ts.iter()
            .map(|t| (t.id.as_str(), t.text.as_str()))
            .collect()
    });
    let mut run = RunIdentity::default();
    for (line, l) in numbered_lines(text) {
        if l.trim().is_empty() {
            report.error(line, "empty line");
            continue;
        }
        let v: Value = match serde_json::from_str(l) {
            Ok(v) => v,
            Err(e) => {
                report.error(line, format!("invalid JSON: {}", json_error_line(&e).1));
                continue;
            }
        };
        let Some(obj) = v.as_object() else {
            report.error(line, "expected a JSON object");
            continue;
        };
        let mut rec = RecordCheck {
            line,
            report: &mut report,
        };
        let topic = check_identity(&mut rec, format, obj, &mut run);
        check_topic(&mut rec, &topic, official.as_ref(), &mut run.seen_topics);
        let references = check_references(&mut rec, format, obj, ctx);
        check_answer(&mut rec, format, obj, references.as_deref(), ctx);
    }
    if let Some(ts) = topics {
        for t in ts {
            if !run.seen_topics.contains_key(&t.id) {
                report.warning(0, format!("no answer for topic {:?}", t.id));
            }
        }
    }
    report
}

/// What every line of one answer file must agree on, and the topics answered so far.
#[derive(Default)]
struct RunIdentity {
    run_id: Option<String>,
    team_id: Option<String>,
    /// Topic id -> line of its answer.
    seen_topics: HashMap<String, usize>,
}

/// The topic a line answers, under the field names of its format.
struct AnsweredTopic {
    id_key: &'static str,
    text_key: &'static str,
    id: Option<String>,
    text: Option<String>,
}

/// Run id (and team id), and the topic (2024) or narrative (2025) the line answers.
fn check_identity(
    rec: &mut RecordCheck,
    format: AnswerFormat,
    obj: &Map<String, Value>,
    run: &mut RunIdentity,
) -> AnsweredTopic {
    if format == AnswerFormat::Rag24 {
        let rid = rec.string(obj, "run_id", "");
        check_same(rec, &mut run.run_id, rid, "run_id");
        return AnsweredTopic {
            id_key: "topic_id",
            text_key: "topic",
            id: rec.string(obj, "topic_id", ""),
            text: rec.string(obj, "topic", ""),
        };
    }
    let md = obj.get("metadata").and_then(Value::as_object);
    if md.is_none() {
        rec.error("`metadata` must be an object with team_id, run_id and type");
    }
    let empty = Map::new();
    let md = md.unwrap_or(&empty);
    if obj.contains_key("metadata") {
        let team = rec.string(md, "team_id", "metadata.");
        check_same(rec, &mut run.team_id, team, "metadata.team_id");
        let rid = rec.string(md, "run_id", "metadata.");
        check_same(rec, &mut run.run_id, rid, "metadata.run_id");
        match md.get("type") {
            None => rec.warning("`metadata.type` is missing (manual or automatic)"),
            Some(Value::String(t)) if t == "automatic" || t == "manual" => {}
            Some(t) => rec.error(format!(
                "`metadata.type` must be \"automatic\" or \"manual\", found {t}"
            )),
        }
    }
    // The guidelines put narrative_id/narrative at the top level; the organizers'
    // baseline and checker put them in metadata. Either is accepted.
    let id = match obj.get("narrative_id").or_else(|| md.get("narrative_id")) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => Some(n.to_string()),
        Some(other) => {
            rec.error(format!("`narrative_id` must be a string, found {other}"));
            None
        }
        None => {
            rec.error("missing `narrative_id`");
            None
        }
    };
    let text = match obj.get("narrative").or_else(|| md.get("narrative")) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            rec.error(format!("`narrative` must be a string, found {other}"));
            None
        }
        None => {
            rec.warning("missing `narrative`");
            None
        }
    };
    AnsweredTopic {
        id_key: "narrative_id",
        text_key: "narrative",
        id,
        text,
    }
}

/// The topic is an official one, with its official text, answered once.
fn check_topic(
    rec: &mut RecordCheck,
    topic: &AnsweredTopic,
    official: Option<&HashMap<&str, &str>>,
    seen_topics: &mut HashMap<String, usize>,
) {
    let Some(tid) = &topic.id else {
        return;
    };
    if let Some(off) = official {
        match off.get(tid.as_str()) {
            None => rec.error(format!("unknown topic ({} {tid:?})", topic.id_key)),
            Some(official_text) => {
                if let Some(t) = &topic.text {
                    if t != official_text {
                        rec.error(format!(
                            "`{}` does not match the official text of topic {tid:?}",
                            topic.text_key
                        ));
                    }
                }
            }
        }
    }
    if let Some(first) = seen_topics.get(tid) {
        rec.error(format!(
            "second answer for topic {tid:?} (first on line {first})"
        ));
    } else {
        seen_topics.insert(tid.clone(), rec.line);
    }
}

/// `references`: at most 20 MS MARCO v2.1 segment ids, no duplicates, in the collection.
fn check_references(
    rec: &mut RecordCheck,
    format: AnswerFormat,
    obj: &Map<String, Value>,
    ctx: &ValidationContext,
) -> Option<Vec<String>> {
    let items = match (format, obj.get("references")) {
        (AnswerFormat::Rag25Format2, None) => return None,
        (_, None) => {
            rec.error("missing `references`");
            return None;
        }
        (_, Some(Value::Array(items))) => items,
        (_, Some(other)) => {
            rec.error(format!(
                "`references` must be an array, found {}",
                kind(other)
            ));
            return None;
        }
    };
    let mut refs = Vec::new();
    let mut seen = HashSet::new();
    for (i, r) in items.iter().enumerate() {
        let Some(r) = r.as_str() else {
            rec.error(format!("references[{i}] must be a string"));
            continue;
        };
        if !MARCO_SEGMENT.is_match(r) {
            rec.rule_of_2024(
                format,
                format!("references[{i}] {r:?} is not an MS MARCO v2.1 segment id"),
            );
        }
        if !seen.insert(r) {
            rec.rule_of_2024(format, format!("references[{i}] {r:?} is a duplicate"));
        }
        if !ctx.knows(r) {
            rec.error(format!("references[{i}] {r:?} is not in the collection"));
        }
        refs.push(r.to_string());
    }
    if items.len() > MAX_REFERENCES {
        rec.error(format!(
            "{} references (at most {MAX_REFERENCES} allowed)",
            items.len()
        ));
    }
    Some(refs)
}

/// Answer sentences, their citations, the word limit and `response_length`.
fn check_answer(
    rec: &mut RecordCheck,
    format: AnswerFormat,
    obj: &Map<String, Value>,
    references: Option<&[String]>,
    ctx: &ValidationContext,
) {
    let mut words = 0usize;
    match obj.get("answer") {
        None => rec.error("missing `answer`"),
        Some(Value::Array(sentences)) => {
            if sentences.is_empty() {
                rec.warning("`answer` has no sentences");
            }
            for (i, s) in sentences.iter().enumerate() {
                let Some(s) = s.as_object() else {
                    rec.error(format!(
                        "answer[{i}] must be an object with text and citations"
                    ));
                    continue;
                };
                match s.get("text") {
                    Some(Value::String(t)) => words += words::trec_rag_sentence_words(t),
                    _ => rec.error(format!("answer[{i}].text is missing or not a string")),
                }
                let Some(Value::Array(cites)) = s.get("citations") else {
                    rec.error(format!("answer[{i}].citations is missing or not an array"));
                    continue;
                };
                check_citations(rec, format, i, cites, references, ctx);
            }
        }
        Some(other) => rec.error(format!("`answer` must be an array, found {}", kind(other))),
    }
    if words > MAX_WORDS {
        rec.rule_of_2024(
            format,
            format!("answer has {words} words (at most {MAX_WORDS})"),
        );
    }
    match obj.get("response_length") {
        Some(Value::Number(n)) if n.is_u64() => {
            let n = n.as_u64().unwrap() as usize;
            if n != words && obj.get("answer").is_some_and(Value::is_array) {
                rec.warning(format!(
                    "response_length {n} differs from the word count {words} (NFKC-normalized, whitespace-split)"
                ));
            }
        }
        Some(other) => rec.error(format!(
            "`response_length` must be a non-negative integer, found {other}"
        )),
        None if format == AnswerFormat::Rag24 => rec.error("missing `response_length`"),
        None => rec.warning("missing `response_length`"),
    }
}

fn check_citations(
    rec: &mut RecordCheck,
    format: AnswerFormat,
    i: usize,
    cites: &[Value],
    references: Option<&[String]>,
    ctx: &ValidationContext,
) {
    let mut seen = HashSet::new();
    for c in cites {
        match format {
            AnswerFormat::Rag24 | AnswerFormat::Rag25Format1 => {
                let Some(idx) = c.as_i64() else {
                    rec.error(format!("answer[{i}].citations must be integers (indices into references), found {c}"));
                    continue;
                };
                if let Some(refs) = references {
                    if idx < 0 || idx as usize >= refs.len() {
                        rec.error(format!(
                            "answer[{i}] cites {idx}, outside references (0..{})",
                            refs.len()
                        ));
                    }
                }
                if !seen.insert(c.to_string()) {
                    rec.warning(format!("answer[{i}] cites {idx} twice"));
                }
            }
            AnswerFormat::Rag25Format2 => {
                let Some(id) = c.as_str() else {
                    rec.error(format!(
                        "answer[{i}].citations must be segment ids (strings), found {c}"
                    ));
                    continue;
                };
                if let Some(refs) = references {
                    if !refs.iter().any(|r| r == id) {
                        rec.error(format!(
                            "answer[{i}] cites {id:?}, which is not in references"
                        ));
                    }
                }
                if !MARCO_SEGMENT.is_match(id) {
                    rec.warning(format!(
                        "answer[{i}] cites {id:?}, not an MS MARCO v2.1 segment id"
                    ));
                }
                if !ctx.knows(id) {
                    rec.error(format!(
                        "answer[{i}] cites {id:?}, which is not in the collection"
                    ));
                }
                if !seen.insert(id.to_string()) {
                    rec.warning(format!("answer[{i}] cites {id:?} twice"));
                }
            }
        }
    }
}

fn check_same(
    rec: &mut RecordCheck,
    first: &mut Option<String>,
    value: Option<String>,
    field: &str,
) {
    if let Some(v) = value {
        match first {
            None => *first = Some(v),
            Some(f) if *f != v => rec.error(format!(
                "`{field}` {v:?} differs from {f:?} on the first line"
            )),
            _ => {}
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

struct RecordCheck<'a> {
    line: usize,
    report: &'a mut Report,
}

impl RecordCheck<'_> {
    fn error(&mut self, m: impl Into<String>) {
        self.report.error(self.line, m);
    }

    fn warning(&mut self, m: impl Into<String>) {
        self.report.warning(self.line, m);
    }

    /// A rule TREC RAG 2024 enforces and 2025 only warns about.
    fn rule_of_2024(&mut self, format: AnswerFormat, m: impl Into<String>) {
        if format == AnswerFormat::Rag24 {
            self.error(m)
        } else {
            self.warning(m)
        }
    }

    /// A required string field; reports and returns None when absent or not a string.
    fn string(
        &mut self,
        obj: &serde_json::Map<String, Value>,
        key: &str,
        prefix: &str,
    ) -> Option<String> {
        match obj.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                self.error(format!(
                    "`{prefix}{key}` must be a string, found {}",
                    kind(other)
                ));
                None
            }
            None => {
                self.error(format!("missing `{prefix}{key}`"));
                None
            }
        }
    }
}

/// Validates an answer file (plain or `.gz`).
pub fn validate_answers_file(
    path: &Path,
    format: AnswerFormat,
    topics: Option<&[Topic]>,
    ctx: &ValidationContext,
) -> Result<Report> {
    Ok(validate_answers_text(
        &read_text(path)?,
        format,
        topics,
        ctx,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn support_order_is_descending_and_stable() {
        assert_eq!(
            sort_by_support(vec![(3, 0.2), (1, 0.9), (7, 0.2), (2, f64::NAN)]),
            vec![1, 3, 7, 2]
        );
    }

    #[test]
    fn format2_maps_indices_to_ids() {
        let topic = Topic {
            line: 1,
            id: "1".into(),
            text: "n".into(),
        };
        let md = Rag25Metadata {
            team_id: "t".into(),
            run_id: "r".into(),
            run_type: "automatic".into(),
        };
        let a = Rag25Answer::new(
            md,
            &topic,
            vec!["a".into(), "b".into()],
            vec![("One two.".into(), vec![(0, 0.1), (1, 0.8)])],
        );
        assert_eq!(a.answer[0].citations, vec![1, 0]);
        assert_eq!(a.response_length, 2);
        let f2 = a.to_format2().unwrap();
        assert_eq!(
            f2.answer[0].citations,
            vec!["b".to_string(), "a".to_string()]
        );
    }
}
