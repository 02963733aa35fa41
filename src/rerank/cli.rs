//! `convrag rerank`: rerank first-stage candidates with text and write a TREC run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;

use super::candidates::{read_candidates, write_trec_run, QueryCandidates, RunLine};
use super::{
    order_by_score, DiskEmbeddingCache, Fusion, OnnxOptions, OnnxReranker, PassageRef, Reranker,
};
use crate::Config;

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
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} rerank [{elapsed_precise}] {wide_bar} {pos}/{len} passages ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
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
    bar.finish_and_clear();
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

/// Run lines for one query: the first `depth` candidates (by first-stage score) reranked and fused,
/// then the rest in first-stage order with scores below all reranked ones.
pub fn rerank_query(
    reranker: &dyn Reranker,
    q: &QueryCandidates,
    depth: usize,
    fusion: Fusion,
    collection: Option<&str>,
) -> super::Result<Vec<RunLine>> {
    let first: Vec<f32> = q.candidates.iter().map(|c| c.score).collect();
    let by_first = order_by_score(&first);
    let (head, tail) = by_first.split_at(depth.min(by_first.len()));
    let passages: Vec<PassageRef<'_>> = head
        .iter()
        .map(|&i| PassageRef {
            id: &q.candidates[i].docid,
            text: &q.candidates[i].text,
        })
        .collect();
    let neural = reranker.rerank(&q.query, &passages, collection)?;
    let head_first: Vec<f32> = head.iter().map(|&i| first[i]).collect();
    let fused = fusion.fuse(&head_first, &neural);
    let mut lines = Vec::with_capacity(q.candidates.len());
    for (rank0, j) in order_by_score(&fused).into_iter().enumerate() {
        lines.push(RunLine {
            qid: q.qid.clone(),
            docid: q.candidates[head[j]].docid.clone(),
            rank: rank0 + 1,
            score: fused[j],
        });
    }
    let floor = fused.iter().copied().fold(f32::INFINITY, f32::min);
    let floor = if floor.is_finite() { floor } else { 0.0 };
    for (k, &i) in tail.iter().enumerate() {
        lines.push(RunLine {
            qid: q.qid.clone(),
            docid: q.candidates[i].docid.clone(),
            rank: lines.len() + 1,
            // Strictly below the reranked head and decreasing, so trec_eval keeps this order.
            score: floor - 1.0 - k as f32,
        });
    }
    Ok(lines)
}
