//! [`CollectionService`]: the collections a user sees (the shared ones and their own private ones),
//! private collections made from uploaded files, and their background indexing.
//!
//! Which collection a name means for a user is decided once, by
//! [`CollectionRegistry::get_visible`]: their private collection of that name, else the shared
//! one; another user's private collection is never reached and so is not found, like a name that
//! does not exist.
//!
//! A private collection's files (versions swapped in atomically) are `index::private`'s.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::json;

use super::vectors::{VectorBuilds, VectorStatus};
use crate::collection::documents::{self, Document, DocumentError};
use crate::config::UploadLimits;
use crate::index::{CollectionInfo, CollectionRegistry, IndexError};
use crate::progress::{Counter, Progress};
use crate::store::{
    CollectionLimits, CollectionStatus, PrivateCollection, Store, StoreError, UploadSize,
};

/// What is wrong with one file of an upload, which decides the HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileProblem {
    /// Larger than `uploads.max_file_bytes`, or more files than `uploads.max_files` (413).
    TooLarge,
    /// Not one of the accepted types (415).
    WrongType,
    /// Empty (400).
    Empty,
    /// A corrupt PDF, or no text to index (422).
    Unreadable,
}

/// Errors of the collections service.
#[derive(Debug, thiserror::Error)]
pub enum CollectionServiceError {
    /// A file of the upload (`field` is `files[i]`) is refused; nothing was stored.
    #[error("{field}: {reason}")]
    File {
        field: String,
        problem: FileProblem,
        reason: String,
    },
    /// The request has no file at all.
    #[error("files: at least one file is required")]
    NoFiles,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("a task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
    /// Too many uploads are being received (the user's or the server's); retry later.
    #[error("files: {0}")]
    Busy(&'static str),
}

pub type Result<T, E = CollectionServiceError> = std::result::Result<T, E>;

/// Uploads received at once by one user, and by the whole server: each holds up to a request
/// body's worth of spooled files.
pub const MAX_UPLOADS_PER_USER: usize = 2;
pub const MAX_UPLOADS_PER_SERVER: usize = 8;
/// A user's second (and later) upload is admitted only while fewer slots than this are taken:
/// the rest are kept for users receiving none, so a few accounts cannot hold every slot.
pub const SHARED_UPLOAD_SLOTS: usize = MAX_UPLOADS_PER_SERVER / 2;

/// Room for multipart boundaries and part headers beyond the files' own bytes.
const MULTIPART_OVERHEAD_PER_FILE: u64 = 4096;

/// An upload admitted before its body is read: the collection is the user's and can take more,
/// and a slot among the uploads being received is held until this is dropped.
pub struct UploadPermit {
    /// Bytes the collection may still take (`uploads.max_collection_bytes` less what it holds).
    pub remaining_bytes: u64,
    slots: Arc<Mutex<UploadSlots>>,
    user_id: i64,
}

impl Drop for UploadPermit {
    fn drop(&mut self) {
        let mut slots = self.slots.lock().expect("upload slots lock");
        slots.total = slots.total.saturating_sub(1);
        if let Some(n) = slots.per_user.get_mut(&self.user_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                slots.per_user.remove(&self.user_id);
            }
        }
    }
}

/// Uploads being received, in all and per user.
#[derive(Default)]
struct UploadSlots {
    total: usize,
    per_user: HashMap<i64, usize>,
}

/// One file of an upload as received, spooled to a temporary file (removed on drop).
#[derive(Debug)]
pub struct UploadedFile {
    pub file_name: String,
    pub file: tempfile::NamedTempFile,
    /// Its size in bytes.
    pub len: u64,
}

/// A collection as `GET /v1/collections` and `GET /v1/collections/{name}` show it.
#[derive(Debug, Clone, Serialize)]
pub struct CollectionView {
    pub name: String,
    /// `shared` (everyone sees it) or `private` (only its owner does).
    pub visibility: Visibility,
    pub status: CollectionStatus,
    pub passages: u64,
    pub created: String,
    /// Shared collections: how they were indexed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<crate::index::Language>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bad_records: Option<u64>,
    /// Private collections: the documents uploaded, their bytes, the last upload's files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_total: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_done: Option<i32>,
    /// Why the last upload could not be indexed (status `failed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// While an upload is indexed: `{"bytes_done", "bytes_total"}` of its extracted text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<serde_json::Value>,
    /// Whether its passages have their vectors (dense and hybrid retrieval): `{"status":
    /// "none"|"building"|"ready", "progress"?}`; absent on a server without a bi-encoder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vectors: Option<VectorStatus>,
}

/// Who sees a collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    Shared,
    Private,
}

impl CollectionView {
    fn shared(info: CollectionInfo) -> Self {
        CollectionView {
            name: info.name,
            visibility: Visibility::Shared,
            status: CollectionStatus::Ready,
            passages: info.passages,
            created: info.created,
            format: Some(info.format),
            language: Some(info.language),
            bad_records: Some(info.bad_records),
            documents: None,
            bytes: None,
            files_total: None,
            files_done: None,
            error: None,
            progress: None,
            vectors: None,
        }
    }

    fn private(row: PrivateCollection, progress: Option<serde_json::Value>) -> Self {
        CollectionView {
            name: row.name,
            visibility: Visibility::Private,
            status: row.status,
            passages: row.passages.max(0) as u64,
            created: row.created_at.to_rfc3339(),
            format: None,
            language: None,
            bad_records: None,
            documents: Some(row.documents),
            bytes: Some(row.bytes),
            files_total: Some(row.files_total),
            files_done: Some(row.files_done),
            error: row.error,
            progress,
            vectors: None,
        }
    }
}

/// Shared and private collections, and the uploads into private ones.
pub struct CollectionService {
    store: Store,
    registry: CollectionRegistry,
    limits: UploadLimits,
    /// Indexing jobs under way, by collection row id: bytes read of the extracted text.
    jobs: Mutex<HashMap<i64, Arc<Counter>>>,
    /// Uploads whose bodies are being received.
    upload_slots: Arc<Mutex<UploadSlots>>,
    /// Computes an upload's passage vectors once it is indexed (with a bi-encoder).
    vectors: Option<Arc<VectorBuilds>>,
}

impl CollectionService {
    pub fn new(store: Store, registry: CollectionRegistry, limits: UploadLimits) -> Self {
        CollectionService {
            store,
            registry,
            limits,
            jobs: Mutex::new(HashMap::new()),
            upload_slots: Arc::default(),
            vectors: None,
        }
    }

    /// Computes each upload's passage vectors in the background with `vectors`, and shows
    /// collections' vector status.
    pub fn with_vectors(mut self, vectors: Option<Arc<VectorBuilds>>) -> Self {
        self.vectors = vectors;
        self
    }

    /// `views` with their vector status, as `user_id` sees them (ready collections only).
    async fn with_vector_status(
        &self,
        user_id: i64,
        mut views: Vec<CollectionView>,
    ) -> Result<Vec<CollectionView>> {
        let Some(builds) = self.vectors.clone() else {
            return Ok(views);
        };
        let registry = self.registry.clone();
        tokio::task::spawn_blocking(move || {
            for view in views
                .iter_mut()
                .filter(|v| v.status == CollectionStatus::Ready)
            {
                // A collection that cannot be opened shows no vector status (its own error
                // is reported where it is searched).
                let bm25 = match view.visibility {
                    Visibility::Shared => registry.get(&view.name),
                    Visibility::Private => registry.get_visible(user_id, &view.name),
                };
                if let Ok(bm25) = bm25 {
                    view.vectors = Some(builds.status(&view.name, &bm25));
                }
            }
            views
        })
        .await
        .map_err(CollectionServiceError::Task)
    }

    pub fn limits(&self) -> UploadLimits {
        self.limits
    }

    /// Each shared collection's name, passages and bytes on disk (for `/metrics`; private
    /// collections are left out, their names are their owners' business). Blocking.
    pub fn shared_sizes(&self) -> Result<Vec<(String, u64, u64)>> {
        let shared = self.registry.list()?;
        Ok(shared
            .into_iter()
            .map(|c| {
                let bytes = self.registry.shared_bytes(&c.name);
                (c.name, c.passages, bytes)
            })
            .collect())
    }

    /// The shared collections (as found on disk) and `user_id`'s own.
    pub async fn list(&self, user_id: i64) -> Result<Vec<CollectionView>> {
        let registry = self.registry.clone();
        let shared = tokio::task::spawn_blocking(move || registry.list())
            .await
            .map_err(CollectionServiceError::Task)??;
        let mut out: Vec<CollectionView> = shared.into_iter().map(CollectionView::shared).collect();
        for row in self.store.private_collections(user_id).await? {
            out.push(self.private_view(row));
        }
        self.with_vector_status(user_id, out).await
    }

    /// The collection `name` as `user_id` sees it (another user's private one is not found).
    pub async fn get(&self, user_id: i64, name: &str) -> Result<CollectionView> {
        let view = self.get_without_vectors(user_id, name).await?;
        let mut views = self.with_vector_status(user_id, vec![view]).await?;
        Ok(views.remove(0))
    }

    async fn get_without_vectors(&self, user_id: i64, name: &str) -> Result<CollectionView> {
        match self.store.private_collection(user_id, name).await {
            Ok(row) => return Ok(self.private_view(row)),
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        let registry = self.registry.clone();
        let name = name.to_string();
        let info = tokio::task::spawn_blocking(move || -> crate::index::Result<_> {
            registry.get(&name)?;
            registry
                .list()?
                .into_iter()
                .find(|c| c.name == name)
                .ok_or(IndexError::NotFound {
                    name,
                    root: registry.root().to_path_buf(),
                })
        })
        .await
        .map_err(CollectionServiceError::Task)??;
        Ok(CollectionView::shared(info))
    }

    fn private_view(&self, row: PrivateCollection) -> CollectionView {
        let progress = self
            .jobs
            .lock()
            .expect("jobs lock")
            .get(&row.id)
            .map(|p| json!({"bytes_done": p.done(), "bytes_total": p.total()}));
        CollectionView::private(row, progress)
    }

    /// At start-up: uploads cut off by a stop are marked failed (their collections keep the
    /// documents they had), the versions they were building are removed, and so are the files
    /// of deleted collections. Returns how many uploads were interrupted.
    pub async fn recover(&self) -> Result<u64> {
        let interrupted = self.store.fail_interrupted_uploads().await?;
        // The shared collections found on disk are recorded once here, not on every listing
        // (a read must not write); `create` also checks the disk, so a collection indexed
        // while the server runs still reserves its name.
        let registry = self.registry.clone();
        let shared = tokio::task::spawn_blocking(move || registry.list())
            .await
            .map_err(CollectionServiceError::Task)??;
        let found: Vec<(String, i64)> = shared
            .iter()
            .map(|c| (c.name.clone(), c.passages as i64))
            .collect();
        self.store.sync_shared_collections(&found).await?;
        // Files of collections (or whole accounts) deleted while a server was down, or on
        // another server sharing the database, are removed too.
        let mut owned: HashMap<i64, Vec<String>> = HashMap::new();
        for (owner, name) in self.store.private_collection_owners().await? {
            owned.entry(owner).or_default().push(name);
        }
        let registry = self.registry.clone();
        tokio::task::spawn_blocking(move || registry.remove_unused_private(&owned))
            .await
            .map_err(CollectionServiceError::Task)??;
        Ok(interrupted)
    }

    /// Deletes `user_id`'s private collection `name`: its row, then its files (documents and
    /// index). Shared collections are managed on the command line, not here.
    pub async fn delete(&self, user_id: i64, name: &str) -> Result<()> {
        crate::index::validate_name(name)?;
        let row = match self.store.delete_owned_collection(user_id, name).await {
            Err(StoreError::NotFound { .. }) if self.registry_has_shared(name).await? => {
                return Err(StoreError::Conflict {
                    field: "name",
                    message: format!(
                        "{name:?} is a shared collection; an administrator removes it with the \
                         command line"
                    ),
                }
                .into())
            }
            other => other?,
        };
        let registry = self.registry.clone();
        let name = row.name;
        tokio::task::spawn_blocking(move || registry.remove_private(user_id, &name))
            .await
            .map_err(CollectionServiceError::Task)??;
        Ok(())
    }

    /// Removes every private collection file of `user_id`, whose account is deleted (the rows
    /// went with it).
    pub async fn delete_owner_files(&self, user_id: i64) -> Result<()> {
        let registry = self.registry.clone();
        tokio::task::spawn_blocking(move || registry.remove_owner(user_id))
            .await
            .map_err(CollectionServiceError::Task)??;
        Ok(())
    }

    async fn registry_has_shared(&self, name: &str) -> Result<bool> {
        let registry = self.registry.clone();
        let name = name.to_string();
        tokio::task::spawn_blocking(move || registry.get(&name).is_ok())
            .await
            .map_err(CollectionServiceError::Task)
    }

    /// Creates an empty private collection of `user_id` (ready at once: it holds no documents).
    pub async fn create(&self, user_id: i64, name: &str) -> Result<CollectionView> {
        crate::index::validate_name(name)?;
        if self.registry_has_shared(name).await? {
            return Err(StoreError::Conflict {
                field: "name",
                message: format!("a shared collection is named {name:?}; choose another name"),
            }
            .into());
        }
        let row = self
            .store
            .create_private_collection(user_id, name, self.limits.max_collections.into())
            .await?;
        let built = self.build(user_id, name, Vec::new(), None).await;
        match built {
            Ok(passages) => {
                self.store
                    .finish_upload(row.id, 0, 0, passages as i64)
                    .await?;
                Ok(self.get(user_id, name).await?)
            }
            Err(e) => {
                self.store.delete_private_collection(row.id).await?;
                Err(e)
            }
        }
    }

    /// Admits an upload into the user's collection `name` before its body is read: another
    /// user's collection (or none) is not found, one still indexing is a conflict, a body whose
    /// declared length (`Content-Length`) cannot fit the collection's quota or the upload limits
    /// is too large, and beyond the uploads received at once the server is busy.
    pub async fn admit_upload(
        &self,
        user_id: i64,
        name: &str,
        declared_bytes: Option<u64>,
    ) -> Result<UploadPermit> {
        let current = self.store.private_collection(user_id, name).await?;
        if current.status == CollectionStatus::Building {
            return Err(StoreError::Conflict {
                field: "files",
                message: "the collection is still indexing the previous upload; try again when \
                          its status is ready"
                    .to_string(),
            }
            .into());
        }
        let remaining_bytes = self
            .limits
            .max_collection_bytes
            .saturating_sub(current.bytes.max(0) as u64);
        if let Some(declared) = declared_bytes {
            let overhead = MULTIPART_OVERHEAD_PER_FILE * self.limits.max_files as u64;
            let most = remaining_bytes
                .min(self.limits.max_file_bytes * self.limits.max_files as u64)
                .saturating_add(overhead);
            if declared > most {
                return Err(CollectionServiceError::File {
                    field: "files".to_string(),
                    problem: FileProblem::TooLarge,
                    reason: format!(
                        "the body is {declared} bytes; the collection can take {remaining_bytes} \
                         more bytes (uploads.max_collection_bytes), at most {} files of {} bytes \
                         each (uploads.max_files, uploads.max_file_bytes)",
                        self.limits.max_files, self.limits.max_file_bytes
                    ),
                });
            }
        }
        let mut slots = self.upload_slots.lock().expect("upload slots lock");
        if slots.total >= MAX_UPLOADS_PER_SERVER {
            return Err(CollectionServiceError::Busy(
                "the server is receiving as many uploads as it takes at once; retry shortly",
            ));
        }
        let total = slots.total;
        let mine = slots.per_user.entry(user_id).or_insert(0);
        if *mine >= MAX_UPLOADS_PER_USER {
            return Err(CollectionServiceError::Busy(
                "you have as many uploads in progress as one user may; retry when one is done",
            ));
        }
        if *mine >= 1 && total >= SHARED_UPLOAD_SLOTS {
            return Err(CollectionServiceError::Busy(
                "the server is busy with other users' uploads; retry when yours is done",
            ));
        }
        *mine += 1;
        slots.total += 1;
        Ok(UploadPermit {
            remaining_bytes,
            slots: self.upload_slots.clone(),
            user_id,
        })
    }

    /// Checks every file, then marks the collection building and indexes the files in the
    /// background. A refused file refuses the whole upload before anything is stored.
    pub async fn upload(
        self: &Arc<Self>,
        user_id: i64,
        name: &str,
        files: Vec<UploadedFile>,
    ) -> Result<CollectionView> {
        // Another user's collection (or none): not found, before looking at the files.
        self.store.private_collection(user_id, name).await?;
        let size = UploadSize {
            files: files.len() as i32,
            bytes: files.iter().map(|f| f.len as i64).sum(),
        };
        let documents = tokio::task::spawn_blocking({
            let limits = self.limits;
            move || read_uploads(&files, limits)
        })
        .await
        .map_err(CollectionServiceError::Task)??;
        let limits = CollectionLimits {
            documents: self.limits.max_documents.min(i32::MAX as u32) as i32,
            bytes: self.limits.max_collection_bytes.min(i64::MAX as u64) as i64,
        };
        let row = self.store.begin_upload(user_id, name, size, limits).await?;
        let progress = Arc::new(Counter::default());
        self.jobs
            .lock()
            .expect("jobs lock")
            .insert(row.id, progress.clone());
        let service = Arc::clone(self);
        let name = name.to_string();
        let view = self.private_view(row.clone());
        tokio::spawn(async move {
            service
                .finish_job(user_id, &name, &row, documents, size, progress)
                .await;
        });
        Ok(view)
    }

    /// The background half of an upload: build, swap, record the outcome.
    async fn finish_job(
        &self,
        user_id: i64,
        name: &str,
        row: &PrivateCollection,
        documents: Vec<(String, Document)>,
        size: UploadSize,
        progress: Arc<Counter>,
    ) {
        let added = documents.len() as i32;
        let outcome = self
            .build(
                user_id,
                name,
                documents,
                Some(progress as Arc<dyn Progress>),
            )
            .await;
        let recorded = match outcome {
            Ok(passages) => {
                self.start_vectors(user_id, name).await;
                self.store
                    .finish_upload(
                        row.id,
                        row.documents + added,
                        row.bytes + size.bytes,
                        passages as i64,
                    )
                    .await
            }
            Err(e) => {
                tracing::error!(collection = name, user_id, error = %e, "indexing an upload failed");
                self.store
                    .fail_upload(row.id, "the documents could not be indexed")
                    .await
            }
        };
        if let Err(e) = recorded {
            tracing::error!(collection = name, user_id, error = %e, "recording an upload failed");
        }
        self.jobs.lock().expect("jobs lock").remove(&row.id);
    }

    /// Starts computing the passage vectors of `user_id`'s collection `name` just indexed.
    async fn start_vectors(&self, user_id: i64, name: &str) {
        let Some(builds) = self.vectors.clone() else {
            return;
        };
        let registry = self.registry.clone();
        let name = name.to_string();
        let started = tokio::task::spawn_blocking(move || {
            registry
                .get_visible(user_id, &name)
                .map(|bm25| builds.start(&name, bm25))
        })
        .await;
        if let Ok(Err(e)) = started {
            tracing::error!(user_id, error = %e, "no passage vectors for the upload");
        }
    }

    /// Builds a new version of the private collection with its current documents plus `added`,
    /// then makes it the live one. Returns the passages indexed.
    async fn build(
        &self,
        user_id: i64,
        name: &str,
        added: Vec<(String, Document)>,
        progress: Option<Arc<dyn Progress>>,
    ) -> Result<u64> {
        let registry = self.registry.clone();
        let name = name.to_string();
        let passages = tokio::task::spawn_blocking(move || {
            registry.build_private(user_id, &name, &added, progress)
        })
        .await
        .map_err(CollectionServiceError::Task)??;
        Ok(passages)
    }
}

/// Reads every uploaded file, or names the first one refused (`files[i]`).
fn read_uploads(files: &[UploadedFile], limits: UploadLimits) -> Result<Vec<(String, Document)>> {
    if files.is_empty() {
        return Err(CollectionServiceError::NoFiles);
    }
    if files.len() > limits.max_files {
        return Err(CollectionServiceError::File {
            field: "files".to_string(),
            problem: FileProblem::TooLarge,
            reason: format!(
                "{} files in one upload, more than the {} allowed (uploads.max_files)",
                files.len(),
                limits.max_files
            ),
        });
    }
    let mut out = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        let refuse = |problem, reason: String| CollectionServiceError::File {
            field: format!("files[{i}]"),
            problem,
            reason: format!("{:?} {reason}", file.file_name),
        };
        if file.len > limits.max_file_bytes {
            return Err(refuse(
                FileProblem::TooLarge,
                format!(
                    "is too large: {} bytes, more than the {} allowed (uploads.max_file_bytes)",
                    file.len, limits.max_file_bytes
                ),
            ));
        }
        let bytes = std::fs::read(file.file.path()).map_err(io_err(file.file.path()))?;
        let document = documents::extract(&file.file_name, &bytes).map_err(|e| {
            let problem = match e {
                DocumentError::Empty => FileProblem::Empty,
                DocumentError::WrongType(_) => FileProblem::WrongType,
                DocumentError::CorruptPdf(_) | DocumentError::NoText(_) => FileProblem::Unreadable,
            };
            refuse(problem, e.to_string())
        })?;
        out.push((file.file_name.clone(), document));
    }
    Ok(out)
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> CollectionServiceError + '_ {
    move |source| CollectionServiceError::Io {
        path: path.to_path_buf(),
        source,
    }
}
