//! Answers judged by the command or term a good answer must show (`tests/fixtures/
//! manual-questions.jsonl`: questions about the PostgreSQL manual). An expectation is a list of
//! alternatives; an alternative is one or more parts separated by `…`, which must occur in that
//! order inside one unit of the answer (a sentence or a code block), case-insensitively, white
//! space collapsed, each part bounded by non-word characters at its word ends
//! (`ALTER COLUMN … TYPE` matches `ALTER COLUMN price TYPE numeric`). It is shown *as code* when
//! the whole match lies inside a fenced code block or a code span.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{read_text, EvalError, Result};

/// One question and what its answer must show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedAnswer {
    pub question: String,
    /// Alternatives; any one shown is enough.
    pub expect: Vec<String>,
}

/// Reads a JSON-lines file of [`ExpectedAnswer`]s (blank lines skipped), naming the line of a
/// problem.
pub fn read_expected(path: &Path) -> Result<Vec<ExpectedAnswer>> {
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let item: ExpectedAnswer =
            serde_json::from_str(line).map_err(|e| EvalError::parse(path, i + 1, e.to_string()))?;
        if item.expect.is_empty() || item.expect.iter().any(|e| e.trim().is_empty()) {
            return Err(EvalError::parse(
                path,
                i + 1,
                "expect needs a non-empty term",
            ));
        }
        out.push(item);
    }
    Ok(out)
}

/// How an answer shows what was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Shown {
    /// Some alternative occurs in the answer.
    pub appears: bool,
    /// Some alternative occurs inside code.
    pub in_code: bool,
}

/// Whether `answer` (Markdown) shows one of `expect`'s alternatives, and whether as code.
pub fn shown(answer: &str, expect: &[String]) -> Shown {
    let mut out = Shown::default();
    let units = crate::text::sentences::split_sentences(answer);
    for unit in &units {
        let (text, code) = with_code_mask(unit);
        for alternative in expect {
            for (start, end) in matches(&text, alternative) {
                out.appears = true;
                if code[start..end].iter().all(|&c| c) {
                    out.in_code = true;
                }
            }
        }
    }
    out
}

/// The unit's characters, lower case with white space collapsed and code markers removed, and
/// for each character whether it is code.
fn with_code_mask(unit: &str) -> (Vec<char>, Vec<bool>) {
    let trimmed = unit.trim();
    let fenced = trimmed.starts_with("```") || trimmed.starts_with("~~~");
    let body: String = if fenced {
        let inner: Vec<&str> = trimmed.lines().collect();
        let n = inner.len();
        let last = if n > 1 && inner[n - 1].trim_start().starts_with(&inner[0][..3]) {
            n - 1
        } else {
            n
        };
        inner[1.min(n)..last].join("\n")
    } else {
        trimmed.to_string()
    };
    let mut chars = Vec::new();
    let mut code = Vec::new();
    let mut in_span = false;
    for c in body.chars() {
        if !fenced && c == '`' {
            in_span = !in_span;
            continue;
        }
        let c = if c.is_whitespace() { ' ' } else { c };
        if c == ' ' && chars.last() == Some(&' ') {
            continue;
        }
        chars.extend(c.to_lowercase());
        code.push(fenced || in_span);
        // A lower-case form longer than one char keeps the mask aligned.
        while code.len() < chars.len() {
            code.push(fenced || in_span);
        }
    }
    (chars, code)
}

/// Every (start, end) where `alternative`'s parts occur in order in `text`.
fn matches(text: &[char], alternative: &str) -> Vec<(usize, usize)> {
    let parts: Vec<Vec<char>> = alternative
        .split('…')
        .map(|p| {
            p.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase()
                .chars()
                .collect()
        })
        .filter(|p: &Vec<char>| !p.is_empty())
        .collect();
    let Some(first) = parts.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for start in find_all(text, first, 0) {
        let mut end = start + first.len();
        let mut ok = true;
        for part in &parts[1..] {
            match find_all(text, part, end).first() {
                Some(&at) => end = at + part.len(),
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            out.push((start, end));
        }
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `c` continues a word for the needle's boundaries: a path's separators too, so the
/// `to` of `/path/to/file.csv` is not the keyword TO.
fn joins_word(c: char) -> bool {
    is_word(c) || c == '/'
}

/// Starts of `needle` in `text` at or after `from`, bounded by non-word characters where the
/// needle begins or ends with a word character.
fn find_all(text: &[char], needle: &[char], from: usize) -> Vec<usize> {
    let mut out = Vec::new();
    if needle.is_empty() || text.len() < needle.len() {
        return out;
    }
    for at in from..=text.len() - needle.len() {
        if text[at..at + needle.len()] != *needle {
            continue;
        }
        let left_ok = !is_word(needle[0]) || at == 0 || !joins_word(text[at - 1]);
        let end = at + needle.len();
        let right_ok =
            !is_word(needle[needle.len() - 1]) || end == text.len() || !joins_word(text[end]);
        if left_ok && right_ok {
            out.push(at);
        }
    }
    out
}

/// Figures over a question set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ExpectedSummary {
    pub questions: usize,
    /// Share of answers showing the expected command or term.
    pub appears: f64,
    /// Share of answers showing it inside code.
    pub in_code: f64,
    /// Median answer length in words (white-space separated, code included).
    pub median_words: f64,
}

/// Summarizes `(shown, words)` per answer.
pub fn summarize(results: &[(Shown, usize)]) -> ExpectedSummary {
    let n = results.len();
    let share = |f: &dyn Fn(&Shown) -> bool| {
        if n == 0 {
            0.0
        } else {
            results.iter().filter(|(s, _)| f(s)).count() as f64 / n as f64
        }
    };
    let mut words: Vec<usize> = results.iter().map(|(_, w)| *w).collect();
    words.sort_unstable();
    let median_words = match n {
        0 => 0.0,
        _ if n % 2 == 1 => words[n / 2] as f64,
        _ => (words[n / 2 - 1] + words[n / 2]) as f64 / 2.0,
    };
    ExpectedSummary {
        questions: n,
        appears: share(&|s| s.appears),
        in_code: share(&|s| s.in_code),
        median_words,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alt(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parts_match_in_order_within_one_unit_and_code_is_told_apart() {
        let answer = "To convert a column, use a command like:\n\n```\nALTER TABLE products ALTER COLUMN price\n    TYPE numeric(10,2);\n```\n\nIt rewrites the table.";
        let s = shown(answer, &alt(&["alter column … type"]));
        assert_eq!(
            s,
            Shown {
                appears: true,
                in_code: true
            }
        );
        // In prose only.
        let s = shown(
            "Use ALTER COLUMN with TYPE to change it.",
            &alt(&["ALTER COLUMN … TYPE"]),
        );
        assert_eq!(
            s,
            Shown {
                appears: true,
                in_code: false
            }
        );
        // A code span counts as code; parts across two sentences do not match.
        let s = shown("Run `VACUUM FULL` often.", &alt(&["VACUUM"]));
        assert!(s.in_code);
        let s = shown(
            "Use ALTER COLUMN. The TYPE follows.",
            &alt(&["ALTER COLUMN … TYPE"]),
        );
        assert!(!s.appears);
        // Word boundaries: RESET is not SET, but \dt matches at its backslash.
        assert!(!shown("RESET all.", &alt(&["SET"])).appears);
        assert!(shown("Type `\\dt` in psql.", &alt(&["\\dt"])).in_code);
        // A path's components are not keywords.
        let path = "`COPY log FROM '/full/path/to/log.csv' WITH csv;`";
        assert!(!shown(path, &alt(&["COPY … TO"])).appears);
        assert!(shown("`COPY log TO '/tmp/log.csv';`", &alt(&["COPY … TO"])).in_code);
        // Any alternative is enough.
        assert!(shown("Use `pg_dump`.", &alt(&["pg_dumpall", "pg_dump"])).in_code);
    }

    #[test]
    fn summaries_count_shares_and_the_median() {
        let yes = Shown {
            appears: true,
            in_code: true,
        };
        let prose = Shown {
            appears: true,
            in_code: false,
        };
        let s = summarize(&[(yes, 50), (prose, 100), (Shown::default(), 70), (yes, 90)]);
        assert_eq!(s.questions, 4);
        assert_eq!((s.appears, s.in_code), (0.75, 0.5));
        assert_eq!(s.median_words, 80.0);
    }

    #[test]
    fn the_question_set_reads_and_bad_lines_are_named() {
        let set = read_expected(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/expected_answers/manual-questions.jsonl"
        )))
        .unwrap();
        assert!(set.len() >= 30, "{}", set.len());
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("q.jsonl");
        std::fs::write(
            &bad,
            "{\"question\": \"a\", \"expect\": [\"X\"]}\n\n{\"question\": \"b\", \"expect\": []}\n",
        )
        .unwrap();
        let e = read_expected(&bad).unwrap_err().to_string();
        assert!(e.contains("q.jsonl:3:"), "{e}");
    }
}
