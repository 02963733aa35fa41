//! How close in meaning a reader's candidate sentences are to the turn's query: the cosine of
//! their bi-encoder vectors with the query vector the reranker already computed
//! ([`QueryVectors`]), which the extractive generator blends into a sentence's relevance
//! ([`crate::pipeline::generate::ExtractiveConfig::meaning_weight`]). Turns and
//! `convrag tune extractive --meaning` both call [`sentence_meaning`].

use sha2::{Digest, Sha256};

use crate::pipeline::generate::SentenceMeaning;
use crate::rerank::{PassageRef, QueryVectors, Reranker, Result};

/// The sentences' closeness in meaning, and how many of them the model encoded (the others'
/// vectors were cached).
#[derive(Debug, Clone, PartialEq)]
pub struct WeighedSentences {
    pub meaning: SentenceMeaning,
    pub encoded: usize,
}

/// Where the vectors of `collection`'s sentences are cached: by name alone, not by index
/// layout as passage vectors are, since a sentence is addressed by its text, which a rebuilt
/// index does not change.
pub fn sentence_cache_key(collection: &str) -> String {
    format!("{collection}.sentences")
}

/// The cosine of each distinct sentence of `sentences` with `query`'s vector, by `model`
/// (`vectors` must be its own: a query encoded by another model, or none, gives `None`, as does
/// a model without vectors or no sentence). With `cache` (a [`sentence_cache_key`]) a sentence
/// is encoded once and its vector kept under the SHA-256 of its text, so a passage shown again
/// costs nothing.
pub fn sentence_meaning(
    model: &dyn Reranker,
    vectors: &QueryVectors,
    query: &str,
    mut sentences: Vec<String>,
    cache: Option<&str>,
) -> Result<Option<WeighedSentences>> {
    if sentences.is_empty() || !vectors.encodes_for(model) {
        return Ok(None);
    }
    let Some(query) = vectors.get(&[query])?.pop() else {
        return Ok(None);
    };
    sentences.sort_unstable();
    sentences.dedup();
    // The text is the identity: the same sentence in another passage, or after a re-index, is
    // the same vector.
    let ids: Vec<String> = sentences
        .iter()
        .map(|s| hex::encode(Sha256::digest(s.as_bytes())))
        .collect();
    let refs: Vec<PassageRef<'_>> = sentences
        .iter()
        .zip(&ids)
        .map(|(text, id)| PassageRef {
            id,
            text,
            ordinal: None,
        })
        .collect();
    let Some(scored) = model.rerank_embedded(&query, &refs, cache)? else {
        return Ok(None);
    };
    Ok(Some(WeighedSentences {
        meaning: sentences.into_iter().zip(scored.scores).collect(),
        encoded: scored.encoded,
    }))
}
