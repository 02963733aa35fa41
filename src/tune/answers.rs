//! Fitting where the extractive answer stops (`convrag tune extractive`): the marginal-relevance
//! threshold of [`StopRule`], chosen on training conversations with topic-level cross-validation,
//! and the measures it is judged by.
//!
//! The reference is the conversation's own response: iKAT 2023 responses were written from the
//! passages listed in `response_provenance`, whose text the topics ship. Every turn with such
//! passages is an example; its candidates are the provenance passages of the whole conversation
//! (the turn's own and its neighbours', on the same subject), ranked by BM25 of the resolved
//! utterance, so the generator must pick the right sentences among plausible ones. Measures:
//! ROUGE-1 (no stemming) against the response, and a lexical nugget recall: each response sentence
//! with at least two content terms is a nugget, matched when half its distinct terms occur in
//! the answer. Both are approximations of a human nugget judgment, not the track's evaluation.

use std::collections::{HashMap, HashSet};

use rayon::prelude::*;
use serde::Serialize;

use super::folds::topic_folds;
use crate::eval::rouge::rouge1;
use crate::formats::ikat::IkatTopic;
use crate::pipeline::generate::stopping::StopRule;
use crate::pipeline::generate::{
    ContextTurn, ExtractiveConfig, ExtractiveGenerator, GenerationRequest, Generator, WordLimit,
};
use crate::pipeline::meaning::sentence_meaning;
use crate::pipeline::{Passage, PipelineError, Result};
use crate::progress::SharedProgress;
use crate::rerank::{QueryVectors, Reranker};
use crate::text::sentences::split_sentences;
use crate::text::terms::terms;

/// One turn: the generation request an automatic run would make, and the written response.
#[derive(Debug, Clone)]
pub struct AnswerExample {
    pub conversation: String,
    pub key: String,
    pub request: GenerationRequest,
    pub reference: String,
}

/// Mean figures over a set of answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct AnswerMeans {
    pub rouge_recall: f64,
    pub rouge_precision: f64,
    pub rouge_f1: f64,
    pub nugget_recall: f64,
    pub words: f64,
    pub sentences: f64,
    pub turns: usize,
}

#[derive(Debug, Clone, Copy, Default)]
struct AnswerScore {
    rouge_recall: f64,
    rouge_precision: f64,
    rouge_f1: f64,
    nugget_recall: f64,
    words: f64,
    sentences: f64,
}

/// The examples of `topics`: turns with a response and at least one provenance passage whose
/// text is in `passages` (id `doc:passage` → text). At most `max_passages` candidates per turn.
pub fn answer_examples(
    topics: &[IkatTopic],
    passages: &HashMap<String, String>,
    max_passages: usize,
    limit: WordLimit,
) -> Vec<AnswerExample> {
    let mut out = Vec::new();
    for topic in topics {
        let mut pool: Vec<&str> = Vec::new();
        for turn in &topic.turns {
            for id in &turn.response_provenance {
                if passages.contains_key(id) && !pool.contains(&id.as_str()) {
                    pool.push(id);
                }
            }
        }
        let pool_terms: Vec<Vec<String>> = pool.iter().map(|id| terms(&passages[*id])).collect();
        let mut context = Vec::new();
        for turn in &topic.turns {
            let own = turn
                .response_provenance
                .iter()
                .any(|id| passages.contains_key(id));
            if let (Some(response), true) = (&turn.response, own) {
                let query = turn
                    .resolved_utterance
                    .as_deref()
                    .unwrap_or(&turn.utterance);
                let ranked = rank_pool(query, &pool_terms, max_passages);
                let candidates = ranked
                    .into_iter()
                    .map(|(i, score)| Passage {
                        id: pool[i].to_string(),
                        text: passages[pool[i]].clone(),
                        score,
                        ..Passage::default()
                    })
                    .collect();
                let mut request = GenerationRequest::new(query, candidates, limit);
                request.context.clone_from(&context);
                out.push(AnswerExample {
                    conversation: topic.number.clone(),
                    key: topic.turn_key(turn),
                    request,
                    reference: response.clone(),
                });
            }
            context.push(ContextTurn {
                user: turn.utterance.clone(),
                response: turn.response.clone(),
            });
        }
    }
    out
}

/// BM25 (k1 1.2, b 0.75, IDF over the pool) of `query` against each passage; the best `k`,
/// ties in pool order.
fn rank_pool(query: &str, pool: &[Vec<String>], k: usize) -> Vec<(usize, f64)> {
    let n = pool.len() as f64;
    let avgdl = (pool.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1.0)).max(1.0);
    let mut query_terms = terms(query);
    query_terms.sort_unstable();
    query_terms.dedup();
    let mut scored: Vec<(usize, f64)> = pool
        .iter()
        .enumerate()
        .map(|(i, doc)| {
            let dl = doc.len() as f64;
            let score = query_terms
                .iter()
                .map(|t| {
                    let tf = doc.iter().filter(|d| *d == t).count() as f64;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let df = pool.iter().filter(|d| d.contains(t)).count() as f64;
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))
                })
                .sum();
            (i, score)
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(k);
    scored
}

/// Lexical nugget recall of `answer` against `reference` (see the module comment).
pub fn nugget_recall(reference: &str, answer: &str) -> Option<f64> {
    let answer: HashSet<String> = terms(answer).into_iter().collect();
    let nuggets: Vec<HashSet<String>> = split_sentences(reference)
        .iter()
        .map(|s| terms(s).into_iter().collect::<HashSet<_>>())
        .filter(|t| t.len() >= 2)
        .collect();
    if nuggets.is_empty() {
        return None;
    }
    let matched = nuggets
        .iter()
        .filter(|n| 2 * n.iter().filter(|t| answer.contains(*t)).count() >= n.len())
        .count();
    Some(matched as f64 / nuggets.len() as f64)
}

fn score(example: &AnswerExample, generator: &ExtractiveGenerator) -> Result<AnswerScore> {
    let generation = generator.generate_sync(&example.request)?;
    let text = generation.response_text();
    let rouge = rouge1(&example.reference, &text, false);
    Ok(AnswerScore {
        rouge_recall: rouge.recall,
        rouge_precision: rouge.precision,
        rouge_f1: rouge.fmeasure,
        nugget_recall: nugget_recall(&example.reference, &text).unwrap_or(0.0),
        words: generation.diagnostics.words as f64,
        sentences: generation.sentences.len() as f64,
    })
}

fn means<'a>(scores: impl IntoIterator<Item = &'a AnswerScore>) -> AnswerMeans {
    let mut m = AnswerMeans::default();
    for s in scores {
        m.rouge_recall += s.rouge_recall;
        m.rouge_precision += s.rouge_precision;
        m.rouge_f1 += s.rouge_f1;
        m.nugget_recall += s.nugget_recall;
        m.words += s.words;
        m.sentences += s.sentences;
        m.turns += 1;
    }
    let n = m.turns.max(1) as f64;
    for v in [
        &mut m.rouge_recall,
        &mut m.rouge_precision,
        &mut m.rouge_f1,
        &mut m.nugget_recall,
        &mut m.words,
        &mut m.sentences,
    ] {
        *v /= n;
    }
    m
}

/// Figures of the extractive generator with `base` and the stopping threshold `min_marginal`.
pub fn evaluate_answers(
    examples: &[AnswerExample],
    base: &ExtractiveConfig,
    min_marginal: Option<f64>,
) -> Result<AnswerMeans> {
    let generator = ExtractiveGenerator::new(ExtractiveConfig {
        min_marginal,
        ..base.clone()
    });
    let scores = examples
        .iter()
        .map(|e| score(e, &generator))
        .collect::<Result<Vec<_>>>()?;
    Ok(means(&scores))
}

/// One point of the tuning grid: whether sentences come with their context, and the threshold
/// (`None`: fill the limit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GridPoint {
    pub keep_context: bool,
    pub min_marginal: Option<f64>,
}

/// The points tried: every threshold, sentences alone and with their context.
pub fn default_grid() -> Vec<GridPoint> {
    let thresholds = std::iter::once(None).chain((0..=14).map(|i| Some(f64::from(i) * 0.05)));
    [false, true]
        .into_iter()
        .flat_map(|keep_context| {
            thresholds.clone().map(move |min_marginal| GridPoint {
                keep_context,
                min_marginal,
            })
        })
        .collect()
}

/// What [`tune_stopping`] found.
#[derive(Debug, Clone, Serialize)]
pub struct StopTuning {
    pub rule: StopRule,
    pub folds: usize,
    /// Each held-out fold answered with the grid point chosen on the other folds.
    pub cv: AnswerMeans,
    /// The same cross-validation over the points with sentences alone (no context rule).
    pub cv_alone: AnswerMeans,
    /// Filling the limit with sentences alone.
    pub fill: AnswerMeans,
    /// Every grid point on all training turns.
    pub grid: Vec<(GridPoint, AnswerMeans)>,
}

/// The point (a row of `scores`, among `allowed`) with the best mean ROUGE-1 F1 over the
/// examples `members` holds; the first among equals (the grids list the point that changes
/// least first: the lowest threshold, no meaning).
fn best_point(
    scores: &[Vec<AnswerScore>],
    members: &dyn Fn(usize) -> bool,
    allowed: &dyn Fn(usize) -> bool,
) -> usize {
    let f1 = |g: usize| {
        let s: Vec<f64> = (0..scores[g].len())
            .filter(|&e| members(e))
            .map(|e| scores[g][e].rouge_f1)
            .collect();
        s.iter().sum::<f64>() / s.len().max(1) as f64
    };
    (0..scores.len())
        .filter(|&g| allowed(g))
        .fold(None, |best: Option<usize>, g| match best {
            Some(b) if f1(g) <= f1(b) => Some(b),
            _ => Some(g),
        })
        .unwrap_or(0)
}

/// Each fold's examples answered with the point (among `allowed`) best on the other folds.
fn cross_validated(
    scores: &[Vec<AnswerScore>],
    fold_of: &[usize],
    folds: usize,
    allowed: &dyn Fn(usize) -> bool,
) -> AnswerMeans {
    let mut held_out = vec![AnswerScore::default(); fold_of.len()];
    for f in 0..folds.max(1) {
        let g = best_point(scores, &|e| fold_of[e] != f, allowed);
        for e in (0..fold_of.len()).filter(|&e| fold_of[e] == f) {
            held_out[e] = scores[g][e];
        }
    }
    means(&held_out)
}

/// `scores[g][e]`: example `e` answered with `configs[g]` (generation is deterministic, so the
/// configurations are answered on every core).
fn score_grid(
    examples: &[AnswerExample],
    configs: &[ExtractiveConfig],
) -> Result<Vec<Vec<AnswerScore>>> {
    configs
        .par_iter()
        .map(|config| {
            let generator = ExtractiveGenerator::new(config.clone());
            examples.iter().map(|e| score(e, &generator)).collect()
        })
        .collect()
}

/// [`score_grid`] of `configs` on `examples`, with each example's fold (by topic).
fn scores_and_folds(
    examples: &[AnswerExample],
    configs: &[ExtractiveConfig],
    folds: usize,
) -> Result<(Vec<Vec<AnswerScore>>, Vec<usize>)> {
    if examples.is_empty() || configs.is_empty() {
        return Err(PipelineError::Input(
            "no training turn with a response and its passages".into(),
        ));
    }
    let scores = score_grid(examples, configs)?;
    let conversations: Vec<String> = examples.iter().map(|e| e.conversation.clone()).collect();
    Ok((scores, topic_folds(&conversations, folds)))
}

/// Chooses the grid point maximizing mean ROUGE-1 F1, by topic-level cross-validation on
/// `examples`, then on all of them for the committed rule.
pub fn tune_stopping(
    examples: &[AnswerExample],
    base: &ExtractiveConfig,
    folds: usize,
    grid: &[GridPoint],
) -> Result<StopTuning> {
    let configs: Vec<ExtractiveConfig> = grid
        .iter()
        .map(|point| ExtractiveConfig {
            min_marginal: point.min_marginal,
            keep_context: point.keep_context,
            ..base.clone()
        })
        .collect();
    let (scores, fold_of) = scores_and_folds(examples, &configs, folds)?;
    let chosen = grid[best_point(&scores, &|_| true, &|_| true)];
    let fill = grid
        .iter()
        .position(|p| p.min_marginal.is_none() && !p.keep_context);
    Ok(StopTuning {
        rule: StopRule {
            min_marginal: chosen.min_marginal,
            keep_context: chosen.keep_context,
            objective: "rouge1_f1".into(),
            training_turns: examples.len(),
        },
        folds,
        cv: cross_validated(&scores, &fold_of, folds, &|_| true),
        cv_alone: cross_validated(&scores, &fold_of, folds, &|g| !grid[g].keep_context),
        fill: fill.map(|g| means(&scores[g])).unwrap_or_default(),
        grid: grid.iter().copied().zip(scores.iter().map(means)).collect(),
    })
}

/// Gives each example's request its candidate sentences' closeness in meaning to its query
/// (as a turn computes it, [`sentence_meaning`]), one example after the other on `progress`.
pub fn add_sentence_meaning(
    examples: &mut [AnswerExample],
    base: &ExtractiveConfig,
    model: &dyn Reranker,
    vectors: &QueryVectors,
    progress: &SharedProgress,
) -> Result<()> {
    // Any positive weight: which sentences a reader's answer weighs does not depend on it.
    let reader = ExtractiveGenerator::new(ExtractiveConfig {
        keep_context: true,
        meaning_weight: 1.0,
        ..base.clone()
    });
    progress.set_length(examples.len() as u64);
    for example in examples.iter_mut() {
        let sentences = reader.sentences_to_weigh(&example.request);
        // Uncached: tuning reads each example once.
        example.request.sentence_meaning =
            sentence_meaning(model, vectors, &example.request.query, sentences, None)?
                .map(|w| w.meaning);
        progress.inc(1);
    }
    progress.finish();
    Ok(())
}

/// The meaning weights tried for a reader's answers, none first.
pub fn default_meaning_weights() -> Vec<f64> {
    (0..=9).map(|i| f64::from(i) * 0.1).collect()
}

/// What [`tune_meaning`] found.
#[derive(Debug, Clone, Serialize)]
pub struct MeaningTuning {
    /// Chosen on all the examples.
    pub weight: f64,
    pub folds: usize,
    /// Each held-out fold answered with the weight chosen on the other folds.
    pub cv: AnswerMeans,
    /// Every weight on all the examples.
    pub grid: Vec<(f64, AnswerMeans)>,
}

/// Chooses [`ExtractiveConfig::meaning_weight`] for a reader's answers (context kept, filling
/// the limit, as the chat answers) maximizing mean ROUGE-1 F1, by topic-level cross-validation
/// on `examples`, whose requests carry their sentences' meaning.
pub fn tune_meaning(
    examples: &[AnswerExample],
    base: &ExtractiveConfig,
    folds: usize,
    weights: &[f64],
) -> Result<MeaningTuning> {
    let configs: Vec<ExtractiveConfig> = weights
        .iter()
        .map(|&meaning_weight| ExtractiveConfig {
            keep_context: true,
            min_marginal: None,
            meaning_weight,
            ..base.clone()
        })
        .collect();
    let (scores, fold_of) = scores_and_folds(examples, &configs, folds)?;
    Ok(MeaningTuning {
        weight: weights[best_point(&scores, &|_| true, &|_| true)],
        folds,
        cv: cross_validated(&scores, &fold_of, folds, &|_| true),
        grid: weights
            .iter()
            .copied()
            .zip(scores.iter().map(means))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nuggets_are_matched_by_half_their_terms() {
        let reference =
            "Paris has the Eiffel Tower. Gustave Eiffel designed the wrought iron lattice. Ok.";
        // Nugget 1 {paris, eiffel, tower}: 2 of 3; nugget 2 {gustave, eiffel, designed, wrought,
        // iron, lattice}: 1 of 6; "Ok." has one term and is no nugget.
        assert_eq!(
            nugget_recall(reference, "The Eiffel Tower is tall."),
            Some(0.5)
        );
        assert_eq!(nugget_recall("Ok.", "anything"), None);
    }

    #[test]
    fn the_pool_is_ranked_by_bm25() {
        let pool = vec![
            terms("cats sleep a lot"),
            terms("dogs bark at cats and dogs"),
        ];
        let ranked = rank_pool("why do dogs bark", &pool, 1);
        assert_eq!(ranked.len(), 1);
        assert_eq!(ranked[0].0, 1);
    }

    fn example(conversation: &str, query: &str, passage: &str, reference: &str) -> AnswerExample {
        AnswerExample {
            conversation: conversation.into(),
            key: format!("{conversation}_1"),
            request: GenerationRequest::new(
                query,
                vec![Passage {
                    id: "p".into(),
                    text: passage.into(),
                    score: 1.0,
                    ..Passage::default()
                }],
                WordLimit::IKAT,
            ),
            reference: reference.into(),
        }
    }

    #[test]
    fn tuning_stops_when_the_extra_sentences_are_off_the_reference() {
        // The answer the reference wants is the first sentence; the rest only mention the query
        // in passing, so filling the limit costs precision.
        let passage = "Otters crack clams with stones on their bellies. Gulls crack clams by dropping them onto rocks from a height. Clams bury themselves in sand when otters or crabs come near the shore. Some clams live for more than a century in cold northern water.";
        let examples: Vec<AnswerExample> = (0..6)
            .map(|i| {
                example(
                    &format!("{i}-1"),
                    "how do otters crack clams",
                    passage,
                    "Otters crack clams with stones.",
                )
            })
            .collect();
        let tuning =
            tune_stopping(&examples, &ExtractiveConfig::default(), 3, &default_grid()).unwrap();
        assert!(tuning.rule.min_marginal.is_some(), "{:?}", tuning.grid);
        assert!(tuning.cv.rouge_f1 > tuning.fill.rouge_f1, "{tuning:?}");
        assert!(tuning.cv.sentences < tuning.fill.sentences);
        assert!(tune_stopping(&[], &ExtractiveConfig::default(), 3, &default_grid()).is_err());
    }
}
