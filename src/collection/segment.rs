//! Sentence splitting and the TREC DL / iKAT passage segmentation: a window of 10 sentences moved
//! by a stride of 5 (so consecutive passages overlap by half), optionally after trimming the
//! document to its first 10,000 characters as iKAT does.
//!
//! The official segmentations used spaCy's sentence splitter; this one is rule based (terminal
//! punctuation followed by space and a non-lower-case letter, minus a list of abbreviations, and
//! every line break), so passage boundaries are close to, not identical with, the official ones.

/// How documents are cut into passages.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SegmenterConfig {
    /// Sentences per passage.
    pub window: usize,
    /// Sentences the window moves by.
    pub stride: usize,
    /// Keep only the first N characters of each document before segmenting (iKAT: 10,000).
    pub max_chars: Option<usize>,
}

impl Default for SegmenterConfig {
    fn default() -> Self {
        Self {
            window: 10,
            stride: 5,
            max_chars: None,
        }
    }
}

/// A sentence of a document, with byte and character (Unicode scalar) offsets; `end`s exclusive.
#[derive(Debug, Clone, PartialEq)]
pub struct Sentence {
    pub byte_start: usize,
    pub byte_end: usize,
    pub char_start: usize,
    pub char_end: usize,
}

/// A passage cut from a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Passage {
    /// 0-based passage number within the document.
    pub index: usize,
    pub text: String,
    pub char_start: usize,
    pub char_end: usize,
}

const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "st", "sr", "jr", "vs", "etc", "e.g", "i.e", "inc", "ltd",
    "co", "corp", "no", "fig", "figs", "vol", "pp", "approx", "dept", "est", "gen", "gov", "jan",
    "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "u.s", "u.k",
    "mt", "ft", "cf", "al", "ca", "op", "rev", "sgt", "capt", "col", "lt", "cmdr",
];

fn is_closing(c: char) -> bool {
    matches!(c, '"' | '\'' | '”' | '’' | ')' | ']' | '»')
}

/// Splits `text` into sentences. Every line break ends a sentence; `.`, `!`, `?` and `…` end one
/// when followed by white space and then something that is not a lower-case letter, unless the
/// word before a `.` is a known abbreviation or a single letter (an initial).
pub fn split_sentences(text: &str) -> Vec<Sentence> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let n = chars.len();
    let mut out = Vec::new();
    let mut start = 0usize; // char index of the current sentence's start
    let mut i = 0usize;
    let byte_at = |ci: usize| if ci < n { chars[ci].0 } else { text.len() };
    let push = |s: usize, e: usize, out: &mut Vec<Sentence>| {
        // Trim white space at both ends.
        let mut s = s;
        let mut e = e;
        while s < e && chars[s].1.is_whitespace() {
            s += 1;
        }
        while e > s && chars[e - 1].1.is_whitespace() {
            e -= 1;
        }
        if e > s {
            out.push(Sentence {
                byte_start: byte_at(s),
                byte_end: byte_at(e),
                char_start: s,
                char_end: e,
            });
        }
    };
    while i < n {
        if i == start {
            // A fenced code block or a table is one sentence: a passage never cuts it.
            if let Some(end) = block_end(&chars, i) {
                push(start, end, &mut out);
                start = end;
                i = end;
                continue;
            }
        }
        let c = chars[i].1;
        if c == '\n' || c == '\r' {
            push(start, i, &mut out);
            start = i + 1;
            i += 1;
            continue;
        }
        if matches!(c, '.' | '!' | '?' | '…') {
            let mut j = i + 1;
            while j < n && matches!(chars[j].1, '.' | '!' | '?' | '…') {
                j += 1;
            }
            while j < n && is_closing(chars[j].1) {
                j += 1;
            }
            if j < n && chars[j].1.is_whitespace() && chars[j].1 != '\n' && chars[j].1 != '\r' {
                let mut k = j;
                while k < n && chars[k].1.is_whitespace() && chars[k].1 != '\n' {
                    k += 1;
                }
                let next_ok = k >= n || !chars[k].1.is_lowercase();
                let abbreviation = c == '.' && j == i + 1 && is_abbreviation(&chars, start, i);
                if next_ok && !abbreviation {
                    push(start, j, &mut out);
                    start = j;
                    i = j;
                    continue;
                }
            }
            i = j;
            continue;
        }
        i += 1;
    }
    push(start, n, &mut out);
    out
}

/// The line starting at char index `from` (after white space): `(its end, the line trimmed)`.
fn line_at(chars: &[(usize, char)], from: usize) -> (usize, String) {
    let end = chars[from..]
        .iter()
        .position(|&(_, c)| c == '\n')
        .map_or(chars.len(), |p| from + p);
    let line: String = chars[from..end].iter().map(|&(_, c)| c).collect();
    (end, line.trim().to_string())
}

/// When the line at `from` opens a fenced code block (```` ``` ````, `~~~`) or a Markdown table,
/// the char index where that block ends (after its closing fence or last row).
fn block_end(chars: &[(usize, char)], from: usize) -> Option<usize> {
    let mut from = from;
    while from < chars.len() && chars[from].1.is_whitespace() {
        from += 1;
    }
    if from >= chars.len() {
        return None;
    }
    let mut back = from;
    while back > 0 && matches!(chars[back - 1].1, ' ' | '\t') {
        back -= 1;
    }
    if back > 0 && chars[back - 1].1 != '\n' {
        return None; // not at the start of a line
    }
    let (end, first) = line_at(chars, from);
    let fence_char = first.chars().next()?;
    let fence_len = first.chars().take_while(|&c| c == fence_char).count();
    if matches!(fence_char, '`' | '~') && fence_len >= 3 {
        let fence: String = std::iter::repeat_n(fence_char, fence_len).collect();
        let mut at = end;
        while at < chars.len() {
            let (next_end, line) = line_at(chars, at + 1);
            at = next_end;
            if line.starts_with(&fence) && line.trim_start_matches(fence_char).is_empty() {
                break;
            }
        }
        return Some(at);
    }
    if fence_char == '|' {
        let mut at = end;
        while at < chars.len() {
            let (next_end, line) = line_at(chars, at + 1);
            if !line.starts_with('|') {
                break;
            }
            at = next_end;
        }
        return Some(at);
    }
    None
}

/// Whether the word ending just before the `.` at char index `dot` is an abbreviation.
fn is_abbreviation(chars: &[(usize, char)], sentence_start: usize, dot: usize) -> bool {
    let mut s = dot;
    while s > sentence_start && !chars[s - 1].1.is_whitespace() && chars[s - 1].1 != '(' {
        s -= 1;
    }
    let word: String = chars[s..dot]
        .iter()
        .map(|(_, c)| c.to_ascii_lowercase())
        .collect();
    if word.is_empty() {
        return false;
    }
    // A single letter is an initial ("J. Smith"), not a sentence end.
    if word.chars().count() == 1 && word.chars().all(char::is_alphabetic) {
        return true;
    }
    ABBREVIATIONS.contains(&word.as_str())
}

/// Cuts a document body into passages of `config.window` sentences moved by `config.stride`.
/// Offsets are in characters of the (possibly trimmed) body. A document without sentences
/// yields no passage.
pub fn segment_document(body: &str, config: &SegmenterConfig) -> Vec<Passage> {
    let body = match config.max_chars {
        Some(max) => match body.char_indices().nth(max) {
            Some((b, _)) => &body[..b],
            None => body,
        },
        None => body,
    };
    let sentences = split_sentences(body);
    let window = config.window.max(1);
    let stride = config.stride.max(1);
    let mut out = Vec::new();
    let mut i = 0usize;
    while i < sentences.len() {
        let end = (i + window).min(sentences.len());
        let first = &sentences[i];
        let last = &sentences[end - 1];
        out.push(Passage {
            index: out.len(),
            text: body[first.byte_start..last.byte_end].to_string(),
            char_start: first.char_start,
            char_end: last.char_end,
        });
        if end == sentences.len() {
            break;
        }
        i += stride;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<&str> {
        split_sentences(text)
            .iter()
            .map(|s| &text[s.byte_start..s.byte_end])
            .collect()
    }

    #[test]
    fn splits_on_terminal_punctuation_and_lines() {
        assert_eq!(
            texts("Dr. Smith went home. He slept! Did he? Yes.\nNew line here"),
            vec![
                "Dr. Smith went home.",
                "He slept!",
                "Did he?",
                "Yes.",
                "New line here"
            ]
        );
    }

    #[test]
    fn keeps_abbreviations_initials_and_decimals() {
        assert_eq!(
            texts("J. R. R. Tolkien wrote e.g. books. It costs 3.5 dollars. the end"),
            vec![
                "J. R. R. Tolkien wrote e.g. books.",
                "It costs 3.5 dollars. the end"
            ]
        );
    }

    #[test]
    fn char_offsets_count_unicode_scalars() {
        let text = "Zażółć gęślą. Jaźń!";
        let s = split_sentences(text);
        assert_eq!(s.len(), 2);
        assert_eq!((s[1].char_start, s[1].char_end), (14, 19));
        let chars: Vec<char> = text.chars().collect();
        assert_eq!(chars[14..19].iter().collect::<String>(), "Jaźń!");
    }

    #[test]
    fn code_fences_and_tables_are_one_sentence() {
        let text = "Use:\n```\nSELECT 1;\nSELECT 2.  Not. A sentence\n```\nDone. Then\n  | a | b |\n| 1 | 2 |\nEnd. Here ``` is inline.";
        assert_eq!(
            texts(text),
            vec![
                "Use:",
                "```\nSELECT 1;\nSELECT 2.  Not. A sentence\n```",
                "Done.",
                "Then",
                "| a | b |\n| 1 | 2 |",
                "End.",
                "Here ``` is inline."
            ]
        );
        // An unclosed fence runs to the end.
        assert_eq!(texts("A.\n~~~\nx\ny"), vec!["A.", "~~~\nx\ny"]);
    }

    #[test]
    fn window_ten_stride_five() {
        let body: String = (0..23).map(|i| format!("Sentence {i}. ")).collect();
        let p = segment_document(&body, &SegmenterConfig::default());
        // windows start at 0, 5, 10, 15; the one at 15 reaches the end (23 sentences).
        assert_eq!(p.len(), 4);
        assert!(p[0].text.starts_with("Sentence 0.") && p[0].text.ends_with("Sentence 9."));
        assert!(p[1].text.starts_with("Sentence 5.") && p[1].text.ends_with("Sentence 14."));
        assert!(p[3].text.starts_with("Sentence 15.") && p[3].text.ends_with("Sentence 22."));
        let chars: Vec<char> = body.chars().collect();
        let slice: String = chars[p[1].char_start..p[1].char_end].iter().collect();
        assert_eq!(slice, p[1].text);
    }

    #[test]
    fn short_document_is_one_passage_and_trim_applies() {
        let p = segment_document("One. Two. Three.", &SegmenterConfig::default());
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].text, "One. Two. Three.");
        let cfg = SegmenterConfig {
            max_chars: Some(9),
            ..Default::default()
        };
        let p = segment_document("One. Two. Three.", &cfg);
        assert_eq!(p[0].text, "One. Two.");
        assert!(segment_document("   ", &cfg).is_empty());
    }
}
