//! `convrag pipeline bench-turns`: the arguments, the progress bar and the printed report of the
//! library's turn benchmark (`convrag::service::bench`); and the `convrag bench` command group.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use convrag::config::Config;
use convrag::dense::Retrieval;
use convrag::pipeline::turn::TurnSettings;
use convrag::service::bench::{summarize, BenchOptions, TurnBench};

use super::progress::Bar;

#[derive(Debug, Args, Clone)]
pub struct BenchTurnsArgs {
    /// iKAT topics file (contexts built as for automatic runs).
    #[arg(long, value_name = "FILE")]
    pub topics: PathBuf,
    /// Collection to retrieve from (under the data directory).
    #[arg(long)]
    pub collection: String,
    /// At most this many turns (in topic order).
    #[arg(long, default_value_t = 100)]
    pub turns: usize,
    /// BM25 candidates retrieved and reranked per turn.
    #[arg(long, default_value_t = TurnSettings::default().depth)]
    pub depth: usize,
    /// BM25 only (no model).
    #[arg(long)]
    pub no_rerank: bool,
    /// Use the passage vectors `convrag embed` wrote for the collection (and the data
    /// directory's cache), instead of starting from an empty cache.
    #[arg(long)]
    pub precomputed: bool,
    /// The first stage: bm25, dense or hybrid (dense and hybrid need --precomputed).
    #[arg(long, value_enum, default_value_t = Retrieval::Bm25)]
    pub retrieval: Retrieval,
    /// Write the per-turn timings of both passes as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(config: &Config, args: BenchTurnsArgs) -> anyhow::Result<()> {
    let topics = convrag::formats::topics::read_conversations(&args.topics)?;
    let options = BenchOptions {
        collection: args.collection.clone(),
        turns: args.turns,
        depth: args.depth,
        rerank: !args.no_rerank,
        precomputed: args.precomputed,
        retrieval: args.retrieval,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let bench = runtime
        .block_on(TurnBench::prepare(config, &topics, &options))
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.topics.display()))?;
    let setup = bench.setup();
    println!(
        "{} turns of {} on collection {} ({} passages), {} retrieval, depth {}, model {}, {} cores",
        setup.turns,
        args.topics.display(),
        setup.collection,
        setup.passages,
        args.retrieval,
        setup.depth,
        setup.model.as_deref().unwrap_or("none"),
        setup.cores,
    );
    let mut report = serde_json::Map::new();
    for pass in ["cold", "warm"] {
        let bar = Bar::new(indicatif::ProgressBar::new(0).with_style(
            indicatif::ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} ETA {eta}")?,
        ));
        let result = bench.run_pass(&runtime, pass, &bar)?;
        println!("\n{pass}: stage      p50 ms    p95 ms   mean ms");
        for stage in ["ptkb", "rewrite", "retrieve", "rerank", "generate", "total"] {
            if let Some(v) = result.per_stage.get(stage) {
                let (p50, p95, mean) = summarize(v);
                println!("{pass}: {stage:<9} {p50:>8.1} {p95:>9.1} {mean:>9.1}");
            }
        }
        report.insert(pass.into(), serde_json::Value::Array(result.turns));
    }
    if let Some(path) = &args.json {
        convrag::formats::atomic::write_atomic(path, &serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}

/// `convrag bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Exact vector search, its int8 scan and HNSW libraries side by side: build time, memory,
    /// recall@k against exact, latency p50/p95.
    Ann(super::bench_ann::AnnArgs),
}

pub fn run_bench(config: &Config, args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Ann(args) => super::bench_ann::run(config, args),
    }
}
