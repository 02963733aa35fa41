//! Checking one file against its official format: the validator of each [`FormatName`], given
//! the topics and collection ids it may check against (`convrag validate` prints the report).

use std::path::{Path, PathBuf};

use clap::ValueEnum;

use super::validate::{read_id_list, Report, ValidationContext};
use super::{ikat, ikat25_validate, poleval, qrecc, read_text, trec_rag, trec_run};
use super::{FormatError, Result};

/// The output formats `convrag validate` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatName {
    /// TREC run (R task; TREC RAG 2024/2025): topics = TSV, JSONL or JSON topics.
    TrecRun,
    /// TREC RAG 2024 AG/RAG answers (JSONL, `.gz` accepted); topics = the TSV.
    Rag24,
    /// TREC RAG 2025 Format 1 (citations index `references`); topics = narratives file.
    Rag25F1,
    /// TREC RAG 2025 Format 2 (citations are segment ids).
    Rag25F2,
    /// iKAT run JSON; topics = iKAT topics JSON.
    Ikat,
    /// TREC run converted from an iKAT run (1000 per turn); topics = iKAT topics JSON.
    IkatTrecRun,
    /// iKAT 2025 submission (JSONL), as the organizers' `validate_trec_ikat25.py` checks it;
    /// topics (required) = iKAT topics JSON.
    Ikat25,
    /// SCAI-QReCC `run.json`; topics = `questions.json`.
    Qrecc,
    /// PolEval 2022 `out.tsv`; topics = the matching `in.tsv`.
    Poleval,
}

/// One file to check, and what to check it against.
#[derive(Debug, Clone)]
pub struct FileCheck {
    /// Format of `file`.
    pub format: FormatName,
    /// The file to check.
    pub file: PathBuf,
    /// Official topics/questions: enables topic coverage and topic-text checks.
    pub topics: Option<PathBuf>,
    /// Ids that exist in the collection (first column of each line): every cited id must be one.
    pub collection_ids: Option<PathBuf>,
    /// Most results per topic for TREC runs (default 100; 1000 for ikat-trec-run).
    pub max_per_topic: Option<usize>,
}

/// Runs the validator of `args.format` on `args.file`.
pub fn check_file(args: &FileCheck) -> Result<Report> {
    let ctx = ValidationContext {
        collection_ids: args
            .collection_ids
            .as_deref()
            .map(read_id_list)
            .transpose()?,
    };
    let topics = args.topics.as_deref();
    let file = args.file.as_path();
    Ok(match args.format {
        FormatName::TrecRun => {
            let ids = topics
                .map(|t| {
                    trec_rag::read_rag25_topics(t).map(|ts| ts.into_iter().map(|t| t.id).collect())
                })
                .transpose()?;
            trec_run_report(file, args.max_per_topic.unwrap_or(100), ids, &ctx)?
        }
        FormatName::IkatTrecRun => {
            let ids = topics
                .map(|t| {
                    ikat::read_topics(t).map(|ts| {
                        ts.iter()
                            .flat_map(|t| t.turns.iter().map(|u| t.turn_key(u)))
                            .collect()
                    })
                })
                .transpose()?;
            trec_run_report(
                file,
                args.max_per_topic.unwrap_or(ikat::MAX_PROVENANCE),
                ids,
                &ctx,
            )?
        }
        FormatName::Rag24 => {
            let ts = topics.map(trec_rag::read_topics_tsv).transpose()?;
            trec_rag::validate_answers_file(
                file,
                trec_rag::AnswerFormat::Rag24,
                ts.as_deref(),
                &ctx,
            )?
        }
        FormatName::Rag25F1 | FormatName::Rag25F2 => {
            let ts = topics.map(trec_rag::read_rag25_topics).transpose()?;
            let f = if args.format == FormatName::Rag25F1 {
                trec_rag::AnswerFormat::Rag25Format1
            } else {
                trec_rag::AnswerFormat::Rag25Format2
            };
            trec_rag::validate_answers_file(file, f, ts.as_deref(), &ctx)?
        }
        FormatName::Ikat => {
            let ts = topics.map(ikat::read_topics).transpose()?;
            ikat::validate_run_file(file, ts.as_deref(), &ctx)?
        }
        FormatName::Ikat25 => {
            let topics = topics.ok_or_else(|| {
                FormatError::Invalid("the ikat25 check needs the topics (--topics)".into())
            })?;
            let topics = ikat::read_topics(topics)?;
            let findings = ikat25_validate::check_text(&read_text(file)?, &topics);
            ikat25_validate::to_report(&findings)
        }
        FormatName::Qrecc => {
            let qs = topics.map(qrecc::read_questions).transpose()?;
            qrecc::validate_run_file(file, qs.as_deref(), &ctx)?
        }
        FormatName::Poleval => {
            let qs = topics.map(poleval::read_questions).transpose()?;
            poleval::validate_out_file(file, qs.as_deref(), &ctx)?
        }
    })
}

fn trec_run_report(
    file: &Path,
    max: usize,
    topics: Option<Vec<String>>,
    ctx: &ValidationContext,
) -> Result<Report> {
    let rules = trec_run::RunRules {
        max_per_topic: max,
        topics,
    };
    trec_run::validate_file(file, &rules, ctx)
}
