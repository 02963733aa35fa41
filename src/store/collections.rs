//! The `collections` table: who owns each collection (NULL = shared) and the state of the
//! indexing job of a private one. The indexes themselves live on disk (`index::CollectionRegistry`);
//! shared rows are kept in step with the directory when collections are listed.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{require_identifier, Result, Store, StoreError};

/// The state of a collection's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CollectionStatus {
    /// An upload is being indexed; the previous documents stay searchable meanwhile.
    Building,
    Ready,
    /// The last upload could not be indexed (see `error`); the previous documents are kept.
    Failed,
}

impl CollectionStatus {
    fn from_db(value: &str) -> Option<Self> {
        match value {
            "building" => Some(CollectionStatus::Building),
            "ready" => Some(CollectionStatus::Ready),
            "failed" => Some(CollectionStatus::Failed),
            _ => None,
        }
    }
}

/// Stored as TEXT (the table's CHECK lists the values).
impl sqlx::Type<sqlx::Postgres> for CollectionStatus {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        <String as sqlx::Type<sqlx::Postgres>>::type_info()
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Postgres> for CollectionStatus {
    fn decode(value: sqlx::postgres::PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let text = <&str as sqlx::Decode<sqlx::Postgres>>::decode(value)?;
        CollectionStatus::from_db(text)
            .ok_or_else(|| format!("unknown collection status {text:?}").into())
    }
}

/// One private collection of a user.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, PartialEq)]
pub struct PrivateCollection {
    #[serde(skip)]
    pub id: i64,
    pub name: String,
    pub status: CollectionStatus,
    /// Files of the upload being indexed (or the last one) and how many of them are indexed.
    pub files_total: i32,
    pub files_done: i32,
    pub documents: i32,
    pub bytes: i64,
    pub passages: i64,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, name, status, files_total, files_done, documents, bytes, passages, \
     error, created_at, updated_at";

/// What an upload adds to a collection, checked against the limits before anything is indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadSize {
    pub files: i32,
    pub bytes: i64,
}

/// The per-collection limits an upload must stay within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectionLimits {
    pub documents: i32,
    pub bytes: i64,
}

impl Store {
    /// Records the shared collections found on disk (name, passages) and forgets shared rows
    /// whose index is gone.
    pub async fn sync_shared_collections(&self, found: &[(String, i64)]) -> Result<()> {
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        let passages: Vec<i64> = found.iter().map(|(_, p)| *p).collect();
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "INSERT INTO collections (name, owner_id, status, passages) \
             SELECT n, NULL, 'ready', p FROM UNNEST($1::text[], $2::bigint[]) AS t(n, p) \
             ON CONFLICT (name) WHERE owner_id IS NULL \
             DO UPDATE SET passages = EXCLUDED.passages, updated_at = now() \
             WHERE collections.passages <> EXCLUDED.passages",
        )
        .bind(&names)
        .bind(&passages)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM collections WHERE owner_id IS NULL AND NOT (name = ANY($1))")
            .bind(&names)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The user's private collections, by name.
    pub async fn private_collections(&self, user_id: i64) -> Result<Vec<PrivateCollection>> {
        let rows = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM collections WHERE owner_id = $1 ORDER BY name"
        ))
        .bind(user_id)
        .fetch_all(self.db())
        .await?;
        Ok(rows)
    }

    /// The user's private collection `name`; another user's is not found.
    pub async fn private_collection(&self, user_id: i64, name: &str) -> Result<PrivateCollection> {
        sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM collections WHERE owner_id = $1 AND name = $2"
        ))
        .bind(user_id)
        .bind(name)
        .fetch_optional(self.db())
        .await?
        .ok_or(StoreError::NotFound {
            entity: "collection",
        })
    }

    /// Creates an empty private collection (status `building` until its empty index exists).
    /// Its name must not be taken by a shared collection or another of the user's; a user has at
    /// most `max_per_user`.
    pub async fn create_private_collection(
        &self,
        user_id: i64,
        name: &str,
        max_per_user: i64,
    ) -> Result<PrivateCollection> {
        require_identifier("name", name, 100)?;
        let mut tx = self.pool().begin().await?;
        // Serializes the user's creations so the limit holds.
        sqlx::query("SELECT id FROM users WHERE id = $1 FOR UPDATE")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        let (owned, taken): (i64, bool) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE owner_id = $1), \
                    coalesce(bool_or(name = $2 AND (owner_id IS NULL OR owner_id = $1)), false) \
             FROM collections WHERE owner_id = $1 OR owner_id IS NULL",
        )
        .bind(user_id)
        .bind(name)
        .fetch_one(&mut *tx)
        .await?;
        if taken {
            return Err(StoreError::Conflict {
                field: "name",
                message: format!("a collection named {name:?} already exists"),
            });
        }
        if owned >= max_per_user {
            return Err(StoreError::Conflict {
                field: "name",
                message: format!(
                    "you already have {owned} private collections, the most allowed \
                     (uploads.max_collections)"
                ),
            });
        }
        let row = sqlx::query_as(&format!(
            "INSERT INTO collections (name, owner_id, status) VALUES ($1, $2, 'building') \
             RETURNING {COLUMNS}"
        ))
        .bind(name)
        .bind(user_id)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Marks the collection `building` for an upload of `size`, if no other upload is being
    /// indexed and the collection stays within `limits`.
    pub async fn begin_upload(
        &self,
        user_id: i64,
        name: &str,
        size: UploadSize,
        limits: CollectionLimits,
    ) -> Result<PrivateCollection> {
        let mut tx = self.pool().begin().await?;
        let current: PrivateCollection = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM collections WHERE owner_id = $1 AND name = $2 FOR UPDATE"
        ))
        .bind(user_id)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NotFound {
            entity: "collection",
        })?;
        if current.status == CollectionStatus::Building {
            return Err(StoreError::Conflict {
                field: "files",
                message: "the collection is still indexing the previous upload; try again when \
                          its status is ready"
                    .to_string(),
            });
        }
        within_limit(
            current.documents + size.files,
            limits.documents,
            "documents",
            "uploads.max_documents",
        )?;
        within_limit(
            current.bytes + size.bytes,
            limits.bytes,
            "bytes",
            "uploads.max_collection_bytes",
        )?;
        let row = sqlx::query_as(&format!(
            "UPDATE collections SET status = 'building', files_total = $2, files_done = 0, \
             error = NULL, updated_at = now() WHERE id = $1 RETURNING {COLUMNS}"
        ))
        .bind(current.id)
        .bind(size.files)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Records a finished indexing job: the collection now holds these totals.
    pub async fn finish_upload(
        &self,
        id: i64,
        documents: i32,
        bytes: i64,
        passages: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE collections SET status = 'ready', files_done = files_total, documents = $2, \
             bytes = $3, passages = $4, error = NULL, updated_at = now() WHERE id = $1",
        )
        .bind(id)
        .bind(documents)
        .bind(bytes)
        .bind(passages)
        .execute(self.db())
        .await?;
        Ok(())
    }

    /// Records a failed indexing job; the collection keeps what it held before.
    pub async fn fail_upload(&self, id: i64, error: &str) -> Result<()> {
        sqlx::query(
            "UPDATE collections SET status = 'failed', error = $2, updated_at = now() WHERE id = $1",
        )
        .bind(id)
        .bind(error)
        .execute(self.db())
        .await?;
        Ok(())
    }

    /// Marks every upload still `building` as failed (at start-up: no job of this process runs
    /// yet, so those were cut off by a stop). Returns how many there were.
    pub async fn fail_interrupted_uploads(&self) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE collections SET status = 'failed', error = 'the server stopped while \
             indexing this upload; upload the files again', updated_at = now() \
             WHERE status = 'building'",
        )
        .execute(self.db())
        .await?;
        Ok(done.rows_affected())
    }

    /// Deletes `user_id`'s private collection `name` and returns it; another user's is not
    /// found. Refused (conflict) while an upload is being indexed into it.
    pub async fn delete_owned_collection(
        &self,
        user_id: i64,
        name: &str,
    ) -> Result<PrivateCollection> {
        let deleted: Option<PrivateCollection> = sqlx::query_as(&format!(
            "DELETE FROM collections WHERE owner_id = $1 AND name = $2 AND status <> 'building' \
             RETURNING {COLUMNS}"
        ))
        .bind(user_id)
        .bind(name)
        .fetch_optional(self.db())
        .await?;
        match deleted {
            Some(row) => Ok(row),
            None => {
                // Not deleted: either there is no such collection, or it is being built.
                self.private_collection(user_id, name).await?;
                Err(StoreError::Conflict {
                    field: "name",
                    message: format!(
                        "an upload into {name:?} is being indexed; delete it when that is done"
                    ),
                })
            }
        }
    }

    /// Every private collection as `(owner id, name)`: what the private directories on disk
    /// may hold.
    pub async fn private_collection_owners(&self) -> Result<Vec<(i64, String)>> {
        let rows = sqlx::query_as(
            "SELECT owner_id, name FROM collections WHERE owner_id IS NOT NULL ORDER BY owner_id",
        )
        .fetch_all(self.db())
        .await?;
        Ok(rows)
    }

    /// Forgets a private collection whose creation could not be completed.
    pub async fn delete_private_collection(&self, id: i64) -> Result<()> {
        sqlx::query("DELETE FROM collections WHERE id = $1 AND owner_id IS NOT NULL")
            .bind(id)
            .execute(self.db())
            .await?;
        Ok(())
    }
}

/// Refuses an upload after which the collection would hold `total` `unit`s, above `limit` (the
/// setting `setting`).
fn within_limit<T: PartialOrd + std::fmt::Display>(
    total: T,
    limit: T,
    unit: &str,
    setting: &str,
) -> Result<()> {
    if total > limit {
        return Err(StoreError::Invalid {
            field: "files",
            message: format!(
                "the collection would hold {total} {unit}, more than the {limit} allowed ({setting})"
            ),
        });
    }
    Ok(())
}
