//! TREC iKAT 2025 submissions: one JSON object per line and turn (JSONL),
//!
//! ```text
//! {"metadata": {"team_id", "run_id", "run_type"}, "turn_id": "<number>_<turn_id>",
//!  "references": {"<passage id>": score, ...},
//!  "responses": [{"text", "citations": {"<passage id>": score, ...}, "ptkb_provenance": [statement text, ...]}]}
//! ```
//!
//! as the organizers' checker (`validate_trec_ikat25.py`, reproduced by
//! [`super::ikat25_validate`]) reads it: `run_type` automatic, manual or generation-only, at most
//! 1000 references, every citation one of the references, at most 250 words over the responses
//! (`len(NFKC(text.strip()).split())` summed), PTKB provenance given as statement texts. The
//! passage ranking of a submission is its references by descending score
//! ([`trec_run_text`], as the organizers' `generate_run.py` converts it).

use std::path::Path;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::ikat::{IkatTopic, RunType};
use super::ikat25_validate::{check_text, to_report, Finding};
use super::{atomic, pyjson, FormatError, Result, Severity};

pub use super::ikat25_validate::{MAX_REFERENCES, MAX_RESPONSE_WORDS};

/// The 2025 run types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ikat25RunType {
    Automatic,
    Manual,
    /// Responses over a given ranking (2024's only_response).
    GenerationOnly,
}

impl From<RunType> for Ikat25RunType {
    fn from(t: RunType) -> Self {
        match t {
            RunType::Automatic => Ikat25RunType::Automatic,
            RunType::Manual => Ikat25RunType::Manual,
            RunType::OnlyResponse => Ikat25RunType::GenerationOnly,
        }
    }
}

/// The `metadata` of every line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ikat25Metadata {
    pub team_id: String,
    pub run_id: String,
    pub run_type: Ikat25RunType,
}

/// Passage id → score, written as a JSON object in this order (rank order).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScoredIds(pub Vec<(String, f64)>);

impl Serialize for ScoredIds {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (id, score) in &self.0 {
            map.serialize_entry(id, score)?;
        }
        map.end()
    }
}

/// One response of a turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ikat25Response {
    pub text: String,
    /// The references the response uses (each one of the turn's references).
    pub citations: ScoredIds,
    /// Texts of the PTKB statements the response relies on, most relevant first.
    pub ptkb_provenance: Vec<String>,
}

/// One line: a turn's references and responses.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ikat25Turn {
    pub metadata: Ikat25Metadata,
    pub turn_id: String,
    pub references: ScoredIds,
    pub responses: Vec<Ikat25Response>,
}

/// The submission as JSONL (Python `json.dumps` form, one line per turn).
pub fn render_jsonl(turns: &[Ikat25Turn]) -> Result<String> {
    let mut out = String::new();
    for t in turns {
        out.push_str(&pyjson::to_string(t)?);
        out.push('\n');
    }
    Ok(out)
}

/// Fails, naming the problems, when the organizers' checker would report an error in rendered
/// submission `text` or fix anything in it.
pub fn check_rendered(text: &str, topics: &[IkatTopic]) -> Result<()> {
    let refused: Vec<Finding> = check_text(text, topics)
        .into_iter()
        .filter(|f| f.kind.is_fix() || f.kind.severity() == Severity::Error)
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    // Fixes are warnings of the report: name every refused finding.
    let named: Vec<String> = to_report(&refused)
        .problems
        .iter()
        .take(5)
        .map(|p| format!("line {}: {}", p.line, p.message))
        .collect();
    let more = refused.len().saturating_sub(named.len());
    let more = if more > 0 {
        format!(" (and {more} more)")
    } else {
        String::new()
    };
    Err(FormatError::Invalid(format!("{}{more}", named.join("; "))))
}

/// Renders `turns`, checks them against `topics` ([`check_rendered`]) and writes the file
/// atomically.
pub fn write(path: &Path, turns: &[Ikat25Turn], topics: &[IkatTopic]) -> Result<()> {
    let text = render_jsonl(turns)?;
    check_rendered(&text, topics)?;
    atomic::write_atomic(path, text.as_bytes())
}

/// The passage ranking as a TREC run, line for line what the organizers' `generate_run.py`
/// writes for the submission: per turn, the references by descending score (equal scores in
/// listed order), `turn_id<TAB>Q0<TAB>id<TAB>rank<TAB>score (6 decimals)<TAB>run_id`.
pub fn trec_run_text(turns: &[Ikat25Turn]) -> String {
    let mut out = String::new();
    for t in turns {
        let mut refs: Vec<&(String, f64)> = t.references.0.iter().collect();
        // Stable: equal scores keep their order, as Python's sorted(reverse=True) does.
        refs.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (rank, (id, score)) in refs.into_iter().enumerate() {
            out.push_str(&format!(
                "{}\tQ0\t{id}\t{}\t{score:.6}\t{}\n",
                t.turn_id,
                rank + 1,
                t.metadata.run_id
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn() -> Ikat25Turn {
        Ikat25Turn {
            metadata: Ikat25Metadata {
                team_id: "convrag".into(),
                run_id: "r1".into(),
                run_type: RunType::OnlyResponse.into(),
            },
            turn_id: "1-1_2".into(),
            references: ScoredIds(vec![
                ("clueweb22-en0000-01-00001:0".into(), 2.5),
                ("clueweb22-en0000-01-00002:3".into(), 2.5),
                ("clueweb22-en0000-01-00003:1".into(), 3.0),
            ]),
            responses: vec![Ikat25Response {
                text: "Watermelon is fine.".into(),
                citations: ScoredIds(vec![("clueweb22-en0000-01-00001:0".into(), 2.5)]),
                ptkb_provenance: vec!["I enjoy kiwi.".into()],
            }],
        }
    }

    #[test]
    fn lines_keep_the_field_and_reference_order() {
        let text = render_jsonl(&[turn()]).unwrap();
        assert_eq!(
            text,
            "{\"metadata\": {\"team_id\": \"convrag\", \"run_id\": \"r1\", \"run_type\": \"generation-only\"}, \
             \"turn_id\": \"1-1_2\", \"references\": {\"clueweb22-en0000-01-00001:0\": 2.5, \
             \"clueweb22-en0000-01-00002:3\": 2.5, \"clueweb22-en0000-01-00003:1\": 3.0}, \
             \"responses\": [{\"text\": \"Watermelon is fine.\", \"citations\": \
             {\"clueweb22-en0000-01-00001:0\": 2.5}, \"ptkb_provenance\": [\"I enjoy kiwi.\"]}]}\n"
        );
    }

    #[test]
    fn a_line_the_checker_would_fix_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let mut long = turn();
        long.responses[0].text = vec!["word"; 251].join(" ");
        let e = write(&path, &[long], &[]).unwrap_err().to_string();
        assert!(e.contains("response_length=251 > 250"), "{e}");
        assert!(!path.exists());
        // A turn the topics do not have is an error of the checker too.
        let e = write(&path, &[turn()], &[]).unwrap_err().to_string();
        assert!(e.contains("Additional turn_id not in topics: 1-1_2"), "{e}");
        assert!(!path.exists());
    }

    #[test]
    fn trec_run_sorts_by_score_keeping_ties_in_order() {
        assert_eq!(
            trec_run_text(&[turn()]),
            "1-1_2\tQ0\tclueweb22-en0000-01-00003:1\t1\t3.000000\tr1\n\
             1-1_2\tQ0\tclueweb22-en0000-01-00001:0\t2\t2.500000\tr1\n\
             1-1_2\tQ0\tclueweb22-en0000-01-00002:3\t3\t2.500000\tr1\n"
        );
    }
}
