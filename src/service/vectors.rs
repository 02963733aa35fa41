//! Passage vectors computed in the background by the server: for the default collection once it
//! is built, and for a private collection after each upload, so dense and hybrid retrieval (and
//! reranking without encoding passages during turns) are ready without `convrag embed`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::dense::VectorSearch;
use crate::index::{embedding_key, Retriever, TantivyRetriever};
use crate::progress::{Counter, Progress};

/// Whether a collection's passages have their vectors, as its listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum VectorStatus {
    /// No vectors, or not for every passage (dense and hybrid retrieval are refused).
    None,
    /// Being computed: `progress` is the share of passages done, 0 to 1.
    Building { progress: f64 },
    /// Every passage has its vector.
    Ready,
}

/// The server's background vector builds, one at a time (they share the model's cores with the
/// turns), each on a thread of its own.
pub struct VectorBuilds {
    search: VectorSearch,
    /// Builds started and not finished, by embedding key (name and index layout).
    running: Mutex<HashMap<String, Arc<Counter>>>,
    /// Held by the build that is computing.
    one_at_a_time: Arc<Mutex<()>>,
}

impl VectorBuilds {
    pub fn new(search: VectorSearch) -> Self {
        Self {
            search,
            running: Mutex::new(HashMap::new()),
            one_at_a_time: Arc::new(Mutex::new(())),
        }
    }

    /// Starts computing the vectors `collection` (index `bm25`) lacks, unless a build of this
    /// index is under way. Returns at once; failures are logged (the collection keeps serving
    /// BM25, and the next start or upload tries again from where it stopped).
    pub fn start(self: &Arc<Self>, collection: &str, bm25: Arc<TantivyRetriever>) {
        let key = embedding_key(collection, bm25.as_ref());
        let progress = Arc::new(Counter::default());
        progress.set_length(bm25.num_passages());
        {
            let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
            if running.contains_key(&key) {
                return;
            }
            running.insert(key.clone(), progress.clone());
        }
        let builds = Arc::clone(self);
        let collection = collection.to_string();
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let result = {
                let _turn = builds
                    .one_at_a_time
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                builds.search.embed(&collection, &bm25, progress.as_ref())
            };
            match result {
                Ok((passages, encoded)) => tracing::info!(
                    collection = %collection,
                    passages,
                    encoded,
                    seconds = started.elapsed().as_secs_f64(),
                    "passage vectors ready"
                ),
                Err(e) => {
                    tracing::error!(collection = %collection, error = %e, "computing passage vectors failed")
                }
            }
            builds
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
        });
    }

    /// Passages the builds started and not finished have still to embed (a build waiting for
    /// its turn counts its whole collection).
    pub fn backlog(&self) -> u64 {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|p| p.remaining())
            .sum()
    }

    /// The vectors of `collection` (index `bm25`). Blocking (reads the vector file's length).
    pub fn status(&self, collection: &str, bm25: &TantivyRetriever) -> VectorStatus {
        let key = embedding_key(collection, bm25);
        if let Some(p) = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return VectorStatus::Building {
                progress: p.share(),
            };
        }
        match self.search.coverage(collection, bm25) {
            Ok((have, total)) if total > 0 && have == total => VectorStatus::Ready,
            Ok(_) => VectorStatus::None,
            Err(e) => {
                tracing::warn!(collection, error = %e, "cannot read the passage vectors' file");
                VectorStatus::None
            }
        }
    }
}
