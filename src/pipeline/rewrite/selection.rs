//! Selection: which term candidates the rewrite carries. By default a logistic model over the
//! candidates' features ([`TermSelector`], fitted by `convrag tune rewrite` on training topics
//! only); the decayed weights with a fixed budget remain for comparison and tuning.

use std::sync::LazyLock;

use serde::Serialize;

use super::candidates::{TermCandidate, TERM_FEATURES};
use crate::pipeline::learned::LogisticModel;

/// How [`super::HistoryRewriter`] chooses the history terms it carries into the rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermSelection {
    /// The `decay`/`first`/`response` weight with the `base_terms`/`anaphora_terms` budget.
    Decayed,
    /// The learned [`TermSelector`] committed in `src/pipeline/weights/rewrite_terms.json`
    /// (written by `convrag tune rewrite` from training topics only).
    Learned,
}

/// A learned choice of history terms: the terms whose probability of appearing in a manual
/// rewrite is at least `threshold`, at most `max_terms` of them, most probable first, then up
/// to `answer_terms` more that only earlier answers said.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct TermSelector {
    pub model: LogisticModel,
    pub threshold: f64,
    pub max_terms: usize,
    /// Slots beyond `max_terms` for words of earlier answers: the words a rewrite most often
    /// lacks in conversations with answers.
    pub answer_terms: usize,
    /// [`super::HistoryRewriter::ptkb_terms_first_person`], chosen with the selector.
    pub ptkb_terms_first_person: usize,
}

impl TermSelector {
    /// Each candidate with its probability under the model, most probable first (ties keep
    /// the candidates' order).
    pub fn score(&self, candidates: Vec<TermCandidate>) -> Vec<(f64, TermCandidate)> {
        let mut scored: Vec<(f64, TermCandidate)> = candidates
            .into_iter()
            .map(|c| (self.model.probability(&c.features), c))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored
    }

    /// The terms to add, from candidates as [`Self::score`] orders them, in conversation order:
    /// those at or above the threshold, at most `max_terms`, then up to `answer_terms` of the
    /// rest that only answers said. A chosen term's weight is its probability.
    pub fn choose(&self, scored: &[(f64, TermCandidate)]) -> Vec<TermCandidate> {
        let mut out: Vec<TermCandidate> = Vec::new();
        let mut answer_slots = self.answer_terms;
        for (p, c) in scored.iter().take_while(|(p, _)| *p >= self.threshold) {
            let take = if out.len() < self.max_terms {
                true
            } else if answer_slots == 0 {
                break;
            } else if c.response_only {
                answer_slots -= 1;
                true
            } else {
                false
            };
            if take {
                out.push(TermCandidate {
                    weight: *p as f32,
                    ..c.clone()
                });
            }
        }
        out.sort_by_key(|c| c.at);
        out
    }
}

/// The decayed selection: the `budget` heaviest candidates with a weight (`candidates` as
/// [`super::candidates::term_candidates`] orders them), in conversation order.
pub fn decayed_choice(mut candidates: Vec<TermCandidate>, budget: usize) -> Vec<TermCandidate> {
    candidates.retain(|c| c.weight > 0.0);
    candidates.truncate(budget);
    candidates.sort_by_key(|c| c.at);
    candidates
}

static LEARNED_SELECTOR: LazyLock<TermSelector> = LazyLock::new(|| {
    let selector: TermSelector =
        serde_json::from_str(include_str!("../weights/rewrite_terms.json"))
            .expect("the committed rewrite_terms.json parses (unit-tested)");
    selector
        .model
        .check_features(TERM_FEATURES)
        .expect("the committed rewrite_terms.json matches TERM_FEATURES (unit-tested)");
    selector
});

/// The committed learned term selector.
pub fn learned_term_selector() -> &'static TermSelector {
    &LEARNED_SELECTOR
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_selector_matches_the_features() {
        let sel = learned_term_selector();
        sel.model.check_features(TERM_FEATURES).unwrap();
        assert!(sel.max_terms > 0 && sel.threshold > 0.0 && sel.threshold < 1.0);
    }

    /// A candidate whose only feature is its probability's logit, for [`TermSelector::choose`].
    fn scored(list: &[(&str, f64, bool)]) -> (TermSelector, Vec<(f64, TermCandidate)>) {
        let sel = TermSelector {
            model: LogisticModel {
                features: vec!["logit".into()],
                mean: vec![0.0],
                scale: vec![1.0],
                weights: vec![1.0],
                bias: 0.0,
            },
            threshold: 0.5,
            max_terms: 2,
            answer_terms: 1,
            ptkb_terms_first_person: 1,
        };
        let candidates = list
            .iter()
            .enumerate()
            .map(|(i, &(w, p, response_only))| TermCandidate {
                surface: w.into(),
                stem: w.into(),
                weight: 0.0,
                at: (0, i),
                response_only,
                features: vec![(p / (1.0 - p)).ln()],
            })
            .collect();
        let scored = sel.score(candidates);
        (sel, scored)
    }

    #[test]
    fn answer_slots_take_only_answer_words_beyond_the_term_limit() {
        let (sel, scored) = scored(&[
            ("said", 0.7, false),
            ("top", 0.9, true),
            ("second", 0.8, false),
            ("user", 0.65, false),
            ("answer", 0.6, true),
            ("low", 0.4, true),
        ]);
        let stems = |v: Vec<TermCandidate>| v.into_iter().map(|c| c.stem).collect::<Vec<_>>();
        // Two by probability, one more that only an answer said, above the threshold; in
        // conversation order, each weighted by its probability.
        let chosen = sel.choose(&scored);
        assert!((chosen[0].weight - 0.9).abs() < 1e-6);
        assert_eq!(stems(chosen), ["top", "second", "answer"]);
        let none = TermSelector {
            answer_terms: 0,
            ..sel.clone()
        };
        assert_eq!(stems(none.choose(&scored)), ["top", "second"]);
        let strict = TermSelector {
            threshold: 0.62,
            ..sel
        };
        assert_eq!(stems(strict.choose(&scored)), ["top", "second"]);
    }
}
