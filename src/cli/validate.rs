//! `convrag validate FORMAT FILE [--topics FILE] [--collection-ids FILE]`: one line per problem
//! (`FILE:LINE: error|warning: message`), non-zero exit when there is an error (or, with
//! `--strict`, any problem).

use std::path::PathBuf;

use clap::Args;
use convrag::formats::check::{check_file, FileCheck, FormatName};

#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    /// Format of FILE.
    #[arg(value_enum)]
    pub format: FormatName,
    /// The file to check.
    pub file: PathBuf,
    /// Official topics/questions: enables topic coverage and topic-text checks (required for
    /// ikat25).
    #[arg(long, value_name = "FILE", required_if_eq("format", "ikat25"))]
    pub topics: Option<PathBuf>,
    /// Ids that exist in the collection (first column of each line): every cited id must be one.
    #[arg(long, value_name = "FILE")]
    pub collection_ids: Option<PathBuf>,
    /// Most results per topic for TREC runs (default 100; 1000 for ikat-trec-run).
    #[arg(long, value_name = "N")]
    pub max_per_topic: Option<usize>,
    /// Fail on warnings too.
    #[arg(long)]
    pub strict: bool,
}

/// Validates FILE, prints the problems, and fails when the file is not acceptable.
pub fn run(args: ValidateArgs) -> anyhow::Result<()> {
    let check = FileCheck {
        format: args.format,
        file: args.file,
        topics: args.topics,
        collection_ids: args.collection_ids,
        max_per_topic: args.max_per_topic,
    };
    let report = check_file(&check)?.sorted();
    print!("{}", report.display(&check.file));
    let errors = report.errors().count();
    let warnings = report.problems.len() - errors;
    if errors > 0 || (args.strict && warnings > 0) {
        anyhow::bail!(
            "{}: {errors} error(s), {warnings} warning(s)",
            check.file.display()
        );
    }
    eprintln!("{}: valid ({warnings} warning(s))", check.file.display());
    Ok(())
}
