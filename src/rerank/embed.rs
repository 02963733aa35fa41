//! A collection's bi-encoder embeddings precomputed into the on-disk cache, so later reranking
//! encodes only queries. Resumable: already-cached passages are skipped.

use std::path::PathBuf;
use std::sync::Arc;

use super::{DiskEmbeddingCache, OnnxOptions, OnnxReranker, PassageRef, RerankError, Reranker};
use crate::index::{CollectionRegistry, IndexError, Retriever};
use crate::progress::Progress;
use crate::Config;

/// Errors of embedding a collection: the collection or the model.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(transparent)]
    Collection(#[from] IndexError),
    #[error(transparent)]
    Model(#[from] RerankError),
}

/// What to embed.
#[derive(Debug, Clone)]
pub struct EmbedOptions {
    /// Collection to embed (a name under the data directory's collections/).
    pub collection: String,
    /// Model directory (default: the configured default model).
    pub model: Option<PathBuf>,
    /// Passages read and encoded per step.
    pub chunk: usize,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedReport {
    pub passages: u64,
    /// Encoded by this run; the others were already cached.
    pub encoded: u64,
    pub model_id: String,
}

/// Encodes every passage of the collection not yet in the cache; reports passages read.
pub fn embed_collection(
    config: &Config,
    options: &EmbedOptions,
    progress: &dyn Progress,
) -> Result<EmbedReport, EmbedError> {
    let registry = CollectionRegistry::new(config.collections_dir());
    let retriever = registry.get(&options.collection)?;
    let model_dir = options
        .model
        .clone()
        .unwrap_or_else(|| config.default_model_dir());
    let cache = Arc::new(DiskEmbeddingCache::new(config.home.join("embeddings")));
    let model = OnnxReranker::open(
        &model_dir,
        &config.ort_library_path(),
        OnnxOptions::default(),
    )?
    .with_cache(cache);

    let total = retriever.num_passages();
    progress.set_length(total);
    let mut encoded = 0u64;
    // The passage walk speaks IndexError; the model's error is kept here with its source.
    let mut model_error = None;
    let walked = retriever.for_each_passage(options.chunk, |hits| {
        let texts: Vec<String> = hits.iter().map(|h| h.model_text()).collect();
        let passages: Vec<PassageRef<'_>> = hits
            .iter()
            .zip(&texts)
            .map(|(h, text)| PassageRef { id: &h.id, text })
            .collect();
        match model.precompute(&options.collection, &passages) {
            Ok(n) => encoded += n as u64,
            Err(e) => {
                let stop = IndexError::Invalid(e.to_string());
                model_error = Some(e);
                return Err(stop);
            }
        }
        progress.inc(hits.len() as u64);
        Ok(())
    });
    progress.finish();
    if let Some(e) = model_error {
        return Err(e.into());
    }
    walked?;
    Ok(EmbedReport {
        passages: total,
        encoded,
        model_id: model.model_id(),
    })
}
