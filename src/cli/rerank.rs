//! `convrag rerank`: rerank first-stage candidates with text and write a TREC run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;

use convrag::dense::DiskEmbeddingCache;
use convrag::progress::Progress;
use convrag::rerank::candidates::{read_candidates, rerank_query, write_trec_run};
use convrag::rerank::{Fusion, OnnxOptions, OnnxReranker, Reranker};
use convrag::Config;

use super::progress::Bar;

#[derive(Debug, Args)]
pub struct RerankArgs {
    /// Model directory with manifest.json (default: the configured default model).
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// Candidates: TREC DL `[{"query","hits"}]` JSON or TREC RAG reranker-request JSONL (gzip ok).
    #[arg(long, value_name = "FILE")]
    pub candidates: PathBuf,
    /// TREC run to write (atomically).
    #[arg(long, value_name = "RUN.trec")]
    pub output: PathBuf,
    /// Rerank the first N candidates of each query; the rest keep their order below them.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub depth: usize,
    /// none | rrf | rrf:K | weighted:W (W = weight of the min-max normalized first-stage score).
    #[arg(long, default_value = "none")]
    pub fusion: String,
    /// Cache passage embeddings (bi-encoder) under this collection name in CONVRAG_HOME/embeddings.
    #[arg(long, value_name = "NAME")]
    pub collection: Option<String>,
    /// Truncation length (default: the manifest's max_length).
    #[arg(long, value_name = "TOKENS")]
    pub max_length: Option<usize>,
    /// Sequences per inference batch.
    #[arg(long, default_value_t = 16)]
    pub batch_size: usize,
    /// ONNX Runtime intra-op threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Batch in input order instead of by length (only to measure padding waste).
    #[arg(long)]
    pub no_length_sort: bool,
    /// Run tag (last column of the run; default: convrag-<model>-<fusion>).
    #[arg(long)]
    pub tag: Option<String>,
}

/// Reranks every query of `--candidates` and writes the run; prints a summary to stderr.
pub fn run(config: &Config, args: RerankArgs) -> anyhow::Result<()> {
    let fusion: Fusion = args.fusion.parse()?;
    let model_dir = args
        .model
        .clone()
        .unwrap_or_else(|| config.default_model_dir());
    let mut options = OnnxOptions {
        batch_size: args.batch_size.max(1),
        max_length: args.max_length,
        sort_by_length: !args.no_length_sort,
        max_sessions: 1,
        ..OnnxOptions::default()
    };
    if let Some(t) = args.threads {
        options.intra_threads = t.max(1);
    }
    let started = Instant::now();
    let mut reranker = OnnxReranker::open(&model_dir, &config.ort_library_path(), options)?;
    if args.collection.is_some() {
        let cache = DiskEmbeddingCache::new(config.home.join("embeddings"));
        reranker = reranker.with_cache(Arc::new(cache));
    }
    let load_secs = started.elapsed().as_secs_f64();
    let queries = read_candidates(&args.candidates)?;
    let tag = args.tag.clone().unwrap_or_else(|| {
        let name = model_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        format!("convrag-{name}-{}", fusion.to_string().replace(':', "-"))
    });

    let total: u64 = queries
        .iter()
        .map(|q| q.candidates.len().min(args.depth) as u64)
        .sum();
    let bar = Bar::items("passages", false);
    bar.set_length(total);
    let rerank_started = Instant::now();
    let mut lines = Vec::new();
    for q in &queries {
        lines.extend(rerank_query(
            &reranker,
            q,
            args.depth,
            fusion,
            args.collection.as_deref(),
        )?);
        bar.inc(q.candidates.len().min(args.depth) as u64);
    }
    bar.finish();
    let rerank_secs = rerank_started.elapsed().as_secs_f64();
    write_trec_run(&args.output, &lines, &tag)?;
    let s = reranker.stats();
    eprintln!(
        "reranked {} queries, {} passages with {} in {:.2} s (model load {:.2} s): {} sequences encoded, \
         {} cache hits, {} real / {} padded tokens, {:.2} s in ONNX Runtime; wrote {}",
        queries.len(),
        total,
        reranker.model_id(),
        rerank_secs,
        load_secs,
        s.sequences,
        s.cache_hits,
        s.real_tokens,
        s.padded_tokens,
        s.inference_nanos as f64 / 1e9,
        args.output.display()
    );
    Ok(())
}
