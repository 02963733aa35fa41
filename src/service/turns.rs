//! [`TurnService`]: the turn pipeline as the server, the batch runner and the benchmark use it.
//!
//! It owns (a) the assembly of the stages from the [`Config`] and the loaded reranker, (b) the
//! resolution of requested settings into [`TurnSettings`] with the defaults rules (the LLM when
//! one is configured, reranking when a model is loaded) and one validation, (c) the lifecycle of
//! a stored turn: [`TurnService::begin`] takes the conversation's lease and builds the context,
//! [`StartedTurn::run`] runs the stages (reporting events) and commits the turn, and (d) search,
//! which retrieves and reranks exactly as a turn does.

use std::sync::Arc;
use std::time::Instant;

use uuid::Uuid;

use super::input::{self, InvalidInput};
use super::rate::{RateKind, RateLimiter};
use super::vectors::VectorBuilds;
use super::Result;
use crate::config::{Config, Limits};
use crate::dense::{DenseError, Retrieval, VectorSearch};
use crate::index::{CollectionRegistry, IndexError, TantivyRetriever, WeightedQuery};
use crate::metrics::metrics;
use crate::pipeline::context::ConversationContext;
use crate::pipeline::generate::WordLimit;
use crate::pipeline::turn::{
    candidate_depth, check_range, rerank_fused, FallbackReason, GeneratorChoice, PassageSource,
    RankedPassage, RetrievalFallback, RetrievalTarget, RewriterChoice, SettingError, SettingField,
    TurnEvent, TurnOutput, TurnPipeline, TurnSettings,
};
use crate::pipeline::PipelineError;
use crate::rerank::{Fusion, Reranker};
use crate::store::{IdempotencyKey, KeyLookup, PendingTurn, Store, StoreError, Turn, TurnSlot};

/// Errors of the turn service.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A requested setting is out of range or needs what this process lacks.
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// Neither an utterance nor an earlier version to take it from.
    #[error("utterance: is required")]
    MissingUtterance,
    /// Retrieval was asked for but the conversation has no collection.
    #[error("collection: the conversation has no collection to retrieve from")]
    NoCollection,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The LLM configuration cannot be used.
    #[error("the LLM configuration (llm.* / CONVRAG_LLM_*) is unusable: {0}")]
    LlmConfig(#[source] PipelineError),
    /// The user started more turns or searches this minute than the limit allows.
    #[error("{}: rate limit of {per_minute} per minute; retry in {retry_after_secs} s", kind.as_str())]
    RateLimited {
        kind: RateKind,
        per_minute: u32,
        retry_after_secs: u64,
    },
    /// What the caller sent breaks the input contract ([`super::input`]).
    #[error(transparent)]
    Input(#[from] InvalidInput),
    /// A blocking task panicked or was cancelled.
    #[error("a task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
}

/// Settings a request asks for; `None` takes the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestedSettings {
    pub generator: Option<GeneratorChoice>,
    pub rewriter: Option<RewriterChoice>,
    pub rerank: Option<bool>,
    pub depth: Option<usize>,
    pub passages: Option<usize>,
    pub generation_passages: Option<usize>,
    pub max_words: Option<usize>,
    pub fusion: Option<Fusion>,
    pub retrieval: Option<Retrieval>,
}

/// The largest values a caller accepts (a track's limits, the API's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingLimits {
    pub passages: usize,
    pub max_words: usize,
}

impl SettingLimits {
    /// `POST .../turns`.
    pub const API: SettingLimits = SettingLimits {
        passages: 100,
        max_words: 2000,
    };
}

/// What a turn's stages may read.
#[derive(Debug, Clone)]
pub enum TurnContext {
    /// Exactly this (iKAT run-type rules, single-turn topics).
    Given(ConversationContext),
    /// The stored conversation: earlier utterances with their canonical response when one was
    /// supplied, else convrag's own answer, and the PTKB as this position sees it.
    Stored { manual_rewrite: Option<String> },
}

/// Where a turn's passages come from (when the settings retrieve).
#[derive(Debug, Clone)]
pub enum TurnPassages {
    /// BM25 over the conversation's collection.
    Retrieve,
    /// A given ranking, used in its order (TREC RAG AG, iKAT only_response).
    Given(Vec<RankedPassage>),
}

/// Reference inputs kept with a batch turn, so the stored record is complete.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnReferences {
    /// The id the submission uses (`9-1_3`, a TREC topic id, ...).
    pub external_turn_id: Option<String>,
    pub reference_rewrite: Option<String>,
    pub reference_ptkb: Option<Vec<String>>,
    pub canonical_response: Option<String>,
}

/// What dense or hybrid retrieval does on a collection whose passage vectors are not ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WithoutVectors {
    /// Serve BM25 meanwhile and say so (turns and searches of the server).
    #[default]
    Bm25,
    /// Refuse, naming `convrag embed` (batch runs: a submission is exactly what was asked).
    Refuse,
}

/// Passages that top up a retrieved ranking shorter than `to` (PolEval lines need ten ids).
#[derive(Debug, Clone)]
pub struct Filler {
    pub to: usize,
    pub passages: Arc<Vec<RankedPassage>>,
}

/// One turn to run and store.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    /// What the user said; `None` when regenerating: the replaced version's utterance.
    pub utterance: Option<String>,
    pub context: TurnContext,
    pub passages: TurnPassages,
    pub settings: TurnSettings,
    pub references: TurnReferences,
    pub filler: Option<Filler>,
    pub without_vectors: WithoutVectors,
}

impl TurnRequest {
    /// A turn of a stored conversation with `settings` and nothing given.
    pub fn new(utterance: Option<String>, settings: TurnSettings) -> Self {
        TurnRequest {
            utterance,
            context: TurnContext::Stored {
                manual_rewrite: None,
            },
            passages: TurnPassages::Retrieve,
            settings,
            references: TurnReferences::default(),
            filler: None,
            without_vectors: WithoutVectors::Bm25,
        }
    }
}

/// A search of one collection.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// Whose private collections the name may mean (`None`: shared collections only).
    pub user_id: Option<i64>,
    pub collection: String,
    pub query: String,
    /// Results returned.
    pub k: usize,
    /// First-stage candidates the model reranks (at least `k`).
    pub depth: usize,
    pub rerank: bool,
    pub retrieval: Retrieval,
}

impl SearchRequest {
    /// Most results one search returns, and most first-stage candidates it reranks.
    pub const MAX_K: usize = 1000;
    pub const MAX_DEPTH: usize = 1000;

    /// The search contract every adapter applies: a query with text and no NUL (named
    /// `query_field`, the adapter's name for it), `k` and `depth` within their bounds.
    pub fn check(&self, query_field: &str) -> std::result::Result<(), InvalidInput> {
        input::required_text(query_field, &self.query, usize::MAX)?;
        input::in_range("k", self.k, Self::MAX_K)?;
        if self.depth > Self::MAX_DEPTH {
            return Err(InvalidInput::new(
                "depth",
                format!("must be at most {}", Self::MAX_DEPTH),
            ));
        }
        Ok(())
    }
}

/// What a search found, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutput {
    pub passages: Vec<RankedPassage>,
    /// The first stage that ran.
    pub retrieval: Retrieval,
    /// Set when BM25 ran instead of the mode asked for.
    pub fallback: Option<RetrievalFallback>,
    pub retrieve_ms: f64,
    pub rerank_ms: Option<f64>,
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

    /// The settings of a chat turn before the request's own: the defaults with an answer of
    /// `chat_max_words` words (a reader's length, not a track's submission limit) whose
    /// sentences come with their context.
    pub fn chat_defaults(&self) -> TurnSettings {
        let defaults = TurnSettings::default();
        TurnSettings {
            limit: WordLimit {
                max_words: self.chat_max_words,
                ..defaults.limit
            },
            keep_context: Some(true),
            page_examples: true,
            ..defaults
        }
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
                    Some(super::vectors::VectorStatus::Building { .. })
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

    /// `requested` on top of `base`, within `limits`: the generator defaults to the LLM when
    /// one is configured, reranking to on when a model is loaded (and `base` reranks); the
    /// depth to at least the passages kept; the generator's passages to at most those.
    pub fn resolve(
        &self,
        requested: &RequestedSettings,
        base: TurnSettings,
        limits: SettingLimits,
    ) -> std::result::Result<TurnSettings, SettingError> {
        const NO_LLM: &str = "llm needs an LLM endpoint (llm.base_url / CONVRAG_LLM_BASE_URL)";
        let generator = requested.generator.unwrap_or(if self.has_llm() {
            GeneratorChoice::Llm
        } else {
            GeneratorChoice::Extractive
        });
        if generator == GeneratorChoice::Llm && !self.has_llm() {
            return Err(SettingError::invalid(SettingField::Generator, NO_LLM));
        }
        let rewriter = requested.rewriter.unwrap_or(base.rewriter);
        if rewriter == RewriterChoice::Llm && self.pipeline.llm_rewriter.is_none() {
            return Err(SettingError::invalid(SettingField::Rewriter, NO_LLM));
        }
        let model = self.reranker().is_some();
        let rerank = requested.rerank.unwrap_or(base.rerank && model);
        if rerank && !model {
            return Err(SettingError::unavailable(
                SettingField::Rerank,
                "no reranking model is loaded (run scripts/fetch-models.sh)",
            ));
        }
        let retrieval = requested.retrieval.unwrap_or(base.retrieval);
        if retrieval != Retrieval::Bm25 && self.vectors.is_none() {
            return Err(SettingError::unavailable(
                SettingField::Retrieval,
                format!("{retrieval} retrieval needs the bi-encoder (run scripts/fetch-models.sh)"),
            ));
        }
        let passages = requested.passages.unwrap_or(base.passages);
        check_range(SettingField::Passages, passages, limits.passages)?;
        let max_words = requested
            .max_words
            .unwrap_or(base.limit.max_words.min(limits.max_words));
        check_range(SettingField::MaxWords, max_words, limits.max_words)?;
        let settings = TurnSettings {
            generator,
            rewriter,
            rerank,
            depth: requested.depth.unwrap_or(base.depth.max(passages)),
            passages,
            generation_passages: requested
                .generation_passages
                .unwrap_or(base.generation_passages.min(passages)),
            limit: WordLimit {
                max_words,
                measure: base.limit.measure,
            },
            fusion: requested.fusion.unwrap_or(match retrieval {
                Retrieval::Hybrid => Fusion::RECOMMENDED_HYBRID,
                Retrieval::Bm25 | Retrieval::Dense => base.fusion,
            }),
            retrieval,
            ..base
        };
        settings.validate()?;
        Ok(settings)
    }

    /// Refuses an utterance that is blank, holds a NUL or is longer than the configured limit
    /// (400 naming `field`): every adapter's rule for what a user says.
    pub fn check_utterance(store: &Store, field: &str, utterance: &str) -> Result<()> {
        Ok(input::required_text(
            field,
            utterance,
            store.limits().utterance_chars,
        )?)
    }

    /// Takes the conversation's lease and prepares the turn: its utterance (the replaced
    /// version's when regenerating), its passage source (the collection opened) and its context.
    /// Nothing is stored until [`StartedTurn::run`] succeeds; dropping the result releases the
    /// lease.
    pub async fn begin(
        &self,
        store: &Store,
        user_id: i64,
        conversation_id: Uuid,
        slot: TurnSlot,
        request: TurnRequest,
    ) -> Result<StartedTurn> {
        let admission = self.admit_turns(user_id, 1, "utterance")?;
        self.begin_admitted(admission, store, user_id, conversation_id, slot, request)
            .await
    }

    /// As [`TurnService::begin`] for a turn already counted ([`TurnService::admit_turns`]).
    pub async fn begin_admitted(
        &self,
        _admission: Admission,
        store: &Store,
        user_id: i64,
        conversation_id: Uuid,
        slot: TurnSlot,
        request: TurnRequest,
    ) -> Result<StartedTurn> {
        if let Some(utterance) = &request.utterance {
            Self::check_utterance(store, "utterance", utterance)?;
        }
        let pending = store.begin_turn(user_id, conversation_id, slot).await?;
        self.start(store, pending, request, None).await
    }

    /// As [`TurnService::begin`] for a request with an `Idempotency-Key`. The key is looked up
    /// once the conversation's lease is held: a retry of a turn still running waits for it like
    /// any turn of that conversation, then answers with the turn it stored
    /// ([`Begun::Replayed`]), or runs when it stored nothing. The key is recorded with the turn.
    pub async fn begin_keyed(
        &self,
        store: &Store,
        user_id: i64,
        conversation_id: Uuid,
        slot: TurnSlot,
        request: TurnRequest,
        key: IdempotencyKey,
    ) -> Result<Begun> {
        let admission = self.admit_turns(user_id, 1, "utterance")?;
        self.begin_keyed_admitted(
            admission,
            store,
            user_id,
            conversation_id,
            slot,
            request,
            key,
        )
        .await
    }

    /// As [`TurnService::begin_keyed`] for a turn already counted.
    #[allow(clippy::too_many_arguments)]
    pub async fn begin_keyed_admitted(
        &self,
        _admission: Admission,
        store: &Store,
        user_id: i64,
        conversation_id: Uuid,
        slot: TurnSlot,
        request: TurnRequest,
        key: IdempotencyKey,
    ) -> Result<Begun> {
        if let Some(utterance) = &request.utterance {
            Self::check_utterance(store, "utterance", utterance)?;
        }
        let pending = store.begin_turn(user_id, conversation_id, slot).await?;
        if let KeyLookup::Stored(turn) = store.idempotent_result(user_id, &key).await? {
            return Ok(Begun::Replayed(Box::new(turn)));
        }
        let started = self.start(store, pending, request, Some(key)).await?;
        Ok(Begun::Started(Box::new(started)))
    }

    async fn start(
        &self,
        store: &Store,
        pending: PendingTurn,
        request: TurnRequest,
        key: Option<IdempotencyKey>,
    ) -> Result<StartedTurn> {
        let utterance = match (request.utterance, &pending.replaced_utterance) {
            (Some(u), _) => u,
            (None, Some(u)) => u.clone(),
            (None, None) => return Err(ServiceError::MissingUtterance),
        };
        let source = match request.passages {
            TurnPassages::Retrieve if request.settings.retrieve => {
                let collection = pending
                    .collection
                    .clone()
                    .ok_or(ServiceError::NoCollection)?;
                let target = self
                    .retrieval_target(
                        Some(pending.user_id()),
                        &collection,
                        request.settings.retrieval,
                        request.without_vectors,
                    )
                    .await?;
                Some(PassageSource::Collection(target))
            }
            TurnPassages::Retrieve => None,
            TurnPassages::Given(passages) => Some(PassageSource::Given {
                collection: pending.collection.clone(),
                passages,
            }),
        };
        let ctx = match request.context {
            TurnContext::Given(ctx) => ctx,
            TurnContext::Stored { manual_rewrite } => super::rows::context_from_store(
                &utterance,
                &pending.history,
                &pending.ptkb,
                manual_rewrite,
                pending.instructions.clone(),
            ),
        };
        Ok(StartedTurn {
            pipeline: Arc::clone(&self.pipeline),
            store: store.clone(),
            pending,
            utterance,
            ctx,
            source,
            settings: request.settings,
            references: request.references,
            filler: request.filler,
            key,
        })
    }

    /// Runs the stages over a context that is not stored (benchmarks, evaluation).
    pub async fn run_unstored(
        &self,
        ctx: ConversationContext,
        source: Option<PassageSource>,
        settings: &TurnSettings,
        on_event: &mut (dyn FnMut(TurnEvent<'_>) + Send),
    ) -> Result<TurnOutput> {
        Ok(self.pipeline.run(ctx, source, settings, on_event).await?)
    }

    /// [`TurnService::search`] on behalf of `user_id`, within the user's rate of searches.
    pub async fn search_as(&self, user_id: i64, request: &SearchRequest) -> Result<SearchOutput> {
        self.admit(user_id, RateKind::Searches)?;
        self.search(request).await
    }

    /// The first stage for the query (BM25 meanwhile when dense or hybrid is asked of a
    /// collection whose vectors are not ready), reranked (when asked) exactly as a turn whose
    /// rewrite is the query and that selected no statement: same candidates, same model query,
    /// same fusion.
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchOutput> {
        let model = match (request.rerank, self.reranker()) {
            (false, _) => None,
            (true, Some(model)) => Some(Arc::clone(model)),
            (true, None) => return Err(SettingError::unavailable(
                SettingField::Rerank,
                "no reranking model is loaded (run scripts/fetch-models.sh, see CONVRAG_MODEL_DIR)",
            )
            .into()),
        };
        let target = self
            .retrieval_target(
                request.user_id,
                &request.collection,
                request.retrieval,
                WithoutVectors::Bm25,
            )
            .await?;
        let depth = match model {
            Some(_) => candidate_depth(target.retrieval, request.depth.max(request.k), true),
            None => request.k,
        };
        // The query embedded once for dense retrieval and reranking.
        let vectors = self.pipeline.query_vectors();
        let started = Instant::now();
        let candidates = self
            .pipeline
            .retrieve(
                &target,
                WeightedQuery::text(&request.query),
                depth,
                vectors.clone(),
            )
            .await?;
        let retrieve_ms = started.elapsed().as_secs_f64() * 1000.0;
        let (mut passages, rerank_ms) = match model {
            Some(model) if !candidates.is_empty() => {
                let started = Instant::now();
                let reranked = rerank_fused(
                    model,
                    request.query.clone(),
                    candidates,
                    Some(target.embedding_key()),
                    target.retrieval.recommended_fusion(),
                    vectors,
                )
                .await?;
                (reranked, Some(started.elapsed().as_secs_f64() * 1000.0))
            }
            _ => (candidates, None),
        };
        passages.truncate(request.k);
        Ok(SearchOutput {
            passages,
            retrieval: target.retrieval,
            fallback: target.fallback,
            retrieve_ms,
            rerank_ms,
        })
    }
}

/// Proof that a turn was counted against its user's rate ([`TurnService::admit_turns`]).
#[must_use = "a turn is counted in order to begin it"]
pub struct Admission {
    _counted: (),
}

/// A turn begun: the conversation's lease is held and the context read.
pub struct StartedTurn {
    pipeline: Arc<TurnPipeline>,
    store: Store,
    pending: PendingTurn,
    utterance: String,
    ctx: ConversationContext,
    source: Option<PassageSource>,
    settings: TurnSettings,
    references: TurnReferences,
    filler: Option<Filler>,
    key: Option<IdempotencyKey>,
}

/// A keyed turn: begun, or already stored by an earlier request with the same key and body.
pub enum Begun {
    Started(Box<StartedTurn>),
    Replayed(Box<Turn>),
}

impl StartedTurn {
    /// The position the turn will have in its conversation.
    pub fn seq(&self) -> i32 {
        self.pending.seq
    }

    /// The collection the turn retrieves from (the conversation's).
    pub fn collection(&self) -> Option<&str> {
        self.pending.collection.as_deref()
    }

    pub fn settings(&self) -> &TurnSettings {
        &self.settings
    }

    /// The id the turn will be stored under.
    pub fn turn_id(&self) -> Uuid {
        self.pending.turn_id
    }

    /// The turn's commit also makes its provisional chat conversation permanent.
    pub fn confirm_chat_on_commit(&mut self) {
        self.pending.confirm_chat = true;
    }

    /// Runs the stages, reporting each to `on_event`, and stores the whole turn atomically.
    pub async fn run(self, on_event: &mut (dyn FnMut(TurnEvent<'_>) + Send)) -> Result<Turn> {
        let span = tracing::info_span!("turn", "otel.name" = "turn");
        let result = tracing::Instrument::instrument(self.run_and_store(on_event), span).await;
        let outcome = if result.is_ok() { "answered" } else { "failed" };
        metrics().turns.with_label_values(&[outcome]).inc();
        result
    }

    async fn run_and_store(self, on_event: &mut (dyn FnMut(TurnEvent<'_>) + Send)) -> Result<Turn> {
        let retrieved = matches!(self.source, Some(PassageSource::Collection(_)));
        let mut output = self
            .pipeline
            .run(self.ctx, self.source, &self.settings, on_event)
            .await?;
        record_stages(&output);
        let filled = match &self.filler {
            Some(filler) if retrieved => fill_ranking(&mut output.passages, filler),
            _ => 0,
        };
        let collection = self.pending.collection.clone();
        let mut turn = super::rows::new_turn(
            &output,
            &self.utterance,
            collection.as_deref(),
            &self.settings,
        );
        let TurnReferences {
            external_turn_id,
            reference_rewrite,
            reference_ptkb,
            canonical_response,
        } = self.references;
        turn.external_turn_id = external_turn_id;
        turn.reference_rewrite = reference_rewrite;
        turn.reference_ptkb = reference_ptkb;
        turn.canonical_response = canonical_response;
        if filled > 0 {
            if let Some(d) = turn.diagnostics.as_object_mut() {
                d.insert("filled_passages".into(), filled.into());
            }
        }
        let committed = self
            .pending
            .commit_keyed(&self.store, turn, self.key.as_ref())
            .await?;
        Ok(committed.into_turn())
    }
}

/// Creates the LLM series at zero, so that dashboards and rules see them before the first
/// fallback (a series that appears only on its first event hides the rate until then).
pub fn register_llm_series() {
    let m = metrics();
    for stage in ["rewrite", "generate"] {
        for outcome in ["ok", "fallback"] {
            m.llm_requests.with_label_values(&[stage, outcome]);
        }
    }
    for kind in crate::pipeline::rewrite_llm::RewriteFallbackKind::ALL {
        m.llm_fallbacks
            .with_label_values(&["rewrite", &kind.to_string()]);
    }
    for kind in crate::pipeline::generate::FallbackKind::ALL {
        m.llm_fallbacks
            .with_label_values(&["generate", kind.as_str()]);
    }
    for outcome in ["answered", "failed"] {
        m.turns.with_label_values(&[outcome]);
    }
}

/// Records a finished turn's stage latencies and its LLM calls (used or fallen back from).
fn record_stages(output: &TurnOutput) {
    let m = metrics();
    let t = &output.timings;
    for (stage, ms) in [
        ("ptkb", t.ptkb),
        ("rewrite", t.rewrite),
        ("retrieve", t.retrieve),
        ("rerank", t.rerank),
        ("generate", t.generate),
        ("total", Some(t.total)),
    ] {
        if let Some(ms) = ms {
            m.turn_stage_duration
                .with_label_values(&[stage])
                .observe(ms / 1000.0);
        }
    }
    if output.rewrite_llm_output.is_some() || output.rewrite_fallback.is_some() {
        record_llm(
            "rewrite",
            output.rewrite_fallback.as_ref().map(|f| f.kind.to_string()),
        );
    }
    if let Some(d) = output.generation.as_ref().map(|g| &g.diagnostics) {
        if d.llm.is_some() || d.fallback.is_some() {
            record_llm(
                "generate",
                d.fallback.as_ref().map(|f| f.kind.as_str().to_string()),
            );
        }
    }
}

fn record_llm(stage: &str, fallback: Option<String>) {
    let m = metrics();
    let outcome = if fallback.is_some() { "fallback" } else { "ok" };
    m.llm_requests.with_label_values(&[stage, outcome]).inc();
    if let Some(reason) = fallback {
        m.llm_fallbacks.with_label_values(&[stage, &reason]).inc();
    }
}

/// Appends filler passages not ranked yet (score 0, or the last score when lower) until the
/// ranking has `filler.to` passages; returns how many were added.
fn fill_ranking(passages: &mut Vec<RankedPassage>, filler: &Filler) -> usize {
    let floor = passages.last().map_or(0.0, |p| p.score.min(0.0));
    let mut added = 0;
    for f in filler.passages.iter() {
        if passages.len() >= filler.to {
            break;
        }
        if passages.iter().any(|p| p.id == f.id) {
            continue;
        }
        passages.push(RankedPassage {
            score: floor,
            ..f.clone()
        });
        added += 1;
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passage(id: &str, score: f32) -> RankedPassage {
        RankedPassage {
            id: id.into(),
            title: String::new(),
            url: String::new(),
            text: id.into(),
            retrieval_score: score,
            rerank_score: None,
            score,
            ordinal: None,
            ranks: Default::default(),
        }
    }

    #[test]
    fn fill_tops_up_with_unranked_passages() {
        let mut ranking = vec![passage("b", 2.0)];
        let filler = Filler {
            to: 3,
            passages: Arc::new(vec![
                passage("a", 0.0),
                passage("b", 0.0),
                passage("c", 0.0),
            ]),
        };
        assert_eq!(fill_ranking(&mut ranking, &filler), 2);
        let ids: Vec<&str> = ranking.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["b", "a", "c"]);
        assert_eq!(ranking[2].score, 0.0);
    }

    fn service(config: &Config) -> TurnService {
        TurnService::from_config(config, None).unwrap()
    }

    #[test]
    fn defaults_follow_what_is_loaded() {
        let config = Config::default();
        let s = service(&config)
            .resolve(
                &RequestedSettings::default(),
                TurnSettings::default(),
                SettingLimits::API,
            )
            .unwrap();
        assert_eq!(s.generator, GeneratorChoice::Extractive);
        assert!(!s.rerank, "no model loaded");
        assert_eq!(s.depth, 100);
    }

    #[test]
    fn validation_names_the_field() {
        let config = Config::default();
        let svc = service(&config);
        let check = |requested: RequestedSettings| {
            svc.resolve(&requested, TurnSettings::default(), SettingLimits::API)
                .unwrap_err()
        };
        let e = check(RequestedSettings {
            rerank: Some(true),
            ..Default::default()
        });
        assert_eq!((e.field, e.unavailable), (SettingField::Rerank, true));
        let e = check(RequestedSettings {
            passages: Some(101),
            ..Default::default()
        });
        assert_eq!(e.field, SettingField::Passages);
        assert_eq!(e.reason, "must be between 1 and 100");
        let e = check(RequestedSettings {
            depth: Some(0),
            ..Default::default()
        });
        assert_eq!(e.field, SettingField::Depth);
        let e = check(RequestedSettings {
            generator: Some(GeneratorChoice::Llm),
            ..Default::default()
        });
        assert_eq!((e.field, e.unavailable), (SettingField::Generator, false));
    }
}
