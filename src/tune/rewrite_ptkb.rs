//! `convrag tune`, library half: fits the learned parts of the pipeline on training topics only,
//! choosing every threshold by topic-level cross-validation, and measures held-out sets it never
//! fits on.
//!
//! Rewriting ([`tune_rewrite`]): for every turn of the training topics, each history term the
//! utterance lacks ([`HistoryRewriter::term_candidates`]) is an example, positive when its surface
//! form occurs in the manual rewrite (ROUGE-1 counts surface forms). A [`LogisticModel`] is fitted
//! per fold on the other folds; the held-out turns are rewritten with it for every
//! (L2, threshold, term limit, answer slots) of the grid, and the setting with the best mean
//! cross-validated ROUGE-1 (the chosen objective) is refitted on all training turns. Each turn's
//! candidates are scored once per fold model; a choice of terms already rendered for the turn
//! is not rendered again.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::folds::topic_folds;
use crate::eval::measures::Measure;
use crate::eval::ptkb::evaluate_ptkb;
use crate::eval::rouge::rouge1;
use crate::eval::trec::{Qrels, Run};
use crate::formats::ikat::{distinct_turns, IkatTopic, RunType};
use crate::pipeline::context::ConversationContext;
use crate::pipeline::learned::LogisticModel;
use crate::pipeline::ptkb::{statement_features, PtkbRanker, StatementModel, TextSimilarity};
use crate::pipeline::rewrite::{HistoryRewriter, TermCandidate, TermSelector, TERM_FEATURES};
use crate::pipeline::{PipelineError, Result};
use crate::progress::Progress;

/// One turn with what a rewrite may read and the manual rewrite it is scored against.
#[derive(Debug, Clone)]
pub struct RewriteExample {
    pub conversation: String,
    pub key: String,
    pub ctx: ConversationContext,
    /// Texts of the PTKB statements the ranker selected.
    pub selected_ptkb: Vec<String>,
    pub reference: String,
    /// Which training set (`--train` position) the turn comes from, for per-set figures.
    pub set: usize,
}

/// The turns of `topics` that have a reference, as an automatic run sees them.
pub fn rewrite_examples(
    topics: &[IkatTopic],
    references: &HashMap<String, String>,
    ranker: &dyn PtkbRanker,
) -> Result<Vec<RewriteExample>> {
    let mut out = Vec::new();
    for (topic, i) in distinct_turns(topics) {
        let key = topic.turn_key(&topic.turns[i]);
        let Some(reference) = references.get(&key) else {
            continue;
        };
        let ctx = ConversationContext::from_ikat(topic, i, RunType::Automatic)
            .expect("index within the topic's turns");
        let selected_ptkb = ranker
            .rank(&ctx)?
            .selected()
            .map(|s| s.text.clone())
            .collect();
        out.push(RewriteExample {
            // Folds group by topic number, so the branches of a CAsT 2022 tree stay together.
            conversation: topic.number.clone(),
            key,
            ctx,
            selected_ptkb,
            reference: reference.clone(),
            set: 0,
        });
    }
    Ok(out)
}

/// Mean ROUGE-1 (no stemming) of a set of rewrites.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RougeMeans {
    pub recall: f64,
    pub precision: f64,
    pub f1: f64,
    /// Mean ROUGE-1 F2 (recall weighted four times precision).
    pub f2: f64,
    /// Mean rewrite length in rouge tokens.
    pub tokens: f64,
}

impl RougeMeans {
    /// One rewrite's figures against its reference.
    fn one(reference: &str, rewrite: &str) -> Self {
        let s = rouge1(reference, rewrite, false);
        let f2 = if s.recall + s.precision > 0.0 {
            5.0 * s.precision * s.recall / (4.0 * s.precision + s.recall)
        } else {
            0.0
        };
        RougeMeans {
            recall: s.recall,
            precision: s.precision,
            f1: s.fmeasure,
            f2,
            tokens: crate::text::rouge_tokens::tokenize(rewrite, false).len() as f64,
        }
    }

    /// The mean of per-turn figures.
    fn mean<'a>(turns: impl ExactSizeIterator<Item = &'a RougeMeans>) -> Self {
        let n = turns.len().max(1) as f64;
        let mut m = RougeMeans::default();
        for t in turns {
            m.recall += t.recall / n;
            m.precision += t.precision / n;
            m.f1 += t.f1 / n;
            m.f2 += t.f2 / n;
            m.tokens += t.tokens / n;
        }
        m
    }

    fn of(pairs: &[(&str, String)]) -> Self {
        let turns: Vec<RougeMeans> = pairs.iter().map(|(r, w)| Self::one(r, w)).collect();
        Self::mean(turns.iter())
    }

    /// The means over all turns and over each set's turns (sets in increasing order of their
    /// index), from one ROUGE computation per turn.
    fn pooled_and_by_set(pairs: &[(&str, String)], sets: &[usize]) -> (Self, Vec<Self>) {
        let turns: Vec<RougeMeans> = pairs.iter().map(|(r, w)| Self::one(r, w)).collect();
        let mut ids: Vec<usize> = sets.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let by_set = ids
            .into_iter()
            .map(|id| {
                let part: Vec<&RougeMeans> = turns
                    .iter()
                    .zip(sets)
                    .filter(|(_, s)| **s == id)
                    .map(|(t, _)| t)
                    .collect();
                Self::mean(part.into_iter())
            })
            .collect();
        (Self::mean(turns.iter()), by_set)
    }
}

/// What the rewrite tuning optimizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RewriteObjective {
    /// Mean ROUGE-1 recall. Degenerate alone: appending every history term maximizes it, so
    /// the grid's loosest setting always wins.
    Recall,
    /// Mean ROUGE-1 F1 (penalizes terms the manual rewrite does not have).
    F1,
    /// Mean ROUGE-1 F2: recall first, as the rewrite figures are reported, without rewarding
    /// words the manual rewrite lacks for free (the committed selector's objective).
    F2,
}

impl RewriteObjective {
    fn value(self, m: &RougeMeans) -> f64 {
        match self {
            RewriteObjective::Recall => m.recall,
            RewriteObjective::F1 => m.f1,
            RewriteObjective::F2 => m.f2,
        }
    }
}

/// The grid searched by cross-validation.
#[derive(Debug, Clone)]
pub struct RewriteGrid {
    pub l2: Vec<f64>,
    pub thresholds: Vec<f64>,
    pub max_terms: Vec<usize>,
    pub answer_terms: Vec<usize>,
}

impl Default for RewriteGrid {
    fn default() -> Self {
        RewriteGrid {
            l2: vec![0.1, 1.0, 10.0],
            thresholds: vec![
                0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
            ],
            max_terms: vec![1, 2, 3, 4, 5, 6, 8, 10, 12],
            // Ascending: on a tie the fewer slots win.
            answer_terms: vec![0, 1, 2, 3],
        }
    }
}

/// One row of the cross-validation table.
#[derive(Debug, Clone, Serialize)]
pub struct GridPoint {
    pub l2: f64,
    pub threshold: f64,
    pub max_terms: usize,
    pub answer_terms: usize,
    pub cv: RougeMeans,
    /// Each training set's cross-validated means, in `--train` order.
    pub cv_by_set: Vec<RougeMeans>,
}

/// The outcome of [`tune_rewrite`].
#[derive(Debug, Clone, Serialize)]
pub struct RewriteTuning {
    pub folds: usize,
    pub training_turns: usize,
    pub training_examples: usize,
    pub positives: usize,
    pub objective: RewriteObjective,
    /// Cross-validated figures of the chosen setting (each turn rewritten by a model that never
    /// saw its topic).
    pub best: GridPoint,
    /// Cross-validated figures of every setting of the grid, in grid order.
    pub grid: Vec<GridPoint>,
    /// Cross-validated figures of the chosen setting for each number of PTKB words written
    /// into a first-person utterance's rewrite.
    pub ptkb_first_person: Vec<(usize, RougeMeans)>,
    /// The raw utterance and the decayed-weight rewriter on the same training turns.
    pub raw: RougeMeans,
    /// The raw utterance on each training set, in `--train` order (beside `best.cv_by_set`).
    pub raw_by_set: Vec<RougeMeans>,
    pub decayed: RougeMeans,
    /// The final selector, fitted on all training turns with the chosen setting.
    pub selector: TermSelector,
}

/// Numbers of PTKB statement words a first-person rewrite may write out, tried by tuning. At
/// least one: the rewrite a user reads says which statement personalized it (the turn pipeline's
/// contract; cross-validated F2 on the committed training data: 0 words 0.8486, 1 word 0.8478).
const PTKB_FIRST_PERSON_CHOICES: [usize; 3] = [1, 2, 3];

/// One turn's candidate terms, as the rewrite sees them, and their features and labels.
struct Labelled {
    candidates: Vec<TermCandidate>,
    features: Vec<Vec<f64>>,
    labels: Vec<bool>,
}

fn labelled(rw: &HistoryRewriter, ex: &RewriteExample) -> Labelled {
    let have: HashSet<String> = crate::pipeline::terms::content_stems(&ex.ctx.utterance)
        .into_iter()
        .collect();
    let reference: HashSet<String> = crate::pipeline::terms::words(&ex.reference)
        .into_iter()
        .collect();
    let said: HashSet<String> = crate::pipeline::terms::words(&ex.ctx.utterance)
        .into_iter()
        .collect();
    let candidates = rw.term_candidates(&ex.ctx, &have);
    let (features, labels) = candidates
        .iter()
        .map(|c| {
            let positive = reference.contains(&c.surface) && !said.contains(&c.surface);
            (c.features.clone(), positive)
        })
        .unzip();
    Labelled {
        candidates,
        features,
        labels,
    }
}

/// One held-out turn's rewrites under one fold model: its candidates scored once, and the text
/// of each choice of terms already rendered.
struct HeldOutTurn<'a> {
    example: &'a RewriteExample,
    scored: Vec<(f64, TermCandidate)>,
    rendered: HashMap<Vec<String>, String>,
}

impl HeldOutTurn<'_> {
    fn rewrite(&mut self, rw: &HistoryRewriter, sel: &TermSelector) -> Result<String> {
        let chosen = sel.choose(&self.scored);
        let key: Vec<String> = chosen.iter().map(|c| c.stem.clone()).collect();
        if let Some(text) = self.rendered.get(&key) {
            return Ok(text.clone());
        }
        let ptkb: Vec<&str> = self
            .example
            .selected_ptkb
            .iter()
            .map(String::as_str)
            .collect();
        let text = rw
            .rewrite_choosing(&self.example.ctx, &ptkb, &mut |_| chosen.clone())?
            .text;
        self.rendered.insert(key, text.clone());
        Ok(text)
    }
}

fn rewrite_all(
    rw: &HistoryRewriter,
    examples: &[&RewriteExample],
    selector: Option<&TermSelector>,
) -> Result<Vec<String>> {
    examples
        .iter()
        .map(|ex| {
            let ptkb: Vec<&str> = ex.selected_ptkb.iter().map(String::as_str).collect();
            Ok(rw.rewrite_with(&ex.ctx, &ptkb, selector)?.text)
        })
        .collect()
}

/// The features and labels of the turns outside `fold` (`None`: every turn).
fn outside_fold(
    data: &[Labelled],
    fold_of: &[usize],
    fold: Option<usize>,
) -> (Vec<Vec<f64>>, Vec<bool>) {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for (d, &f) in data.iter().zip(fold_of) {
        if Some(f) != fold {
            xs.extend(d.features.iter().cloned());
            ys.extend(d.labels.iter().copied());
        }
    }
    (xs, ys)
}

/// Cross-validated figures of the `best` setting for each number of PTKB statement words a
/// first-person utterance's rewrite writes out ([`PTKB_FIRST_PERSON_CHOICES`]).
fn ptkb_first_person_choices(
    rw: &HistoryRewriter,
    examples: &[RewriteExample],
    data: &[Labelled],
    fold_of: &[usize],
    folds: usize,
    best: &GridPoint,
) -> Result<Vec<(usize, RougeMeans)>> {
    let mut models = Vec::with_capacity(folds);
    for fold in 0..folds {
        let (xs, ys) = outside_fold(data, fold_of, Some(fold));
        models.push(LogisticModel::fit(TERM_FEATURES, &xs, &ys, best.l2)?);
    }
    let mut out = Vec::new();
    for k in PTKB_FIRST_PERSON_CHOICES {
        let rw_k = HistoryRewriter {
            ptkb_terms_first_person: k,
            ..*rw
        };
        let mut pairs: Vec<(&str, String)> = examples
            .iter()
            .map(|e| (e.reference.as_str(), String::new()))
            .collect();
        for (fold, model) in models.iter().enumerate() {
            let sel = TermSelector {
                model: model.clone(),
                threshold: best.threshold,
                max_terms: best.max_terms,
                answer_terms: best.answer_terms,
                ptkb_terms_first_person: k,
            };
            let held: Vec<usize> = (0..examples.len())
                .filter(|&i| fold_of[i] == fold)
                .collect();
            let exs: Vec<&RewriteExample> = held.iter().map(|&i| &examples[i]).collect();
            for (&i, text) in held.iter().zip(rewrite_all(&rw_k, &exs, Some(&sel))?) {
                pairs[i].1 = text;
            }
        }
        out.push((k, RougeMeans::of(&pairs)));
    }
    Ok(out)
}

/// Fits the learned term selector on `examples` (training turns only) with `folds`-fold
/// topic-level cross-validation over `grid`.
pub fn tune_rewrite(
    examples: &[RewriteExample],
    folds: usize,
    grid: &RewriteGrid,
    objective: RewriteObjective,
    progress: &dyn Progress,
) -> Result<RewriteTuning> {
    if examples.is_empty() || folds < 2 {
        return Err(PipelineError::Input(
            "tuning needs training turns and at least 2 folds".into(),
        ));
    }
    // Independent of the committed choice, so that the output is a function of the data alone.
    let rw = HistoryRewriter {
        ptkb_terms_first_person: PTKB_FIRST_PERSON_CHOICES[0],
        ..HistoryRewriter::default()
    };
    let ids: Vec<String> = examples.iter().map(|e| e.conversation.clone()).collect();
    let fold_of = topic_folds(&ids, folds);
    let data: Vec<Labelled> = examples.iter().map(|e| labelled(&rw, e)).collect();
    let all: Vec<&RewriteExample> = examples.iter().collect();
    let refs: Vec<&str> = examples.iter().map(|e| e.reference.as_str()).collect();
    let pair =
        |texts: Vec<String>| -> Vec<(&str, String)> { refs.iter().copied().zip(texts).collect() };
    let sets: Vec<usize> = examples.iter().map(|e| e.set).collect();
    let raw_pairs = pair(examples.iter().map(|e| e.ctx.utterance.clone()).collect());
    let (raw, raw_by_set) = RougeMeans::pooled_and_by_set(&raw_pairs, &sets);
    let decayed = RougeMeans::of(&pair(rewrite_all(&rw, &all, None)?));

    progress.set_length((grid.l2.len() * folds) as u64);
    // rewrites[grid point][turn]
    let points: Vec<(usize, f64, usize, usize)> = (0..grid.l2.len())
        .flat_map(|l| {
            grid.thresholds.iter().flat_map(move |&t| {
                grid.max_terms
                    .iter()
                    .flat_map(move |&k| grid.answer_terms.iter().map(move |&a| (l, t, k, a)))
            })
        })
        .collect();
    let mut rewrites: Vec<Vec<String>> = vec![vec![String::new(); examples.len()]; points.len()];
    for (li, &l2) in grid.l2.iter().enumerate() {
        for fold in 0..folds {
            let (xs, ys) = outside_fold(&data, &fold_of, Some(fold));
            let mut sel = TermSelector {
                model: LogisticModel::fit(TERM_FEATURES, &xs, &ys, l2)?,
                threshold: 0.0,
                max_terms: 0,
                answer_terms: 0,
                ptkb_terms_first_person: rw.ptkb_terms_first_person,
            };
            let mut held: Vec<(usize, HeldOutTurn)> = (0..examples.len())
                .filter(|&i| fold_of[i] == fold)
                .map(|i| {
                    let turn = HeldOutTurn {
                        example: &examples[i],
                        scored: sel.score(data[i].candidates.clone()),
                        rendered: HashMap::new(),
                    };
                    (i, turn)
                })
                .collect();
            for (pi, &(l, threshold, max_terms, answer_terms)) in points.iter().enumerate() {
                if l != li {
                    continue;
                }
                (sel.threshold, sel.max_terms, sel.answer_terms) =
                    (threshold, max_terms, answer_terms);
                for (i, turn) in &mut held {
                    rewrites[pi][*i] = turn.rewrite(&rw, &sel)?;
                }
            }
            progress.inc(1);
        }
    }
    progress.finish();
    let mut best: Option<GridPoint> = None;
    let mut table = Vec::with_capacity(points.len());
    for (pi, &(l, threshold, max_terms, answer_terms)) in points.iter().enumerate() {
        let pairs = pair(std::mem::take(&mut rewrites[pi]));
        let (cv, cv_by_set) = RougeMeans::pooled_and_by_set(&pairs, &sets);
        let point = GridPoint {
            l2: grid.l2[l],
            threshold,
            max_terms,
            answer_terms,
            cv,
            cv_by_set,
        };
        let better = best
            .as_ref()
            .is_none_or(|b| objective.value(&cv) > objective.value(&b.cv) + 1e-12);
        if better {
            best = Some(point.clone());
        }
        table.push(point);
    }
    let best = best.expect("a non-empty grid");
    let (xs, ys) = outside_fold(&data, &fold_of, None);
    let positives = ys.iter().filter(|y| **y).count();
    let ptkb_choices = ptkb_first_person_choices(&rw, examples, &data, &fold_of, folds, &best)?;
    let ptkb_terms_first_person = ptkb_choices
        .iter()
        .fold(None::<&(usize, RougeMeans)>, |b, c| match b {
            Some(b) if objective.value(&b.1) + 1e-12 >= objective.value(&c.1) => Some(b),
            _ => Some(c),
        })
        .map_or(PTKB_FIRST_PERSON_CHOICES[0], |c| c.0);
    let selector = TermSelector {
        model: LogisticModel::fit(TERM_FEATURES, &xs, &ys, best.l2)?,
        threshold: best.threshold,
        max_terms: best.max_terms,
        answer_terms: best.answer_terms,
        ptkb_terms_first_person,
    };
    Ok(RewriteTuning {
        folds,
        training_turns: examples.len(),
        training_examples: xs.len(),
        positives,
        objective,
        best,
        grid: table,
        ptkb_first_person: ptkb_choices,
        raw,
        raw_by_set,
        decayed,
        selector,
    })
}

/// Raw utterance, decayed-weight and learned rewrites of a held-out set.
#[derive(Debug, Clone, Serialize)]
pub struct RewriteHeldOut {
    pub turns: usize,
    pub raw: RougeMeans,
    pub decayed: RougeMeans,
    pub learned: RougeMeans,
}

/// Measures `selector` on `examples` (a set it was not fitted on).
pub fn evaluate_rewrite(
    examples: &[RewriteExample],
    selector: &TermSelector,
) -> Result<RewriteHeldOut> {
    let rw = HistoryRewriter {
        ptkb_terms_first_person: selector.ptkb_terms_first_person,
        ..HistoryRewriter::default()
    };
    let all: Vec<&RewriteExample> = examples.iter().collect();
    let refs: Vec<&str> = examples.iter().map(|e| e.reference.as_str()).collect();
    let pair =
        |texts: Vec<String>| -> Vec<(&str, String)> { refs.iter().copied().zip(texts).collect() };
    Ok(RewriteHeldOut {
        turns: examples.len(),
        raw: RougeMeans::of(&pair(
            examples.iter().map(|e| e.ctx.utterance.clone()).collect(),
        )),
        decayed: RougeMeans::of(&pair(rewrite_all(&rw, &all, None)?)),
        learned: RougeMeans::of(&pair(rewrite_all(&rw, &all, Some(selector))?)),
    })
}

/// One turn of PTKB training or evaluation data: its statements' features (automatic run).
#[derive(Debug, Clone)]
pub struct PtkbTurn {
    pub conversation: String,
    pub key: String,
    /// Statement ids in PTKB order, rows of `features` likewise.
    pub ids: Vec<String>,
    pub features: Vec<Vec<f64>>,
}

/// Features of every turn of `topics` (computed once: the bi-encoder is the costly part).
pub fn ptkb_turns(
    topics: &[IkatTopic],
    similarity: Option<&dyn TextSimilarity>,
    progress: &dyn Progress,
) -> Result<Vec<PtkbTurn>> {
    progress.set_length(distinct_turns(topics).count() as u64);
    let mut out = Vec::new();
    for (topic, i) in distinct_turns(topics) {
        let ctx = ConversationContext::from_ikat(topic, i, RunType::Automatic)
            .expect("index within the topic's turns");
        out.push(PtkbTurn {
            conversation: topic.number.clone(),
            key: topic.turn_key(&topic.turns[i]),
            ids: ctx.ptkb.iter().map(|s| s.id.clone()).collect(),
            features: statement_features(&ctx, similarity)?,
        });
        progress.inc(1);
    }
    progress.finish();
    Ok(out)
}

/// Ranked runs of `turns` under `model`: all statements, and the selected ones only.
pub fn ptkb_runs(turns: &[&PtkbTurn], model: &StatementModel) -> (Run, Run) {
    let mut ranked = Vec::new();
    let mut selected = Vec::new();
    for t in turns {
        let mut scored: Vec<(f64, &String)> = t
            .features
            .iter()
            .map(|x| model.model.probability(x))
            .zip(&t.ids)
            .collect();
        // Stable: equal scores keep PTKB order, as ScoringRanker does.
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        ranked.push((
            t.key.clone(),
            scored.iter().map(|(_, id)| (*id).clone()).collect(),
        ));
        selected.push((
            t.key.clone(),
            scored
                .iter()
                .filter(|(p, _)| *p >= model.threshold)
                .map(|(_, id)| (*id).clone())
                .collect::<Vec<String>>(),
        ));
    }
    (Run::from_rankings(ranked), Run::from_rankings(selected))
}

/// nDCG@3 of the ranking and set F1 of the selection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PtkbFigures {
    pub ndcg_cut_3: f64,
    pub recip_rank: f64,
    pub set_f: f64,
    pub judged_turns: usize,
}

/// Measures `model` on `turns` against `qrels`.
pub fn ptkb_figures(turns: &[&PtkbTurn], model: &StatementModel, qrels: &Qrels) -> PtkbFigures {
    let measures =
        Measure::parse_all(&["ndcg_cut.3", "recip_rank", "set_F"]).expect("valid measures");
    let (ranked, selected) = ptkb_runs(turns, model);
    let r = evaluate_ptkb(qrels, &ranked, &measures);
    let s = evaluate_ptkb(qrels, &selected, &measures);
    PtkbFigures {
        ndcg_cut_3: r.evaluation.get("ndcg_cut_3").unwrap_or(0.0),
        recip_rank: r.evaluation.get("recip_rank").unwrap_or(0.0),
        set_f: s.evaluation.get("set_F").unwrap_or(0.0),
        judged_turns: r.judged_turns,
    }
}

/// The outcome of [`tune_ptkb`].
#[derive(Debug, Clone, Serialize)]
pub struct PtkbTuning {
    pub folds: usize,
    pub training_turns: usize,
    pub examples: usize,
    pub positives: usize,
    pub l2: f64,
    /// Cross-validated figures (each judged turn ranked by a model that never saw its topic).
    pub cv: PtkbFigures,
    pub model: StatementModel,
}

fn ptkb_examples(turns: &[&PtkbTurn], qrels: &Qrels) -> (Vec<Vec<f64>>, Vec<bool>) {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for t in turns {
        let Some(judged) = qrels.get(&t.key) else {
            continue;
        };
        for (id, x) in t.ids.iter().zip(&t.features) {
            xs.push(x.clone());
            ys.push(judged.get(id).is_some_and(|&r| r >= 1));
        }
    }
    (xs, ys)
}

/// Fits the statement model on the judged turns of `turns` (training topics only) with
/// topic-level cross-validation: the L2 weight by cross-validated nDCG@3, then the selection
/// threshold by cross-validated set F1.
pub fn tune_ptkb(
    turns: &[PtkbTurn],
    qrels: &Qrels,
    feature_names: &[&str],
    folds: usize,
) -> Result<PtkbTuning> {
    let judged: Vec<&PtkbTurn> = turns
        .iter()
        .filter(|t| qrels.get(&t.key).is_some())
        .collect();
    if judged.is_empty() || folds < 2 {
        return Err(PipelineError::Input(
            "PTKB tuning needs judged training turns and at least 2 folds".into(),
        ));
    }
    let ids: Vec<String> = judged.iter().map(|t| t.conversation.clone()).collect();
    let fold_of = topic_folds(&ids, folds);
    let thresholds: Vec<f64> = (1..20).map(|i| i as f64 * 0.05).collect();
    let mut best: Option<(f64, Vec<LogisticModel>, PtkbFigures)> = None;
    for l2 in [0.3, 1.0, 3.0, 10.0, 30.0, 100.0] {
        let mut models = Vec::new();
        for fold in 0..folds {
            let train: Vec<&PtkbTurn> = judged
                .iter()
                .zip(&fold_of)
                .filter(|(_, f)| **f != fold)
                .map(|(t, _)| *t)
                .collect();
            let (xs, ys) = ptkb_examples(&train, qrels);
            models.push(LogisticModel::fit(feature_names, &xs, &ys, l2)?);
        }
        let figures = cv_figures(&judged, &fold_of, &models, 0.5, qrels);
        if best
            .as_ref()
            .is_none_or(|b| figures.ndcg_cut_3 > b.2.ndcg_cut_3 + 1e-12)
        {
            best = Some((l2, models, figures));
        }
    }
    let (l2, models, _) = best.expect("a non-empty grid");
    let mut cv = PtkbFigures::default();
    let mut threshold = 0.5;
    for &t in &thresholds {
        let f = cv_figures(&judged, &fold_of, &models, t, qrels);
        if f.set_f > cv.set_f + 1e-12 || cv.judged_turns == 0 {
            cv = f;
            threshold = t;
        }
    }
    let (xs, ys) = ptkb_examples(&judged, qrels);
    Ok(PtkbTuning {
        folds,
        training_turns: judged.len(),
        examples: xs.len(),
        positives: ys.iter().filter(|y| **y).count(),
        l2,
        cv,
        model: StatementModel {
            model: LogisticModel::fit(feature_names, &xs, &ys, l2)?,
            threshold,
        },
    })
}

/// Figures of the held-out folds, each ranked by the model of its fold.
fn cv_figures(
    judged: &[&PtkbTurn],
    fold_of: &[usize],
    models: &[LogisticModel],
    threshold: f64,
    qrels: &Qrels,
) -> PtkbFigures {
    let mut ranked = Vec::new();
    let mut selected = Vec::new();
    for (fold, model) in models.iter().enumerate() {
        let held: Vec<&PtkbTurn> = judged
            .iter()
            .zip(fold_of)
            .filter(|(_, f)| **f == fold)
            .map(|(t, _)| *t)
            .collect();
        let m = StatementModel {
            model: model.clone(),
            threshold,
        };
        let (r, s) = ptkb_runs(&held, &m);
        ranked.push(r);
        selected.push(s);
    }
    let merge = |runs: Vec<Run>| {
        let mut all = Run::default();
        for run in runs {
            for (qid, docs) in run.iter() {
                all.insert(qid.to_string(), docs.to_vec());
            }
        }
        all
    };
    let measures =
        Measure::parse_all(&["ndcg_cut.3", "recip_rank", "set_F"]).expect("valid measures");
    let r = evaluate_ptkb(qrels, &merge(ranked), &measures);
    let s = evaluate_ptkb(qrels, &merge(selected), &measures);
    PtkbFigures {
        ndcg_cut_3: r.evaluation.get("ndcg_cut_3").unwrap_or(0.0),
        recip_rank: r.evaluation.get("recip_rank").unwrap_or(0.0),
        set_f: s.evaluation.get("set_F").unwrap_or(0.0),
        judged_turns: r.judged_turns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f2_weighs_recall_four_times_precision() {
        // Reference 4 words, rewrite 8 words of which the 4: recall 1, precision 0.5.
        let m = RougeMeans::of(&[("a b c d", "a b c d e f g h".to_string())]);
        assert!((m.recall - 1.0).abs() < 1e-9 && (m.precision - 0.5).abs() < 1e-9);
        assert!((m.f1 - 2.0 / 3.0).abs() < 1e-9);
        assert!((m.f2 - 5.0 * 0.5 / (4.0 * 0.5 + 1.0)).abs() < 1e-9);
        assert!(RewriteObjective::F2.value(&m) > RewriteObjective::F1.value(&m));
        // Appending a wrong word never raises recall, and lowers F2.
        let shorter = RougeMeans::of(&[("a b c d", "a b c d e".to_string())]);
        assert!(RewriteObjective::F2.value(&shorter) > RewriteObjective::F2.value(&m));
        assert_eq!(
            RewriteObjective::Recall.value(&shorter),
            RewriteObjective::Recall.value(&m)
        );
    }

    #[test]
    fn a_tuning_rewrite_is_the_served_rewrite_rendered_once_per_choice() {
        use crate::pipeline::context::HistoryTurn;
        let ctx = ConversationContext {
            utterance: "Which of them is closest to the beach?".into(),
            history: vec![HistoryTurn {
                utterance: "I need a hotel in Rome for December.".into(),
                response: Some(
                    "Hotel Raphael and Hotel Navona are near Piazza Navona; the Boutique Hotel \
                     Rome is close to Vatican City."
                        .into(),
                ),
            }],
            ..Default::default()
        };
        let example = RewriteExample {
            conversation: "1".into(),
            key: "1_2".into(),
            ctx,
            selected_ptkb: vec!["I like quiet places.".into()],
            reference: "Which hotel in Rome is closest to the beach?".into(),
            set: 0,
        };
        let rw = HistoryRewriter::default();
        let data = labelled(&rw, &example);
        for answer_terms in [0, 3] {
            let sel = TermSelector {
                answer_terms,
                ..crate::pipeline::rewrite::learned_term_selector().clone()
            };
            let mut turn = HeldOutTurn {
                example: &example,
                scored: sel.score(data.candidates.clone()),
                rendered: HashMap::new(),
            };
            let served = rw
                .rewrite_with(&example.ctx, &["I like quiet places."], Some(&sel))
                .unwrap()
                .text;
            assert_eq!(turn.rewrite(&rw, &sel).unwrap(), served);
            assert_eq!(turn.rendered.len(), 1);
            assert_eq!(turn.rewrite(&rw, &sel).unwrap(), served);
            assert_eq!(
                turn.rendered.len(),
                1,
                "the second time comes from the memo"
            );
        }
    }

    #[test]
    fn means_by_set_follow_the_set_index_not_the_turn_order() {
        let pairs = [
            ("a b", "a b".to_string()),
            ("a b", "a".to_string()),
            ("a b", "x".to_string()),
        ];
        let (pooled, by) = RougeMeans::pooled_and_by_set(&pairs, &[1, 0, 1]);
        assert_eq!(pooled, RougeMeans::of(&pairs));
        assert_eq!(by.len(), 2);
        assert!((by[0].recall - 0.5).abs() < 1e-9, "{by:?}");
        assert!((by[1].recall - 0.5).abs() < 1e-9 && (by[1].precision - 0.5).abs() < 1e-9);
        let (_, one) = RougeMeans::pooled_and_by_set(&pairs, &[0, 0, 0]);
        assert_eq!(one, vec![RougeMeans::of(&pairs)]);
    }
}
