//! A turn's search query, whichever rewriter wrote it: the rewrite followed by the content words
//! of the selected PTKB statements (the part personalizing the first stage, at the turn's
//! `ptkb_query_weight`), each word attributed to where it came from.
//!
//! The hygiene rule: PTKB words enter the query only from the statements selected for the turn,
//! and only their content words ([`terms::ptkb_content_terms`]: no stopwords, no words that only
//! relate the user to a thing). The first stage searches with [`TurnQuery::weighted`], built
//! from the same words the API and the page show. (The neural reranker still reads the selected
//! statements as written, `ptkb_in_rerank_query`: a model reads sentences, not bags of words.)
//!
//! Attribution matches words by the rewriter's own analysis ([`terms`]: rouge tokens, Porter
//! stems), so "vegetarians" in a rewrite comes from "vegetarian" in a statement. A word of the
//! rewrite is the utterance's when the utterance has it; a content word comes from the nearest
//! earlier turn that has it, the user's words of that turn before its answer, then from the
//! selected statements, best first; else the rewriter (or the LLM) introduced it. A function
//! word the utterance lacks is not matched alone (every turn says "the"): it comes with its
//! neighbour when it stands beside it in the neighbour's text too, else from the rewriter.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::context::ConversationContext;
use super::rewrite::terms;
use crate::index::WeightedQuery;

/// Where a word of the search query came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WordOrigin {
    /// The current utterance.
    Utterance,
    /// An earlier user utterance (`turn` says which).
    History,
    /// A PTKB statement selected for the turn (`ptkb_id` says which).
    Ptkb,
    /// An earlier response (`turn` says whose).
    Answer,
    /// None of these: the rewriter (or the LLM) wrote it.
    Rewriter,
}

/// One word of the search query, as written there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct QueryWord {
    pub text: String,
    pub origin: WordOrigin,
    /// The 1-based position of the earlier turn it came from (`history`, `answer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, minimum = 1)]
    pub turn: Option<u32>,
    /// The statement it came from (`ptkb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub ptkb_id: Option<String>,
}

impl QueryWord {
    fn new(text: &str, origin: WordOrigin) -> Self {
        QueryWord {
            text: text.to_string(),
            origin,
            turn: None,
            ptkb_id: None,
        }
    }
}

/// The search query as shown: its text and every word of it in order (the text between the
/// words is spaces and punctuation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SearchQuery {
    pub text: String,
    pub words: Vec<QueryWord>,
}

/// A selected PTKB statement as the query reads it.
#[derive(Debug, Clone, Copy)]
pub struct SelectedStatement<'a> {
    pub id: &'a str,
    pub text: &'a str,
}

/// The search query of a turn and the weighted query the first stage runs, from the same words.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnQuery {
    pub shown: SearchQuery,
    /// The rewrite at weight 1, then each selected statement's content words at the PTKB weight.
    parts: Vec<(String, f32)>,
}

impl TurnQuery {
    /// The query of `rewrite` (the text the rewriter wrote for `ctx`) personalized by the
    /// `selected` statements (best first) at `ptkb_weight` (0: not personalized).
    pub fn build(
        ctx: &ConversationContext,
        rewrite: &str,
        selected: &[SelectedStatement<'_>],
        ptkb_weight: f32,
    ) -> Self {
        let sources = Sources::new(ctx, selected);
        let mut words = sources.attribute(&split_words(rewrite));
        let mut text = rewrite.to_string();
        let mut parts = vec![(rewrite.to_string(), 1.0)];
        if ptkb_weight > 0.0 {
            for st in selected {
                let content = ptkb_words(st.text);
                if content.is_empty() {
                    continue;
                }
                for w in &content {
                    if !text.is_empty() {
                        text.push(' ');
                    }
                    text.push_str(w);
                    words.push(QueryWord {
                        ptkb_id: Some(st.id.to_string()),
                        ..QueryWord::new(w, WordOrigin::Ptkb)
                    });
                }
                parts.push((content.join(" "), ptkb_weight));
            }
        }
        TurnQuery {
            shown: SearchQuery { text, words },
            parts,
        }
    }

    /// The query the first stage searches with.
    pub fn weighted(&self) -> WeightedQuery {
        self.parts
            .iter()
            .fold(WeightedQuery::new(), |q, (text, w)| q.with(text, *w))
    }
}

/// The words of `text` as written: maximal runs of letters and digits.
fn split_words(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect()
}

/// What a word is matched by: the stems of its rouge tokens (the lower-case word when it has
/// none, as a word in another script).
fn key(word: &str) -> String {
    let tokens = terms::words(word);
    if tokens.is_empty() {
        return word.to_lowercase();
    }
    tokens
        .iter()
        .map(|t| terms::stem(t))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a word is a content word ([`terms::content_terms`]; in another script, longer than
/// one letter).
fn is_content(word: &str) -> bool {
    if terms::words(word).is_empty() {
        return word.chars().count() > 1;
    }
    !terms::content_terms(word).is_empty()
}

/// Whether a word of a statement may enter a query ([`terms::ptkb_content_terms`]).
fn is_ptkb_word(word: &str) -> bool {
    if terms::words(word).is_empty() {
        return is_content(word);
    }
    !terms::ptkb_content_terms(word).is_empty()
}

/// The words of a statement that may enter a query, as written there.
fn ptkb_words(statement: &str) -> Vec<&str> {
    split_words(statement)
        .into_iter()
        .filter(|w| is_ptkb_word(w))
        .collect()
}

/// A text a query word may come from, analyzed.
#[derive(Default)]
struct SourceText {
    /// The words that may be taken from it (content words; a statement's, less frame words).
    words: HashSet<String>,
    /// Every pair of neighbouring words, function words included.
    pairs: HashSet<(String, String)>,
}

impl SourceText {
    fn new(text: &str, takes: fn(&str) -> bool) -> Self {
        let all = split_words(text);
        let keys: Vec<String> = all.iter().map(|w| key(w)).collect();
        SourceText {
            words: all
                .iter()
                .zip(&keys)
                .filter(|(w, _)| takes(w))
                .map(|(_, k)| k.clone())
                .collect(),
            pairs: keys
                .windows(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect(),
        }
    }
}

/// The analyzed texts a query word may come from.
struct Sources<'a> {
    utterance: HashSet<String>,
    /// Earlier turns, most recent first: 1-based position, the user's words, the answer's.
    turns: Vec<(u32, SourceText, SourceText)>,
    ptkb: Vec<(&'a str, SourceText)>,
}

impl<'a> Sources<'a> {
    fn new(ctx: &ConversationContext, selected: &[SelectedStatement<'a>]) -> Self {
        Sources {
            utterance: split_words(&ctx.utterance).into_iter().map(key).collect(),
            turns: ctx
                .history
                .iter()
                .enumerate()
                .rev()
                .map(|(i, h)| {
                    let answer = h
                        .response
                        .as_deref()
                        .map(|r| SourceText::new(r, is_content))
                        .unwrap_or_default();
                    (
                        i as u32 + 1,
                        SourceText::new(&h.utterance, is_content),
                        answer,
                    )
                })
                .collect(),
            ptkb: selected
                .iter()
                .map(|s| (s.id, SourceText::new(s.text, is_ptkb_word)))
                .collect(),
        }
    }

    /// The origins of `words`, in order. A function word the utterance lacks belongs to the
    /// text its neighbour came from when it stands beside that neighbour there too ("cook *for*
    /// dinner" carried whole, "*the* flu" with its article), else to the rewriter.
    fn attribute(&self, words: &[&str]) -> Vec<QueryWord> {
        let keys: Vec<String> = words.iter().map(|w| key(w)).collect();
        let mut found: Vec<Option<QueryWord>> = words
            .iter()
            .zip(&keys)
            .map(|(w, k)| self.attribute_word(w, k))
            .collect();
        // Each pass may settle the function word next to one settled in the pass before.
        let mut changed = true;
        while changed {
            changed = false;
            for i in 0..words.len() {
                if found[i].is_some() {
                    continue;
                }
                let beside = |j: usize, pair: (&String, &String)| {
                    let neighbour = found.get(j)?.as_ref()?;
                    let text = self.text_of(neighbour)?;
                    text.pairs
                        .contains(&(pair.0.clone(), pair.1.clone()))
                        .then(|| QueryWord {
                            text: words[i].to_string(),
                            ..neighbour.clone()
                        })
                };
                let left = i
                    .checked_sub(1)
                    .and_then(|j| beside(j, (&keys[j], &keys[i])));
                let settled = left.or_else(|| {
                    keys.get(i + 1)
                        .and_then(|next| beside(i + 1, (&keys[i], next)))
                });
                if settled.is_some() {
                    found[i] = settled;
                    changed = true;
                }
            }
        }
        found
            .into_iter()
            .zip(words)
            .map(|(f, w)| f.unwrap_or_else(|| QueryWord::new(w, WordOrigin::Rewriter)))
            .collect()
    }

    /// The origin of one word; `None` for a function word the utterance lacks.
    fn attribute_word(&self, word: &str, k: &String) -> Option<QueryWord> {
        if self.utterance.contains(k) {
            return Some(QueryWord::new(word, WordOrigin::Utterance));
        }
        if !is_content(word) {
            return None;
        }
        for (turn, user, answer) in &self.turns {
            let origin = if user.words.contains(k) {
                WordOrigin::History
            } else if answer.words.contains(k) {
                WordOrigin::Answer
            } else {
                continue;
            };
            return Some(QueryWord {
                turn: Some(*turn),
                ..QueryWord::new(word, origin)
            });
        }
        if let Some((id, _)) = self.ptkb.iter().find(|(_, st)| st.words.contains(k)) {
            return Some(QueryWord {
                ptkb_id: Some(id.to_string()),
                ..QueryWord::new(word, WordOrigin::Ptkb)
            });
        }
        Some(QueryWord::new(word, WordOrigin::Rewriter))
    }

    /// The text an attributed word came from (none for the utterance's and the rewriter's).
    fn text_of(&self, word: &QueryWord) -> Option<&SourceText> {
        match word.origin {
            WordOrigin::History | WordOrigin::Answer => {
                let (_, user, answer) = self.turns.iter().find(|t| Some(t.0) == word.turn)?;
                Some(if word.origin == WordOrigin::History {
                    user
                } else {
                    answer
                })
            }
            WordOrigin::Ptkb => self
                .ptkb
                .iter()
                .find(|(id, _)| Some(*id) == word.ptkb_id.as_deref())
                .map(|(_, st)| st),
            WordOrigin::Utterance | WordOrigin::Rewriter => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::context::HistoryTurn;
    use crate::pipeline::rewrite::{HistoryRewriter, Rewriter};

    fn turn(utterance: &str, response: Option<&str>) -> HistoryTurn {
        HistoryTurn {
            utterance: utterance.into(),
            response: response.map(str::to_string),
        }
    }

    /// (word, origin, turn, ptkb id) of every word.
    fn origins(q: &SearchQuery) -> Vec<(&str, WordOrigin, Option<u32>, Option<&str>)> {
        q.words
            .iter()
            .map(|w| (w.text.as_str(), w.origin, w.turn, w.ptkb_id.as_deref()))
            .collect()
    }

    fn origin_of<'q>(q: &'q SearchQuery, word: &str) -> &'q QueryWord {
        q.words
            .iter()
            .find(|w| w.text == word)
            .unwrap_or_else(|| panic!("{word} not in {q:?}"))
    }

    const VEG: SelectedStatement<'static> = SelectedStatement {
        id: "1",
        text: "I am vegetarian and I love Thai food.",
    };

    #[test]
    fn each_word_is_attributed_to_the_nearest_source() {
        let ctx = ConversationContext {
            utterance: "Is it spicy?".into(),
            history: vec![
                turn(
                    "What is green curry?",
                    Some("Green curry is a Thai curry made with coconut milk."),
                ),
                turn(
                    "How do I make the curry paste?",
                    Some("Pound green chillies with lemongrass."),
                ),
            ],
            ..Default::default()
        };
        // An LLM's rewrite: "curry" from the user's words of turn 2 (nearer than turn 1), "coconut"
        // only in the first answer, "vegetarian" only in the statement, "dish" from nowhere.
        let q = TurnQuery::build(
            &ctx,
            "Is vegetarian coconut curry a spicy dish?",
            &[VEG],
            0.0,
        );
        assert_eq!(q.shown.text, "Is vegetarian coconut curry a spicy dish?");
        assert_eq!(
            origins(&q.shown),
            vec![
                ("Is", WordOrigin::Utterance, None, None),
                ("vegetarian", WordOrigin::Ptkb, None, Some("1")),
                ("coconut", WordOrigin::Answer, Some(1), None),
                ("curry", WordOrigin::History, Some(2), None),
                ("a", WordOrigin::Rewriter, None, None),
                ("spicy", WordOrigin::Utterance, None, None),
                ("dish", WordOrigin::Rewriter, None, None),
            ]
        );
    }

    #[test]
    fn words_match_by_stem_and_case_and_the_utterance_wins() {
        let ctx = ConversationContext {
            utterance: "Which Curries are mild?".into(),
            history: vec![turn("I like curry and noodles.", None)],
            ..Default::default()
        };
        let q = TurnQuery::build(&ctx, "Which curry dishes are mild NOODLES?", &[], 0.3);
        assert_eq!(origin_of(&q.shown, "curry").origin, WordOrigin::Utterance);
        let noodles = origin_of(&q.shown, "NOODLES");
        assert_eq!(
            (noodles.origin, noodles.turn),
            (WordOrigin::History, Some(1))
        );
        // Within a turn, the user's words before the answer's.
        let ctx = ConversationContext {
            utterance: "And the sauce?".into(),
            history: vec![turn(
                "Tell me about ramen.",
                Some("Ramen is a noodle soup."),
            )],
            ..Default::default()
        };
        let q = TurnQuery::build(&ctx, "And the ramen soup sauce?", &[], 0.3);
        assert_eq!(origin_of(&q.shown, "ramen").origin, WordOrigin::History);
        assert_eq!(origin_of(&q.shown, "soup").origin, WordOrigin::Answer);
        assert_eq!(origin_of(&q.shown, "soup").turn, Some(1));
        assert_eq!(origin_of(&q.shown, "the").origin, WordOrigin::Utterance);
    }

    #[test]
    fn function_words_come_with_their_neighbours_or_from_the_rewriter() {
        let ctx = ConversationContext {
            utterance: "What are its symptoms?".into(),
            history: vec![turn("Tell me about the flu.", None)],
            ..Default::default()
        };
        let q = TurnQuery::build(&ctx, "What are the symptoms of the flu?", &[], 0.3);
        // "the flu" with its article as said in turn 1; "the symptoms of" the rewriter wrote.
        assert_eq!(
            origins(&q.shown)[2..],
            [
                ("the", WordOrigin::Rewriter, None, None),
                ("symptoms", WordOrigin::Utterance, None, None),
                ("of", WordOrigin::Rewriter, None, None),
                ("the", WordOrigin::History, Some(1), None),
                ("flu", WordOrigin::History, Some(1), None),
            ]
        );
        // A phrase carried whole, a chain of function words included; "a" is in turn 1, but
        // not beside "dinner" there.
        let ctx = ConversationContext {
            utterance: "How long does it take?".into(),
            history: vec![turn(
                "Is there a recipe for a dinner in the oven?",
                Some("Try a dinner of baked squash."),
            )],
            ..Default::default()
        };
        let q = TurnQuery::build(
            &ctx,
            "How long does a recipe for a dinner in the oven take?",
            &[],
            0.3,
        );
        let from: Vec<(&str, WordOrigin)> = q.shown.words[3..10]
            .iter()
            .map(|w| (w.text.as_str(), w.origin))
            .collect();
        assert_eq!(
            from,
            [
                ("a", WordOrigin::History),
                ("recipe", WordOrigin::History),
                ("for", WordOrigin::History),
                ("a", WordOrigin::History),
                ("dinner", WordOrigin::History),
                ("in", WordOrigin::History),
                ("the", WordOrigin::History),
            ]
        );
        let q = TurnQuery::build(&ctx, "How long does dinner a take?", &[], 0.3);
        assert_eq!(origin_of(&q.shown, "a").origin, WordOrigin::Rewriter);
    }

    #[test]
    fn selected_statements_add_their_content_words_only() {
        let ctx = ConversationContext::new("What should I cook tonight?");
        let other = SelectedStatement {
            id: "7",
            text: "I run a café in Kraków.",
        };
        let q = TurnQuery::build(&ctx, &ctx.utterance, &[VEG, other], 0.15);
        assert_eq!(
            q.shown.text,
            "What should I cook tonight? vegetarian Thai food café Kraków"
        );
        let ptkb: Vec<(&str, Option<&str>)> = q
            .shown
            .words
            .iter()
            .filter(|w| w.origin == WordOrigin::Ptkb)
            .map(|w| (w.text.as_str(), w.ptkb_id.as_deref()))
            .collect();
        assert_eq!(
            ptkb,
            vec![
                ("vegetarian", Some("1")),
                ("Thai", Some("1")),
                ("food", Some("1")),
                ("café", Some("7")),
                ("Kraków", Some("7")),
            ]
        );
        // The first stage searches with exactly these words: the rewrite at 1, each statement's
        // words at the PTKB weight; "I", "am", "love" and "run" never.
        assert_eq!(
            q.weighted().parts,
            vec![
                ("What should I cook tonight?".to_string(), 1.0),
                ("vegetarian Thai food".to_string(), 0.15),
                ("café Kraków".to_string(), 0.15),
            ]
        );
        // Without a PTKB weight the statements add nothing.
        let q = TurnQuery::build(&ctx, &ctx.utterance, &[VEG], 0.0);
        assert_eq!(q.shown.text, ctx.utterance);
        assert_eq!(q.weighted().parts.len(), 1);
    }

    #[test]
    fn a_statement_word_is_attributed_only_to_a_selected_statement() {
        // "Thai" is in the statement, but the statement was not selected: a rewrite that has it
        // got it from elsewhere.
        let ctx = ConversationContext::new("Suggest a dinner.");
        let q = TurnQuery::build(&ctx, "Suggest a Thai dinner.", &[], 0.15);
        assert_eq!(origin_of(&q.shown, "Thai").origin, WordOrigin::Rewriter);
        // A frame word of a selected statement is no statement word either.
        let q = TurnQuery::build(&ctx, "Suggest a dinner I love.", &[VEG], 0.0);
        assert_eq!(origin_of(&q.shown, "love").origin, WordOrigin::Rewriter);
    }

    #[test]
    fn the_history_rewriter_brings_statement_words_only_from_selected_statements() {
        let rw = HistoryRewriter {
            ptkb_terms: 3,
            ..Default::default()
        };
        let ctx = ConversationContext {
            utterance: "What should I eat tonight?".into(),
            history: vec![turn("Where is a good market in Leeds?", None)],
            ptkb: vec![
                crate::pipeline::context::PtkbStatement {
                    id: "1".into(),
                    text: VEG.text.into(),
                },
                crate::pipeline::context::PtkbStatement {
                    id: "2".into(),
                    text: "I own an electric bicycle.".into(),
                },
            ],
            ..Default::default()
        };
        let unselected: HashSet<String> = split_words("I own an electric bicycle.")
            .into_iter()
            .map(key)
            .collect();
        let rewrite = rw.rewrite(&ctx, &[VEG.text]).unwrap();
        let q = TurnQuery::build(&ctx, &rewrite.text, &[VEG], 0.15);
        let ptkb: Vec<&QueryWord> = q
            .shown
            .words
            .iter()
            .filter(|w| w.origin == WordOrigin::Ptkb)
            .collect();
        assert!(
            ptkb.iter().any(|w| w.text == "vegetarian"),
            "{}",
            q.shown.text
        );
        for w in &q.shown.words {
            if w.origin != WordOrigin::Utterance && is_content(&w.text) {
                assert!(
                    !unselected.contains(&key(&w.text)),
                    "{w:?} in {}",
                    q.shown.text
                );
            }
        }
        for w in ptkb {
            assert_eq!(w.ptkb_id.as_deref(), Some("1"), "{w:?}");
            assert!(is_content(&w.text), "{w:?}");
            let lower = w.text.to_lowercase();
            assert!(
                !crate::pipeline::rewrite::lexicon::PTKB_FRAME_WORDS.contains(&lower.as_str()),
                "{w:?}"
            );
        }
    }

    #[test]
    fn stored_queries_read_back_and_omit_what_they_lack() {
        let ctx = ConversationContext {
            utterance: "Is it cheap?".into(),
            history: vec![turn("Tell me about ramen.", None)],
            ..Default::default()
        };
        let q = TurnQuery::build(&ctx, "Is ramen cheap?", &[VEG], 0.15).shown;
        let json = serde_json::to_value(&q).unwrap();
        assert_eq!(
            json["words"][1],
            serde_json::json!({"text": "ramen", "origin": "history", "turn": 1})
        );
        assert_eq!(
            json["words"][3],
            serde_json::json!({"text": "vegetarian", "origin": "ptkb", "ptkb_id": "1"})
        );
        assert_eq!(
            json["words"][0],
            serde_json::json!({"text": "Is", "origin": "utterance"})
        );
        let back: SearchQuery = serde_json::from_value(json).unwrap();
        assert_eq!(back, q);
    }
}
