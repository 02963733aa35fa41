//! `convrag embed`: precompute the bi-encoder embeddings of a whole collection into the on-disk
//! cache, so later reranking encodes only queries. Resumable: already-cached passages are skipped.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::{DiskEmbeddingCache, OnnxOptions, OnnxReranker, PassageRef, Reranker};
use crate::index::{CollectionRegistry, Retriever};
use crate::Config;

#[derive(Debug, Args)]
pub struct EmbedArgs {
    /// Collection to embed (a name under the data directory's collections/).
    #[arg(long)]
    pub collection: String,
    /// Model directory (default: the configured default model).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Passages read and encoded per step.
    #[arg(long, default_value_t = 256)]
    pub chunk: usize,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs `convrag embed`; prints how many passages were encoded and how many were already cached.
pub fn run(config: &Config, args: EmbedArgs) -> anyhow::Result<()> {
    let registry = CollectionRegistry::new(config.collections_dir());
    let retriever = registry.get(&args.collection)?;
    let model_dir = args
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
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} passages, {per_sec}, eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut encoded = 0usize;
    retriever.for_each_passage(args.chunk, |hits| {
        let texts: Vec<String> = hits.iter().map(|h| h.model_text()).collect();
        let passages: Vec<PassageRef<'_>> = hits
            .iter()
            .zip(&texts)
            .map(|(h, text)| PassageRef { id: &h.id, text })
            .collect();
        encoded += model
            .precompute(&args.collection, &passages)
            .map_err(|e| crate::index::IndexError::Invalid(e.to_string()))?;
        bar.inc(hits.len() as u64);
        Ok(())
    })?;
    bar.finish_and_clear();
    println!(
        "{}: {} passages, {} encoded now, {} already cached (model {})",
        args.collection,
        total,
        encoded,
        total as usize - encoded,
        model.model_id()
    );
    Ok(())
}
