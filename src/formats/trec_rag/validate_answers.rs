//! What a TREC RAG answer file must satisfy: the 2024 guidelines and the 2025 organizers'
//! checkers, each problem reported with its line.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use once_cell::sync::Lazy;
use regex::Regex;
use serde_json::{Map, Value};

use super::{AnswerFormat, Topic, MAX_REFERENCES, MAX_WORDS};
use crate::formats::validate::{Report, ValidationContext};
use crate::formats::{json_error_line, numbered_lines, read_text, words, Result};

/// MS MARCO v2.1 segment id, the pattern the organizers' checkers use.
static MARCO_SEGMENT: Lazy<Regex> =
    Lazy::new(|| Regex::new(r"^msmarco_v2\.1_doc_\d+_\d+#\d+_\d+$").unwrap());

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
