//! PostgreSQL state: users, conversations, PTKB statements and turns (sqlx, runtime queries).
//!
//! Every read or write of a conversation takes the owning user's id, so ownership is checked in the
//! query itself: another user's conversation is simply not found.

pub mod batch_runs;
pub mod batch_workers;
pub mod chat;
pub mod collection_manifests;
pub mod collections;
pub mod conversations;
pub mod embedded;
pub mod executor;
pub mod idempotency;
pub mod lease;
pub mod profile;
pub mod ptkb;
pub mod run_conversations;
pub mod runs;
pub mod sign_in;
pub mod turns;
pub mod users;

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

use crate::config::Limits;

pub use batch_runs::RunLock;
pub use batch_workers::{ClaimedTopic, RenderClaim};
pub use collections::{CollectionLimits, CollectionStatus, PrivateCollection, UploadSize};
pub use conversations::{Conversation, ConversationPatch, CreatedConversation, NewConversation};
pub use embedded::{EmbeddedCluster, EmbeddedError};
pub use executor::Db;
pub use idempotency::{IdempotencyKey, KeyLookup};
pub use profile::ProfileStatement;
pub use ptkb::{NewStatement, Statement};
pub use run_conversations::{Diverged, RunConversations};
pub use turns::{Committed, HistoryEntry, NewTurn, PendingTurn, Turn, TurnSlot};
pub use users::{AuthFailure, Authenticated, NewToken, TokenInfo, User};

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The entity does not exist, or belongs to another user.
    #[error("{entity} not found")]
    NotFound { entity: &'static str },
    /// A uniqueness rule would be broken (name taken, statement id exists, ...).
    #[error("{field}: {message}")]
    Conflict {
        field: &'static str,
        message: String,
    },
    /// Input the database (or a check before it) refuses.
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    /// The user already keeps as much of something as the configured limit allows (HTTP 429).
    #[error("{field}: {message}")]
    QuotaExceeded {
        field: &'static str,
        message: String,
    },
    /// A bearer token that does not (or no longer) authenticates.
    #[error("{0}")]
    Unauthorized(users::AuthFailure),
    /// Another turn of the conversation holds its lease for longer than a turn waits.
    #[error("another turn of this conversation is still running")]
    Busy,
    /// The turn's lease expired and another turn took the conversation over, so this turn's
    /// result is not stored (fencing).
    #[error("the turn lost its hold on the conversation to another turn; nothing was stored")]
    LeaseLost,
    /// An `Idempotency-Key` already names a different request.
    #[error("Idempotency-Key: the key was already used with a different request")]
    KeyReused,
    /// The database cannot be reached right now.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("database error: {0}")]
    Database(sqlx::Error),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => StoreError::Unavailable(e.to_string()),
            sqlx::Error::Database(db) => {
                let code = db.code().map(|c| c.to_string()).unwrap_or_default();
                // Class 08: connection exception; 57P0x: server shutting down / cannot connect now.
                if code.starts_with("08") || code.starts_with("57P") {
                    StoreError::Unavailable(e.to_string())
                } else if code == "23503" && db.constraint().is_some_and(refers_to_user) {
                    // The account was deleted while this request (authenticated just before)
                    // was writing for it: its token is gone with it.
                    StoreError::Unauthorized(users::AuthFailure::Unknown)
                } else {
                    StoreError::Database(e)
                }
            }
            _ => StoreError::Database(e),
        }
    }
}

/// Whether a foreign key constraint is a row's reference to its user (every such key is named
/// `<table>_user_id_fkey`, or `collections_owner_id_fkey`, by PostgreSQL's default naming).
fn refers_to_user(constraint: &str) -> bool {
    constraint.ends_with("_user_id_fkey") || constraint == "collections_owner_id_fkey"
}

/// The SQLSTATE of a database error, if any.
pub(crate) fn sqlstate(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(db) => db.code().map(|c| c.to_string()),
        _ => None,
    }
}

/// Where the database is.
#[derive(Debug, Clone)]
pub enum DbTarget {
    Url(String),
    /// A cluster listening on a Unix socket in `socket_dir`.
    Socket {
        socket_dir: std::path::PathBuf,
        port: u16,
        user: String,
        database: String,
    },
}

/// Pool sizes and the timing of turn leases and idempotency records.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreOptions {
    pub pool_size: u32,
    pub auth_pool_size: u32,
    pub acquire_timeout: Duration,
    pub turn_lease: Duration,
    pub turn_wait: Duration,
    pub idempotency_retention: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self::from(&crate::config::DatabaseConfig::default())
    }
}

impl From<&crate::config::DatabaseConfig> for StoreOptions {
    fn from(c: &crate::config::DatabaseConfig) -> Self {
        StoreOptions {
            pool_size: c.pool_size.max(1),
            auth_pool_size: c.auth_pool_size.max(1),
            acquire_timeout: Duration::from_millis(c.acquire_timeout_ms.max(1)),
            turn_lease: Duration::from_secs(c.turn_lease_secs.max(1)),
            turn_wait: Duration::from_secs(c.turn_wait_secs),
            idempotency_retention: Duration::from_secs(c.idempotency_hours * 3600),
        }
    }
}

/// The handle every part of convrag uses to reach PostgreSQL. Token lookups use a pool of their
/// own, so requests are authenticated even while every main connection is busy.
#[derive(Clone, Debug)]
pub struct Store {
    db: Db,
    auth_db: Db,
    options: std::sync::Arc<StoreOptions>,
    /// What one user may store; the server sets its configured limits, tools keep only the
    /// database's bounds.
    limits: std::sync::Arc<Limits>,
}

/// Splits the `pgbouncer=true|false` parameter (a convention of other PostgreSQL clients too)
/// off a database URL: the URL without it, and whether it is set.
fn pgbouncer_param(url: &str) -> Result<(String, bool)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), false));
    };
    let mut pgbouncer = false;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("pgbouncer", "true")) => pgbouncer = true,
            Some(("pgbouncer", "false")) => pgbouncer = false,
            Some(("pgbouncer", other)) => {
                return Err(StoreError::Invalid {
                    field: "database_url",
                    message: format!("pgbouncer must be true or false, got {other:?}"),
                })
            }
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, pgbouncer))
}

impl Store {
    /// Connects with the default [`StoreOptions`] and applies pending migrations.
    pub async fn connect(target: &DbTarget) -> Result<Self> {
        Self::connect_with(target, StoreOptions::default()).await
    }

    /// Connects (failing fast when the server is down) and applies pending migrations
    /// (through PgBouncer it only checks that they were applied).
    pub async fn connect_with(target: &DbTarget, options: StoreOptions) -> Result<Self> {
        let mut pgbouncer = false;
        let connect = match target {
            DbTarget::Url(url) => {
                let (url, through_pgbouncer) = pgbouncer_param(url)?;
                pgbouncer = through_pgbouncer;
                let options = url
                    .parse::<PgConnectOptions>()
                    .map_err(|e| StoreError::Invalid {
                        field: "database_url",
                        message: e.to_string(),
                    })?;
                // No statement is kept by name: another client's transaction may get the
                // server connection next (PgBouncer's `server_reset_query_always` with
                // `DEALLOCATE ALL` removes those sqlx names inside transactions; see
                // docs/deploy.md).
                if pgbouncer {
                    options.statement_cache_capacity(0)
                } else {
                    options
                }
            }
            DbTarget::Socket {
                socket_dir,
                port,
                user,
                database,
            } => PgConnectOptions::new()
                .socket(socket_dir)
                .port(*port)
                .username(user)
                .database(database),
        };
        let pool_options = |size: u32| {
            PgPoolOptions::new()
                .max_connections(size)
                .min_connections(0)
                // Short: when the database is gone, requests should fail quickly with 503.
                .acquire_timeout(options.acquire_timeout)
                .test_before_acquire(true)
        };
        let pool = pool_options(options.pool_size)
            .connect_with(connect.clone())
            .await?;
        let auth_pool = pool_options(options.auth_pool_size).connect_lazy_with(connect);
        let store = Store {
            db: Db::new(pool, pgbouncer),
            auth_db: Db::new(auth_pool, pgbouncer),
            options: std::sync::Arc::new(options),
            limits: std::sync::Arc::new(Limits::unlimited()),
        };
        if pgbouncer {
            store.check_migrated().await?;
        } else {
            store.migrate().await?;
        }
        Ok(store)
    }

    /// Wraps an existing pool (tests, tools) without migrating; token lookups share it.
    pub fn from_pool(pool: PgPool) -> Self {
        Store {
            auth_db: Db::new(pool.clone(), false),
            db: Db::new(pool, false),
            options: std::sync::Arc::new(StoreOptions::default()),
            limits: std::sync::Arc::new(Limits::unlimited()),
        }
    }

    /// The same database, enforcing `limits`.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = std::sync::Arc::new(limits);
        self
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// What token lookups run on.
    pub(crate) fn auth_pool(&self) -> &Db {
        &self.auth_db
    }

    pub fn pool(&self) -> &PgPool {
        self.db.pool()
    }

    /// What statements outside an explicit transaction run on.
    pub fn db(&self) -> &Db {
        &self.db
    }

    pub async fn migrate(&self) -> Result<()> {
        if self.db.pgbouncer() {
            return Err(through_pgbouncer("applying migrations"));
        }
        sqlx::migrate!("./migrations").run(self.pool()).await?;
        Ok(())
    }

    /// Through PgBouncer migrations are not applied (sqlx holds a session advisory lock while
    /// migrating); fails naming the missing ones.
    async fn check_migrated(&self) -> Result<()> {
        let applied: Vec<i64> =
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
                .fetch_all(self.db())
                .await
                .unwrap_or_default();
        let missing: Vec<String> = sqlx::migrate!("./migrations")
            .iter()
            .filter(|m| !applied.contains(&m.version))
            .map(|m| m.version.to_string())
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Invalid {
                field: "database_url",
                message: format!(
                    "migrations {} are not applied; through PgBouncer convrag does not migrate: run `convrag migrate` with DATABASE_URL naming PostgreSQL itself",
                    missing.join(", ")
                ),
            })
        }
    }

    /// True when a trivial query succeeds within two seconds.
    pub async fn ping(&self) -> bool {
        let query = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(self.db());
        matches!(
            tokio::time::timeout(Duration::from_secs(2), query).await,
            Ok(Ok(1))
        )
    }

    pub async fn close(&self) {
        self.pool().close().await;
        self.auth_db.pool().close().await;
    }
}

/// What a session feature cannot do through PgBouncer's transaction pooling.
pub(crate) fn through_pgbouncer(what: &str) -> StoreError {
    StoreError::Invalid {
        field: "database_url",
        message: format!(
            "{what} needs a session of its own, which PgBouncer's transaction pooling does not keep: use DATABASE_URL naming PostgreSQL itself"
        ),
    }
}

/// Checks that a text field is not blank and not longer than `max` characters.
pub(crate) fn require_text(field: &'static str, value: &str, max: usize) -> Result<()> {
    if value.trim().is_empty() {
        return Err(StoreError::Invalid {
            field,
            message: "must not be empty".to_string(),
        });
    }
    let chars = value.chars().count();
    if chars > max {
        return Err(StoreError::Invalid {
            field,
            message: format!("must be at most {max} characters (got {chars})"),
        });
    }
    Ok(())
}

/// `n` and the noun, singular for one: "1 statement", "2 statements".
pub(crate) fn count_of(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Checks a name used as an identifier (collection names, statement ids): 1 to `max` ASCII
/// letters, digits, '.', '_' or '-', starting with a letter or digit (so never a path like `..`).
pub(crate) fn require_identifier(field: &'static str, value: &str, max: usize) -> Result<()> {
    let ok = !value.is_empty()
        && value.len() <= max
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            field,
            message: format!(
                "must be 1-{max} letters, digits, '.', '_' or '-', starting with a letter or digit"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_singular() {
        assert_eq!(super::count_of(1, "statement"), "1 statement");
        assert_eq!(super::count_of(0, "statement"), "0 statements");
        assert_eq!(super::count_of(200, "statement"), "200 statements");
    }
}
