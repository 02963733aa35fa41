//! TREC RAG answer records (2024; 2025 Format 1, its checker layout, and Format 2) and their
//! writer, which refuses what the validator refuses.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::validate_answers::validate_answers_text;
use super::{AnswerFormat, Topic};
use crate::formats::validate::ValidationContext;
use crate::formats::{atomic, pyjson, words, FormatError, Result};

/// One answer sentence with citations as zero-based indices into `references`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sentence {
    pub text: String,
    pub citations: Vec<usize>,
}

/// One answer sentence of 2025 Format 2: citations are segment ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentenceIds {
    pub text: String,
    pub citations: Vec<String>,
}

/// One line of a TREC RAG 2024 AG/RAG output file, fields in the guidelines' order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag24Answer {
    pub run_id: String,
    pub topic_id: String,
    pub topic: String,
    pub references: Vec<String>,
    pub response_length: usize,
    pub answer: Vec<Sentence>,
}

impl Rag24Answer {
    /// Builds an answer, computing `response_length` the way the organizers count words.
    pub fn new(
        run_id: &str,
        topic: &Topic,
        references: Vec<String>,
        answer: Vec<Sentence>,
    ) -> Self {
        let response_length =
            words::trec_rag_response_length(answer.iter().map(|s| s.text.as_str()));
        Rag24Answer {
            run_id: run_id.to_string(),
            topic_id: topic.id.clone(),
            topic: topic.text.clone(),
            references,
            response_length,
            answer,
        }
    }
}

/// `metadata` of a 2025 answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag25Metadata {
    pub team_id: String,
    pub run_id: String,
    /// `automatic` or `manual`.
    #[serde(rename = "type")]
    pub run_type: String,
}

/// One line of a TREC RAG 2025 Format 1 file (citations are indices into `references`, each
/// sentence's citations sorted from highest to lowest support).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag25Answer {
    pub metadata: Rag25Metadata,
    pub narrative_id: String,
    pub narrative: String,
    pub references: Vec<String>,
    pub response_length: usize,
    pub answer: Vec<Sentence>,
}

/// One line of a TREC RAG 2025 Format 2 file (citations are segment ids; no `references`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag25AnswerIds {
    pub metadata: Rag25Metadata,
    pub narrative_id: String,
    pub narrative: String,
    pub response_length: usize,
    pub answer: Vec<SentenceIds>,
}

/// `metadata` in the layout of the organizers' 2025 tooling (Ragnarök's
/// `convert_to_trec25_format.py` output, required by `check_trec_rag25_gen.py`): the
/// narrative id and text move into `metadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag25CheckerMetadata {
    pub team_id: String,
    pub run_id: String,
    #[serde(rename = "type")]
    pub run_type: String,
    pub narrative_id: String,
    pub narrative: String,
}

/// A Format 1 answer in the organizers' checker layout (see [`Rag25CheckerMetadata`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rag25AnswerCheckerLayout {
    pub metadata: Rag25CheckerMetadata,
    pub references: Vec<String>,
    pub response_length: usize,
    pub answer: Vec<Sentence>,
}

/// Orders citations from highest to lowest support (ties keep their given order; NaN last), as
/// 2025 asks: "sorted from highest to lowest citation support".
pub fn sort_by_support<T>(cited: Vec<(T, f64)>) -> Vec<T> {
    let mut cited = cited;
    cited.sort_by(|a, b| {
        let ka = if a.1.is_nan() { f64::NEG_INFINITY } else { a.1 };
        let kb = if b.1.is_nan() { f64::NEG_INFINITY } else { b.1 };
        kb.total_cmp(&ka)
    });
    cited.into_iter().map(|(c, _)| c).collect()
}

impl Rag25Answer {
    /// Builds a Format 1 answer; each sentence's citations come with their support and are
    /// sorted by it.
    pub fn new(
        metadata: Rag25Metadata,
        topic: &Topic,
        references: Vec<String>,
        sentences: Vec<(String, Vec<(usize, f64)>)>,
    ) -> Self {
        let answer: Vec<Sentence> = sentences
            .into_iter()
            .map(|(text, cites)| Sentence {
                text,
                citations: sort_by_support(cites),
            })
            .collect();
        Rag25Answer {
            metadata,
            narrative_id: topic.id.clone(),
            narrative: topic.text.clone(),
            references,
            response_length: words::trec_rag_response_length(
                answer.iter().map(|s| s.text.as_str()),
            ),
            answer,
        }
    }

    /// The same answer in the organizers' checker layout. The guidelines put `narrative_id`
    /// and `narrative` at the top level, but the official 2025 checker rejects a line whose
    /// `metadata` lacks `narrative_id`; this layout satisfies both readers of the file.
    pub fn to_checker_layout(&self) -> Rag25AnswerCheckerLayout {
        Rag25AnswerCheckerLayout {
            metadata: Rag25CheckerMetadata {
                team_id: self.metadata.team_id.clone(),
                run_id: self.metadata.run_id.clone(),
                run_type: self.metadata.run_type.clone(),
                narrative_id: self.narrative_id.clone(),
                narrative: self.narrative.clone(),
            },
            references: self.references.clone(),
            response_length: self.response_length,
            answer: self.answer.clone(),
        }
    }

    /// The same answer in Format 2 (citation indices replaced by segment ids).
    pub fn to_format2(&self) -> Result<Rag25AnswerIds> {
        let answer = self
            .answer
            .iter()
            .map(|s| {
                let citations = s
                    .citations
                    .iter()
                    .map(|&i| {
                        self.references.get(i).cloned().ok_or_else(|| {
                            FormatError::Invalid(format!(
                                "citation {i} outside references ({})",
                                self.references.len()
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(SentenceIds {
                    text: s.text.clone(),
                    citations,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Rag25AnswerIds {
            metadata: self.metadata.clone(),
            narrative_id: self.narrative_id.clone(),
            narrative: self.narrative.clone(),
            response_length: self.response_length,
            answer,
        })
    }
}

/// Renders answer records as JSONL (one `json.dumps` line each).
pub fn render_jsonl<T: Serialize>(records: &[T]) -> Result<String> {
    let mut out = String::new();
    for r in records {
        out.push_str(&pyjson::to_string(r)?);
        out.push('\n');
    }
    Ok(out)
}

/// Renders, validates (against `topics` when given) and atomically writes an answer file.
/// Refuses to write when the validator finds an error.
pub fn write_answers<T: Serialize>(
    path: &Path,
    records: &[T],
    format: AnswerFormat,
    topics: Option<&[Topic]>,
    ctx: &ValidationContext,
) -> Result<()> {
    let text = render_jsonl(records)?;
    let report = validate_answers_text(&text, format, topics, ctx);
    report.check()?;
    atomic::write_atomic(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn support_order_is_descending_and_stable() {
        assert_eq!(
            sort_by_support(vec![(3, 0.2), (1, 0.9), (7, 0.2), (2, f64::NAN)]),
            vec![1, 3, 7, 2]
        );
    }

    #[test]
    fn format2_maps_indices_to_ids() {
        let topic = Topic {
            line: 1,
            id: "1".into(),
            text: "n".into(),
        };
        let md = Rag25Metadata {
            team_id: "t".into(),
            run_id: "r".into(),
            run_type: "automatic".into(),
        };
        let a = Rag25Answer::new(
            md,
            &topic,
            vec!["a".into(), "b".into()],
            vec![("One two.".into(), vec![(0, 0.1), (1, 0.8)])],
        );
        assert_eq!(a.answer[0].citations, vec![1, 0]);
        assert_eq!(a.response_length, 2);
        let f2 = a.to_format2().unwrap();
        assert_eq!(
            f2.answer[0].citations,
            vec!["b".to_string(), "a".to_string()]
        );
    }
}
