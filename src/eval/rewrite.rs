//! Query-rewriting evaluation: ROUGE-1 of rewrites against reference rewrites.
//!
//! Files map a turn id to a text. Recognized layouts (detected from the content):
//! - **TSV** `turn_id<TAB>text` (CAsT 2019 `*_resolved_*.tsv`; convrag's rewrite run format).
//!   CR line ends tolerated; a line without a tab is an error.
//! - **JSON lines** `{"id": ..., "rewrite": ...}` (also `turn_id`/`qid` for the id and
//!   `text`/`answer` for the text, see [`TextRole`]).
//! - **JSON arrays** of iKAT topics of any year, read by [`crate::formats::ikat::parse_topics`]
//!   (`number` + `turns[]` or `responses[]`; reference `resolved_utterance`, raw `utterance` or
//!   `user_utterance`, answer `response`), CAsT topics (`number` + `turn[].number`; reference
//!   `manual_rewritten_utterance`, raw `raw_utterance`, or `utterance` in CAsT 2022), QReCC / SCAI records (`Conversation_no` +
//!   `Turn_no`; reference `Rewrite`/`Truth_rewrite`, run `Model_rewrite`, raw `Question`), or
//!   `{"id", "rewrite"}` objects.
//!
//! Ids: `<number>_<turn_id>` (iKAT, CAsT), `<Conversation_no>_<Turn_no>` (QReCC).
//! An iKAT run file carries no rewrite (the 2024 guidelines define none): it is refused.
//!
//! A topics file given as the *run* yields its raw utterances: `eval rewrite --reference T --run T`
//! is the no-rewrite baseline.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::rouge::{rouge1, RougeScore};
use super::{read_text, EvalError, Result};
use crate::formats::ikat::distinct_turns;

/// Which text of a record to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRole {
    /// Reference rewrite (resolved / manual rewrite / Rewrite / Truth_rewrite).
    ReferenceRewrite,
    /// A system's rewrite (`rewrite`, `Model_rewrite`) or, from a topics file, the raw utterance.
    RunRewrite,
    /// Reference answer (`Answer`, `Truth_answer`, `answer`).
    ReferenceAnswer,
    /// A system's answer (`Model_answer`, `answer`).
    RunAnswer,
}

impl TextRole {
    fn fields(self) -> &'static [&'static str] {
        match self {
            TextRole::ReferenceRewrite => &[
                "resolved_utterance",
                "manual_rewritten_utterance",
                "Rewrite",
                "Truth_rewrite",
                "rewrite",
                "text",
            ],
            TextRole::RunRewrite => &[
                "rewrite",
                "Model_rewrite",
                "text",
                "utterance",
                "raw_utterance",
                "Question",
            ],
            TextRole::ReferenceAnswer => &["Answer", "Truth_answer", "answer", "text"],
            TextRole::RunAnswer => &["Model_answer", "answer", "text"],
        }
    }
}

/// Turn id → text, in file order.
pub type Texts = Vec<(String, String)>;

fn id_of(v: &Value) -> Option<String> {
    for k in ["id", "turn_id", "qid", "topic_id"] {
        match v.get(k) {
            Some(Value::String(s)) => return Some(s.clone()),
            Some(Value::Number(n)) => return Some(n.to_string()),
            _ => {}
        }
    }
    None
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn text_of(v: &Value, role: TextRole) -> Option<String> {
    role.fields()
        .iter()
        .find_map(|f| v.get(*f).and_then(Value::as_str).map(str::to_string))
}

/// An iKAT topic of any year: a `number` with `turns` (2023, 2024) or `responses` (2025).
fn is_ikat_topic(item: &Value) -> bool {
    item.get("number").and_then(scalar).is_some()
        && (item.get("turns").is_some_and(Value::is_array)
            || item.get("responses").is_some_and(Value::is_array))
}

/// The texts of iKAT topics (read by [`crate::formats::ikat::parse_topics`]): the resolved
/// utterance as the reference rewrite, the utterance as the raw one, the canonical response as
/// the answer. Turns without the text are left out.
fn ikat_topic_texts(path: &Path, text: &str, role: TextRole) -> Result<Texts> {
    let (topics, _) = crate::formats::ikat::parse_topics(path, text)?;
    Ok(distinct_turns(&topics)
        .filter_map(|(topic, i)| {
            let turn = &topic.turns[i];
            let s = match role {
                TextRole::ReferenceRewrite => turn.resolved_utterance.clone(),
                TextRole::RunRewrite => Some(turn.utterance.clone()),
                TextRole::ReferenceAnswer | TextRole::RunAnswer => turn.response.clone(),
            };
            s.map(|s| (topic.turn_key(turn), s))
        })
        .collect())
}

/// Reads turn texts from any supported layout.
pub fn read_texts(path: &Path, role: TextRole) -> Result<Texts> {
    let text = read_text(path)?;
    let trimmed = text.trim_start();
    let mut out: Texts = Vec::new();
    if trimmed.starts_with('[') {
        let value: Value = serde_json::from_str(&text).map_err(|e| EvalError::json(path, &e))?;
        let items = value.as_array().expect("array");
        let ikat = items.first().is_some_and(is_ikat_topic);
        if ikat {
            out = ikat_topic_texts(path, &text, role)?;
        }
        for (i, item) in items.iter().enumerate().filter(|_| !ikat) {
            let missing =
                |what: &str| EvalError::file(path, format!("record {}: no {what}", i + 1));
            if let (Some(num), Some(turns)) = (
                item.get("number").and_then(scalar),
                item.get("turn").and_then(Value::as_array),
            ) {
                // CAsT topics.
                for t in turns {
                    let tid = t
                        .get("number")
                        .and_then(scalar)
                        .ok_or_else(|| missing("turn number"))?;
                    // CAsT 2022 names the raw text `utterance`; its system turns have neither.
                    let text = if role == TextRole::RunRewrite {
                        t.get("raw_utterance").or_else(|| t.get("utterance"))
                    } else {
                        t.get("manual_rewritten_utterance")
                    };
                    if let Some(s) = text.and_then(Value::as_str) {
                        out.push((format!("{num}_{tid}"), s.to_string()));
                    }
                }
            } else if let (Some(c), Some(t)) = (
                item.get("Conversation_no").and_then(scalar),
                item.get("Turn_no").and_then(scalar),
            ) {
                let s = text_of(item, role).ok_or_else(|| missing("text field"))?;
                out.push((format!("{c}_{t}"), s));
            } else {
                let id = id_of(item).ok_or_else(|| missing("id"))?;
                let s = text_of(item, role).ok_or_else(|| missing("text field"))?;
                out.push((id, s));
            }
        }
    } else if trimmed.starts_with('{') {
        // One JSON object per line; a single iKAT run object is refused.
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            if v.get("turns").is_some() && v.get("run_name").is_some() {
                return Err(EvalError::file(
                    path,
                    "an iKAT run file carries no rewrites; give TSV `turn_id<TAB>rewrite` or JSON lines {\"id\", \"rewrite\"}",
                ));
            }
        }
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line)
                .map_err(|e| EvalError::parse(path, i + 1, e.to_string()))?;
            let id = id_of(&v).ok_or_else(|| EvalError::parse(path, i + 1, "no \"id\" field"))?;
            let s = text_of(&v, role).ok_or_else(|| {
                EvalError::parse(
                    path,
                    i + 1,
                    format!("none of the fields {:?}", role.fields()),
                )
            })?;
            out.push((id, s));
        }
    } else {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let (id, s) = line
                .split_once('\t')
                .ok_or_else(|| EvalError::parse(path, i + 1, "expected `turn_id<TAB>text`"))?;
            out.push((id.trim().to_string(), s.to_string()));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (id, _) in &out {
        if !seen.insert(id.as_str()) {
            return Err(EvalError::file(path, format!("turn `{id}` appears twice")));
        }
    }
    Ok(out)
}

/// ROUGE-1 over all reference turns.
#[derive(Debug, Clone, Serialize)]
pub struct RewriteReport {
    pub all: RougeScore,
    pub per_turn: BTreeMap<String, RougeScore>,
    /// Reference turns evaluated (averages are over these).
    pub turns: usize,
    /// Reference turns without a rewrite in the run (scored as an empty rewrite: 0).
    pub missing: usize,
    /// Run turns without a reference (ignored).
    pub extra: usize,
    pub stemmed: bool,
}

/// Scores every reference turn; a turn missing from the run scores 0.
pub fn evaluate_rewrites(reference: &Texts, run: &Texts, stem: bool) -> RewriteReport {
    let run_map: std::collections::HashMap<&str, &str> =
        run.iter().map(|(i, t)| (i.as_str(), t.as_str())).collect();
    let ref_ids: std::collections::HashSet<&str> =
        reference.iter().map(|(i, _)| i.as_str()).collect();
    let mut sum = (0.0, 0.0, 0.0);
    let mut per_turn = BTreeMap::new();
    let mut missing = 0;
    for (id, target) in reference {
        let pred = run_map.get(id.as_str()).copied().unwrap_or_else(|| {
            missing += 1;
            ""
        });
        let s = rouge1(target, pred, stem);
        sum.0 += s.precision;
        sum.1 += s.recall;
        sum.2 += s.fmeasure;
        per_turn.insert(id.clone(), s);
    }
    let n = reference.len().max(1) as f64;
    RewriteReport {
        all: RougeScore {
            precision: sum.0 / n,
            recall: sum.1 / n,
            fmeasure: sum.2 / n,
        },
        per_turn,
        turns: reference.len(),
        missing,
        extra: run
            .iter()
            .filter(|(i, _)| !ref_ids.contains(i.as_str()))
            .count(),
        stemmed: stem,
    }
}

impl RewriteReport {
    pub fn to_text(&self, per_query: bool) -> String {
        let mut out = String::new();
        let mut line = |name: &str, q: &str, v: f64| {
            out.push_str(&format!("{name:<22}\t{q}\t{v:.4}\n"));
        };
        if per_query {
            for (q, s) in &self.per_turn {
                line("rouge1_recall", q, s.recall);
                line("rouge1_precision", q, s.precision);
                line("rouge1_f1", q, s.fmeasure);
            }
        }
        out.push_str(&format!("{:<22}\tall\t{}\n", "num_q", self.turns));
        out.push_str(&format!("{:<22}\tall\t{}\n", "num_missing", self.missing));
        let mut line = |name: &str, v: f64| out.push_str(&format!("{name:<22}\tall\t{v:.4}\n"));
        line("rouge1_recall", self.all.recall);
        line("rouge1_precision", self.all.precision);
        line("rouge1_f1", self.all.fmeasure);
        out
    }

    pub fn to_json(&self) -> Value {
        let score = |s: &RougeScore| serde_json::json!({"rouge1_recall": s.recall, "rouge1_precision": s.precision, "rouge1_f1": s.fmeasure});
        let mut all = score(&self.all);
        all["num_q"] = self.turns.into();
        all["num_missing"] = self.missing.into();
        all["num_extra"] = self.extra.into();
        all["stemmed"] = self.stemmed.into();
        let per: serde_json::Map<String, Value> = self
            .per_turn
            .iter()
            .map(|(k, s)| (k.clone(), score(s)))
            .collect();
        serde_json::json!({"all": all, "per_query": per})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, s: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(name);
        std::fs::write(&p, s).unwrap();
        (d, p)
    }

    #[test]
    fn tsv_and_jsonl_and_errors() {
        let (_d, p) = write("r.tsv", "1_1\tWhat is x?\r\n1_2\tTell me more\r\n");
        let t = read_texts(&p, TextRole::RunRewrite).unwrap();
        assert_eq!(t[1], ("1_2".to_string(), "Tell me more".to_string()));
        let (_d, p) = write("r.tsv", "1_1\tok\nbroken line\n");
        let e = read_texts(&p, TextRole::RunRewrite)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("r.tsv:2: expected `turn_id<TAB>text`"), "{e}");
        let (_d, p) = write(
            "r.jsonl",
            "{\"id\": \"1_1\", \"rewrite\": \"a\"}\n{\"id\": \"1_2\"}\n",
        );
        let e = read_texts(&p, TextRole::RunRewrite)
            .unwrap_err()
            .to_string();
        assert!(e.contains("r.jsonl:2: none of the fields"), "{e}");
        let (_d, p) = write("run.json", "{\"run_name\": \"x\", \"turns\": []}");
        assert!(read_texts(&p, TextRole::RunRewrite).is_err());
    }

    #[test]
    fn topics_give_reference_and_raw() {
        let (_d, p) = write(
            "t.json",
            r#"[{"number": "9-1", "turns": [{"turn_id": 1, "utterance": "how about it", "resolved_utterance": "how about yoga"}]}]"#,
        );
        let r = read_texts(&p, TextRole::ReferenceRewrite).unwrap();
        let raw = read_texts(&p, TextRole::RunRewrite).unwrap();
        assert_eq!(r, vec![("9-1_1".to_string(), "how about yoga".to_string())]);
        let rep = evaluate_rewrites(&r, &raw, false);
        assert_eq!(rep.all.recall, 2.0 / 3.0);
        let rep = evaluate_rewrites(&r, &vec![], false);
        assert_eq!((rep.missing, rep.all.recall), (1, 0.0));
    }

    #[test]
    fn qrecc_records_and_scai_runs() {
        let (_d, p) = write(
            "qrecc_test.json",
            r#"[{"Context": [], "Question": "What are the educational requirements required to become one?", "Rewrite": "What are the educational requirements required to become a physician's assistant?", "Answer": "a", "Conversation_no": 1, "Turn_no": 2}]"#,
        );
        let r = read_texts(&p, TextRole::ReferenceRewrite).unwrap();
        assert_eq!(r[0].0, "1_2");
        assert!(r[0].1.ends_with("physician's assistant?"));
        let raw = read_texts(&p, TextRole::RunRewrite).unwrap();
        assert!(raw[0].1.ends_with("become one?"));
        assert_eq!(read_texts(&p, TextRole::ReferenceAnswer).unwrap()[0].1, "a");
        let (_d, p) = write(
            "run.json",
            r#"[{"Conversation_no": 1, "Turn_no": 2, "Model_rewrite": "x", "Model_answer": "y", "Model_passages": {}}]"#,
        );
        assert_eq!(read_texts(&p, TextRole::RunRewrite).unwrap()[0].1, "x");
        assert_eq!(read_texts(&p, TextRole::RunAnswer).unwrap()[0].1, "y");
        let (_d, p) = write("dup.tsv", "1_1\ta\n1_1\tb\n");
        let e = read_texts(&p, TextRole::RunRewrite)
            .unwrap_err()
            .to_string();
        assert!(e.contains("appears twice"), "{e}");
    }
}
