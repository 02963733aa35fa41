//! `convrag bench ann`: exact search, the int8 scan and HNSW libraries side by side over one set
//! of passage vectors (real ones from `convrag embed`, or seeded synthetic ones): build time,
//! resident memory, recall@k against exact and search latency, in one run
//! (`convrag::dense::ann::bench`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use convrag::dense::ann::bench::{
    random_unit_vectors, run_ann_bench, synthetic_file, AnnBenchOptions, IndexReport,
};
use convrag::dense::ann::{HnswParams, IndexKind, VectorSource};
use convrag::dense::DiskEmbeddingCache;
use convrag::index::{embedding_key, CollectionRegistry};
use convrag::rerank::{open_model, Reranker};
use convrag::Config;

use super::progress::Bar;

#[derive(Debug, Args)]
pub struct AnnArgs {
    /// Collections whose passage vectors (`convrag embed`, of --model) are searched as one set,
    /// in the order given.
    #[arg(long = "collection", value_name = "NAME")]
    pub collections: Vec<String>,
    /// Vector files written by `convrag embed`, joined after the collections' vectors.
    #[arg(long = "vectors", value_name = "FILE")]
    pub vectors: Vec<PathBuf>,
    /// Instead: this many random unit vectors (Gaussian directions, seeded), written once to
    /// --synthetic-dir and reused; queries are random unit vectors too.
    #[arg(long, value_name = "N", conflicts_with_all = ["collections", "vectors", "queries"])]
    pub synthetic: Option<u64>,
    /// Dimension of --synthetic vectors.
    #[arg(long, default_value_t = 384)]
    pub dim: usize,
    /// Seed of --synthetic vectors (queries use seed + 1) and of instant-distance's layers.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Where --synthetic vector files are kept (default: the data directory's bench/ann/).
    #[arg(long, value_name = "DIR")]
    pub synthetic_dir: Option<PathBuf>,
    /// Query texts (topics file: TSV `id<TAB>text` or JSONL) embedded by --model: held-out real
    /// texts for real vectors (required unless --synthetic).
    #[arg(long, value_name = "FILE")]
    pub queries: Option<PathBuf>,
    /// At most this many queries (the file's first; --synthetic: this many random ones).
    #[arg(long, default_value_t = 1000)]
    pub num_queries: usize,
    /// Neighbours per query (recall@k, latency at k).
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Indexes to compare (the exact search always runs first: the reference).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "exact,int8,hnsw-rs,instant-distance"
    )]
    pub indexes: Vec<IndexKind>,
    /// HNSW links per node (hnsw_rs; instant-distance fixes 32).
    #[arg(long, default_value_t = HnswParams::default().m)]
    pub m: usize,
    /// HNSW candidates kept while inserting.
    #[arg(long, default_value_t = HnswParams::default().ef_construction)]
    pub ef_construction: usize,
    /// HNSW candidates kept while searching.
    #[arg(long, default_value_t = HnswParams::default().ef_search)]
    pub ef_search: usize,
    /// Best int8 candidates rescored with the f32 vectors (0: the codes' order as is).
    #[arg(long, default_value_t = 0)]
    pub int8_rescore: usize,
    /// Stop hnsw_rs's build after this many seconds and report its rate instead (sizes whose
    /// build would take hours).
    #[arg(long, value_name = "SECS")]
    pub build_budget: Option<u64>,
    /// Bi-encoder model directory (default: the configured default model).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Also write the figures as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Hide the progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// The vector files and the query vectors of a run, and a line saying what they are.
fn sources(
    config: &Config,
    args: &AnnArgs,
) -> anyhow::Result<(Vec<PathBuf>, Vec<Vec<f32>>, String)> {
    if let Some(n) = args.synthetic {
        let dir = args
            .synthetic_dir
            .clone()
            .unwrap_or_else(|| config.home.join("bench").join("ann"));
        let bar = Bar::items("vectors written", args.quiet);
        let path = synthetic_file(&dir, n, args.dim, args.seed, &bar)?;
        let queries = random_unit_vectors(args.num_queries, args.dim, args.seed + 1);
        let what = format!(
            "{n} synthetic random unit vectors (seed {}, {}), {} random unit queries",
            args.seed,
            path.display(),
            queries.len()
        );
        return Ok((vec![path], queries, what));
    }
    let queries_path = args
        .queries
        .as_ref()
        .context("--queries FILE is required with --collection or --vectors")?;
    if args.collections.is_empty() && args.vectors.is_empty() {
        anyhow::bail!("give --collection NAME, --vectors FILE or --synthetic N");
    }
    let model_dir = args
        .model
        .clone()
        .unwrap_or_else(|| config.default_model_dir());
    let model = open_model(config, Some(&model_dir))?;
    let registry = CollectionRegistry::new(config.collections_dir());
    let cache = DiskEmbeddingCache::new(config.home.join("embeddings"));
    let mut paths = Vec::new();
    for name in &args.collections {
        let retriever = registry.get(name)?;
        paths.push(cache.vector_path(
            model.model_sha256(),
            &embedding_key(name, retriever.as_ref()),
        ));
    }
    paths.extend(args.vectors.iter().cloned());
    let topics = convrag::formats::topics::read_topics(queries_path)?;
    let texts: Vec<&str> = topics
        .iter()
        .take(args.num_queries)
        .map(|t| t.text.as_str())
        .collect();
    let mut queries = Vec::with_capacity(texts.len());
    for batch in texts.chunks(64) {
        let embedded = model
            .embed_queries(batch)?
            .with_context(|| format!("{} is not a bi-encoder", model_dir.display()))?;
        queries.extend(embedded);
    }
    let what = format!(
        "the vectors of {} (model {}), {} queries of {} embedded by the same model",
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" + "),
        model.model_id(),
        queries.len(),
        queries_path.display()
    );
    Ok((paths, queries, what))
}

fn print_row(r: &IndexReport) {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    let mut row = format!(
        "{:<17} {:>10} {:>10.1} {:>10.1} {:>8} {:>10} {:>10}",
        r.index,
        r.vectors,
        r.build_secs,
        r.rss_delta_bytes as f64 / (1 << 20) as f64,
        r.recall.map_or("-".to_string(), |v| format!("{v:.4}")),
        ms(r.p50_ms),
        ms(r.p95_ms),
    );
    if r.left_out > 0 {
        let done = r.vectors as f64;
        let total = done + r.left_out as f64;
        row.push_str(&format!(
            "  (stopped by --build-budget: {} of {} inserted, {:.0} vectors/s; the whole set at that rate: {:.0} s, more as the graph grows)",
            r.vectors,
            total,
            done / r.build_secs,
            r.build_secs * total / done
        ));
    }
    println!("{row}");
}

pub fn run(config: &Config, args: AnnArgs) -> anyhow::Result<()> {
    let (paths, queries, what) = sources(config, &args)?;
    let source = Arc::new(VectorSource::open(&paths)?);
    let params = HnswParams {
        m: args.m,
        ef_construction: args.ef_construction,
        ef_search: args.ef_search,
        seed: args.seed,
        budget: args.build_budget.map(Duration::from_secs),
    };
    let options = AnnBenchOptions {
        kinds: args.indexes.clone(),
        params,
        int8_rescore: args.int8_rescore,
        k: args.k,
    };
    println!(
        "{what}\n{} records of {} dimensions; k = {}; hnsw m = {}, ef_construction = {}, ef_search = {}; int8 rescore {}; {} threads; {} build",
        source.len(),
        source.dim(),
        args.k,
        args.m,
        args.ef_construction,
        args.ef_search,
        args.int8_rescore,
        rayon::current_num_threads(),
        if cfg!(debug_assertions) { "debug" } else { "release" },
    );
    println!(
        "{:<17} {:>10} {:>10} {:>10} {:>8} {:>10} {:>10}",
        "index", "vectors", "build s", "RSS MiB", "recall", "p50 ms", "p95 ms"
    );
    let quiet = args.quiet;
    let progress = move |kind: IndexKind| -> Box<dyn convrag::progress::Progress> {
        Box::new(Bar::items(&format!("vectors ({})", kind.as_str()), quiet).ticking())
    };
    let reports = run_ann_bench(&source, &queries, &options, &progress, &mut print_row)?;
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "source": what,
            "records": source.len(),
            "dim": source.dim(),
            "k": args.k,
            "m": args.m,
            "ef_construction": args.ef_construction,
            "ef_search": args.ef_search,
            "int8_rescore": args.int8_rescore,
            "release": !cfg!(debug_assertions),
            "indexes": reports,
        });
        convrag::formats::atomic::write_atomic(path, &serde_json::to_vec_pretty(&json)?)?;
    }
    Ok(())
}
