//! A collection's bi-encoder embeddings precomputed into its vector file ([`super::vectors`]), so
//! later reranking encodes only queries. Resumable: a run starts at the first ordinal not written.

use std::path::PathBuf;

use super::{DiskEmbeddingCache, OnnxOptions, OnnxReranker, RerankError, Reranker};
use crate::index::{embedding_key, CollectionRegistry, IndexError, Retriever};
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
    /// Encoded by this run; the others were already in the vector file.
    pub encoded: u64,
    pub model_id: String,
}

/// Encodes every passage of the collection into its vector file, in ordinal order from the
/// first ordinal not yet written (an interrupted run resumes there); reports passages read.
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
    let model = OnnxReranker::open(
        &model_dir,
        &config.ort_library_path(),
        OnnxOptions::default(),
    )?;
    let cache = DiskEmbeddingCache::new(config.home.join("embeddings"));
    let key = embedding_key(&options.collection, retriever.as_ref());
    // The model's dimension, for the file's header.
    let dim = model
        .embed(&["dimension"])?
        .first()
        .map(Vec::len)
        .unwrap_or_default();
    let mut writer = cache.vector_writer(model.model_sha256(), &key, dim)?;
    let start = writer.len();

    let total = retriever.num_passages();
    progress.set_length(total);
    let mut encoded = 0u64;
    // The passage walk speaks IndexError; the model's error is kept here with its source.
    let mut model_error = None;
    let walked = retriever.for_each_passage_from(start, options.chunk, |hits| {
        let texts: Vec<String> = hits.iter().map(|h| h.model_text()).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let written = model.embed(&refs).and_then(|vectors| {
            let records: Vec<(u64, &str, &[f32])> = hits
                .iter()
                .zip(&vectors)
                .filter_map(|(h, v)| h.ordinal.map(|ord| (ord, h.id.as_str(), v.as_slice())))
                .collect();
            writer.append(&records)
        });
        if let Err(e) = written {
            let stop = IndexError::Invalid(e.to_string());
            model_error = Some(e);
            return Err(stop);
        }
        encoded += hits.len() as u64;
        progress.inc(hits.len() as u64);
        Ok(())
    });
    progress.finish();
    if let Some(e) = model_error {
        return Err(e.into());
    }
    walked?;
    writer.sync()?;
    Ok(EmbedReport {
        passages: total,
        encoded,
        model_id: model.model_id(),
    })
}
