//! `convrag pipeline bench-turns`: turn latency per stage over real conversations.
//!
//! Every turn of the topics file (iKAT automatic contexts) runs through [`TurnPipeline`] with
//! extractive generation, twice: first with an empty on-disk embedding cache (cold: every
//! candidate passage is encoded), then again with the cache the first pass filled (warm). Prints
//! p50/p95/mean per stage for each pass. Turns run one after another, as one user's would; the
//! model's session pool uses both cores within a turn.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use super::context::ConversationContext;
use super::turn::{timings_map, PassageSource, RetrievalTarget, TurnPipeline, TurnSettings};
use crate::formats::ikat::RunType;
use crate::index::CollectionRegistry;
use crate::rerank::{DiskEmbeddingCache, OnnxOptions, OnnxReranker, Reranker};

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
    /// Write the per-turn timings of both passes as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// p50, p95 and mean of `values` (nearest-rank percentiles).
pub fn summarize(values: &[f64]) -> (f64, f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (
        rank(0.50),
        rank(0.95),
        v.iter().sum::<f64>() / v.len() as f64,
    )
}

pub fn run(config: &crate::Config, args: BenchTurnsArgs) -> anyhow::Result<()> {
    let topics = super::topics::read_conversations(&args.topics)?;
    let mut contexts: Vec<(String, ConversationContext)> = Vec::new();
    'topics: for topic in &topics {
        for (i, turn) in topic.turns.iter().enumerate() {
            if contexts.len() == args.turns {
                break 'topics;
            }
            if let Some(ctx) = ConversationContext::from_ikat(topic, i, RunType::Automatic) {
                contexts.push((format!("{}_{}", topic.number, turn.turn_id), ctx));
            }
        }
    }
    anyhow::ensure!(!contexts.is_empty(), "{}: no turns", args.topics.display());
    let retriever = CollectionRegistry::new(config.collections_dir()).get(&args.collection)?;
    let cache_dir = tempfile::tempdir()?;
    let model: Option<Arc<dyn Reranker>> = if args.no_rerank {
        None
    } else {
        let model = OnnxReranker::open(
            &config.default_model_dir(),
            &config.ort_library_path(),
            OnnxOptions::default(),
        )?
        .with_cache(Arc::new(DiskEmbeddingCache::new(cache_dir.path())));
        Some(Arc::new(model))
    };
    let pipeline = TurnPipeline::new(
        super::ptkb::recommended_ranker(model.clone()),
        model.clone(),
        None,
    );
    let settings = TurnSettings {
        depth: args.depth,
        rerank: model.is_some(),
        ..TurnSettings::default()
    };
    let source = PassageSource::Collection(RetrievalTarget {
        collection: args.collection.clone(),
        retriever,
    });
    println!(
        "{} turns of {} on collection {} ({} passages), depth {}, model {}, {} cores",
        contexts.len(),
        args.topics.display(),
        args.collection,
        source_passages(&source),
        args.depth,
        model.as_ref().map_or("none".into(), |m| m.model_id()),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut report = serde_json::Map::new();
    for pass in ["cold", "warm"] {
        let bar = indicatif::ProgressBar::new(contexts.len() as u64).with_style(
            indicatif::ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} ETA {eta}")?,
        );
        bar.set_message(pass);
        let mut per_stage: std::collections::BTreeMap<&'static str, Vec<f64>> = Default::default();
        let mut turns_json = Vec::new();
        for (key, ctx) in &contexts {
            let output = runtime.block_on(pipeline.run(
                ctx.clone(),
                Some(source.clone()),
                &settings,
                &mut |_| {},
            ))?;
            for (stage, ms) in timings_map(&output.timings) {
                per_stage.entry(stage).or_default().push(ms);
            }
            turns_json.push(serde_json::json!({"turn": key, "timings_ms": output.timings}));
            bar.inc(1);
        }
        bar.finish_and_clear();
        println!("\n{pass}: stage      p50 ms    p95 ms   mean ms");
        for stage in ["ptkb", "rewrite", "retrieve", "rerank", "generate", "total"] {
            if let Some(v) = per_stage.get(stage) {
                let (p50, p95, mean) = summarize(v);
                println!("{pass}: {stage:<9} {p50:>8.1} {p95:>9.1} {mean:>9.1}");
            }
        }
        report.insert(pass.into(), serde_json::Value::Array(turns_json));
    }
    if let Some(path) = &args.json {
        crate::formats::atomic::write_atomic(path, &serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}

fn source_passages(source: &PassageSource) -> String {
    match source {
        PassageSource::Collection(t) => t.retriever.num_passages().to_string(),
        PassageSource::Given { passages, .. } => passages.len().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::summarize;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        let (p50, p95, mean) = summarize(&v);
        assert_eq!((p50, p95, mean), (10.0, 19.0, 10.5));
        assert_eq!(summarize(&[3.0]).0, 3.0);
    }
}
