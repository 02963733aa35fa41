//! Stage 2: query rewriting without an LLM.
//!
//! A [`Rewriter`] turns the current utterance into a self-contained query from the conversation
//! context (earlier utterances and, for automatic runs, earlier canonical responses; never a
//! reference rewrite nor anything of later turns) and the selected PTKB statements.
//!
//! [`HistoryRewriter`] (the default) keeps the utterance as said and writes a few context terms
//! into it. Its parts, by what they are:
//! - [`candidates`]: the content terms of earlier utterances and responses that the utterance
//!   lacks, with their decayed weights and features ([`TERM_FEATURES`]). Terms repeated through
//!   the conversation are its topic; terms of the last turns are what pronouns and ellipsis most
//!   likely point to.
//! - [`selection`]: which candidates are carried. By default ([`TermSelection::Learned`]) a
//!   logistic model ([`TermSelector`], fitted by `convrag tune rewrite` on training topics only)
//!   keeps those whose probability of appearing in a manual rewrite is at least its threshold,
//!   at most `max_terms`, then up to `answer_terms` more that only earlier answers said. With
//!   [`TermSelection::Decayed`] the budget is `base_terms`, plus `anaphora_terms` when the
//!   utterance refers back (*it*, *they*, *those*) or is elliptic.
//! - [`resolvers`]: the rules applied in the order of [`RESOLVERS`]: a reference to a list of
//!   the previous answer ([`list_references`]) or an accepted offer ([`accepted_offer`]) is
//!   written out; otherwise the carried terms, each name whole, go in place of a possessive or
//!   the first pronoun, else are appended ([`realization`]); the place the user named is kept
//!   ([`place`]); words of the selected PTKB statements become retrieval terms
//!   (`ptkb_query_terms`) and, when asked (`ptkb_terms`, or `ptkb_terms_first_person` when the
//!   utterance speaks of the user), words of the text: manual rewrites rarely spell the persona
//!   out.
//! - [`lexicon`]: the English words the rules look for; [`language`]: the check that leaves a
//!   conversation in another language as said.
//!
//! The rewrite also carries weighted stems for retrieval: the utterance's at 1, context terms at
//! `context_weight` × their normalized weight, PTKB terms at `ptkb_weight`.
//!
//! [`ManualRewriter`] uses a supplied rewrite (iKAT `resolved_utterance` in manual runs) and falls
//! back to another rewriter when there is none.

pub mod accepted_offer;
pub mod candidates;
pub mod history;
pub mod language;
pub mod lexicon;
pub mod list_references;
pub mod place;
pub mod realization;
pub mod resolvers;
pub mod selection;
pub mod terms;

use std::collections::HashSet;

use serde::Serialize;

use super::context::ConversationContext;
use super::Result;

pub use candidates::{TermCandidate, TERM_FEATURES};
pub use history::HistoryRewriter;
pub use resolvers::{Resolver, RESOLVERS};
pub use selection::{learned_term_selector, TermSelection, TermSelector};

/// A rewritten query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rewrite {
    pub text: String,
    /// Weighted Porter stems for retrieval, utterance terms first.
    pub terms: Vec<(String, f32)>,
    /// Which method produced it.
    pub method: RewriteMethod,
}

/// Which method wrote a turn's query (stored in the turn's diagnostics as its snake_case name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewriteMethod {
    /// History-aware term carry-over ([`HistoryRewriter`]).
    History,
    /// A rewrite supplied with the turn.
    Manual,
    /// The chat model's rewrite (`prompts/rewrite.*.md`).
    Llm,
}

impl RewriteMethod {
    /// The name stored and shown (`history`, `manual`, `llm`).
    pub fn as_str(self) -> &'static str {
        match self {
            RewriteMethod::History => "history",
            RewriteMethod::Manual => "manual",
            RewriteMethod::Llm => "llm",
        }
    }
}

/// Rewrites the current utterance into a self-contained query.
pub trait Rewriter: Send + Sync {
    /// `selected_ptkb`: texts of the selected PTKB statements, best first.
    fn rewrite(&self, ctx: &ConversationContext, selected_ptkb: &[&str]) -> Result<Rewrite>;
}

/// Uses the context's supplied rewrite; without one, the fallback rewriter.
pub struct ManualRewriter<R> {
    pub fallback: R,
}

impl<R: Rewriter> Rewriter for ManualRewriter<R> {
    fn rewrite(&self, ctx: &ConversationContext, selected_ptkb: &[&str]) -> Result<Rewrite> {
        match ctx.manual_rewrite.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() => {
                let mut seen = HashSet::new();
                let terms = terms::content_stems(m)
                    .into_iter()
                    .filter(|s| seen.insert(s.clone()))
                    .map(|s| (s, 1.0))
                    .collect();
                Ok(Rewrite {
                    text: m.to_string(),
                    terms,
                    method: RewriteMethod::Manual,
                })
            }
            _ => self.fallback.rewrite(ctx, selected_ptkb),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_uses_the_supplied_rewrite_or_falls_back() {
        let rw = ManualRewriter {
            fallback: HistoryRewriter::default(),
        };
        let mut c = ConversationContext {
            utterance: "Is it treatable?".into(),
            history: vec![super::super::context::HistoryTurn {
                utterance: "What is throat cancer?".into(),
                response: None,
            }],
            ..Default::default()
        };
        c.manual_rewrite = Some("Is throat cancer treatable?".into());
        let r = rw.rewrite(&c, &[]).unwrap();
        assert_eq!(r.text, "Is throat cancer treatable?");
        assert_eq!(r.method, RewriteMethod::Manual);
        c.manual_rewrite = Some(" ".into());
        assert_eq!(rw.rewrite(&c, &[]).unwrap().method, RewriteMethod::History);
    }
}
