//! TREC iKAT: topics (2023 layout with string numbers such as `9-1`, 2024 with integer numbers,
//! 2025 with a PTKB list and `responses`), the run JSON with its validator, the conversion to a
//! TREC run, and what each run type may see of a conversation.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::trec_run::{RankedList, TrecRunWriter};
use super::validate::{Report, ValidationContext};
use super::{
    atomic, key_lines, parse_json_document, pyjson, read_text, words, FormatError, Result,
};

/// Largest `passage_provenance` list per response ("up to 1000 passages -- less is ok but not more").
pub const MAX_PROVENANCE: usize = 1000;
/// Longest response text, in spaCy whitespace-tokenizer tokens.
pub const MAX_RESPONSE_WORDS: usize = 250;

/// One topic × persona entry.
#[derive(Debug, Clone, PartialEq)]
pub struct IkatTopic {
    /// Best-effort 1-based line of the entry.
    pub line: usize,
    /// `9-1` (2023, 2025) or `0` (2024, written as an integer there).
    pub number: String,
    pub title: String,
    /// PTKB statements as (id, text); ids are the JSON keys (2023/2024) or 1-based positions (2025).
    pub ptkb: Vec<(String, String)>,
    pub turns: Vec<IkatTurn>,
}

/// One turn of a topic.
#[derive(Debug, Clone, PartialEq)]
pub struct IkatTurn {
    pub line: usize,
    /// The turn's number within its topic: an integer in iKAT and CAsT 2019/2020, `1-1`
    /// (branch-turn) in CAsT 2022.
    pub turn_id: String,
    pub utterance: String,
    pub resolved_utterance: Option<String>,
    /// The canonical system response (visible to later turns).
    pub response: Option<String>,
    /// Ids of the relevant PTKB statements (manual runs only).
    pub ptkb_provenance: Vec<String>,
    pub response_provenance: Vec<String>,
}

/// Every turn of `topics` once, as (topic, turn index): a CAsT 2022 topic tree is read as one
/// conversation per branch, and branches share their opening turns.
pub fn distinct_turns(topics: &[IkatTopic]) -> impl Iterator<Item = (&IkatTopic, usize)> {
    let mut seen = std::collections::HashSet::new();
    topics
        .iter()
        .flat_map(|t| (0..t.turns.len()).map(move |i| (t, i)))
        .filter(move |(t, i)| seen.insert(t.turn_key(&t.turns[*i])))
}

impl IkatTopic {
    /// The run/qrels turn id: `<number>_<turn_id>`.
    pub fn turn_key(&self, turn: &IkatTurn) -> String {
        format!("{}_{}", self.number, turn.turn_id)
    }
}

/// The three submission classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunType {
    Automatic,
    Manual,
    OnlyResponse,
}

impl RunType {
    pub fn as_str(self) -> &'static str {
        match self {
            RunType::Automatic => "automatic",
            RunType::Manual => "manual",
            RunType::OnlyResponse => "only_response",
        }
    }
}

/// What a system may use to answer one turn under a run type's rules.
#[derive(Debug, Clone, PartialEq)]
pub struct VisibleContext<'a> {
    pub utterance: &'a str,
    /// Earlier turns: (utterance, canonical response). Never the current turn's response nor
    /// anything from later turns.
    pub history: Vec<(&'a str, Option<&'a str>)>,
    /// The full PTKB (every run type gets it).
    pub ptkb: &'a [(String, String)],
    /// Manual runs only: the manually resolved utterance of the current turn.
    pub resolved_utterance: Option<&'a str>,
    /// Manual runs only: ground-truth relevant PTKB ids of the current and previous turns.
    pub ptkb_provenance: Option<Vec<&'a str>>,
}

impl IkatTopic {
    /// The context of turn `index` that a run of `run_type` may use. Automatic runs (and
    /// only_response runs, which take a given ranking) see the utterances and the canonical
    /// responses of earlier turns and the PTKB; manual runs may also use `resolved_utterance`
    /// and the `ptkb_provenance` of the current and earlier turns.
    pub fn visible_context(&self, index: usize, run_type: RunType) -> Option<VisibleContext<'_>> {
        let turn = self.turns.get(index)?;
        let history = self.turns[..index]
            .iter()
            .map(|t| (t.utterance.as_str(), t.response.as_deref()))
            .collect();
        let manual = run_type == RunType::Manual;
        Some(VisibleContext {
            utterance: &turn.utterance,
            history,
            ptkb: &self.ptkb,
            resolved_utterance: if manual {
                turn.resolved_utterance.as_deref()
            } else {
                None
            },
            ptkb_provenance: manual.then(|| {
                self.turns[..=index]
                    .iter()
                    .flat_map(|t| t.ptkb_provenance.iter().map(String::as_str))
                    .collect()
            }),
        })
    }
}

/// The layout of an iKAT topics file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TopicsLayout {
    /// `number` strings (`9-1`), a `ptkb` object, `turns` with `utterance` and `ptkb_provenance`
    /// ids.
    #[serde(rename = "2023")]
    Y2023,
    /// As 2023 with integer `number`s.
    #[serde(rename = "2024")]
    Y2024,
    /// A `ptkb` list, `responses` with `user_utterance` and `relevant_ptkbs` statement texts.
    #[serde(rename = "2025")]
    Y2025,
}

/// Reads an iKAT topics file (2023, 2024 or 2025 layout).
pub fn read_topics(path: &Path) -> Result<Vec<IkatTopic>> {
    Ok(read_topics_with_layout(path)?.0)
}

/// Reads an iKAT topics file and tells its layout (from its first topic).
pub fn read_topics_with_layout(path: &Path) -> Result<(Vec<IkatTopic>, TopicsLayout)> {
    let text = read_text(path)?;
    parse_topics(path, &text)
}

/// The layout a topic entry is written in.
fn layout_of(entry: &Value) -> TopicsLayout {
    if entry.get("responses").is_some() || entry.get("ptkb").is_some_and(Value::is_array) {
        TopicsLayout::Y2025
    } else if entry.get("number").is_some_and(Value::is_number) {
        TopicsLayout::Y2024
    } else {
        TopicsLayout::Y2023
    }
}

/// Parses the text of an iKAT topics file read from `path` (named in errors).
pub fn parse_topics(path: &Path, text: &str) -> Result<(Vec<IkatTopic>, TopicsLayout)> {
    let doc = parse_json_document(path, text)?;
    let Value::Array(entries) = doc else {
        return Err(FormatError::parse(
            path,
            1,
            "expected a JSON array of topics",
        ));
    };
    let layout = entries.first().map_or(TopicsLayout::Y2024, layout_of);
    let topic_lines = key_lines(text, "number");
    let turn_lines = key_lines(text, "turn_id");
    let mut turn_index = 0;
    let mut out = Vec::new();
    let mut keys = HashSet::new();
    for (i, e) in entries.iter().enumerate() {
        let line = topic_lines.get(i).copied().unwrap_or(1);
        let err = |m: String| FormatError::parse(path, line, format!("topic #{}: {m}", i + 1));
        let obj = e
            .as_object()
            .ok_or_else(|| err("expected an object".into()))?;
        let number = match obj.get("number") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) if n.is_u64() => n.to_string(),
            _ => {
                return Err(err(
                    "`number` must be a non-empty string or a non-negative integer".into(),
                ))
            }
        };
        let title = obj
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let ptkb: Vec<(String, String)> = match obj.get("ptkb") {
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect::<Option<_>>()
                .ok_or_else(|| err("PTKB statements must be strings".into()))?,
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(j, v)| v.as_str().map(|s| ((j + 1).to_string(), s.to_string())))
                .collect::<Option<_>>()
                .ok_or_else(|| err("PTKB statements must be strings".into()))?,
            None => Vec::new(),
            Some(_) => return Err(err("`ptkb` must be an object or an array".into())),
        };
        let mut ptkb = ptkb;
        // JSON object keys come back sorted as strings; order them numerically when they are numbers.
        ptkb.sort_by_key(|(k, _)| k.parse::<u64>().unwrap_or(u64::MAX));
        let turns_v = obj
            .get("turns")
            .or_else(|| obj.get("responses"))
            .and_then(Value::as_array)
            .ok_or_else(|| err("missing `turns` (or `responses`) array".into()))?;
        let mut turns = Vec::new();
        for (j, t) in turns_v.iter().enumerate() {
            let tline = turn_lines.get(turn_index).copied().unwrap_or(line);
            turn_index += 1;
            let terr = |m: String| {
                FormatError::parse(path, tline, format!("topic {number} turn #{}: {m}", j + 1))
            };
            let t = t
                .as_object()
                .ok_or_else(|| terr("expected an object".into()))?;
            let turn = parse_turn(t, &ptkb).map_err(terr)?;
            if !keys.insert(format!("{number}_{}", turn.turn_id)) {
                return Err(terr(format!("duplicate turn {number}_{}", turn.turn_id)));
            }
            turns.push(IkatTurn {
                line: tline,
                ..turn
            });
        }
        out.push(IkatTopic {
            line,
            number,
            title,
            ptkb,
            turns,
        });
    }
    Ok((out, layout))
}

fn parse_turn(
    t: &Map<String, Value>,
    ptkb: &[(String, String)],
) -> std::result::Result<IkatTurn, String> {
    let turn_id = t
        .get("turn_id")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or("`turn_id` must be a non-negative integer")?
        .to_string();
    let utterance = t
        .get("utterance")
        .or_else(|| t.get("user_utterance"))
        .and_then(Value::as_str)
        .ok_or("missing `utterance` string")?
        .to_string();
    let opt_str = |k: &str| -> std::result::Result<Option<String>, String> {
        match t.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{k}` must be a string")),
        }
    };
    let ptkb_provenance = if let Some(v) = t.get("ptkb_provenance") {
        v.as_array()
            .ok_or("`ptkb_provenance` must be an array")?
            .iter()
            .map(|x| match x {
                Value::Number(n) if n.is_u64() => Ok(n.to_string()),
                Value::String(s) => Ok(s.clone()),
                _ => Err(format!("invalid PTKB id {x}")),
            })
            .collect::<std::result::Result<Vec<_>, _>>()?
    } else if let Some(v) = t.get("relevant_ptkbs") {
        // 2025: statements are given by their text.
        v.as_array()
            .ok_or("`relevant_ptkbs` must be an array")?
            .iter()
            .map(|x| {
                let s = x
                    .as_str()
                    .ok_or("relevant PTKB statements must be strings")?;
                ptkb.iter()
                    .find(|(_, text)| text == s)
                    .map(|(id, _)| id.clone())
                    .ok_or_else(|| format!("relevant statement {s:?} is not in the PTKB"))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let response_provenance = match t.get("response_provenance").or_else(|| t.get("citations")) {
        None => Vec::new(),
        Some(v) => v
            .as_array()
            .and_then(|a| {
                a.iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or("`response_provenance` must be an array of passage ids")?,
    };
    Ok(IkatTurn {
        line: 0,
        turn_id,
        utterance,
        resolved_utterance: opt_str("resolved_utterance")?,
        response: opt_str("response")?,
        ptkb_provenance,
        response_provenance,
    })
}

/// One provenance passage of a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassageProvenance {
    pub id: String,
    /// Absent in only_response runs (the sample has no score there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    pub used: bool,
}

/// One ranked response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IkatResponse {
    pub rank: u32,
    pub text: String,
    /// Relevant PTKB statement ids, most relevant first (may be empty, must be present).
    pub ptkb_provenance: Vec<u32>,
    pub passage_provenance: Vec<PassageProvenance>,
}

/// Responses for one turn, `turn_id` = `<number>_<turn_id>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IkatRunTurn {
    pub turn_id: String,
    pub responses: Vec<IkatResponse>,
}

/// A whole iKAT run, fields in the order of the guidelines' sample submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IkatRun {
    pub run_name: String,
    pub run_type: RunType,
    /// Present for automatic and manual runs (the only_response sample has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_response: Option<bool>,
    pub turns: Vec<IkatRunTurn>,
}

impl IkatRun {
    /// The run as a JSON document (Python `json.dumps` form, newline-terminated).
    pub fn render(&self) -> Result<String> {
        let mut s = pyjson::to_string(self)?;
        s.push('\n');
        Ok(s)
    }

    /// Renders, validates and writes the run atomically; refuses a run with errors.
    pub fn write(
        &self,
        path: &Path,
        topics: Option<&[IkatTopic]>,
        ctx: &ValidationContext,
    ) -> Result<()> {
        let text = self.render()?;
        let report = validate_run_text(&text, topics, ctx);
        report.check()?;
        atomic::write_atomic(path, text.as_bytes())
    }

    /// The passage ranking as TREC run lists: per turn, the unique provenance ids in response
    /// order (first occurrence wins), the first 1000 of them ("only the first 1000 pieces of
    /// unique provenance will be used"), each with its provenance score (or, without scores,
    /// a score that keeps the listed order).
    pub fn to_ranked_lists(&self) -> Vec<RankedList> {
        self.turns
            .iter()
            .map(|t| {
                let mut seen = HashSet::new();
                let mut hits = Vec::new();
                for p in t.responses.iter().flat_map(|r| &r.passage_provenance) {
                    if hits.len() == MAX_PROVENANCE {
                        break;
                    }
                    if seen.insert(p.id.as_str()) {
                        let fallback = (MAX_PROVENANCE - hits.len()) as f64;
                        hits.push((p.id.clone(), p.score.unwrap_or(fallback)));
                    }
                }
                RankedList {
                    topic_id: t.turn_id.clone(),
                    hits,
                }
            })
            .collect()
    }

    /// Writes the passage ranking as a TREC run tagged with `run_name`.
    pub fn write_trec_run(&self, path: &Path) -> Result<()> {
        TrecRunWriter::new(self.run_name.clone(), MAX_PROVENANCE)
            .write(path, &self.to_ranked_lists())
    }
}

const RUN_FIELDS: &[&str] = &["run_name", "run_type", "eval_response", "turns"];
const TURN_FIELDS: &[&str] = &["turn_id", "responses"];
const RESPONSE_FIELDS: &[&str] = &["text", "rank", "passage_provenance", "ptkb_provenance"];
const PROVENANCE_FIELDS: &[&str] = &["id", "text", "score", "used"];

fn unknown_fields(
    report: &mut Report,
    line: usize,
    obj: &Map<String, Value>,
    allowed: &[&str],
    what: &str,
) {
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            report.error(line, format!("unknown field `{k}` in {what}"));
        }
    }
}

/// Validates iKAT run JSON text; lines are best effort (the line of each turn's `turn_id`).
pub fn validate_run_text(
    text: &str,
    topics: Option<&[IkatTopic]>,
    ctx: &ValidationContext,
) -> Report {
    validate_run_text_with(text, topics, ctx, true)
}

/// As [`validate_run_text`]; with `require_passages` false a response may have no passage
/// provenance: a PTKB-only run (`convrag run ikat --stages ptkb,rewrite`), which is an input of
/// `convrag eval ptkb`, not a submission of the passage task.
pub fn validate_run_text_with(
    text: &str,
    topics: Option<&[IkatTopic]>,
    ctx: &ValidationContext,
    require_passages: bool,
) -> Report {
    let mut report = Report::default();
    let Some(doc) = super::parse_document(text, &mut report) else {
        return report;
    };
    let Some(run) = doc.as_object() else {
        report.error(1, "the run must be a JSON object");
        return report;
    };
    let (run_type, eval_response) = check_run_header(&mut report, run);
    let Some(turns) = run.get("turns").and_then(Value::as_array) else {
        report.error(1, "missing `turns` array");
        return report;
    };
    let turn_lines = key_lines(text, "turn_id");
    let expected: Option<HashMap<String, usize>> = topics.map(|ts| {
        ts.iter()
            .flat_map(|t| t.turns.iter().map(move |u| (t.turn_key(u), t.ptkb.len())))
            .collect()
    });
    let mut rules = ResponseRules {
        only_response: run_type == Some(RunType::OnlyResponse),
        eval_response,
        require_passages,
        ptkb_size: None,
        ctx,
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, t) in turns.iter().enumerate() {
        let line = turn_lines.get(i).copied().unwrap_or(1);
        check_turn(
            &mut report,
            line,
            i,
            t,
            expected.as_ref(),
            &mut seen,
            &mut rules,
        );
    }
    if let Some(exp) = &expected {
        let mut missing: Vec<&String> = exp.keys().filter(|k| !seen.contains_key(*k)).collect();
        missing.sort();
        for k in missing {
            report.error(
                0,
                format!("turn {k:?} of the topics is missing from the run"),
            );
        }
    }
    report
}

/// What a response is checked against: the run's header, the caller's rules and the turn's
/// PTKB size (from the topics).
struct ResponseRules<'a> {
    only_response: bool,
    eval_response: Option<bool>,
    require_passages: bool,
    ptkb_size: Option<usize>,
    ctx: &'a ValidationContext,
}

/// `run_name`, `run_type` and `eval_response`: the run type and `eval_response` when valid.
fn check_run_header(
    report: &mut Report,
    run: &Map<String, Value>,
) -> (Option<RunType>, Option<bool>) {
    unknown_fields(report, 1, run, RUN_FIELDS, "the run");
    match run.get("run_name") {
        Some(Value::String(s)) if !s.trim().is_empty() => {}
        Some(Value::String(_)) => report.error(1, "`run_name` is empty"),
        _ => report.error(1, "missing `run_name` string"),
    }
    let run_type = match run.get("run_type").and_then(Value::as_str) {
        Some("automatic") => Some(RunType::Automatic),
        Some("manual") => Some(RunType::Manual),
        Some("only_response") => Some(RunType::OnlyResponse),
        Some(other) => {
            report.error(
                1,
                format!("`run_type` {other:?} is not automatic, manual or only_response"),
            );
            None
        }
        None => {
            report.error(1, "missing `run_type` string");
            None
        }
    };
    let only_response = run_type == Some(RunType::OnlyResponse);
    let eval_response = match run.get("eval_response") {
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            report.error(
                1,
                format!("`eval_response` must be true or false, found {other}"),
            );
            None
        }
        None if !only_response && run_type.is_some() => {
            report.error(
                1,
                "missing `eval_response` (mandatory for automatic and manual runs)",
            );
            None
        }
        None => None,
    };
    (run_type, eval_response)
}

/// Turn `i` of the run, on `line`: its id (well-formed, once, in the topics) and responses.
fn check_turn(
    report: &mut Report,
    line: usize,
    i: usize,
    t: &Value,
    expected: Option<&HashMap<String, usize>>,
    seen: &mut HashMap<String, usize>,
    rules: &mut ResponseRules<'_>,
) {
    let Some(t) = t.as_object() else {
        report.error(line, format!("turns[{i}] must be an object"));
        return;
    };
    unknown_fields(report, line, t, TURN_FIELDS, "a turn");
    let Some(turn_id) = t.get("turn_id").and_then(Value::as_str) else {
        report.error(line, format!("turns[{i}]: missing `turn_id` string"));
        return;
    };
    let well_formed = turn_id.split_once('_').is_some_and(|(topic, n)| {
        !topic.is_empty() && !n.contains('_') && n.parse::<u32>().is_ok()
    });
    if !well_formed {
        report.error(
            line,
            format!("turn_id {turn_id:?} is not `<topic number>_<turn number>`"),
        );
    }
    if let Some(first) = seen.insert(turn_id.to_string(), line) {
        report.error(
            line,
            format!("turn {turn_id:?} appears twice (first on line {first})"),
        );
    }
    rules.ptkb_size = match expected {
        Some(exp) => match exp.get(turn_id) {
            Some(n) => Some(*n),
            None => {
                report.error(line, format!("turn {turn_id:?} is not in the topics"));
                None
            }
        },
        None => None,
    };
    let Some(responses) = t.get("responses").and_then(Value::as_array) else {
        report.error(line, format!("turn {turn_id}: missing `responses` array"));
        return;
    };
    if responses.is_empty() {
        report.warning(line, format!("turn {turn_id} has no response"));
    }
    let mut previous_rank = 0i64;
    for (j, r) in responses.iter().enumerate() {
        let at = format!("turn {turn_id} response #{}", j + 1);
        let Some(r) = r.as_object() else {
            report.error(line, format!("{at} must be an object"));
            continue;
        };
        check_response(report, line, &at, r, &mut previous_rank, rules);
    }
}

/// One response (`at` names it): rank, text, PTKB and passage provenance.
fn check_response(
    report: &mut Report,
    line: usize,
    at: &str,
    r: &Map<String, Value>,
    previous_rank: &mut i64,
    rules: &ResponseRules<'_>,
) {
    unknown_fields(report, line, r, RESPONSE_FIELDS, "a response");
    match r.get("rank").and_then(Value::as_i64) {
        Some(rank) if rank >= 1 => {
            if rank <= *previous_rank {
                report.warning(
                    line,
                    format!("{at}: rank {rank} does not increase (previous {previous_rank})"),
                );
            }
            *previous_rank = rank;
        }
        Some(rank) => report.warning(line, format!("{at}: rank {rank} must be at least 1")),
        None => report.warning(line, format!("{at}: missing integer `rank`")),
    }
    match r.get("text") {
        Some(Value::String(s)) => {
            if s.is_empty() && !rules.only_response && rules.eval_response != Some(false) {
                report.warning(line, format!("{at}: empty `text`"));
            }
            let n = words::spacy_whitespace_tokens(s);
            if n > MAX_RESPONSE_WORDS {
                report.error(
                    line,
                    format!(
                        "{at}: text has {n} words (spaCy tokenizer), at most {MAX_RESPONSE_WORDS}"
                    ),
                );
            }
        }
        _ => report.error(
            line,
            format!("{at}: missing `text` string (mandatory, may be empty)"),
        ),
    }
    check_ptkb_provenance(report, line, at, r.get("ptkb_provenance"), rules.ptkb_size);
    let Some(prov) = r.get("passage_provenance").and_then(Value::as_array) else {
        report.error(line, format!("{at}: missing `passage_provenance` array"));
        return;
    };
    check_passage_provenance(report, line, at, prov, rules);
}

/// `ptkb_provenance`: present, an array of statement numbers within the topic's PTKB.
fn check_ptkb_provenance(
    report: &mut Report,
    line: usize,
    at: &str,
    provenance: Option<&Value>,
    ptkb_size: Option<usize>,
) {
    match provenance {
        Some(Value::Array(ids)) => {
            for id in ids {
                match id.as_i64() {
                    Some(n) => {
                        if let Some(size) = ptkb_size {
                            if n < 1 || n as usize > size {
                                report.error(line, format!("{at}: PTKB id {n} outside 1..={size}"));
                            }
                        }
                    }
                    None => {
                        report.error(line, format!("{at}: PTKB ids must be integers, found {id}"))
                    }
                }
            }
        }
        Some(_) => report.error(line, format!("{at}: `ptkb_provenance` must be an array")),
        None => report.error(
            line,
            format!("{at}: missing `ptkb_provenance` (it may be empty but must be present)"),
        ),
    }
}

/// `passage_provenance`: how many, and each passage's id, score order and `used` flag.
fn check_passage_provenance(
    report: &mut Report,
    line: usize,
    at: &str,
    prov: &[Value],
    rules: &ResponseRules<'_>,
) {
    if prov.is_empty() && rules.require_passages {
        report.error(
            line,
            format!("{at}: no passage provenance (every response needs at least one)"),
        );
    }
    if prov.len() > MAX_PROVENANCE {
        report.error(
            line,
            format!(
                "{at}: {} provenance passages (at most {MAX_PROVENANCE})",
                prov.len()
            ),
        );
    }
    let mut previous_score = f64::INFINITY;
    let mut any_used = false;
    let mut ids = HashSet::new();
    for (k, p) in prov.iter().enumerate() {
        let pat = format!("{at} passage_provenance[{k}]");
        let Some(p) = p.as_object() else {
            report.error(line, format!("{pat} must be an object"));
            continue;
        };
        unknown_fields(report, line, p, PROVENANCE_FIELDS, "a passage provenance");
        match p.get("id").and_then(Value::as_str) {
            Some(id) => {
                if !id.starts_with("clueweb22-") || id.split(':').count() != 2 {
                    report.warning(
                        line,
                        format!("{pat}: id {id:?} is not `clueweb22-...:<passage>`"),
                    );
                }
                if !rules.ctx.knows(id) {
                    report.error(line, format!("{pat}: id {id:?} is not in the collection"));
                }
                if !ids.insert(id) {
                    report.warning(line, format!("{pat}: id {id:?} repeats in this response"));
                }
            }
            None => report.error(line, format!("{pat}: missing `id` string")),
        }
        match p.get("score") {
            Some(Value::Number(n)) => {
                let s = n.as_f64().unwrap_or(f64::NAN);
                if s > previous_score {
                    report.error(line, format!("{pat}: score {s} is higher than the previous {previous_score} (scores must not increase)"));
                }
                previous_score = s;
            }
            Some(other) => report.error(
                line,
                format!("{pat}: `score` must be a number, found {other}"),
            ),
            None if !rules.only_response => report.error(line, format!("{pat}: missing `score`")),
            None => {}
        }
        match p.get("used") {
            Some(Value::Bool(b)) => any_used |= *b,
            Some(other) => report.error(
                line,
                format!("{pat}: `used` must be true or false, found {other}"),
            ),
            None => report.error(line, format!("{pat}: missing `used`")),
        }
    }
    if !prov.is_empty() && !any_used {
        report.warning(
            line,
            format!("{at}: no passage is marked used (the top 5 will be taken)"),
        );
    }
}

/// Validates an iKAT run file.
pub fn validate_run_file(
    path: &Path,
    topics: Option<&[IkatTopic]>,
    ctx: &ValidationContext,
) -> Result<Report> {
    Ok(validate_run_text(&read_text(path)?, topics, ctx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic() -> IkatTopic {
        let turn = |id: u32, u: &str, r: &str, p: &[&str]| IkatTurn {
            line: 0,
            turn_id: id.to_string(),
            utterance: u.into(),
            resolved_utterance: Some(format!("{u} (resolved)")),
            response: Some(r.into()),
            ptkb_provenance: p.iter().map(|s| s.to_string()).collect(),
            response_provenance: vec![],
        };
        IkatTopic {
            line: 1,
            number: "9-1".into(),
            title: "t".into(),
            ptkb: vec![("1".into(), "I am vegetarian.".into())],
            turns: vec![
                turn(1, "u1", "r1", &["1"]),
                turn(2, "u2", "r2", &[]),
                turn(3, "u3", "r3", &["1"]),
            ],
        }
    }

    #[test]
    fn automatic_runs_see_only_earlier_utterances_and_canonical_responses() {
        let t = topic();
        let c = t.visible_context(1, RunType::Automatic).unwrap();
        assert_eq!(c.utterance, "u2");
        assert_eq!(c.history, vec![("u1", Some("r1"))]);
        assert_eq!(c.resolved_utterance, None);
        assert_eq!(c.ptkb_provenance, None);
        let m = t.visible_context(1, RunType::Manual).unwrap();
        assert_eq!(m.resolved_utterance, Some("u2 (resolved)"));
        assert_eq!(m.ptkb_provenance, Some(vec!["1"]));
        assert!(t.visible_context(3, RunType::Manual).is_none());
    }

    #[test]
    fn trec_conversion_keeps_first_unique_thousand() {
        let p = |id: &str, s: f64| PassageProvenance {
            id: id.into(),
            score: Some(s),
            used: true,
        };
        let run = IkatRun {
            run_name: "r".into(),
            run_type: RunType::Automatic,
            eval_response: Some(true),
            turns: vec![IkatRunTurn {
                turn_id: "9-1_1".into(),
                responses: vec![
                    IkatResponse {
                        rank: 1,
                        text: "a".into(),
                        ptkb_provenance: vec![],
                        passage_provenance: vec![p("x", 0.9), p("y", 0.5)],
                    },
                    IkatResponse {
                        rank: 2,
                        text: "b".into(),
                        ptkb_provenance: vec![],
                        passage_provenance: vec![p("y", 0.8), p("z", 0.4)],
                    },
                ],
            }],
        };
        let lists = run.to_ranked_lists();
        assert_eq!(
            lists[0].hits,
            vec![("x".into(), 0.9), ("y".into(), 0.5), ("z".into(), 0.4)]
        );
    }
}
