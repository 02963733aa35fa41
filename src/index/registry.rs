//! The registry of collections under the data directory: shared ones by name, each user's
//! private ones under their own folder, opened on first use and kept open.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::Serialize;

use super::retriever::{Hit, Retriever, TantivyRetriever};
use super::{
    committed_state, open_tantivy, validate_name, Bm25Params, IndexError, Language, Result,
    TANTIVY_DIR,
};

/// A collection as listed by `GET /v1/collections`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CollectionInfo {
    pub name: String,
    pub format: String,
    pub language: Language,
    pub passages: u64,
    pub bad_records: u64,
    pub shards: usize,
    pub bm25: Bm25Params,
    pub created: String,
}

/// The directory under the collections root holding private collections, one folder per owner
/// (a name `validate_name` refuses, so no shared collection can be called that).
pub const PRIVATE_DIR: &str = ".private";

/// Registry key of a private collection (shared ones use their bare name, which has no '/').
fn private_key(user_id: i64, name: &str) -> String {
    format!("{user_id}/{name}")
}

/// The collections under a data directory, opened on first use and kept open. Clone it freely
/// (an `Arc` inside); `Send + Sync`, so it can sit in actix `web::Data`. Searching is
/// synchronous CPU work: call it from `web::block` in handlers.
#[derive(Clone)]
pub struct CollectionRegistry {
    inner: Arc<RegistryInner>,
}

struct RegistryInner {
    root: PathBuf,
    open: RwLock<HashMap<String, Arc<TantivyRetriever>>>,
    /// Collections this node must not serve, with the reason.
    refused: RwLock<HashMap<String, String>>,
    /// The default collection while `serve` builds it: not found yet, but coming.
    preparing: RwLock<Option<Arc<super::background::DefaultCollection>>>,
}

impl CollectionRegistry {
    /// `root` is `Config::collections_dir()`; it need not exist yet.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            inner: Arc::new(RegistryInner {
                root: root.into(),
                open: RwLock::new(HashMap::new()),
                refused: RwLock::new(HashMap::new()),
                preparing: RwLock::new(None),
            }),
        }
    }

    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Every collection with a manifest and an index, sorted by name.
    pub fn list(&self) -> Result<Vec<CollectionInfo>> {
        let root = &self.inner.root;
        let mut out = Vec::new();
        let entries = match std::fs::read_dir(root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(super::io_err(root)(e)),
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if validate_name(&name).is_err()
                || !entry.path().join(TANTIVY_DIR).join("meta.json").exists()
                || self.refusal(&name).is_some()
            {
                continue;
            }
            let retriever = self.get(&name)?;
            let m = retriever.manifest();
            let state = {
                let index = open_tantivy(&entry.path(), m.language)?;
                committed_state(&index, &entry.path())?
            };
            out.push(CollectionInfo {
                name,
                format: m.format.to_string(),
                language: m.language,
                passages: retriever.num_passages(),
                bad_records: state.bad_records + state.duplicates,
                shards: state.shards.len(),
                bm25: m.bm25,
                created: m.created.clone(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Stops serving collection `name` (its files are not the recorded ones); `get` fails with
    /// [`IndexError::Refused`] and `list` leaves it out.
    pub fn refuse(&self, name: &str, reason: String) {
        self.inner
            .refused
            .write()
            .expect("registry lock")
            .insert(name.to_string(), reason);
        self.inner.open.write().expect("registry lock").remove(name);
    }

    /// Names `default` as being built: until it is published, asking for it is
    /// [`IndexError::Preparing`] (with its progress), not a collection that does not exist.
    pub fn set_preparing(&self, default: Arc<super::background::DefaultCollection>) {
        *self.inner.preparing.write().expect("registry lock") = Some(default);
    }

    /// `NotFound` for `name`, or `Preparing` when it is the default collection being built.
    fn not_found(&self, name: &str) -> IndexError {
        let preparing = self.inner.preparing.read().expect("registry lock");
        match preparing.as_ref().map(|d| (d.name(), d.status())) {
            Some((default, status))
                if default == name
                    && matches!(
                        status.status,
                        super::background::BuildState::Pending
                            | super::background::BuildState::Building
                    ) =>
            {
                IndexError::Preparing {
                    name: name.to_string(),
                    percent: (status.progress * 100.0).floor() as u32,
                }
            }
            _ => IndexError::NotFound {
                name: name.to_string(),
                root: self.inner.root.clone(),
            },
        }
    }

    fn refusal(&self, name: &str) -> Option<String> {
        self.inner
            .refused
            .read()
            .expect("registry lock")
            .get(name)
            .cloned()
    }

    /// The retriever of the shared collection `name`, opened once and shared.
    pub fn get(&self, name: &str) -> Result<Arc<TantivyRetriever>> {
        validate_name(name)?;
        if let Some(reason) = self.refusal(name) {
            return Err(IndexError::Refused {
                name: name.to_string(),
                reason,
            });
        }
        self.open_dir(name.to_string(), &self.inner.root.join(name), name)
    }

    /// The collection `name` as `user_id` sees it: their private collection of that name if they
    /// have one, else the shared one. This is the visibility rule: another user's private
    /// collection lives under that user's directory and is never reached, so it is not found
    /// exactly like a collection that does not exist.
    pub fn get_visible(&self, user_id: i64, name: &str) -> Result<Arc<TantivyRetriever>> {
        validate_name(name)?;
        let private = self.private_dir(user_id, name);
        if private.join(TANTIVY_DIR).join("meta.json").exists() {
            return self.open_dir(private_key(user_id, name), &private, name);
        }
        self.get(name)
    }

    /// Where the private collections of `user_id` live (a directory that `list` skips).
    pub fn private_root(&self, user_id: i64) -> PathBuf {
        self.inner.root.join(PRIVATE_DIR).join(user_id.to_string())
    }

    /// The live directory of a private collection: a symlink to its current version, replaced
    /// atomically when the collection is rebuilt.
    pub fn private_dir(&self, user_id: i64, name: &str) -> PathBuf {
        self.private_root(user_id).join(name)
    }

    /// Drops the open retriever of a private collection, so the next use opens its new version.
    pub fn forget_private(&self, user_id: i64, name: &str) {
        let key = private_key(user_id, name);
        self.inner.open.write().expect("registry lock").remove(&key);
    }

    fn open_dir(&self, key: String, dir: &Path, name: &str) -> Result<Arc<TantivyRetriever>> {
        if let Some(r) = self.inner.open.read().expect("registry lock").get(&key) {
            return Ok(r.clone());
        }
        if !dir.join(TANTIVY_DIR).join("meta.json").exists() {
            return Err(self.not_found(name));
        }
        // The version a symlink points to now: a later swap must not change an open index's files.
        let dir = std::fs::canonicalize(dir).map_err(super::io_err(dir))?;
        let r = Arc::new(TantivyRetriever::open(&dir)?);
        let mut open = self.inner.open.write().expect("registry lock");
        Ok(open.entry(key).or_insert(r).clone())
    }

    /// Convenience for handlers: search collection `name` for `query`.
    pub fn search(&self, name: &str, query: &str, k: usize) -> Result<Vec<Hit>> {
        self.get(name)?.search(query, k)
    }
}
