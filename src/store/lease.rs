//! A turn's lease on its conversation: who may append the next turn, held without a database
//! connection.
//!
//! The lease is two columns of the conversation row (`lease_holder`, `lease_expires_at`), taken
//! and renewed by short statements, so it works through PgBouncer in transaction pooling mode (no
//! session state, no advisory locks) and a turn waiting for its LLM holds no pooled connection. A
//! crashed holder stops renewing and its lease expires; a commit re-reads the holder under the
//! row lock and stores nothing when another turn took over (fencing).

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use uuid::Uuid;

use super::{Result, Store, StoreError};

/// First and largest pause between attempts to take a busy conversation.
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const LONGEST_PAUSE: Duration = Duration::from_millis(500);

/// A held lease. Renewed in the background until released; dropping it releases it (when a
/// runtime is there to run the statement; otherwise it expires).
pub struct Lease {
    store: Store,
    conversation_id: Uuid,
    holder: Uuid,
    renewal: JoinHandle<()>,
    released: bool,
}

impl Lease {
    pub fn holder(&self) -> Uuid {
        self.holder
    }

    /// Called once the commit that cleared the lease in its own transaction succeeded.
    pub(crate) fn mark_released(&mut self) {
        self.released = true;
        self.renewal.abort();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewal.abort();
        if self.released {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (store, id, holder) = (self.store.clone(), self.conversation_id, self.holder);
            runtime.spawn(async move {
                if let Err(e) = release(&store, id, holder).await {
                    tracing::warn!(conversation = %id, error = %e, "lease not released; it expires");
                }
            });
        }
    }
}

async fn release(store: &Store, conversation_id: Uuid, holder: Uuid) -> Result<()> {
    sqlx::query(
        "UPDATE conversations SET lease_holder = NULL, lease_expires_at = NULL \
         WHERE id = $1 AND lease_holder = $2",
    )
    .bind(conversation_id)
    .bind(holder)
    .execute(store.db())
    .await?;
    Ok(())
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Whether a new holder took the lease; `None` when the conversation is not the user's.
async fn try_take(
    store: &Store,
    user_id: i64,
    conversation_id: Uuid,
    holder: Uuid,
) -> Result<Option<bool>> {
    let taken = sqlx::query(
        "UPDATE conversations SET lease_holder = $3, \
           lease_expires_at = now() + $4::float8 * interval '1 millisecond' \
         WHERE user_id = $1 AND id = $2 AND (lease_holder IS NULL OR lease_expires_at <= now())",
    )
    .bind(user_id)
    .bind(conversation_id)
    .bind(holder)
    .bind(millis(store.options().turn_lease))
    .execute(store.db())
    .await?
    .rows_affected()
        == 1;
    if taken {
        return Ok(Some(true));
    }
    let exists: Option<Uuid> =
        sqlx::query_scalar("SELECT id FROM conversations WHERE user_id = $1 AND id = $2")
            .bind(user_id)
            .bind(conversation_id)
            .fetch_optional(store.db())
            .await?;
    Ok(exists.map(|_| false))
}

/// Renews the lease every third of its lifetime until aborted or taken over.
fn spawn_renewal(store: Store, conversation_id: Uuid, holder: Uuid) -> JoinHandle<()> {
    tokio::spawn(async move {
        let lease = store.options().turn_lease;
        loop {
            tokio::time::sleep(lease / 3).await;
            let renewed = sqlx::query(
                "UPDATE conversations SET lease_expires_at = now() + $3::float8 * interval '1 millisecond' \
                 WHERE id = $1 AND lease_holder = $2",
            )
            .bind(conversation_id)
            .bind(holder)
            .bind(millis(lease))
            .execute(store.db())
            .await;
            match renewed {
                Ok(r) if r.rows_affected() == 0 => return, // taken over: the commit will refuse
                Ok(_) => {}
                // The database is away: keep trying; the commit's fencing decides.
                Err(e) => {
                    tracing::warn!(conversation = %conversation_id, error = %e, "lease renewal failed")
                }
            }
        }
    })
}

/// Sleeps before the next attempt, or says the wait is over.
async fn pause(started: tokio::time::Instant, wait: Duration, pause: &mut Duration) -> bool {
    if started.elapsed() >= wait {
        return false;
    }
    tokio::time::sleep((*pause).min(wait.saturating_sub(started.elapsed()))).await;
    *pause = (*pause * 2).min(LONGEST_PAUSE);
    true
}

impl Store {
    /// Takes the conversation's lease, waiting up to the configured turn wait while another
    /// turn holds it (then [`StoreError::Busy`]).
    pub async fn acquire_lease(&self, user_id: i64, conversation_id: Uuid) -> Result<Lease> {
        let holder = Uuid::new_v4();
        let started = tokio::time::Instant::now();
        let mut wait = FIRST_PAUSE;
        loop {
            match try_take(self, user_id, conversation_id, holder).await? {
                Some(true) => {
                    return Ok(Lease {
                        store: self.clone(),
                        conversation_id,
                        holder,
                        renewal: spawn_renewal(self.clone(), conversation_id, holder),
                        released: false,
                    })
                }
                Some(false) if wait == FIRST_PAUSE => crate::metrics::metrics().lease_waits.inc(),
                Some(false) => {}
                None => {
                    return Err(StoreError::NotFound {
                        entity: "conversation",
                    })
                }
            }
            if !pause(started, self.options().turn_wait, &mut wait).await {
                return Err(StoreError::Busy);
            }
        }
    }

    /// Runs `change` (a short transaction that refuses with [`StoreError::Busy`] while a turn
    /// holds the conversation, see `lock_owned`) again until no turn holds it, up to the turn wait.
    pub(crate) async fn when_free<T, F, Fut>(&self, change: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let started = tokio::time::Instant::now();
        let mut wait = FIRST_PAUSE;
        loop {
            match change().await {
                Err(StoreError::Busy) => {
                    if !pause(started, self.options().turn_wait, &mut wait).await {
                        return Err(StoreError::Busy);
                    }
                }
                other => return other,
            }
        }
    }
}

/// In a commit's transaction: locks the conversation row and checks the lease is still `lease`'s
/// (fencing), then clears it so it is released exactly when the commit lands.
pub(crate) async fn fence_and_clear(
    tx: &mut sqlx::PgConnection,
    user_id: i64,
    conversation_id: Uuid,
    lease: &Lease,
) -> Result<()> {
    let row: Option<Option<Uuid>> = sqlx::query_scalar(
        "SELECT lease_holder FROM conversations WHERE user_id = $1 AND id = $2 FOR UPDATE",
    )
    .bind(user_id)
    .bind(conversation_id)
    .fetch_optional(&mut *tx)
    .await?;
    match row {
        None => {
            return Err(StoreError::NotFound {
                entity: "conversation",
            })
        }
        Some(h) if h != Some(lease.holder) => return Err(StoreError::LeaseLost),
        Some(_) => {}
    }
    sqlx::query(
        "UPDATE conversations SET lease_holder = NULL, lease_expires_at = NULL, updated_at = now() \
         WHERE id = $1",
    )
    .bind(conversation_id)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Locks the conversation row for the rest of the transaction, checking ownership and that no
/// turn holds its lease ([`StoreError::Busy`]: run the change through `Store::when_free`). Every
/// change to a conversation's PTKB goes through this, so it never interleaves with a running turn.
pub(crate) async fn lock_owned(tx: &mut sqlx::PgConnection, user_id: i64, id: Uuid) -> Result<()> {
    let leased: Option<bool> = sqlx::query_scalar(
        "SELECT lease_holder IS NOT NULL AND lease_expires_at > now() \
         FROM conversations WHERE user_id = $1 AND id = $2 FOR UPDATE",
    )
    .bind(user_id)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    match leased {
        None => Err(StoreError::NotFound {
            entity: "conversation",
        }),
        Some(true) => Err(StoreError::Busy),
        Some(false) => Ok(()),
    }
}

/// The position the next new turn of the conversation will take.
pub(crate) async fn next_seq(tx: &mut sqlx::PgConnection, id: Uuid) -> Result<i32> {
    let max: Option<i32> =
        sqlx::query_scalar("SELECT max(seq) FROM turns WHERE conversation_id = $1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
    Ok(max.unwrap_or(0) + 1)
}
