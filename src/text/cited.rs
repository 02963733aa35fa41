//! Which parts of a passage the answer sentences citing it draw on, for a reader to see them
//! highlighted: an extractive sentence is the passage's own text; a paraphrase shares its
//! content terms with some of the passage's sentences.

use std::collections::HashSet;

use super::sentences::split_sentences;
use super::terms::terms;

/// A part of a passage: `[start, end)` in Unicode scalar values (chars) of its text.
pub type CharSpan = [usize; 2];

/// A sentence shorter than this (after folding white space) is too short to be looked for
/// verbatim: it would match anywhere.
const MIN_VERBATIM_CHARS: usize = 12;
/// A passage sentence counts as drawn on when it shares this many distinct content terms with
/// the citing sentence...
const MIN_SHARED_TERMS: usize = 3;
/// ...and they are at least this share of its own distinct terms.
const MIN_SHARED_SHARE: f64 = 0.5;

/// The parts of `passage` that `sentences` draw on, sorted and merged: for each sentence, where
/// the passage holds it verbatim (case and white space aside), else the passage's sentences
/// sharing [`MIN_SHARED_TERMS`] content terms with it that are half of their own, and the one
/// sharing most.
pub fn cited_spans(passage: &str, sentences: &[&str]) -> Vec<CharSpan> {
    let folded = Folded::new(passage);
    let mut passage_sentences: Option<Vec<(CharSpan, HashSet<String>)>> = None;
    let mut spans = Vec::new();
    for sentence in sentences {
        let needle = Folded::new(sentence);
        if needle.chars.len() >= MIN_VERBATIM_CHARS {
            if let Some(span) = folded.find(&needle) {
                spans.push(span);
                continue;
            }
        }
        let candidates = passage_sentences.get_or_insert_with(|| sentence_spans(passage));
        spans.extend(sharing_terms(candidates, sentence));
    }
    merge(spans)
}

/// The passage sentences `sentence` paraphrases, by shared content terms.
fn sharing_terms(candidates: &[(CharSpan, HashSet<String>)], sentence: &str) -> Vec<CharSpan> {
    let words: HashSet<String> = terms(sentence).into_iter().collect();
    let mut out = Vec::new();
    let mut best: Option<(usize, CharSpan)> = None;
    for (span, own) in candidates {
        if own.is_empty() {
            continue;
        }
        let shared = own.intersection(&words).count();
        if shared < MIN_SHARED_TERMS {
            continue;
        }
        if shared as f64 / own.len() as f64 >= MIN_SHARED_SHARE {
            out.push(*span);
        }
        if best.is_none_or(|(most, _)| shared > most) {
            best = Some((shared, *span));
        }
    }
    if let Some((_, span)) = best {
        if !out.contains(&span) {
            out.push(span);
        }
    }
    out
}

/// The passage's sentences (the splitter the answers are made with), each with its char span
/// and distinct content terms; a sentence the splitter changed (a closed code fence) is skipped.
fn sentence_spans(passage: &str) -> Vec<(CharSpan, HashSet<String>)> {
    let mut out = Vec::new();
    let mut from = 0;
    for sentence in split_sentences(passage) {
        let Some(at) = passage[from..].find(sentence.as_str()) else {
            continue;
        };
        let start = from + at;
        let end = start + sentence.len();
        let span = [
            passage[..start].chars().count(),
            passage[..end].chars().count(),
        ];
        out.push((span, terms(&sentence).into_iter().collect()));
        from = end;
    }
    out
}

/// Sorted, overlapping spans joined.
fn merge(mut spans: Vec<CharSpan>) -> Vec<CharSpan> {
    spans.sort_unstable();
    let mut merged: Vec<CharSpan> = Vec::new();
    for span in spans {
        match merged.last_mut() {
            Some(last) if span[0] <= last[1] => last[1] = last[1].max(span[1]),
            _ => merged.push(span),
        }
    }
    merged
}

/// A text lower-cased with runs of white space as one space, each char remembering the char
/// offset in the original it came from.
struct Folded {
    chars: Vec<char>,
    origin: Vec<usize>,
}

impl Folded {
    fn new(text: &str) -> Folded {
        let mut chars = Vec::new();
        let mut origin = Vec::new();
        let mut in_space = true;
        for (i, c) in text.trim().chars().enumerate() {
            if c.is_whitespace() {
                if !in_space {
                    chars.push(' ');
                    origin.push(i);
                }
                in_space = true;
                continue;
            }
            in_space = false;
            // One char for one: a char lower-casing to several keeps its offsets aligned.
            let mut lower = c.to_lowercase();
            let folded = match (lower.next(), lower.next()) {
                (Some(l), None) => l,
                _ => c,
            };
            chars.push(folded);
            origin.push(i);
        }
        // Offsets into the untrimmed text.
        let lead = text.chars().take_while(|c| c.is_whitespace()).count();
        origin.iter_mut().for_each(|o| *o += lead);
        Folded { chars, origin }
    }

    /// Where `needle` first stands in this text, as a span of the original.
    fn find(&self, needle: &Folded) -> Option<CharSpan> {
        let n = needle.chars.len();
        if n == 0 || n > self.chars.len() {
            return None;
        }
        let at = self
            .chars
            .windows(n)
            .position(|w| w == needle.chars.as_slice())?;
        Some([self.origin[at], self.origin[at + n - 1] + 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(passage: &str, spans: &[CharSpan]) -> Vec<String> {
        let chars: Vec<char> = passage.chars().collect();
        spans
            .iter()
            .map(|[s, e]| chars[*s..*e].iter().collect())
            .collect()
    }

    #[test]
    fn an_extractive_sentence_is_found_whatever_its_case_and_spacing() {
        let passage = "Tide pools form on rocky shores.  Anemones  live in them. Crabs hide too.";
        let spans = cited_spans(passage, &["anemones live in them."]);
        assert_eq!(marked(passage, &spans), vec!["Anemones  live in them."]);
    }

    #[test]
    fn offsets_count_chars_not_bytes() {
        let passage = "Café owners in Zürich open early. Bakeries open earlier still.";
        let spans = cited_spans(passage, &["Bakeries open earlier still."]);
        assert_eq!(spans, vec![[34, 62]]);
        assert_eq!(
            marked(passage, &spans),
            vec!["Bakeries open earlier still."]
        );
    }

    #[test]
    fn a_paraphrase_marks_the_sentences_sharing_its_terms() {
        let passage = "Otters eat crabs and clams. They float on their backs. \
                       Kelp forests recover where otters hunt urchins.";
        let spans = cited_spans(
            passage,
            &["Sea otters hunt urchins, which lets kelp forests recover."],
        );
        assert_eq!(
            marked(passage, &spans),
            vec!["Kelp forests recover where otters hunt urchins."]
        );
    }

    #[test]
    fn spans_are_sorted_and_merged_and_unrelated_sentences_mark_nothing() {
        let passage = "First part here. Second part follows. Third part ends it.";
        let spans = cited_spans(
            passage,
            &[
                "Second part follows.",
                "First part here.",
                "Nothing alike at all.",
            ],
        );
        assert_eq!(
            marked(passage, &spans),
            vec!["First part here.", "Second part follows."]
        );
        assert!(cited_spans(passage, &[]).is_empty());
        assert!(cited_spans("", &["Anything at all here."]).is_empty());
    }
}
