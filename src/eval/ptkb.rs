//! PTKB statement ranking evaluation (iKAT).
//!
//! Judgments come from iKAT PTKB qrels (`9-1_3 0 <statement id> <0|1>`) or from a topics file:
//! for every turn with a non-empty `ptkb_provenance`, the listed statements are relevant (1) and the
//! topic's other PTKB statements judged non-relevant (0). Turns whose `ptkb_provenance` is empty
//! or absent are not judged, exactly as the organizers' qrels (`2023_ptkb_qrels_org.txt` equals the
//! 2023 test topics read this way, see tests/eval_ptkb.rs).
//!
//! The ranking of a run: an iKAT run file's `ptkb_provenance` of the turn's first response (rank
//! order), or any run [`super::trec::read_run`] reads. **Selected** statements are all statements
//! the run lists for the turn: iKAT runs list only the statements they consider relevant, in rank
//! order, so the list is at once a ranking and the binary decision. Set precision/recall/F1 are
//! trec_eval's `set_P`/`set_recall`/`set_F` per turn (0 when nothing is selected), averaged over
//! all judged turns; `micro_set_*` pool the counts over turns. Averages are over all judged turns
//! (trec_eval `-c`): a judged turn missing from the run has an empty ranking and scores 0.

use std::path::Path;

use serde_json::{json, Value};

use super::measures::{evaluate, EvalOptions, Evaluation, Measure};
use super::trec::{parse_ikat_run, parse_json_run, read_qrels, read_run, Qrels, Run};
use super::{read_text, EvalError, Result};
use crate::formats::ikat::{distinct_turns, read_topics};

/// PTKB judgments from an iKAT topics file of any year (see the module documentation), read by
/// [`crate::formats::ikat::read_topics`]; 2025 topics name relevant statements by their text,
/// which the reader turns into the statements' 1-based positions.
pub fn ptkb_qrels_from_topics(path: &Path) -> Result<Qrels> {
    let topics = read_topics(path)?;
    let mut qrels = Qrels::default();
    for (t, i) in distinct_turns(&topics) {
        let turn = &t.turns[i];
        if turn.ptkb_provenance.is_empty() {
            continue;
        }
        let qid = t.turn_key(turn);
        for r in &turn.ptkb_provenance {
            if !t.ptkb.iter().any(|(id, _)| id == r) {
                return Err(EvalError::file(
                    path,
                    format!("turn {qid}: ptkb_provenance names statement {r}, absent from the topic's ptkb"),
                ));
            }
        }
        for (sid, _) in &t.ptkb {
            let rel = i64::from(turn.ptkb_provenance.contains(sid));
            let _ = qrels.insert(&qid, sid, rel);
        }
    }
    Ok(qrels)
}

/// PTKB judgments from a qrels file or a topics file (JSON).
pub fn read_ptkb_judgments(path: &Path) -> Result<Qrels> {
    let text = read_text(path)?;
    if text.trim_start().starts_with('[') {
        ptkb_qrels_from_topics(path)
    } else {
        read_qrels(path)
    }
}

/// A PTKB ranking run, as [`read_ptkb_run`] reads it, or an iKAT 2025 submission (JSONL: the
/// first response's `ptkb_provenance` statement texts, in order), whose texts become statement
/// ids through `topics`.
pub fn read_ptkb_run_with_topics(path: &Path, topics: Option<&Path>) -> Result<Run> {
    let text = read_text(path)?;
    let first: Option<Value> = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| serde_json::from_str(l).ok());
    let is_2025 = first.is_some_and(|v| v.get("turn_id").is_some() && v.get("metadata").is_some());
    if !is_2025 {
        return read_ptkb_run(path);
    }
    let topics = topics.ok_or_else(|| {
        EvalError::Usage(format!(
            "{}: an iKAT 2025 submission names PTKB statements by their text; give --topics to judge it",
            path.display()
        ))
    })?;
    let topics = read_topics(topics)?;
    let mut rankings = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).map_err(|e| EvalError::parse(path, i + 1, e.to_string()))?;
        let turn_id = v
            .get("turn_id")
            .and_then(Value::as_str)
            .ok_or_else(|| EvalError::parse(path, i + 1, "no \"turn_id\" string"))?;
        let ptkb = topics
            .iter()
            .find(|t| t.turns.iter().any(|u| t.turn_key(u) == turn_id))
            .map(|t| t.ptkb.as_slice())
            .unwrap_or_default();
        let mut ids: Vec<String> = Vec::new();
        let statements = v["responses"][0]["ptkb_provenance"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for s in statements {
            let s = s.as_str().unwrap_or_default();
            let id = ptkb
                .iter()
                .find(|(_, text)| text == s)
                .map(|(id, _)| id.clone())
                .ok_or_else(|| {
                    EvalError::parse(
                        path,
                        i + 1,
                        format!("turn {turn_id}: statement {s:?} is not in the topic's PTKB"),
                    )
                })?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        rankings.push((turn_id.to_string(), ids));
    }
    Ok(Run::from_rankings(rankings))
}

/// A PTKB ranking run: an iKAT run file (first response's `ptkb_provenance`, in order) or any
/// run format [`read_run`] accepts (TREC, `{"turn": {"statement": score}}`).
pub fn read_ptkb_run(path: &Path) -> Result<Run> {
    let text = read_text(path)?;
    let is_ikat = text.trim_start().starts_with('{')
        && serde_json::from_str::<Value>(&text)
            .map_err(|e| EvalError::json(path, &e))?
            .get("turns")
            .is_some_and(Value::is_array);
    if !is_ikat {
        return if text.trim_start().starts_with('{') {
            parse_json_run(path, &text)
        } else {
            read_run(path)
        };
    }
    let ikat = parse_ikat_run(path, &text)?;
    let rankings = ikat.turns.iter().map(|t| {
        let mut docs: Vec<String> = Vec::new();
        if let Some(first) = t.ranked_responses().first() {
            for s in &first.ptkb_provenance {
                let s = s.to_string();
                if !docs.contains(&s) {
                    docs.push(s);
                }
            }
        }
        (t.turn_id.clone(), docs)
    });
    Ok(Run::from_rankings(rankings))
}

/// The measures reported by default.
pub fn default_measures() -> Vec<Measure> {
    Measure::parse_all(&[
        "ndcg_cut.3,5",
        "P.1,3,5",
        "recall.3,5",
        "map",
        "recip_rank",
        "set_P",
        "set_recall",
        "set_F",
    ])
    .expect("valid measures")
}

/// Micro-averaged selection quality: counts pooled over judged turns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MicroSet {
    pub selected: usize,
    pub relevant: usize,
    pub selected_relevant: usize,
}

impl MicroSet {
    pub fn precision(&self) -> f64 {
        ratio(self.selected_relevant, self.selected)
    }
    pub fn recall(&self) -> f64 {
        ratio(self.selected_relevant, self.relevant)
    }
    pub fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r > 0.0 {
            2.0 * p * r / (p + r)
        } else {
            0.0
        }
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// PTKB evaluation result.
#[derive(Debug, Clone)]
pub struct PtkbReport {
    pub evaluation: Evaluation,
    pub micro: MicroSet,
    pub judged_turns: usize,
    pub run_turns_judged: usize,
}

/// Evaluates a PTKB ranking run against PTKB judgments.
pub fn evaluate_ptkb(qrels: &Qrels, run: &Run, measures: &[Measure]) -> PtkbReport {
    let opts = EvalOptions {
        relevance_level: 1,
        average_complete: true,
    };
    let evaluation = evaluate(qrels, run, measures, &opts);
    let mut micro = MicroSet::default();
    let mut run_turns_judged = 0;
    for (qid, judged) in &qrels.queries {
        micro.relevant += judged.values().filter(|&&r| r >= 1).count();
        if let Some(docs) = run.get(qid) {
            run_turns_judged += 1;
            micro.selected += docs.len();
            micro.selected_relevant += docs
                .iter()
                .filter(|(d, _)| judged.get(d).is_some_and(|&r| r >= 1))
                .count();
        }
    }
    PtkbReport {
        evaluation,
        micro,
        judged_turns: qrels.len(),
        run_turns_judged,
    }
}

impl PtkbReport {
    pub fn to_text(&self, per_query: bool) -> String {
        let mut out = self.evaluation.to_trec_text(per_query);
        for (name, v) in [
            ("micro_set_P", self.micro.precision()),
            ("micro_set_recall", self.micro.recall()),
            ("micro_set_F", self.micro.f1()),
        ] {
            out.push_str(&format!("{name:<22}\tall\t{v:.4}\n"));
        }
        out.push_str(&format!(
            "{:<22}\tall\t{}\n",
            "judged_turns_in_run", self.run_turns_judged
        ));
        out
    }

    pub fn to_json(&self) -> Value {
        let mut v = self.evaluation.to_json();
        let all = v["all"].as_object_mut().expect("object");
        all.insert("micro_set_P".into(), json!(self.micro.precision()));
        all.insert("micro_set_recall".into(), json!(self.micro.recall()));
        all.insert("micro_set_F".into(), json!(self.micro.f1()));
        all.insert("judged_turns_in_run".into(), json!(self.run_turns_judged));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::trec::parse_qrels;

    #[test]
    fn selected_set_and_ranking() {
        let qrels = parse_qrels(
            Path::new("q"),
            "1-1_1 0 1 1\n1-1_1 0 2 0\n1-1_1 0 3 1\n1-1_2 0 1 0\n1-1_2 0 2 1\n",
        )
        .unwrap();
        let run = Run::from_rankings([("1-1_1", vec!["3".to_string(), "2".to_string()])]);
        let r = evaluate_ptkb(&qrels, &run, &default_measures());
        assert_eq!(r.evaluation.num_q, 2);
        assert_eq!(r.evaluation.get("P_1"), Some(0.5));
        assert_eq!(r.evaluation.get("set_P"), Some(0.25));
        assert_eq!(
            r.micro,
            MicroSet {
                selected: 2,
                relevant: 3,
                selected_relevant: 1
            }
        );
        assert_eq!(r.micro.f1(), 2.0 * 0.5 * (1.0 / 3.0) / (0.5 + 1.0 / 3.0));
    }

    #[test]
    fn topics_with_unknown_statement_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.json");
        std::fs::write(&p, r#"[{"number": "1-1", "ptkb": {"1": "a"}, "turns": [{"turn_id": 1, "utterance": "u", "ptkb_provenance": [2]}]}]"#).unwrap();
        let e = ptkb_qrels_from_topics(&p).unwrap_err().to_string();
        assert!(e.contains("statement 2"), "{e}");
        std::fs::write(&p, "[{\"number\": \"1-1\",\n \"turns\": 3}]").unwrap();
        let e = ptkb_qrels_from_topics(&p).unwrap_err().to_string();
        assert!(e.contains("t.json:1: topic #1: missing `turns`"), "{e}");
    }
}
