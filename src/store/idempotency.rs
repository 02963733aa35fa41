//! Results of requests sent with an `Idempotency-Key`: recorded in the transaction that stores
//! what the request created, replayed to a retry with the same key and body, refused
//! ([`StoreError::KeyReused`]) with the same key and another body. Kept for the configured
//! retention, then purged.

use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{Result, Store, StoreError};

/// The header's name, also the `field` of its errors.
pub const HEADER: &str = "Idempotency-Key";
const MAX_KEY_CHARS: usize = 255;

/// A client's key with the fingerprint of the request it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    key: String,
    fingerprint: [u8; 32],
}

impl IdempotencyKey {
    /// `key` (1-255 visible ASCII characters) for a request to `route` with `body` (its canonical
    /// JSON: the same request sent again gives the same fingerprint).
    pub fn new(key: &str, route: &str, body: &serde_json::Value) -> Result<Self> {
        let visible = key.bytes().all(|b| b.is_ascii_graphic());
        if key.is_empty() || key.len() > MAX_KEY_CHARS || !visible {
            return Err(StoreError::Invalid {
                field: HEADER,
                message: format!(
                    "must be 1-{MAX_KEY_CHARS} visible ASCII characters (a UUID is a good key)"
                ),
            });
        }
        let mut hash = Sha256::new();
        hash.update(route.as_bytes());
        hash.update(b"\n");
        hash.update(body.to_string().as_bytes());
        Ok(IdempotencyKey {
            key: key.to_string(),
            fingerprint: hash.finalize().into(),
        })
    }

    pub fn key(&self) -> &str {
        &self.key
    }
}

/// What a key names so far.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyLookup<T> {
    /// Never used (or expired): run the request.
    Unused,
    /// The result stored by an earlier request with the same key and body.
    Stored(T),
}

fn retention_secs(store: &Store) -> f64 {
    store.options().idempotency_retention.as_secs_f64()
}

/// The key's live record: its result, or [`StoreError::KeyReused`] when it came with another body.
pub(crate) async fn find<T: DeserializeOwned>(
    conn: &mut sqlx::PgConnection,
    store: &Store,
    user_id: i64,
    key: &IdempotencyKey,
) -> Result<KeyLookup<T>> {
    let row: Option<(Vec<u8>, serde_json::Value)> = sqlx::query_as(
        "SELECT fingerprint, result FROM idempotency_keys \
         WHERE user_id = $1 AND key = $2 AND created_at > now() - $3::float8 * interval '1 second'",
    )
    .bind(user_id)
    .bind(&key.key)
    .bind(retention_secs(store))
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        None => Ok(KeyLookup::Unused),
        Some((fingerprint, _)) if fingerprint != key.fingerprint => Err(StoreError::KeyReused),
        Some((_, result)) => serde_json::from_value(result)
            .map(KeyLookup::Stored)
            .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e)))),
    }
}

/// Records `result` under the key inside the transaction that stores it; the record is deleted
/// with `conversation_id` (what the result created or is part of), so a retry after that runs
/// anew. `Ok(Some(_))`: an earlier request with this key and body stored its result first (the
/// caller rolls back and answers with that one).
pub(crate) async fn record<T: Serialize + DeserializeOwned>(
    tx: &mut sqlx::PgConnection,
    store: &Store,
    user_id: i64,
    key: &IdempotencyKey,
    conversation_id: uuid::Uuid,
    result: &T,
) -> Result<Option<T>> {
    // The user's expired records go first, so an expired key can be used again.
    sqlx::query(
        "DELETE FROM idempotency_keys \
         WHERE user_id = $1 AND created_at <= now() - $2::float8 * interval '1 second'",
    )
    .bind(user_id)
    .bind(retention_secs(store))
    .execute(&mut *tx)
    .await?;
    let value = serde_json::to_value(result)
        .map_err(|e| StoreError::Database(sqlx::Error::Encode(Box::new(e))))?;
    // A concurrent request with the same key waits here for the other transaction's outcome.
    let inserted = sqlx::query(
        "INSERT INTO idempotency_keys (user_id, key, fingerprint, result, conversation_id) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (user_id, key) DO NOTHING",
    )
    .bind(user_id)
    .bind(&key.key)
    .bind(&key.fingerprint[..])
    .bind(value)
    .bind(conversation_id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(None);
    }
    match find(tx, store, user_id, key).await? {
        KeyLookup::Stored(earlier) => Ok(Some(earlier)),
        // Expired between the delete and the insert: vanishingly rare; the client retries.
        KeyLookup::Unused => Err(StoreError::Busy),
    }
}

impl Store {
    /// The key's record outside any transaction (a replay before running the request).
    pub async fn idempotent_result<T: DeserializeOwned>(
        &self,
        user_id: i64,
        key: &IdempotencyKey,
    ) -> Result<KeyLookup<T>> {
        // A transaction, so that through PgBouncer its reads run on one server connection.
        let mut tx = self.pool().begin().await?;
        let found = find(&mut tx, self, user_id, key).await?;
        tx.commit().await?;
        Ok(found)
    }

    /// Deletes every record older than the retention; returns how many.
    pub async fn purge_idempotency_keys(&self) -> Result<u64> {
        let deleted = sqlx::query(
            "DELETE FROM idempotency_keys WHERE created_at <= now() - $1::float8 * interval '1 second'",
        )
        .bind(retention_secs(self))
        .execute(self.db())
        .await?
        .rows_affected();
        Ok(deleted)
    }
}

impl Store {
    /// Purges expired records now and then every `every` (a server's housekeeping).
    pub fn spawn_idempotency_purge(
        &self,
        every: std::time::Duration,
    ) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        tokio::spawn(async move {
            loop {
                match store.purge_idempotency_keys().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(purged = n, "expired idempotency keys purged"),
                    Err(e) => tracing::warn!(error = %e, "idempotency key purge failed"),
                }
                tokio::time::sleep(every).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fingerprints_follow_route_and_body() {
        let a = IdempotencyKey::new("k1", "POST /x", &json!({"a": 1, "b": 2})).unwrap();
        let same = IdempotencyKey::new("k1", "POST /x", &json!({"b": 2, "a": 1})).unwrap();
        let other_body = IdempotencyKey::new("k1", "POST /x", &json!({"a": 2})).unwrap();
        let other_route = IdempotencyKey::new("k1", "POST /y", &json!({"a": 1, "b": 2})).unwrap();
        assert_eq!(a, same);
        assert_ne!(a.fingerprint, other_body.fingerprint);
        assert_ne!(a.fingerprint, other_route.fingerprint);
    }

    #[test]
    fn bad_keys_name_the_header() {
        for bad in ["", "has space", "tab\t", &"x".repeat(256), "ключ"] {
            match IdempotencyKey::new(bad, "POST /x", &json!({})) {
                Err(StoreError::Invalid { field, .. }) => assert_eq!(field, HEADER),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}
