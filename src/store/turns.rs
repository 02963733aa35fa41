//! Turns: the utterance and everything each pipeline stage produced for it, stored atomically.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::idempotency::{self, IdempotencyKey};
use super::lease::next_seq;
use super::lease::{fence_and_clear, Lease};
use super::ptkb::visible_at;
use super::{require_text, Result, Store, StoreError};

/// A PTKB statement as ranked for one turn.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankedStatement {
    pub id: String,
    pub text: String,
    pub score: f64,
    pub rank: i32,
    pub selected: bool,
}

/// A passage of a turn's provenance, in final rank order: as the pipeline hands it to the store
/// and as the store gives it back.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, sqlx::FromRow)]
pub struct TurnPassage {
    /// 1-based; a turn's passages are ranked 1..n in order.
    pub rank: i32,
    pub passage_id: String,
    pub collection: Option<String>,
    pub retrieval_score: Option<f64>,
    pub rerank_score: Option<f64>,
    pub score: f64,
    pub used: bool,
    pub title: Option<String>,
    pub url: Option<String>,
    pub text: Option<String>,
    /// Its rank in BM25's first-stage list (`None`: BM25 did not run or did not return it).
    pub bm25_rank: Option<i32>,
    /// Its rank in the bi-encoder's first-stage list.
    pub dense_rank: Option<i32>,
    /// Its rank in the fused (hybrid) first-stage list.
    pub fused_rank: Option<i32>,
}

/// A response sentence and the ranks (1-based, into the turn's passages) it cites, in order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sentence {
    pub text: String,
    pub citations: Vec<i32>,
}

/// A stored turn with all its stage outputs (the row of `turns`, then what [`assemble`] adds).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, sqlx::FromRow)]
pub struct Turn {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub seq: i32,
    pub version: i32,
    pub is_current: bool,
    pub external_turn_id: Option<String>,
    pub utterance: String,
    pub reference_rewrite: Option<String>,
    pub reference_ptkb: Option<Vec<String>>,
    pub canonical_response: Option<String>,
    pub rewritten_utterance: Option<String>,
    pub response_text: Option<String>,
    pub generator: Option<String>,
    pub settings: serde_json::Value,
    pub timings_ms: serde_json::Value,
    pub diagnostics: serde_json::Value,
    pub created_at: DateTime<Utc>,
    #[sqlx(skip)]
    pub ptkb_ranking: Vec<RankedStatement>,
    #[sqlx(skip)]
    pub passages: Vec<TurnPassage>,
    #[sqlx(skip)]
    pub sentences: Vec<Sentence>,
}

/// What the pipeline hands to the store for one turn.
#[derive(Debug, Clone, Default)]
pub struct NewTurn {
    pub external_turn_id: Option<String>,
    pub utterance: String,
    pub reference_rewrite: Option<String>,
    pub reference_ptkb: Option<Vec<String>>,
    pub canonical_response: Option<String>,
    pub rewritten_utterance: Option<String>,
    pub response_text: Option<String>,
    pub generator: Option<String>,
    pub settings: serde_json::Value,
    pub timings_ms: serde_json::Value,
    pub diagnostics: serde_json::Value,
    /// Statement ids in rank order with score and selection.
    pub ptkb_ranking: Vec<NewRankedStatement>,
    /// Passages in rank order, ranked 1..n.
    pub passages: Vec<TurnPassage>,
    pub sentences: Vec<Sentence>,
}

#[derive(Debug, Clone)]
pub struct NewRankedStatement {
    pub statement_id: String,
    pub score: f64,
    pub selected: bool,
}

/// Where a new turn goes: a new position, or a new version of an existing one.
#[derive(Debug, Clone, Copy)]
pub enum TurnSlot {
    Next,
    Regenerate { seq: i32 },
}

fn check_new_turn(turn: &NewTurn) -> Result<()> {
    require_text("utterance", &turn.utterance, 10_000)?;
    // Citations name passages by rank.
    if let Some((i, p)) = (1..).zip(&turn.passages).find(|(i, p)| p.rank != *i) {
        return Err(StoreError::Invalid {
            field: "passages",
            message: format!(
                "passage {:?} is ranked {} at position {i}: ranks are 1..n in order",
                p.passage_id, p.rank
            ),
        });
    }
    let n = turn.passages.len() as i32;
    for (i, sentence) in turn.sentences.iter().enumerate() {
        require_text("sentences", &sentence.text, 100_000)?;
        for &rank in &sentence.citations {
            if rank < 1 || rank > n {
                return Err(StoreError::Invalid {
                    field: "sentences",
                    message: format!(
                        "sentence {i} cites passage rank {rank}, but the turn has {n} passages"
                    ),
                });
            }
        }
    }
    for score in turn
        .ptkb_ranking
        .iter()
        .map(|s| s.score)
        .chain(turn.passages.iter().map(|p| p.score))
    {
        if !score.is_finite() {
            return Err(StoreError::Invalid {
                field: "score",
                message: "scores must be finite numbers".to_string(),
            });
        }
    }
    Ok(())
}

/// An earlier turn as the pipeline's context sees it (current version only).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct HistoryEntry {
    pub seq: i32,
    pub utterance: String,
    pub response_text: Option<String>,
    pub canonical_response: Option<String>,
}

/// A turn being computed. It holds its conversation's lease (see [`super::lease`]) from
/// [`Store::begin_turn`] until [`PendingTurn::commit`], but no database connection: two turns of
/// one conversation (or a turn and a PTKB edit) are serialized, and a later turn always sees the
/// earlier one. Dropping it releases the lease and stores nothing.
pub struct PendingTurn {
    lease: Lease,
    user_id: i64,
    conversation_id: Uuid,
    /// Position of the turn (1-based) and its version there.
    pub seq: i32,
    pub version: i32,
    /// The conversation's collection.
    pub collection: Option<String>,
    /// The conversation's instructions.
    pub instructions: Option<String>,
    /// Current versions of the turns before `seq`, oldest first.
    pub history: Vec<HistoryEntry>,
    /// The PTKB as this turn position sees it.
    pub ptkb: Vec<super::Statement>,
    /// Regeneration: the utterance of the version being replaced.
    pub replaced_utterance: Option<String>,
    /// The commit also makes the provisional chat conversation permanent (its first answer).
    pub confirm_chat: bool,
    /// The id the turn is stored under, chosen at the start so a streamed answer can name it
    /// before it is stored.
    pub turn_id: Uuid,
}

impl Store {
    /// Takes the conversation's lease and reads, in one short transaction, what a new turn at
    /// `slot` sees (see [`PendingTurn`]).
    pub async fn begin_turn(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        slot: TurnSlot,
    ) -> Result<PendingTurn> {
        let lease = self.acquire_lease(user_id, conversation_id).await?;
        let mut tx = self.pool().begin().await?;
        let (seq, version, replaced_utterance) = match slot {
            TurnSlot::Next => (next_seq(&mut tx, conversation_id).await?, 1, None),
            TurnSlot::Regenerate { seq } => {
                let row: Option<(i32, String)> = sqlx::query_as(
                    "SELECT (SELECT max(version) FROM turns WHERE conversation_id = $1 AND seq = $2), \
                       utterance FROM turns WHERE conversation_id = $1 AND seq = $2 AND is_current",
                )
                .bind(conversation_id)
                .bind(seq)
                .fetch_optional(&mut *tx)
                .await?;
                let (max, utterance) = row.ok_or(StoreError::NotFound { entity: "turn" })?;
                (seq, max + 1, Some(utterance))
            }
        };
        let (collection, instructions): (Option<String>, Option<String>) =
            sqlx::query_as("SELECT collection, instructions FROM conversations WHERE id = $1")
                .bind(conversation_id)
                .fetch_one(&mut *tx)
                .await?;
        let history: Vec<HistoryEntry> = sqlx::query_as(
            "SELECT seq, utterance, response_text, canonical_response FROM turns \
             WHERE conversation_id = $1 AND is_current AND seq < $2 ORDER BY seq",
        )
        .bind(conversation_id)
        .bind(seq)
        .fetch_all(&mut *tx)
        .await?;
        let ptkb = visible_at(&mut tx, conversation_id, seq).await?;
        tx.commit().await?;
        Ok(PendingTurn {
            lease,
            user_id,
            conversation_id,
            seq,
            version,
            collection,
            instructions,
            history,
            ptkb,
            replaced_utterance,
            confirm_chat: false,
            turn_id: Uuid::new_v4(),
        })
    }

    /// Stores a whole turn in one transaction, under the conversation's lease (so two turns of one
    /// conversation never interleave). With `TurnSlot::Regenerate` the earlier version stays stored
    /// but is no longer current.
    pub async fn insert_turn(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        slot: TurnSlot,
        turn: NewTurn,
    ) -> Result<Turn> {
        check_new_turn(&turn)?;
        self.begin_turn(user_id, conversation_id, slot)
            .await?
            .commit(self, turn)
            .await
    }
}

type Tx = sqlx::Transaction<'static, sqlx::Postgres>;

/// A unique-key violation as the refused input (the checks before writing catch the known
/// cases; this is the database's word for any other).
fn duplicate(field: &'static str, message: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |e| match super::sqlstate(&e).as_deref() {
        Some("23505") => StoreError::Invalid {
            field,
            message: message.to_string(),
        },
        _ => e.into(),
    }
}

/// The first item whose key was seen before.
fn first_repeat<'a, T, K: Eq + std::hash::Hash>(
    items: &'a [T],
    key: impl Fn(&'a T) -> K,
) -> Option<&'a T> {
    let mut seen = std::collections::HashSet::new();
    items.iter().find(|item| !seen.insert(key(item)))
}

/// What a commit stored.
#[derive(Debug, Clone, PartialEq)]
pub enum Committed {
    /// This turn, now stored.
    Stored(Turn),
    /// An earlier request with the same `Idempotency-Key` and body stored this turn first; this
    /// one stored nothing.
    Replayed(Turn),
}

impl Committed {
    pub fn into_turn(self) -> Turn {
        match self {
            Committed::Stored(t) | Committed::Replayed(t) => t,
        }
    }
}

impl PendingTurn {
    /// The user whose conversation this is (whose private collections the turn may read).
    pub fn user_id(&self) -> i64 {
        self.user_id
    }

    /// Writes the turn and releases the conversation. On error nothing is stored.
    pub async fn commit(self, store: &Store, turn: NewTurn) -> Result<Turn> {
        Ok(self.commit_keyed(store, turn, None).await?.into_turn())
    }

    /// As [`PendingTurn::commit`], recording the stored turn under `key` in the same
    /// transaction. Everything the answer needs is read before `COMMIT`, so once the commit is
    /// acknowledged the result no longer depends on the database: an error means nothing was
    /// stored, except when the connection is lost during `COMMIT` itself (outcome unknown; a
    /// retry with the same key answers with the stored turn, or runs the turn if none was).
    pub async fn commit_keyed(
        mut self,
        store: &Store,
        turn: NewTurn,
        key: Option<&IdempotencyKey>,
    ) -> Result<Committed> {
        check_new_turn(&turn)?;
        let (user_id, conversation_id, seq, version) =
            (self.user_id, self.conversation_id, self.seq, self.version);
        let mut tx = store.pool().begin().await?;
        fence_and_clear(&mut tx, user_id, conversation_id, &self.lease).await?;
        check_position_free(&mut tx, conversation_id, seq, version).await?;
        if version > 1 {
            retire_current(&mut tx, conversation_id, seq).await?;
        }
        let id = self.turn_id;
        insert_turn_row(&mut tx, id, conversation_id, seq, version, &turn).await?;
        insert_ptkb_ranking(&mut tx, id, conversation_id, seq, &turn.ptkb_ranking).await?;
        insert_passages(&mut tx, id, &turn.passages).await?;
        insert_sentences(&mut tx, id, &turn.sentences).await?;
        if self.confirm_chat {
            sqlx::query(
                "UPDATE chat_conversations SET provisional = false WHERE conversation_id = $1",
            )
            .bind(conversation_id)
            .execute(&mut *tx)
            .await?;
        }
        let stored = turn_in(&mut tx, conversation_id, id).await?;
        if let Some(key) = key {
            if let Some(earlier) =
                idempotency::record(&mut tx, store, user_id, key, conversation_id, &stored).await?
            {
                return Ok(Committed::Replayed(earlier)); // dropping `tx` rolls this turn back
            }
        }
        tx.commit().await?;
        self.lease.mark_released();
        Ok(Committed::Stored(stored))
    }
}

/// Under the lease nobody else writes the conversation's turns; this is the fencing's second
/// half: the position this turn read at `begin` is still free.
async fn check_position_free(
    tx: &mut Tx,
    conversation_id: Uuid,
    seq: i32,
    version: i32,
) -> Result<()> {
    let max: Option<i32> = sqlx::query_scalar(
        "SELECT max(version) FROM turns WHERE conversation_id = $1 AND seq = $2 AND version >= $3",
    )
    .bind(conversation_id)
    .bind(seq)
    .bind(version)
    .fetch_one(&mut **tx)
    .await?;
    match max {
        None => Ok(()),
        Some(_) => Err(StoreError::Conflict {
            field: "seq",
            message: format!("turn position {seq} (version {version}) was taken meanwhile"),
        }),
    }
}

/// One stored turn read through `tx` (so before its commit).
async fn turn_in(tx: &mut Tx, conversation_id: Uuid, turn_id: Uuid) -> Result<Turn> {
    let row: Turn = sqlx::query_as(&format!(
        "{SELECT_TURN} WHERE conversation_id = $1 AND id = $2"
    ))
    .bind(conversation_id)
    .bind(turn_id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(StoreError::NotFound { entity: "turn" })?;
    Ok(assemble(tx, vec![row]).await?.remove(0))
}

/// The earlier versions at `seq` stay stored but are no longer current.
async fn retire_current(tx: &mut Tx, conversation_id: Uuid, seq: i32) -> Result<()> {
    sqlx::query("UPDATE turns SET is_current = false WHERE conversation_id = $1 AND seq = $2")
        .bind(conversation_id)
        .bind(seq)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn insert_turn_row(
    tx: &mut Tx,
    id: Uuid,
    conversation_id: Uuid,
    seq: i32,
    version: i32,
    turn: &NewTurn,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO turns (id, conversation_id, seq, version, is_current, external_turn_id, utterance, \
           reference_rewrite, reference_ptkb, canonical_response, rewritten_utterance, response_text, \
           generator, settings, timings_ms, diagnostics) \
         VALUES ($1, $2, $3, $4, true, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    )
    .bind(id)
    .bind(conversation_id)
    .bind(seq)
    .bind(version)
    .bind(&turn.external_turn_id)
    .bind(&turn.utterance)
    .bind(&turn.reference_rewrite)
    .bind(&turn.reference_ptkb)
    .bind(&turn.canonical_response)
    .bind(&turn.rewritten_utterance)
    .bind(&turn.response_text)
    .bind(&turn.generator)
    .bind(json_or_empty(&turn.settings))
    .bind(json_or_empty(&turn.timings_ms))
    .bind(json_or_empty(&turn.diagnostics))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The ranking, in one statement; it refers to the statement versions this position sees.
async fn insert_ptkb_ranking(
    tx: &mut Tx,
    turn_id: Uuid,
    conversation_id: Uuid,
    seq: i32,
    ranking: &[NewRankedStatement],
) -> Result<()> {
    if let Some(r) = first_repeat(ranking, |r| r.statement_id.as_str()) {
        return Err(StoreError::Invalid {
            field: "ptkb_ranking",
            message: format!("statement {:?} is ranked twice", r.statement_id),
        });
    }
    let visible = visible_at(tx, conversation_id, seq).await?;
    let by_id: HashMap<&str, i64> = visible.iter().map(|s| (s.id.as_str(), s.row_id)).collect();
    let mut rows = Vec::with_capacity(ranking.len());
    for ranked in ranking {
        let row = by_id
            .get(ranked.statement_id.as_str())
            .ok_or_else(|| StoreError::Invalid {
                field: "ptkb_ranking",
                message: format!(
                    "statement {:?} is not in the PTKB seen by this turn",
                    ranked.statement_id
                ),
            })?;
        rows.push(*row);
    }
    let ranks: Vec<i32> = (1..=ranking.len() as i32).collect();
    let scores: Vec<f64> = ranking.iter().map(|r| r.score).collect();
    let selected: Vec<bool> = ranking.iter().map(|r| r.selected).collect();
    sqlx::query(
        "INSERT INTO turn_ptkb_rankings (turn_id, conversation_id, rank, statement_row, score, selected) \
         SELECT $1, $2, * FROM UNNEST($3::int4[], $4::int8[], $5::float8[], $6::bool[])",
    )
    .bind(turn_id)
    .bind(conversation_id)
    .bind(&ranks)
    .bind(&rows)
    .bind(&scores)
    .bind(&selected)
    .execute(&mut **tx)
    .await
    .map_err(duplicate("ptkb_ranking", "a statement is ranked twice"))?;
    Ok(())
}

/// The passages in rank order, in one statement.
async fn insert_passages(tx: &mut Tx, turn_id: Uuid, passages: &[TurnPassage]) -> Result<()> {
    if let Some(p) = first_repeat(passages, |p| p.passage_id.as_str()) {
        return Err(StoreError::Invalid {
            field: "passages",
            message: format!("passage {:?} appears twice", p.passage_id),
        });
    }
    let column = |f: fn(&TurnPassage) -> Option<String>| -> Vec<Option<String>> {
        passages.iter().map(f).collect()
    };
    let ranks: Vec<i32> = passages.iter().map(|p| p.rank).collect();
    let ids: Vec<&str> = passages.iter().map(|p| p.passage_id.as_str()).collect();
    let retrieval: Vec<Option<f64>> = passages.iter().map(|p| p.retrieval_score).collect();
    let rerank: Vec<Option<f64>> = passages.iter().map(|p| p.rerank_score).collect();
    let scores: Vec<f64> = passages.iter().map(|p| p.score).collect();
    let used: Vec<bool> = passages.iter().map(|p| p.used).collect();
    let rank_column = |f: fn(&TurnPassage) -> Option<i32>| -> Vec<Option<i32>> {
        passages.iter().map(f).collect()
    };
    sqlx::query(
        "INSERT INTO turn_passages (turn_id, rank, passage_id, collection, retrieval_score, rerank_score, \
           score, used, title, url, text, bm25_rank, dense_rank, fused_rank) \
         SELECT $1, * FROM UNNEST($2::int4[], $3::text[], $4::text[], $5::float8[], $6::float8[], \
           $7::float8[], $8::bool[], $9::text[], $10::text[], $11::text[], $12::int4[], $13::int4[], \
           $14::int4[])",
    )
    .bind(turn_id)
    .bind(&ranks)
    .bind(&ids)
    .bind(column(|p| p.collection.clone()))
    .bind(&retrieval)
    .bind(&rerank)
    .bind(&scores)
    .bind(&used)
    .bind(column(|p| p.title.clone()))
    .bind(column(|p| p.url.clone()))
    .bind(column(|p| p.text.clone()))
    .bind(rank_column(|p| p.bm25_rank))
    .bind(rank_column(|p| p.dense_rank))
    .bind(rank_column(|p| p.fused_rank))
    .execute(&mut **tx)
    .await
    .map_err(duplicate("passages", "a passage appears twice"))?;
    Ok(())
}

/// The sentences and their citations, one statement each.
async fn insert_sentences(tx: &mut Tx, turn_id: Uuid, sentences: &[Sentence]) -> Result<()> {
    for (position, sentence) in sentences.iter().enumerate() {
        if let Some(rank) = first_repeat(&sentence.citations, |r| *r) {
            return Err(StoreError::Invalid {
                field: "sentences",
                message: format!("sentence {position} cites passage {rank} twice"),
            });
        }
    }
    let positions: Vec<i32> = (0..sentences.len() as i32).collect();
    let texts: Vec<&str> = sentences.iter().map(|s| s.text.as_str()).collect();
    sqlx::query(
        "INSERT INTO response_sentences (turn_id, position, text) \
         SELECT $1, * FROM UNNEST($2::int4[], $3::text[])",
    )
    .bind(turn_id)
    .bind(&positions)
    .bind(&texts)
    .execute(&mut **tx)
    .await?;
    let (mut cited_by, mut order, mut ranks) = (Vec::new(), Vec::new(), Vec::new());
    for (position, sentence) in sentences.iter().enumerate() {
        for (i, rank) in sentence.citations.iter().enumerate() {
            cited_by.push(position as i32);
            order.push(i as i32);
            ranks.push(*rank);
        }
    }
    sqlx::query(
        "INSERT INTO sentence_citations (turn_id, sentence_position, citation_order, passage_rank) \
         SELECT $1, * FROM UNNEST($2::int4[], $3::int4[], $4::int4[])",
    )
    .bind(turn_id)
    .bind(&cited_by)
    .bind(&order)
    .bind(&ranks)
    .execute(&mut **tx)
    .await
    .map_err(duplicate("sentences", "a sentence cites a passage twice"))?;
    Ok(())
}

impl Store {
    /// The conversation's turns in order; only current versions unless `all_versions`.
    pub async fn list_turns(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        all_versions: bool,
    ) -> Result<Vec<Turn>> {
        self.conversation(user_id, conversation_id).await?;
        let rows: Vec<Turn> = sqlx::query_as(&format!(
            "{SELECT_TURN} WHERE conversation_id = $1 AND ($2 OR is_current) ORDER BY seq, version"
        ))
        .bind(conversation_id)
        .bind(all_versions)
        .fetch_all(self.db())
        .await?;
        // One transaction, so that through PgBouncer every read runs on one server connection.
        let mut tx = self.pool().begin().await?;
        let turns = assemble(&mut tx, rows).await?;
        tx.commit().await?;
        Ok(turns)
    }

    /// One turn (any version) of one of the user's conversations.
    /// One of the user's turns by its id alone (another user's is not found).
    pub async fn turn_by_id(&self, user_id: i64, turn_id: Uuid) -> Result<Turn> {
        let conversation_id: Option<Uuid> = sqlx::query_scalar(
            "SELECT t.conversation_id FROM turns t JOIN conversations c ON c.id = t.conversation_id \
             WHERE t.id = $1 AND c.user_id = $2",
        )
        .bind(turn_id)
        .bind(user_id)
        .fetch_optional(self.db())
        .await?;
        let conversation_id = conversation_id.ok_or(StoreError::NotFound { entity: "turn" })?;
        self.turn(user_id, conversation_id, turn_id).await
    }

    pub async fn turn(&self, user_id: i64, conversation_id: Uuid, turn_id: Uuid) -> Result<Turn> {
        self.conversation(user_id, conversation_id).await?;
        let mut tx = self.pool().begin().await?;
        let turn = turn_in(&mut tx, conversation_id, turn_id).await?;
        tx.commit().await?;
        Ok(turn)
    }
}

/// The turns of `rows` with their rankings, passages, sentences and citations.
async fn assemble(conn: &mut sqlx::PgConnection, rows: Vec<Turn>) -> Result<Vec<Turn>> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let rankings: Vec<(Uuid, String, String, f64, i32, bool)> = sqlx::query_as(
        "SELECT r.turn_id, s.statement_id, s.text, r.score, r.rank, r.selected \
             FROM turn_ptkb_rankings r JOIN ptkb_statements s ON s.id = r.statement_row \
             WHERE r.turn_id = ANY($1) ORDER BY r.turn_id, r.rank",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    #[derive(sqlx::FromRow)]
    struct PassageRow {
        turn_id: Uuid,
        #[sqlx(flatten)]
        passage: TurnPassage,
    }
    let passages: Vec<PassageRow> = sqlx::query_as(
            "SELECT turn_id, rank, passage_id, collection, retrieval_score, rerank_score, score, used, title, url, text, \
               bm25_rank, dense_rank, fused_rank \
             FROM turn_passages WHERE turn_id = ANY($1) ORDER BY turn_id, rank",
        )
        .bind(&ids)
        .fetch_all(&mut *conn)
        .await?;
    let sentences: Vec<(Uuid, i32, String)> = sqlx::query_as(
            "SELECT turn_id, position, text FROM response_sentences WHERE turn_id = ANY($1) ORDER BY turn_id, position",
        )
        .bind(&ids)
        .fetch_all(&mut *conn)
        .await?;
    let citations: Vec<(Uuid, i32, i32)> = sqlx::query_as(
        "SELECT turn_id, sentence_position, passage_rank FROM sentence_citations \
             WHERE turn_id = ANY($1) ORDER BY turn_id, sentence_position, citation_order",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;

    let mut by_turn_rank = by_turn(rankings.into_iter().map(
        |(turn_id, id, text, score, rank, selected)| {
            let statement = RankedStatement {
                id,
                text,
                score,
                rank,
                selected,
            };
            (turn_id, statement)
        },
    ));
    let mut by_turn_passages = by_turn(passages.into_iter().map(|r| (r.turn_id, r.passage)));
    let mut by_turn_sentences = by_turn(sentences.into_iter().map(|(turn_id, _, text)| {
        let sentence = Sentence {
            text,
            citations: Vec::new(),
        };
        (turn_id, sentence)
    }));
    for (turn_id, position, rank) in citations {
        if let Some(sentence) = by_turn_sentences
            .get_mut(&turn_id)
            .and_then(|s| s.get_mut(position as usize))
        {
            sentence.citations.push(rank);
        }
    }
    Ok(rows
        .into_iter()
        .map(|r| Turn {
            ptkb_ranking: by_turn_rank.remove(&r.id).unwrap_or_default(),
            passages: by_turn_passages.remove(&r.id).unwrap_or_default(),
            sentences: by_turn_sentences.remove(&r.id).unwrap_or_default(),
            ..r
        })
        .collect())
}

/// `rows` grouped by their turn, each turn's in the order given.
fn by_turn<T>(rows: impl IntoIterator<Item = (Uuid, T)>) -> HashMap<Uuid, Vec<T>> {
    let mut grouped: HashMap<Uuid, Vec<T>> = HashMap::new();
    for (turn_id, row) in rows {
        grouped.entry(turn_id).or_default().push(row);
    }
    grouped
}

const SELECT_TURN: &str = "SELECT id, conversation_id, seq, version, is_current, external_turn_id, utterance, \
    reference_rewrite, reference_ptkb, canonical_response, rewritten_utterance, response_text, generator, \
    settings, timings_ms, diagnostics, created_at FROM turns";

fn json_or_empty(value: &serde_json::Value) -> serde_json::Value {
    if value.is_null() {
        serde_json::json!({})
    } else {
        value.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_outside_the_passages_are_refused() {
        let turn = NewTurn {
            utterance: "q".into(),
            passages: vec![TurnPassage {
                rank: 1,
                passage_id: "p".into(),
                score: 1.0,
                ..Default::default()
            }],
            sentences: vec![Sentence {
                text: "s".into(),
                citations: vec![2],
            }],
            ..Default::default()
        };
        let err = check_new_turn(&turn).unwrap_err();
        assert!(err.to_string().contains("cites passage rank 2"), "{err}");
    }

    #[test]
    fn passages_out_of_rank_order_are_refused() {
        let passage = |rank, id: &str| TurnPassage {
            rank,
            passage_id: id.into(),
            score: 1.0,
            ..Default::default()
        };
        let turn = NewTurn {
            utterance: "u".into(),
            passages: vec![passage(1, "a"), passage(3, "b")],
            ..Default::default()
        };
        let err = check_new_turn(&turn).unwrap_err();
        assert!(
            err.to_string().contains("\"b\" is ranked 3 at position 2"),
            "{err}"
        );
    }

    #[test]
    fn blank_utterance_is_refused() {
        let turn = NewTurn {
            utterance: "  ".into(),
            ..Default::default()
        };
        assert!(matches!(
            check_new_turn(&turn),
            Err(StoreError::Invalid {
                field: "utterance",
                ..
            })
        ));
    }
}
