//! The zero-shot PTKB ranking: the bi-encoder's cosine of each statement with the conversation
//! (the utterance, its three prior utterances and the previous response, each weighted), with no
//! fitted weight. The learned ranker's order was fitted on iKAT 2023's train topics and does not
//! carry to later editions (nDCG@3 0.378 and 0.474 there, below an untrained cosine); this one
//! has nothing to carry. A correction fitted on top of it (`convrag tune ptkb-transfer`) lost to
//! it on held-out iKAT 2023 topics in both directions, so the base orders what turns serve
//! ([`ServedRanker`]: the base's order, the agreed ranker's selection).

use super::context::ConversationContext;
use super::ptkb::{
    statement_cosines, Agreement, ModelScorer, ModelSimilarity, OrderedRanker, PtkbRanker,
    ScoringRanker, Selection, TextSimilarity,
};
use super::ptkb_calibrated::{agreed_ranker, AgreedRanker};
use super::Result;

/// How much each part of the conversation counts. Set before any figure was seen and never
/// fitted: the utterance 1, each earlier utterance half the one after it, the previous response
/// a quarter (a response is long and drifts from what the user asks).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConversationWeights {
    pub utterance: f32,
    /// The previous utterance, the one before it, and the one before that.
    pub prior: [f32; 3],
    pub response: f32,
}

impl Default for ConversationWeights {
    fn default() -> Self {
        ConversationWeights {
            utterance: 1.0,
            prior: [0.5, 0.25, 0.125],
            response: 0.25,
        }
    }
}

/// The cosines the base sums, per statement (rows in PTKB order): with the utterance, with each
/// prior utterance (0 where there is none), with the previous response (0 without one).
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationCosines {
    pub utterance: Vec<f32>,
    pub prior: [Vec<f32>; 3],
    pub response: Vec<f32>,
}

impl ConversationCosines {
    pub fn of(ctx: &ConversationContext, model: &dyn TextSimilarity) -> Result<Self> {
        let cosine = |query: Option<&str>| statement_cosines(model, query, ctx);
        let n = ctx.history.len();
        let prior = |back: usize| cosine(n.checked_sub(back).map(|i| &*ctx.history[i].utterance));
        Ok(ConversationCosines {
            utterance: cosine(Some(ctx.effective_utterance()))?,
            prior: [prior(1)?, prior(2)?, prior(3)?],
            response: cosine(ctx.history.last().and_then(|t| t.response.as_deref()))?,
        })
    }

    /// The weighted sum per statement.
    pub fn weighted(&self, w: &ConversationWeights) -> Vec<f32> {
        (0..self.utterance.len())
            .map(|i| {
                w.utterance * self.utterance[i]
                    + (0..3).map(|d| w.prior[d] * self.prior[d][i]).sum::<f32>()
                    + w.response * self.response[i]
            })
            .collect()
    }
}

/// [`ConversationCosines::weighted`] as a [`StatementScorer`].
pub struct ZeroShotScorer {
    pub similarity: Box<dyn TextSimilarity>,
    pub weights: ConversationWeights,
}

impl ModelScorer for ZeroShotScorer {
    fn similarity(&self) -> Option<&dyn TextSimilarity> {
        Some(self.similarity.as_ref())
    }

    fn scores_with(
        &self,
        ctx: &ConversationContext,
        similarity: Option<&dyn TextSimilarity>,
    ) -> Result<Vec<f32>> {
        if ctx.ptkb.is_empty() {
            return Ok(Vec::new());
        }
        let model = similarity.unwrap_or(self.similarity.as_ref());
        Ok(ConversationCosines::of(ctx, model)?.weighted(&self.weights))
    }
}

/// The zero-shot ranker alone (`convrag pipeline ptkb --ranker zero-shot`). Its selection, the
/// best statement, is not tuned: the base is for ordering; turns select by the agreed rule.
pub fn zero_shot_ranker(
    model: std::sync::Arc<dyn crate::rerank::Reranker>,
) -> ScoringRanker<ZeroShotScorer> {
    ScoringRanker {
        scorer: ZeroShotScorer {
            similarity: Box::new(ModelSimilarity(model)),
            weights: ConversationWeights::default(),
        },
        selection: Selection::TopK(1),
    }
}

/// What turns serve with the bi-encoder: the zero-shot order and scores, a statement selected
/// when the [`AgreedRanker`] selects it (the learned and the calibrated ranker both do), so which
/// statements are used, and where nothing is, stays as measured for that rule.
pub type ServedRanker = OrderedRanker<ScoringRanker<ZeroShotScorer>, AgreedRanker>;

/// The served ranker with the bi-encoder `model` and the committed weights of the selection.
pub fn served_ranker(model: std::sync::Arc<dyn crate::rerank::Reranker>) -> Result<ServedRanker> {
    Ok(OrderedRanker {
        order: zero_shot_ranker(model.clone()),
        selection: agreed_ranker(Some(model))?,
        agreement: Agreement::Selection,
    })
}

/// The ranker the server and batch runs use: with the bi-encoder the
/// [`ServedRanker`] (the zero-shot order, which transfers to topics it was
/// never fitted on, and the [`AgreedRanker`]'s selection, which abstains where nothing is
/// relevant and holds on small PTKBs); without one the learned lexical ranker, which ranks iKAT
/// far better than the calibrated ranker's lexical features.
pub fn recommended_ranker(
    model: Option<std::sync::Arc<dyn crate::rerank::Reranker>>,
) -> std::sync::Arc<dyn PtkbRanker> {
    let Some(model) = model else {
        return super::ptkb::recommended_lexical_ranker();
    };
    super::ptkb::or_default_ranker(served_ranker(model), "PTKB")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::context::with_turns as ctx;
    use crate::pipeline::ptkb::{StatementScorer, TermCosine};

    fn scorer() -> ZeroShotScorer {
        ZeroShotScorer {
            similarity: Box::new(TermCosine),
            weights: ConversationWeights::default(),
        }
    }

    #[test]
    fn the_utterance_outweighs_earlier_turns_and_the_response() {
        let c = ctx(
            "Which phone should I buy?",
            &[(
                "Where do vegetarians eat?",
                Some("Lisbon has vegetarian cafes."),
            )],
            &[
                "I am vegetarian.",
                "I buy a new phone every year.",
                "I live in Lisbon.",
            ],
        );
        let s = scorer().score_statements(&c).unwrap();
        assert!(s[1] > s[0] && s[0] > 0.0 && s[2] > 0.0, "{s:?}");
        // A statement matching only the response counts less than one matching the utterance
        // before it.
        assert!(s[0] > s[2], "{s:?}");
    }

    #[test]
    fn prior_utterances_decay_and_stop_after_three() {
        let c = ctx(
            "And then?",
            &[
                ("cats", None),
                ("dogs", None),
                ("birds", None),
                ("fish", None),
            ],
            &["cats", "dogs", "birds", "fish"],
        );
        let cos = ConversationCosines::of(&c, &TermCosine).unwrap();
        let s = cos.weighted(&ConversationWeights::default());
        for (got, want) in s.iter().zip([0.0, 0.125, 0.25, 0.5]) {
            assert!((got - want).abs() < 1e-5, "{s:?}");
        }
    }

    #[test]
    fn empty_ptkb_scores_nothing() {
        assert!(scorer()
            .score_statements(&ctx("hello", &[], &[]))
            .unwrap()
            .is_empty());
    }
}
