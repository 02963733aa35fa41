//! A rule-based sentence splitter for English web text and LLM output.
//!
//! Rules, in order:
//! * Blank lines and list items (`- `, `* `, `• `, `1. `, `2) `) start a new sentence; the bullet
//!   itself is dropped. A single newline ends a sentence only after terminal punctuation or a colon.
//! * `.`, `!`, `?`, `…` end a sentence when followed by whitespace (or the end) and then something
//!   that may start a sentence (not a lowercase letter). Closing quotes/brackets and citation
//!   markers right after the terminator stay with the sentence that ends there
//!   (`... in 1889. [2] Next` → `... in 1889. [2]`).
//! * A period does not end a sentence after a known abbreviation (`Dr.`, `e.g.`, `vs.`, `No.`),
//!   after a single capital initial (`J. Smith`), inside a number (`3.5`), or after an upper-case
//!   initialism (`U.S.`) unless the next word is a typical sentence opener (`The`, `It`, ...).

use super::citations::MARKER;

/// Never end a sentence (titles and Latin abbreviations that precede more text). Lower case,
/// without the final period.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "rev", "gen", "col", "capt", "lt", "sgt", "hon", "st", "mt",
    "ft", "no", "nos", "fig", "figs", "vol", "vols", "pp", "p", "ch", "sec", "art", "vs", "v",
    "approx", "ca", "cf", "e.g", "i.e", "eg", "ie", "al", "viz", "jan", "feb", "mar", "apr", "jun",
    "jul", "aug", "sep", "sept", "oct", "nov", "dec", "dept", "est", "govt", "min", "max", "inc",
    "ltd", "co", "corp", "jr", "sr", "etc", "univ", "assn", "bros", "mgr", "op", "ed", "eds",
];

/// Abbreviations that often end a sentence too: a boundary only before a capitalized word.
const MAY_END: &[&str] = &["inc", "ltd", "co", "corp", "jr", "sr", "etc", "bros", "al"];

/// Words that typically open a sentence, used to decide after initialisms such as "U.S.".
const OPENERS: &[&str] = &[
    "the",
    "a",
    "an",
    "it",
    "its",
    "he",
    "she",
    "they",
    "we",
    "i",
    "you",
    "this",
    "that",
    "these",
    "those",
    "there",
    "in",
    "on",
    "at",
    "for",
    "however",
    "but",
    "and",
    "as",
    "if",
    "when",
    "while",
    "after",
    "before",
    "since",
    "some",
    "many",
    "most",
    "other",
    "also",
    "his",
    "her",
    "their",
    "our",
    "my",
    "one",
    "each",
    "both",
    "another",
    "today",
    "then",
    "thus",
    "therefore",
];

/// Splits `text` into sentences (trimmed, internal whitespace kept as is). Never panics; empty
/// input gives no sentences. A fenced code block or a table is one "sentence" (its Markdown).
pub fn split_sentences(text: &str) -> Vec<String> {
    split_units(text).into_iter().map(|u| u.text).collect()
}

/// What a unit of text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitKind {
    /// A sentence of running text (a list item's text included).
    Prose,
    /// A Markdown heading's text, without the `#`s.
    Heading,
    /// A fenced code block, fences included (closed even when the text was cut inside it).
    Code,
    /// Consecutive Markdown table rows (`| a | b |`).
    Table,
}

/// A sentence, heading, code block or table of a text, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub kind: UnitKind,
    pub text: String,
}

/// Splits `text` into units: running text into sentences, while a heading, a fenced code block
/// and a table each stay one unit, so no sentence ever starts or ends inside code.
pub fn split_units(text: &str) -> Vec<Unit> {
    let mut out = Vec::new();
    for (kind, block) in blocks(text) {
        if kind == UnitKind::Prose {
            let mut sentences = Vec::new();
            split_block(&block, &mut sentences);
            out.extend(sentences.into_iter().map(|text| Unit {
                kind: UnitKind::Prose,
                text,
            }));
        } else {
            out.push(Unit { kind, text: block });
        }
    }
    out
}

/// Whether a sentence of an answer is a block (a fenced code block or a table) that must stand on
/// lines of its own in Markdown.
pub fn is_block(sentence: &str) -> bool {
    let t = sentence.trim_start();
    fence_of(t).is_some() || t.starts_with('|')
}

/// Sentences joined into one Markdown text: by a space, and by a blank line around blocks.
pub fn join_sentences<'a>(sentences: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let mut previous_block = false;
    for s in sentences {
        let block = is_block(s);
        if !out.is_empty() {
            out.push_str(if block || previous_block { "\n\n" } else { " " });
        }
        out.push_str(s);
        previous_block = block;
    }
    out
}

/// The fence a line opens (```` ``` ```` or `~~~`, possibly longer), if it opens one.
fn fence_of(line: &str) -> Option<&str> {
    let line = line.trim_start();
    for c in ['`', '~'] {
        let n = line.chars().take_while(|&x| x == c).count();
        if n >= 3 {
            return Some(&line[..n]);
        }
    }
    None
}

/// Lines grouped into blocks that sentence splitting never crosses.
fn blocks(text: &str) -> Vec<(UnitKind, String)> {
    let mut blocks: Vec<(UnitKind, String)> = Vec::new();
    let mut current = String::new();
    let flush = |current: &mut String, blocks: &mut Vec<(UnitKind, String)>| {
        let t = current.trim();
        if !t.is_empty() {
            blocks.push((UnitKind::Prose, t.to_string()));
        }
        current.clear();
    };
    let mut lines = text.lines().peekable();
    while let Some(raw) = lines.next() {
        let line = raw.trim();
        if line.is_empty() {
            flush(&mut current, &mut blocks);
            continue;
        }
        if let Some(fence) = fence_of(line) {
            flush(&mut current, &mut blocks);
            let mut code = vec![line.to_string()];
            let mut closed = false;
            for raw in lines.by_ref() {
                code.push(raw.trim_end().to_string());
                if raw.trim().starts_with(fence) && raw.trim().trim_start_matches(fence).is_empty()
                {
                    closed = true;
                    break;
                }
            }
            if !closed {
                code.push(fence.to_string());
            }
            blocks.push((UnitKind::Code, code.join("\n")));
            continue;
        }
        if line.starts_with('|') {
            flush(&mut current, &mut blocks);
            let mut rows = vec![line.to_string()];
            while let Some(next) = lines.next_if(|l| l.trim().starts_with('|')) {
                rows.push(next.trim().to_string());
            }
            blocks.push((UnitKind::Table, rows.join("\n")));
            continue;
        }
        let (is_item, body) = strip_list_marker(line);
        if line.starts_with('#') {
            // A markdown heading is a block of its own.
            flush(&mut current, &mut blocks);
            let heading = line.trim_start_matches('#').trim();
            if !heading.is_empty() {
                blocks.push((UnitKind::Heading, heading.to_string()));
            }
            continue;
        }
        if is_item {
            flush(&mut current, &mut blocks);
            current.push_str(body);
            continue;
        }
        if !current.is_empty() {
            let prev = strip_trailing_markers(current.trim_end());
            if prev.ends_with(['.', '!', '?', '…', ':', '"', '”']) {
                flush(&mut current, &mut blocks);
            } else {
                current.push(' ');
            }
        }
        current.push_str(line);
    }
    flush(&mut current, &mut blocks);
    blocks
}

/// `- x`, `* x`, `• x`, `1. x`, `12) x`, `(a) x` → (true, `x`).
fn strip_list_marker(line: &str) -> (bool, &str) {
    for bullet in ["- ", "* ", "• ", "– ", "· "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            return (true, rest.trim_start());
        }
    }
    let digits = line.chars().take_while(|c| c.is_ascii_digit()).count();
    if (1..=3).contains(&digits) {
        let rest = &line[digits..];
        if let Some(body) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return (true, body.trim_start());
        }
    }
    (false, line)
}

fn strip_trailing_markers(s: &str) -> &str {
    let mut s = s.trim_end();
    loop {
        let Some(m) = MARKER.find_iter(s).last() else {
            return s;
        };
        if m.end() != s.len() {
            return s;
        }
        s = s[..m.start()].trim_end();
    }
}

fn split_block(block: &str, out: &mut Vec<String>) {
    let mut start = 0;
    let mut i = 0;
    // Inside a `code span` (one that closes): "`ALTER DATABASE ... SET`" is never cut.
    let mut in_code = false;
    while i < block.len() {
        let c = block[i..].chars().next().expect("char at boundary");
        let len = c.len_utf8();
        if c == '`' {
            in_code = !in_code && block[i + 1..].contains('`');
            i += len;
            continue;
        }
        if in_code || !matches!(c, '.' | '!' | '?' | '…') {
            i += len;
            continue;
        }
        // Run of terminators ("?!", "...") then closing quotes/brackets.
        let mut end = i + len;
        while let Some(c2) = block[end..].chars().next() {
            if matches!(
                c2,
                '.' | '!' | '?' | '…' | '"' | '\'' | '”' | '’' | ')' | ']' | '»'
            ) {
                // A "]" that opens no marker is a closer; markers are handled below.
                end += c2.len_utf8();
            } else {
                break;
            }
        }
        // Citation markers (possibly after spaces) stay with this sentence.
        let mut after = end;
        loop {
            let ws = block[after..].len() - block[after..].trim_start().len();
            match MARKER.find_at(block, after + ws) {
                Some(m) if m.start() == after + ws => after = m.end(),
                _ => break,
            }
        }
        // Terminal punctuation may follow the markers ("... capital [1].").
        while let Some(c2) = block[after..].chars().next() {
            if matches!(c2, '.' | '!' | '?') && after > end {
                after += 1;
            } else {
                break;
            }
        }
        let rest = &block[after..];
        let next_text = rest.trim_start();
        let has_space = next_text.len() < rest.len();
        if next_text.is_empty() {
            break; // the end of the block ends the sentence anyway
        }
        if !has_space || !is_boundary(block, start, i, c, next_text) {
            i = end.max(i + len);
            continue;
        }
        let sentence = block[start..after].trim();
        if !sentence.is_empty() {
            out.push(sentence.to_string());
        }
        start = after;
        i = after;
    }
    let tail = block[start..].trim();
    if !tail.is_empty() {
        out.push(tail.to_string());
    }
}

/// Whether the terminator `term` at byte `at` ends the sentence begun at `start`, given the text
/// that follows it.
fn is_boundary(block: &str, start: usize, at: usize, term: char, next: &str) -> bool {
    let first = next.chars().next().unwrap_or(' ');
    if first.is_lowercase() {
        return false;
    }
    if term != '.' {
        return true;
    }
    // The word the period closes (from the last whitespace/opening bracket to the period).
    let before = &block[start..at];
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(' || c == '"' || c == '“')
        .next()
        .unwrap_or("");
    let lower = word.to_lowercase();
    let next_word: String = next
        .chars()
        .take_while(|c| c.is_alphanumeric())
        .collect::<String>()
        .to_lowercase();
    let capitalized = first.is_uppercase();
    if word.is_empty() {
        return true;
    }
    if MAY_END.contains(&lower.as_str()) {
        return capitalized && OPENERS.contains(&next_word.as_str());
    }
    if ABBREVIATIONS.contains(&lower.as_str()) {
        // "No. 5", "Dr. Smith", "e.g. Paris": never a boundary.
        return false;
    }
    // Single capital initial: "J. R. R. Tolkien".
    let mut chars = word.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        if c.is_uppercase() {
            return false;
        }
    }
    // Initialisms with inner periods: "U.S", "a.m", "Ph.D".
    if word.contains('.') && word.chars().any(|c| c.is_alphabetic()) {
        let parts_short = word.split('.').all(|p| p.chars().count() <= 2);
        if parts_short {
            let has_upper = word.chars().any(|c| c.is_uppercase());
            return if has_upper {
                OPENERS.contains(&next_word.as_str())
            } else {
                capitalized
            };
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(t: &str) -> Vec<String> {
        split_sentences(t)
    }

    #[test]
    fn plain_sentences() {
        assert_eq!(
            split("The cat sat. The dog ran! Did it? Yes."),
            vec!["The cat sat.", "The dog ran!", "Did it?", "Yes."]
        );
        assert!(split("").is_empty());
        assert!(split("  \n\n ").is_empty());
        assert_eq!(split("No terminator at all"), vec!["No terminator at all"]);
    }

    #[test]
    fn abbreviations_and_initials() {
        assert_eq!(
            split("Dr. Smith met Mr. J. R. Jones at 5 p.m. on Friday. They talked."),
            vec![
                "Dr. Smith met Mr. J. R. Jones at 5 p.m. on Friday.",
                "They talked."
            ]
        );
        assert_eq!(
            split("Use fruit, e.g. Apples or pears, i.e. Fresh ones. Then eat."),
            vec![
                "Use fruit, e.g. Apples or pears, i.e. Fresh ones.",
                "Then eat."
            ]
        );
        assert_eq!(
            split("The U.S. Army grew. It moved to the U.S. The move was slow."),
            vec![
                "The U.S. Army grew.",
                "It moved to the U.S.",
                "The move was slow."
            ]
        );
        assert_eq!(
            split("See Fig. 3 and No. 7 vs. Table 2. Done."),
            vec!["See Fig. 3 and No. 7 vs. Table 2.", "Done."]
        );
        assert_eq!(
            split("Sold by Apple Inc. The company grew. Made by Acme Inc. Products vary."),
            vec![
                "Sold by Apple Inc.",
                "The company grew.",
                "Made by Acme Inc. Products vary."
            ]
        );
    }

    #[test]
    fn decimals_versions_and_urls() {
        assert_eq!(
            split("It costs $3.50 and weighs 2.5 kg. Version 1.2.3 at example.com works."),
            vec![
                "It costs $3.50 and weighs 2.5 kg.",
                "Version 1.2.3 at example.com works."
            ]
        );
    }

    #[test]
    fn lowercase_continuation_is_not_a_boundary() {
        assert_eq!(
            split("The approx. value is low. ok."),
            vec!["The approx. value is low. ok."]
        );
    }

    #[test]
    fn quotes_and_ellipses() {
        assert_eq!(
            split("He said \"Stop.\" Then he left... Why?! Because."),
            vec!["He said \"Stop.\"", "Then he left...", "Why?!", "Because."]
        );
    }

    #[test]
    fn citation_markers_stay_with_their_sentence() {
        assert_eq!(
            split("Paris is the capital [1]. It has 2.1 million people. [2][3] Lyon is smaller [1, 4]."),
            vec![
                "Paris is the capital [1].",
                "It has 2.1 million people. [2][3]",
                "Lyon is smaller [1, 4]."
            ]
        );
        assert_eq!(
            split("Built in 1889 [2]. Tall [1-3]."),
            vec!["Built in 1889 [2].", "Tall [1-3]."]
        );
        assert_eq!(
            split("It was built in 1889. [2]"),
            vec!["It was built in 1889. [2]"]
        );
        // Citation after the period, before the next sentence, without a space.
        assert_eq!(
            split("It was built in 1889.[2] It is tall."),
            vec!["It was built in 1889.[2]", "It is tall."]
        );
    }

    #[test]
    fn lists_and_newlines() {
        let text = "Here are the options:\n1. Take the train [1].\n2. Fly to Rome [2]\n- Drive, e.g. via the A1 [3]\n\nIn summary, take the train.";
        assert_eq!(
            split(text),
            vec![
                "Here are the options:",
                "Take the train [1].",
                "Fly to Rome [2]",
                "Drive, e.g. via the A1 [3]",
                "In summary, take the train."
            ]
        );
        // A newline inside a sentence (wrapped web text) does not split it.
        assert_eq!(
            split("The tower is\nvery tall. It is in Paris."),
            vec!["The tower is very tall.", "It is in Paris."]
        );
        assert_eq!(
            split("## Answer\nThe tower is tall."),
            vec!["Answer", "The tower is tall."]
        );
    }

    #[test]
    fn a_code_span_is_never_cut_and_an_unclosed_backtick_changes_nothing() {
        assert_eq!(
            split("Per database, use `ALTER DATABASE ... SET`. Otherwise, set it. Done."),
            vec![
                "Per database, use `ALTER DATABASE ... SET`.",
                "Otherwise, set it.",
                "Done."
            ]
        );
        assert_eq!(
            split("Run `SELECT 1. Then 2;` twice. Next step."),
            vec!["Run `SELECT 1. Then 2;` twice.", "Next step."]
        );
        assert_eq!(
            split("A stray ` mark. The next sentence."),
            vec!["A stray ` mark.", "The next sentence."]
        );
    }

    #[test]
    fn a_code_fence_is_one_unit_and_never_cut() {
        let text = "To change it, use a command like:\n```sql\nALTER TABLE t ALTER COLUMN c TYPE int;\n\nSELECT 1. -- Done. Next\n```\nIt works. Then stop.\n| a | b |\n| --- | --- |\n| 1 | 2 |\n### Notes\nUnclosed:\n```\nSELECT 2;";
        let units = split_units(text);
        let got: Vec<(UnitKind, &str)> = units.iter().map(|u| (u.kind, u.text.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (UnitKind::Prose, "To change it, use a command like:"),
                (
                    UnitKind::Code,
                    "```sql\nALTER TABLE t ALTER COLUMN c TYPE int;\n\nSELECT 1. -- Done. Next\n```"
                ),
                (UnitKind::Prose, "It works."),
                (UnitKind::Prose, "Then stop."),
                (UnitKind::Table, "| a | b |\n| --- | --- |\n| 1 | 2 |"),
                (UnitKind::Heading, "Notes"),
                (UnitKind::Prose, "Unclosed:"),
                (UnitKind::Code, "```\nSELECT 2;\n```"),
            ]
        );
        // The plain splitter gives the same texts.
        assert_eq!(split_sentences(text).len(), units.len());
    }

    #[test]
    fn blocks_stand_on_lines_of_their_own_when_joined() {
        let joined = join_sentences(["Use:", "```\nSELECT 1;\n```", "It works.", "Done."]);
        assert_eq!(joined, "Use:\n\n```\nSELECT 1;\n```\n\nIt works. Done.");
        assert_eq!(
            split_sentences(&joined),
            vec!["Use:", "```\nSELECT 1;\n```", "It works.", "Done."]
        );
        assert_eq!(join_sentences(["A.", "B."]), "A. B.");
    }

    #[test]
    fn odd_input_never_panics() {
        for t in [
            ".",
            "...",
            "?!",
            "[1]",
            ". [1]",
            "a.b.c.",
            "é. É. ü… Ü",
            "1.",
            "1. ",
            "- ",
            "日本語。テスト.",
            "```",
            "~~~~\n",
            "| ",
            "``` x\n```` \n",
        ] {
            let _ = split(t);
        }
        assert_eq!(split("[1]"), vec!["[1]"]);
    }
}
