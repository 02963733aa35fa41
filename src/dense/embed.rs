//! A collection's bi-encoder embeddings precomputed into its vector file ([`super::vectors`]), so
//! later reranking encodes only queries. Resumable: a run starts at the first ordinal not written.

use std::path::PathBuf;

use super::graph::{ensure_graph, GraphOutcome, VectorsBuilt};
use super::vector_sums::{collection_digest, record_complete, remove_sums, VectorOrigin};
use super::{DiskEmbeddingCache, EmbedError};
use crate::index::{
    embedding_key, CollectionRegistry, Hit, IndexError, Retriever, TantivyRetriever,
};
use crate::progress::Progress;
use crate::rerank::{OnnxReranker, RerankError, Reranker};
use crate::Config;

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
    let model = crate::rerank::open_model(config, options.model.as_deref())?;
    let model_id = model.model_id();
    let vector_model = VectorModel {
        id: &model_id,
        sha256: model.model_sha256(),
        // The model's dimension, for the file's header.
        dim: model.embedding_dim()?,
    };
    let (passages, encoded) = write_collection_vectors(
        config,
        &options.collection,
        vector_model,
        options.chunk,
        progress,
        &mut |hits| encode_passages(&model, hits),
    )?;
    Ok(EmbedReport {
        passages,
        encoded,
        model_id,
    })
}

/// The bi-encoder a vector file is of: its checksum names the file, its id and dimension are
/// recorded in the file's sums ([`super::vector_sums`]).
#[derive(Debug, Clone, Copy)]
pub struct VectorModel<'a> {
    /// `name@checksum prefix` ([`Reranker::model_id`]).
    pub id: &'a str,
    pub sha256: &'a str,
    pub dim: usize,
}

/// Vectors of a batch of passages, one per hit, in order.
pub type PassageEncoder<'a> = dyn FnMut(&[Hit]) -> Result<Vec<Vec<f32>>, RerankError> + 'a;

/// `model`'s vectors of `hits`, each of the text the model reads of a passage.
pub fn encode_passages(model: &OnnxReranker, hits: &[Hit]) -> Result<Vec<Vec<f32>>, RerankError> {
    let texts: Vec<String> = hits.iter().map(|h| h.model_text()).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    model.embed(&refs)
}

/// A collection's vector file: in `cache`, for the index `retriever` of collection `collection`.
pub struct VectorTarget<'a> {
    pub cache: &'a DiskEmbeddingCache,
    pub collection: &'a str,
    pub retriever: &'a TantivyRetriever,
}

/// Appends `encode`'s vectors for every passage of `collection` not yet in its vector file of
/// `model`, in ordinal order from the first ordinal not written, `chunk` passages at a time;
/// returns (passages in the collection, passages encoded by this run).
/// [`embed_collection`] encodes with the model; a benchmark may fill the same file otherwise.
pub fn write_collection_vectors(
    config: &Config,
    collection: &str,
    model: VectorModel<'_>,
    chunk: usize,
    progress: &dyn Progress,
    encode: &mut PassageEncoder<'_>,
) -> Result<(u64, u64), EmbedError> {
    let registry = CollectionRegistry::new(config.collections_dir());
    let retriever = registry.get(collection)?;
    let cache = DiskEmbeddingCache::for_config(config);
    let target = VectorTarget {
        cache: &cache,
        collection,
        retriever: &retriever,
    };
    write_vectors(&target, model, chunk, progress, encode)
}

/// [`write_collection_vectors`] for a collection already open (a private one, the server's).
/// Once every live passage has its vector, the file's sums are recorded beside it with the
/// digest of the collection's manifest ([`record_complete`]); a file about to grow loses them.
/// A complete file of a collection large enough gets its nearest-neighbour graph then
/// ([`ensure_graph`], under the cache's [`super::graph::GraphPolicy`]).
pub fn write_vectors(
    target: &VectorTarget<'_>,
    model: VectorModel<'_>,
    chunk: usize,
    progress: &dyn Progress,
    encode: &mut PassageEncoder<'_>,
) -> Result<(u64, u64), EmbedError> {
    let retriever = target.retriever;
    let key = embedding_key(target.collection, retriever);
    let mut writer = target.cache.vector_writer(model.sha256, &key, model.dim)?;
    let path = target.cache.vector_path(model.sha256, &key);
    let start = writer.len();
    if retriever.live_from(start) > 0 {
        remove_sums(&path)?;
    }

    let total = retriever.num_passages();
    progress.set_length(total);
    // A resumed run starts where the file ends.
    progress.set_position(start.min(total));
    let mut encoded = 0u64;
    // The passage walk speaks IndexError; the encoder's error is kept here with its source.
    let mut model_error = None;
    let walked = retriever.for_each_passage_from(start, chunk, |hits| {
        let written = encode(hits).and_then(|vectors| {
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
    if retriever.live_from(writer.len()) == 0 {
        // Under the writer's lock: no other writer appends while the file is hashed.
        let origin = VectorOrigin {
            model: model.id.to_string(),
            model_sha256: model.sha256.to_string(),
            dim: model.dim,
            passages: retriever.num_passages(),
            collection_manifest_sha256: collection_digest(retriever.dir())?,
        };
        let sums = record_complete(&path, origin)?;
        let vectors = VectorsBuilt {
            records: writer.len(),
            sha256: &sums.sha256,
            passages: sums.origin.passages,
        };
        let policy = target.cache.graph_policy();
        if let GraphOutcome::Built { seconds } = ensure_graph(&path, &vectors, policy, progress)? {
            tracing::info!(
                collection = target.collection,
                vectors = vectors.records,
                seconds,
                "nearest-neighbour graph built"
            );
        }
    }
    Ok((total, encoded))
}
