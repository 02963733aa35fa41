//! What the Runs view reads: a user's batch runs with their sizes, a run's conversations, and the
//! relevance judgments (qrels) the user uploaded to measure them.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Conversation, Result, Store};

/// A batch run of a user, with how many topics (conversations) and current turns it has stored.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct RunListing {
    pub name: String,
    /// e.g. `ikat`, `trec-rag-2024-rag`, `qrecc`.
    pub task: String,
    pub created_at: DateTime<Utc>,
    /// When the run's files were first written (`null`: not finished).
    pub finished_at: Option<DateTime<Utc>>,
    pub topics: i64,
    pub turns: i64,
}

/// Uploaded judgments, without their text.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct QrelsInfo {
    pub name: String,
    /// Judged queries (turns).
    pub queries: i32,
    pub judgments: i32,
    pub updated_at: DateTime<Utc>,
}

/// The conversations of run `name`: external id `<name>/<topic id>`.
const RUN_CONVERSATIONS: &str =
    "c.user_id = r.user_id AND left(c.external_id, length(r.name) + 1) = r.name || '/'";

impl Store {
    /// The user's batch runs, newest first.
    pub async fn list_runs(&self, user_id: i64) -> Result<Vec<RunListing>> {
        Ok(sqlx::query_as(&format!(
            "SELECT r.name, r.task, r.created_at, r.finished_at, \
               (SELECT count(*) FROM conversations c WHERE {RUN_CONVERSATIONS}) AS topics, \
               (SELECT count(*) FROM conversations c JOIN turns t ON t.conversation_id = c.id \
                  AND t.is_current WHERE {RUN_CONVERSATIONS}) AS turns \
             FROM batch_runs r WHERE r.user_id = $1 ORDER BY r.created_at DESC, r.name"
        ))
        .bind(user_id)
        .fetch_all(self.db())
        .await?)
    }

    /// One run of the user (`None`: no such run, or another user's).
    pub async fn run_listing(&self, user_id: i64, name: &str) -> Result<Option<RunListing>> {
        Ok(self
            .list_runs(user_id)
            .await?
            .into_iter()
            .find(|r| r.name == name))
    }

    /// The run's conversations (its topics), by external id.
    pub async fn run_conversations(&self, user_id: i64, name: &str) -> Result<Vec<Conversation>> {
        let mut conversations: Vec<Conversation> = self
            .list_conversations(user_id)
            .await?
            .into_iter()
            .filter(|c| {
                c.external_id
                    .as_deref()
                    .and_then(|e| e.strip_prefix(name))
                    .is_some_and(|rest| rest.starts_with('/'))
            })
            .collect();
        conversations.sort_by(|a, b| a.external_id.cmp(&b.external_id));
        Ok(conversations)
    }

    /// Stores (or replaces) the user's judgments `name`.
    pub async fn put_qrels(
        &self,
        user_id: i64,
        name: &str,
        body: &str,
        queries: i32,
        judgments: i32,
    ) -> Result<QrelsInfo> {
        super::require_identifier("name", name, 100)?;
        Ok(sqlx::query_as(
            "INSERT INTO user_qrels (user_id, name, body, queries, judgments) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (user_id, name) DO UPDATE SET body = $3, queries = $4, judgments = $5, \
               updated_at = now() \
             RETURNING name, queries, judgments, updated_at",
        )
        .bind(user_id)
        .bind(name)
        .bind(body)
        .bind(queries)
        .bind(judgments)
        .fetch_one(self.db())
        .await?)
    }

    /// The user's judgments, by name.
    pub async fn list_qrels(&self, user_id: i64) -> Result<Vec<QrelsInfo>> {
        Ok(sqlx::query_as(
            "SELECT name, queries, judgments, updated_at FROM user_qrels WHERE user_id = $1 ORDER BY name",
        )
        .bind(user_id)
        .fetch_all(self.db())
        .await?)
    }

    /// The text of the user's judgments `name` (`None`: none of that name).
    pub async fn qrels_text(&self, user_id: i64, name: &str) -> Result<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT body FROM user_qrels WHERE user_id = $1 AND name = $2")
                .bind(user_id)
                .bind(name)
                .fetch_optional(self.db())
                .await?,
        )
    }
}
