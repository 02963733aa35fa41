//! The configured default model, loaded once per process: it reranks, ranks PTKB statements and,
//! with the embedding cache its passage vectors are in, serves dense and hybrid retrieval.

use std::sync::Arc;

use super::dense::VectorSearch;
use super::{DiskEmbeddingCache, Reranker};

/// The configured default reranking model with its on-disk embedding cache, when installed. A
/// missing model is normal (BM25 only); a broken one is logged and the caller runs without it.
pub fn load_default(config: &crate::Config) -> Option<Arc<dyn Reranker>> {
    load_default_search(config).map(|search| search.reranker())
}

/// [`load_default`] as a [`VectorSearch`]: the same model, which also opens collections' passage
/// vectors for dense retrieval.
pub fn load_default_search(config: &crate::Config) -> Option<VectorSearch> {
    let dir = config.default_model_dir();
    if !dir.join("manifest.json").exists() {
        tracing::info!(dir = %dir.display(), "no reranking model installed (scripts/fetch-models.sh installs one); searches are BM25 only");
        return None;
    }
    match super::open_model(config, Some(&dir)) {
        Ok(model) => {
            let cache = Arc::new(DiskEmbeddingCache::for_config(config));
            tracing::info!(model = %model.model_id(), "reranking model loaded");
            let model = Arc::new(model.with_cache(cache.clone()));
            Some(VectorSearch::new(model, cache))
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot load the reranking model; searches are BM25 only");
            None
        }
    }
}
