//! `convrag search --topics`: each topic of a query file ([`crate::formats::topics`]) searched,
//! a TREC run out.

use std::path::Path;

use rayon::prelude::*;

use super::{Hit, Retriever, SearchOptions, WeightedQuery};
use super::{IndexError, Result};
use crate::formats::topics::Topic;
use crate::formats::trec_run::{self, RankedLine, ScoreFormat};

/// Runs every topic and writes a TREC run (`qid Q0 docid rank score tag`) atomically; returns
/// the number of lines written.
pub fn write_run(
    retriever: &dyn Retriever,
    topics: &[Topic],
    options: &SearchOptions,
    run_tag: &str,
    output: &Path,
) -> Result<usize> {
    write_run_with(topics, run_tag, output, |t| {
        retriever.search_with(&WeightedQuery::text(&t.text), options)
    })
}

/// [`write_run`] with any search: `search` gives each topic's ranked hits (called in parallel).
pub fn write_run_with<E, F>(
    topics: &[Topic],
    run_tag: &str,
    output: &Path,
    search: F,
) -> std::result::Result<usize, E>
where
    E: From<IndexError> + Send,
    F: Fn(&Topic) -> std::result::Result<Vec<Hit>, E> + Sync + Send,
{
    if run_tag.is_empty() || run_tag.chars().any(char::is_whitespace) {
        return Err(IndexError::Invalid(format!(
            "run tag {run_tag:?} must be non-empty without spaces"
        ))
        .into());
    }
    let results: Vec<Vec<Hit>> = topics
        .par_iter()
        .map(search)
        .collect::<std::result::Result<_, E>>()?;
    let lines: Vec<RankedLine<'_>> = topics
        .iter()
        .zip(&results)
        .flat_map(|(t, hits)| {
            hits.iter().enumerate().map(|(rank, h)| RankedLine {
                topic_id: &t.id,
                docid: &h.id,
                rank: rank + 1,
                score: f64::from(h.score),
            })
        })
        .collect();
    trec_run::write_ranked(
        output,
        run_tag,
        ScoreFormat::Fixed(6),
        lines.iter().copied(),
    )
    .map_err(IndexError::from)?;
    Ok(lines.len())
}
