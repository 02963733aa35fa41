//! How close in meaning a reader's candidate sentences are to the turn's query: the cosine of
//! their bi-encoder vectors with the query vector the reranker already computed
//! ([`QueryVectors`]), which the extractive generator blends into a sentence's relevance
//! ([`crate::pipeline::generate::ExtractiveConfig::meaning_weight`]). Turns and
//! `convrag tune extractive --meaning` both call [`sentence_meaning`].

use crate::pipeline::generate::SentenceMeaning;
use crate::rerank::{PassageRef, QueryVectors, Reranker, Result};

/// The cosine of each distinct sentence of `sentences` with `query`'s vector, by `model`
/// (`vectors` must be its own: a query encoded by another model, or none, gives `None`, as does
/// a model without vectors or no sentence).
pub fn sentence_meaning(
    model: &dyn Reranker,
    vectors: &QueryVectors,
    query: &str,
    mut sentences: Vec<String>,
) -> Result<Option<SentenceMeaning>> {
    if sentences.is_empty() || !vectors.encodes_for(model) {
        return Ok(None);
    }
    let Some(query) = vectors.get(&[query])?.pop() else {
        return Ok(None);
    };
    sentences.sort_unstable();
    sentences.dedup();
    let refs: Vec<PassageRef<'_>> = sentences
        .iter()
        .map(|s| PassageRef {
            id: s,
            text: s,
            ordinal: None,
        })
        .collect();
    // No collection: a sentence has no stable identity to cache its vector under.
    let Some(cosines) = model.rerank_embedded(&query, &refs, None)? else {
        return Ok(None);
    };
    Ok(Some(sentences.into_iter().zip(cosines).collect()))
}
