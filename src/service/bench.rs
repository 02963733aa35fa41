//! Turn latency per stage over real conversations (`convrag pipeline bench-turns`).
//!
//! Every turn (iKAT automatic contexts) runs through the [`TurnService`] with extractive
//! generation, in passes: the first with an empty on-disk embedding cache (cold: every candidate
//! passage is encoded), the next with the cache the first filled (warm). Turns run one after
//! another, as one user's would; the model's session pool uses both cores within a turn. The
//! command line prints the reports (`src/cli/bench.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{ServiceError, TurnService, WithoutVectors};
use crate::dense::DiskEmbeddingCache;
use crate::dense::{Retrieval, VectorSearch};
use crate::formats::ikat::{distinct_turns, IkatTopic, RunType};
use crate::index::{CollectionRegistry, IndexError, Retriever};
use crate::pipeline::context::ConversationContext;
use crate::pipeline::turn::{timings_map, PassageSource, TurnSettings};
use crate::progress::Progress;
use crate::rerank::{open_model, RerankError};

/// Errors of the benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("the topics hold no turns")]
    NoTurns,
    #[error("{0} retrieval needs the model and the passage vectors of `convrag embed` (--precomputed, without --no-rerank)")]
    NeedsVectors(Retrieval),
    #[error("cannot create the embedding cache: {0}")]
    Cache(#[source] std::io::Error),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Rerank(#[from] RerankError),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

/// What to time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchOptions {
    /// Collection to retrieve from (under the data directory).
    pub collection: String,
    /// At most this many turns (in topic order).
    pub turns: usize,
    /// BM25 candidates retrieved and reranked per turn.
    pub depth: usize,
    /// Rerank with the default model (else BM25 only).
    pub rerank: bool,
    /// Read passage embeddings from the data directory's cache (the vector files `convrag
    /// embed` writes), else start from an empty cache of the benchmark's own.
    pub precomputed: bool,
    /// The first stage; dense and hybrid need `precomputed` vectors and the model.
    pub retrieval: Retrieval,
}

/// What the benchmark runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchSetup {
    pub turns: usize,
    pub collection: String,
    pub passages: u64,
    pub depth: usize,
    /// The reranking model, if any.
    pub model: Option<String>,
    pub cores: usize,
}

/// One pass over the turns.
#[derive(Debug, Clone, PartialEq)]
pub struct PassReport {
    pub pass: String,
    /// Milliseconds of each turn, per stage (`total` included).
    pub per_stage: BTreeMap<&'static str, Vec<f64>>,
    /// `{"turn", "timings_ms"}` per turn.
    pub turns: Vec<serde_json::Value>,
}

/// A prepared benchmark: the contexts, the service with its own (initially empty) cache.
pub struct TurnBench {
    contexts: Vec<(String, ConversationContext)>,
    service: TurnService,
    source: PassageSource,
    settings: TurnSettings,
    setup: BenchSetup,
    _cache: tempfile::TempDir,
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

impl TurnBench {
    /// The first `options.turns` turns of `topics` with their automatic-run contexts, the
    /// collection opened and the model loaded with an empty on-disk embedding cache (or, with
    /// `precomputed`, the data directory's, holding the vectors of `convrag embed`).
    pub async fn prepare(
        config: &crate::Config,
        topics: &[IkatTopic],
        options: &BenchOptions,
    ) -> Result<Self, BenchError> {
        if options.retrieval != Retrieval::Bm25 && !(options.precomputed && options.rerank) {
            return Err(BenchError::NeedsVectors(options.retrieval));
        }
        let contexts: Vec<(String, ConversationContext)> = distinct_turns(topics)
            .filter_map(|(topic, i)| {
                ConversationContext::from_ikat(topic, i, RunType::Automatic)
                    .map(|ctx| (topic.turn_key(&topic.turns[i]), ctx))
            })
            .take(options.turns)
            .collect();
        if contexts.is_empty() {
            return Err(BenchError::NoTurns);
        }
        let retriever =
            CollectionRegistry::new(config.collections_dir()).get(&options.collection)?;
        let cache = tempfile::tempdir().map_err(BenchError::Cache)?;
        let cache_root = if options.precomputed {
            config.home.join("embeddings")
        } else {
            cache.path().to_path_buf()
        };
        let cache_root = Arc::new(DiskEmbeddingCache::new(cache_root));
        let search = if options.rerank {
            let model = open_model(config, None)?.with_cache(cache_root.clone());
            Some(VectorSearch::new(Arc::new(model), cache_root))
        } else {
            None
        };
        let model = search.as_ref().map(VectorSearch::reranker);
        let setup = BenchSetup {
            turns: contexts.len(),
            collection: options.collection.clone(),
            passages: retriever.num_passages(),
            depth: options.depth,
            model: model.as_ref().map(|m| m.model_id()),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let settings = TurnSettings {
            depth: options.depth,
            rerank: model.is_some(),
            retrieval: options.retrieval,
            ..TurnSettings::default()
        };
        // Only precomputed vectors serve dense retrieval: the benchmark's own cache starts empty.
        let vectors = search.filter(|_| options.precomputed);
        let service = TurnService::from_config(config, model)?.with_vectors(vectors);
        let target = service
            .retrieval_target(
                None,
                &options.collection,
                options.retrieval,
                WithoutVectors::Refuse,
            )
            .await?;
        Ok(TurnBench {
            contexts,
            service,
            source: PassageSource::Collection(target),
            settings,
            setup,
            _cache: cache,
        })
    }

    pub fn setup(&self) -> &BenchSetup {
        &self.setup
    }

    /// Runs every turn once, in order, reporting each to `progress`.
    pub fn run_pass(
        &self,
        runtime: &tokio::runtime::Runtime,
        pass: &str,
        progress: &dyn Progress,
    ) -> Result<PassReport, BenchError> {
        progress.set_message(pass.to_string());
        progress.set_length(self.contexts.len() as u64);
        let mut report = PassReport {
            pass: pass.to_string(),
            per_stage: BTreeMap::new(),
            turns: Vec::with_capacity(self.contexts.len()),
        };
        for (key, ctx) in &self.contexts {
            let output = runtime.block_on(self.service.run_unstored(
                ctx.clone(),
                Some(self.source.clone()),
                &self.settings,
                &mut |_| {},
            ));
            let output = match output {
                Ok(output) => output,
                Err(e) => {
                    progress.finish();
                    return Err(e.into());
                }
            };
            for (stage, ms) in timings_map(&output.timings) {
                report.per_stage.entry(stage).or_default().push(ms);
            }
            report
                .turns
                .push(serde_json::json!({"turn": key, "timings_ms": output.timings}));
            progress.inc(1);
        }
        progress.finish();
        Ok(report)
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
