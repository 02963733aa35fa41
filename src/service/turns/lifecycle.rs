//! The lifecycle of a stored turn: [`TurnService::begin`] takes the conversation's lease and
//! builds the context, [`StartedTurn::run`] runs the stages (reporting events) and commits the
//! turn.

use std::sync::Arc;

use uuid::Uuid;

use super::{Admission, Result, ServiceError, TurnService, WithoutVectors};
use crate::metrics::metrics;
use crate::pipeline::context::ConversationContext;
use crate::pipeline::turn::{
    PassageSource, RankedPassage, TurnEvent, TurnOutput, TurnPipeline, TurnSettings,
};
use crate::service::input;
use crate::store::{IdempotencyKey, KeyLookup, PendingTurn, Store, Turn, TurnSlot};

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

impl TurnService {
    /// Refuses an utterance that is blank, holds a NUL or is longer than the configured limit
    /// (400 naming `field`): every adapter's rule for what a user says.
    pub fn check_utterance(&self, field: &str, utterance: &str) -> Result<()> {
        let limit = self.store()?.limits().utterance_chars;
        Ok(input::required_text(field, utterance, limit)?)
    }

    /// Takes the conversation's lease and prepares the turn: its utterance (the replaced
    /// version's when regenerating), its passage source (the collection opened) and its context.
    /// Nothing is stored until [`StartedTurn::run`] succeeds; dropping the result releases the
    /// lease. The turn is counted against the user's rate first.
    pub async fn begin(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        slot: TurnSlot,
        request: TurnRequest,
    ) -> Result<StartedTurn> {
        let _admission = self.admit_turns(user_id, 1, "utterance")?;
        let pending = self.lease(user_id, conversation_id, slot, &request).await?;
        self.start(pending, request, None).await
    }

    /// As [`TurnService::begin`] for a turn already counted ([`TurnService::admit_turns`]),
    /// with the request's `Idempotency-Key` when it has one. The key is looked up once the
    /// conversation's lease is held: a retry of a turn still running waits for it like any turn
    /// of that conversation, then answers with the turn it stored ([`Begun::Replayed`]), or runs
    /// when it stored nothing. The key is recorded with the turn.
    pub async fn begin_admitted(
        &self,
        _admission: Admission,
        user_id: i64,
        conversation_id: Uuid,
        slot: TurnSlot,
        request: TurnRequest,
        key: Option<IdempotencyKey>,
    ) -> Result<Begun> {
        let pending = self.lease(user_id, conversation_id, slot, &request).await?;
        if let Some(key) = &key {
            if let KeyLookup::Stored(turn) = self.store()?.idempotent_result(user_id, key).await? {
                return Ok(Begun::Replayed(Box::new(turn)));
            }
        }
        let started = self.start(pending, request, key).await?;
        Ok(Begun::Started(Box::new(started)))
    }

    /// The conversation's lease for a turn whose utterance is checked first.
    async fn lease(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        slot: TurnSlot,
        request: &TurnRequest,
    ) -> Result<PendingTurn> {
        if let Some(utterance) = &request.utterance {
            self.check_utterance("utterance", utterance)?;
        }
        Ok(self
            .store()?
            .begin_turn(user_id, conversation_id, slot)
            .await?)
    }

    async fn start(
        &self,
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
            TurnContext::Stored { manual_rewrite } => crate::service::rows::context_from_store(
                &utterance,
                &pending.history,
                &pending.ptkb,
                manual_rewrite,
                pending.instructions.clone(),
            ),
        };
        Ok(StartedTurn {
            pipeline: Arc::clone(&self.pipeline),
            store: self.store()?.clone(),
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
        let mut turn = crate::service::rows::new_turn(
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

    #[tokio::test]
    async fn a_service_without_a_store_refuses_to_begin_a_stored_turn() {
        let service = TurnService::from_config(&crate::config::Config::default(), None).unwrap();
        let request = TurnRequest::new(Some("a question".into()), TurnSettings::default());
        let begun = service.begin(1, Uuid::nil(), TurnSlot::Next, request).await;
        assert!(matches!(begun, Err(ServiceError::NoStore)));
        assert!(matches!(
            service.check_utterance("utterance", "a question"),
            Err(ServiceError::NoStore)
        ));
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
}
