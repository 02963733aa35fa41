//! First-stage dense retrieval: a collection's passage vectors precomputed by the bi-encoder of
//! [`crate::rerank`], searched exactly or through a nearest-neighbour graph, and fused with BM25.
//!
//! - [`vectors`] holds the memory-mapped vector files (by passage ordinal), [`cache`] the
//!   [`DiskEmbeddingCache`] that reads them before the reranker's embedding log, [`embed`] fills
//!   them and [`vector_sums`] checksums complete ones.
//! - [`ann`] holds the nearest-neighbour indexes over the vectors, a file per kind; [`graph`]
//!   builds, persists and loads the HNSW graph dense retrieval serves for large collections.
//! - [`search`] is the first stage itself: [`DenseRetriever`], [`FirstStage`] and the
//!   [`VectorSearch`] that opens it for a collection.

pub mod ann;
pub mod cache;
pub mod embed;
pub mod graph;
pub mod search;
pub mod vector_sums;
pub mod vectors;

pub use cache::DiskEmbeddingCache;
pub use search::{
    load_default, load_default_search, rrf, DenseError, DenseRetriever, FirstStage, FirstStageHit,
    HybridOptions, Retrieval, SourceRanks, VectorSearch,
};

/// Errors of embedding a collection: the collection or the model.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(transparent)]
    Collection(#[from] crate::index::IndexError),
    #[error(transparent)]
    Model(#[from] crate::rerank::RerankError),
}
