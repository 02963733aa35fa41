//! `<key>.vec.sha256.json`: the checksum of a complete passage vector file ([`super::vectors`]),
//! written atomically beside it when every live passage has its vector, so a vector file copied
//! with its collection is checked like the collection's own files (`convrag collection verify`).
//!
//! The sums name the digest of the collection's `manifest.sha256.json` the vectors were computed
//! against: vectors of another version of the collection are found stale as a whole, not only
//! record by record through the passage id hashes. A vector file without sums is not complete
//! (being written, interrupted, or written before sums existed): `convrag embed` finishes it and
//! writes them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::graph::{graph_sums_path, GraphSums};
use super::{DiskEmbeddingCache, EmbedError};
use crate::index::checksum::{file_sum, ChecksumManifest, FileSum};
use crate::index::{embedding_key, CollectionRegistry};
use crate::rerank::files::{cache_err, read_json, write_json};
use crate::rerank::Result;
use crate::Config;

/// What a complete vector file holds: whose vectors, of which collection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VectorOrigin {
    /// The bi-encoder (`name@checksum prefix`).
    pub model: String,
    /// The bi-encoder's checksum (hex).
    pub model_sha256: String,
    pub dim: usize,
    /// Live passages of the collection, each with its vector.
    pub passages: u64,
    /// [`ChecksumManifest::digest`] of the collection the vectors were computed from; `None`
    /// when it had no manifest (a collection indexed before manifests existed).
    pub collection_manifest_sha256: Option<String>,
}

/// What `convrag embed` records of a complete vector file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VectorSums {
    /// Size of the vector file.
    pub bytes: u64,
    /// SHA-256 of the vector file (hex).
    pub sha256: String,
    #[serde(flatten)]
    pub origin: VectorOrigin,
}

/// The sums file of the vector file at `vector_path`.
pub fn sums_path(vector_path: &Path) -> PathBuf {
    let mut name = vector_path.file_name().unwrap_or_default().to_os_string();
    name.push(".sha256.json");
    vector_path.with_file_name(name)
}

impl VectorSums {
    /// The sums beside `vector_path`; `None` when there are none.
    pub fn read(vector_path: &Path) -> Result<Option<Self>> {
        read_json(&sums_path(vector_path), "vector sums")
    }

    /// Writes them atomically beside `vector_path`.
    pub fn write(&self, vector_path: &Path) -> Result<()> {
        write_json(&sums_path(vector_path), self)
    }
}

/// Removes the sums beside `vector_path` (the file is about to grow); none is fine.
pub fn remove_sums(vector_path: &Path) -> Result<()> {
    let path = sums_path(vector_path);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(cache_err(&path, format!("cannot remove: {e}"))),
    }
}

/// The digest of the manifest of the collection in `dir`, `None` when it has none.
pub fn collection_digest(dir: &Path) -> Result<Option<String>, EmbedError> {
    Ok(ChecksumManifest::read(dir)?.map(|m| m.digest()))
}

/// Records the sums of the complete vector file at `vector_path`, of `origin`, and returns them.
/// The file is hashed unless sums already recorded for its size and origin leave nothing to
/// record; a file that differs from sums recorded for it is refused, so damage found is never
/// recorded as good.
pub fn record_complete(vector_path: &Path, origin: VectorOrigin) -> Result<VectorSums, EmbedError> {
    let bytes = std::fs::metadata(vector_path)
        .map_err(|e| cache_err(vector_path, format!("cannot read its size: {e}")))?
        .len();
    let previous = VectorSums::read(vector_path)?;
    if let Some(p) = previous.clone() {
        if p.bytes == bytes && p.origin == origin {
            return Ok(p);
        }
    }
    let actual = file_sum(vector_path)?;
    if let Some(p) = previous {
        if p.bytes != actual.bytes || p.sha256 != actual.sha256 {
            let reason = format!(
                "{}; delete it and its sums and compute the vectors again",
                changed(&p, &actual)
            );
            return Err(cache_err(vector_path, reason).into());
        }
    }
    let sums = VectorSums {
        bytes: actual.bytes,
        sha256: actual.sha256,
        origin,
    };
    sums.write(vector_path)?;
    Ok(sums)
}

fn changed(sums: &VectorSums, actual: &FileSum) -> String {
    format!(
        "size or SHA-256 differs from its sums ({} bytes, sha256 {}; the file has {} bytes, sha256 {})",
        sums.bytes, sums.sha256, actual.bytes, actual.sha256
    )
}

/// What one vector file of a collection is, against its sums and the collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VectorCheck {
    /// Its size and SHA-256 are the sums', computed against the collection as it is.
    Verified { path: PathBuf, sums: VectorSums },
    /// No sums beside it: being written, interrupted, or written before sums existed.
    NotComplete { path: PathBuf },
    /// Its size or SHA-256 differs from its sums.
    Changed {
        path: PathBuf,
        sums: VectorSums,
        actual: FileSum,
    },
    /// Computed against another version of the collection (or one without a manifest).
    Stale {
        path: PathBuf,
        sums: VectorSums,
        collection: String,
    },
    /// The vector file's nearest-neighbour graph ([`super::graph`]): each of its files
    /// matches its sums, and it was built from the vector file as its sums record it. `path` is
    /// the graph's sums file.
    GraphVerified { path: PathBuf, sums: GraphSums },
    /// A graph file is missing, or its size or SHA-256 differs from the graph's sums.
    GraphChanged { path: PathBuf, reason: String },
    /// The graph was built from other vectors than the vector file's (or from a file now without
    /// sums). `path` is the graph's sums file.
    GraphStale { path: PathBuf, sums: GraphSums },
}

impl VectorCheck {
    /// The file does not match: damaged, or not the vectors of this collection.
    pub fn is_mismatch(&self) -> bool {
        matches!(
            self,
            VectorCheck::Changed { .. }
                | VectorCheck::Stale { .. }
                | VectorCheck::GraphChanged { .. }
                | VectorCheck::GraphStale { .. }
        )
    }

    pub fn path(&self) -> &Path {
        match self {
            VectorCheck::Verified { path, .. }
            | VectorCheck::NotComplete { path }
            | VectorCheck::Changed { path, .. }
            | VectorCheck::Stale { path, .. }
            | VectorCheck::GraphVerified { path, .. }
            | VectorCheck::GraphChanged { path, .. }
            | VectorCheck::GraphStale { path, .. } => path,
        }
    }
}

impl std::fmt::Display for VectorCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path().display();
        match self {
            VectorCheck::Verified { sums, .. } => write!(
                f,
                "vectors {} ({path}): {} passages match {} (sha256 {})",
                sums.origin.model,
                sums.origin.passages,
                sums_path(self.path()).display(),
                sums.sha256
            ),
            VectorCheck::NotComplete { .. } => write!(
                f,
                "vectors {path}: not complete (no {})",
                sums_path(self.path()).display()
            ),
            VectorCheck::Changed { sums, actual, .. } => {
                write!(f, "vectors {path}: {}", changed(sums, actual))
            }
            VectorCheck::Stale {
                sums, collection, ..
            } => write!(
                f,
                "vectors {path}: stale: computed against collection manifest {}, the collection's is {collection}",
                sums.origin.collection_manifest_sha256.as_deref().unwrap_or("(none)")
            ),
            VectorCheck::GraphVerified { sums, .. } => write!(
                f,
                "nearest-neighbour graph {path}: {} files match, built from {} vectors (sha256 {})",
                sums.files.len(),
                sums.vectors,
                sums.vector_sha256
            ),
            VectorCheck::GraphChanged { reason, .. } => {
                write!(f, "nearest-neighbour graph file {path}: {reason}")
            }
            VectorCheck::GraphStale { sums, .. } => write!(
                f,
                "nearest-neighbour graph {path}: stale: built from vectors of sha256 {}, not the vector file's",
                sums.vector_sha256
            ),
        }
    }
}

/// Checks the vector file at `vector_path` against its sums and `collection_digest`, the
/// digest of the collection's manifest now.
pub fn check_vector_file(
    vector_path: &Path,
    collection_digest: &str,
) -> Result<VectorCheck, EmbedError> {
    let path = vector_path.to_path_buf();
    let Some(sums) = VectorSums::read(vector_path)? else {
        return Ok(VectorCheck::NotComplete { path });
    };
    let actual = file_sum(vector_path)?;
    if actual.bytes != sums.bytes || actual.sha256 != sums.sha256 {
        return Ok(VectorCheck::Changed { path, sums, actual });
    }
    if sums.origin.collection_manifest_sha256.as_deref() != Some(collection_digest) {
        return Ok(VectorCheck::Stale {
            path,
            sums,
            collection: collection_digest.to_string(),
        });
    }
    Ok(VectorCheck::Verified { path, sums })
}

/// Checks every model's vector file of the collection `collection` as it is indexed now (its
/// manifest's digest `collection_digest`), in path order; empty when it has none. Vector files
/// of other index layouts of the name are not this collection's and are not checked.
pub fn verify_collection_vectors(
    config: &Config,
    collection: &str,
    collection_digest: &str,
) -> Result<Vec<VectorCheck>, EmbedError> {
    let retriever = CollectionRegistry::new(config.collections_dir()).get(collection)?;
    let key = embedding_key(collection, retriever.as_ref());
    let cache = DiskEmbeddingCache::new(config.home.join("embeddings"));
    let mut checks = Vec::new();
    for path in cache.vector_paths(&key)? {
        let vectors = check_vector_file(&path, collection_digest)?;
        let graph = check_graph(&path, &vectors)?;
        checks.push(vectors);
        checks.extend(graph);
    }
    Ok(checks)
}

/// Checks the graph of the vector file at `vector_path` (whose own check is `vectors`) against
/// the graph's sums; `None` when it has no graph.
pub fn check_graph(
    vector_path: &Path,
    vectors: &VectorCheck,
) -> Result<Option<VectorCheck>, EmbedError> {
    let Some(sums) = GraphSums::read(vector_path)? else {
        return Ok(None);
    };
    let sums_file = graph_sums_path(vector_path);
    for (path, expected) in sums.files_beside(vector_path) {
        if !path.exists() {
            let reason = format!("missing (named by {})", sums_file.display());
            return Ok(Some(VectorCheck::GraphChanged { path, reason }));
        }
        let actual = file_sum(&path)?;
        if actual != *expected {
            let reason = format!(
                "size or SHA-256 differs from {} ({} bytes, sha256 {}; the file has {} bytes, sha256 {})",
                sums_file.display(),
                expected.bytes,
                expected.sha256,
                actual.bytes,
                actual.sha256
            );
            return Ok(Some(VectorCheck::GraphChanged { path, reason }));
        }
    }
    let vector_sha256 = match vectors {
        VectorCheck::Verified { sums, .. }
        | VectorCheck::Changed { sums, .. }
        | VectorCheck::Stale { sums, .. } => Some(sums.sha256.as_str()),
        _ => None,
    };
    let path = sums_file;
    Ok(Some(
        if vector_sha256 == Some(sums.vector_sha256.as_str()) {
            VectorCheck::GraphVerified { path, sums }
        } else {
            VectorCheck::GraphStale { path, sums }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLLECTION: &str = "c0ffee";

    fn origin(collection: &str) -> VectorOrigin {
        VectorOrigin {
            model: "bi@0123".into(),
            model_sha256: "0123".into(),
            dim: 3,
            passages: 2,
            collection_manifest_sha256: Some(collection.into()),
        }
    }

    /// A vector file of two records with its sums recorded.
    fn complete(dir: &Path) -> PathBuf {
        let path = dir.join("m/c.abc.vec");
        let mut w = crate::dense::vectors::VectorWriter::open(&path, 3).unwrap();
        w.append(&[(0, "a", &[1.0, 0.0, 0.0]), (1, "b", &[0.0, 1.0, 0.0])])
            .unwrap();
        record_complete(&path, origin(COLLECTION)).unwrap();
        path
    }

    #[test]
    fn a_complete_file_is_verified_and_a_file_without_sums_is_not_complete() {
        let dir = tempfile::tempdir().unwrap();
        let path = complete(dir.path());
        let check = check_vector_file(&path, COLLECTION).unwrap();
        let VectorCheck::Verified { sums, .. } = &check else {
            panic!("{check}");
        };
        assert_eq!(sums.bytes, std::fs::metadata(&path).unwrap().len());
        assert_eq!(sums.sha256, file_sum(&path).unwrap().sha256);
        assert_eq!(sums.origin, origin(COLLECTION));
        assert!(!check.is_mismatch());
        assert!(check.to_string().contains("2 passages match"), "{check}");

        remove_sums(&path).unwrap();
        let check = check_vector_file(&path, COLLECTION).unwrap();
        assert_eq!(check, VectorCheck::NotComplete { path: path.clone() });
        assert!(!check.is_mismatch());
    }

    #[test]
    fn a_flipped_byte_is_a_change_and_is_never_recorded_as_good() {
        let dir = tempfile::tempdir().unwrap();
        let path = complete(dir.path());
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let check = check_vector_file(&path, COLLECTION).unwrap();
        assert!(
            matches!(check, VectorCheck::Changed { .. }) && check.is_mismatch(),
            "{check}"
        );
        assert!(
            check.to_string().contains("size or SHA-256 differs"),
            "{check}"
        );

        // Recording the damaged file against a new collection version is refused.
        let err = record_complete(&path, origin("beef"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("differs from its sums"), "{err}");
    }

    #[test]
    fn vectors_of_a_rebuilt_collection_are_stale_until_recorded_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = complete(dir.path());
        let check = check_vector_file(&path, "beef").unwrap();
        assert!(
            matches!(check, VectorCheck::Stale { .. }) && check.is_mismatch(),
            "{check}"
        );
        assert!(
            check
                .to_string()
                .contains("computed against collection manifest c0ffee, the collection's is beef"),
            "{check}"
        );

        // The same file recorded against the new version (its vectors still hold) verifies.
        record_complete(&path, origin("beef")).unwrap();
        assert!(matches!(
            check_vector_file(&path, "beef").unwrap(),
            VectorCheck::Verified { .. }
        ));
    }
}
