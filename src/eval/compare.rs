//! Comparing systems the way IR papers do: per measure the mean of each run, and for every pair of
//! runs a paired t-test, a paired randomization test ([`super::stats`]), Holm–Bonferroni
//! correction across the pairs, win/tie/loss counts and the topics with the largest differences.
//!
//! Per-topic values come from the evaluators themselves: ranking runs from
//! [`super::measures::evaluate`] (what `convrag eval ranking` prints), PTKB rankings from
//! [`super::ptkb::evaluate_ptkb`] (`convrag eval ptkb`), rewrites from
//! [`super::rewrite::evaluate_rewrites`] (`convrag eval rewrite`).
//!
//! **Topics**: a paired test needs one value per topic for every run, so the topics are all judged
//! topics — every qrels topic (trec_eval `-c`), every reference turn for rewrites — and a topic
//! missing from a run scores what an empty ranking (or an empty rewrite) scores there: 0 for every
//! measure offered. Run topics without judgments are skipped, as trec_eval skips them. The means
//! reported are then exactly `convrag eval ranking -c` (PTKB and rewrite evaluation always average
//! this way).
//!
//! **Direction**: for a pair (A, B), in the order the runs were given, differences are B − A per
//! topic; wins / ties / losses count topics where B is above / equal to / below A (equal: the
//! same value to the last bit, which identical rankings give). The t statistic is that of
//! `scipy.stats.ttest_rel(B, A)`.
//!
//! **Correction**: Holm–Bonferroni per measure and per test over all pairs (a family of
//! k(k − 1)/2 comparisons for k runs); with two runs the corrected values equal the raw ones.

use std::collections::{BTreeMap, HashSet};

use super::measures::{evaluate, evaluate_query, EvalOptions, Evaluation, Measure};
use super::ptkb::evaluate_ptkb;
use super::rewrite::{evaluate_rewrites, Texts};
use super::stats::{holm, paired_randomization_test, paired_t_test, RandomizationTest};
use super::{EvalError, Qrels, Result, Run};

/// What the runs rank or produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareKind {
    /// Passage or document rankings (`convrag eval ranking`).
    Ranking,
    /// PTKB statement rankings (`convrag eval ptkb`).
    Ptkb,
    /// Query rewrites, ROUGE-1 per turn (`convrag eval rewrite`).
    Rewrite,
}

impl CompareKind {
    pub fn name(self) -> &'static str {
        match self {
            CompareKind::Ranking => "ranking",
            CompareKind::Ptkb => "ptkb",
            CompareKind::Rewrite => "rewrite",
        }
    }
}

/// A ROUGE-1 component of a rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RougeMeasure {
    Recall,
    Precision,
    F1,
}

impl RougeMeasure {
    const ALL: [(&'static str, RougeMeasure); 3] = [
        ("rouge1_recall", RougeMeasure::Recall),
        ("rouge1_precision", RougeMeasure::Precision),
        ("rouge1_f1", RougeMeasure::F1),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .expect("listed")
            .0
    }

    /// Parses `rouge1_recall`, `rouge1_precision`, `rouge1_f1`.
    pub fn parse(s: &str) -> Result<RougeMeasure> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == s.trim())
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                EvalError::Usage(format!(
                    "unknown measure `{s}` (rewrites: rouge1_recall, rouge1_precision, rouge1_f1)"
                ))
            })
    }

    /// All three, in the order `convrag eval rewrite` prints them.
    pub fn all() -> Vec<RougeMeasure> {
        Self::ALL.iter().map(|(_, m)| *m).collect()
    }
}

/// One run's per-topic values.
#[derive(Debug, Clone)]
pub struct RunScores {
    pub name: String,
    /// `values[measure][topic]`, topics in [`ScoreTable::topics`] order.
    pub values: Vec<Vec<f64>>,
    /// The run's mean per measure, as the evaluator reports it.
    pub means: Vec<f64>,
    /// Judged topics the run has nothing for (scored as empty).
    pub missing_topics: usize,
}

/// Per-topic values of several runs over the same topics.
#[derive(Debug, Clone)]
pub struct ScoreTable {
    pub kind: CompareKind,
    pub measures: Vec<String>,
    /// Sorted (byte order).
    pub topics: Vec<String>,
    pub runs: Vec<RunScores>,
}

fn check_runs<T>(runs: &[(String, T)]) -> Result<()> {
    if runs.len() < 2 {
        return Err(EvalError::Usage(format!(
            "give at least two runs to compare (--run A --run B), got {}",
            runs.len()
        )));
    }
    let mut seen = HashSet::new();
    for (name, _) in runs {
        if !seen.insert(name.as_str()) {
            return Err(EvalError::Usage(format!("run `{name}` is given twice")));
        }
    }
    Ok(())
}

fn check_measures(measures: &[Measure]) -> Result<()> {
    if measures.is_empty() {
        return Err(EvalError::Usage("no measure to compare".into()));
    }
    if let Some(m) = measures.iter().find(|m| m.is_count()) {
        return Err(EvalError::Usage(format!(
            "`{}` is a count, not a per-topic score; compare a measure such as ndcg_cut.10",
            m.name()
        )));
    }
    Ok(())
}

/// Per-topic values over all qrels topics from an evaluation done with `average_complete`.
fn run_scores(
    name: &str,
    qrels: &Qrels,
    run: &Run,
    evaluation: Evaluation,
    level: i64,
) -> RunScores {
    let measures = &evaluation.measures;
    let mut per_topic = evaluation.per_query;
    let mut missing_topics = 0;
    for (qid, judged) in &qrels.queries {
        if run.get(qid).is_none() {
            missing_topics += 1;
        }
        per_topic
            .entry(qid.clone())
            .or_insert_with(|| evaluate_query(&[], judged, measures, level));
    }
    let values = (0..measures.len())
        .map(|m| qrels.queries.keys().map(|q| per_topic[q][m]).collect())
        .collect();
    RunScores {
        name: name.to_string(),
        values,
        means: evaluation.all,
        missing_topics,
    }
}

fn no_topics(kind: CompareKind) -> EvalError {
    EvalError::Usage(format!(
        "nothing to compare: the {} judgments have no topic",
        kind.name()
    ))
}

impl ScoreTable {
    /// Ranking runs against qrels (`convrag eval ranking -c -l level`).
    pub fn ranking(
        qrels: &Qrels,
        runs: &[(String, Run)],
        measures: &[Measure],
        level: i64,
    ) -> Result<ScoreTable> {
        check_runs(runs)?;
        check_measures(measures)?;
        if qrels.is_empty() {
            return Err(no_topics(CompareKind::Ranking));
        }
        let opts = EvalOptions {
            relevance_level: level,
            average_complete: true,
        };
        let runs = runs
            .iter()
            .map(|(name, run)| {
                let e = evaluate(qrels, run, measures, &opts);
                run_scores(name, qrels, run, e, level)
            })
            .collect();
        Ok(ScoreTable {
            kind: CompareKind::Ranking,
            measures: measures.iter().map(Measure::name).collect(),
            topics: qrels.queries.keys().cloned().collect(),
            runs,
        })
    }

    /// PTKB statement rankings against PTKB judgments (`convrag eval ptkb`).
    pub fn ptkb(qrels: &Qrels, runs: &[(String, Run)], measures: &[Measure]) -> Result<ScoreTable> {
        check_runs(runs)?;
        check_measures(measures)?;
        if qrels.is_empty() {
            return Err(no_topics(CompareKind::Ptkb));
        }
        let runs = runs
            .iter()
            .map(|(name, run)| {
                let report = evaluate_ptkb(qrels, run, measures);
                run_scores(name, qrels, run, report.evaluation, 1)
            })
            .collect();
        Ok(ScoreTable {
            kind: CompareKind::Ptkb,
            measures: measures.iter().map(Measure::name).collect(),
            topics: qrels.queries.keys().cloned().collect(),
            runs,
        })
    }

    /// Rewrites against reference rewrites, ROUGE-1 per turn (`convrag eval rewrite`).
    pub fn rewrite(
        reference: &Texts,
        runs: &[(String, Texts)],
        measures: &[RougeMeasure],
        stem: bool,
    ) -> Result<ScoreTable> {
        check_runs(runs)?;
        if measures.is_empty() {
            return Err(EvalError::Usage("no measure to compare".into()));
        }
        if reference.is_empty() {
            return Err(no_topics(CompareKind::Rewrite));
        }
        let mut topics = Vec::new();
        let runs = runs
            .iter()
            .map(|(name, texts)| {
                let report = evaluate_rewrites(reference, texts, stem);
                if topics.is_empty() {
                    topics = report.per_turn.keys().cloned().collect();
                }
                let pick = |m: RougeMeasure, s: &super::rouge::RougeScore| match m {
                    RougeMeasure::Recall => s.recall,
                    RougeMeasure::Precision => s.precision,
                    RougeMeasure::F1 => s.fmeasure,
                };
                RunScores {
                    name: name.clone(),
                    values: measures
                        .iter()
                        .map(|&m| report.per_turn.values().map(|s| pick(m, s)).collect())
                        .collect(),
                    means: measures.iter().map(|&m| pick(m, &report.all)).collect(),
                    missing_topics: report.missing,
                }
            })
            .collect();
        Ok(ScoreTable {
            kind: CompareKind::Rewrite,
            measures: measures.iter().map(|m| m.name().to_string()).collect(),
            topics,
            runs,
        })
    }
}

/// Test settings.
#[derive(Debug, Clone, Copy)]
pub struct CompareOptions {
    /// Random sign assignments of the randomization test.
    pub permutations: u64,
    pub seed: u64,
    /// Topics with the largest absolute differences listed per pair and measure.
    pub top: usize,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            permutations: 10_000,
            seed: 42,
            top: 5,
        }
    }
}

/// Run B against run A on one measure.
#[derive(Debug, Clone)]
pub struct PairComparison {
    /// Run indices (A before B in the order given).
    pub a: usize,
    pub b: usize,
    /// Per topic B − A, in topic order.
    pub deltas: Vec<f64>,
    pub mean_delta: f64,
    pub t_statistic: Option<f64>,
    pub t_test_p: Option<f64>,
    pub t_test_p_holm: Option<f64>,
    pub randomization: RandomizationTest,
    pub randomization_p_holm: f64,
    pub wins: usize,
    pub ties: usize,
    pub losses: usize,
    /// Topic indices with the largest |B − A| (non-zero only), largest first.
    pub largest: Vec<usize>,
}

/// One measure across all runs and pairs.
#[derive(Debug, Clone)]
pub struct MeasureComparison {
    pub measure: String,
    /// Per run (in the order given).
    pub means: Vec<f64>,
    pub pairs: Vec<PairComparison>,
}

/// The whole comparison.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub table: ScoreTable,
    pub options: CompareOptions,
    pub measures: Vec<MeasureComparison>,
}

/// Compares every pair of runs on every measure of `table`.
pub fn compare(table: ScoreTable, options: CompareOptions) -> Result<Comparison> {
    if table.runs.len() < 2 {
        return Err(EvalError::Usage(format!(
            "give at least two runs to compare, got {}",
            table.runs.len()
        )));
    }
    if options.permutations == 0 {
        return Err(EvalError::Usage("--permutations must be at least 1".into()));
    }
    let k = table.runs.len();
    let measures = (0..table.measures.len())
        .map(|m| {
            let mut pairs: Vec<PairComparison> = (0..k)
                .flat_map(|a| (a + 1..k).map(move |b| (a, b)))
                .map(|(a, b)| compare_pair(&table, m, a, b, &options))
                .collect();
            let t_holm = holm(&pairs.iter().map(|p| p.t_test_p).collect::<Vec<_>>());
            let r_holm = holm(
                &pairs
                    .iter()
                    .map(|p| Some(p.randomization.p))
                    .collect::<Vec<_>>(),
            );
            for (p, (t, r)) in pairs.iter_mut().zip(t_holm.into_iter().zip(r_holm)) {
                p.t_test_p_holm = t;
                p.randomization_p_holm = r.expect("every randomization p-value is defined");
            }
            MeasureComparison {
                measure: table.measures[m].clone(),
                means: table.runs.iter().map(|r| r.means[m]).collect(),
                pairs,
            }
        })
        .collect();
    Ok(Comparison {
        table,
        options,
        measures,
    })
}

fn compare_pair(
    table: &ScoreTable,
    m: usize,
    a: usize,
    b: usize,
    options: &CompareOptions,
) -> PairComparison {
    let (va, vb) = (&table.runs[a].values[m], &table.runs[b].values[m]);
    let deltas: Vec<f64> = va.iter().zip(vb).map(|(x, y)| y - x).collect();
    let t = paired_t_test(&deltas);
    let randomization = paired_randomization_test(&deltas, options.permutations, options.seed);
    let wins = va.iter().zip(vb).filter(|(x, y)| y > x).count();
    let losses = va.iter().zip(vb).filter(|(x, y)| y < x).count();
    let mut largest: Vec<usize> = (0..deltas.len()).filter(|&i| deltas[i] != 0.0).collect();
    // Largest |difference| first; equal ones by topic order.
    largest.sort_by(|&i, &j| deltas[j].abs().total_cmp(&deltas[i].abs()).then(i.cmp(&j)));
    largest.truncate(options.top);
    let mean_delta = if deltas.is_empty() {
        0.0
    } else {
        deltas.iter().sum::<f64>() / deltas.len() as f64
    };
    PairComparison {
        a,
        b,
        mean_delta,
        t_statistic: t.t,
        t_test_p: t.p,
        t_test_p_holm: t.p,
        randomization,
        randomization_p_holm: randomization.p,
        wins,
        ties: deltas.len() - wins - losses,
        losses,
        largest,
        deltas,
    }
}

impl Comparison {
    pub fn run_names(&self) -> Vec<&str> {
        self.table.runs.iter().map(|r| r.name.as_str()).collect()
    }

    /// Per run, measure name → topic → value (what the tests saw).
    pub fn per_topic(&self, run: usize) -> BTreeMap<&str, BTreeMap<&str, f64>> {
        let r = &self.table.runs[run];
        self.table
            .measures
            .iter()
            .zip(&r.values)
            .map(|(m, v)| {
                (
                    m.as_str(),
                    self.table
                        .topics
                        .iter()
                        .map(String::as_str)
                        .zip(v.iter().copied())
                        .collect(),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::trec::{parse_qrels, parse_trec_run};
    use std::path::Path;

    fn table() -> ScoreTable {
        let q = parse_qrels(
            Path::new("q"),
            "t1 0 a 1\nt1 0 b 0\nt2 0 c 1\nt3 0 d 1\nt3 0 e 1\n",
        )
        .unwrap();
        // A finds a (t1) and c (t2); B finds a late, misses t2, has t3; C equals A.
        let a = parse_trec_run(Path::new("a"), "t1 Q0 a 1 2 x\nt2 Q0 c 1 1 x\n").unwrap();
        let b = parse_trec_run(
            Path::new("b"),
            "t1 Q0 b 1 2 x\nt1 Q0 a 2 1 x\nt3 Q0 d 1 2 x\nt3 Q0 e 2 1 x\nt9 Q0 z 1 1 x\n",
        )
        .unwrap();
        let runs = vec![
            ("A".to_string(), a.clone()),
            ("B".to_string(), b),
            ("C".to_string(), a),
        ];
        let m = Measure::parse_all(&["recip_rank", "P.1"]).unwrap();
        ScoreTable::ranking(&q, &runs, &m, 1).unwrap()
    }

    #[test]
    fn missing_topics_score_zero_and_means_match_eval_c() {
        let t = table();
        assert_eq!(t.topics, ["t1", "t2", "t3"]);
        assert_eq!(t.runs[0].values[0], [1.0, 1.0, 0.0]);
        assert_eq!(t.runs[1].values[0], [0.5, 0.0, 1.0]);
        assert_eq!((t.runs[0].missing_topics, t.runs[1].missing_topics), (1, 1));
        assert_eq!(t.runs[1].means[0], 0.5);
        assert_eq!(t.runs[0].means[1], 2.0 / 3.0);
    }

    #[test]
    fn pairs_deltas_counts_and_holm() {
        let c = compare(
            table(),
            CompareOptions {
                permutations: 1000,
                seed: 1,
                top: 2,
            },
        )
        .unwrap();
        let rr = &c.measures[0];
        assert_eq!(rr.pairs.len(), 3);
        let ab = &rr.pairs[0];
        assert_eq!((ab.a, ab.b), (0, 1));
        assert_eq!(ab.deltas, [-0.5, -1.0, 1.0]);
        assert_eq!((ab.wins, ab.ties, ab.losses), (1, 0, 2));
        assert_eq!(ab.largest, [1, 2]);
        // Exact: sums of ±0.5 ±1 ±1 with |sum| ≥ 0.5: all 8.
        assert!(ab.randomization.exact);
        assert_eq!(ab.randomization.p, 1.0);
        // A against its copy: no difference, t-test undefined, randomization p = 1.
        let ac = &rr.pairs[1];
        assert_eq!((ac.a, ac.b, ac.ties), (0, 2, 3));
        assert_eq!((ac.t_test_p, ac.t_test_p_holm), (None, None));
        assert!(ac.largest.is_empty());
        // Holm over the two defined t-test p-values: B − C mirrors B − A, so both p-values are
        // equal and both adjust to twice their value.
        let p = ab.t_test_p.unwrap();
        assert_eq!(rr.pairs[2].t_test_p, Some(p));
        assert_eq!(ab.t_test_p_holm, Some((2.0 * p).min(1.0)));
        assert_eq!(rr.pairs[2].t_test_p_holm, Some((2.0 * p).min(1.0)));
        assert_eq!(rr.pairs[2].randomization_p_holm, 1.0);
    }

    #[test]
    fn refuses_too_few_runs_counts_and_duplicates() {
        let q = parse_qrels(Path::new("q"), "t1 0 a 1\n").unwrap();
        let r = Run::default();
        let m = Measure::parse_all(&["map"]).unwrap();
        let one = vec![("A".to_string(), r.clone())];
        let e = ScoreTable::ranking(&q, &one, &m, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least two runs"), "{e}");
        let twice = vec![("A".to_string(), r.clone()), ("A".to_string(), r.clone())];
        let e = ScoreTable::ranking(&q, &twice, &m, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`A` is given twice"), "{e}");
        let two = vec![("A".to_string(), r.clone()), ("B".to_string(), r)];
        let counts = Measure::parse_all(&["num_rel"]).unwrap();
        let e = ScoreTable::ranking(&q, &two, &counts, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`num_rel` is a count"), "{e}");
        assert!(RougeMeasure::parse("rouge2").is_err());
    }
}
