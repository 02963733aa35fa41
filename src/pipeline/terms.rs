//! Term analysis shared by the PTKB ranker and the rewriter: rouge-score's tokenizer
//! ([`crate::eval::rouge::tokenize`]: lower-case, `[a-z0-9]+` runs), an English stopword list
//! (conversational function words included), and NLTK's Porter stemmer ([`crate::eval::porter`]).
//!
//! Every term keeps its surface form so the rewriter can write words back as they were said.

use crate::eval::porter;

/// One analyzed word: its surface form (lower-case) and its stem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub surface: String,
    pub stem: String,
}

/// Function words and conversational filler ("can you tell me ...") that carry no topic.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "couldn",
    "d",
    "did",
    "didn",
    "do",
    "does",
    "doesn",
    "doing",
    "don",
    "down",
    "during",
    "each",
    "else",
    "etc",
    "ever",
    "few",
    "for",
    "from",
    "further",
    "get",
    "gets",
    "getting",
    "give",
    "go",
    "going",
    "got",
    "had",
    "hadn",
    "has",
    "hasn",
    "have",
    "haven",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "hi",
    "him",
    "himself",
    "his",
    "how",
    "however",
    "i",
    "if",
    "im",
    "in",
    "into",
    "is",
    "isn",
    "it",
    "its",
    "itself",
    "just",
    "know",
    "let",
    "ll",
    "m",
    "me",
    "might",
    "mine",
    "more",
    "most",
    "much",
    "must",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "o",
    "of",
    "off",
    "ok",
    "okay",
    "on",
    "once",
    "one",
    "ones",
    "only",
    "or",
    "other",
    "others",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "please",
    "re",
    "really",
    "s",
    "said",
    "same",
    "say",
    "shall",
    "she",
    "should",
    "shouldn",
    "so",
    "some",
    "something",
    "such",
    "sure",
    "t",
    "tell",
    "than",
    "thank",
    "thanks",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "things",
    "think",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "us",
    "ve",
    "very",
    "want",
    "wanted",
    "was",
    "wasn",
    "way",
    "we",
    "well",
    "were",
    "weren",
    "what",
    "whats",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "won",
    "would",
    "wouldn",
    "y",
    "yes",
    "yet",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "great",
    "good",
    "like",
    "mean",
    "need",
    "see",
    "sounds",
    "use",
    "used",
    "using",
    "make",
    "many",
    "may",
    "kind",
    "lot",
    "lots",
    "maybe",
    "interesting",
    "interested",
    "aforementioned",
    "mentioned",
    "help",
    "find",
    "new",
    "best",
    "better",
    "anything",
    "even",
    "still",
    "already",
    "able",
    "instead",
    "around",
];

/// Words that point back to something said earlier: their presence asks for resolution.
const ANAPHORA: &[&str] = &[
    "it",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "this",
    "that",
    "these",
    "those",
    "he",
    "she",
    "him",
    "her",
    "his",
    "hers",
    "one",
    "ones",
    "there",
    "such",
    "aforementioned",
    "mentioned",
    "above",
    "former",
    "latter",
    "same",
    "both",
];

/// Whether `word` (lower-case) is a stopword.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// Whether `word` (lower-case) refers back to earlier turns.
pub fn is_anaphor(word: &str) -> bool {
    ANAPHORA.contains(&word)
}

/// The stem of one lower-case word (Porter, words of more than 3 characters, like rouge-score).
pub fn stem(word: &str) -> String {
    if word.len() > 3 {
        porter::stem(word)
    } else {
        word.to_string()
    }
}

/// Every word of `text` (rouge-score tokens), stopwords included.
pub fn words(text: &str) -> Vec<String> {
    crate::eval::rouge::tokenize(text, false)
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
    fn anaphora_are_recognized() {
        assert!(is_anaphor("it"));
        assert!(!is_anaphor("diet"));
    }
}
