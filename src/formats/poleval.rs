//! PolEval 2022 passage retrieval (GEval layout): `in.tsv` (`<domain>\t<question>`; test-A
//! lines start with a space) in, `out.tsv` out: "Each of the ten columns should contain one
//! passage-id ... Each line should contain passages relevant to the matching question from the
//! in.tsv file".

use std::collections::HashSet;
use std::path::Path;

use super::validate::{Report, ValidationContext};
use super::{atomic, numbered_lines, read_text, FormatError, Result};

/// Passages per output line.
pub const PASSAGES_PER_LINE: usize = 10;

/// One question of `in.tsv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolevalQuestion {
    /// 1-based line; the output line must have the same number.
    pub line: usize,
    /// `wiki-trivia`, `legal-questions`, `allegro-faq` (leading space removed).
    pub domain: String,
    pub question: String,
}

/// Reads `in.tsv`. Every line is a question (output is line-aligned), so an empty line is an error.
pub fn read_questions(path: &Path) -> Result<Vec<PolevalQuestion>> {
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (line, l) in numbered_lines(&text) {
        let Some((domain, question)) = l.split_once('\t') else {
            return Err(FormatError::parse(
                path,
                line,
                "expected `<domain><TAB><question>`",
            ));
        };
        let domain = domain.trim();
        if domain.is_empty() || question.trim().is_empty() {
            return Err(FormatError::parse(path, line, "empty domain or question"));
        }
        out.push(PolevalQuestion {
            line,
            domain: domain.to_string(),
            question: question.to_string(),
        });
    }
    Ok(out)
}

/// Renders `out.tsv`: one line per question, ten tab-separated ids, most relevant first.
pub fn render_out(rankings: &[Vec<String>]) -> Result<String> {
    let mut s = String::new();
    for (i, ids) in rankings.iter().enumerate() {
        if ids.len() != PASSAGES_PER_LINE {
            return Err(FormatError::Invalid(format!(
                "line {}: {} passage ids, {PASSAGES_PER_LINE} required",
                i + 1,
                ids.len()
            )));
        }
        if let Some(bad) = ids
            .iter()
            .find(|id| id.is_empty() || id.chars().any(char::is_whitespace))
        {
            return Err(FormatError::Invalid(format!(
                "line {}: passage id {bad:?} is empty or has whitespace",
                i + 1
            )));
        }
        s.push_str(&ids.join("\t"));
        s.push('\n');
    }
    Ok(s)
}

/// Renders, validates (line alignment with `questions` when given) and writes atomically.
pub fn write_out(
    path: &Path,
    rankings: &[Vec<String>],
    questions: Option<&[PolevalQuestion]>,
    ctx: &ValidationContext,
) -> Result<()> {
    let text = render_out(rankings)?;
    let report = validate_out_text(&text, questions, ctx);
    report.check()?;
    atomic::write_atomic(path, text.as_bytes())
}

/// Validates `out.tsv` text: ten non-empty tab-separated ids per line, no id twice on a line,
/// ids in the collection, and exactly one line per `in.tsv` question.
pub fn validate_out_text(
    text: &str,
    questions: Option<&[PolevalQuestion]>,
    ctx: &ValidationContext,
) -> Report {
    let mut report = Report::default();
    let mut n = 0;
    for (line, l) in numbered_lines(text) {
        n = line;
        let ids: Vec<&str> = l.split('\t').collect();
        if ids.len() != PASSAGES_PER_LINE {
            report.error(
                line,
                format!(
                    "{} tab-separated columns, {PASSAGES_PER_LINE} required",
                    ids.len()
                ),
            );
        }
        let mut seen = HashSet::new();
        for (i, id) in ids.iter().enumerate() {
            if id.is_empty() || id.trim() != *id {
                report.error(
                    line,
                    format!("column {} is empty or has surrounding whitespace", i + 1),
                );
                continue;
            }
            if !seen.insert(*id) {
                report.error(line, format!("passage {id:?} appears twice"));
            }
            if !ctx.knows(id) {
                report.error(line, format!("passage {id:?} is not in the collection"));
            }
        }
    }
    if let Some(qs) = questions {
        if n != qs.len() {
            report.error(
                n.max(1),
                format!(
                    "{n} lines but in.tsv has {} questions (lines must align)",
                    qs.len()
                ),
            );
        }
    }
    report
}

/// Validates an `out.tsv` file.
pub fn validate_out_file(
    path: &Path,
    questions: Option<&[PolevalQuestion]>,
    ctx: &ValidationContext,
) -> Result<Report> {
    Ok(validate_out_text(&read_text(path)?, questions, ctx))
}
