//! The rules that turn an utterance into its rewrite, applied in the order of [`RESOLVERS`] to a
//! [`Draft`]. Each rule is a named type; the order is the one place that says which rule wins:
//! a reference to a list of the previous answer, or an accepted offer, is written out in place
//! of carried-over terms; carried terms go in place of a possessive, else of a pronoun, else
//! they are appended; the place the user named and the words of the user's statements come
//! last. Rules that read English words leave other languages alone ([`Resolver::english_only`]).

use std::collections::HashSet;

use super::candidates::{first_person, TermCandidate};
use super::{accepted_offer, list_references, place, realization, terms};
use crate::pipeline::context::ConversationContext;

/// One rewriting rule.
pub trait Resolver: Sync {
    /// A short snake_case name.
    fn name(&self) -> &'static str;
    /// Whether the rule reads English words, so that other languages pass it by.
    fn english_only(&self) -> bool {
        true
    }
    fn apply(&self, draft: &mut Draft<'_>);
}

/// The rules, in the order they apply. Of the rules that write the utterance anew (a list, an
/// offer, a possessive, a pronoun, appended terms), the first that applies wins; the place and
/// the statement words are then written into whatever text there is.
pub const RESOLVERS: &[&dyn Resolver] = &[
    // "which one", "the last two" → the items of the previous answer's list
    &ListReference,
    // "Yes please!" → the subject of the offer
    &AcceptedOffer,
    // history terms the selector picks, names whole (not written yet)
    &CarriedTerms,
    // words of the selected PTKB statements, as retrieval terms
    &PtkbTerms,
    // "What is its price?" → "What is the price of X?"
    &PossessivePhrase,
    // "Is it safe?" → "Is X safe?"
    &PronounReplacement,
    // otherwise "… X" appended
    &AppendedTerms,
    // "… in Rome": the place the user named
    &Place,
    // statement words at the end, when asked for
    &PtkbWords,
];

/// The settings of [`super::HistoryRewriter`] the rules read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DraftSettings {
    /// Weight of a retrieval term from the history (carried, listed or the place).
    pub context_weight: f32,
    /// Weight of a retrieval term from a PTKB statement.
    pub ptkb_weight: f32,
    pub ptkb_terms: usize,
    pub ptkb_terms_first_person: usize,
    pub ptkb_query_terms: usize,
    /// Write carried terms in place of a possessive or a pronoun.
    pub replace_pronoun: bool,
}

/// Chooses the history terms to carry, given the stems the rewrite already has.
pub type ChooseTerms<'a> = dyn FnMut(&HashSet<String>) -> Vec<TermCandidate> + 'a;

/// A rewrite in the making.
pub struct Draft<'a> {
    pub ctx: &'a ConversationContext,
    /// The utterance, trimmed.
    pub utterance: &'a str,
    pub settings: DraftSettings,
    /// Texts of the selected PTKB statements, best first.
    pub selected_ptkb: &'a [&'a str],
    /// Whether the conversation is in English ([`super::language`]).
    pub english: bool,
    choose: &'a mut ChooseTerms<'a>,
    /// The rewritten text once a rule wrote it; `None` keeps the utterance as said.
    text: Option<String>,
    /// Surfaces of the history terms carried, most wanted first.
    carried: Vec<String>,
    /// Statement words [`PtkbWords`] writes at the end of the text.
    ptkb_words: Vec<String>,
    terms: Vec<(String, f32)>,
    have: HashSet<String>,
}

impl<'a> Draft<'a> {
    /// A draft holding the utterance's own stems (weight 1).
    pub fn new(
        ctx: &'a ConversationContext,
        utterance: &'a str,
        settings: DraftSettings,
        selected_ptkb: &'a [&'a str],
        english: bool,
        choose: &'a mut ChooseTerms<'a>,
    ) -> Self {
        let mut draft = Draft {
            ctx,
            utterance,
            settings,
            selected_ptkb,
            english,
            choose,
            text: None,
            carried: Vec::new(),
            ptkb_words: Vec::new(),
            terms: Vec::new(),
            have: HashSet::new(),
        };
        for s in terms::content_stems(utterance) {
            draft.add_term(s, 1.0);
        }
        draft
    }

    /// Adds a retrieval term unless its stem is there already; whether it was added.
    fn add_term(&mut self, stem: String, weight: f32) -> bool {
        let added = self.have.insert(stem.clone());
        if added {
            self.terms.push((stem, weight));
        }
        added
    }

    /// Adds the stems of `text` at the history weight.
    fn add_context_stems(&mut self, text: &str) {
        for s in terms::content_stems(text) {
            self.add_term(s, self.settings.context_weight);
        }
    }

    /// The text as written so far.
    fn current_text(&self) -> &str {
        self.text.as_deref().unwrap_or(self.utterance)
    }

    /// The previous answer, when there is one.
    fn previous_response(&self) -> Option<&'a str> {
        self.ctx.history.last().and_then(|t| t.response.as_deref())
    }

    /// Writes the reference out with `resolve` over the previous answer, unless a rule already
    /// wrote the text.
    fn write_out(&mut self, resolve: fn(&str, &str) -> Option<String>) {
        if self.text.is_some() {
            return;
        }
        let Some(written) = self
            .previous_response()
            .and_then(|r| resolve(self.utterance, r))
        else {
            return;
        };
        self.add_context_stems(&written);
        self.text = Some(written);
    }

    /// The rewrite text and its weighted retrieval terms.
    pub fn finish(self) -> (String, Vec<(String, f32)>) {
        let text = self.text.unwrap_or_else(|| self.utterance.to_string());
        (text, self.terms)
    }
}

/// Applies [`RESOLVERS`] in order (those that read English only to English conversations).
pub fn apply_all(draft: &mut Draft<'_>) {
    for resolver in RESOLVERS {
        if draft.english || !resolver.english_only() {
            resolver.apply(draft);
        }
    }
}

/// "Which one is cheaper?", "the last two", "the third step": the items of a list in the
/// previous answer written in place of the reference ([`list_references`]).
pub struct ListReference;

impl Resolver for ListReference {
    fn name(&self) -> &'static str {
        "list_reference"
    }
    fn apply(&self, draft: &mut Draft<'_>) {
        draft.write_out(list_references::resolve);
    }
}

/// "Yes please!" after an offer: the offer's subject appended ([`accepted_offer`]).
pub struct AcceptedOffer;

impl Resolver for AcceptedOffer {
    fn name(&self) -> &'static str {
        "accepted_offer"
    }
    fn apply(&self, draft: &mut Draft<'_>) {
        draft.write_out(accepted_offer::resolve);
    }
}

/// The history terms the selector chooses, each name whole, as retrieval terms weighted
/// relative to the best of them; written into the text by the rules after it. Nothing is
/// carried when a reference was written out.
pub struct CarriedTerms;

impl Resolver for CarriedTerms {
    fn name(&self) -> &'static str {
        "carried_terms"
    }
    fn apply(&self, draft: &mut Draft<'_>) {
        if draft.text.is_some() {
            return;
        }
        let context = (draft.choose)(&draft.have);
        let top = context.iter().map(|c| c.weight).fold(0.0, f32::max);
        let weight = draft.settings.context_weight;
        for c in &context {
            if draft.add_term(terms::stem(&c.surface), weight * c.weight / top.max(1e-6)) {
                draft.carried.push(c.surface.clone());
            }
        }
        let carried = draft.carried.len();
        for w in realization::with_whole_names(&draft.carried, draft.ctx).split_off(carried) {
            if draft.add_term(terms::stem(&w), weight) {
                draft.carried.push(w);
            }
        }
    }
}

/// Content words of the selected PTKB statements (never of the others; never the words that
/// only relate the user to a thing: [`terms::ptkb_content_terms`]), best statement first, as retrieval terms
/// (`ptkb_query_terms`); the first `ptkb_terms` of them (`ptkb_terms_first_person` when the
/// utterance speaks of the user) are kept for [`PtkbWords`]. Personalizing retrieval reads no
/// English rule, so it applies in every language.
pub struct PtkbTerms;

impl Resolver for PtkbTerms {
    fn name(&self) -> &'static str {
        "ptkb_terms"
    }
    fn english_only(&self) -> bool {
        false
    }
    fn apply(&self, draft: &mut Draft<'_>) {
        let s = draft.settings;
        let text_terms = if draft.english && first_person(draft.utterance) {
            s.ptkb_terms.max(s.ptkb_terms_first_person)
        } else {
            s.ptkb_terms
        };
        let limit = s.ptkb_query_terms.max(text_terms);
        let mut added = 0;
        'statements: for st in draft.selected_ptkb {
            for t in terms::ptkb_content_terms(st) {
                if added == limit {
                    break 'statements;
                }
                if draft.add_term(t.stem, s.ptkb_weight) {
                    if added < text_terms {
                        draft.ptkb_words.push(t.surface);
                    }
                    added += 1;
                }
            }
        }
    }
}

/// The carried terms, as phrases with their articles, standing in for a possessive: "What is
/// its price?" → "What is the price of X?".
pub struct PossessivePhrase;

impl Resolver for PossessivePhrase {
    fn name(&self) -> &'static str {
        "possessive_phrase"
    }
    fn apply(&self, draft: &mut Draft<'_>) {
        if draft.text.is_some() || draft.carried.is_empty() || !draft.settings.replace_pronoun {
            return;
        }
        let phrases = realization::as_phrases(&draft.carried, draft.ctx, true).join(" ");
        draft.text = realization::possessive_phrase(draft.utterance, &phrases);
    }
}

/// The carried terms, as phrases with their articles, in place of the first pronoun: "Is it
/// safe?" → "Is X safe?".
pub struct PronounReplacement;

impl Resolver for PronounReplacement {
    fn name(&self) -> &'static str {
        "pronoun_replacement"
    }
    fn apply(&self, draft: &mut Draft<'_>) {
        if draft.text.is_some() || draft.carried.is_empty() || !draft.settings.replace_pronoun {
            return;
        }
        let phrases = realization::as_phrases(&draft.carried, draft.ctx, true).join(" ");
        draft.text = realization::replace_first_pronoun(draft.utterance, &phrases);
    }
}

/// The carried terms, as phrases, appended to an utterance no earlier rule rewrote.
pub struct AppendedTerms;

impl Resolver for AppendedTerms {
    fn name(&self) -> &'static str {
        "appended_terms"
    }
    fn apply(&self, draft: &mut Draft<'_>) {
        if draft.text.is_some() || draft.carried.is_empty() {
            return;
        }
        let phrases = realization::as_phrases(&draft.carried, draft.ctx, false).join(" ");
        draft.text = Some(format!("{} {phrases}", draft.utterance));
    }
}

/// The place the user named earlier, "in {place}" ([`place`]).
pub struct Place;

impl Resolver for Place {
    fn name(&self) -> &'static str {
        "place"
    }
    fn apply(&self, draft: &mut Draft<'_>) {
        let Some(named) = place::conversation_place(draft.ctx) else {
            return;
        };
        if let Some(set) = place::in_place(draft.utterance, draft.current_text(), &named) {
            draft.text = Some(set);
            draft.add_context_stems(&named);
        }
    }
}

/// The statement words [`PtkbTerms`] kept, written at the end of the text.
pub struct PtkbWords;

impl Resolver for PtkbWords {
    fn name(&self) -> &'static str {
        "ptkb_words"
    }
    fn apply(&self, draft: &mut Draft<'_>) {
        if draft.ptkb_words.is_empty() {
            return;
        }
        let text = format!("{} {}", draft.current_text(), draft.ptkb_words.join(" "));
        draft.text = Some(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolver_names_are_unique_snake_case() {
        let mut seen = HashSet::new();
        for r in RESOLVERS {
            let name = r.name();
            assert!(
                name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{name}"
            );
            assert!(seen.insert(name), "{name} twice");
        }
        assert_eq!(RESOLVERS.len(), 9);
    }
}
