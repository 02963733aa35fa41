//! Term analysis shared by the PTKB ranker, generation and the rewriter: rouge-score's
//! tokenizer ([`crate::text::rouge_tokens::tokenize`]: lower-case, `[a-z0-9]+` runs), an English
//! stopword list (conversational function words included, [`lexicon::STOPWORDS`]), and NLTK's
//! Porter stemmer ([`crate::text::porter_nltk`]). `crate::pipeline::terms` re-exports it.
//!
//! Every term keeps its surface form so the rewriter can write words back as they were said.

use super::lexicon;
use crate::text::porter_nltk;

/// One analyzed word: its surface form (lower-case) and its stem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub surface: String,
    pub stem: String,
}

/// Whether `word` (lower-case) is a stopword.
pub fn is_stopword(word: &str) -> bool {
    lexicon::STOPWORDS.contains(&word)
}

/// Whether `word` (lower-case) manages the conversation (a greeting, thanks, a reaction): never
/// carried into another turn's rewrite.
pub fn is_dialogue_word(word: &str) -> bool {
    lexicon::DIALOGUE.contains(&word)
}

/// Whether `word` (lower-case) refers back to earlier turns.
pub fn is_anaphor(word: &str) -> bool {
    lexicon::REFERRING_WORDS.contains(&word)
}

/// The stem of one lower-case word (Porter, words of more than 3 characters, like rouge-score).
pub fn stem(word: &str) -> String {
    if word.len() > 3 {
        porter_nltk::stem(word)
    } else {
        word.to_string()
    }
}

/// Every word of `text` (rouge-score tokens), stopwords included.
pub fn words(text: &str) -> Vec<String> {
    crate::text::rouge_tokens::tokenize(text, false)
}

/// Content terms of `text`: stopwords, single characters and pure numbers of one digit dropped.
pub fn content_terms(text: &str) -> Vec<Term> {
    words(text)
        .into_iter()
        .filter(|w| w.len() > 1 && !is_stopword(w))
        .map(|w| Term {
            stem: stem(&w),
            surface: w,
        })
        .collect()
}

/// Content terms of a PTKB statement that may enter a query: its content terms less the words
/// that only relate the user to a thing (`lexicon::PTKB_FRAME_WORDS`: "I *run* PostgreSQL").
pub fn ptkb_content_terms(statement: &str) -> Vec<Term> {
    content_terms(statement)
        .into_iter()
        .filter(|t| !lexicon::PTKB_FRAME_WORDS.contains(&t.surface.as_str()))
        .collect()
}

/// How words were written in a text: names are what manual rewrites carry ("Souk Waqif", "GIS").
#[derive(Debug, Default, Clone)]
pub struct WordCues {
    /// Lower-case words written capitalized other than at the start of a sentence.
    pub capitalized: std::collections::HashSet<String>,
    /// Lower-case words written in capitals (two letters or more: "IBS", "GIS").
    pub acronyms: std::collections::HashSet<String>,
    /// Lower-case words written right after an article, a possessive or a preposition ("the
    /// hotel", "about GIS"): a noun-like position, where the words rewrites carry stand.
    pub after_determiner: std::collections::HashSet<String>,
}

impl WordCues {
    /// Adds the words of `text`.
    pub fn add(&mut self, text: &str) {
        // A sentence starts at the beginning and after '.', '!', '?', ':' or a line break.
        let mut sentence_start = true;
        let mut word = String::new();
        let mut flush = |word: &mut String, at_start: bool| {
            if word.is_empty() {
                return;
            }
            let letters = word.chars().filter(|c| c.is_alphabetic()).count();
            let lower = word.to_lowercase();
            if letters >= 2 && word.chars().all(|c| !c.is_lowercase()) {
                self.acronyms.insert(lower.clone());
            }
            if !at_start && word.chars().next().is_some_and(char::is_uppercase) {
                self.capitalized.insert(lower);
            }
            word.clear();
        };
        let mut word_at_start = true;
        let mut previous = String::new();
        for w in words(text) {
            if lexicon::DETERMINERS.contains(&previous.as_str()) && !is_stopword(&w) {
                self.after_determiner.insert(w.clone());
            }
            previous = w;
        }
        for c in text.chars() {
            if c.is_alphanumeric() {
                if word.is_empty() {
                    word_at_start = sentence_start;
                }
                word.push(c);
                sentence_start = false;
            } else {
                flush(&mut word, word_at_start);
                if matches!(c, '.' | '!' | '?' | ':' | '\n') {
                    sentence_start = true;
                }
            }
        }
        flush(&mut word, word_at_start);
    }
}

/// Stems of the content terms of `text`.
pub fn content_stems(text: &str) -> Vec<String> {
    content_terms(text).into_iter().map(|t| t.stem).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_terms_drop_function_words_and_stem() {
        let t = content_stems("Can you tell me about the running shoes I bought?");
        assert_eq!(t, vec!["run", "shoe", "bought"]);
    }

    #[test]
    fn names_and_acronyms_are_told_from_sentence_starts() {
        let mut w = WordCues::default();
        w.add("Visit the Souk Waqif. Markets are open! IBS is common: Doha has the GIS. It has data for GIS.");
        for name in ["souk", "waqif", "ibs", "gis"] {
            assert!(
                w.capitalized.contains(name) || w.acronyms.contains(name),
                "{name}"
            );
        }
        assert!(w.acronyms.contains("ibs") && w.acronyms.contains("gis"));
        assert!(!w.capitalized.contains("visit"));
        assert!(!w.capitalized.contains("markets"));
        assert!(
            !w.capitalized.contains("doha"),
            "a sentence start after ':'"
        );
        assert!(!w.acronyms.contains("souk"));
        for noun in ["souk", "gis"] {
            assert!(w.after_determiner.contains(noun), "{noun}");
        }
        assert!(!w.after_determiner.contains("open"));
    }

    #[test]
    fn surface_forms_are_kept() {
        let t = content_terms("Vegetarian diets");
        assert_eq!(t[0].surface, "vegetarian");
        assert_eq!(t[1].stem, "diet");
    }

    #[test]
    fn empty_and_punctuation_only_text_has_no_terms() {
        assert!(content_terms("").is_empty());
        assert!(content_terms("?!  ...").is_empty());
    }

    #[test]
    fn dialogue_words_are_told_from_content() {
        assert!(is_dialogue_word("hello"));
        assert!(is_dialogue_word("thanks"));
        assert!(!is_dialogue_word("hotel"));
    }

    #[test]
    fn anaphora_are_recognized() {
        assert!(is_anaphor("it"));
        assert!(!is_anaphor("diet"));
    }
}
