//! What batch runs keep in PostgreSQL besides ordinary conversations: the `batch_runs` rows,
//! and the advisory lock that keeps two processes off one run.

use chrono::{DateTime, Utc};

use super::{Result, Store};

/// Holds PostgreSQL's advisory lock on a run name for as long as it lives, so two processes never
/// compute the same run; the lock goes with the connection, also when the process is killed.
pub struct RunLock {
    _conn: sqlx::PgConnection,
}

/// The advisory lock key of run `$2` of user `$1`.
pub(super) const RUN_LOCK_KEY: &str = "hashtext('convrag batch run ' || $1::text || '/' || $2)";

impl Store {
    /// The lock on `user_id`'s run `run_name` (runs of different users are different runs), or
    /// `None` when another process holds it.
    pub async fn lock_run(&self, user_id: i64, run_name: &str) -> Result<Option<RunLock>> {
        if self.db().pgbouncer() {
            return Err(super::through_pgbouncer(
                "a batch run computed alone (it holds a session lock; `--worker` runs use leases)",
            ));
        }
        let mut conn = self.pool().acquire().await?.detach();
        let locked: bool =
            sqlx::query_scalar(&format!("SELECT pg_try_advisory_lock({RUN_LOCK_KEY})"))
                .bind(user_id)
                .bind(run_name)
                .fetch_one(&mut conn)
                .await?;
        Ok(locked.then_some(RunLock { _conn: conn }))
    }
}

/// A `batch_runs` row: the facts a run's output depends on (JSON columns as stored).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct BatchRunRow {
    pub name: String,
    pub task: String,
    pub settings: serde_json::Value,
    pub model_id: Option<String>,
    pub model_sha256: Option<String>,
    pub model_files: serde_json::Value,
    pub collections: serde_json::Value,
    pub inputs: serde_json::Value,
    pub convrag_version: String,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A run to record (`created_at` and `finished_at` are the database's).
#[derive(Debug, Clone, PartialEq)]
pub struct NewBatchRun<'a> {
    pub name: &'a str,
    pub task: &'a str,
    pub settings: &'a serde_json::Value,
    pub model_id: Option<&'a str>,
    pub model_sha256: Option<&'a str>,
    pub model_files: serde_json::Value,
    pub collections: serde_json::Value,
    pub inputs: serde_json::Value,
    pub convrag_version: &'a str,
}

impl Store {
    /// The run named `name` of `user_id`, if recorded.
    pub async fn batch_run(&self, user_id: i64, name: &str) -> Result<Option<BatchRunRow>> {
        Ok(sqlx::query_as(
            "SELECT name, task, settings, model_id, model_sha256, model_files, collections, inputs, \
               convrag_version, created_at, finished_at FROM batch_runs WHERE user_id = $1 AND name = $2",
        )
        .bind(user_id)
        .bind(name)
        .fetch_optional(self.db())
        .await?)
    }

    /// Records a new run; returns when it was created, or `None` when another process recorded a
    /// run of that name first (workers of one run start together).
    pub async fn insert_batch_run(
        &self,
        user_id: i64,
        run: &NewBatchRun<'_>,
    ) -> Result<Option<DateTime<Utc>>> {
        Ok(sqlx::query_scalar(
            "INSERT INTO batch_runs (user_id, name, task, settings, model_id, model_sha256, model_files, \
               collections, inputs, convrag_version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (user_id, name) DO NOTHING RETURNING created_at",
        )
        .bind(user_id)
        .bind(run.name)
        .bind(run.task)
        .bind(run.settings)
        .bind(run.model_id)
        .bind(run.model_sha256)
        .bind(&run.model_files)
        .bind(&run.collections)
        .bind(&run.inputs)
        .bind(run.convrag_version)
        .fetch_optional(self.db())
        .await?)
    }

    /// Records the written output and the settings it was written with; returns when the run's
    /// turns were first complete.
    pub async fn finish_batch_run(
        &self,
        user_id: i64,
        name: &str,
        output_path: &str,
        output_sha256: &str,
        settings: &serde_json::Value,
    ) -> Result<DateTime<Utc>> {
        Ok(sqlx::query_scalar(
            "UPDATE batch_runs SET finished_at = COALESCE(finished_at, now()), output_path = $3, \
               output_sha256 = $4, settings = $5 WHERE user_id = $1 AND name = $2 RETURNING finished_at",
        )
        .bind(user_id)
        .bind(name)
        .bind(output_path)
        .bind(output_sha256)
        .bind(settings)
        .fetch_one(self.db())
        .await?)
    }

    /// Deletes a run with all its conversations; returns how many conversations went.
    pub async fn delete_batch_run(&self, user_id: i64, name: &str) -> Result<u64> {
        let mut tx = self.pool().begin().await?;
        let deleted = super::run_conversations::delete_all(&mut tx, user_id, name).await?;
        sqlx::query("DELETE FROM batch_runs WHERE user_id = $1 AND name = $2")
            .bind(user_id)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(deleted)
    }
}
