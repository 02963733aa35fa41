//! Topics of one batch run claimed by worker processes on any machine (`convrag run … --worker`):
//! a claim is a lease row taken with `FOR UPDATE SKIP LOCKED` and renewed while the worker
//! computes; a lease that ran out (its worker died) is taken over by the next claim. Every
//! statement is its own short transaction, so this works through PgBouncer's transaction pooling.

use std::time::Duration;

use super::{Result, Store};

/// Who renders a run's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderClaim {
    /// This worker: nobody had claimed it, or the claimant's lease ran out before it finished.
    Mine,
    /// Another worker (named) renders or rendered it.
    Other(String),
}

/// A topic claimed by this worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedTopic {
    pub topic_id: String,
    /// The worker whose lease ran out, when the topic is taken over.
    pub taken_from: Option<String>,
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The run's id, by owner and name (the subquery every statement below starts from).
const RUN_ID: &str = "(SELECT id FROM batch_runs WHERE user_id = $1 AND name = $2)";

impl Store {
    /// Adds a lease row for every topic not listed yet (each worker does it; the first wins).
    pub async fn add_batch_topics(&self, user_id: i64, run: &str, topics: &[String]) -> Result<()> {
        sqlx::query(&format!(
            "INSERT INTO batch_topic_leases (run_id, topic_id, position) \
             SELECT {RUN_ID}, t.id, t.n::int FROM UNNEST($3::text[]) WITH ORDINALITY AS t(id, n) \
             ON CONFLICT DO NOTHING"
        ))
        .bind(user_id)
        .bind(run)
        .bind(topics)
        .execute(self.db())
        .await?;
        Ok(())
    }

    /// Claims the first topic (input order) that is not done and not leased, or whose lease ran
    /// out, for `lease`; `None` when there is none right now.
    pub async fn claim_batch_topic(
        &self,
        user_id: i64,
        run: &str,
        worker: &str,
        lease: Duration,
    ) -> Result<Option<ClaimedTopic>> {
        let row: Option<(String, Option<String>)> = sqlx::query_as(&format!(
            "WITH free AS (SELECT run_id, topic_id, worker FROM batch_topic_leases \
               WHERE run_id = {RUN_ID} AND done_at IS NULL \
                 AND (lease_until IS NULL OR lease_until < clock_timestamp()) \
               ORDER BY position LIMIT 1 FOR UPDATE SKIP LOCKED) \
             UPDATE batch_topic_leases l SET worker = $3, \
               lease_until = clock_timestamp() + make_interval(secs => $4) \
             FROM free WHERE l.run_id = free.run_id AND l.topic_id = free.topic_id \
             RETURNING l.topic_id, free.worker"
        ))
        .bind(user_id)
        .bind(run)
        .bind(worker)
        .bind(seconds(lease))
        .fetch_optional(self.db())
        .await?;
        Ok(row.map(|(topic_id, taken_from)| ClaimedTopic {
            topic_id,
            taken_from,
        }))
    }

    /// Extends every open lease `worker` holds on the run; returns how many it holds.
    pub async fn renew_batch_leases(
        &self,
        user_id: i64,
        run: &str,
        worker: &str,
        lease: Duration,
    ) -> Result<u64> {
        Ok(sqlx::query(&format!(
            "UPDATE batch_topic_leases SET lease_until = clock_timestamp() + make_interval(secs => $4) \
             WHERE run_id = {RUN_ID} AND worker = $3 AND done_at IS NULL"
        ))
        .bind(user_id)
        .bind(run)
        .bind(worker)
        .bind(seconds(lease))
        .execute(self.db())
        .await?
        .rows_affected())
    }

    /// Marks a topic done; false when `worker` no longer holds it (its lease ran out and another
    /// worker took it over).
    pub async fn finish_batch_topic(
        &self,
        user_id: i64,
        run: &str,
        worker: &str,
        topic_id: &str,
    ) -> Result<bool> {
        let held = (user_id, run, worker, topic_id);
        let set = "done_at = clock_timestamp(), lease_until = NULL";
        Ok(self.update_held_topic(held, set).await? == 1)
    }

    /// Gives a topic back (claimable at once) if `worker` holds it.
    pub async fn release_batch_topic(
        &self,
        user_id: i64,
        run: &str,
        worker: &str,
        topic_id: &str,
    ) -> Result<()> {
        let held = (user_id, run, worker, topic_id);
        self.update_held_topic(held, "worker = NULL, lease_until = NULL")
            .await?;
        Ok(())
    }

    /// Sets `set` on the open lease row of the topic that the worker holds, in
    /// `(user_id, run, worker, topic_id)`; the rows changed (0 when it no longer holds it).
    async fn update_held_topic(
        &self,
        (user_id, run, worker, topic_id): (i64, &str, &str, &str),
        set: &str,
    ) -> Result<u64> {
        Ok(sqlx::query(&format!(
            "UPDATE batch_topic_leases SET {set} \
             WHERE run_id = {RUN_ID} AND worker = $3 AND topic_id = $4 AND done_at IS NULL"
        ))
        .bind(user_id)
        .bind(run)
        .bind(worker)
        .bind(topic_id)
        .execute(self.db())
        .await?
        .rows_affected())
    }

    /// Topics of the run that are not done yet.
    pub async fn open_batch_topics(&self, user_id: i64, run: &str) -> Result<i64> {
        Ok(sqlx::query_scalar(&format!(
            "SELECT count(*) FROM batch_topic_leases WHERE run_id = {RUN_ID} AND done_at IS NULL"
        ))
        .bind(user_id)
        .bind(run)
        .fetch_one(self.db())
        .await?)
    }

    /// True while a process computes the run alone (it holds the run's lock, see
    /// [`Store::lock_run`]); the check takes the lock in shared mode (so workers checking at the
    /// same time do not see each other) and only for its own statement.
    pub async fn run_locked_elsewhere(&self, user_id: i64, run: &str) -> Result<bool> {
        let free: bool = sqlx::query_scalar(&format!(
            "SELECT pg_try_advisory_xact_lock_shared({})",
            super::batch_runs::RUN_LOCK_KEY
        ))
        .bind(user_id)
        .bind(run)
        .fetch_one(self.db())
        .await?;
        Ok(!free)
    }

    /// Claims the rendering of the run's file: exactly one worker gets [`RenderClaim::Mine`]
    /// unless its lease runs out before the file is recorded.
    pub async fn claim_batch_render(
        &self,
        user_id: i64,
        run: &str,
        worker: &str,
        lease: Duration,
    ) -> Result<RenderClaim> {
        let mine: Option<i64> = sqlx::query_scalar(
            "UPDATE batch_runs SET render_worker = $3, \
               render_lease_until = clock_timestamp() + make_interval(secs => $4) \
             WHERE user_id = $1 AND name = $2 AND (render_worker IS NULL \
               OR (output_sha256 IS NULL AND render_lease_until < clock_timestamp())) \
             RETURNING id",
        )
        .bind(user_id)
        .bind(run)
        .bind(worker)
        .bind(seconds(lease))
        .fetch_optional(self.db())
        .await?;
        if mine.is_some() {
            return Ok(RenderClaim::Mine);
        }
        let other: Option<String> = sqlx::query_scalar(
            "SELECT render_worker FROM batch_runs WHERE user_id = $1 AND name = $2",
        )
        .bind(user_id)
        .bind(run)
        .fetch_one(self.db())
        .await?;
        Ok(RenderClaim::Other(other.unwrap_or_default()))
    }
}
