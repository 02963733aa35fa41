//! Stage 1: PTKB statement ranking.
//!
//! The served ranker is chosen by `ptkb_zero_shot::recommended_ranker` (with the bi-encoder the
//! zero-shot order of `ptkb_zero_shot`, selecting what both the learned and the calibrated
//! ranker, which may select nothing, select); this module holds the shared types and the rankers
//! other than those of `ptkb_calibrated` and `ptkb_zero_shot`.
//!
//! A [`PtkbRanker`] scores every statement of the user's PTKB against the current turn in its
//! context and returns them all, ranked, with the selected subset marked (a [`Selection`] rule:
//! top-k, an absolute threshold, or a fraction of the best score; the subset may be empty).
//!
//! Scores come from [`StatementScorer`]s:
//! - [`LexicalScorer`] (the default): BM25 over the statements (each statement a document, IDF
//!   from the user's PTKB) for a weighted query built from the utterance, decayed earlier
//!   utterances, the first utterance (the topic of the conversation) and, with a small weight,
//!   earlier canonical responses. Terms are rouge-score tokens, stopwords removed, Porter-stemmed.
//! - [`SimilarityScorer`]: any [`TextSimilarity`] (the ONNX bi-encoder will implement it; convrag
//!   ships [`TermCosine`], a TF-IDF cosine) applied to the turn's query text.
//! - [`HybridScorer`]: a weighted sum of min-max-normalized scores of several scorers, so neural
//!   and lexical evidence combine without either's scale dominating.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use super::context::ConversationContext;
use super::learned::LogisticModel;
use super::rewrite::lexicon;
use super::terms;
use super::{PipelineError, Result};
use crate::rerank::{PassageRef, QueryVectors, Reranker};

/// Similarity of a query to each of several texts (higher is more similar). The bi-encoder
/// implements it; so does [`TermCosine`].
pub trait TextSimilarity: Send + Sync {
    fn similarities(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>>;

    /// The neural model it runs, if any ([`Reranker::model_id`]).
    fn model_id(&self) -> Option<String> {
        None
    }
}

/// Raw relevance scores of the context's PTKB statements, in `ctx.ptkb` order.
pub trait StatementScorer: Send + Sync {
    fn score_statements(&self, ctx: &ConversationContext) -> Result<Vec<f32>>;

    /// [`StatementScorer::score_statements`] with the turn's texts embedded through `vectors`
    /// (a scorer without the model ignores them).
    fn score_statements_embedded(
        &self,
        ctx: &ConversationContext,
        _vectors: &QueryVectors,
    ) -> Result<Vec<f32>> {
        self.score_statements(ctx)
    }
}

/// A scorer over an optional bi-encoder: every [`StatementScorer`] method goes through
/// [`ModelScorer::scores_with`], with the turn's embedded texts where they are its model's.
pub trait ModelScorer: Send + Sync {
    /// The model it scores with, if any.
    fn similarity(&self) -> Option<&dyn TextSimilarity>;

    /// Scores in `ctx.ptkb` order, with `similarity` standing in for [`ModelScorer::similarity`].
    fn scores_with(
        &self,
        ctx: &ConversationContext,
        similarity: Option<&dyn TextSimilarity>,
    ) -> Result<Vec<f32>>;
}

impl<M: ModelScorer> StatementScorer for M {
    fn score_statements(&self, ctx: &ConversationContext) -> Result<Vec<f32>> {
        self.scores_with(ctx, self.similarity())
    }

    fn score_statements_embedded(
        &self,
        ctx: &ConversationContext,
        vectors: &QueryVectors,
    ) -> Result<Vec<f32>> {
        match embedded_similarity(self.similarity(), vectors) {
            Some(embedded) => self.scores_with(ctx, Some(&embedded)),
            None => self.score_statements(ctx),
        }
    }
}

/// `similarity` (a bi-encoder's) with the texts embedded through the turn's `vectors` when they
/// are the same model's; `None` when they are not.
pub fn embedded_similarity<'a>(
    similarity: Option<&'a dyn TextSimilarity>,
    vectors: &'a QueryVectors,
) -> Option<EmbeddedSimilarity<'a>> {
    let similarity = similarity?;
    (similarity.model_id().as_deref() == Some(vectors.model_id())).then_some(EmbeddedSimilarity {
        vectors,
        fallback: similarity,
    })
}

/// Cosines of vectors a turn's [`QueryVectors`] hold (each text embedded once per turn).
pub struct EmbeddedSimilarity<'a> {
    vectors: &'a QueryVectors,
    /// For a model without query vectors.
    fallback: &'a dyn TextSimilarity,
}

impl TextSimilarity for EmbeddedSimilarity<'_> {
    fn similarities(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        let mut all = Vec::with_capacity(texts.len() + 1);
        all.push(query);
        all.extend_from_slice(texts);
        let vectors = self.vectors.get(&all).map_err(PipelineError::ModelFailed)?;
        if vectors.len() != all.len() {
            return self.fallback.similarities(query, texts);
        }
        Ok(vectors[1..]
            .iter()
            .map(|v| crate::rerank::onnx::cosine(&vectors[0], v))
            .collect())
    }

    fn model_id(&self) -> Option<String> {
        Some(self.vectors.model_id().to_string())
    }
}

/// One statement with its score and whether it was selected as relevant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankedStatement {
    pub id: String,
    pub text: String,
    pub score: f32,
    pub selected: bool,
}

/// All statements of the PTKB, best first.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PtkbRanking {
    pub statements: Vec<RankedStatement>,
}

impl PtkbRanking {
    /// The selected statements, best first.
    pub fn selected(&self) -> impl Iterator<Item = &RankedStatement> {
        self.statements.iter().filter(|s| s.selected)
    }
}

/// Which ranked statements count as relevant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Selection {
    /// The `k` best statements with a positive score.
    TopK(usize),
    /// Statements scoring at least this (and above zero).
    Threshold(f32),
    /// Statements scoring at least `ratio` × the best score and at least `min_score`, at most
    /// `max` of them.
    RelativeToTop {
        ratio: f32,
        min_score: f32,
        max: usize,
    },
}

impl Default for Selection {
    /// Measured on iKAT 2023 test topics (scripts/measure-pipeline-stages.sh).
    fn default() -> Self {
        Selection::RelativeToTop {
            ratio: 0.6,
            min_score: 0.3,
            max: 3,
        }
    }
}

impl Selection {
    /// Parses `top:K`, `threshold:X` or `relative:RATIO:MIN:MAX`.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            PipelineError::Input(format!(
                "bad selection {s:?}: expected top:K, threshold:X or relative:RATIO:MIN_SCORE:MAX"
            ))
        };
        let parts: Vec<&str> = s.split(':').collect();
        match parts.as_slice() {
            ["top", k] => Ok(Selection::TopK(k.parse().map_err(|_| bad())?)),
            ["threshold", x] => Ok(Selection::Threshold(x.parse().map_err(|_| bad())?)),
            ["relative", r, m, k] => Ok(Selection::RelativeToTop {
                ratio: r.parse().map_err(|_| bad())?,
                min_score: m.parse().map_err(|_| bad())?,
                max: k.parse().map_err(|_| bad())?,
            }),
            _ => Err(bad()),
        }
    }

    /// Marks `ranked` (sorted best first).
    fn apply(&self, ranked: &mut [RankedStatement]) {
        let top = ranked.first().map_or(0.0, |s| s.score);
        for (i, s) in ranked.iter_mut().enumerate() {
            s.selected = s.score > 0.0
                && match *self {
                    Selection::TopK(k) => i < k,
                    Selection::Threshold(t) => s.score >= t,
                    Selection::RelativeToTop {
                        ratio,
                        min_score,
                        max,
                    } => i < max && s.score >= min_score && s.score >= ratio * top,
                };
        }
    }
}

/// Ranks a turn's PTKB statements and marks the relevant ones.
pub trait PtkbRanker: Send + Sync {
    fn rank(&self, ctx: &ConversationContext) -> Result<PtkbRanking>;

    /// [`PtkbRanker::rank`] with the turn's texts embedded through `vectors`, so the utterance
    /// and statements are encoded once for the whole turn.
    fn rank_embedded(
        &self,
        ctx: &ConversationContext,
        _vectors: &QueryVectors,
    ) -> Result<PtkbRanking> {
        self.rank(ctx)
    }
}

/// A [`StatementScorer`] with a [`Selection`] rule: the standard [`PtkbRanker`].
pub struct ScoringRanker<S> {
    pub scorer: S,
    pub selection: Selection,
}

impl<S: StatementScorer> PtkbRanker for ScoringRanker<S> {
    fn rank(&self, ctx: &ConversationContext) -> Result<PtkbRanking> {
        let scores = self.scorer.score_statements(ctx)?;
        self.ranking(ctx, scores)
    }

    fn rank_embedded(
        &self,
        ctx: &ConversationContext,
        vectors: &QueryVectors,
    ) -> Result<PtkbRanking> {
        let scores = self.scorer.score_statements_embedded(ctx, vectors)?;
        self.ranking(ctx, scores)
    }
}

impl<S> ScoringRanker<S> {
    /// The statements ordered by `scores` (in `ctx.ptkb` order), the selection applied.
    fn ranking(&self, ctx: &ConversationContext, scores: Vec<f32>) -> Result<PtkbRanking> {
        if scores.len() != ctx.ptkb.len() {
            return Err(PipelineError::Model(format!(
                "scorer returned {} scores for {} statements",
                scores.len(),
                ctx.ptkb.len()
            )));
        }
        let mut statements: Vec<RankedStatement> = ctx
            .ptkb
            .iter()
            .zip(scores)
            .map(|(st, score)| RankedStatement {
                id: st.id.clone(),
                text: st.text.clone(),
                score: if score.is_finite() { score } else { 0.0 },
                selected: false,
            })
            .collect();
        // Stable: equal scores keep PTKB order.
        statements.sort_by(|a, b| b.score.total_cmp(&a.score));
        self.selection.apply(&mut statements);
        Ok(PtkbRanking { statements })
    }
}

/// Which statements an [`OrderedRanker`] marks selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// Those both its rankers select.
    Both,
    /// Those its selecting ranker selects, whatever the ordering one selects.
    Selection,
}

/// Statements in one ranker's order and scores, selected by another's: the served rankers
/// combine a ranker that orders well with one that selects well.
pub struct OrderedRanker<O, S> {
    pub order: O,
    pub selection: S,
    pub agreement: Agreement,
}

impl<O, S> OrderedRanker<O, S> {
    /// `ranking` (the ordering ranker's) with the selection marked by [`Self::agreement`].
    pub fn combine(&self, mut ranking: PtkbRanking, selection: &PtkbRanking) -> PtkbRanking {
        let chosen: HashSet<&str> = selection.selected().map(|s| s.id.as_str()).collect();
        for statement in &mut ranking.statements {
            let chosen = chosen.contains(statement.id.as_str());
            statement.selected = match self.agreement {
                Agreement::Both => statement.selected && chosen,
                Agreement::Selection => chosen,
            };
        }
        ranking
    }
}

impl<O: PtkbRanker, S: PtkbRanker> PtkbRanker for OrderedRanker<O, S> {
    fn rank(&self, ctx: &ConversationContext) -> Result<PtkbRanking> {
        let selection = self.selection.rank(ctx)?;
        Ok(self.combine(self.order.rank(ctx)?, &selection))
    }

    fn rank_embedded(
        &self,
        ctx: &ConversationContext,
        vectors: &QueryVectors,
    ) -> Result<PtkbRanking> {
        let selection = self.selection.rank_embedded(ctx, vectors)?;
        Ok(self.combine(self.order.rank_embedded(ctx, vectors)?, &selection))
    }
}

/// How the lexical query of a turn is built from its context.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryWeights {
    /// Weight of earlier utterances at distance 1 (the previous turn).
    pub history: f32,
    /// Multiplied in per further turn back.
    pub decay: f32,
    /// Lower bound for the first utterance (it usually states the topic).
    pub first: f32,
    /// Weight of the previous canonical response (decayed like utterances).
    pub response: f32,
}

impl Default for QueryWeights {
    fn default() -> Self {
        QueryWeights {
            history: 0.5,
            decay: 0.9,
            first: 0.3,
            response: 0.3,
        }
    }
}

impl QueryWeights {
    /// Weighted stems of the turn's query: the (effective) utterance at weight 1, then earlier
    /// context. A stem's weight is the largest weight of any source it appears in, so a word
    /// repeated through the conversation does not outweigh the current utterance.
    pub fn weighted_query(&self, ctx: &ConversationContext) -> Vec<(String, f32)> {
        let mut weights: HashMap<String, f32> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        let mut add = |text: &str, w: f32, weights: &mut HashMap<String, f32>| {
            if w <= 0.0 {
                return;
            }
            for stem in terms::content_stems(text) {
                let e = weights.entry(stem.clone()).or_insert_with(|| {
                    order.push(stem);
                    0.0
                });
                *e = e.max(w);
            }
        };
        add(ctx.effective_utterance(), 1.0, &mut weights);
        let n = ctx.history.len();
        for (i, turn) in ctx.history.iter().enumerate() {
            let distance = (n - i) as i32;
            let decayed = self.decay.powi(distance - 1);
            let mut w = self.history * decayed;
            if i == 0 {
                w = w.max(self.first);
            }
            add(&turn.utterance, w, &mut weights);
            if let Some(r) = &turn.response {
                add(r, self.response * decayed, &mut weights);
            }
        }
        order
            .into_iter()
            .map(|s| {
                let w = weights[&s];
                (s, w)
            })
            .collect()
    }
}

/// BM25 over the statements for the weighted context query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LexicalScorer {
    pub k1: f32,
    pub b: f32,
    pub query: QueryWeights,
}

impl Default for LexicalScorer {
    fn default() -> Self {
        LexicalScorer {
            k1: 1.2,
            b: 0.75,
            query: QueryWeights::default(),
        }
    }
}

/// BM25 scores of `docs` (stem lists) for a weighted query; IDF from `docs` themselves
/// (Lucene's non-negative IDF, so a term in every statement still counts a little).
pub fn bm25_scores(query: &[(String, f32)], docs: &[Vec<String>], k1: f32, b: f32) -> Vec<f32> {
    let n = docs.len() as f32;
    if docs.is_empty() {
        return Vec::new();
    }
    let avgdl = (docs.iter().map(Vec::len).sum::<usize>() as f32 / n).max(1.0);
    let mut df: HashMap<&str, f32> = HashMap::new();
    for d in docs {
        let mut seen: Vec<&str> = d.iter().map(String::as_str).collect();
        seen.sort_unstable();
        seen.dedup();
        for t in seen {
            *df.entry(t).or_default() += 1.0;
        }
    }
    docs.iter()
        .map(|d| {
            let dl = d.len() as f32;
            query
                .iter()
                .map(|(t, w)| {
                    let tf = d.iter().filter(|x| *x == t).count() as f32;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let df = df.get(t.as_str()).copied().unwrap_or(0.0);
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    w * idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / avgdl))
                })
                .sum()
        })
        .collect()
}

impl StatementScorer for LexicalScorer {
    fn score_statements(&self, ctx: &ConversationContext) -> Result<Vec<f32>> {
        let query = self.query.weighted_query(ctx);
        let docs: Vec<Vec<String>> = ctx
            .ptkb
            .iter()
            .map(|s| terms::content_stems(&s.text))
            .collect();
        Ok(bm25_scores(&query, &docs, self.k1, self.b))
    }
}

/// Scores statements with a [`TextSimilarity`] against a query text: the (effective) utterance,
/// preceded by the previous `history_turns` utterances.
pub struct SimilarityScorer<T> {
    pub similarity: T,
    pub history_turns: usize,
}

impl<T> SimilarityScorer<T> {
    /// The query text given to the model.
    pub fn query_text(&self, ctx: &ConversationContext) -> String {
        let start = ctx.history.len().saturating_sub(self.history_turns);
        let mut parts: Vec<&str> = ctx.history[start..]
            .iter()
            .map(|t| t.utterance.as_str())
            .collect();
        parts.push(ctx.effective_utterance());
        parts.join(" ")
    }
}

impl<T: TextSimilarity> StatementScorer for SimilarityScorer<T> {
    fn score_statements(&self, ctx: &ConversationContext) -> Result<Vec<f32>> {
        if ctx.ptkb.is_empty() {
            return Ok(Vec::new());
        }
        let texts: Vec<&str> = ctx.ptkb.iter().map(|s| s.text.as_str()).collect();
        self.similarity.similarities(&self.query_text(ctx), &texts)
    }
}

/// Weighted sum of min-max-normalized scores (each scorer's scores mapped to [0, 1] per turn; a
/// scorer whose scores are all equal contributes nothing to the order).
pub struct HybridScorer {
    pub parts: Vec<(Box<dyn StatementScorer>, f32)>,
}

/// `scores` mapped to [0, 1] (all zeros when they are all equal or not all finite).
pub fn min_max(scores: &[f32]) -> Vec<f32> {
    let lo = scores.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !hi.is_finite() || !lo.is_finite() || hi <= lo {
        return vec![0.0; scores.len()];
    }
    scores.iter().map(|s| (s - lo) / (hi - lo)).collect()
}

impl StatementScorer for HybridScorer {
    fn score_statements(&self, ctx: &ConversationContext) -> Result<Vec<f32>> {
        let mut total = vec![0.0; ctx.ptkb.len()];
        for (scorer, weight) in &self.parts {
            let s = scorer.score_statements(ctx)?;
            if s.len() != total.len() {
                return Err(PipelineError::Model(format!(
                    "scorer returned {} scores for {} statements",
                    s.len(),
                    total.len()
                )));
            }
            for (t, v) in total.iter_mut().zip(min_max(&s)) {
                *t += weight * v;
            }
        }
        Ok(total)
    }
}

/// TF-IDF cosine between stemmed content terms (IDF over the given texts): a model-free
/// [`TextSimilarity`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TermCosine;

impl TextSimilarity for TermCosine {
    fn similarities(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        let docs: Vec<Vec<String>> = texts.iter().map(|t| terms::content_stems(t)).collect();
        let n = docs.len() as f32;
        let mut df: HashMap<&str, f32> = HashMap::new();
        for d in &docs {
            let mut u: Vec<&str> = d.iter().map(String::as_str).collect();
            u.sort_unstable();
            u.dedup();
            for t in u {
                *df.entry(t).or_default() += 1.0;
            }
        }
        let idf = |t: &str| (1.0 + n / (1.0 + df.get(t).copied().unwrap_or(0.0))).ln();
        fn vector<'a>(stems: &'a [String], idf: &dyn Fn(&str) -> f32) -> HashMap<&'a str, f32> {
            let mut v: HashMap<&str, f32> = HashMap::new();
            for s in stems {
                *v.entry(s.as_str()).or_default() += 1.0;
            }
            for (t, w) in v.iter_mut() {
                *w *= idf(t);
            }
            v
        }
        let q_stems = terms::content_stems(query);
        let q = vector(&q_stems, &idf);
        let qn = q.values().map(|w| w * w).sum::<f32>().sqrt();
        Ok(docs
            .iter()
            .map(|d| {
                let v = vector(d, &idf);
                let dn = v.values().map(|w| w * w).sum::<f32>().sqrt();
                if qn == 0.0 || dn == 0.0 {
                    return 0.0;
                }
                let dot: f32 = q.iter().map(|(t, w)| w * v.get(t).unwrap_or(&0.0)).sum();
                dot / (qn * dn)
            })
            .collect())
    }
}

/// Names of the lexical features of a statement ([`statement_features`]).
pub const LEXICAL_FEATURES: &[&str] = &[
    "lexical_context",
    "lexical_context_normalized",
    "lexical_utterance",
    "lexical_utterance_normalized",
    "lexical_history",
    "lexical_context_best",
    "first_person",
    "statements",
    "statement_terms",
];

/// Names of the bi-encoder features, after the lexical ones when a model is used.
pub const MODEL_FEATURES: &[&str] = &[
    "cosine_utterance",
    "cosine_utterance_normalized",
    "cosine_utterance_gap",
    "cosine_previous",
    "cosine_previous_gap",
    "cosine_first",
];

/// Features of every statement of `ctx.ptkb` (rows in PTKB order): [`LEXICAL_FEATURES`], then,
/// with a `similarity` model, [`MODEL_FEATURES`].
pub fn statement_features(
    ctx: &ConversationContext,
    similarity: Option<&dyn TextSimilarity>,
) -> Result<Vec<Vec<f64>>> {
    let n = ctx.ptkb.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let docs: Vec<Vec<String>> = ctx
        .ptkb
        .iter()
        .map(|s| terms::content_stems(&s.text))
        .collect();
    let lexical = LexicalScorer::default();
    let context = bm25_scores(
        &lexical.query.weighted_query(ctx),
        &docs,
        lexical.k1,
        lexical.b,
    );
    let utterance_query: Vec<(String, f32)> = terms::content_stems(ctx.effective_utterance())
        .into_iter()
        .map(|s| (s, 1.0))
        .collect();
    let utterance = bm25_scores(&utterance_query, &docs, lexical.k1, lexical.b);
    let history_query: Vec<(String, f32)> = ctx
        .history
        .iter()
        .flat_map(|t| terms::content_stems(&t.utterance))
        .map(|s| (s, 1.0))
        .collect();
    let history = bm25_scores(&history_query, &docs, lexical.k1, lexical.b);
    let (context_n, utterance_n) = (min_max(&context), min_max(&utterance));
    let best = context.iter().copied().fold(0.0, f32::max);
    let first_person = terms::words(&ctx.utterance)
        .iter()
        .any(|w| lexicon::FIRST_PERSON.contains(&w.as_str()));
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    let mut rows: Vec<Vec<f64>> = (0..n)
        .map(|i| {
            vec![
                context[i] as f64,
                context_n[i] as f64,
                utterance[i] as f64,
                utterance_n[i] as f64,
                history[i] as f64,
                flag(best > 0.0 && context[i] >= best),
                flag(first_person),
                (n as f64).ln(),
                docs[i].len() as f64,
            ]
        })
        .collect();
    if let Some(model) = similarity {
        let cosine = |query: Option<&str>| statement_cosines(model, query, ctx);
        let now = cosine(Some(ctx.effective_utterance()))?;
        let previous = cosine(ctx.history.last().map(|t| t.utterance.as_str()))?;
        let first = cosine(ctx.history.first().map(|t| t.utterance.as_str()))?;
        let now_n = min_max(&now);
        let top = now.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let top_previous = previous.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for (i, row) in rows.iter_mut().enumerate() {
            row.extend([
                now[i] as f64,
                now_n[i] as f64,
                (now[i] - top) as f64,
                previous[i] as f64,
                (previous[i] - top_previous) as f64,
                first[i] as f64,
            ]);
        }
    }
    Ok(rows)
}

/// A learned statement ranker: a logistic model's probability over [`statement_features`], and
/// the probability above which a statement is selected.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct StatementModel {
    pub model: LogisticModel,
    pub threshold: f64,
}

/// A fitted model of whether each statement is relevant to the turn.
pub trait StatementProbability: Send + Sync {
    /// Each statement's probability in `ctx.ptkb` order, with the bi-encoder's features when
    /// `similarity` is set.
    fn probabilities(
        &self,
        ctx: &ConversationContext,
        similarity: Option<&dyn TextSimilarity>,
    ) -> Result<Vec<f32>>;
}

/// A fitted model's probabilities as scores: with the bi-encoder when `similarity` is set.
pub struct FittedScorer<M> {
    pub model: M,
    pub similarity: Option<Box<dyn TextSimilarity>>,
}

impl<M> FittedScorer<M> {
    /// `model` over the features of the neural `reranker`, if any.
    pub fn new(model: M, reranker: Option<Arc<dyn Reranker>>) -> Self {
        FittedScorer {
            model,
            similarity: reranker.map(|m| Box::new(ModelSimilarity(m)) as Box<dyn TextSimilarity>),
        }
    }
}

impl<M: StatementProbability> ModelScorer for FittedScorer<M> {
    fn similarity(&self) -> Option<&dyn TextSimilarity> {
        self.similarity.as_deref()
    }

    fn scores_with(
        &self,
        ctx: &ConversationContext,
        similarity: Option<&dyn TextSimilarity>,
    ) -> Result<Vec<f32>> {
        self.model.probabilities(ctx, similarity)
    }
}

/// [`StatementModel`] scores.
pub type LearnedScorer = FittedScorer<StatementModel>;

impl StatementProbability for StatementModel {
    fn probabilities(
        &self,
        ctx: &ConversationContext,
        similarity: Option<&dyn TextSimilarity>,
    ) -> Result<Vec<f32>> {
        let rows = statement_features(ctx, similarity)?;
        Ok(rows
            .iter()
            .map(|x| self.model.probability(x) as f32)
            .collect())
    }
}

/// The feature names of a learned ranker with or without the bi-encoder.
pub fn statement_feature_names(with_model: bool) -> Vec<&'static str> {
    let mut v = LEXICAL_FEATURES.to_vec();
    if with_model {
        v.extend_from_slice(MODEL_FEATURES);
    }
    v
}

/// Committed weights parsed from one of the JSON texts `[lexical, model]`: the model one
/// `with_model` (over the bi-encoder's features too). `what` names them in the error.
pub fn committed_weights<T: serde::de::DeserializeOwned>(
    with_model: bool,
    [lexical, model]: [&str; 2],
    what: &str,
) -> Result<T> {
    let json = if with_model { model } else { lexical };
    serde_json::from_str(json)
        .map_err(|e| PipelineError::Input(format!("committed {what} weights: {e}")))
}

/// The committed learned statement model (`src/pipeline/weights/ptkb_{model,lexical}.json`,
/// written by `convrag tune ptkb` from training topics only).
pub fn committed_statement_model(with_model: bool) -> Result<StatementModel> {
    let json = [
        include_str!("weights/ptkb_lexical.json"),
        include_str!("weights/ptkb_model.json"),
    ];
    let m: StatementModel = committed_weights(with_model, json, "PTKB")?;
    m.model
        .check_features(&statement_feature_names(with_model))?;
    Ok(m)
}

/// The learned ranker with the committed weights.
pub fn learned_ranker(
    model: Option<std::sync::Arc<dyn crate::rerank::Reranker>>,
) -> Result<ScoringRanker<LearnedScorer>> {
    let weights = committed_statement_model(model.is_some())?;
    let threshold = weights.threshold as f32;
    Ok(ScoringRanker {
        scorer: FittedScorer::new(weights, model),
        // The tuned probability threshold, and (not tuned: a guard for PTKBs much smaller than
        // iKAT's, where the probabilities of all statements rise) at least half the best
        // statement's probability, at most three statements.
        selection: Selection::RelativeToTop {
            ratio: 0.5,
            min_score: threshold,
            max: 3,
        },
    })
}

/// The learned ranker without a model (the server's ranker when no bi-encoder is installed).
pub fn recommended_lexical_ranker() -> Arc<dyn PtkbRanker> {
    or_default_ranker(learned_ranker(None), "learned PTKB")
}

/// `ranker`, or the [`default_ranker`] when its committed weights (`what`) are unusable.
pub fn or_default_ranker<R: PtkbRanker + 'static>(
    ranker: Result<R>,
    what: &str,
) -> Arc<dyn PtkbRanker> {
    match ranker {
        Ok(ranker) => Arc::new(ranker),
        Err(e) => {
            // Unreachable with the committed weights (unit-tested); never stop a turn for it.
            tracing::error!(error = %e, "{what} weights unusable; ranking lexically");
            Arc::new(default_ranker())
        }
    }
}

/// The default ranker: [`LexicalScorer`] with the default [`Selection`].
pub fn default_ranker() -> ScoringRanker<LexicalScorer> {
    ScoringRanker {
        scorer: LexicalScorer::default(),
        selection: Selection::default(),
    }
}

/// The bi-encoder's cosine of every statement of `ctx.ptkb` with `query` (0 for each without a
/// query or with a blank one), checked to score each statement once.
pub fn statement_cosines(
    model: &dyn TextSimilarity,
    query: Option<&str>,
    ctx: &ConversationContext,
) -> Result<Vec<f32>> {
    let n = ctx.ptkb.len();
    match query {
        Some(q) if !q.trim().is_empty() => {
            let texts: Vec<&str> = ctx.ptkb.iter().map(|s| s.text.as_str()).collect();
            let v = model.similarities(q, &texts)?;
            if v.len() != n {
                return Err(PipelineError::Model(format!(
                    "similarity returned {} scores for {n} statements",
                    v.len()
                )));
            }
            Ok(v)
        }
        _ => Ok(vec![0.0; n]),
    }
}

/// A [`Reranker`] (the bi-encoder or cross-encoder) as a [`TextSimilarity`], so the PTKB ranker can
/// use the neural model. Statements are encoded every time (no cache: they may be edited).
pub struct ModelSimilarity(pub Arc<dyn Reranker>);

impl TextSimilarity for ModelSimilarity {
    fn similarities(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        let refs: Vec<PassageRef<'_>> = texts
            .iter()
            .map(|t| PassageRef {
                id: "",
                text: t,
                ordinal: None,
            })
            .collect();
        self.0
            .rerank(query, &refs, None)
            .map_err(PipelineError::ModelFailed)
    }

    fn model_id(&self) -> Option<String> {
        Some(self.0.model_id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_statement_models_match_their_features() {
        for with_model in [false, true] {
            let m = committed_statement_model(with_model).unwrap();
            assert!(m.threshold > 0.0 && m.threshold < 1.0);
        }
    }

    use crate::pipeline::context::with_ptkb as ctx;

    const PTKB: &[&str] = &[
        "I'm vegetarian.",
        "I'm allergic to soybeans.",
        "I just finished watching Breaking Bad.",
        "I'm an Android user.",
    ];

    #[test]
    fn matching_statement_ranks_first_and_is_selected() {
        let r = default_ranker()
            .rank(&ctx("Is there a vegetarian restaurant nearby?", &[], PTKB))
            .unwrap();
        assert_eq!(r.statements.len(), 4);
        assert_eq!(r.statements[0].id, "1");
        assert!(r.statements[0].selected);
        assert_eq!(r.selected().count(), 1);
    }

    #[test]
    fn history_carries_the_topic_to_an_elliptic_turn() {
        let c = ctx(
            "What about the last season?",
            &["I want to discuss Breaking Bad."],
            PTKB,
        );
        let r = default_ranker().rank(&c).unwrap();
        assert_eq!(r.statements[0].id, "3");
        let no_history = ctx("What about the last season?", &[], PTKB);
        assert_eq!(
            default_ranker()
                .rank(&no_history)
                .unwrap()
                .selected()
                .count(),
            0
        );
    }

    #[test]
    fn empty_inputs_give_empty_or_unselected_rankings() {
        let r = default_ranker().rank(&ctx("anything", &[], &[])).unwrap();
        assert!(r.statements.is_empty());
        let r = default_ranker().rank(&ctx("", &[], PTKB)).unwrap();
        assert_eq!(r.statements.len(), 4);
        assert!(r.statements.iter().all(|s| !s.selected && s.score == 0.0));
        // Ties keep PTKB order.
        assert_eq!(r.statements[0].id, "1");
    }

    #[test]
    fn selection_rules() {
        let mut v: Vec<RankedStatement> = [4.0, 3.0, 1.0, 0.0]
            .iter()
            .map(|&score| RankedStatement {
                id: String::new(),
                text: String::new(),
                score,
                selected: false,
            })
            .collect();
        let sel = |v: &[RankedStatement]| v.iter().filter(|s| s.selected).count();
        Selection::TopK(10).apply(&mut v);
        assert_eq!(sel(&v), 3, "zero scores are never selected");
        Selection::Threshold(2.5).apply(&mut v);
        assert_eq!(sel(&v), 2);
        Selection::parse("relative:0.5:1:1").unwrap().apply(&mut v);
        assert_eq!(sel(&v), 1);
        assert!(Selection::parse("top:x").is_err());
        assert!(Selection::parse("bogus").is_err());
    }

    #[test]
    fn ordered_ranker_keeps_the_order_and_selects_by_agreement() {
        let ranking = |order: &[(&str, bool)]| PtkbRanking {
            statements: order
                .iter()
                .enumerate()
                .map(|(i, (id, selected))| RankedStatement {
                    id: id.to_string(),
                    text: format!("statement {id}"),
                    score: 1.0 - i as f32 / 10.0,
                    selected: *selected,
                })
                .collect(),
        };
        let ranker = |agreement| OrderedRanker {
            order: (),
            selection: (),
            agreement,
        };
        let ids = |r: &PtkbRanking| -> Vec<String> {
            r.statements.iter().map(|s| s.id.clone()).collect()
        };
        let chosen =
            |r: &PtkbRanking| -> Vec<String> { r.selected().map(|s| s.id.clone()).collect() };
        // The agreed ranker: the learned order, what both select.
        let learned = ranking(&[("2", true), ("1", true), ("3", false)]);
        let calibrated = ranking(&[("1", true), ("3", true), ("2", false)]);
        let agreed = ranker(Agreement::Both).combine(learned.clone(), &calibrated);
        assert_eq!(ids(&agreed), ["2", "1", "3"], "the learned order");
        assert_eq!(agreed.statements[0].score, learned.statements[0].score);
        assert_eq!(chosen(&agreed), ["1"], "selected by both");
        let none = ranking(&[("1", false), ("2", false), ("3", false)]);
        let nothing = ranker(Agreement::Both).combine(learned, &none);
        assert_eq!(nothing.selected().count(), 0);
        // The served ranker: the base order, the agreed ranker's selection.
        let base = ranking(&[("3", true), ("1", false), ("2", false)]);
        let agreed = ranking(&[("1", true), ("2", false), ("3", false)]);
        let served = ranker(Agreement::Selection).combine(base.clone(), &agreed);
        assert_eq!(ids(&served), ["3", "1", "2"]);
        assert_eq!(served.statements[0].score, base.statements[0].score);
        assert_eq!(chosen(&served), ["1"], "the selection's, not the base's");
    }

    #[test]
    fn hybrid_normalizes_and_weights() {
        let c = ctx("vegetarian Android phone", &[], PTKB);
        let hybrid = HybridScorer {
            parts: vec![
                (Box::new(LexicalScorer::default()), 0.5),
                (
                    Box::new(SimilarityScorer {
                        similarity: TermCosine,
                        history_turns: 0,
                    }),
                    0.5,
                ),
            ],
        };
        let s = hybrid.score_statements(&c).unwrap();
        assert_eq!(s.len(), 4);
        assert!(s.iter().all(|x| (0.0..=1.0).contains(x)));
        assert!(s[0] > s[2] && s[3] > s[2]);
    }

    #[test]
    fn term_cosine_is_one_for_identical_text() {
        let s = TermCosine
            .similarities("vegetarian food", &["vegetarian food", "phones", ""])
            .unwrap();
        assert!((s[0] - 1.0).abs() < 1e-5);
        assert_eq!(s[1], 0.0);
        assert_eq!(s[2], 0.0);
    }

    #[test]
    fn min_max_of_constant_scores_is_zero() {
        assert_eq!(min_max(&[2.0, 2.0]), vec![0.0, 0.0]);
        assert_eq!(min_max(&[1.0, 3.0]), vec![0.0, 1.0]);
        assert!(min_max(&[]).is_empty());
    }
}
