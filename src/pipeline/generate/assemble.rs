//! Turns raw LLM sentences (markers still inside) into the answer: citations resolved, lone
//! markers attached to the sentence before, the word limit enforced by dropping trailing
//! sentences. Shared by the streaming and the non-streaming path so both give the same answer.
//!
//! Small models often restate a passage without writing its number. With the passages' texts
//! ([`SentenceAssembler::with_support`]) a sentence that cites nothing gets a citation only when
//! it is verified: at least [`SUPPORT_MIN_TERMS`] content terms, and at least [`SUPPORT_SHARE`] of
//! them occur in one shown passage (the one with the largest share, the first on ties). Such
//! sentences are listed in `verified_citations`; a sentence no passage supports stays uncited.

use std::collections::HashSet;

use super::{GeneratedSentence, WordLimit};
use crate::pipeline::terms::content_stems;
use crate::text::citations::parse_cited_sentence;

/// Content terms a sentence needs before a passage can be said to support it.
pub const SUPPORT_MIN_TERMS: usize = 3;
/// Share of the sentence's content terms one passage must contain to be cited for it.
pub const SUPPORT_SHARE: f64 = 0.7;

/// The passage (0-based) that supports `sentence`, if one does (see the module documentation).
pub fn supporting_passage(sentence: &str, passages: &[HashSet<String>]) -> Option<usize> {
    let terms: HashSet<String> = content_stems(sentence).into_iter().collect();
    if terms.len() < SUPPORT_MIN_TERMS {
        return None;
    }
    let mut best: Option<(usize, f64)> = None;
    for (i, p) in passages.iter().enumerate() {
        let share = terms.iter().filter(|t| p.contains(*t)).count() as f64 / terms.len() as f64;
        if share >= SUPPORT_SHARE && best.is_none_or(|(_, b)| share > b) {
            best = Some((i, share));
        }
    }
    best.map(|(i, _)| i)
}

/// Builds the answer one raw sentence at a time. A sentence is released one step late, because
/// a following marker-only sentence (`... Paris\n[1]`) still belongs to it.
#[derive(Debug)]
pub struct SentenceAssembler {
    n_passages: usize,
    limit: WordLimit,
    pending: Option<GeneratedSentence>,
    accepted: Vec<GeneratedSentence>,
    dropped: Vec<u32>,
    cut: usize,
    full: bool,
    /// Content stems of the shown passages, to verify citations of uncited sentences.
    support: Vec<HashSet<String>>,
    verified: Vec<usize>,
}

impl SentenceAssembler {
    pub fn new(n_passages: usize, limit: WordLimit) -> Self {
        Self {
            n_passages,
            limit,
            pending: None,
            accepted: Vec::new(),
            dropped: Vec::new(),
            cut: 0,
            full: false,
            support: Vec::new(),
            verified: Vec::new(),
        }
    }

    /// Verifies citations for uncited sentences against these passage texts (the shown ones,
    /// in prompt order).
    pub fn with_support<'a>(mut self, passages: impl IntoIterator<Item = &'a str>) -> Self {
        self.support = passages
            .into_iter()
            .take(self.n_passages)
            .map(|p| content_stems(p).into_iter().collect())
            .collect();
        self
    }

    /// Adds a raw sentence; returns the sentence released by it (with its final index), if any.
    pub fn push(&mut self, raw: &str) -> Option<(usize, GeneratedSentence)> {
        if crate::text::sentences::is_block(raw) {
            // Code is kept as written (a `[1]` or `**` inside it is code); it cites what the
            // sentence introducing it cites.
            let citations = self
                .pending
                .as_ref()
                .map(|p| p.citations.clone())
                .unwrap_or_default();
            let next = GeneratedSentence {
                text: raw.trim().to_string(),
                citations,
            };
            let released = self.pending.take().and_then(|s| self.accept(s));
            self.pending = Some(next);
            return released;
        }
        // Markdown bold is noise in a spoken/plain response.
        let parsed = parse_cited_sentence(&raw.replace("**", ""), self.n_passages);
        self.dropped.extend(parsed.dropped.iter().copied());
        if !parsed.text.chars().any(char::is_alphanumeric) {
            // Only markers/punctuation: citations of the sentence before.
            if let Some(p) = &mut self.pending {
                for c in parsed.citations {
                    if !p.citations.contains(&c) {
                        p.citations.push(c);
                    }
                }
            }
            return None;
        }
        let next = GeneratedSentence {
            text: parsed.text,
            citations: parsed.citations,
        };
        let released = self.pending.take().and_then(|s| self.accept(s));
        self.pending = Some(next);
        released
    }

    /// Whether the word limit is reached (later sentences can only be cut).
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Releases the last sentence; returns it and the whole result.
    pub fn finish(mut self) -> (Option<(usize, GeneratedSentence)>, Assembled) {
        let last = self.pending.take().and_then(|s| self.accept(s));
        let uncited = self
            .accepted
            .iter()
            .enumerate()
            .filter(|(_, s)| s.citations.is_empty())
            .map(|(i, _)| i)
            .collect();
        (
            last,
            Assembled {
                sentences: self.accepted,
                dropped_citations: self.dropped,
                uncited_sentences: uncited,
                sentences_cut_for_limit: self.cut,
                verified_citations: self.verified,
            },
        )
    }

    fn accept(&mut self, mut sentence: GeneratedSentence) -> Option<(usize, GeneratedSentence)> {
        if self.full {
            self.cut += 1;
            return None;
        }
        let words = self.limit.count(
            self.accepted
                .iter()
                .map(|s| s.text.as_str())
                .chain([sentence.text.as_str()]),
        );
        if words > self.limit.max_words {
            // Drop this and everything after it: a later short sentence would read out of order.
            self.full = true;
            self.cut += 1;
            return None;
        }
        if sentence.citations.is_empty() {
            if let Some(p) = supporting_passage(&sentence.text, &self.support) {
                sentence.citations.push(p);
                self.verified.push(self.accepted.len());
            }
        }
        self.accepted.push(sentence.clone());
        Some((self.accepted.len() - 1, sentence))
    }
}

/// The assembled answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    pub sentences: Vec<GeneratedSentence>,
    pub dropped_citations: Vec<u32>,
    pub uncited_sentences: Vec<usize>,
    pub sentences_cut_for_limit: usize,
    /// Indices of sentences whose citation was attached by verification, not written.
    pub verified_citations: Vec<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::generate::WordMeasure;

    #[test]
    fn lone_markers_attach_and_limit_cuts_the_tail() {
        let limit = WordLimit {
            max_words: 8,
            measure: WordMeasure::TrecRag,
        };
        let mut a = SentenceAssembler::new(3, limit);
        let mut released = Vec::new();
        for raw in [
            "**Paris** is big",
            "[1]",
            "It has a tower [2, 9].",
            "A third sentence here [3].",
        ] {
            released.extend(a.push(raw));
        }
        let (last, result) = a.finish();
        released.extend(last);
        assert_eq!(result.sentences.len(), 2);
        assert_eq!(result.sentences[0].text, "Paris is big");
        assert_eq!(result.sentences[0].citations, vec![0]);
        assert_eq!(result.sentences[1].citations, vec![1]);
        assert_eq!(result.dropped_citations, vec![9]);
        assert_eq!(result.sentences_cut_for_limit, 1);
        assert_eq!(
            released.into_iter().map(|(_, s)| s).collect::<Vec<_>>(),
            result.sentences
        );
    }

    #[test]
    fn supported_sentences_get_a_verified_citation_and_others_do_not() {
        let passages = [
            "The Eiffel Tower is 330 metres tall and stands in Paris.",
            "Lyon is known for its food and its old town.",
        ];
        let mut a = SentenceAssembler::new(2, WordLimit::IKAT).with_support(passages);
        a.push("The Eiffel Tower in Paris is 330 metres tall.");
        a.push("Lyon has famous food in its old town.");
        a.push("Bananas grow on tall trees in warm countries.");
        a.push("Short one.");
        let (_, r) = a.finish();
        assert_eq!(r.sentences[0].citations, vec![0]);
        assert_eq!(r.sentences[1].citations, vec![1]);
        assert!(r.sentences[2].citations.is_empty());
        assert!(r.sentences[3].citations.is_empty());
        assert_eq!(r.verified_citations, vec![0, 1]);
        assert_eq!(r.uncited_sentences, vec![2, 3]);
    }

    #[test]
    fn written_citations_are_kept_and_not_counted_as_verified() {
        let passages = ["The Eiffel Tower is 330 metres tall and stands in Paris."];
        let mut a = SentenceAssembler::new(1, WordLimit::IKAT).with_support(passages);
        a.push("The Eiffel Tower in Paris is 330 metres tall [1].");
        let (_, r) = a.finish();
        assert_eq!(r.sentences[0].citations, vec![0]);
        assert!(r.verified_citations.is_empty());
    }

    #[test]
    fn code_blocks_are_kept_as_written_and_cite_their_introduction() {
        let mut a = SentenceAssembler::new(2, WordLimit::IKAT);
        a.push("Use a command like this [2]:");
        a.push("```sql\nSELECT a[1], '**' FROM t;\n```");
        let (_, r) = a.finish();
        assert_eq!(
            r.sentences[1].text,
            "```sql\nSELECT a[1], '**' FROM t;\n```"
        );
        assert_eq!(r.sentences[1].citations, vec![1]);
        assert!(r.dropped_citations.is_empty());
    }

    #[test]
    fn uncited_sentences_are_reported_not_given_citations() {
        let mut a = SentenceAssembler::new(2, WordLimit::IKAT);
        a.push("Cited [1].");
        a.push("Not cited.");
        let (_, r) = a.finish();
        assert_eq!(r.uncited_sentences, vec![1]);
        assert!(r.sentences[1].citations.is_empty());
    }
}
