//! SCAI-QReCC-21: `questions.json` (and the `-rewritten` variant) in, `run.json` out.
//!
//! Input: `[{"Conversation_no": <number>, "Turn_no": X, "Question": "..."}, ...]`. Output: the
//! same keys plus the optional `Model_rewrite`, `Model_passages` (`{passage id: score}`) and
//! `Model_answer` ("all Model_xxx-fields are optional and you can omit them"). TIRA calls the
//! software with an input directory holding `questions.json` and an output directory that must
//! receive `run.json`.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::validate::{Report, ValidationContext};
use super::{atomic, key_lines, parse_json_document, pyjson, read_text, FormatError, Result};

/// One question.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// Best-effort 1-based line of the record.
    pub line: usize,
    pub conversation_no: u64,
    pub turn_no: u64,
    pub question: String,
}

impl Question {
    /// `<Conversation_no>_<Turn_no>`, the id the qrels use.
    pub fn key(&self) -> String {
        format!("{}_{}", self.conversation_no, self.turn_no)
    }
}

/// Reads `questions.json` (or `questions-rewritten.json`). Questions come back in file order.
pub fn read_questions(path: &Path) -> Result<Vec<Question>> {
    let text = read_text(path)?;
    let doc = parse_json_document(path, &text)?;
    let Value::Array(items) = doc else {
        return Err(FormatError::parse(
            path,
            1,
            "expected a JSON array of questions",
        ));
    };
    let lines = record_lines(&text, items.len());
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let line = lines[i];
        let err = |m: String| FormatError::parse(path, line, format!("record #{}: {m}", i + 1));
        let obj = item
            .as_object()
            .ok_or_else(|| err("expected an object".into()))?;
        let int = |k: &str| {
            obj.get(k)
                .and_then(Value::as_u64)
                .ok_or_else(|| err(format!("`{k}` must be a non-negative integer")))
        };
        let q = Question {
            line,
            conversation_no: int("Conversation_no")?,
            turn_no: int("Turn_no")?,
            question: obj
                .get("Question")
                .and_then(Value::as_str)
                .ok_or_else(|| err("missing `Question` string".into()))?
                .to_string(),
        };
        if !seen.insert(q.key()) {
            return Err(err(format!("duplicate turn {}", q.key())));
        }
        out.push(q);
    }
    Ok(out)
}

/// Best-effort line of each record: the line of its `Conversation_no` key.
fn record_lines(text: &str, n: usize) -> Vec<usize> {
    let mut lines = key_lines(text, "Conversation_no");
    lines.resize(n.max(lines.len()), 1);
    lines
}

/// One turn of a run. Optional fields are omitted when `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct QreccAnswer {
    pub conversation_no: u64,
    pub turn_no: u64,
    pub model_rewrite: Option<String>,
    /// Passage id → score, written in this order (best first).
    pub model_passages: Option<Vec<(String, f64)>>,
    pub model_answer: Option<String>,
}

struct PassageMap<'a>(&'a [(String, f64)]);

impl Serialize for PassageMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (id, score) in self.0 {
            m.serialize_entry(id, score)?;
        }
        m.end()
    }
}

impl Serialize for QreccAnswer {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let n = 2
            + usize::from(self.model_rewrite.is_some())
            + usize::from(self.model_passages.is_some())
            + usize::from(self.model_answer.is_some());
        let mut st = s.serialize_struct("QreccAnswer", n)?;
        st.serialize_field("Conversation_no", &self.conversation_no)?;
        st.serialize_field("Turn_no", &self.turn_no)?;
        if let Some(r) = &self.model_rewrite {
            st.serialize_field("Model_rewrite", r)?;
        }
        if let Some(p) = &self.model_passages {
            st.serialize_field("Model_passages", &PassageMap(p))?;
        }
        if let Some(a) = &self.model_answer {
            st.serialize_field("Model_answer", a)?;
        }
        st.end()
    }
}

/// The run as JSON text (Python `json.dumps` form, newline-terminated). Fails on a passage id
/// given twice for one turn (a JSON object cannot hold it).
pub fn render_run(answers: &[QreccAnswer]) -> Result<String> {
    for a in answers {
        if let Some(p) = &a.model_passages {
            let mut ids = HashSet::new();
            if let Some((id, _)) = p.iter().find(|(id, _)| !ids.insert(id.as_str())) {
                return Err(FormatError::Invalid(format!(
                    "passage {id} twice in Model_passages of turn {}_{}",
                    a.conversation_no, a.turn_no
                )));
            }
        }
    }
    let mut s = pyjson::to_string(answers)?;
    s.push('\n');
    Ok(s)
}

/// Renders, validates and writes `run.json` atomically.
pub fn write_run(
    path: &Path,
    answers: &[QreccAnswer],
    questions: Option<&[Question]>,
    ctx: &ValidationContext,
) -> Result<()> {
    let text = render_run(answers)?;
    let report = validate_run_text(&text, questions, ctx);
    report.check()?;
    atomic::write_atomic(path, text.as_bytes())
}

/// The TIRA convention: read `INPUT_DIR/questions.json`, and the path of `OUTPUT_DIR/run.json`.
pub fn tira_paths(input_dir: &Path, output_dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    (
        input_dir.join("questions.json"),
        output_dir.join("run.json"),
    )
}

/// Validates `run.json` text: an array of objects with integer `Conversation_no` and `Turn_no`,
/// optional `Model_rewrite` (string), `Model_passages` (object of finite numbers),
/// `Model_answer` (string), `Model_evidence`; no duplicate turns; with the questions, no turn
/// outside them (errors) and every question answered (warnings).
pub fn validate_run_text(
    text: &str,
    questions: Option<&[Question]>,
    ctx: &ValidationContext,
) -> Report {
    let mut report = Report::default();
    let Some(doc) = super::parse_document(text, &mut report) else {
        return report;
    };
    let Some(items) = doc.as_array() else {
        report.error(1, "run.json must be a JSON array");
        return report;
    };
    let lines = record_lines(text, items.len());
    let known: Option<HashSet<String>> = questions.map(|qs| qs.iter().map(Question::key).collect());
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let line = lines[i];
        let at = format!("record #{}", i + 1);
        let Some(obj) = item.as_object() else {
            report.error(line, format!("{at} must be an object"));
            continue;
        };
        let conv = obj.get("Conversation_no").and_then(Value::as_u64);
        let turn = obj.get("Turn_no").and_then(Value::as_u64);
        if conv.is_none() {
            report.error(
                line,
                format!("{at}: `Conversation_no` must be a non-negative integer"),
            );
        }
        if turn.is_none() {
            report.error(
                line,
                format!("{at}: `Turn_no` must be a non-negative integer"),
            );
        }
        if let (Some(c), Some(t)) = (conv, turn) {
            let key = format!("{c}_{t}");
            if let Some(first) = seen.insert(key.clone(), line) {
                report.error(
                    line,
                    format!("{at}: turn {key} appears twice (first on line {first})"),
                );
            }
            if known.as_ref().is_some_and(|k| !k.contains(&key)) {
                report.error(line, format!("{at}: turn {key} is not among the questions"));
            }
        }
        for k in obj.keys() {
            if !matches!(
                k.as_str(),
                "Conversation_no"
                    | "Turn_no"
                    | "Model_rewrite"
                    | "Model_passages"
                    | "Model_answer"
                    | "Model_evidence"
            ) {
                report.warning(line, format!("{at}: unknown field `{k}`"));
            }
        }
        for k in ["Model_rewrite", "Model_answer"] {
            if let Some(v) = obj.get(k) {
                if !v.is_string() {
                    report.error(line, format!("{at}: `{k}` must be a string"));
                }
            }
        }
        match obj.get("Model_passages") {
            None => {}
            Some(Value::Object(m)) => {
                for (id, score) in m {
                    if !score.is_number() {
                        report.error(
                            line,
                            format!(
                                "{at}: score of passage {id:?} must be a number, found {score}"
                            ),
                        );
                    }
                    if !ctx.knows(id) {
                        report.error(
                            line,
                            format!("{at}: passage {id:?} is not in the collection"),
                        );
                    }
                }
            }
            Some(other) => report.error(
                line,
                format!("{at}: `Model_passages` must be an object {{id: score}}, found {other}"),
            ),
        }
    }
    if let Some(qs) = questions {
        for q in qs {
            if !seen.contains_key(&q.key()) {
                report.warning(0, format!("no answer for turn {}", q.key()));
            }
        }
    }
    report
}

/// Validates a `run.json` file.
pub fn validate_run_file(
    path: &Path,
    questions: Option<&[Question]>,
    ctx: &ValidationContext,
) -> Result<Report> {
    Ok(validate_run_text(&read_text(path)?, questions, ctx))
}
