//! The batch engine: topics in parallel, the turns of a topic in order, every turn through
//! [`TurnService`] and stored like a turn of the HTTP API (`begin` → `run`, which commits).
//!
//! Resuming needs no bookkeeping of its own: a topic is a conversation of the `batch` user with
//! external id `<run name>/<topic id>`, and its stored turns (matched by external turn id, in
//! order) are skipped. A turn is one transaction, so a killed run loses at most the turns it was
//! computing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::{self, StreamExt, TryStreamExt};
use uuid::Uuid;

use super::record::TurnCounts;
use super::{BatchError, Result};
use crate::index::{Retriever, TantivyRetriever};
use crate::pipeline::turn::{RankedPassage, TurnSettings};
use crate::progress::SharedProgress;
use crate::service::{Filler, TurnReferences, TurnRequest, TurnService, WithoutVectors};
use crate::store::{
    NewConversation, NewStatement, RunConversations, Store, StoreError, Turn, TurnSlot,
};

pub use crate::service::{TurnContext, TurnPassages};

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

impl TopicJob {
    /// The external ids of its turns, in order: what a resumed run finds stored.
    fn turn_ids(&self) -> Vec<&str> {
        self.turns.iter().map(|t| t.external_id.as_str()).collect()
    }
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

/// Everything a run needs.
pub struct Engine {
    pub store: Store,
    pub user_id: i64,
    pub run_name: String,
    pub service: Arc<TurnService>,
    pub settings: TurnSettings,
    /// Topics processed at the same time.
    pub jobs: usize,
    /// Fill each turn's ranking up to this many passages from the collection when BM25 finds
    /// fewer (PolEval lines need exactly ten ids); 0: never.
    pub fill_to: usize,
    pub progress: SharedProgress,
    conversations: RunConversations,
    fillers: Mutex<HashMap<String, Arc<Vec<RankedPassage>>>>,
}

/// One of the processes computing a run together (`--worker`): topics are claimed through
/// PostgreSQL leases (see `store::batch_workers`), so workers may run on any machine.
#[derive(Debug, Clone)]
pub struct Worker {
    /// Names the worker in the leases and in what other workers print.
    pub id: String,
    /// How long a claim lasts unless renewed; renewed every third of it while the worker lives.
    pub lease: Duration,
}

/// How long a worker waits before asking again when every open topic is leased by another.
const CLAIM_POLL: Duration = Duration::from_millis(500);

/// The id of the user a run belongs to: `name` (an existing user, so that person sees the run
/// in the page), or the `batch` user (created when missing).
pub async fn run_owner(store: &Store, name: Option<&str>) -> Result<i64> {
    let Some(name) = name else {
        return batch_user(store).await;
    };
    match store.user_by_name(name).await? {
        Some(u) => Ok(u.id),
        None => Err(super::option(
            "--user",
            format!("no user named {name:?} (`convrag user create {name}` creates one)"),
        )),
    }
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

impl Engine {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Store,
        user_id: i64,
        run_name: String,
        service: Arc<TurnService>,
        settings: TurnSettings,
        jobs: usize,
        progress: SharedProgress,
    ) -> Self {
        Engine {
            conversations: store.run_conversations(user_id, &run_name),
            store,
            user_id,
            run_name,
            service,
            settings,
            jobs: jobs.max(1),
            fill_to: 0,
            progress,
            fillers: Mutex::new(HashMap::new()),
        }
    }

    /// Counts the turns in total and stored already, and starts the progress from them.
    async fn start_progress(&self, topics: &[TopicJob]) -> Result<(usize, usize)> {
        let stored = self.conversations.turn_counts().await?;
        let total: usize = topics.iter().map(|t| t.turns.len()).sum();
        let resumed: usize = topics
            .iter()
            .map(|t| stored.get(&t.id).copied().unwrap_or(0).min(t.turns.len()))
            .sum();
        self.progress.set_message(self.run_name.clone());
        self.progress.set_length(total as u64);
        self.progress.set_position(resumed as u64);
        Ok((total, resumed))
    }

    /// Computes every turn not stored yet.
    pub async fn run(&self, topics: &[TopicJob]) -> Result<TurnCounts> {
        let (total, resumed) = self.start_progress(topics).await?;
        let computed = stream::iter(topics.iter().map(|t| self.run_topic(t)))
            .buffer_unordered(self.jobs)
            .try_fold(0usize, |acc, n| async move { Ok(acc + n) })
            .await;
        self.progress.finish();
        Ok(TurnCounts {
            total,
            resumed,
            computed: computed?,
        })
    }

    /// Computes, as one of several workers, the topics this worker claims until every topic of
    /// the run is done (by any worker). `resumed` counts the turns this worker did not compute.
    pub async fn run_as_worker(&self, topics: &[TopicJob], worker: &Worker) -> Result<TurnCounts> {
        let ids: Vec<String> = topics.iter().map(|t| t.id.clone()).collect();
        self.store
            .add_batch_topics(self.user_id, &self.run_name, &ids)
            .await?;
        let (total, _) = self.start_progress(topics).await?;
        let by_id: HashMap<&str, &TopicJob> = topics.iter().map(|t| (t.id.as_str(), t)).collect();
        let work = stream::iter((0..self.jobs).map(|_| self.claim_topics(&by_id, worker)))
            .buffer_unordered(self.jobs)
            .try_fold(0usize, |acc, n| async move { Ok(acc + n) });
        let computed = tokio::select! {
            r = work => r,
            e = self.renew_leases(worker) => Err(e),
        };
        self.progress.finish();
        let computed = computed?;
        Ok(TurnCounts {
            total,
            resumed: total - computed,
            computed,
        })
    }

    /// Claims and computes topics one after the other; returns the turns computed.
    async fn claim_topics(
        &self,
        by_id: &HashMap<&str, &TopicJob>,
        worker: &Worker,
    ) -> Result<usize> {
        let mut computed = 0;
        loop {
            let claim = self
                .store
                .claim_batch_topic(self.user_id, &self.run_name, &worker.id, worker.lease)
                .await?;
            let Some(claim) = claim else {
                if self
                    .store
                    .open_batch_topics(self.user_id, &self.run_name)
                    .await?
                    == 0
                {
                    return Ok(computed);
                }
                tokio::time::sleep(CLAIM_POLL).await;
                continue;
            };
            let topic = by_id.get(claim.topic_id.as_str()).ok_or_else(|| {
                BatchError::Resume(format!(
                    "run {}: topic {} is listed in the database but not in this worker's input",
                    self.run_name, claim.topic_id
                ))
            })?;
            if let Some(from) = &claim.taken_from {
                tracing::warn!(run = %self.run_name, topic = %topic.id, from = %from, "took over a topic whose lease ran out");
            }
            computed += match self.run_topic(topic).await {
                Ok(n) => n,
                Err(e @ BatchError::TurnTaken { .. }) => {
                    // Given back: whoever claims it next continues after the stored turns.
                    tracing::warn!(run = %self.run_name, error = %e, "another worker computed this topic too");
                    self.store
                        .release_batch_topic(self.user_id, &self.run_name, &worker.id, &topic.id)
                        .await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let finished = self
                .store
                .finish_batch_topic(self.user_id, &self.run_name, &worker.id, &topic.id)
                .await?;
            if !finished {
                tracing::warn!(run = %self.run_name, topic = %topic.id, "the topic's lease ran out before it was finished; another worker holds it");
            }
        }
    }

    /// Renews this worker's leases every third of the lease until it fails; returns the failure.
    async fn renew_leases(&self, worker: &Worker) -> BatchError {
        loop {
            tokio::time::sleep(worker.lease / 3).await;
            if let Err(e) = self
                .store
                .renew_batch_leases(self.user_id, &self.run_name, &worker.id, worker.lease)
                .await
            {
                return e.into();
            }
        }
    }

    async fn conversation(&self, topic: &TopicJob) -> Result<Uuid> {
        let new = async {
            Ok::<_, BatchError>(NewConversation {
                title: topic.title.chars().take(500).collect(),
                external_id: None,
                collection: topic.collection.clone(),
                instructions: None,
                ptkb: topic
                    .ptkb
                    .iter()
                    .map(|(id, text)| NewStatement {
                        id: Some(id.clone()),
                        text: text.clone(),
                    })
                    .collect(),
            })
        };
        self.conversations.find_or_create(&topic.id, new).await
    }

    /// Computes the topic's missing turns; returns how many.
    async fn run_topic(&self, topic: &TopicJob) -> Result<usize> {
        let conversation = self.conversation(topic).await?;
        let ids = self.conversations.turn_ids(conversation).await?;
        let ids: Vec<(i32, Option<&str>)> = ids.iter().map(|(s, e)| (*s, e.as_deref())).collect();
        let done = self
            .conversations
            .resume_point(&topic.id, &ids, &topic.turn_ids())?;
        let filler = match &topic.collection {
            Some(name) if self.fill_to > 0 && self.settings.retrieve => Some(Filler {
                to: self.fill_to,
                passages: self.fillers_of(name).await?,
            }),
            _ => None,
        };
        let mut computed = 0;
        for (seq, turn) in (done as i32 + 1..).zip(&topic.turns[done..]) {
            let request = TurnRequest {
                context: turn.context.clone(),
                passages: turn.passages.clone(),
                references: TurnReferences {
                    external_turn_id: Some(turn.external_id.clone()),
                    reference_rewrite: turn.reference_rewrite.clone(),
                    reference_ptkb: turn.reference_ptkb.clone(),
                    canonical_response: turn.canonical_response.clone(),
                },
                filler: filler.clone(),
                ..TurnRequest::new(Some(turn.utterance.clone()), self.settings.clone())
            };
            let position = TurnPosition {
                conversation,
                topic: &topic.id,
                seq,
            };
            store_turn(&self.service, self.user_id, position, request).await?;
            computed += 1;
            self.progress.inc(1);
        }
        Ok(computed)
    }

    /// The `2 × fill_to` passages with the smallest ids of a collection, read once.
    async fn fillers_of(&self, collection: &str) -> Result<Arc<Vec<RankedPassage>>> {
        if let Some(f) = self.fillers.lock().expect("fillers lock").get(collection) {
            return Ok(Arc::clone(f));
        }
        let retriever = self.service.retriever(collection).await?;
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
            let conversation = self.conversations.find(&topic.id).await?.ok_or_else(|| {
                BatchError::Resume(format!("topic {}: no stored conversation", topic.id))
            })?;
            let turns = self
                .store
                .list_turns(self.user_id, conversation.id, false)
                .await?;
            let ids: Vec<(i32, Option<&str>)> = turns
                .iter()
                .map(|t| (t.seq, t.external_turn_id.as_deref()))
                .collect();
            let expected = topic.turn_ids();
            let done = self
                .conversations
                .resume_point(&topic.id, &ids, &expected)?;
            if done < expected.len() {
                return Err(BatchError::Resume(format!(
                    "topic {}: {done} of its {} turns are stored",
                    topic.id,
                    expected.len()
                )));
            }
            out.push(turns);
        }
        Ok(out)
    }
}

/// Where a run's turn is stored: its topic's conversation, at position `seq`.
pub(crate) struct TurnPosition<'a> {
    pub conversation: Uuid,
    pub topic: &'a str,
    pub seq: i32,
}

/// Computes a run's turn through the turn service and stores it like a turn of the HTTP API;
/// errors name the turn by its external id.
pub(crate) async fn store_turn(
    service: &TurnService,
    user_id: i64,
    at: TurnPosition<'_>,
    mut request: TurnRequest,
) -> Result<Turn> {
    // A submission is exactly the retrieval it names.
    request.without_vectors = WithoutVectors::Refuse;
    let turn = request.references.external_turn_id.clone();
    let named = |e| super::service_error(turn.as_deref(), e);
    let started = service
        .begin(user_id, at.conversation, TurnSlot::Next, request)
        .await
        .map_err(named)?;
    // The conversation is locked now: a turn stored since the caller read its turns is visible,
    // and this one is dropped (rolled back) instead of duplicating it.
    if started.seq() != at.seq {
        return Err(BatchError::TurnTaken {
            topic: at.topic.to_string(),
            seq: at.seq,
        });
    }
    started.run(&mut |_| {}).await.map_err(named)
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
                ordinal: h.ordinal,
                ranks: Default::default(),
            });
        }
    }
    Ok(out)
}
