//! The batch engine: topics in parallel, the turns of a topic in order, every turn through
//! [`TurnPipeline`] and stored like a turn of the HTTP API (`begin_turn` → `run` → `commit`).
//!
//! Resuming needs no bookkeeping of its own: a topic is a conversation of the `batch` user with
//! external id `<run name>/<topic id>`, and its stored turns (matched by external turn id, in
//! order) are skipped. A turn is one transaction, so a killed run loses at most the turns it was
//! computing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::stream::{self, StreamExt, TryStreamExt};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use uuid::Uuid;

use super::record::TurnCounts;
use super::{BatchError, Result};
use crate::index::{CollectionRegistry, Retriever, TantivyRetriever};
use crate::pipeline::context::ConversationContext;
use crate::pipeline::turn::{
    context_from_store, PassageSource, RankedPassage, RetrievalTarget, TurnPipeline, TurnSettings,
};
use crate::store::{NewConversation, NewStatement, Store, StoreError, Turn, TurnSlot};

/// The user every batch run's conversations belong to.
pub const BATCH_USER: &str = "batch";

/// One topic: a conversation of turns answered in order.
#[derive(Debug, Clone)]
pub struct TopicJob {
    /// Unique within the run; the conversation's external id is `<run name>/<id>`.
    pub id: String,
    pub title: String,
    /// Collection the topic retrieves from (stored with the conversation).
    pub collection: Option<String>,
    /// PTKB statements as (id, text).
    pub ptkb: Vec<(String, String)>,
    pub turns: Vec<TurnJob>,
}

/// One turn of a topic.
#[derive(Debug, Clone)]
pub struct TurnJob {
    /// The id the submission uses (`9-1_3`, a TREC topic id, `<Conversation_no>_<Turn_no>`).
    pub external_id: String,
    pub utterance: String,
    /// Reference inputs kept with the turn (iKAT `resolved_utterance`, `ptkb_provenance`,
    /// canonical `response`), so the stored record is complete.
    pub reference_rewrite: Option<String>,
    pub reference_ptkb: Option<Vec<String>>,
    pub canonical_response: Option<String>,
    pub context: TurnContext,
    pub passages: TurnPassages,
}

/// What the turn's stages may read.
#[derive(Debug, Clone)]
pub enum TurnContext {
    /// Exactly this (iKAT run-type rules, single-turn topics).
    Given(ConversationContext),
    /// The stored conversation: earlier utterances with convrag's own answers, the PTKB
    /// (QReCC, where no canonical responses are given).
    Stored { manual_rewrite: Option<String> },
}

/// Where the turn's passages come from (when the settings retrieve).
#[derive(Debug, Clone)]
pub enum TurnPassages {
    /// BM25 over the topic's collection.
    Retrieve,
    /// A given ranking, used in its order (TREC RAG AG, iKAT only_response).
    Given(Vec<RankedPassage>),
}

/// Everything a run needs.
pub struct Engine {
    pub store: Store,
    pub user_id: i64,
    pub run_name: String,
    pub pipeline: Arc<TurnPipeline>,
    pub settings: TurnSettings,
    pub registry: CollectionRegistry,
    /// Topics processed at the same time.
    pub jobs: usize,
    /// Fill each turn's ranking up to this many passages from the collection when BM25 finds
    /// fewer (PolEval lines need exactly ten ids); 0: never.
    pub fill_to: usize,
    pub progress: bool,
    fillers: Mutex<HashMap<String, Arc<Vec<RankedPassage>>>>,
}

/// The `batch` user's id, creating the user when missing.
pub async fn batch_user(store: &Store) -> Result<i64> {
    if let Some(u) = store.user_by_name(BATCH_USER).await? {
        return Ok(u.id);
    }
    match store.create_user(BATCH_USER).await {
        Ok((u, _token)) => Ok(u.id),
        // Another process created it meanwhile.
        Err(StoreError::Conflict { .. }) => Ok(store
            .user_by_name(BATCH_USER)
            .await?
            .ok_or(StoreError::NotFound { entity: "user" })?
            .id),
        Err(e) => Err(e.into()),
    }
}

/// Holds PostgreSQL's advisory lock on a run name for as long as it lives, so two processes never
/// compute the same run; the lock goes with the connection, also when the process is killed.
pub struct RunLock {
    _conn: sqlx::PgConnection,
}

impl RunLock {
    pub async fn acquire(store: &Store, run_name: &str) -> Result<RunLock> {
        let mut conn = store.pool().acquire().await?.detach();
        let locked: bool =
            sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtext('convrag batch run ' || $1))")
                .bind(run_name)
                .fetch_one(&mut conn)
                .await?;
        if !locked {
            return Err(BatchError::Resume(format!(
                "run {run_name} is being computed by another convrag process (wait for it, or choose another --run-name)"
            )));
        }
        Ok(RunLock { _conn: conn })
    }
}

impl Engine {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Store,
        user_id: i64,
        run_name: String,
        pipeline: Arc<TurnPipeline>,
        settings: TurnSettings,
        registry: CollectionRegistry,
        jobs: usize,
        progress: bool,
    ) -> Self {
        Engine {
            store,
            user_id,
            run_name,
            pipeline,
            settings,
            registry,
            jobs: jobs.max(1),
            fill_to: 0,
            progress,
            fillers: Mutex::new(HashMap::new()),
        }
    }

    fn external_id(&self, topic: &TopicJob) -> String {
        format!("{}/{}", self.run_name, topic.id)
    }

    /// Stored turns per topic external id (current versions).
    async fn stored_counts(&self) -> Result<HashMap<String, usize>> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT c.external_id, count(t.id) FROM conversations c \
               LEFT JOIN turns t ON t.conversation_id = c.id AND t.is_current \
             WHERE c.user_id = $1 AND left(c.external_id, length($2) + 1) = $2 || '/' \
             GROUP BY c.external_id",
        )
        .bind(self.user_id)
        .bind(&self.run_name)
        .fetch_all(self.store.pool())
        .await?;
        Ok(rows.into_iter().map(|(k, n)| (k, n as usize)).collect())
    }

    /// Computes every turn not stored yet.
    pub async fn run(&self, topics: &[TopicJob]) -> Result<TurnCounts> {
        let stored = self.stored_counts().await?;
        let total: usize = topics.iter().map(|t| t.turns.len()).sum();
        let resumed: usize = topics
            .iter()
            .map(|t| {
                stored
                    .get(&self.external_id(t))
                    .copied()
                    .unwrap_or(0)
                    .min(t.turns.len())
            })
            .sum();
        let bar = if self.progress {
            ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{bar:30}] {pos}/{len} turns, {elapsed} elapsed, ETA {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_message(self.run_name.clone());
        bar.set_position(resumed as u64);
        // The estimate should come from this invocation's pace, not from the resumed turns.
        bar.reset_eta();
        let computed: usize = stream::iter(topics.iter().map(|t| self.run_topic(t, &bar)))
            .buffer_unordered(self.jobs)
            .try_fold(0usize, |acc, n| async move { Ok(acc + n) })
            .await?;
        bar.finish_and_clear();
        Ok(TurnCounts {
            total,
            resumed,
            computed,
        })
    }

    async fn conversation(&self, topic: &TopicJob) -> Result<Uuid> {
        let external = self.external_id(topic);
        if let Some(c) = self
            .store
            .conversation_by_external_id(self.user_id, &external)
            .await?
        {
            return Ok(c.id);
        }
        let new = NewConversation {
            title: topic.title.chars().take(500).collect(),
            external_id: Some(external.clone()),
            collection: topic.collection.clone(),
            ptkb: topic
                .ptkb
                .iter()
                .map(|(id, text)| NewStatement {
                    id: Some(id.clone()),
                    text: text.clone(),
                })
                .collect(),
        };
        match self.store.create_conversation(self.user_id, new).await {
            Ok(c) => Ok(c.id),
            Err(StoreError::Invalid { field, message }) => Err(BatchError::Resume(format!(
                "topic {}: cannot store it as a conversation ({field}: {message})",
                topic.id
            ))),
            Err(e) => Err(e.into()),
        }
    }

    async fn retriever(&self, name: &str) -> Result<Arc<TantivyRetriever>> {
        let registry = self.registry.clone();
        let name = name.to_string();
        tokio::task::spawn_blocking(move || registry.get(&name))
            .await
            .map_err(|e| BatchError::Resume(format!("opening a collection failed: {e}")))?
            .map_err(Into::into)
    }

    /// Computes the topic's missing turns; returns how many.
    async fn run_topic(&self, topic: &TopicJob, bar: &ProgressBar) -> Result<usize> {
        let conversation = self.conversation(topic).await?;
        let stored: Vec<(i32, Option<String>)> = sqlx::query_as(
            "SELECT seq, external_turn_id FROM turns WHERE conversation_id = $1 AND is_current ORDER BY seq",
        )
        .bind(conversation)
        .fetch_all(self.store.pool())
        .await?;
        if stored.len() > topic.turns.len() {
            return Err(BatchError::Resume(format!(
                "topic {}: {} turns are stored, the input has {}",
                topic.id,
                stored.len(),
                topic.turns.len()
            )));
        }
        for (i, (seq, external)) in stored.iter().enumerate() {
            let expected = &topic.turns[i].external_id;
            if *seq != i as i32 + 1 || external.as_deref() != Some(expected.as_str()) {
                return Err(BatchError::Resume(format!(
                    "topic {}: stored turn {seq} is {:?}, the input has {expected:?} there (the conversation was changed outside this run; use --restart)",
                    topic.id,
                    external.as_deref().unwrap_or("(no id)")
                )));
            }
        }
        let target = match (&topic.collection, self.settings.retrieve) {
            (Some(name), true) => Some(RetrievalTarget {
                collection: name.clone(),
                retriever: self.retriever(name).await? as Arc<dyn Retriever>,
            }),
            _ => None,
        };
        let mut computed = 0;
        for turn in &topic.turns[stored.len()..] {
            let pending = self
                .store
                .begin_turn(self.user_id, conversation, TurnSlot::Next)
                .await?;
            let ctx = match &turn.context {
                TurnContext::Given(c) => c.clone(),
                TurnContext::Stored { manual_rewrite } => context_from_store(
                    &turn.utterance,
                    &pending.history,
                    &pending.ptkb,
                    manual_rewrite.clone(),
                ),
            };
            let source = match &turn.passages {
                TurnPassages::Retrieve => target.clone().map(PassageSource::Collection),
                TurnPassages::Given(passages) => Some(PassageSource::Given {
                    collection: topic.collection.clone(),
                    passages: passages.clone(),
                }),
            };
            let failed = |source| BatchError::Turn {
                turn: turn.external_id.clone(),
                source,
            };
            let mut output = self
                .pipeline
                .run(ctx, source, &self.settings, &mut |_| {})
                .await
                .map_err(failed)?;
            let mut filled = 0;
            if self.fill_to > output.passages.len() && self.settings.retrieve {
                if let Some(t) = &target {
                    filled = self.fill(t, &mut output.passages).await?;
                }
            }
            let mut new_turn =
                output.to_new_turn(&turn.utterance, topic.collection.as_deref(), &self.settings);
            new_turn.external_turn_id = Some(turn.external_id.clone());
            new_turn.reference_rewrite = turn.reference_rewrite.clone();
            new_turn.reference_ptkb = turn.reference_ptkb.clone();
            new_turn.canonical_response = turn.canonical_response.clone();
            if filled > 0 {
                if let Some(d) = new_turn.diagnostics.as_object_mut() {
                    d.insert("filled_passages".into(), filled.into());
                }
            }
            pending
                .commit(&self.store, new_turn)
                .await
                .map_err(|e| match e {
                    StoreError::Invalid { field, message } => BatchError::Resume(format!(
                        "turn {}: not stored ({field}: {message})",
                        turn.external_id
                    )),
                    other => other.into(),
                })?;
            computed += 1;
            bar.inc(1);
        }
        Ok(computed)
    }

    /// Appends passages of the collection (smallest ids first, score 0 or the last score when
    /// lower) until the ranking has `fill_to` passages; returns how many were added.
    async fn fill(
        &self,
        target: &RetrievalTarget,
        passages: &mut Vec<RankedPassage>,
    ) -> Result<usize> {
        let fillers = self.fillers_of(&target.collection).await?;
        let floor = passages.last().map_or(0.0, |p| p.score.min(0.0));
        let mut added = 0;
        for f in fillers.iter() {
            if passages.len() >= self.fill_to {
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
        Ok(added)
    }

    /// The `2 × fill_to` passages with the smallest ids of a collection, read once.
    async fn fillers_of(&self, collection: &str) -> Result<Arc<Vec<RankedPassage>>> {
        if let Some(f) = self.fillers.lock().expect("fillers lock").get(collection) {
            return Ok(Arc::clone(f));
        }
        let retriever = self.retriever(collection).await?;
        let wanted = self.fill_to * 2;
        let list = tokio::task::spawn_blocking(move || first_passages(&retriever, wanted))
            .await
            .map_err(|e| BatchError::Resume(format!("reading a collection failed: {e}")))??;
        let list = Arc::new(list);
        self.fillers
            .lock()
            .expect("fillers lock")
            .insert(collection.to_string(), Arc::clone(&list));
        Ok(list)
    }

    /// The stored turns of every topic, in topic order; fails when a topic is incomplete.
    pub async fn stored_turns(&self, topics: &[TopicJob]) -> Result<Vec<Vec<Turn>>> {
        let mut out = Vec::with_capacity(topics.len());
        for topic in topics {
            let external = self.external_id(topic);
            let conversation = self
                .store
                .conversation_by_external_id(self.user_id, &external)
                .await?
                .ok_or_else(|| {
                    BatchError::Resume(format!("topic {}: no stored conversation", topic.id))
                })?;
            let turns = self
                .store
                .list_turns(self.user_id, conversation.id, false)
                .await?;
            let ids: Vec<Option<&str>> = turns
                .iter()
                .map(|t| t.external_turn_id.as_deref())
                .collect();
            let expected: Vec<Option<&str>> = topic
                .turns
                .iter()
                .map(|t| Some(t.external_id.as_str()))
                .collect();
            if ids != expected {
                return Err(BatchError::Resume(format!(
                    "topic {}: the stored turns {ids:?} are not the input's {expected:?}",
                    topic.id
                )));
            }
            out.push(turns);
        }
        Ok(out)
    }
}

/// The `n` passages with the smallest ids: the same whatever the index's segment layout.
fn first_passages(retriever: &TantivyRetriever, n: usize) -> Result<Vec<RankedPassage>> {
    let mut out = Vec::with_capacity(n);
    for id in retriever.smallest_ids(n)? {
        if let Some(h) = retriever.passage(&id)? {
            out.push(RankedPassage {
                id: h.id,
                title: h.title,
                url: h.url,
                text: h.text,
                retrieval_score: 0.0,
                rerank_score: None,
                score: 0.0,
            });
        }
    }
    Ok(out)
}
