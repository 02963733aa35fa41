//! Validation reports shared by every format: one [`Problem`] per violated rule, with the
//! 1-based line it concerns (the JSONL line, the TSV line, or a best-effort line for whole
//! JSON documents), printed as `FILE:LINE: error: message`.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use super::{read_text, FormatError, Result};

/// How serious a problem is. Errors break a rule of the guidelines (or one the organizers'
/// checkers reject); warnings are what the organizers' checkers only warn about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

/// One violated rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line; 0 when the problem concerns the whole file.
    pub line: usize,
    pub severity: Severity,
    pub message: String,
}

impl Problem {
    pub fn error(line: usize, message: impl Into<String>) -> Self {
        Problem {
            line,
            severity: Severity::Error,
            message: message.into(),
        }
    }

    pub fn warning(line: usize, message: impl Into<String>) -> Self {
        Problem {
            line,
            severity: Severity::Warning,
            message: message.into(),
        }
    }
}

/// All problems found in one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub problems: Vec<Problem>,
}

impl Report {
    pub fn error(&mut self, line: usize, message: impl Into<String>) {
        self.problems.push(Problem::error(line, message));
    }

    pub fn warning(&mut self, line: usize, message: impl Into<String>) {
        self.problems.push(Problem::warning(line, message));
    }

    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
    }

    pub fn has_errors(&self) -> bool {
        self.errors().next().is_some()
    }

    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    /// Sorted by line (stable), ready to print.
    pub fn sorted(mut self) -> Self {
        self.problems.sort_by_key(|p| p.line);
        self
    }

    /// The report as `FILE:LINE: severity: message` lines.
    pub fn display<'a>(&'a self, file: &'a Path) -> impl fmt::Display + 'a {
        DisplayReport { report: self, file }
    }

    /// Fails a write: [`FormatError::Invalid`] with the summary when any problem is an error.
    pub fn check(&self) -> Result<()> {
        if self.has_errors() {
            return Err(FormatError::Invalid(self.error_summary()));
        }
        Ok(())
    }

    /// A one-line summary of the errors, for failing a write.
    pub fn error_summary(&self) -> String {
        let errors: Vec<String> = self
            .errors()
            .take(5)
            .map(|p| format!("line {}: {}", p.line, p.message))
            .collect();
        let n = self.errors().count();
        let more = if n > 5 {
            format!(" (and {} more)", n - 5)
        } else {
            String::new()
        };
        format!("{}{more}", errors.join("; "))
    }
}

struct DisplayReport<'a> {
    report: &'a Report,
    file: &'a Path,
}

impl fmt::Display for DisplayReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.report.problems {
            let sev = match p.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            writeln!(
                f,
                "{}:{}: {sev}: {}",
                self.file.display(),
                p.line,
                p.message
            )?;
        }
        Ok(())
    }
}

/// What a validator may check the run against.
#[derive(Debug, Clone, Default)]
pub struct ValidationContext {
    /// Ids that exist in the collection; when given, every cited id must be one of them.
    pub collection_ids: Option<HashSet<String>>,
}

impl ValidationContext {
    pub fn knows(&self, id: &str) -> bool {
        self.collection_ids
            .as_ref()
            .is_none_or(|ids| ids.contains(id))
    }
}

/// Reads an id list: the first whitespace-separated field of each non-empty line (so a plain
/// list or a TSV with the id in its first column both work).
pub fn read_id_list(path: &Path) -> Result<HashSet<String>> {
    let text = read_text(path)?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}
