//! Answer evaluation: SQuAD-style F1 / exact match (QReCC answers) and statistics of TREC RAG
//! answers (length, sentences, citations).
//!
//! SQuAD normalization (the official script): lower-case, drop ASCII punctuation, drop the
//! articles a/an/the as words, collapse whitespace. F1 is the token-overlap F1; as in the SQuAD
//! 2.0 script, when either side has no token the score is 1 if both are empty, else 0.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use once_cell::sync::Lazy;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::rewrite::Texts;
use super::{read_text, EvalError, Result};

static ARTICLES: Lazy<Regex> = Lazy::new(|| Regex::new(r"\b(a|an|the)\b").expect("regex"));

/// The SQuAD answer normalization.
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punct: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    let no_articles = ARTICLES.replace_all(&no_punct, " ");
    no_articles.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn exact_match(prediction: &str, gold: &str) -> f64 {
    f64::from(u8::from(
        normalize_answer(prediction) == normalize_answer(gold),
    ))
}

pub fn f1(prediction: &str, gold: &str) -> f64 {
    let p = normalize_answer(prediction);
    let g = normalize_answer(gold);
    let pt: Vec<&str> = p.split_whitespace().collect();
    let gt: Vec<&str> = g.split_whitespace().collect();
    if pt.is_empty() || gt.is_empty() {
        return f64::from(u8::from(pt == gt));
    }
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for t in &gt {
        *counts.entry(t).or_default() += 1;
    }
    let mut same = 0usize;
    for t in &pt {
        if let Some(c) = counts.get_mut(t) {
            if *c > 0 {
                *c -= 1;
                same += 1;
            }
        }
    }
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / pt.len() as f64;
    let recall = same as f64 / gt.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// F1/EM over all reference turns (a turn missing from the run gets an empty answer).
#[derive(Debug, Clone, Serialize)]
pub struct SquadReport {
    pub f1: f64,
    pub exact_match: f64,
    pub per_turn: BTreeMap<String, (f64, f64)>,
    pub turns: usize,
    pub missing: usize,
}

pub fn evaluate_answers(reference: &Texts, run: &Texts) -> SquadReport {
    let run_map: HashMap<&str, &str> = run.iter().map(|(i, t)| (i.as_str(), t.as_str())).collect();
    let (mut f, mut em, mut missing) = (0.0, 0.0, 0);
    let mut per_turn = BTreeMap::new();
    for (id, gold) in reference {
        let pred = run_map.get(id.as_str()).copied().unwrap_or_else(|| {
            missing += 1;
            ""
        });
        let (a, b) = (f1(pred, gold), exact_match(pred, gold));
        f += a;
        em += b;
        per_turn.insert(id.clone(), (a, b));
    }
    let n = reference.len().max(1) as f64;
    SquadReport {
        f1: f / n,
        exact_match: em / n,
        per_turn,
        turns: reference.len(),
        missing,
    }
}

impl SquadReport {
    pub fn to_text(&self, per_query: bool) -> String {
        let mut out = String::new();
        if per_query {
            for (q, (f, e)) in &self.per_turn {
                out.push_str(&format!(
                    "{:<22}\t{q}\t{f:.4}\n{:<22}\t{q}\t{e:.4}\n",
                    "F1", "EM"
                ));
            }
        }
        out.push_str(&format!("{:<22}\tall\t{}\n", "num_q", self.turns));
        out.push_str(&format!("{:<22}\tall\t{}\n", "num_missing", self.missing));
        out.push_str(&format!("{:<22}\tall\t{:.4}\n", "F1", self.f1));
        out.push_str(&format!("{:<22}\tall\t{:.4}\n", "EM", self.exact_match));
        out
    }
    pub fn to_json(&self) -> Value {
        let per: serde_json::Map<String, Value> = self
            .per_turn
            .iter()
            .map(|(k, (f, e))| (k.clone(), json!({"F1": f, "EM": e})))
            .collect();
        json!({"all": {"F1": self.f1, "EM": self.exact_match, "num_q": self.turns, "num_missing": self.missing}, "per_query": per})
    }
}

/// One answer of a TREC RAG (2024 / 2025 format 1 or 2) output file.
#[derive(Debug, Deserialize)]
struct RagAnswer {
    #[serde(default)]
    topic_id: Option<Value>,
    #[serde(default)]
    narrative_id: Option<Value>,
    #[serde(default)]
    references: Option<Vec<String>>,
    #[serde(default)]
    response_length: Option<i64>,
    answer: Vec<RagSentence>,
}

#[derive(Debug, Deserialize)]
struct RagSentence {
    text: String,
    #[serde(default)]
    citations: Vec<Value>,
}

/// Statistics of one answer.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct AnswerStats {
    pub words: usize,
    pub sentences: usize,
    pub cited_sentences: usize,
    pub citations: usize,
    /// Citations that are not an index into (or an id of) the answer's references.
    pub citations_outside_references: usize,
    pub references: usize,
    /// `response_length` as written in the file, when present.
    pub declared_length: Option<i64>,
}

/// Statistics over a TREC RAG answer file.
#[derive(Debug, Clone, Serialize)]
pub struct RagReport {
    pub answers: usize,
    pub mean_words: f64,
    pub mean_sentences: f64,
    /// Cited sentences / all sentences, pooled over answers.
    pub cited_sentence_share: f64,
    /// Mean over answers of each answer's cited-sentence share.
    pub mean_cited_sentence_share: f64,
    pub citations_outside_references: usize,
    pub answers_with_citations_outside: usize,
    /// Answers whose `response_length` differs from the whitespace word count.
    pub length_mismatches: usize,
    pub per_topic: BTreeMap<String, AnswerStats>,
}

/// Words are whitespace-separated tokens of the sentence texts (the guidelines' `response_length`).
pub fn answer_stats_file(path: &Path) -> Result<RagReport> {
    let text = read_text(path)?;
    let mut per_topic = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let a: RagAnswer =
            serde_json::from_str(line).map_err(|e| EvalError::parse(path, i + 1, e.to_string()))?;
        let id = a
            .topic_id
            .as_ref()
            .or(a.narrative_id.as_ref())
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .ok_or_else(|| EvalError::parse(path, i + 1, "no topic_id / narrative_id"))?;
        let refs = a.references.clone().unwrap_or_default();
        let mut s = AnswerStats {
            sentences: a.answer.len(),
            references: refs.len(),
            declared_length: a.response_length,
            ..Default::default()
        };
        for sent in &a.answer {
            s.words += sent.text.split_whitespace().count();
            if !sent.citations.is_empty() {
                s.cited_sentences += 1;
            }
            for c in &sent.citations {
                s.citations += 1;
                let inside = match c {
                    Value::Number(n) => n.as_u64().is_some_and(|k| (k as usize) < refs.len()),
                    // Format 2 cites segment ids; with references given they must be among them.
                    Value::String(id) => a.references.is_none() || refs.contains(id),
                    _ => false,
                };
                if !inside {
                    s.citations_outside_references += 1;
                }
            }
        }
        if per_topic.insert(id.clone(), s).is_some() {
            return Err(EvalError::parse(
                path,
                i + 1,
                format!("topic `{id}` answered twice"),
            ));
        }
    }
    let n = per_topic.len().max(1) as f64;
    let total_sent: usize = per_topic.values().map(|s| s.sentences).sum();
    let cited: usize = per_topic.values().map(|s| s.cited_sentences).sum();
    Ok(RagReport {
        answers: per_topic.len(),
        mean_words: per_topic.values().map(|s| s.words as f64).sum::<f64>() / n,
        mean_sentences: total_sent as f64 / n,
        cited_sentence_share: if total_sent == 0 {
            0.0
        } else {
            cited as f64 / total_sent as f64
        },
        mean_cited_sentence_share: per_topic
            .values()
            .map(|s| {
                if s.sentences == 0 {
                    0.0
                } else {
                    s.cited_sentences as f64 / s.sentences as f64
                }
            })
            .sum::<f64>()
            / n,
        citations_outside_references: per_topic
            .values()
            .map(|s| s.citations_outside_references)
            .sum(),
        answers_with_citations_outside: per_topic
            .values()
            .filter(|s| s.citations_outside_references > 0)
            .count(),
        length_mismatches: per_topic
            .values()
            .filter(|s| s.declared_length.is_some_and(|d| d != s.words as i64))
            .count(),
        per_topic,
    })
}

impl RagReport {
    pub fn to_text(&self, per_query: bool) -> String {
        let mut out = String::new();
        if per_query {
            for (q, s) in &self.per_topic {
                out.push_str(&format!("{:<22}\t{q}\t{}\n", "words", s.words));
                out.push_str(&format!("{:<22}\t{q}\t{}\n", "sentences", s.sentences));
                out.push_str(&format!(
                    "{:<22}\t{q}\t{}\n",
                    "cited_sentences", s.cited_sentences
                ));
                out.push_str(&format!(
                    "{:<22}\t{q}\t{}\n",
                    "citations_outside", s.citations_outside_references
                ));
            }
        }
        let rows: [(&str, String); 8] = [
            ("answers", self.answers.to_string()),
            ("mean_words", format!("{:.4}", self.mean_words)),
            ("mean_sentences", format!("{:.4}", self.mean_sentences)),
            (
                "cited_sentence_share",
                format!("{:.4}", self.cited_sentence_share),
            ),
            (
                "mean_cited_share",
                format!("{:.4}", self.mean_cited_sentence_share),
            ),
            (
                "citations_outside",
                self.citations_outside_references.to_string(),
            ),
            (
                "answers_cit_outside",
                self.answers_with_citations_outside.to_string(),
            ),
            ("length_mismatches", self.length_mismatches.to_string()),
        ];
        for (k, v) in rows {
            out.push_str(&format!("{k:<22}\tall\t{v}\n"));
        }
        out
    }
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).expect("serializable");
        let per = v
            .as_object_mut()
            .and_then(|o| o.remove("per_topic"))
            .unwrap_or(Value::Null);
        json!({"all": v, "per_query": per})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squad_normalization_and_f1() {
        assert_eq!(
            normalize_answer("The  Cat, sat!  on a mat."),
            "cat sat on mat"
        );
        assert_eq!(exact_match("the Cat", "cat"), 1.0);
        assert_eq!(
            f1("x b c", "b c d e"),
            2.0 * (2.0 / 3.0) * 0.5 / (2.0 / 3.0 + 0.5)
        );
        assert_eq!(f1("the", ""), 1.0);
        assert_eq!(f1("", "x"), 0.0);
        assert_eq!(f1("x y", "z"), 0.0);
    }

    #[test]
    fn rag_stats_and_errors() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.jsonl");
        std::fs::write(&p, concat!(
            r#"{"topic_id": "t1", "references": ["s0", "s1"], "response_length": 5, "answer": [{"text": "One two three.", "citations": [0, 2]}, {"text": "Four five", "citations": []}]}"#, "\n",
            r#"{"topic_id": "t2", "references": [], "answer": [{"text": "x", "citations": [0]}]}"#, "\n")).unwrap();
        let r = answer_stats_file(&p).unwrap();
        assert_eq!(r.answers, 2);
        assert_eq!(r.per_topic["t1"].words, 5);
        assert_eq!(r.citations_outside_references, 2);
        assert_eq!(r.cited_sentence_share, 2.0 / 3.0);
        std::fs::write(
            &p,
            "{\"topic_id\": \"t1\", \"answer\": []}\n{\"topic_id\": \"t2\"}\n",
        )
        .unwrap();
        let e = answer_stats_file(&p).unwrap_err().to_string();
        assert!(e.contains("a.jsonl:2: missing field `answer`"), "{e}");
    }
}
