//! The server's default collection: built from a source directory (the PostgreSQL manual's HTML
//! pages by default) with the same indexer as `convrag index`, in the background, and published
//! only when complete.
//!
//! The index is built under `staging/<name>` (outside the collections directory, so nothing lists
//! or serves it) and renamed into `collections/<name>` in one step at the end. A killed build
//! leaves its committed shards in the staging directory, and the next start resumes from them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::writer::{index_collection, IndexOptions, IndexReport};
use super::{io_err, read_manifest, IndexError, Result, PASSAGE_LAYOUT, TANTIVY_DIR};
use crate::collection::Format;
use crate::progress::Progress;

/// Where a collection build stands, as `GET /v1/collections` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildState {
    /// Not started yet (the server has just started).
    Pending,
    Building,
    Ready,
    Failed,
}

impl BuildState {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => BuildState::Pending,
            1 => BuildState::Building,
            2 => BuildState::Ready,
            _ => BuildState::Failed,
        }
    }
    fn as_u8(self) -> u8 {
        match self {
            BuildState::Pending => 0,
            BuildState::Building => 1,
            BuildState::Ready => 2,
            BuildState::Failed => 3,
        }
    }
}

/// A snapshot of a build, serialized into the collection list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BuildStatus {
    pub name: String,
    pub status: BuildState,
    /// Fraction of the input read, 0 to 1.
    pub progress: f64,
    /// That the build failed (the reason, which names server paths, is logged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The default collection and the live state of its build. It is also the build's [`Progress`]
/// sink: the indexer reports input bytes, and every tenth of the way is logged.
#[derive(Debug)]
pub struct DefaultCollection {
    name: String,
    source: PathBuf,
    state: AtomicU8,
    total: AtomicU64,
    done: AtomicU64,
    logged_tenths: AtomicU64,
    error: Mutex<Option<String>>,
}

impl DefaultCollection {
    /// The collection `name`, to be built from the HTML pages under `source`.
    pub fn new(name: &str, source: &Path) -> Self {
        Self {
            name: name.to_string(),
            source: source.to_path_buf(),
            state: AtomicU8::new(BuildState::Pending.as_u8()),
            total: AtomicU64::new(0),
            done: AtomicU64::new(0),
            logged_tenths: AtomicU64::new(0),
            error: Mutex::new(None),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn state(&self) -> BuildState {
        BuildState::from_u8(self.state.load(Ordering::Relaxed))
    }

    pub fn status(&self) -> BuildStatus {
        let state = self.state();
        let total = self.total.load(Ordering::Relaxed);
        let progress = match state {
            BuildState::Ready => 1.0,
            _ if total == 0 => 0.0,
            _ => (self.done.load(Ordering::Relaxed) as f64 / total as f64).min(1.0),
        };
        BuildStatus {
            name: self.name.clone(),
            status: state,
            progress,
            error: self.error.lock().expect("build error lock").clone(),
        }
    }

    fn set_state(&self, state: BuildState) {
        self.state.store(state.as_u8(), Ordering::Relaxed);
    }

    /// Builds the collection unless `collections_dir/<name>` already exists, then publishes it.
    /// Blocking (CPU and disk): run it on a thread of its own. `threads` bounds the indexer so
    /// that the server keeps answering while it runs.
    pub fn build(
        self: &Arc<Self>,
        collections_dir: &Path,
        staging_dir: &Path,
        threads: usize,
    ) -> Result<Option<IndexReport>> {
        if is_published(collections_dir, &self.name) {
            if is_current(collections_dir, &self.name) {
                self.set_state(BuildState::Ready);
                return Ok(None);
            }
            if !self.source.is_dir() {
                // Nothing to rebuild it from: the older passages are better than none.
                tracing::warn!(collection = %self.name, "the default collection has an older passage layout and no source to rebuild it from");
                self.set_state(BuildState::Ready);
                return Ok(None);
            }
            // Built by an older version with another passage layout: removed before anything
            // opens it, and built again as on a first start.
            tracing::info!(collection = %self.name, "the default collection has an older passage layout; rebuilding it");
            let stale = collections_dir.join(&self.name);
            if let Err(e) = std::fs::remove_dir_all(&stale) {
                self.set_state(BuildState::Failed);
                return Err(io_err(&stale)(e));
            }
        }
        self.set_state(BuildState::Building);
        let result = self.build_and_publish(collections_dir, staging_dir, threads);
        match &result {
            Ok(_) => self.set_state(BuildState::Ready),
            Err(e) => {
                // The list shows users that it failed; the paths and reasons go to the log.
                tracing::error!(collection = %self.name, error = %e, "the default collection could not be built");
                *self.error.lock().expect("build error lock") =
                    Some("the server could not build it; its log says why".to_string());
                self.set_state(BuildState::Failed);
            }
        }
        result.map(Some)
    }

    fn build_and_publish(
        self: &Arc<Self>,
        collections_dir: &Path,
        staging_dir: &Path,
        threads: usize,
    ) -> Result<IndexReport> {
        if !self.source.is_dir() {
            return Err(IndexError::Invalid(format!(
                "the default collection's source {} is not a directory",
                self.source.display()
            )));
        }
        // Shards staged by a version with another layout cannot be resumed.
        let staged = staging_dir.join(&self.name);
        if is_published(staging_dir, &self.name) && !is_current(staging_dir, &self.name) {
            std::fs::remove_dir_all(&staged).map_err(io_err(&staged))?;
        }
        let mut opts = IndexOptions::new(&self.name, Format::Html);
        opts.inputs = vec![self.source.clone()];
        opts.threads = threads.max(1);
        opts.heap_bytes = 64 << 20;
        // Commit every batch of pages, so a killed build loses little.
        opts.commit_bytes = 4 << 20;
        opts.optimize = true;
        opts.progress = self.clone();
        let report = index_collection(staging_dir, &opts)?;
        if report.passages_total == 0 {
            return Err(IndexError::Invalid(format!(
                "no passage could be read from {}",
                self.source.display()
            )));
        }
        std::fs::create_dir_all(collections_dir).map_err(io_err(collections_dir))?;
        let target = collections_dir.join(&self.name);
        std::fs::rename(staging_dir.join(&self.name), &target).map_err(io_err(&target))?;
        tracing::info!(
            collection = %self.name,
            passages = report.passages_total,
            bad_records = report.bad_records,
            seconds = report.seconds,
            "default collection ready"
        );
        Ok(report)
    }
}

/// Whether `collections_dir/<name>` holds a committed index.
fn is_published(collections_dir: &Path, name: &str) -> bool {
    collections_dir
        .join(name)
        .join(TANTIVY_DIR)
        .join("meta.json")
        .exists()
}

/// Whether `dir/<name>` was built with this version's passage layout.
fn is_current(dir: &Path, name: &str) -> bool {
    read_manifest(&dir.join(name)).is_ok_and(|m| m.layout == PASSAGE_LAYOUT)
}

impl Progress for DefaultCollection {
    fn set_length(&self, total: u64) {
        self.total.store(total, Ordering::Relaxed);
    }
    fn set_position(&self, done: u64) {
        self.done.store(done, Ordering::Relaxed);
        let total = self.total.load(Ordering::Relaxed).max(1);
        let tenths = (done.min(total) * 10 / total).min(10);
        if self.logged_tenths.fetch_max(tenths, Ordering::Relaxed) < tenths {
            tracing::info!(
                collection = %self.name,
                "preparing the default collection: {}%",
                tenths * 10
            );
        }
    }
    fn inc(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }
    fn set_message(&self, _message: String) {}
    fn finish(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/html");

    #[test]
    fn builds_in_staging_and_publishes_whole() {
        let home = tempfile::tempdir().unwrap();
        let collections = home.path().join("collections");
        let staging = home.path().join("staging");
        let default = Arc::new(DefaultCollection::new("manual", Path::new(FIXTURES)));
        assert_eq!(default.status().status, BuildState::Pending);
        let report = default.build(&collections, &staging, 1).unwrap().unwrap();
        assert!(report.passages_total > 20, "{report:?}");
        assert_eq!(report.shards_indexed, 3);
        let status = default.status();
        assert_eq!((status.status, status.progress), (BuildState::Ready, 1.0));
        assert!(is_published(&collections, "manual"));
        assert!(!staging.join("manual").exists());
        // Built already: a second start only reports it ready.
        let again = Arc::new(DefaultCollection::new("manual", Path::new(FIXTURES)));
        assert!(again.build(&collections, &staging, 1).unwrap().is_none());
        assert_eq!(again.state(), BuildState::Ready);
    }

    #[test]
    fn resumes_a_build_that_was_interrupted() {
        let home = tempfile::tempdir().unwrap();
        let collections = home.path().join("collections");
        let staging = home.path().join("staging");
        // An earlier run committed one page into staging, then was killed.
        let mut first = IndexOptions::new("manual", Format::Html);
        first.inputs = vec![Path::new(FIXTURES).join("tutorial-select.html")];
        first.threads = 1;
        index_collection(&staging, &first).unwrap();
        assert!(!is_published(&collections, "manual"));
        let default = Arc::new(DefaultCollection::new("manual", Path::new(FIXTURES)));
        let report = default.build(&collections, &staging, 1).unwrap().unwrap();
        assert_eq!((report.shards_skipped, report.shards_indexed), (1, 2));
        assert!(is_published(&collections, "manual"));
    }

    #[test]
    fn a_collection_of_an_older_passage_layout_is_rebuilt() {
        let home = tempfile::tempdir().unwrap();
        let collections = home.path().join("collections");
        let staging = home.path().join("staging");
        let default = Arc::new(DefaultCollection::new("manual", Path::new(FIXTURES)));
        default.build(&collections, &staging, 1).unwrap().unwrap();
        let dir = collections.join("manual");
        let mut manifest = read_manifest(&dir).unwrap();
        assert_eq!(manifest.layout, PASSAGE_LAYOUT);
        // As an older version wrote it: no layout recorded.
        manifest.layout = 0;
        super::super::write_manifest(&dir, &manifest).unwrap();
        // Staged shards of the older layout are not resumed either.
        std::fs::create_dir_all(&staging).unwrap();
        let again = Arc::new(DefaultCollection::new("manual", Path::new(FIXTURES)));
        let report = again.build(&collections, &staging, 1).unwrap();
        assert_eq!(report.map(|r| r.shards_indexed), Some(3));
        assert_eq!(read_manifest(&dir).unwrap().layout, PASSAGE_LAYOUT);
        assert_eq!(again.state(), BuildState::Ready);
    }

    #[test]
    fn a_missing_source_fails_and_publishes_nothing() {
        let home = tempfile::tempdir().unwrap();
        let collections = home.path().join("collections");
        let default = Arc::new(DefaultCollection::new(
            "manual",
            &home.path().join("no-such-dir"),
        ));
        let err = default
            .build(&collections, &home.path().join("staging"), 1)
            .unwrap_err();
        assert!(err.to_string().contains("no-such-dir"), "{err}");
        let status = default.status();
        assert_eq!(status.status, BuildState::Failed);
        assert_eq!(
            status.error.as_deref(),
            Some("the server could not build it; its log says why")
        );
        assert!(!collections.join("manual").exists());
    }
}
