//! Neural reranking: ONNX models (bi-encoders and cross-encoders) run through ONNX Runtime (`ort`)
//! with Hugging Face `tokenizers`, an embedding cache for bi-encoder passages, and fusion with BM25.
//!
//! - [`Reranker`] is what the search pipeline, PTKB statement ranking and batch runs call.
//! - [`OnnxReranker`] implements it for both model kinds declared by a model directory's
//!   `manifest.json` ([`ModelManifest`]).
//! - [`EmbeddingCache`] stores bi-encoder passage embeddings keyed by (collection, passage id, model
//!   checksum): [`MemoryEmbeddingCache`] and the persistent [`EmbeddingLog`], which
//!   [`crate::dense::DiskEmbeddingCache`] reads after a collection's precomputed vectors.
//! - [`Fusion`] combines first-stage (BM25) and neural scores.
//! - [`candidates`] reads TREC DL and TREC RAG candidate files and reranks each query's.
//!
//! First-stage dense retrieval over the bi-encoder's precomputed passage vectors is
//! [`crate::dense`]'s.

pub mod cache;
pub mod candidates;
pub mod default_model;
pub mod files;
pub mod fusion;
pub mod manifest;
pub mod onnx;
pub mod query;
pub mod runtime;

use std::path::PathBuf;
use std::sync::Arc;

pub use cache::{EmbeddingCache, EmbeddingLog, MemoryEmbeddingCache};
pub use default_model::open_default;
pub use fusion::Fusion;
pub use manifest::{ModelKind, ModelManifest, Pooling};
pub use onnx::{open_model, InferenceStats, OnnxOptions, OnnxReranker};
pub use query::QueryVectors;

/// Errors of the reranking area.
#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    /// The ONNX Runtime shared library is missing, not a library, or refused by `ort`.
    #[error("ONNX Runtime library {path}: {reason}")]
    Library { path: PathBuf, reason: String },
    /// A model directory, its manifest, tokenizer or ONNX file is missing or malformed.
    #[error("model {path}: {reason}")]
    Model { path: PathBuf, reason: String },
    /// Bad input file content, with its 1-based line.
    #[error("{path}:{line}: {reason}")]
    Input {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("embedding cache {path}: {reason}")]
    Cache { path: PathBuf, reason: String },
    #[error("tokenization failed: {0}")]
    Tokenize(#[source] tokenizers::Error),
    #[error("inference failed: {0}")]
    Inference(String),
    #[error("invalid fusion {0:?}: expected none, rrf, rrf:K (K > 0) or weighted:W (0 <= W <= 1, the BM25 weight)")]
    Fusion(String),
    #[error("inference task failed: {0}")]
    Join(#[source] tokio::task::JoinError),
}

pub type Result<T, E = RerankError> = std::result::Result<T, E>;

/// One text to score against a query: a passage of a collection, or a PTKB statement.
#[derive(Debug, Clone, Copy)]
pub struct PassageRef<'a> {
    /// Stable identifier within `collection` (docid, segment id, statement id).
    pub id: &'a str,
    pub text: &'a str,
    /// The passage's ordinal in its collection's index ([`crate::index::Hit::ordinal`]): where
    /// its precomputed vector is. `None` for texts that are not passages of an index.
    pub ordinal: Option<u64>,
}

/// Scores texts against a query. Implementations are shareable across threads (`&self`), so
/// concurrent requests run in parallel up to the implementation's session pool.
pub trait Reranker: Send + Sync {
    /// One score per passage, in the order given; higher means more relevant.
    ///
    /// `collection` names where the passages come from: bi-encoders cache passage embeddings under
    /// (collection, passage id, model). Pass `None` for texts without stable identity (PTKB
    /// statements that may be edited, ad-hoc texts): they are encoded every time.
    fn rerank(
        &self,
        query: &str,
        passages: &[PassageRef<'_>],
        collection: Option<&str>,
    ) -> Result<Vec<f32>>;

    /// Identifies the model (name and checksum), e.g. for run tags and stored turns.
    fn model_id(&self) -> String;

    /// Whether [`Reranker::embed_queries`] gives vectors (a bi-encoder) rather than `None`.
    fn embeds(&self) -> bool {
        false
    }

    /// A bi-encoder's embeddings of query texts, one per text; `None` from a model that scores
    /// pairs (a cross-encoder has no query vector).
    fn embed_queries(&self, _texts: &[&str]) -> Result<Option<Vec<Vec<f32>>>> {
        Ok(None)
    }

    /// [`Reranker::rerank`] with the query already embedded by [`Reranker::embed_queries`]
    /// (`None`: this model cannot).
    fn rerank_embedded(
        &self,
        _query: &[f32],
        _passages: &[PassageRef<'_>],
        _collection: Option<&str>,
    ) -> Result<Option<EmbeddedScores>> {
        Ok(None)
    }
}

/// What [`Reranker::rerank_embedded`] scored: one score per passage, in order, and how many of
/// the passages the model encoded (the others' vectors came from its cache).
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedScores {
    pub scores: Vec<f32>,
    pub encoded: usize,
}

/// Owned passage, for moving work onto a blocking thread.
#[derive(Debug, Clone)]
pub struct OwnedPassage {
    pub id: String,
    pub text: String,
    pub ordinal: Option<u64>,
}

/// Runs [`Reranker::rerank`] on tokio's blocking pool, so inference never occupies an async worker
/// thread (actix handlers and the turn pipeline call this).
pub async fn rerank_blocking(
    reranker: Arc<dyn Reranker>,
    query: String,
    passages: Vec<OwnedPassage>,
    collection: Option<String>,
) -> Result<Vec<f32>> {
    rerank_blocking_with(reranker, query, passages, collection, None).await
}

/// [`rerank_blocking`] taking the query's vector from `vectors` (a turn's, encoded once) when
/// they are the same bi-encoder's.
pub async fn rerank_blocking_with(
    reranker: Arc<dyn Reranker>,
    query: String,
    passages: Vec<OwnedPassage>,
    collection: Option<String>,
    vectors: Option<Arc<QueryVectors>>,
) -> Result<Vec<f32>> {
    tokio::task::spawn_blocking(move || {
        let refs: Vec<PassageRef<'_>> = passages
            .iter()
            .map(|p| PassageRef {
                id: &p.id,
                text: &p.text,
                ordinal: p.ordinal,
            })
            .collect();
        let collection = collection.as_deref();
        if let Some(vectors) = vectors.filter(|v| v.encodes_for(reranker.as_ref())) {
            if let Some(query) = vectors.get(&[query.as_str()])?.pop() {
                if let Some(scored) = reranker.rerank_embedded(&query, &refs, collection)? {
                    return Ok(scored.scores);
                }
            }
        }
        reranker.rerank(&query, &refs, collection)
    })
    .await
    .map_err(RerankError::Join)?
}

/// Sorts candidate indices by descending score, ties broken by the original order (stable).
pub fn order_by_score(scores: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_descending_and_stable() {
        assert_eq!(order_by_score(&[0.1, 0.5, 0.5, -1.0]), vec![1, 2, 0, 3]);
    }
}
