//! Citation markers in LLM output: `[1]`, `[1, 3]`, `[1][2]`, `[1-3]`, `[Passage 2]`, `【1】`.
//!
//! Numbers are 1-based as shown in the prompt; they become 0-based indices into the passages the
//! model was shown. Numbers outside `1..=n` are dropped and reported, never clamped.

use once_cell::sync::Lazy;
use regex::Regex;

/// A marker: brackets around numbers, optionally labelled ("Passage 2", "doc 3", "#4"), separated
/// by commas, semicolons, "and", or given as ranges (`1-3`, `1–3`).
pub static MARKER: Lazy<Regex> = Lazy::new(|| {
    let label = r"(?:(?:passages?|docs?|documents?|sources?|refs?|references?|p)\s*)?#?";
    let item = format!(r"{label}\d{{1,4}}(?:\s*[-–—]\s*{label}\d{{1,4}})?");
    Regex::new(&format!(
        r"(?i)[\[【]\s*{item}(?:\s*(?:[,;]|and|&)\s*{item})*\s*[\]】]"
    ))
    .expect("citation marker regex")
});

static NUMBER_OR_RANGE: Lazy<Regex> =
    Lazy::new(|| Regex::new(r"(\d{1,4})(?:\s*[-–—]\s*\D*?(\d{1,4}))?").expect("number regex"));

/// Largest range a marker may span: `[1-400]` is not a citation worth expanding.
const MAX_RANGE: u32 = 50;

/// One sentence with its markers removed and its citations resolved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CitedSentence {
    /// The sentence text without markers, whitespace collapsed, no space before punctuation.
    pub text: String,
    /// 0-based passage indices in order of first mention, without duplicates.
    pub citations: Vec<usize>,
    /// Cited numbers (as written, 1-based) that name no given passage.
    pub dropped: Vec<u32>,
}

/// The numbers a marker names, in order (ranges expanded), as written (1-based).
pub fn marker_numbers(marker: &str) -> Vec<u32> {
    let mut numbers = Vec::new();
    for caps in NUMBER_OR_RANGE.captures_iter(marker) {
        let Ok(first) = caps[1].parse::<u32>() else {
            continue;
        };
        match caps.get(2).and_then(|m| m.as_str().parse::<u32>().ok()) {
            Some(last) if last >= first && last - first <= MAX_RANGE => {
                numbers.extend(first..=last);
            }
            Some(last) => {
                numbers.push(first);
                numbers.push(last);
            }
            None => numbers.push(first),
        }
    }
    numbers
}

/// Strips the markers from `sentence` and resolves them against `n_passages` passages.
pub fn parse_cited_sentence(sentence: &str, n_passages: usize) -> CitedSentence {
    let mut out = CitedSentence::default();
    let mut text = String::with_capacity(sentence.len());
    let mut last = 0;
    for m in MARKER.find_iter(sentence) {
        text.push_str(&sentence[last..m.start()]);
        text.push(' ');
        last = m.end();
        for number in marker_numbers(m.as_str()) {
            let index = number as usize;
            if index >= 1 && index <= n_passages {
                if !out.citations.contains(&(index - 1)) {
                    out.citations.push(index - 1);
                }
            } else {
                out.dropped.push(number);
            }
        }
    }
    text.push_str(&sentence[last..]);
    out.text = tidy(&text);
    out
}

/// Collapses whitespace and removes the space a removed marker leaves before punctuation.
pub fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        let glue = word.starts_with(['.', ',', ';', ':', '!', '?', ')', ']'])
            && !out.is_empty()
            && !out.ends_with(['.', ',', ';', ':', '!', '?']);
        if !out.is_empty() && !glue {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_list_range_and_adjacent_markers() {
        let s = parse_cited_sentence("Paris is the capital of France [1].", 5);
        assert_eq!(s.text, "Paris is the capital of France.");
        assert_eq!(s.citations, vec![0]);

        let s = parse_cited_sentence("It rains a lot [1, 3].", 5);
        assert_eq!(s.citations, vec![0, 2]);

        let s = parse_cited_sentence("It rains a lot [3][1][3].", 5);
        assert_eq!(
            s.citations,
            vec![2, 0],
            "order of first mention, no duplicates"
        );

        let s = parse_cited_sentence("Seen in [2-4] and [5–5].", 5);
        assert_eq!(s.citations, vec![1, 2, 3, 4]);
        assert_eq!(s.text, "Seen in and.");
    }

    #[test]
    fn labelled_and_fullwidth_markers() {
        let s = parse_cited_sentence("Yes [Passage 2], also [Doc 1; doc 3] and 【4】.", 4);
        assert_eq!(s.citations, vec![1, 0, 2, 3]);
        assert_eq!(s.text, "Yes, also and.");
    }

    #[test]
    fn out_of_range_citations_are_dropped_and_counted() {
        let s = parse_cited_sentence("Claim [0] and [2, 7] and [9].", 3);
        assert_eq!(s.citations, vec![1]);
        assert_eq!(s.dropped, vec![0, 7, 9]);
    }

    #[test]
    fn huge_ranges_are_not_expanded() {
        assert_eq!(marker_numbers("[1-400]"), vec![1, 400]);
        assert_eq!(marker_numbers("[Passage 1 - Passage 3]"), vec![1, 2, 3]);
    }

    #[test]
    fn non_markers_stay_text() {
        for t in [
            "The array a[i] holds it.",
            "See [citation needed] here.",
            "A footnote [a] remains.",
            "Matrix [1.5, 2] stays.",
        ] {
            let s = parse_cited_sentence(t, 3);
            assert!(s.citations.is_empty(), "{t}: {s:?}");
            assert_eq!(s.text, t);
        }
    }

    #[test]
    fn marker_after_the_period_is_removed_cleanly() {
        let s = parse_cited_sentence("It was built in 1889. [2]", 2);
        assert_eq!(s.text, "It was built in 1889.");
        assert_eq!(s.citations, vec![1]);
    }
}
