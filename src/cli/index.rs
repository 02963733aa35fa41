//! `convrag index` and `convrag search`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use convrag::collection::{Format, SegmenterConfig};
use convrag::dense::DiskEmbeddingCache;
use convrag::dense::{FirstStage, HybridOptions, Retrieval, VectorSearch};
use convrag::formats::topics::{read_topics, Topic};
use convrag::index::topics::write_run_with;
use convrag::index::writer::{index_collection, optimize, IndexOptions};
use convrag::index::{
    open_tantivy, read_manifest, validate_name, Bm25Params, ContentsPart, FieldWeights, Language,
};
use convrag::index::{CollectionRegistry, Evaluation, SearchOptions, WeightedQuery};
use convrag::rerank::{open_model, ModelKind, ModelManifest};
use convrag::Config;

use super::embed::EmbedArgs;
use super::progress::Bar;

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Collection name (a directory under the data directory's collections/).
    #[arg(long)]
    pub collection: String,
    /// Input format.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Analysis language.
    #[arg(long, value_enum, default_value = "english")]
    pub language: Language,
    /// Input files or directories (directories are walked recursively).
    pub paths: Vec<PathBuf>,
    /// Stop at the first bad record instead of counting and skipping it.
    #[arg(long)]
    pub strict: bool,
    /// Reader threads, and tantivy indexing threads (default: number of cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Indexing memory budget of the writer in MiB (at least 16 per thread).
    #[arg(long, default_value_t = 512)]
    pub heap_mb: usize,
    /// Sentences per passage when convrag segments documents.
    #[arg(long, default_value_t = 10)]
    pub window: usize,
    /// Sentences the passage window moves by.
    #[arg(long, default_value_t = 5)]
    pub stride: usize,
    /// Trim each document to this many characters before segmenting (iKAT: 10000).
    #[arg(long)]
    pub max_chars: Option<usize>,
    /// Default BM25 k1 of the collection.
    #[arg(long, default_value_t = 0.9)]
    pub k1: f32,
    /// Default BM25 b of the collection.
    #[arg(long, default_value_t = 0.4)]
    pub b: f32,
    /// Default extra weight of title matches (absent: the format's, 0.5 for HTML, else 0).
    #[arg(long)]
    pub title_weight: Option<f32>,
    /// Default extra weight of headings matches (absent: the format's, 0).
    #[arg(long)]
    pub headings_weight: Option<f32>,
    /// Parts of a record indexed as its searchable contents.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "title,text")]
    pub contents: Vec<ContentsPart>,
    /// Commit after this many MiB of input (resume granularity).
    #[arg(long, default_value_t = 1024)]
    pub commit_mb: u64,
    /// Merge the index into one segment at the end (also works without PATHs).
    #[arg(long)]
    pub optimize: bool,
    /// Do not compute the passage vectors of dense and hybrid retrieval (`convrag embed` later).
    #[arg(long)]
    pub no_vectors: bool,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// `--evaluation` of `convrag search`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EvaluationArg {
    /// Block-max MaxScore over the per-block impacts (the default).
    Pruned,
    /// Every posting of every query term.
    Exhaustive,
}

impl From<EvaluationArg> for Evaluation {
    fn from(e: EvaluationArg) -> Self {
        match e {
            EvaluationArg::Pruned => Evaluation::Pruned,
            EvaluationArg::Exhaustive => Evaluation::Exhaustive,
        }
    }
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Collection name.
    #[arg(long)]
    pub collection: String,
    /// Number of passages per query.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Topics file: TSV `id<TAB>text` or JSONL with `id`/`qid` and `text`/`query`/`title`.
    #[arg(long, requires = "output")]
    pub topics: Option<PathBuf>,
    /// TREC run file to write (atomically).
    #[arg(long, requires = "topics")]
    pub output: Option<PathBuf>,
    /// Run tag (last column of the run; default: convrag-MODE, MODE of --retrieval).
    #[arg(long)]
    pub run_tag: Option<String>,
    /// First stage: bm25 (Anserini's BM25 exactly), dense (the bi-encoder's exact cosine over
    /// every passage vector; `convrag embed` computes them) or hybrid (RRF of both).
    #[arg(long, value_enum, default_value_t = Retrieval::Bm25)]
    pub retrieval: Retrieval,
    /// RRF k of --retrieval hybrid.
    #[arg(long, default_value_t = HybridOptions::default().rrf_k)]
    pub rrf_k: f32,
    /// Candidates of each retriever that --retrieval hybrid fuses (at least --k).
    #[arg(long, default_value_t = HybridOptions::default().depth)]
    pub depth: usize,
    /// BM25 k1 (default: the collection's).
    #[arg(long)]
    pub k1: Option<f32>,
    /// BM25 b (default: the collection's).
    #[arg(long)]
    pub b: Option<f32>,
    /// How the top k are found; both give identical rankings (exhaustive is the reference).
    #[arg(long, value_enum, default_value_t = EvaluationArg::Pruned)]
    pub evaluation: EvaluationArg,
    /// With --topics: run the queries one at a time and print latency percentiles (p50/p95).
    #[arg(long)]
    pub timing: bool,
    /// Print hits as JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The query (when no --topics).
    pub query: Option<String>,
}

pub fn run_index(config: &Config, args: IndexArgs) -> anyhow::Result<()> {
    let root = config.collections_dir();
    validate_name(&args.collection)?;
    if args.paths.is_empty() {
        anyhow::ensure!(
            args.optimize,
            "nothing to do: give input PATHs and --format, or --optimize"
        );
        let dir = root.join(&args.collection);
        let m = read_manifest(&dir)?;
        let index = open_tantivy(&dir, m.language)?;
        optimize(&index, &dir)?;
        eprintln!("optimized collection {}", args.collection);
        return build_vectors(config, &args.collection, args.no_vectors, args.quiet);
    }
    let format = args
        .format
        .context("--format is required when indexing files")?;
    let mut opts = IndexOptions::new(&args.collection, format);
    opts.language = args.language;
    opts.inputs = args.paths;
    opts.strict = args.strict;
    if let Some(t) = args.threads {
        opts.threads = t.max(1);
    }
    opts.heap_bytes = args.heap_mb << 20;
    opts.segmenter = SegmenterConfig {
        window: args.window,
        stride: args.stride,
        max_chars: args.max_chars,
    };
    opts.bm25 = Bm25Params {
        k1: args.k1,
        b: args.b,
    };
    // The format's weights unless given, as every other indexing path uses them.
    let format_weights = opts.weights;
    opts.weights = FieldWeights {
        body: 1.0,
        title: args.title_weight.unwrap_or(format_weights.title),
        headings: args.headings_weight.unwrap_or(format_weights.headings),
    };
    opts.contents = args.contents;
    opts.commit_bytes = args.commit_mb << 20;
    opts.optimize = args.optimize;
    opts.progress = Bar::bytes(args.quiet).shared();
    let r = index_collection(&root, &opts)?;
    eprintln!(
        "collection {}: {} passages added from {} shard(s) ({} already committed, skipped); {} bad record(s), {} duplicate id(s) skipped; {} passages in total; {:.1}s ({:.0} passages/s, {:.1} MB/s)",
        args.collection,
        r.passages_added,
        r.shards_indexed,
        r.shards_skipped,
        r.bad_records,
        r.duplicates,
        r.passages_total,
        r.seconds,
        r.passages_added as f64 / r.seconds.max(1e-9),
        r.input_bytes as f64 / 1e6 / r.seconds.max(1e-9),
    );
    build_vectors(config, &args.collection, args.no_vectors, args.quiet)
}

/// Computes the collection's passage vectors once its BM25 index is searchable, when a
/// bi-encoder is installed: `convrag embed`'s code path, so an interrupted build resumes there.
fn build_vectors(config: &Config, collection: &str, skip: bool, quiet: bool) -> anyhow::Result<()> {
    if skip {
        return Ok(());
    }
    let dir = config.default_model_dir();
    if !dir.join("manifest.json").exists() {
        eprintln!("no model in {} (scripts/fetch-models.sh installs one): passage vectors not computed; dense and hybrid retrieval need `convrag embed --collection {collection}`", dir.display());
        return Ok(());
    }
    if ModelManifest::load(&dir)?.kind != ModelKind::BiEncoder {
        eprintln!(
            "the model in {} is not a bi-encoder: passage vectors not computed",
            dir.display()
        );
        return Ok(());
    }
    super::embed::run(
        config,
        EmbedArgs {
            collection: collection.to_string(),
            model: None,
            chunk: 256,
            quiet,
        },
    )
}

pub fn run_search(config: &Config, args: SearchArgs) -> anyhow::Result<()> {
    let registry = CollectionRegistry::new(config.collections_dir());
    let retriever = registry.get(&args.collection)?;
    let mut options = SearchOptions::top(args.k);
    options.evaluation = args.evaluation.into();
    let m = retriever.manifest();
    if args.k1.is_some() || args.b.is_some() {
        options.bm25 = Some(Bm25Params {
            k1: args.k1.unwrap_or(m.bm25.k1),
            b: args.b.unwrap_or(m.bm25.b),
        });
    }
    let hybrid = HybridOptions {
        rrf_k: args.rrf_k,
        depth: args.depth,
    };
    let stage = first_stage(config, &args.collection, retriever, args.retrieval, hybrid)?;
    let mode = args.retrieval;
    if let (Some(topics), Some(output)) = (&args.topics, &args.output) {
        let topics = read_topics(topics)?;
        options.with_fields = false;
        if args.timing {
            print_latencies(&stage, mode, &topics, &options)?;
        }
        let started = std::time::Instant::now();
        let tag = args.run_tag.unwrap_or_else(|| format!("convrag-{mode}"));
        let lines = write_run_with(&topics, &tag, output, |t| {
            stage.search(mode, &WeightedQuery::text(&t.text), &options)
        })?;
        eprintln!(
            "{} topics, {} lines written to {} in {:.2}s",
            topics.len(),
            lines,
            output.display(),
            started.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    let query = args
        .query
        .context("give a query, or --topics FILE --output RUN")?;
    let hits = stage.search(mode, &WeightedQuery::text(&query), &options)?;
    print_hits(&hits, args.json)
}

/// The collection's first stage for `mode`: the bi-encoder and the vectors only when needed.
fn first_stage(
    config: &Config,
    collection: &str,
    retriever: std::sync::Arc<convrag::index::TantivyRetriever>,
    mode: Retrieval,
    hybrid: HybridOptions,
) -> anyhow::Result<FirstStage> {
    if mode == Retrieval::Bm25 {
        return Ok(FirstStage::bm25(collection, retriever));
    }
    let model = open_model(config, None)
        .with_context(|| format!("--retrieval {mode} needs the bi-encoder"))?;
    let cache = std::sync::Arc::new(DiskEmbeddingCache::for_config(config));
    let search = VectorSearch::new(std::sync::Arc::new(model), cache).with_hybrid(hybrid);
    Ok(search.first_stage(collection, retriever)?)
}

fn print_hits(hits: &[convrag::index::Hit], json: bool) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for (rank, h) in hits.iter().enumerate() {
        if json {
            writeln!(out, "{}", serde_json::to_string(h)?)?;
        } else {
            let snippet: String = h.text.chars().take(160).collect();
            writeln!(
                out,
                "{:>3} {:>9.4} {}  {}",
                rank + 1,
                h.score,
                h.id,
                h.title
            )?;
            writeln!(out, "              {}", snippet.replace('\n', " "))?;
        }
    }
    Ok(())
}

/// Runs each topic once to warm up, then once more timed, sequentially; prints p50/p95/mean.
fn print_latencies(
    stage: &FirstStage,
    mode: Retrieval,
    topics: &[Topic],
    options: &SearchOptions,
) -> anyhow::Result<()> {
    for t in topics {
        stage.search(mode, &WeightedQuery::text(&t.text), options)?;
    }
    let mut ms = Vec::with_capacity(topics.len());
    for t in topics {
        let started = std::time::Instant::now();
        stage.search(mode, &WeightedQuery::text(&t.text), options)?;
        ms.push(started.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    let pct = |p: f64| ms[((ms.len() as f64 * p).ceil() as usize).clamp(1, ms.len()) - 1];
    eprintln!(
        "latency {mode} k={}: p50 {:.2} ms, p95 {:.2} ms, mean {:.2} ms over {} queries (one thread, warm)",
        options.k,
        pct(0.50),
        pct(0.95),
        ms.iter().sum::<f64>() / ms.len().max(1) as f64,
        ms.len()
    );
    Ok(())
}
