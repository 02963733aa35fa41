//! [`TurnService`]: the turn pipeline as the server, the batch runner and the benchmark use it.
//!
//! It owns (a) the assembly of the stages from the [`Config`] and the loaded reranker (here,
//! with the collections it opens and the rates it counts), (b) the resolution of requested
//! settings into [`crate::pipeline::turn::TurnSettings`] (`settings`), (c) the lifecycle of a stored turn
//! (`lifecycle`), and (d) search, which retrieves and reranks exactly as a turn does (`search`).

mod error;
mod lifecycle;
mod search;
mod settings;

use std::sync::Arc;
use std::time::Instant;

pub use error::{Result, ServiceError};
pub use lifecycle::{
    register_llm_series, Begun, Filler, StartedTurn, TurnContext, TurnPassages, TurnReferences,
    TurnRequest,
};
pub use search::{SearchOutput, SearchRequest};
pub use settings::{RequestedSettings, SettingLimits};

use crate::config::{Config, Limits};
use crate::dense::{DenseError, Retrieval, VectorSearch};
use crate::index::{CollectionRegistry, TantivyRetriever};
use crate::pipeline::turn::{
    FallbackReason, RetrievalFallback, RetrievalTarget, SettingError, SettingField, TurnPipeline,
};
use crate::pipeline::PipelineError;
use crate::rerank::Reranker;
use crate::service::input::InvalidInput;
use crate::service::rate::{RateKind, RateLimiter};
use crate::service::vectors::{VectorBuilds, VectorStatus};
use crate::store::Store;

/// What dense or hybrid retrieval does on a collection whose passage vectors are not ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WithoutVectors {
    /// Serve BM25 meanwhile and say so (turns and searches of the server).
    #[default]
    Bm25,
    /// Refuse, naming `convrag embed` (batch runs: a submission is exactly what was asked).
    Refuse,
}

/// The turn pipeline with what it was built from.
pub struct TurnService {
    pipeline: Arc<TurnPipeline>,
    collections: CollectionRegistry,
    /// Per-user rates (the server's; batch runs and benchmarks have none).
    rates: Option<RateLimiter>,
    /// A chat answer's length when the request names none (`chat_max_words`).
    chat_max_words: usize,
    /// The bi-encoder that opens collections' passage vectors (dense and hybrid retrieval).
    vectors: Option<VectorSearch>,
    /// The same model computing collections' vectors in the background.
    vector_builds: Option<Arc<VectorBuilds>>,
    /// Where turns are stored, with its limits (the server's and batch runs'; benchmarks and
    /// evaluation run turns unstored).
    store: Option<Store>,
}

impl TurnService {
    /// The stages `config` describes (its LLM endpoint, if any) with `reranker` for reranking
    /// and PTKB ranking. Collections are those of `config.collections_dir()`.
    pub fn from_config(config: &Config, reranker: Option<Arc<dyn Reranker>>) -> Result<Self> {
        let stages = crate::pipeline::rewrite_llm::llm_stages_from_config(&config.llm)
            .map_err(ServiceError::LlmConfig)?;
        let (llm, llm_rewriter) = match stages {
            Some(s) => (Some(s.generator), Some(s.rewriter)),
            None => (None, None),
        };
        let pipeline = TurnPipeline::new(
            crate::pipeline::ptkb_zero_shot::recommended_ranker(reranker.clone()),
            reranker,
            llm,
        )
        .with_llm_rewriter(llm_rewriter);
        Ok(TurnService {
            pipeline: Arc::new(pipeline),
            collections: CollectionRegistry::new(config.collections_dir()),
            rates: None,
            chat_max_words: config.chat_max_words,
            vectors: None,
            vector_builds: None,
            store: None,
        })
    }

    /// Serves dense and hybrid retrieval over the collections `vectors` has passage vectors of
    /// (the reranker given to [`Self::from_config`] should be `vectors.reranker()`).
    pub fn with_vectors(mut self, vectors: Option<VectorSearch>) -> Self {
        self.vector_builds = vectors
            .clone()
            .map(|search| Arc::new(VectorBuilds::new(search)));
        self.vectors = vectors;
        self
    }

    /// Stores the turns it begins in `store`, within its limits.
    pub fn with_store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    /// The store of begun turns ([`ServiceError::NoStore`] without [`Self::with_store`]).
    pub fn store(&self) -> Result<&Store> {
        self.store.as_ref().ok_or(ServiceError::NoStore)
    }

    /// The background vector builds (with [`Self::with_vectors`]).
    pub fn vector_builds(&self) -> Option<&Arc<VectorBuilds>> {
        self.vector_builds.as_ref()
    }

    /// Starts computing the passage vectors of shared collection `name` in the background
    /// (nothing without a bi-encoder). Blocking: opens the collection.
    pub fn build_vectors(&self, name: &str) -> Result<()> {
        if let Some(builds) = &self.vector_builds {
            builds.start(name, self.collections.get(name)?);
        }
        Ok(())
    }

    /// Limits every user's turns and searches per minute as `limits` says.
    pub fn with_rate_limits(mut self, limits: &Limits) -> Self {
        self.rates = Some(RateLimiter::new(limits));
        self
    }

    /// Counts a turn or search of `user_id` against the rate limits.
    fn admit(&self, user_id: i64, kind: RateKind) -> Result<()> {
        self.admit_n(user_id, kind, 1)
    }

    /// Counts one search of `user_id` against the rate of searches.
    pub fn admit_searches(&self, user_id: i64) -> Result<()> {
        self.admit(user_id, RateKind::Searches)
    }

    fn admit_n(&self, user_id: i64, kind: RateKind, n: u32) -> Result<()> {
        match &self.rates {
            Some(rates) => rates
                .admit_n(user_id, kind, n, Instant::now())
                .map_err(|refusal| ServiceError::RateLimited {
                    kind,
                    per_minute: refusal.per_minute,
                    retry_after_secs: refusal.retry_after_secs,
                }),
            None => Ok(()),
        }
    }

    /// Counts `turns` turns of `user_id` (a chat request's new turn and the history it
    /// imports) against the turn rate, before anything is stored for them. More turns than
    /// the rate allows in a minute are refused as input (`field` names what holds them):
    /// waiting would not help.
    pub fn admit_turns(&self, user_id: i64, turns: usize, field: &str) -> Result<Admission> {
        let per_minute = self
            .rates
            .as_ref()
            .map_or(0, |r| r.per_minute(RateKind::Turns));
        if per_minute > 0 && turns > per_minute as usize {
            return Err(InvalidInput::new(
                field,
                format!(
                    "stores {turns} turns (its imported history and the new turn), more than the \
                     rate of {per_minute} turns per minute allows"
                ),
            )
            .into());
        }
        self.admit_n(user_id, RateKind::Turns, turns as u32)?;
        Ok(Admission { _counted: () })
    }

    /// The stages (read-only: what is configured).
    pub fn pipeline(&self) -> &TurnPipeline {
        &self.pipeline
    }

    /// Whether dense and hybrid retrieval are served (over collections with passage vectors).
    pub fn has_vectors(&self) -> bool {
        self.vectors.is_some()
    }

    /// The loaded reranking model, if any.
    pub fn reranker(&self) -> Option<&Arc<dyn Reranker>> {
        self.pipeline.reranker.as_ref()
    }

    /// Whether an LLM endpoint is configured (generator and rewriter).
    pub fn has_llm(&self) -> bool {
        self.pipeline.llm.is_some()
    }

    pub fn collections(&self) -> &CollectionRegistry {
        &self.collections
    }

    /// Opens a shared collection (off the async workers: the first open reads the index).
    pub async fn retriever(&self, name: &str) -> Result<Arc<TantivyRetriever>> {
        self.visible_retriever(None, name).await
    }

    /// Opens collection `name` as `user_id` sees it: their own private collection of that name,
    /// else the shared one (`CollectionRegistry::get_visible`, the one visibility rule).
    pub async fn visible_retriever(
        &self,
        user_id: Option<i64>,
        name: &str,
    ) -> Result<Arc<TantivyRetriever>> {
        let registry = self.collections.clone();
        let name = name.to_string();
        Ok(tokio::task::spawn_blocking(move || match user_id {
            Some(user_id) => registry.get_visible(user_id, &name),
            None => registry.get(&name),
        })
        .await
        .map_err(ServiceError::Task)??)
    }

    /// What a turn or search retrieves from in `collection` as `user_id` sees it: the BM25
    /// index, with the passage vectors when `mode` needs them (opened per call, so vectors
    /// finished meanwhile are seen). Without them: BM25 with the reason, or with
    /// [`WithoutVectors::Refuse`] the error naming `convrag embed`.
    pub async fn retrieval_target(
        &self,
        user_id: Option<i64>,
        collection: &str,
        mode: Retrieval,
        without: WithoutVectors,
    ) -> Result<RetrievalTarget> {
        let retriever = self.visible_retriever(user_id, collection).await?;
        if mode == Retrieval::Bm25 {
            return Ok(RetrievalTarget::bm25(collection, retriever));
        }
        let vectors = self.vectors.clone().ok_or_else(|| {
            SettingError::unavailable(
                SettingField::Retrieval,
                format!("{mode} retrieval needs the bi-encoder (run scripts/fetch-models.sh)"),
            )
        })?;
        let (name, bm25) = (collection.to_string(), Arc::clone(&retriever));
        let builds = self.vector_builds.clone();
        let opened = tokio::task::spawn_blocking(move || {
            let stage = vectors.first_stage(&name, Arc::clone(&bm25));
            let building = stage.is_err()
                && matches!(
                    builds.map(|b| b.status(&name, &bm25)),
                    Some(VectorStatus::Building { .. })
                );
            (stage, building)
        })
        .await
        .map_err(ServiceError::Task)?;
        match opened {
            (Ok(stage), _) => Ok(RetrievalTarget {
                first_stage: Some(Arc::new(stage)),
                retrieval: mode,
                ..RetrievalTarget::bm25(collection, retriever)
            }),
            (Err(DenseError::Missing { .. } | DenseError::Incomplete { .. }), building)
                if without == WithoutVectors::Bm25 =>
            {
                let reason = if building {
                    FallbackReason::VectorsBuilding
                } else {
                    FallbackReason::VectorsMissing
                };
                Ok(RetrievalTarget {
                    fallback: Some(RetrievalFallback {
                        requested: mode,
                        reason,
                    }),
                    ..RetrievalTarget::bm25(collection, retriever)
                })
            }
            (Err(e), _) => Err(ServiceError::from(PipelineError::from(e))),
        }
    }
}

/// Proof that a turn was counted against its user's rate ([`TurnService::admit_turns`]).
#[must_use = "a turn is counted in order to begin it"]
pub struct Admission {
    _counted: (),
}
