//! PolEval 2022 passage retrieval: NDCG@10 over GEval files.
//!
//! `expected.tsv`: per line, the tab-separated ids of the relevant passages (duplicates counted
//! once); `out.tsv`: per line, the ranked passage ids (first 10 used; a repeated id gains only at
//! its first position). Gains are binary, discounts log2(rank + 1), the ideal ranking has
//! min(10, #relevant) relevant passages. A line without relevant passages scores 0. The score is
//! the mean over lines. Lines are aligned by position; `in.tsv` (optional) must have as many lines
//! (its test lines start with a space, which is tolerated).

use std::collections::HashSet;
use std::path::Path;

use serde_json::{json, Value};

use super::{read_text, EvalError, Result};

const K: usize = 10;

/// Lines of a GEval file: trailing empty line dropped, CR removed.
fn geval_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').map(|l| l.trim_end_matches('\r')).collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

fn ids(line: &str) -> Vec<&str> {
    line.split('\t')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// NDCG@10 of one ranked list against a relevant set.
pub fn ndcg10(ranked: &[&str], relevant: &HashSet<&str>) -> f64 {
    if relevant.is_empty() {
        return 0.0;
    }
    let mut seen = HashSet::new();
    let mut dcg = 0.0;
    for (i, id) in ranked.iter().take(K).enumerate() {
        if seen.insert(*id) && relevant.contains(id) {
            dcg += 1.0 / ((i + 2) as f64).log2();
        }
    }
    let idcg: f64 = (0..relevant.len().min(K))
        .map(|i| 1.0 / ((i + 2) as f64).log2())
        .sum();
    dcg / idcg
}

#[derive(Debug, Clone)]
pub struct PolevalReport {
    pub ndcg10: f64,
    pub per_line: Vec<f64>,
}

pub fn evaluate_poleval(
    expected: &Path,
    out: &Path,
    input: Option<&Path>,
) -> Result<PolevalReport> {
    let exp_text = read_text(expected)?;
    let out_text = read_text(out)?;
    let exp = geval_lines(&exp_text);
    let got = geval_lines(&out_text);
    if got.len() != exp.len() {
        let line = got.len().min(exp.len()) + 1;
        return Err(EvalError::parse(
            out,
            line,
            format!(
                "{} lines, but {} has {}",
                got.len(),
                expected.display(),
                exp.len()
            ),
        ));
    }
    if let Some(inp) = input {
        let in_text = read_text(inp)?;
        let n = geval_lines(&in_text).len();
        if n != exp.len() {
            return Err(EvalError::file(
                inp,
                format!("{n} lines, but {} has {}", expected.display(), exp.len()),
            ));
        }
    }
    let per_line: Vec<f64> = exp
        .iter()
        .zip(&got)
        .map(|(e, o)| ndcg10(&ids(o), &ids(e).into_iter().collect()))
        .collect();
    let ndcg10 = if per_line.is_empty() {
        0.0
    } else {
        per_line.iter().sum::<f64>() / per_line.len() as f64
    };
    Ok(PolevalReport { ndcg10, per_line })
}

impl PolevalReport {
    pub fn to_text(&self, per_query: bool) -> String {
        let mut s = String::new();
        if per_query {
            for (i, v) in self.per_line.iter().enumerate() {
                s.push_str(&format!("{:<22}\t{}\t{v:.4}\n", "NDCG@10", i + 1));
            }
        }
        s.push_str(&format!("{:<22}\tall\t{}\n", "num_q", self.per_line.len()));
        s.push_str(&format!("{:<22}\tall\t{:.4}\n", "NDCG@10", self.ndcg10));
        s
    }
    pub fn to_json(&self) -> Value {
        let per: serde_json::Map<String, Value> = self
            .per_line
            .iter()
            .enumerate()
            .map(|(i, v)| ((i + 1).to_string(), json!({"NDCG@10": v})))
            .collect();
        json!({"all": {"NDCG@10": self.ndcg10, "num_q": self.per_line.len()}, "per_query": per})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_ndcg_with_duplicates() {
        let rel: HashSet<&str> = ["a", "b"].into_iter().collect();
        assert_eq!(ndcg10(&["a", "b"], &rel), 1.0);
        let v = ndcg10(&["x", "a", "a"], &rel);
        assert_eq!(v, (1.0 / 3f64.log2()) / (1.0 + 1.0 / 3f64.log2()));
    }

    #[test]
    fn line_mismatch_names_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let e = d.path().join("expected.tsv");
        let o = d.path().join("out.tsv");
        let i = d.path().join("in.tsv");
        std::fs::write(&e, "a\tb\ta\nc\n").unwrap();
        std::fs::write(&o, "a\tx\n").unwrap();
        let err = evaluate_poleval(&e, &o, None).unwrap_err().to_string();
        assert!(err.contains("out.tsv:2: 1 lines"), "{err}");
        std::fs::write(&o, "a\tb\nz\tc\n").unwrap();
        std::fs::write(&i, " wiki\tq1\n wiki\tq2\n").unwrap();
        let r = evaluate_poleval(&e, &o, Some(&i)).unwrap();
        assert_eq!(r.per_line[0], 1.0);
        assert_eq!(r.per_line[1], (1.0 / 3f64.log2()) / 1.0);
    }
}
