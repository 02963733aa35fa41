//! The checksum-manifest digest recorded for each collection name, which every server sharing
//! the database compares with its own copy before serving the collection.

use chrono::{DateTime, Utc};

use super::{Result, Store};

/// The digest recorded for a collection, and by whom.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RecordedManifest {
    pub sha256: String,
    pub recorded_by: String,
    pub recorded_at: DateTime<Utc>,
}

impl Store {
    /// Records `sha256` for collection `name` unless one is recorded; returns the recorded one.
    pub async fn record_collection_manifest(
        &self,
        name: &str,
        sha256: &str,
        node: &str,
    ) -> Result<RecordedManifest> {
        sqlx::query(
            "INSERT INTO collection_manifests (name, sha256, recorded_by) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(sha256)
        .bind(node)
        .execute(self.db())
        .await?;
        Ok(sqlx::query_as(
            "SELECT sha256, recorded_by, recorded_at FROM collection_manifests WHERE name = $1",
        )
        .bind(name)
        .fetch_one(self.db())
        .await?)
    }

    /// Makes `sha256` the recorded digest of `name` (a new version of the collection).
    pub async fn replace_collection_manifest(
        &self,
        name: &str,
        sha256: &str,
        node: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO collection_manifests (name, sha256, recorded_by) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET sha256 = $2, recorded_by = $3, recorded_at = now()",
        )
        .bind(name)
        .bind(sha256)
        .bind(node)
        .execute(self.db())
        .await?;
        Ok(())
    }
}
