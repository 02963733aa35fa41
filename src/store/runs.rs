//! What the Runs view reads: a user's batch runs with their sizes, a run's conversations, and the
//! relevance judgments (qrels) the user uploaded to measure them.

use chrono::{DateTime, Utc};
use serde::Serialize;

use sqlx::Connection;

use super::{Result, Store, StoreError};
use crate::config::Limits;

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

impl Store {
    /// The user's batch runs, newest first.
    pub async fn list_runs(&self, user_id: i64) -> Result<Vec<RunListing>> {
        let of_run = super::run_conversations::belongs_to_run("r.user_id", "r.name");
        Ok(sqlx::query_as(&format!(
            "SELECT r.name, r.task, r.created_at, r.finished_at, \
               (SELECT count(*) FROM conversations c WHERE {of_run}) AS topics, \
               (SELECT count(*) FROM conversations c JOIN turns t ON t.conversation_id = c.id \
                  AND t.is_current WHERE {of_run}) AS turns \
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

    /// Refuses judgments `name` of `bytes` bytes that the user's quota cannot take
    /// (`limits.qrels_per_user`, `limits.qrels_bytes_per_user`; judgments of that name being
    /// replaced do not count): 429 before the body is read, and again under the user's row lock
    /// when it is stored.
    pub async fn check_qrels_quota(&self, user_id: i64, name: &str, bytes: u64) -> Result<()> {
        let mut conn = self.pool().acquire().await?;
        qrels_quota(&mut conn, self.limits(), user_id, name, bytes).await
    }

    /// Stores (or replaces) the user's judgments `name`, within the user's quota.
    pub async fn put_qrels(
        &self,
        user_id: i64,
        name: &str,
        body: &str,
        queries: i32,
        judgments: i32,
    ) -> Result<QrelsInfo> {
        super::require_identifier("name", name, 100)?;
        // A connection of its own, so that its buffers, grown to the text's size, are shrunk
        // before it goes back to the pool (else every pooled connection keeps the largest
        // text it ever sent).
        let mut conn = self.pool().acquire().await?;
        let mut tx = conn.begin().await?;
        sqlx::query("SELECT id FROM users WHERE id = $1 FOR UPDATE")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        qrels_quota(&mut tx, self.limits(), user_id, name, body.len() as u64).await?;
        let info = sqlx::query_as(
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
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        conn.shrink_buffers();
        Ok(info)
    }

    /// Deletes the user's run `name` and its conversations (with their turns), atomically;
    /// `NotFound` when the user has no run of that name. Its files on the operator's disk stay.
    pub async fn delete_run(&self, user_id: i64, name: &str) -> Result<()> {
        let mut tx = self.pool().begin().await?;
        let deleted = sqlx::query("DELETE FROM batch_runs WHERE user_id = $1 AND name = $2")
            .bind(user_id)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        if deleted.rows_affected() == 0 {
            return Err(StoreError::NotFound { entity: "run" });
        }
        super::run_conversations::delete_all(&mut tx, user_id, name).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Deletes the user's judgments `name`; `NotFound` when they have none of that name.
    pub async fn delete_qrels(&self, user_id: i64, name: &str) -> Result<()> {
        let result = sqlx::query("DELETE FROM user_qrels WHERE user_id = $1 AND name = $2")
            .bind(user_id)
            .bind(name)
            .execute(self.db())
            .await?;
        if result.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                entity: "judgments",
            });
        }
        Ok(())
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
        // As in `put_qrels`: the read buffer grows to the text, and is shrunk again.
        let mut conn = self.pool().acquire().await?;
        let text =
            sqlx::query_scalar("SELECT body FROM user_qrels WHERE user_id = $1 AND name = $2")
                .bind(user_id)
                .bind(name)
                .fetch_optional(&mut *conn)
                .await?;
        conn.shrink_buffers();
        Ok(text)
    }
}

/// The check of [`Store::check_qrels_quota`] on `conn`.
async fn qrels_quota(
    conn: &mut sqlx::PgConnection,
    limits: &Limits,
    user_id: i64,
    name: &str,
    bytes: u64,
) -> Result<()> {
    let (others, other_bytes): (i64, i64) = sqlx::query_as(
        "SELECT count(*), coalesce(sum(octet_length(body)), 0)::bigint \
         FROM user_qrels WHERE user_id = $1 AND name <> $2",
    )
    .bind(user_id)
    .bind(name)
    .fetch_one(&mut *conn)
    .await?;
    let as_u64 = |n: i64| u64::try_from(n).unwrap_or(0);
    let max_count = limits.qrels_per_user as u64;
    if as_u64(others) >= max_count {
        return Err(StoreError::QuotaExceeded {
            field: "name",
            message: format!(
                "you keep {others} judgments, the most one user may (limits.qrels_per_user = \
                 {max_count}); delete some first"
            ),
        });
    }
    let max_bytes = limits.qrels_bytes_per_user as u64;
    if as_u64(other_bytes).saturating_add(bytes) > max_bytes {
        return Err(StoreError::QuotaExceeded {
            field: "body",
            message: format!(
                "your other judgments hold {other_bytes} bytes; {bytes} more would pass the \
                 {max_bytes} bytes one user may keep (limits.qrels_bytes_per_user)"
            ),
        });
    }
    Ok(())
}
