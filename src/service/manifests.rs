//! Before a server serves its collections it compares each one's checksum manifest with the one
//! recorded in the database for that name (the first server to open it records it): servers
//! sharing a database serve the same collections, or refuse the ones that differ.

use crate::index::checksum::ChecksumManifest;
use crate::index::{CollectionRegistry, TANTIVY_DIR};
use crate::store::Store;

use super::{Result, ServiceError};

/// A collection this server does not serve, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub collection: String,
    pub reason: String,
}

/// Checks every collection under the registry's root; the ones whose manifest digest differs
/// from the recorded one are refused in the registry (logged as errors) and returned.
/// Collections without a manifest (indexed before manifests existed) are served with a warning.
pub async fn check_collection_manifests(
    store: &Store,
    registry: &CollectionRegistry,
    node: &str,
) -> Result<Vec<Refusal>> {
    let mut refused = Vec::new();
    for (name, manifest) in local_manifests(registry).await? {
        let Some(manifest) = manifest else {
            tracing::warn!(collection = %name, "no manifest.sha256.json: served without checking that every server has the same files (index it again to write one)");
            continue;
        };
        let digest = manifest.digest();
        let recorded = store
            .record_collection_manifest(&name, &digest, node)
            .await?;
        if recorded.sha256 != digest {
            let reason = format!(
                "its manifest.sha256.json (sha256 {}) differs from the one {} recorded at {} (sha256 {}): copy that collection here, or record this one with `convrag collection verify {name} --record`",
                &digest[..12],
                recorded.recorded_by,
                recorded.recorded_at.to_rfc3339(),
                &recorded.sha256[..12],
            );
            tracing::error!(collection = %name, %reason, "collection refused");
            registry.refuse(&name, reason.clone());
            refused.push(Refusal {
                collection: name,
                reason,
            });
        }
    }
    Ok(refused)
}

/// (name, checksum manifest if any) of every indexed collection under the registry's root.
async fn local_manifests(
    registry: &CollectionRegistry,
) -> Result<Vec<(String, Option<ChecksumManifest>)>> {
    let root = registry.root().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let entries = match std::fs::read_dir(&root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => {
                return Err(crate::index::IndexError::Io {
                    path: root.clone(),
                    source: e,
                })
            }
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            if !dir.join(TANTIVY_DIR).join("meta.json").exists() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            out.push((name, ChecksumManifest::read(&dir)?));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    })
    .await
    .map_err(ServiceError::Task)?
    .map_err(ServiceError::Index)
}
