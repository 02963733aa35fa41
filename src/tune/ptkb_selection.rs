//! `convrag tune ptkb-selection`, library half: fits the calibrated PTKB ranker
//! ([`crate::pipeline::ptkb_calibrated`]) and measures it by cross-validation by topic.
//!
//! Labels: a statement is relevant to a turn when the turn's `ptkb_provenance` lists it. Every
//! turn is an example, so a turn whose provenance is empty teaches that nothing is relevant
//! (the organizers' qrels leave such turns unjudged; ranking figures use those qrels, selection
//! figures report both). Per fold a logistic model is fitted on the other folds; the held-out
//! log-odds of all folds are the data of Platt scaling. A turn's cross-validated probability
//! comes from its fold's model calibrated by a Platt fit on the *other* folds' held-out
//! log-odds, so no figure is measured on a turn that fitted any part of its model. The L2 weight
//! is chosen by cross-validated log loss, the absolute threshold by cross-validated micro F1 over
//! every turn (a statement selected where nothing is relevant counts against it).
//!
//! The turn model (does the turn need any statement, from `TURN_FEATURES`) is fitted on every
//! turn of the other folds likewise; a turn's probability is the product of the two. The prior
//! shift (the label shift from iKAT's large PTKBs to small ones) is the one choice iKAT cannot
//! inform: it is chosen on made-up small-PTKB development turns ([`tune_prior_shift`]).

use serde::{Deserialize, Serialize};

use super::folds::topic_folds;
use crate::eval::measures::Measure;
use crate::eval::ptkb::evaluate_ptkb;
use crate::eval::trec::{Qrels, Run};
use crate::formats::ikat::{distinct_turns, IkatTopic, RunType};
use crate::pipeline::context::{ConversationContext, HistoryTurn, PtkbStatement};
use crate::pipeline::learned::LogisticModel;
use crate::pipeline::ptkb::TextSimilarity;
use crate::pipeline::ptkb_calibrated::{
    calibrated_features, log_odds, sigmoid, turn_features, CalibratedModel, TURN_FEATURES,
};
use crate::pipeline::{PipelineError, Result};
use crate::progress::Progress;

/// One turn: its statements' features and labels (automatic run).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SelectionTurn {
    /// Topic number (folds group by topic).
    pub conversation: String,
    pub key: String,
    /// Statement ids in PTKB order; rows of `features` and `relevant` likewise.
    pub ids: Vec<String>,
    pub features: Vec<Vec<f64>>,
    /// `TURN_FEATURES` of the turn.
    pub turn_features: Vec<f64>,
    pub relevant: Vec<bool>,
    /// Which topics file (`--train` position) the turn comes from.
    pub set: usize,
}

/// Features and labels of every turn of `topics` (the bi-encoder, when given, is the costly part).
pub fn selection_turns(
    topics: &[IkatTopic],
    similarity: Option<&dyn TextSimilarity>,
    set: usize,
    progress: &dyn Progress,
) -> Result<Vec<SelectionTurn>> {
    progress.set_length(distinct_turns(topics).count() as u64);
    let mut out = Vec::new();
    for (topic, i) in distinct_turns(topics) {
        let turn = &topic.turns[i];
        let ctx = ConversationContext::from_ikat(topic, i, RunType::Automatic)
            .expect("index within the topic's turns");
        let ids: Vec<String> = ctx.ptkb.iter().map(|s| s.id.clone()).collect();
        out.push(SelectionTurn {
            conversation: topic.number.clone(),
            key: topic.turn_key(turn),
            relevant: ids
                .iter()
                .map(|id| turn.ptkb_provenance.contains(id))
                .collect(),
            ids,
            features: calibrated_features(&ctx, similarity)?,
            turn_features: turn_features(&ctx),
            set,
        });
        progress.inc(1);
    }
    progress.finish();
    Ok(out)
}

/// Made-up turns with small PTKBs (`tests/fixtures/ptkb/small*.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct SmallPtkbFile {
    pub turns: Vec<SmallPtkbTurn>,
}

/// One made-up turn: earlier utterances, the utterance, the statements and the 0-based indices
/// of the relevant ones.
#[derive(Debug, Clone, Deserialize)]
pub struct SmallPtkbTurn {
    pub history: Vec<String>,
    pub utterance: String,
    pub ptkb: Vec<String>,
    pub relevant: Vec<usize>,
}

impl SmallPtkbTurn {
    /// The turn as the pipeline sees it (statement ids are the 0-based indices).
    pub fn context(&self) -> ConversationContext {
        ConversationContext {
            utterance: self.utterance.clone(),
            history: self
                .history
                .iter()
                .map(|u| HistoryTurn {
                    utterance: u.clone(),
                    response: None,
                })
                .collect(),
            ptkb: self
                .ptkb
                .iter()
                .enumerate()
                .map(|(i, s)| PtkbStatement {
                    id: i.to_string(),
                    text: s.clone(),
                })
                .collect(),
            manual_rewrite: None,
            instructions: None,
        }
    }
}

/// Features and labels of made-up small-PTKB turns; a relevant index outside the PTKB is refused,
/// naming the turn.
pub fn small_ptkb_turns(
    file: &SmallPtkbFile,
    similarity: Option<&dyn TextSimilarity>,
) -> Result<Vec<SelectionTurn>> {
    file.turns
        .iter()
        .enumerate()
        .map(|(n, t)| {
            if let Some(i) = t.relevant.iter().find(|i| **i >= t.ptkb.len()) {
                return Err(PipelineError::Input(format!(
                    "turn {} ({:?}): relevant statement {i} of {}",
                    n + 1,
                    t.utterance,
                    t.ptkb.len()
                )));
            }
            let ctx = t.context();
            Ok(SelectionTurn {
                conversation: format!("dev{}", n + 1),
                key: format!("dev{}", n + 1),
                ids: (0..t.ptkb.len()).map(|i| i.to_string()).collect(),
                features: calibrated_features(&ctx, similarity)?,
                turn_features: turn_features(&ctx),
                relevant: (0..t.ptkb.len()).map(|i| t.relevant.contains(&i)).collect(),
                set: 0,
            })
        })
        .collect()
}

/// Which turns the models are fitted on (every turn is predicted and measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrainOn {
    /// Every turn: an empty `ptkb_provenance` means nothing is relevant.
    AllTurns,
    /// Only turns whose provenance lists a statement (the organizers' judged turns).
    JudgedTurns,
}

impl TrainOn {
    fn includes(self, t: &SelectionTurn) -> bool {
        self == TrainOn::AllTurns || t.relevant.iter().any(|r| *r)
    }
}

/// L2 weights tried; thresholds tried (absolute probabilities).
#[derive(Debug, Clone)]
pub struct SelectionGrid {
    pub l2: Vec<f64>,
    pub thresholds: Vec<f64>,
    pub train_on: TrainOn,
    /// Prior shifts tried on development turns ([`tune_prior_shift`]).
    pub prior_shifts: Vec<f64>,
}

impl Default for SelectionGrid {
    fn default() -> Self {
        SelectionGrid {
            l2: vec![0.1, 1.0, 10.0, 100.0],
            thresholds: (1..=16).map(|i| i as f64 * 0.05).collect(),
            train_on: TrainOn::AllTurns,
            prior_shifts: (0..=12).map(|i| i as f64 * 0.25).collect(),
        }
    }
}

/// The outcome of [`tune_selection`].
#[derive(Debug, Clone, Serialize)]
pub struct SelectionTuning {
    pub train_on: TrainOn,
    pub folds: usize,
    pub turns: usize,
    pub statements: usize,
    pub positives: usize,
    pub l2: f64,
    /// Cross-validated mean log loss of the calibrated probabilities at the chosen L2.
    pub log_loss: f64,
    /// The final model: fitted on every turn, Platt scaling on every fold's held-out log-odds.
    pub model: CalibratedModel,
    /// Cross-validated micro precision, recall and F1 over every turn at each threshold tried.
    pub by_threshold: Vec<(f64, f64, f64, f64)>,
    /// Cross-validated probabilities (turn model times calibrated statement model, no prior
    /// shift), per turn (in input order) and statement.
    #[serde(skip)]
    pub cv_probabilities: Vec<Vec<f64>>,
    /// Their two factors: the calibrated statement probabilities and the turn probabilities.
    #[serde(skip)]
    pub cv_statement: Vec<Vec<f64>>,
    #[serde(skip)]
    pub cv_turn: Vec<f64>,
}

impl SelectionTuning {
    /// The cross-validated probabilities with `prior_shift` added to the statements' log-odds.
    pub fn cv_probabilities_shifted(&self, prior_shift: f64) -> Vec<Vec<f64>> {
        combine(&self.cv_statement, &self.cv_turn, prior_shift)
    }
}

/// Turn probability times statement probability (its log-odds shifted by `prior_shift`).
fn combine(statement: &[Vec<f64>], turn: &[f64], prior_shift: f64) -> Vec<Vec<f64>> {
    statement
        .iter()
        .zip(turn)
        .map(|(ps, t)| {
            ps.iter()
                .map(|p| t * sigmoid(log_odds(*p) + prior_shift))
                .collect()
        })
        .collect()
}

/// The turn model: whether any statement of the turn is relevant, from its `TURN_FEATURES`
/// (two features, hundreds of turns: a negligible L2).
fn fit_turn_model<'a>(turns: impl Iterator<Item = &'a SelectionTurn>) -> Result<LogisticModel> {
    let (xs, ys): (Vec<Vec<f64>>, Vec<bool>) = turns
        .map(|t| (t.turn_features.clone(), t.relevant.iter().any(|r| *r)))
        .unzip();
    LogisticModel::fit(TURN_FEATURES, &xs, &ys, 1e-3)
}

fn examples<'a>(turns: impl Iterator<Item = &'a SelectionTurn>) -> (Vec<Vec<f64>>, Vec<bool>) {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for t in turns {
        xs.extend(t.features.iter().cloned());
        ys.extend(t.relevant.iter().copied());
    }
    (xs, ys)
}

/// Platt scaling: a one-feature logistic model over log-odds (a negligible L2: two parameters
/// are not overfitted by hundreds of examples).
fn fit_platt(log_odds: &[f64], labels: &[bool]) -> Result<LogisticModel> {
    let xs: Vec<Vec<f64>> = log_odds.iter().map(|z| vec![*z]).collect();
    LogisticModel::fit(&["log_odds"], &xs, labels, 1e-3)
}

/// One value per statement of each turn.
type PerStatement = Vec<Vec<f64>>;

/// Held-out calibrated statement probabilities at one L2, and the fold models' held-out
/// log-odds.
fn cross_validate(
    turns: &[SelectionTurn],
    fold_of: &[usize],
    folds: usize,
    names: &[&str],
    l2: f64,
    train_on: TrainOn,
) -> Result<(PerStatement, PerStatement)> {
    let mut odds: Vec<Vec<f64>> = vec![Vec::new(); turns.len()];
    for fold in 0..folds {
        let (xs, ys) = examples(
            turns
                .iter()
                .zip(fold_of)
                .filter(|(t, f)| **f != fold && train_on.includes(t))
                .map(|(t, _)| t),
        );
        let model = LogisticModel::fit(names, &xs, &ys, l2)?;
        for (i, t) in turns.iter().enumerate() {
            if fold_of[i] == fold {
                odds[i] = t
                    .features
                    .iter()
                    .map(|x| log_odds(model.probability(x)))
                    .collect();
            }
        }
    }
    let mut probabilities: Vec<Vec<f64>> = vec![Vec::new(); turns.len()];
    for fold in 0..folds {
        let (mut zs, mut ys) = (Vec::new(), Vec::new());
        for (i, t) in turns.iter().enumerate() {
            if fold_of[i] != fold && train_on.includes(t) {
                zs.extend(odds[i].iter().copied());
                ys.extend(t.relevant.iter().copied());
            }
        }
        let platt = fit_platt(&zs, &ys)?;
        for i in 0..turns.len() {
            if fold_of[i] == fold {
                probabilities[i] = odds[i].iter().map(|z| platt.probability(&[*z])).collect();
            }
        }
    }
    Ok((probabilities, odds))
}

/// Held-out turn probabilities: each fold's from the turn model fitted on the other folds.
fn cross_validate_turns(
    turns: &[SelectionTurn],
    fold_of: &[usize],
    folds: usize,
) -> Result<Vec<f64>> {
    let mut out = vec![0.0; turns.len()];
    for fold in 0..folds {
        let model = fit_turn_model(
            turns
                .iter()
                .zip(fold_of)
                .filter(|(_, f)| **f != fold)
                .map(|(t, _)| t),
        )?;
        for (i, t) in turns.iter().enumerate() {
            if fold_of[i] == fold {
                out[i] = model.probability(&t.turn_features);
            }
        }
    }
    Ok(out)
}

fn mean_log_loss(turns: &[SelectionTurn], probabilities: &[Vec<f64>], train_on: TrainOn) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for (t, ps) in turns.iter().zip(probabilities) {
        if !train_on.includes(t) {
            continue;
        }
        for (&y, &p) in t.relevant.iter().zip(ps) {
            let p = p.clamp(1e-12, 1.0 - 1e-12);
            sum -= if y { p.ln() } else { (1.0 - p).ln() };
            n += 1;
        }
    }
    sum / n.max(1) as f64
}

/// Fits the calibrated model on `turns` (training topics only) with `folds`-fold cross-validation
/// by topic over `grid`.
pub fn tune_selection(
    turns: &[SelectionTurn],
    names: &[&str],
    folds: usize,
    grid: &SelectionGrid,
) -> Result<SelectionTuning> {
    if turns.is_empty() || folds < 2 || grid.l2.is_empty() || grid.thresholds.is_empty() {
        return Err(PipelineError::Input(
            "selection tuning needs turns, at least 2 folds and a non-empty grid".into(),
        ));
    }
    let ids: Vec<String> = turns.iter().map(|t| t.conversation.clone()).collect();
    let fold_of = topic_folds(&ids, folds);
    let mut best: Option<(f64, f64, PerStatement, PerStatement)> = None;
    for &l2 in &grid.l2 {
        let (probabilities, odds) =
            cross_validate(turns, &fold_of, folds, names, l2, grid.train_on)?;
        let loss = mean_log_loss(turns, &probabilities, grid.train_on);
        if best.as_ref().is_none_or(|b| loss < b.1 - 1e-12) {
            best = Some((l2, loss, probabilities, odds));
        }
    }
    let (l2, log_loss, statement, odds) = best.expect("a non-empty grid");
    let turn_probabilities = cross_validate_turns(turns, &fold_of, folds)?;
    let probabilities = combine(&statement, &turn_probabilities, 0.0);
    let labels = all_turn_qrels(turns.iter());
    let mut threshold = grid.thresholds[0];
    let mut best_f = -1.0;
    let mut by_threshold = Vec::new();
    for &t in &grid.thresholds {
        let micro =
            evaluate_ptkb(&labels, &selected_run(turns.iter(), &probabilities, t), &[]).micro;
        by_threshold.push((t, micro.precision(), micro.recall(), micro.f1()));
        if micro.f1() > best_f + 1e-12 {
            (threshold, best_f) = (t, micro.f1());
        }
    }
    let (xs, ys) = examples(turns.iter().filter(|t| grid.train_on.includes(t)));
    let zs: Vec<f64> = turns
        .iter()
        .zip(&odds)
        .filter(|(t, _)| grid.train_on.includes(t))
        .flat_map(|(_, z)| z.iter().copied())
        .collect();
    let model = CalibratedModel {
        model: LogisticModel::fit(names, &xs, &ys, l2)?,
        platt: fit_platt(&zs, &ys)?,
        turn: fit_turn_model(turns.iter())?,
        prior_shift: 0.0,
        threshold,
    };
    Ok(SelectionTuning {
        train_on: grid.train_on,
        folds,
        turns: turns.len(),
        statements: xs.len(),
        positives: ys.iter().filter(|y| **y).count(),
        l2,
        log_loss,
        model,
        by_threshold,
        cv_probabilities: probabilities,
        cv_statement: statement,
        cv_turn: turn_probabilities,
    })
}

/// Selection on development turns at one prior shift.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ShiftFigures {
    pub prior_shift: f64,
    pub micro_p: f64,
    pub micro_recall: f64,
    pub micro_f: f64,
    /// Turns where nothing is relevant and something was selected.
    pub selected_where_none: usize,
}

/// The prior shift for small PTKBs: the one of `shifts` whose selection on the made-up `dev`
/// turns (at `model`'s threshold) has the best micro F1 among those selecting nothing where
/// nothing is relevant (the smallest on ties; 0 when none does). Returns it with every shift's
/// figures.
pub fn tune_prior_shift(
    model: &CalibratedModel,
    dev: &[SelectionTurn],
    shifts: &[f64],
) -> (f64, Vec<ShiftFigures>) {
    let labels = all_turn_qrels(dev.iter());
    let mut figures = Vec::new();
    let (mut chosen, mut best_f) = (0.0, -1.0);
    for &shift in shifts {
        let shifted = CalibratedModel {
            prior_shift: shift,
            ..model.clone()
        };
        let refs: Vec<&SelectionTurn> = dev.iter().collect();
        let probabilities = model_probabilities(&refs, &shifted);
        let selected = selected_run(dev.iter(), &probabilities, model.threshold);
        let micro = evaluate_ptkb(&labels, &selected, &[]).micro;
        let selected_where_none = dev
            .iter()
            .filter(|t| !t.relevant.iter().any(|r| *r))
            .filter(|t| selected.get(&t.key).is_some_and(|d| !d.is_empty()))
            .count();
        let f = ShiftFigures {
            prior_shift: shift,
            micro_p: micro.precision(),
            micro_recall: micro.recall(),
            micro_f: micro.f1(),
            selected_where_none,
        };
        if selected_where_none == 0 && f.micro_f > best_f + 1e-12 {
            (chosen, best_f) = (shift, f.micro_f);
        }
        figures.push(f);
    }
    (chosen, figures)
}

/// Qrels of every turn: each statement judged, relevant when listed (a turn with nothing
/// relevant is kept, so selections there count in the micro figures).
pub fn all_turn_qrels<'a>(turns: impl Iterator<Item = &'a SelectionTurn>) -> Qrels {
    let mut q = Qrels::default();
    for t in turns {
        for (id, &r) in t.ids.iter().zip(&t.relevant) {
            let _ = q.insert(&t.key, id, i64::from(r));
        }
    }
    q
}

/// The organizers' qrels of `turns`: only turns with a relevant statement are judged.
pub fn judged_turn_qrels<'a>(turns: impl Iterator<Item = &'a SelectionTurn>) -> Qrels {
    all_turn_qrels(turns.filter(|t| t.relevant.iter().any(|r| *r)))
}

/// Statements at or above `threshold`, best first, per turn.
fn selected_run<'a>(
    turns: impl Iterator<Item = &'a SelectionTurn>,
    probabilities: &[Vec<f64>],
    threshold: f64,
) -> Run {
    Run::from_rankings(turns.zip(probabilities).map(|(t, ps)| {
        let ids: Vec<String> = ranked(t, ps)
            .into_iter()
            .filter(|(p, _)| *p >= threshold)
            .map(|(_, id)| id)
            .collect();
        (t.key.clone(), ids)
    }))
}

/// A turn's statements by decreasing probability (ties keep PTKB order, as the ranker does).
fn ranked(t: &SelectionTurn, probabilities: &[f64]) -> Vec<(f64, String)> {
    let mut v: Vec<(f64, String)> = probabilities
        .iter()
        .copied()
        .zip(t.ids.iter().cloned())
        .collect();
    v.sort_by(|a, b| b.0.total_cmp(&a.0));
    v
}

/// Ranking and selection figures of probabilities on a set of turns.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SelectionFigures {
    /// nDCG@3 of the ranking against each qrels given (name, value, judged turns).
    pub ndcg_cut_3: Vec<(String, f64, usize)>,
    /// trec_eval set_P / set_recall / set_F averaged over the organizers' judged turns.
    pub set_p: f64,
    pub set_recall: f64,
    pub set_f: f64,
    /// Counts pooled over every turn (selections where nothing is relevant included).
    pub micro_p: f64,
    pub micro_recall: f64,
    pub micro_f: f64,
    /// Turns where nothing is relevant, and the share of them with an empty selection.
    pub nothing_relevant_turns: usize,
    pub abstained: f64,
    pub turns: usize,
}

/// Measures `probabilities` (per turn of `turns`) selected at `threshold`; `extra` qrels (such as
/// NIST's) are measured for the ranking besides the organizers' labels.
pub fn selection_figures(
    turns: &[&SelectionTurn],
    probabilities: &[&[f64]],
    threshold: f64,
    extra: &[(String, &Qrels)],
) -> SelectionFigures {
    let measures =
        Measure::parse_all(&["ndcg_cut.3", "set_P", "set_recall", "set_F"]).expect("valid");
    let owned: Vec<Vec<f64>> = probabilities.iter().map(|p| p.to_vec()).collect();
    let ranking = Run::from_rankings(turns.iter().zip(&owned).map(|(t, ps)| {
        let ids: Vec<String> = ranked(t, ps).into_iter().map(|(_, id)| id).collect();
        (t.key.clone(), ids)
    }));
    let selected = selected_run(turns.iter().copied(), &owned, threshold);
    let organizers = judged_turn_qrels(turns.iter().copied());
    let mut ndcg = vec![];
    for (name, q) in std::iter::once(("organizers".to_string(), &organizers))
        .chain(extra.iter().map(|(n, q)| (n.clone(), *q)))
    {
        // Only the turns of this set: other qrels may judge turns outside it.
        let mut mine = Qrels::default();
        for t in turns {
            if let Some(j) = q.get(&t.key) {
                mine.queries.insert(t.key.clone(), j.clone());
            }
        }
        let r = evaluate_ptkb(&mine, &ranking, &measures);
        ndcg.push((
            name,
            r.evaluation.get("ndcg_cut_3").unwrap_or(0.0),
            r.judged_turns,
        ));
    }
    let s = evaluate_ptkb(&organizers, &selected, &measures);
    let micro = evaluate_ptkb(&all_turn_qrels(turns.iter().copied()), &selected, &[]).micro;
    let nothing: Vec<&&SelectionTurn> = turns
        .iter()
        .filter(|t| !t.relevant.iter().any(|r| *r))
        .collect();
    let abstained = nothing
        .iter()
        .filter(|t| selected.get(&t.key).is_none_or(|d| d.is_empty()))
        .count();
    SelectionFigures {
        ndcg_cut_3: ndcg,
        set_p: s.evaluation.get("set_P").unwrap_or(0.0),
        set_recall: s.evaluation.get("set_recall").unwrap_or(0.0),
        set_f: s.evaluation.get("set_F").unwrap_or(0.0),
        micro_p: micro.precision(),
        micro_recall: micro.recall(),
        micro_f: micro.f1(),
        nothing_relevant_turns: nothing.len(),
        abstained: abstained as f64 / nothing.len().max(1) as f64,
        turns: turns.len(),
    }
}

/// `model`'s probabilities for `turns` (a set it was not fitted on).
pub fn model_probabilities(turns: &[&SelectionTurn], model: &CalibratedModel) -> Vec<Vec<f64>> {
    turns
        .iter()
        .map(|t| {
            t.features
                .iter()
                .map(|x| model.probability(x, &t.turn_features))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(topic: &str, n: usize, x: &[f64], relevant: &[bool]) -> SelectionTurn {
        SelectionTurn {
            conversation: topic.into(),
            key: format!("{topic}_{n}"),
            ids: (1..=x.len()).map(|i| i.to_string()).collect(),
            features: x.iter().map(|v| vec![*v]).collect(),
            turn_features: vec![1.0, f64::from(u8::from(relevant.iter().any(|r| *r)))],
            relevant: relevant.to_vec(),
            set: 0,
        }
    }

    #[test]
    fn tuning_separates_a_separable_feature_and_abstains_where_it_is_low() {
        let mut turns = Vec::new();
        for topic in 1..=6 {
            for n in 1..=4 {
                let t = topic.to_string();
                // One relevant statement with a high feature, except in turn 4 (nothing relevant).
                if n == 4 {
                    turns.push(turn(&t, n, &[0.1, 0.2, 0.15], &[false, false, false]));
                } else {
                    turns.push(turn(&t, n, &[0.9, 0.2, 0.1], &[true, false, false]));
                }
            }
        }
        let grid = SelectionGrid::default();
        let tuning = tune_selection(&turns, &["x"], 3, &grid).unwrap();
        assert_eq!(tuning.turns, 24);
        let refs: Vec<&SelectionTurn> = turns.iter().collect();
        let probs: Vec<&[f64]> = tuning.cv_probabilities.iter().map(Vec::as_slice).collect();
        let f = selection_figures(&refs, &probs, tuning.model.threshold, &[]);
        assert_eq!(f.nothing_relevant_turns, 6);
        assert!((f.abstained - 1.0).abs() < 1e-9, "{f:?}");
        assert!(f.micro_p > 0.99 && f.micro_recall > 0.99, "{f:?}");
        assert!((f.ndcg_cut_3[0].1 - 1.0).abs() < 1e-9);
        assert!(tuning.model.probability(&[0.9], &[1.0, 1.0]) > 0.5);
        assert!(tuning.model.probability(&[0.1], &[1.0, 1.0]) < 0.5);
    }

    #[test]
    fn the_prior_shift_is_the_best_on_dev_turns_that_selects_nothing_where_nothing_is_relevant() {
        let identity = |name: &str, bias: f64| LogisticModel {
            features: vec![name.into()],
            mean: vec![0.0],
            scale: vec![1.0],
            weights: vec![1.0],
            bias,
        };
        let model = CalibratedModel {
            model: identity("x", 0.0),
            platt: identity("log_odds", 0.0),
            turn: LogisticModel {
                features: TURN_FEATURES.iter().map(|s| s.to_string()).collect(),
                mean: vec![0.0, 0.0],
                scale: vec![1.0, 1.0],
                weights: vec![0.0, 0.0],
                bias: 30.0,
            },
            prior_shift: 0.0,
            threshold: 0.5,
        };
        // The relevant statement needs a shift above 0.6; the nothing-relevant turn's statement
        // is selected from a shift of 1.6 on.
        let dev = [
            turn("1", 1, &[-0.6, -3.0], &[true, false]),
            turn("2", 1, &[-1.6], &[false]),
        ];
        let shifts: Vec<f64> = (0..=12).map(|i| i as f64 * 0.25).collect();
        let (chosen, figures) = tune_prior_shift(&model, &dev, &shifts);
        assert_eq!(chosen, 0.75);
        assert_eq!(figures[0].micro_recall, 0.0);
        assert_eq!(figures[3].micro_f, 1.0);
        assert_eq!(figures[7].selected_where_none, 1);
        // Nothing qualifies: no shift.
        let never = [turn("3", 1, &[5.0], &[false])];
        assert_eq!(tune_prior_shift(&model, &never, &shifts).0, 0.0);
    }

    #[test]
    fn a_small_ptkb_file_with_a_relevant_index_outside_its_ptkb_is_refused() {
        let file: SmallPtkbFile = serde_json::from_str(
            r#"{"turns": [{"history": [], "utterance": "Which tent should I buy?", "ptkb": ["I camp in winter."], "relevant": [0]},
                          {"history": ["I sail."], "utterance": "Which boat?", "ptkb": ["I sail alone."], "relevant": [1]}]}"#,
        )
        .unwrap();
        let err = small_ptkb_turns(&file, None).unwrap_err().to_string();
        assert!(
            err.contains("turn 2") && err.contains("Which boat?"),
            "{err}"
        );
        let ok = SmallPtkbFile {
            turns: file.turns[..1].to_vec(),
        };
        let turns = small_ptkb_turns(&ok, None).unwrap();
        assert_eq!(turns[0].relevant, vec![true]);
        assert_eq!(turns[0].turn_features, vec![1.0, 1.0]);
    }

    #[test]
    fn organizers_qrels_leave_out_turns_without_a_relevant_statement() {
        let turns = [
            turn("1", 1, &[0.1, 0.2], &[false, true]),
            turn("1", 2, &[0.1, 0.2], &[false, false]),
        ];
        assert_eq!(judged_turn_qrels(turns.iter()).len(), 1);
        assert_eq!(all_turn_qrels(turns.iter()).len(), 2);
    }
}
