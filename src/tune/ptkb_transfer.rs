//! Does a fitted correction on top of the zero-shot PTKB base
//! ([`crate::pipeline::ptkb_zero_shot`]) transfer to topics written by other people? iKAT 2023's
//! train and test topics were written apart, so fitting on one and ranking the other, both
//! ways, stands in for a later edition (whose topics are never read). The correction is a
//! logistic model over features that carry across editions: the base score, its standing within
//! the PTKB, and the separate cosines it sums; no words, no topic, no statement position. It is
//! kept only if it beats the base in both directions under every label source
//! (`convrag tune ptkb-transfer`).

use serde::Serialize;

use crate::eval::measures::Measure;
use crate::eval::ptkb::evaluate_ptkb;
use crate::eval::trec::{Qrels, Run};
use crate::formats::ikat::{distinct_turns, IkatTopic, RunType};
use crate::pipeline::context::ConversationContext;
use crate::pipeline::learned::LogisticModel;
use crate::pipeline::ptkb::{statement_cosines, TextSimilarity};
use crate::pipeline::ptkb_zero_shot::{ConversationCosines, ConversationWeights};
use crate::pipeline::{PipelineError, Result};
use crate::progress::Progress;

/// Features of the correction, per statement.
pub const CORRECTION_FEATURES: &[&str] = &[
    "zero_shot",
    "zero_shot_z",
    "zero_shot_gap",
    "cosine_utterance",
    "cosine_previous",
    "cosine_response",
    "cosine_first",
];

/// One turn: its statements' base scores and correction features.
#[derive(Debug, Clone)]
pub struct TransferTurn {
    pub key: String,
    pub ids: Vec<String>,
    pub base: Vec<f64>,
    pub features: Vec<Vec<f64>>,
}

/// Every turn of `topics` (automatic context) with the bi-encoder `model`.
pub fn transfer_turns(
    topics: &[IkatTopic],
    model: &dyn TextSimilarity,
    progress: &dyn Progress,
) -> Result<Vec<TransferTurn>> {
    progress.set_length(distinct_turns(topics).count() as u64);
    let weights = ConversationWeights::default();
    let mut out = Vec::new();
    for (topic, i) in distinct_turns(topics) {
        let ctx = ConversationContext::from_ikat(topic, i, RunType::Automatic)
            .expect("index within the topic's turns");
        let cos = ConversationCosines::of(&ctx, model)?;
        let first = if ctx.history.is_empty() {
            vec![0.0; ctx.ptkb.len()]
        } else {
            statement_cosines(model, Some(&ctx.history[0].utterance), &ctx)?
        };
        let base: Vec<f64> = cos.weighted(&weights).iter().map(|&x| x as f64).collect();
        let n = base.len().max(1) as f64;
        let mean = base.iter().sum::<f64>() / n;
        let sd = (base.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt() + 1e-6;
        let top = base.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let features = (0..base.len())
            .map(|j| {
                vec![
                    base[j],
                    (base[j] - mean) / sd,
                    base[j] - top,
                    cos.utterance[j] as f64,
                    cos.prior[0][j] as f64,
                    cos.response[j] as f64,
                    first[j] as f64,
                ]
            })
            .collect();
        out.push(TransferTurn {
            key: topic.turn_key(&topic.turns[i]),
            ids: ctx.ptkb.iter().map(|s| s.id.clone()).collect(),
            base,
            features,
        });
        progress.inc(1);
    }
    progress.finish();
    Ok(out)
}

/// Whether `qrels` judge the turn with some relevant statement (the turns nDCG counts).
fn judged(qrels: &Qrels, key: &str) -> bool {
    qrels
        .queries
        .get(key)
        .is_some_and(|j| j.values().any(|&r| r >= 1))
}

/// The correction fitted on the judged turns of `turns` (labels from `qrels`), L2 `l2`.
pub fn fit_correction(turns: &[TransferTurn], qrels: &Qrels, l2: f64) -> Result<LogisticModel> {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for t in turns.iter().filter(|t| judged(qrels, &t.key)) {
        let judged = &qrels.queries[&t.key];
        for (id, x) in t.ids.iter().zip(&t.features) {
            xs.push(x.clone());
            ys.push(judged.get(id).is_some_and(|&r| r >= 1));
        }
    }
    if !ys.contains(&true) {
        return Err(PipelineError::Input(
            "no relevant statement to fit the correction on".into(),
        ));
    }
    LogisticModel::fit(CORRECTION_FEATURES, &xs, &ys, l2)
}

/// Mean nDCG@3, over the turns `qrels` judge with some relevant statement, of every statement
/// ranked by `score` (ties keep PTKB order, as the served rankers do). A turn judged all
/// non-relevant has no nDCG; iKAT's PTKB qrels hold none.
pub fn ndcg_at_3(
    turns: &[TransferTurn],
    qrels: &Qrels,
    score: impl Fn(&TransferTurn) -> Vec<f64>,
) -> f64 {
    let qrels = Qrels {
        queries: qrels
            .queries
            .iter()
            .filter(|(k, _)| judged(qrels, k))
            .map(|(k, j)| (k.clone(), j.clone()))
            .collect(),
    };
    let run = Run::from_rankings(turns.iter().map(|t| {
        let s = score(t);
        let mut order: Vec<usize> = (0..t.ids.len()).collect();
        order.sort_by(|&a, &b| s[b].total_cmp(&s[a]));
        (
            t.key.clone(),
            order.iter().map(|&i| t.ids[i].clone()).collect(),
        )
    }));
    let measures = Measure::parse_all(&["ndcg_cut.3"]).expect("valid measure");
    evaluate_ptkb(&qrels, &run, &measures)
        .evaluation
        .get("ndcg_cut_3")
        .unwrap_or(0.0)
}

/// The base and the fitted correction on one held-out set under one label source.
#[derive(Debug, Clone, Serialize)]
pub struct TransferFigure {
    pub fitted_on: String,
    pub measured_on: String,
    pub labels: String,
    pub judged_turns: usize,
    pub base: f64,
    pub fitted: f64,
}

/// One direction: the correction fitted on `fit` (labels `fit_qrels`), measured against the base
/// on `report` under each `(name, qrels)` label source.
pub fn transfer_direction(
    (fit_name, fit, fit_qrels): (&str, &[TransferTurn], &Qrels),
    (report_name, report): (&str, &[TransferTurn]),
    labels: &[(String, Qrels)],
    l2: f64,
) -> Result<Vec<TransferFigure>> {
    let model = fit_correction(fit, fit_qrels, l2)?;
    Ok(labels
        .iter()
        .map(|(name, qrels)| TransferFigure {
            fitted_on: fit_name.to_string(),
            measured_on: report_name.to_string(),
            labels: name.clone(),
            judged_turns: report.iter().filter(|t| judged(qrels, &t.key)).count(),
            base: ndcg_at_3(report, qrels, |t| t.base.clone()),
            fitted: ndcg_at_3(report, qrels, |t| {
                t.features.iter().map(|x| model.probability(x)).collect()
            }),
        })
        .collect())
}

/// The rule: the correction is served only if it beats the base on every held-out figure.
pub fn correction_wins(figures: &[TransferFigure]) -> bool {
    !figures.is_empty() && figures.iter().all(|f| f.fitted > f.base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(key: &str, base: &[f64]) -> TransferTurn {
        TransferTurn {
            key: key.into(),
            ids: (1..=base.len()).map(|i| i.to_string()).collect(),
            base: base.to_vec(),
            features: base
                .iter()
                .map(|&b| {
                    let mut x = vec![0.0; CORRECTION_FEATURES.len()];
                    x[0] = b;
                    x[3] = -b;
                    x
                })
                .collect(),
        }
    }

    fn qrels(rows: &[(String, &str, i64)]) -> Qrels {
        let mut q = Qrels::default();
        for (k, d, r) in rows {
            q.insert(k, d, *r).unwrap();
        }
        q
    }

    #[test]
    fn ndcg_ranks_by_the_score_and_only_judged_turns_count() {
        let turns = [turn("a_1", &[0.1, 0.9]), turn("a_2", &[0.5, 0.2])];
        let q = qrels(&[
            ("a_1".into(), "2", 1),
            ("a_1".into(), "1", 0),
            ("a_2".into(), "1", 0),
        ]);
        assert!((ndcg_at_3(&turns, &q, |t| t.base.clone()) - 1.0).abs() < 1e-9);
        let reversed = ndcg_at_3(&turns, &q, |t| t.base.iter().map(|x| -x).collect());
        assert!((reversed - 1.0 / 3f64.log2()).abs() < 1e-9, "{reversed}");
    }

    #[test]
    fn the_correction_is_kept_only_if_it_wins_everywhere() {
        let f = |base, fitted| TransferFigure {
            fitted_on: String::new(),
            measured_on: String::new(),
            labels: String::new(),
            judged_turns: 1,
            base,
            fitted,
        };
        assert!(correction_wins(&[f(0.5, 0.6), f(0.4, 0.41)]));
        assert!(!correction_wins(&[f(0.5, 0.6), f(0.4, 0.39)]));
        assert!(!correction_wins(&[f(0.5, 0.5)]));
        assert!(!correction_wins(&[]));
    }

    #[test]
    fn a_correction_fits_and_reports_both_label_sources() {
        let turns: Vec<TransferTurn> = (0..6)
            .map(|i| turn(&format!("t_{i}"), &[0.2, 0.8, 0.5]))
            .collect();
        let rows: Vec<(String, &str, i64)> = (0..6)
            .flat_map(|i| {
                let k = format!("t_{i}");
                [
                    (k.clone(), "1", 0),
                    (k.clone(), "2", 1),
                    (k, "3", i64::from(i % 2 == 0)),
                ]
            })
            .collect();
        let q = qrels(&rows);
        let figures = transfer_direction(
            ("a", &turns, &q),
            ("b", &turns),
            &[("x".into(), q.clone()), ("y".into(), q.clone())],
            1.0,
        )
        .unwrap();
        assert_eq!(figures.len(), 2);
        assert_eq!(figures[0].judged_turns, 6);
        assert!(figures[0].fitted > 0.9 && figures[0].base > 0.9);
        assert!(fit_correction(&turns, &Qrels::default(), 1.0).is_err());
    }
}
