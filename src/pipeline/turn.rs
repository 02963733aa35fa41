//! The whole turn: PTKB ranking → rewriting → BM25 retrieval personalized by the selected
//! statements → neural reranking → response generation with citations.
//!
//! [`TurnPipeline`] is the one implementation the HTTP API (`POST .../turns`), the batch runner
//! and the benchmarks call. Every stage is a trait object, so a stage can be swapped (manual
//! rewrites, an LLM generator) without the others knowing. Stages that block (model inference,
//! tantivy) run on tokio's blocking pool; the callers' async threads never wait on them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tracing::Instrument;

use super::context::ConversationContext;
use super::generate::{
    ContextTurn, ExtractiveGenerator, Generation, GenerationEvent, GenerationRequest, Generator,
    Sampling, WordLimit,
};
use super::meaning::{sentence_cache_key, sentence_meaning};
use super::page_examples::{
    at_most_per_page, with_page_examples, ExampleChooser, PagePassage, PER_PAGE,
};
use super::ptkb::{PtkbRanker, PtkbRanking};
use super::query::{SearchQuery, SelectedStatement, TurnQuery};
use super::rewrite::{HistoryRewriter, ManualRewriter, Rewrite, Rewriter};
use super::rewrite_llm::{LlmRewriter, RewriteFallback};
use super::{Passage, PipelineError, Result};
use crate::dense::{FirstStage, FirstStageHit, Retrieval, SourceRanks};
use crate::index::{Hit, Retriever, SearchOptions, WeightedQuery};
use crate::rerank::{Fusion, OwnedPassage, QueryVectors, Reranker};

/// Which generator answers a turn.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum GeneratorChoice {
    Extractive,
    Llm,
}

/// Which rewriter writes a turn's query (a supplied manual rewrite always wins).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RewriterChoice {
    /// The history-aware rewriter ([`HistoryRewriter`]).
    #[default]
    History,
    /// The chat model with `prompts/rewrite.*.md`, falling back to the history-aware rewrite.
    Llm,
}

/// Per-turn settings (stored with the turn, so a regenerated version says how it differed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnSettings {
    /// Run retrieval, reranking and generation; `false` stops after PTKB ranking and rewriting
    /// (`--stages ptkb,rewrite`: needs no collection).
    pub retrieve: bool,
    /// Generate a response (`false`: ranking only, e.g. TREC RAG R runs).
    pub generate: bool,
    /// Which first stage finds the candidates: BM25, the bi-encoder over the collection's
    /// passage vectors, or both fused. Absent in settings recorded before dense retrieval: BM25.
    #[serde(default)]
    pub retrieval: Retrieval,
    /// First-stage candidates; all of them are reranked when `rerank` is on (hybrid retrieval
    /// reranks twice as many: `depth` for each of its two retrievers).
    pub depth: usize,
    pub rerank: bool,
    /// How BM25 and neural scores make the final order (stored as its string, `"weighted:0.2"`).
    pub fusion: Fusion,
    /// Passages kept with the turn (the ranking a run submits), at most `depth`.
    pub passages: usize,
    /// Passages (from the top) the generator sees.
    pub generation_passages: usize,
    pub generator: GeneratorChoice,
    /// Absent in settings recorded before the LLM rewriter existed: the history-aware one.
    #[serde(default)]
    pub rewriter: RewriterChoice,
    pub limit: WordLimit,
    /// Query weight of each selected PTKB statement's content words in the first stage's query
    /// (the rewrite has weight 1; [`super::query`]): personalizes the candidates without letting
    /// a statement outweigh the question.
    pub ptkb_query_weight: f64,
    /// Append the selected statements to the reranking model's query, so the neural order is
    /// personalized too (a bi-encoder's query embedding moves toward the persona).
    pub ptkb_in_rerank_query: bool,
    /// Extractive sentences come with their context (the sentence a "Thus …" leans on, the code
    /// block a "like:" introduces): chat answers, written for a reader, say `Some(true)`;
    /// `None` follows the cross-validated rule (`extractive_stop.json`).
    #[serde(default)]
    pub keep_context: Option<bool>,
    /// The answer's passages are chosen for a reader ([`super::page_examples`]): at most
    /// [`PER_PAGE`] of one page, and the Examples of their first pages. Chat answers; batch runs
    /// rank passages only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub page_examples: bool,
    /// A chat client's sampling parameters for the LLM generator.
    #[serde(default, skip_serializing_if = "Sampling::is_empty")]
    pub sampling: Sampling,
}

impl Default for TurnSettings {
    fn default() -> Self {
        TurnSettings {
            retrieve: true,
            generate: true,
            retrieval: Retrieval::Bm25,
            depth: 100,
            rerank: true,
            fusion: Fusion::RECOMMENDED,
            passages: 10,
            generation_passages: 10,
            generator: GeneratorChoice::Extractive,
            rewriter: RewriterChoice::History,
            limit: WordLimit::IKAT,
            ptkb_query_weight: 0.15,
            ptkb_in_rerank_query: true,
            keep_context: None,
            page_examples: false,
            sampling: Sampling::default(),
        }
    }
}

/// A turn setting, as validation names it (each caller spells it its own way: the API's JSON
/// field, the command line's option).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingField {
    Generator,
    Rewriter,
    Rerank,
    Depth,
    Passages,
    GenerationPassages,
    MaxWords,
    Fusion,
    PtkbQueryWeight,
    Retrieval,
    /// The collection retrieval needs.
    Collection,
}

impl SettingField {
    /// The name of the setting in [`TurnSettings`].
    pub fn as_str(self) -> &'static str {
        match self {
            SettingField::Generator => "generator",
            SettingField::Rewriter => "rewriter",
            SettingField::Rerank => "rerank",
            SettingField::Depth => "depth",
            SettingField::Passages => "passages",
            SettingField::GenerationPassages => "generation_passages",
            SettingField::MaxWords => "max_words",
            SettingField::Fusion => "fusion",
            SettingField::PtkbQueryWeight => "ptkb_query_weight",
            SettingField::Retrieval => "retrieval",
            SettingField::Collection => "collection",
        }
    }
}

/// Why a setting cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {reason}", field.as_str())]
pub struct SettingError {
    pub field: SettingField,
    pub reason: String,
    /// The setting is fine but needs something this process does not have (a model, an LLM).
    pub unavailable: bool,
}

impl SettingError {
    pub fn invalid(field: SettingField, reason: impl Into<String>) -> Self {
        SettingError {
            field,
            reason: reason.into(),
            unavailable: false,
        }
    }

    pub fn unavailable(field: SettingField, reason: impl Into<String>) -> Self {
        SettingError {
            field,
            reason: reason.into(),
            unavailable: true,
        }
    }
}

impl From<SettingError> for PipelineError {
    fn from(e: SettingError) -> Self {
        PipelineError::Setting {
            field: e.field.as_str(),
            reason: e.reason,
        }
    }
}

/// Checks that `value` is in `1..=max`.
pub fn check_range(
    field: SettingField,
    value: usize,
    max: usize,
) -> std::result::Result<(), SettingError> {
    if value == 0 || value > max {
        return Err(SettingError::invalid(
            field,
            format!("must be between 1 and {max}"),
        ));
    }
    Ok(())
}

impl TurnSettings {
    /// Checks limits; the error names the setting.
    pub fn validate(&self) -> std::result::Result<(), SettingError> {
        check_range(SettingField::Depth, self.depth, 1000)?;
        check_range(SettingField::Passages, self.passages, 1000)?;
        check_range(
            SettingField::GenerationPassages,
            self.generation_passages,
            100,
        )?;
        check_range(SettingField::MaxWords, self.limit.max_words, 2000)?;
        if !(0.0..=10.0).contains(&self.ptkb_query_weight) {
            return Err(SettingError::invalid(
                SettingField::PtkbQueryWeight,
                "must be between 0 and 10",
            ));
        }
        Ok(())
    }
}

/// A passage of the turn's final ranking.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankedPassage {
    pub id: String,
    pub title: String,
    pub url: String,
    pub text: String,
    /// The first stage's score: BM25's (in hybrid retrieval too, where a passage BM25 did not
    /// return has the lowest BM25 score among the candidates), or the cosine of dense retrieval.
    pub retrieval_score: f32,
    /// The neural model's score, when reranked.
    pub rerank_score: Option<f32>,
    /// The score the ranking is ordered by.
    pub score: f32,
    /// Where its precomputed vector is ([`Hit::ordinal`]); not part of any output.
    #[serde(skip)]
    pub ordinal: Option<u64>,
    /// Its ranks in the first stage's lists (BM25's, the bi-encoder's, the fused one); stored
    /// with the turn, not part of other outputs.
    #[serde(skip)]
    pub ranks: SourceRanks,
}

impl RankedPassage {
    /// What a neural model reads (as [`Hit::model_text`], so cached embeddings match).
    pub fn model_text(&self) -> String {
        if self.title.trim().is_empty() {
            self.text.clone()
        } else {
            format!("{}\n{}", self.title, self.text)
        }
    }
}

/// Wall-clock milliseconds per stage (absent: the stage did not run).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StageTimings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ptkb: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrieve: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generate: Option<f64>,
    pub total: f64,
}

/// What a turn produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutput {
    pub ptkb: PtkbRanking,
    pub rewrite: Rewrite,
    /// The first stage's query (the rewrite and the selected statements' content words), its
    /// words attributed to their origins.
    pub query: TurnQuery,
    /// With the LLM rewriter: why its rewrite was not used, and what it replied.
    pub rewrite_fallback: Option<RewriteFallback>,
    pub rewrite_llm_output: Option<String>,
    /// The LLM rewriter's token counts, when its server reported them.
    pub rewrite_llm_usage: Option<crate::llm::Usage>,
    pub passages: Vec<RankedPassage>,
    pub generation: Option<Generation>,
    pub timings: StageTimings,
    /// The model that reranked, if any.
    pub reranker: Option<String>,
    /// Earlier turns the context held.
    pub history_turns: usize,
    /// The first stage that ran (when the turn retrieved from a collection).
    pub retrieval: Option<Retrieval>,
    /// Why it is not the one the settings asked for.
    pub retrieval_fallback: Option<RetrievalFallback>,
}

/// Why a turn or search ran BM25 instead of the dense or hybrid retrieval it asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FallbackReason {
    /// The collection's passage vectors are being computed.
    VectorsBuilding,
    /// The collection has no passage vectors, or not for every passage.
    VectorsMissing,
}

/// A dense or hybrid request served by BM25 meanwhile: what was asked, and why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RetrievalFallback {
    pub requested: Retrieval,
    pub reason: FallbackReason,
}

/// Progress of a turn, reported as each stage finishes (the HTTP API streams these).
#[derive(Debug)]
pub enum TurnEvent<'a> {
    Ptkb(&'a PtkbRanking),
    /// The rewrite and the search query made of it.
    Rewrite(&'a Rewrite, &'a SearchQuery),
    Passages(&'a [RankedPassage]),
    Generation(GenerationEvent),
}

/// Where a turn's passages come from.
#[derive(Clone)]
pub enum PassageSource {
    /// BM25 over a collection (then reranking, when on).
    Collection(RetrievalTarget),
    /// A given ranking (TREC RAG AG, iKAT only_response): used as is, in this order; reranked
    /// only when `rerank` is on.
    Given {
        /// Cache key for the model's passage embeddings (the collection they come from).
        collection: Option<String>,
        passages: Vec<RankedPassage>,
    },
}

impl PassageSource {
    /// The key the vectors of these passages' sentences are cached under, when they come from
    /// a collection.
    fn sentence_cache_key(&self) -> Option<String> {
        match self {
            PassageSource::Collection(target) => Some(sentence_cache_key(&target.collection)),
            PassageSource::Given { collection, .. } => {
                collection.as_deref().map(sentence_cache_key)
            }
        }
    }
}

/// A collection to retrieve from.
#[derive(Clone)]
pub struct RetrievalTarget {
    /// Collection name.
    pub collection: String,
    pub retriever: Arc<dyn Retriever>,
    /// The collection with its passage vectors, for dense and hybrid retrieval (`None`: the
    /// turn retrieves with BM25 only).
    pub first_stage: Option<Arc<FirstStage>>,
    /// The first stage that runs.
    pub retrieval: Retrieval,
    /// Set when `retrieval` is BM25 standing in for the mode asked for.
    pub fallback: Option<RetrievalFallback>,
}

impl RetrievalTarget {
    /// BM25 over `retriever`.
    pub fn bm25(collection: impl Into<String>, retriever: Arc<dyn Retriever>) -> Self {
        Self {
            collection: collection.into(),
            retriever,
            first_stage: None,
            retrieval: Retrieval::Bm25,
            fallback: None,
        }
    }

    /// The key of this collection's passage embeddings ([`crate::index::embedding_key`]).
    pub fn embedding_key(&self) -> String {
        crate::index::embedding_key(&self.collection, self.retriever.as_ref())
    }
}

/// The stages of a turn.
#[derive(Clone)]
pub struct TurnPipeline {
    pub ptkb: Arc<dyn PtkbRanker>,
    pub rewriter: Arc<dyn Rewriter>,
    pub reranker: Option<Arc<dyn Reranker>>,
    pub extractive: Arc<dyn Generator>,
    pub llm: Option<Arc<dyn Generator>>,
    /// The rewriter of `rewriter: "llm"` turns, when an LLM endpoint is configured.
    pub llm_rewriter: Option<Arc<LlmRewriter>>,
}

fn ms_since(start: Instant) -> f64 {
    (start.elapsed().as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0
}

/// A stage's blocking task did not finish (it panicked or was cancelled): a bug, not a model
/// being unavailable.
fn join_error(e: tokio::task::JoinError) -> PipelineError {
    PipelineError::Task(e)
}

/// What the rewrite step produced.
struct RewriteStep {
    rewrite: Rewrite,
    fallback: Option<RewriteFallback>,
    llm_output: Option<String>,
    llm_usage: Option<crate::llm::Usage>,
}

impl TurnPipeline {
    /// The default stages: the given PTKB ranker, manual rewrites when supplied else the
    /// history-aware rewriter, the reranker if any, extractive generation and the LLM if any.
    pub fn new(
        ptkb: Arc<dyn PtkbRanker>,
        reranker: Option<Arc<dyn Reranker>>,
        llm: Option<Arc<dyn Generator>>,
    ) -> Self {
        TurnPipeline {
            ptkb,
            rewriter: Arc::new(ManualRewriter {
                fallback: HistoryRewriter::default(),
            }),
            reranker,
            extractive: Arc::new(ExtractiveGenerator::default()),
            llm,
            llm_rewriter: None,
        }
    }

    /// The same stages, with `rewriter` for turns that ask for the LLM rewriter.
    pub fn with_llm_rewriter(mut self, rewriter: Option<Arc<LlmRewriter>>) -> Self {
        self.llm_rewriter = rewriter;
        self
    }

    /// The generator a choice names; `None` when it is the LLM and none is configured.
    pub fn generator(&self, choice: GeneratorChoice) -> Option<&Arc<dyn Generator>> {
        match choice {
            GeneratorChoice::Extractive => Some(&self.extractive),
            GeneratorChoice::Llm => self.llm.as_ref(),
        }
    }

    /// Runs the stages `settings` asks for over `ctx`, reporting each stage's result to
    /// `on_event` as it finishes.
    pub async fn run(
        &self,
        ctx: ConversationContext,
        source: Option<PassageSource>,
        settings: &TurnSettings,
        on_event: &mut (dyn FnMut(TurnEvent<'_>) + Send),
    ) -> Result<TurnOutput> {
        settings.validate()?;
        let llm_rewriter = self.llm_rewriter_for(settings.rewriter)?;
        let started = Instant::now();
        let mut timings = StageTimings::default();
        // The turn's query texts, each embedded once for PTKB ranking, retrieval and reranking.
        let vectors = self.query_vectors();

        let t = Instant::now();
        let (ctx, ptkb) = self
            .rank_ptkb(ctx, vectors.clone())
            .instrument(stage_span("ptkb"))
            .await?;
        timings.ptkb = Some(ms_since(t));
        on_event(TurnEvent::Ptkb(&ptkb));

        let t = Instant::now();
        let step = self
            .rewrite(&ctx, &ptkb, llm_rewriter)
            .instrument(stage_span("rewrite"))
            .await?;
        // One query for every rewriter, so an LLM's rewrite is attributed like the others.
        let selected: Vec<SelectedStatement<'_>> = ptkb
            .selected()
            .map(|s| SelectedStatement {
                id: &s.id,
                text: &s.text,
            })
            .collect();
        let query = TurnQuery::build(
            &ctx,
            &step.rewrite.text,
            &selected,
            settings.ptkb_query_weight as f32,
        );
        timings.rewrite = Some(ms_since(t));
        on_event(TurnEvent::Rewrite(&step.rewrite, &query.shown));

        let mut output = TurnOutput {
            ptkb,
            rewrite: step.rewrite,
            query,
            rewrite_fallback: step.fallback,
            rewrite_llm_output: step.llm_output,
            rewrite_llm_usage: step.llm_usage,
            passages: Vec::new(),
            generation: None,
            timings: StageTimings::default(),
            reranker: None,
            history_turns: ctx.history.len(),
            retrieval: None,
            retrieval_fallback: None,
        };
        if settings.retrieve {
            let source = source.ok_or_else(|| {
                SettingError::invalid(SettingField::Collection, "retrieval needs a collection")
            })?;
            let sentences_key = source.sentence_cache_key();
            self.rank_passages(source, settings, vectors.clone(), &mut output, &mut timings)
                .await?;
            on_event(TurnEvent::Passages(&output.passages));
            if settings.generate {
                let t = Instant::now();
                let generation = self
                    .generate(&ctx, &output, settings, vectors, sentences_key, &mut |e| {
                        on_event(TurnEvent::Generation(e))
                    })
                    .instrument(stage_span("generate"))
                    .await?;
                timings.generate = Some(ms_since(t));
                output.generation = Some(generation);
            }
        }
        timings.total = ms_since(started);
        output.timings = timings;
        Ok(output)
    }

    fn llm_rewriter_for(&self, choice: RewriterChoice) -> Result<Option<Arc<LlmRewriter>>> {
        match choice {
            RewriterChoice::History => Ok(None),
            RewriterChoice::Llm => match &self.llm_rewriter {
                Some(r) => Ok(Some(Arc::clone(r))),
                None => Err(SettingError::invalid(
                    SettingField::Rewriter,
                    "no LLM endpoint is configured (llm.base_url)",
                )
                .into()),
            },
        }
    }

    /// A new turn's (or search's) query vectors, when the reranking model is a bi-encoder.
    pub fn query_vectors(&self) -> Option<Arc<QueryVectors>> {
        self.reranker
            .clone()
            .map(|model| Arc::new(QueryVectors::new(model)))
    }

    /// PTKB ranking: cheap lexically, a model call with the neural ranker (so off the async
    /// workers either way).
    async fn rank_ptkb(
        &self,
        ctx: ConversationContext,
        vectors: Option<Arc<QueryVectors>>,
    ) -> Result<(ConversationContext, PtkbRanking)> {
        let ranker = Arc::clone(&self.ptkb);
        let (ctx, ranking) = tokio::task::spawn_blocking(move || {
            let ranking = match &vectors {
                Some(vectors) => ranker.rank_embedded(&ctx, vectors),
                None => ranker.rank(&ctx),
            };
            (ctx, ranking)
        })
        .await
        .map_err(join_error)?;
        Ok((ctx, ranking?))
    }

    async fn rewrite(
        &self,
        ctx: &ConversationContext,
        ptkb: &PtkbRanking,
        llm_rewriter: Option<Arc<LlmRewriter>>,
    ) -> Result<RewriteStep> {
        let selected: Vec<&str> = ptkb.selected().map(|s| s.text.as_str()).collect();
        let rewrite = self.rewriter.rewrite(ctx, &selected)?;
        match llm_rewriter.filter(|_| rewrite.method != super::rewrite::RewriteMethod::Manual) {
            Some(llm) => {
                let outcome = llm.rewrite(ctx, &selected, rewrite).await?;
                Ok(RewriteStep {
                    rewrite: outcome.rewrite,
                    fallback: outcome.fallback,
                    llm_output: outcome.raw_output,
                    llm_usage: outcome.usage,
                })
            }
            None => Ok(RewriteStep {
                rewrite,
                fallback: None,
                llm_output: None,
                llm_usage: None,
            }),
        }
    }

    /// Retrieval (or the given ranking), reranking when on, cut to `settings.passages`.
    async fn rank_passages(
        &self,
        source: PassageSource,
        settings: &TurnSettings,
        vectors: Option<Arc<QueryVectors>>,
        output: &mut TurnOutput,
        timings: &mut StageTimings,
    ) -> Result<()> {
        let mut pages = None;
        let (collection, candidates) = match source {
            PassageSource::Collection(target) => {
                pages = Some(Arc::clone(&target.retriever));
                // The rewrite at weight 1, each selected statement's content words at
                // `ptkb_query_weight`.
                let query = output.query.weighted();
                let t = Instant::now();
                let depth = candidate_depth(
                    target.retrieval,
                    settings.depth.max(settings.passages),
                    settings.rerank && self.reranker.is_some(),
                );
                let candidates = self
                    .retrieve(&target, query, depth, vectors.clone())
                    .instrument(stage_span("retrieve"))
                    .await?;
                timings.retrieve = Some(ms_since(t));
                output.retrieval = Some(target.retrieval);
                output.retrieval_fallback = target.fallback;
                (Some(target.embedding_key()), candidates)
            }
            PassageSource::Given {
                collection,
                passages,
            } => (collection, passages),
        };
        let model = self.reranker.clone().filter(|_| settings.rerank);
        let mut passages = match model {
            Some(model) if !candidates.is_empty() => {
                let t = Instant::now();
                output.reranker = Some(model.model_id());
                let reranked = rerank_fused(
                    model,
                    rerank_query(output, settings),
                    candidates,
                    collection.clone(),
                    settings.fusion,
                    vectors,
                )
                .instrument(stage_span("rerank"))
                .await?;
                timings.rerank = Some(ms_since(t));
                reranked
            }
            _ => candidates,
        };
        if settings.page_examples {
            passages = at_most_per_page(passages, PER_PAGE, settings.passages);
        }
        if let (true, Some(pages)) = (settings.page_examples, pages) {
            let chooser = ExampleChooser {
                words: output.rewrite.text.clone(),
                model: self.reranker.clone().filter(|_| settings.rerank),
                query: rerank_query(output, settings),
                collection,
            };
            let keep = settings.passages;
            passages = tokio::task::spawn_blocking(move || {
                with_page_examples(pages.as_ref(), passages, keep, &mut |hits| {
                    chooser.choose(hits)
                })
            })
            .await
            .map_err(join_error)??;
        }
        passages.truncate(settings.passages);
        output.passages = passages;
        Ok(())
    }

    /// The first stage's candidates for `query` by `target.retrieval`, best first (on the
    /// blocking pool); the query's vector from `vectors` when they are the bi-encoder's.
    pub async fn retrieve(
        &self,
        target: &RetrievalTarget,
        query: WeightedQuery,
        depth: usize,
        vectors: Option<Arc<QueryVectors>>,
    ) -> Result<Vec<RankedPassage>> {
        let options = SearchOptions::top(depth);
        let mode = target.retrieval;
        let hits: Vec<FirstStageHit> = match (mode, &target.first_stage) {
            (Retrieval::Bm25, _) => {
                let retriever = Arc::clone(&target.retriever);
                let hits =
                    tokio::task::spawn_blocking(move || retriever.search_with(&query, &options))
                        .await
                        .map_err(join_error)??;
                SourceRanks::of_list(mode, hits)
            }
            (mode, Some(stage)) => {
                let stage = Arc::clone(stage);
                tokio::task::spawn_blocking(move || {
                    let vector = match (&vectors, stage.dense_model()) {
                        (Some(v), Some(model)) if v.encodes_for(model) => {
                            v.weighted(&query.parts)?
                        }
                        _ => None,
                    };
                    Ok::<_, PipelineError>(stage.search_ranked(mode, &query, vector, &options)?)
                })
                .await
                .map_err(join_error)??
            }
            (mode, None) => {
                let collection = &target.collection;
                let reason =
                    format!("{mode} retrieval needs the passage vectors of {collection:?}");
                return Err(PipelineError::Setting {
                    field: SettingField::Retrieval.as_str(),
                    reason,
                });
            }
        };
        // Reranking fuses the model's score with BM25's, never with the RRF score, which
        // already holds the bi-encoder's vote. A passage BM25 did not return counts as its
        // lowest candidate, so BM25's scores span the same range as in a BM25 turn.
        let lowest_bm25 = hits
            .iter()
            .filter_map(|c| c.bm25_score)
            .fold(f32::INFINITY, f32::min);
        let lowest_bm25 = if lowest_bm25.is_finite() {
            lowest_bm25
        } else {
            0.0
        };
        Ok(hits
            .into_iter()
            .map(|c| {
                let score = c.hit.score;
                let retrieval_score = match mode {
                    Retrieval::Hybrid => c.bm25_score.unwrap_or(lowest_bm25),
                    Retrieval::Bm25 | Retrieval::Dense => score,
                };
                RankedPassage {
                    ranks: c.ranks,
                    retrieval_score,
                    ..ranked(c.hit, None, score)
                }
            })
            .collect())
    }

    async fn generate(
        &self,
        ctx: &ConversationContext,
        output: &TurnOutput,
        settings: &TurnSettings,
        vectors: Option<Arc<QueryVectors>>,
        sentences_key: Option<String>,
        on_event: &mut (dyn FnMut(GenerationEvent) + Send),
    ) -> Result<Generation> {
        let generator = self.generator(settings.generator).ok_or_else(|| {
            SettingError::invalid(
                SettingField::Generator,
                "no LLM endpoint is configured (llm.base_url)",
            )
        })?;
        let mut request = GenerationRequest {
            query: output.rewrite.text.clone(),
            context: ctx
                .history
                .iter()
                .map(|h| ContextTurn {
                    user: h.utterance.clone(),
                    response: h.response.clone(),
                })
                .collect(),
            passages: output
                .passages
                .iter()
                .take(settings.generation_passages)
                .map(|p| Passage {
                    id: p.id.clone(),
                    title: Some(p.title.clone()).filter(|t| !t.is_empty()),
                    url: Some(p.url.clone()).filter(|u| !u.is_empty()),
                    text: p.text.clone(),
                    score: p.score as f64,
                })
                .collect(),
            limit: settings.limit,
            keep_context: settings.keep_context,
            sampling: settings.sampling.clone(),
            instructions: ctx.instructions.clone(),
            sentence_meaning: None,
        };
        let sentences = generator.sentences_to_weigh(&request);
        let mut encoded = None;
        // Only with the reranker's own query vector: the sentences are all that is encoded.
        if let (Some(model), Some(vectors), false) = (
            self.reranker.clone().filter(|_| settings.rerank),
            vectors,
            sentences.is_empty(),
        ) {
            let query = rerank_query(output, settings);
            let weighed = tokio::task::spawn_blocking(move || {
                sentence_meaning(
                    model.as_ref(),
                    &vectors,
                    &query,
                    sentences,
                    sentences_key.as_deref(),
                )
            })
            .await
            .map_err(join_error)??;
            if let Some(weighed) = weighed {
                request.sentence_meaning = Some(weighed.meaning);
                encoded = Some(weighed.encoded);
            }
        }
        let mut generation = generator.generate_streaming(&request, on_event).await?;
        generation.diagnostics.meaning_encoded = encoded;
        Ok(generation)
    }
}

/// The reranker's query: the rewrite, then the selected statements as written when the
/// settings ask for them.
fn rerank_query(output: &TurnOutput, settings: &TurnSettings) -> String {
    let mut query = output.rewrite.text.clone();
    if settings.ptkb_in_rerank_query {
        for s in output.ptkb.selected() {
            query.push(' ');
            query.push_str(&s.text);
        }
    }
    query
}

/// First-stage candidates to retrieve for `depth`: hybrid retrieval that is reranked takes as
/// many as BM25's and the bi-encoder's top `depth` together, since the fused list's head is
/// where the two disagree and the reranker settles it.
pub fn candidate_depth(retrieval: Retrieval, depth: usize, rerank: bool) -> usize {
    match retrieval {
        Retrieval::Hybrid if rerank => depth.saturating_mul(2),
        _ => depth,
    }
}

/// The candidates reordered by `fusion` of their first-stage scores and `model`'s scores for
/// `query`: each gets its neural score as `rerank_score` and the fused one as `score`. The one
/// reranking of turns and searches.
pub async fn rerank_fused(
    model: Arc<dyn Reranker>,
    query: String,
    candidates: Vec<RankedPassage>,
    collection: Option<String>,
    fusion: Fusion,
    vectors: Option<Arc<QueryVectors>>,
) -> Result<Vec<RankedPassage>> {
    let owned: Vec<OwnedPassage> = candidates
        .iter()
        .map(|p| OwnedPassage {
            id: p.id.clone(),
            text: p.model_text(),
            ordinal: p.ordinal,
        })
        .collect();
    let neural =
        crate::rerank::rerank_blocking_with(model, query, owned, collection, vectors).await?;
    let first: Vec<f32> = candidates.iter().map(|p| p.retrieval_score).collect();
    let fused = fusion.fuse(&first, &neural);
    let mut candidates: Vec<Option<RankedPassage>> = candidates.into_iter().map(Some).collect();
    Ok(crate::rerank::order_by_score(&fused)
        .into_iter()
        .map(|i| {
            let mut p = candidates[i].take().expect("each index once");
            p.rerank_score = Some(neural[i]);
            p.score = fused[i];
            p
        })
        .collect())
}

fn ranked(hit: Hit, rerank_score: Option<f32>, score: f32) -> RankedPassage {
    RankedPassage {
        id: hit.id,
        title: hit.title,
        url: hit.url,
        text: hit.text,
        retrieval_score: hit.score,
        rerank_score,
        score,
        ordinal: hit.ordinal,
        ranks: SourceRanks::default(),
    }
}

impl PagePassage for RankedPassage {
    fn id(&self) -> &str {
        &self.id
    }
    fn score(&self) -> f32 {
        self.score
    }
    fn example(hit: Hit, score: f32, model_score: Option<f32>) -> Self {
        RankedPassage {
            retrieval_score: 0.0,
            ..ranked(hit, model_score, score)
        }
    }
}

/// The tracing span of one stage of a turn (exported as an OpenTelemetry span when traces are).
fn stage_span(stage: &'static str) -> tracing::Span {
    tracing::info_span!("turn_stage", "otel.name" = stage, stage)
}

/// Per-stage timings as a map, for benchmarks that aggregate many turns.
pub fn timings_map(t: &StageTimings) -> BTreeMap<&'static str, f64> {
    let mut m = BTreeMap::new();
    for (name, v) in [
        ("ptkb", t.ptkb),
        ("rewrite", t.rewrite),
        ("retrieve", t.retrieve),
        ("rerank", t.rerank),
        ("generate", t.generate),
    ] {
        if let Some(v) = v {
            m.insert(name, v);
        }
    }
    m.insert("total", t.total);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reranked_hybrid_retrieval_takes_each_retrievers_depth() {
        assert_eq!(candidate_depth(Retrieval::Hybrid, 100, true), 200);
        assert_eq!(candidate_depth(Retrieval::Hybrid, 100, false), 100);
        assert_eq!(candidate_depth(Retrieval::Bm25, 100, true), 100);
        assert_eq!(candidate_depth(Retrieval::Dense, 100, true), 100);
    }
}
