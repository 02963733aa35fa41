//! [`HistoryRewriter`]: the rewrite without an LLM. Term candidates from the history
//! ([`super::candidates`]), chosen by the learned selector or the decayed weights
//! ([`super::selection`]), then the rules of [`super::resolvers::RESOLVERS`] in order; in a
//! conversation not in English ([`super::language`]) the English rules leave the utterance as
//! said.

use std::collections::HashSet;

use super::candidates::{self, CandidateWeights, TermCandidate};
use super::language::{conversation_language, ConversationLanguage};
use super::resolvers::{apply_all, Draft, DraftSettings};
use super::selection::{decayed_choice, learned_term_selector, TermSelection, TermSelector};
use super::{Rewrite, RewriteMethod, Rewriter};
use crate::pipeline::context::ConversationContext;
use crate::pipeline::Result;

/// The history-aware rewriter (see the module documentation of [`super`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoryRewriter {
    pub base_terms: usize,
    pub anaphora_terms: usize,
    pub decay: f32,
    pub first: f32,
    pub response: f32,
    /// Content terms of the selected statements written into the rewrite text.
    pub ptkb_terms: usize,
    /// As `ptkb_terms`, but only when the utterance speaks of the user (*I*, *me*, *my*,
    /// *mine*, *myself*): "what should I cook?" is about the person the PTKB describes.
    pub ptkb_terms_first_person: usize,
    /// Content terms of the selected statements added to the weighted retrieval terms only
    /// (at least `ptkb_terms`): personalization without changing the text a human reads.
    pub ptkb_query_terms: usize,
    pub context_weight: f32,
    pub ptkb_weight: f32,
    /// Utterances with fewer content terms than this count as elliptic.
    pub short_below: usize,
    /// Write the context terms in place of the first pronoun (*it*, *they*, *them*, *its*,
    /// *their*) instead of appending them.
    pub replace_pronoun: bool,
    /// How the context terms are chosen.
    pub selection: TermSelection,
}

impl Default for HistoryRewriter {
    /// The setting measured best against manual rewrites (BENCHMARKS.md).
    fn default() -> Self {
        HistoryRewriter {
            base_terms: 0,
            anaphora_terms: 3,
            decay: 0.5,
            first: 0.6,
            response: 0.3,
            ptkb_terms: 0,
            // Chosen by `convrag tune rewrite` on training topics (cross-validated).
            ptkb_terms_first_person: learned_term_selector().ptkb_terms_first_person,
            ptkb_query_terms: 6,
            context_weight: 0.5,
            ptkb_weight: 0.3,
            short_below: 0,
            replace_pronoun: true,
            selection: TermSelection::Learned,
        }
    }
}

impl HistoryRewriter {
    /// Every history term the utterance does not already contain (`have`: its stems), with
    /// features. Terms of earlier utterances, and, with `response` > 0, of earlier responses.
    pub fn term_candidates(
        &self,
        ctx: &ConversationContext,
        have: &HashSet<String>,
    ) -> Vec<TermCandidate> {
        let weights = CandidateWeights {
            decay: self.decay,
            first: self.first,
            response: self.response,
        };
        candidates::term_candidates(weights, ctx, have)
    }

    /// Context terms to carry, in conversation order: the selector's choice, else the decayed
    /// weights within the budget (`base_terms`, plus `anaphora_terms` when the utterance refers
    /// back or is elliptic).
    fn context_terms(
        &self,
        ctx: &ConversationContext,
        have: &HashSet<String>,
        selector: Option<&TermSelector>,
    ) -> Vec<TermCandidate> {
        let v = self.term_candidates(ctx, have);
        if let Some(sel) = selector {
            return sel.choose(&sel.score(v));
        }
        let refers_back = candidates::refers_back(&ctx.utterance) || have.len() < self.short_below;
        let budget = self.base_terms + if refers_back { self.anaphora_terms } else { 0 };
        decayed_choice(v, budget)
    }

    /// The rewrite with an explicit term selector (`None`: the decayed weights), for tuning.
    pub fn rewrite_with(
        &self,
        ctx: &ConversationContext,
        selected_ptkb: &[&str],
        selector: Option<&TermSelector>,
    ) -> Result<Rewrite> {
        self.rewrite_choosing(ctx, selected_ptkb, &mut |have| {
            self.context_terms(ctx, have, selector)
        })
    }

    /// The rewrite with the context terms `choose` returns, in conversation order, given the
    /// utterance's own stems. Tuning scores each turn's candidates once and tries many choices.
    pub fn rewrite_choosing(
        &self,
        ctx: &ConversationContext,
        selected_ptkb: &[&str],
        choose: &mut dyn FnMut(&HashSet<String>) -> Vec<TermCandidate>,
    ) -> Result<Rewrite> {
        let utterance = ctx.utterance.trim();
        if utterance.is_empty() {
            // Nothing was asked: an empty query, not one made of history alone.
            return Ok(Rewrite {
                text: String::new(),
                terms: Vec::new(),
                method: RewriteMethod::History,
            });
        }
        let settings = DraftSettings {
            context_weight: self.context_weight,
            ptkb_weight: self.ptkb_weight,
            ptkb_terms: self.ptkb_terms,
            ptkb_terms_first_person: self.ptkb_terms_first_person,
            ptkb_query_terms: self.ptkb_query_terms,
            replace_pronoun: self.replace_pronoun,
        };
        let english = conversation_language(ctx) == ConversationLanguage::English;
        let mut draft = Draft::new(ctx, utterance, settings, selected_ptkb, english, choose);
        apply_all(&mut draft);
        let (text, terms) = draft.finish();
        Ok(Rewrite {
            text,
            terms,
            method: RewriteMethod::History,
        })
    }
}

impl Rewriter for HistoryRewriter {
    fn rewrite(&self, ctx: &ConversationContext, selected_ptkb: &[&str]) -> Result<Rewrite> {
        let selector = match self.selection {
            TermSelection::Decayed => None,
            TermSelection::Learned => Some(learned_term_selector()),
        };
        self.rewrite_with(ctx, selected_ptkb, selector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::context::with_history as ctx;
    use crate::pipeline::rewrite::candidates::TERM_FEATURES;
    use crate::pipeline::rewrite::terms;

    #[test]
    fn learned_selection_carries_the_topic_into_a_pronoun_question() {
        let rw = HistoryRewriter::default();
        assert_eq!(rw.selection, TermSelection::Learned);
        let r = rw
            .rewrite(
                &ctx("What are its symptoms?", &["Tell me about throat cancer."]),
                &[],
            )
            .unwrap();
        assert!(r.text.contains("cancer"), "{}", r.text);
        let decayed = HistoryRewriter {
            selection: TermSelection::Decayed,
            ..rw
        };
        let d = decayed
            .rewrite(
                &ctx("What are its symptoms?", &["Tell me about throat cancer."]),
                &[],
            )
            .unwrap();
        assert!(d.text.contains("cancer"), "{}", d.text);
    }

    #[test]
    fn first_turn_is_kept_as_said() {
        let r = HistoryRewriter::default()
            .rewrite(&ctx("What is throat cancer?", &[]), &[])
            .unwrap();
        assert_eq!(r.text, "What is throat cancer?");
        assert_eq!(
            r.terms,
            vec![("throat".into(), 1.0), ("cancer".into(), 1.0)]
        );
    }

    #[test]
    fn pronoun_is_resolved_from_history() {
        let r = HistoryRewriter::default()
            .rewrite(&ctx("Is it treatable?", &["What is throat cancer?"]), &[])
            .unwrap();
        assert_eq!(r.text, "Is throat cancer treatable?");
        assert!(r
            .terms
            .iter()
            .any(|(t, w)| t == "cancer" && *w > 0.0 && *w < 1.0));
    }

    #[test]
    fn a_possessive_question_is_written_with_the_topic() {
        let r = HistoryRewriter::default()
            .rewrite(
                &ctx("What are its symptoms?", &["Tell me about throat cancer."]),
                &[],
            )
            .unwrap();
        assert!(
            r.text.starts_with("What are the symptoms of "),
            "{}",
            r.text
        );
        assert!(r.text.contains("cancer"), "{}", r.text);
    }

    #[test]
    fn names_and_acronyms_of_the_history_are_features() {
        let mut c = ctx(
            "Are there any medications available?",
            &["Tell me about digestion."],
        );
        c.history[0].response = Some(
            "Irritable bowel syndrome (IBS) affects digestion. Many people in Doha have IBS."
                .into(),
        );
        let cands = HistoryRewriter::default().term_candidates(&c, &HashSet::new());
        let feature = |stem: &str, name: &str| {
            let k = TERM_FEATURES.iter().position(|f| *f == name).unwrap();
            cands.iter().find(|c| c.stem == stem).unwrap().features[k]
        };
        assert_eq!(feature("ibs", "acronym"), 1.0);
        assert_eq!(feature("digest", "acronym"), 0.0);
        assert_eq!(feature("ibs", "in_previous_response_opening"), 1.0);
        assert_eq!(feature("peopl", "in_previous_response_opening"), 0.0);
        assert_eq!(feature("doha", "capitalized"), 1.0);
        assert_eq!(feature("bowel", "capitalized"), 0.0);
    }

    #[test]
    fn a_list_in_the_previous_answer_is_written_out() {
        let mut c = ctx(
            "Which one is the cheapest?",
            &["What phones have the best cameras?"],
        );
        c.history[0].response =
            Some("Good choices are the Pixel 8, Galaxy S23, iPhone 15 and Xperia 1.".into());
        let r = HistoryRewriter::default().rewrite(&c, &[]).unwrap();
        assert_eq!(
            r.text,
            "Which of the Pixel 8, Galaxy S23, iPhone 15, and Xperia 1 is the cheapest?"
        );
        assert!(
            r.terms.iter().any(|(t, w)| t == "xperia" && *w == 0.5),
            "{:?}",
            r.terms
        );
    }

    #[test]
    fn an_accepted_offer_is_written_with_its_subject() {
        let mut c = ctx("Yes please!", &["Hello! I have IBS. What can I eat?"]);
        c.history[0].response = Some(
            "Many people with IBS avoid fried food. Would you like me to tell you about the low FODMAP diet?"
                .into(),
        );
        let r = HistoryRewriter::default().rewrite(&c, &[]).unwrap();
        assert_eq!(r.text, "Yes please! the low FODMAP diet");
        assert!(r.terms.iter().any(|(t, _)| t == "fodmap"), "{:?}", r.terms);
    }

    #[test]
    fn greetings_and_thanks_are_not_carried_over() {
        let rw = HistoryRewriter::default();
        let c = ctx(
            "Is it treatable?",
            &["Hello there, thanks! I am curious about throat cancer."],
        );
        let have: HashSet<String> = terms::content_stems(&c.utterance).into_iter().collect();
        let stems: Vec<String> = rw
            .term_candidates(&c, &have)
            .into_iter()
            .map(|t| t.stem)
            .collect();
        assert!(stems.contains(&"throat".to_string()), "{stems:?}");
        for dialogue in ["hello", "thank", "curiou"] {
            assert!(!stems.iter().any(|s| s.starts_with(dialogue)), "{stems:?}");
        }
    }

    #[test]
    fn terms_already_said_are_not_repeated() {
        let r = HistoryRewriter::default()
            .rewrite(
                &ctx("How is lung cancer treated?", &["What is throat cancer?"]),
                &[],
            )
            .unwrap();
        assert_eq!(r.text.matches("cancer").count(), 1, "{}", r.text);
    }

    #[test]
    fn ptkb_terms_are_appended_when_asked() {
        let rw = HistoryRewriter {
            ptkb_terms: 1,
            ..Default::default()
        };
        let r = rw
            .rewrite(&ctx("Suggest a diet.", &[]), &["I'm vegetarian."])
            .unwrap();
        assert_eq!(r.text, "Suggest a diet. vegetarian");
    }

    #[test]
    fn ptkb_terms_reach_retrieval_terms_without_changing_the_text() {
        let r = HistoryRewriter::default()
            .rewrite(&ctx("Suggest a diet.", &[]), &["I'm vegetarian."])
            .unwrap();
        assert_eq!(r.text, "Suggest a diet.");
        assert!(r.terms.contains(&("vegetarian".to_string(), 0.3)));
    }

    #[test]
    fn ptkb_words_come_from_selected_statements_and_say_what_they_are_about() {
        let ptkb = "I run PostgreSQL 15 on a busy production server.";
        let question = "How do I build an index without locking out writes to the table?";
        let r = HistoryRewriter::default()
            .rewrite(&ctx(question, &[]), &[ptkb])
            .unwrap();
        assert_eq!(r.text, format!("{question} postgresql"));
        assert!(!r.terms.iter().any(|(t, _)| t == "run"), "{:?}", r.terms);
        // Not selected: nothing of it reaches the query.
        let r = HistoryRewriter::default()
            .rewrite(&ctx(question, &[]), &[])
            .unwrap();
        assert_eq!(r.text, question);
        assert!(!r.terms.iter().any(|(t, _)| t == "run" || t == "postgresql"));
    }

    #[test]
    fn empty_utterance_gives_an_empty_query() {
        let r = HistoryRewriter::default()
            .rewrite(&ctx("  ", &["What is throat cancer?"]), &[])
            .unwrap();
        assert_eq!(r.text, "");
        assert!(r.terms.is_empty());
    }

    /// Every candidate carried, whatever the selector would say: the English rules write them.
    fn rewrite_carrying_all(c: &ConversationContext, ptkb: &[&str]) -> Rewrite {
        let rw = HistoryRewriter {
            ptkb_terms: 2,
            ..Default::default()
        };
        rw.rewrite_choosing(c, ptkb, &mut |have| rw.term_candidates(c, have))
            .unwrap()
    }

    #[test]
    fn a_polish_conversation_passes_through_unchanged() {
        let mut c = ctx(
            "Czy jest on dostępny w Krakowie?",
            &["Szukam roweru miejskiego dla mojej córki."],
        );
        c.history[0].response = Some(
            "Polecam trzy modele: Kross Trans, Romet Gazela i Le Grand Lille. Czy chcesz wiedzieć więcej o cenach?"
                .into(),
        );
        let r = rewrite_carrying_all(&c, &["Mieszkam w Krakowie."]);
        assert_eq!(r.text, "Czy jest on dostępny w Krakowie?");
        // The utterance's own terms first; no history term is carried.
        let own: Vec<String> = terms::content_stems(&c.utterance);
        assert_eq!(
            r.terms
                .iter()
                .map(|(t, _)| t.clone())
                .take(own.len())
                .collect::<Vec<_>>(),
            own
        );
        for (t, w) in &r.terms[own.len()..] {
            assert!(*w == 0.3, "only statement words follow: {t} {w}");
        }
        for pl in [
            "Tak, poproszę!",
            "Który z nich jest najtańszy?",
            "A ile to kosztuje?",
        ] {
            c.utterance = pl.into();
            assert_eq!(rewrite_carrying_all(&c, &[]).text, pl);
        }
        // The same conversation in English is rewritten: the check is what leaves it alone.
        let mut en = ctx(
            "Is it available in Leeds?",
            &["I am looking for a city bike for my daughter."],
        );
        en.history[0].response = Some(
            "I recommend three models: Kross Trans, Romet Gazela and Le Grand Lille. Would you like to know more about prices?"
                .into(),
        );
        assert_ne!(
            rewrite_carrying_all(&en, &[]).text,
            "Is it available in Leeds?"
        );
        en.utterance = "Which one is the cheapest?".into();
        assert_ne!(
            rewrite_carrying_all(&en, &[]).text,
            "Which one is the cheapest?"
        );
    }
}
