//! trec_eval-exact ranking measures.
//!
//! Semantics follow trec_eval 9.0.x (`form_res_rels.c` and the `m_*.c` files):
//! - A query's documents are ranked by score, descending; ties are broken by document id in
//!   *descending* byte order (`strcmp(p2->docno, p1->docno)`), whatever the run's rank column says.
//! - A retrieved document without judgment is non-relevant (grade -1); a negative grade in the
//!   qrels means "in the pool, unjudged" and is never relevant.
//! - Binary measures (P, recall, map, map_cut, Rprec, recip_rank, success, set_*) count a document
//!   as relevant when its grade is at least the relevance level (`-l`, default 1).
//! - nDCG uses linear gains (the grade) and ignores the relevance level: the ideal ranking is every
//!   judged document with a positive grade, by grade, and log2(rank + 1) discounts.
//! - Only queries present in both run and qrels are evaluated; averages are arithmetic means over
//!   them (accumulated in the run's query order, see [`evaluate`]), or over all qrels queries with `-c`
//!   (`average_complete`), where qrels queries missing from the run score 0. The `num_*` counts
//!   are summed, not averaged.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::{EvalError, Qrels, Result, Run};

/// A measure family, named as trec_eval names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeasureKind {
    NdcgCut,
    P,
    Recall,
    Map,
    MapCut,
    RecipRank,
    Rprec,
    Success,
    SetP,
    SetRecall,
    SetF,
    NumRet,
    NumRel,
    NumRelRet,
}

impl MeasureKind {
    const ALL: [(&'static str, MeasureKind); 14] = [
        ("ndcg_cut", MeasureKind::NdcgCut),
        ("P", MeasureKind::P),
        ("recall", MeasureKind::Recall),
        ("map", MeasureKind::Map),
        ("map_cut", MeasureKind::MapCut),
        ("recip_rank", MeasureKind::RecipRank),
        ("Rprec", MeasureKind::Rprec),
        ("success", MeasureKind::Success),
        ("set_P", MeasureKind::SetP),
        ("set_recall", MeasureKind::SetRecall),
        ("set_F", MeasureKind::SetF),
        ("num_ret", MeasureKind::NumRet),
        ("num_rel", MeasureKind::NumRel),
        ("num_rel_ret", MeasureKind::NumRelRet),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, k)| *k == self).unwrap().0
    }

    fn has_cutoff(self) -> bool {
        matches!(
            self,
            MeasureKind::NdcgCut
                | MeasureKind::P
                | MeasureKind::Recall
                | MeasureKind::MapCut
                | MeasureKind::Success
        )
    }

    /// trec_eval's default cutoffs when none are given.
    fn default_cutoffs(self) -> &'static [usize] {
        match self {
            MeasureKind::Success => &[1, 5, 10],
            _ => &[5, 10, 15, 20, 30, 100, 200, 500, 1000],
        }
    }

    fn is_count(self) -> bool {
        matches!(
            self,
            MeasureKind::NumRet | MeasureKind::NumRel | MeasureKind::NumRelRet
        )
    }
}

/// One measure, e.g. `ndcg_cut_10` (kind NdcgCut, cutoff 10) or `map`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Measure {
    pub kind: MeasureKind,
    pub cutoff: Option<usize>,
}

impl Measure {
    pub fn new(kind: MeasureKind, cutoff: Option<usize>) -> Measure {
        Measure { kind, cutoff }
    }

    /// trec_eval's output name: `ndcg_cut_10`, `P_5`, `map`.
    pub fn name(&self) -> String {
        match self.cutoff {
            Some(k) => format!("{}_{k}", self.kind.name()),
            None => self.kind.name().to_string(),
        }
    }

    /// Parses one `-m` argument: `ndcg_cut.10,20`, `ndcg_cut_10`, `ndcg_cut` (default cutoffs),
    /// `P.5`, `map`, `recip_rank`, ...
    pub fn parse_list(spec: &str) -> Result<Vec<Measure>> {
        let spec = spec.trim();
        let bad = || EvalError::Usage(format!("unknown measure `{spec}`"));
        let (name, params) = match spec.split_once('.') {
            Some((n, p)) => (n, Some(p)),
            None => (spec, None),
        };
        // `ndcg_cut_10` spelling (trec_eval's output name).
        let (name, params) = match (MeasureKind::ALL.iter().find(|(n, _)| *n == name), params) {
            (Some(_), _) => (name, params.map(str::to_string)),
            (None, None) => match name.rsplit_once('_') {
                Some((n, k)) if k.chars().all(|c| c.is_ascii_digit()) && !k.is_empty() => {
                    (n, Some(k.to_string()))
                }
                _ => return Err(bad()),
            },
            (None, Some(_)) => return Err(bad()),
        };
        let kind = MeasureKind::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k)
            .ok_or_else(bad)?;
        if !kind.has_cutoff() {
            if params.is_some() {
                return Err(EvalError::Usage(format!(
                    "measure `{name}` takes no cutoff"
                )));
            }
            return Ok(vec![Measure::new(kind, None)]);
        }
        let cutoffs: Vec<usize> = match params {
            None => kind.default_cutoffs().to_vec(),
            Some(p) => p
                .split(',')
                .map(|c| match c.trim().parse::<usize>() {
                    Ok(k) if k > 0 => Ok(k),
                    _ => Err(EvalError::Usage(format!(
                        "cutoff `{c}` of `{spec}` is not a positive integer"
                    ))),
                })
                .collect::<Result<_>>()?,
        };
        Ok(cutoffs
            .into_iter()
            .map(|k| Measure::new(kind, Some(k)))
            .collect())
    }

    /// Parses several `-m` arguments, keeping the first of any repeated measure.
    pub fn parse_all<S: AsRef<str>>(specs: &[S]) -> Result<Vec<Measure>> {
        let mut out: Vec<Measure> = Vec::new();
        for s in specs {
            for m in Measure::parse_list(s.as_ref())? {
                if !out.contains(&m) {
                    out.push(m);
                }
            }
        }
        Ok(out)
    }

    /// The measures printed when none are asked for.
    pub fn defaults() -> Vec<Measure> {
        Measure::parse_all(&[
            "map",
            "recip_rank",
            "Rprec",
            "P.5,10,20",
            "recall.10,100,1000",
            "ndcg_cut.5,10,20,100",
            "map_cut.10,100",
            "success.1,5,10",
        ])
        .expect("valid default measures")
    }

    pub fn is_count(&self) -> bool {
        self.kind.is_count()
    }
}

/// Evaluation options (trec_eval's `-l` and `-c`).
#[derive(Debug, Clone, Copy)]
pub struct EvalOptions {
    /// Minimum grade of a relevant document for binary measures (`-l`, default 1).
    pub relevance_level: i64,
    /// Average over all qrels queries, missing ones scoring 0 (`-c`).
    pub average_complete: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            relevance_level: 1,
            average_complete: false,
        }
    }
}

/// Results: per-query values (queries evaluated, byte order) and the summary (`all`).
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub measures: Vec<Measure>,
    pub per_query: BTreeMap<String, Vec<f64>>,
    pub all: Vec<f64>,
    /// Number of queries the averages are over.
    pub num_q: usize,
}

/// Grade of a retrieved document: trec_eval's RELVALUE_NONPOOL for unjudged documents.
const NONPOOL: i64 = -1;
/// Grade of a document in the qrels with a negative grade (RELVALUE_UNJUDGED).
const UNJUDGED: i64 = -2;

/// The grades of a query's documents in ranked order (score descending, docid descending).
pub fn ranked_grades(docs: &[(String, f64)], judged: &HashMap<String, i64>) -> Vec<i64> {
    let mut order: Vec<&(String, f64)> = docs.iter().collect();
    order.sort_by(|a, b| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| b.0.as_bytes().cmp(a.0.as_bytes()))
    });
    order
        .iter()
        .map(|(d, _)| match judged.get(d) {
            Some(&r) if r >= 0 => r,
            Some(_) => UNJUDGED,
            None => NONPOOL,
        })
        .collect()
}

/// One query's values of `measures`, from its ranked grades and its judgments.
pub fn evaluate_query(
    grades: &[i64],
    judged: &HashMap<String, i64>,
    measures: &[Measure],
    level: i64,
) -> Vec<f64> {
    let num_rel = judged.values().filter(|&&r| r >= 0 && r >= level).count();
    // trec_eval compares the ranked grade itself (unjudged = -1/-2) with the level.
    let is_rel = |g: i64| g >= level;
    // Positive grades of the ideal ranking, highest first.
    let mut ideal: Vec<i64> = judged.values().copied().filter(|&r| r > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let num_rel_ret = grades.iter().filter(|&&g| g >= 0 && g >= level).count();
    let first_rel = grades.iter().position(|&g| is_rel(g));
    let rel_in_top = |k: usize| grades.iter().take(k).filter(|&&g| is_rel(g)).count();
    let dcg = |gains: &mut dyn Iterator<Item = i64>, k: usize| {
        let mut sum = 0.0f64;
        for (i, g) in gains.take(k).enumerate() {
            if g > 0 {
                sum += g as f64 / ((i + 2) as f64).log2();
            }
        }
        sum
    };
    let ap_upto = |k: usize| {
        let mut rel_so_far = 0usize;
        let mut sum = 0.0f64;
        for (i, &g) in grades.iter().take(k).enumerate() {
            if is_rel(g) {
                rel_so_far += 1;
                sum += rel_so_far as f64 / (i + 1) as f64;
            }
        }
        (rel_so_far, sum)
    };
    measures
        .iter()
        .map(|m| {
            let k = m.cutoff.unwrap_or(usize::MAX);
            match m.kind {
                MeasureKind::NdcgCut => {
                    let d = dcg(&mut grades.iter().copied(), k);
                    let i = dcg(&mut ideal.iter().copied(), k);
                    if i > 0.0 {
                        d / i
                    } else {
                        d
                    }
                }
                MeasureKind::P => rel_in_top(k) as f64 / k as f64,
                MeasureKind::Recall => {
                    if num_rel > 0 {
                        rel_in_top(k) as f64 / num_rel as f64
                    } else {
                        0.0
                    }
                }
                MeasureKind::Map | MeasureKind::MapCut => {
                    let (rel_so_far, sum) = ap_upto(k);
                    if rel_so_far > 0 && num_rel > 0 {
                        sum / num_rel as f64
                    } else {
                        0.0
                    }
                }
                MeasureKind::RecipRank => match first_rel {
                    Some(i) => 1.0 / (i + 1) as f64,
                    None => 0.0,
                },
                MeasureKind::Rprec => {
                    let r = rel_in_top(num_rel);
                    if r > 0 {
                        r as f64 / num_rel as f64
                    } else {
                        0.0
                    }
                }
                MeasureKind::Success => match first_rel {
                    Some(i) if i < k => 1.0,
                    _ => 0.0,
                },
                MeasureKind::SetP => {
                    if grades.is_empty() {
                        0.0
                    } else {
                        num_rel_ret as f64 / grades.len() as f64
                    }
                }
                MeasureKind::SetRecall => {
                    if num_rel > 0 {
                        num_rel_ret as f64 / num_rel as f64
                    } else {
                        0.0
                    }
                }
                MeasureKind::SetF => {
                    if num_rel_ret > 0 {
                        let p = num_rel_ret as f64 / grades.len() as f64;
                        let r = num_rel_ret as f64 / num_rel as f64;
                        (1.0 + 1.0) * p * r / (p + r)
                    } else {
                        0.0
                    }
                }
                MeasureKind::NumRet => grades.len() as f64,
                MeasureKind::NumRel => num_rel as f64,
                MeasureKind::NumRelRet => num_rel_ret as f64,
            }
        })
        .collect()
}

/// Evaluates `run` against `qrels`, as trec_eval does (see the module documentation).
pub fn evaluate(qrels: &Qrels, run: &Run, measures: &[Measure], opts: &EvalOptions) -> Evaluation {
    let mut per_query = BTreeMap::new();
    let mut sums = vec![0.0f64; measures.len()];
    // Sums accumulate in the run's query order: the averages then equal, to the last bit, the
    // mean of pytrec_eval's per-query dict that iKAT and other tooling publish (trec_eval sums in
    // qid order; the printed 4 decimals never differ).
    for (qid, docs) in run.iter() {
        let Some(judged) = qrels.get(qid) else {
            continue;
        };
        let grades = ranked_grades(docs, judged);
        let values = evaluate_query(&grades, judged, measures, opts.relevance_level);
        for (s, v) in sums.iter_mut().zip(&values) {
            *s += v;
        }
        per_query.insert(qid.to_string(), values);
    }
    let mut num_q = per_query.len();
    if opts.average_complete {
        for (qid, judged) in &qrels.queries {
            if !per_query.contains_key(qid) {
                let values = evaluate_query(&[], judged, measures, opts.relevance_level);
                for (s, v) in sums.iter_mut().zip(&values) {
                    *s += v;
                }
            }
        }
        num_q = qrels.len();
    }
    let all = measures
        .iter()
        .zip(&sums)
        .map(|(m, &s)| {
            if m.is_count() || num_q == 0 {
                s
            } else {
                s / num_q as f64
            }
        })
        .collect();
    Evaluation {
        measures: measures.to_vec(),
        per_query,
        all,
        num_q,
    }
}

fn trec_line(out: &mut String, m: &Measure, qid: &str, v: f64) {
    if m.is_count() {
        let _ = writeln!(out, "{:<22}\t{}\t{}", m.name(), qid, v as i64);
    } else {
        let _ = writeln!(out, "{:<22}\t{}\t{:.4}", m.name(), qid, v);
    }
}

impl Evaluation {
    /// The value of a measure in the summary, by trec_eval name (`ndcg_cut_10`).
    pub fn get(&self, name: &str) -> Option<f64> {
        self.measures
            .iter()
            .position(|m| m.name() == name)
            .map(|i| self.all[i])
    }

    /// trec_eval's text output: `measure<TAB>qid<TAB>value` with 4 decimals, per query (when
    /// asked) then `all`, preceded by `num_q`.
    pub fn to_trec_text(&self, per_query: bool) -> String {
        let mut out = String::new();
        if per_query {
            for (qid, values) in &self.per_query {
                for (m, &v) in self.measures.iter().zip(values) {
                    trec_line(&mut out, m, qid, v);
                }
            }
        }
        let _ = writeln!(out, "{:<22}\tall\t{}", "num_q", self.num_q);
        for (m, &v) in self.measures.iter().zip(&self.all) {
            trec_line(&mut out, m, "all", v);
        }
        out
    }

    /// `{"all": {measure: value}, "per_query": {qid: {measure: value}}}` at full precision.
    pub fn to_json(&self) -> Value {
        let obj = |values: &[f64]| {
            let mut m = Map::new();
            for (meas, &v) in self.measures.iter().zip(values) {
                let val = if meas.is_count() {
                    json!(v as i64)
                } else {
                    json!(v)
                };
                m.insert(meas.name(), val);
            }
            Value::Object(m)
        };
        let mut all = match obj(&self.all) {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        all.insert("num_q".into(), json!(self.num_q));
        let per_query: Map<String, Value> = self
            .per_query
            .iter()
            .map(|(q, v)| (q.clone(), obj(v)))
            .collect();
        json!({"all": all, "per_query": per_query})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::trec::{parse_qrels, parse_trec_run};
    use std::path::Path;

    fn eval(qrels: &str, run: &str, m: &[&str], level: i64) -> Evaluation {
        let q = parse_qrels(Path::new("q"), qrels).unwrap();
        let r = parse_trec_run(Path::new("r"), run).unwrap();
        let opts = EvalOptions {
            relevance_level: level,
            average_complete: false,
        };
        evaluate(&q, &r, &Measure::parse_all(m).unwrap(), &opts)
    }

    #[test]
    fn parses_measure_spellings() {
        let m = Measure::parse_all(&["ndcg_cut.10,20", "P_5", "map", "ndcg_cut_10"]).unwrap();
        let names: Vec<String> = m.iter().map(|m| m.name()).collect();
        assert_eq!(names, ["ndcg_cut_10", "ndcg_cut_20", "P_5", "map"]);
        assert_eq!(Measure::parse_list("success").unwrap().len(), 3);
        assert!(Measure::parse_list("map.5").is_err());
        assert!(Measure::parse_list("bogus").is_err());
        assert!(Measure::parse_list("P.0").is_err());
    }

    #[test]
    fn ties_broken_by_docid_descending() {
        // Same score: trec_eval ranks d2 before d1, whatever the rank column says.
        let e = eval(
            "q 0 d1 1\nq 0 d2 0\n",
            "q Q0 d1 1 5 t\nq Q0 d2 2 5 t\n",
            &["recip_rank", "P.1"],
            1,
        );
        assert_eq!(e.get("recip_rank"), Some(0.5));
        assert_eq!(e.get("P_1"), Some(0.0));
    }

    #[test]
    fn ndcg_linear_gains_ignore_relevance_level() {
        let qrels = "q 0 a 3\nq 0 b 1\nq 0 c 0\nq 0 d 2\n";
        let run = "q Q0 b 1 3 t\nq Q0 x 2 2 t\nq Q0 a 3 1 t\n";
        let dcg = 1.0 + 3.0 / 4f64.log2();
        let idcg = 3.0 + 2.0 / 3f64.log2() + 1.0 / 4f64.log2();
        for level in [1, 2] {
            let e = eval(qrels, run, &["ndcg_cut.3"], level);
            assert_eq!(e.get("ndcg_cut_3"), Some(dcg / idcg));
        }
        let e = eval(qrels, run, &["recall.3", "P.3", "map", "Rprec"], 2);
        assert_eq!(e.get("recall_3"), Some(0.5));
        assert_eq!(e.get("P_3"), Some(1.0 / 3.0));
        assert_eq!(e.get("map"), Some((1.0 / 3.0) / 2.0));
        assert_eq!(e.get("Rprec"), Some(0.0));
    }

    #[test]
    fn unjudged_queries_skipped_unless_complete() {
        let q = parse_qrels(Path::new("q"), "q1 0 a 1\nq2 0 b 1\n").unwrap();
        let r = parse_trec_run(Path::new("r"), "q1 Q0 a 1 1 t\nq3 Q0 b 1 1 t\n").unwrap();
        let m = Measure::parse_all(&["P.1", "num_rel"]).unwrap();
        let e = evaluate(&q, &r, &m, &EvalOptions::default());
        assert_eq!(e.num_q, 1);
        assert_eq!(e.all, vec![1.0, 1.0]);
        let e = evaluate(
            &q,
            &r,
            &m,
            &EvalOptions {
                relevance_level: 1,
                average_complete: true,
            },
        );
        assert_eq!(e.num_q, 2);
        assert_eq!(e.all, vec![0.5, 2.0]);
        let text = e.to_trec_text(true);
        assert!(
            text.contains("P_1                   \tq1\t1.0000\n"),
            "{text}"
        );
        assert!(text.contains("num_rel               \tall\t2\n"), "{text}");
    }

    #[test]
    fn four_decimals_round_like_printf() {
        // Exact binary ties round half to even, as glibc's printf("%.4f") in trec_eval.
        let mut out = String::new();
        let m = Measure::new(MeasureKind::P, Some(5));
        trec_line(&mut out, &m, "q", 0.03125);
        trec_line(&mut out, &m, "q", 0.09375);
        trec_line(&mut out, &m, "q", 0.99995);
        assert_eq!(
            out,
            "P_5                   \tq\t0.0312\nP_5                   \tq\t0.0938\nP_5                   \tq\t1.0000\n"
        );
    }
}
