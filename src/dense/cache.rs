//! The embedding cache dense retrieval and the reranker share: a collection's precomputed
//! vectors (`convrag embed`), memory-mapped by passage ordinal ([`super::vectors`]) and read
//! first for passages that carry an ordinal, then the reranker's [`EmbeddingLog`]; and the
//! nearest-neighbour graphs of complete vector files ([`super::graph`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::ann::HnswRsIndex;
use super::graph::{GraphPolicy, LoadedGraphs};
use super::vectors::{VectorFile, VectorWriter};
use crate::rerank::cache::sanitize;
use crate::rerank::files::io_err;
use crate::rerank::{EmbeddingCache, EmbeddingLog, PassageRef, Result};

/// Precomputed vector files and the embedding log under one root (`CONVRAG_HOME/embeddings`).
pub struct DiskEmbeddingCache {
    log: EmbeddingLog,
    /// Vector files opened so far (a missing one is looked for again on the next call).
    vectors: Mutex<HashMap<(String, String), Arc<VectorFile>>>,
    /// When a complete vector file gets a nearest-neighbour graph ([`super::graph`]).
    graph_policy: GraphPolicy,
    /// The graphs dense searches have loaded.
    graphs: LoadedGraphs,
}

impl DiskEmbeddingCache {
    /// A cache rooted at `root` (conventionally `CONVRAG_HOME/embeddings`); created on first write.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            log: EmbeddingLog::new(root),
            vectors: Mutex::new(HashMap::new()),
            graph_policy: GraphPolicy::default(),
            graphs: LoadedGraphs::default(),
        }
    }

    /// The configured cache: `CONVRAG_HOME/embeddings`, graphs from `dense.ann_min_vectors`
    /// passages.
    pub fn for_config(config: &crate::Config) -> Self {
        Self::new(config.home.join("embeddings")).with_ann_min_vectors(config.dense.ann_min_vectors)
    }

    /// Complete vector files of collections with at least `min` passages get a graph.
    pub fn with_ann_min_vectors(mut self, min: u64) -> Self {
        self.graph_policy.min_vectors = min;
        self
    }

    /// When a complete vector file gets a graph, and how it is built.
    pub fn graph_policy(&self) -> &GraphPolicy {
        &self.graph_policy
    }

    /// The graph of the `dim`-dimensional vector file at `vector_path` built from the vectors
    /// it holds now (`records` records, SHA-256 `vector_sha256`), loaded once per process;
    /// `None` when there is none or it does not match ([`LoadedGraphs::get`]).
    pub fn graph(
        &self,
        vector_path: &Path,
        dim: usize,
        records: u64,
        vector_sha256: &str,
    ) -> Option<Arc<HnswRsIndex>> {
        self.graphs.get(vector_path, dim, records, vector_sha256)
    }

    /// The file holding `collection`'s embeddings for `model`.
    pub fn file_path(&self, model: &str, collection: &str) -> PathBuf {
        self.log.file_path(model, collection)
    }

    /// The file of `collection`'s precomputed vectors for `model`, by passage ordinal.
    pub fn vector_path(&self, model: &str, collection: &str) -> PathBuf {
        self.log
            .model_dir(model)
            .join(format!("{}.vec", sanitize(collection)))
    }

    /// Every model's vector file of `collection` that exists, in path order.
    pub fn vector_paths(&self, collection: &str) -> Result<Vec<PathBuf>> {
        let root = self.log.root();
        let entries = match std::fs::read_dir(root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(root, e)),
        };
        let file = format!("{}.vec", sanitize(collection));
        let mut paths = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| io_err(root, e))?.path().join(&file);
            if path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        Ok(paths)
    }

    /// The writer of `collection`'s vector file (`convrag embed`); waits for another writer.
    pub fn vector_writer(&self, model: &str, collection: &str, dim: usize) -> Result<VectorWriter> {
        VectorWriter::open(&self.vector_path(model, collection), dim)
    }

    fn vector_file(&self, model: &str, collection: &str) -> Result<Option<Arc<VectorFile>>> {
        let key = (model.to_string(), collection.to_string());
        let mut open = self.vectors.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(file) = open.get(&key) {
            return Ok(Some(file.clone()));
        }
        let Some(file) = VectorFile::open(&self.vector_path(model, collection))? else {
            return Ok(None);
        };
        let file = Arc::new(file);
        open.insert(key, file.clone());
        Ok(Some(file))
    }
}

impl EmbeddingCache for DiskEmbeddingCache {
    fn get_many(
        &self,
        model: &str,
        collection: &str,
        passages: &[PassageRef<'_>],
    ) -> Result<Vec<Option<Arc<[f32]>>>> {
        let mut found: Vec<Option<Arc<[f32]>>> = vec![None; passages.len()];
        let keyed: Vec<(usize, (u64, &str))> = passages
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.ordinal.map(|ord| (i, (ord, p.id))))
            .collect();
        if !keyed.is_empty() {
            if let Some(vectors) = self.vector_file(model, collection)? {
                let keys: Vec<(u64, &str)> = keyed.iter().map(|(_, k)| *k).collect();
                for ((i, _), vector) in keyed.iter().zip(vectors.get_many(&keys)?) {
                    found[*i] = vector;
                }
            }
        }
        self.log.fill(model, collection, passages, &mut found)?;
        Ok(found)
    }

    fn put_many(&self, model: &str, collection: &str, entries: &[(&str, &[f32])]) -> Result<()> {
        self.log.put_many(model, collection, entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_paths_are_every_models_file_of_the_collection() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskEmbeddingCache::new(dir.path());
        assert!(cache.vector_paths("c.1").unwrap().is_empty());
        for (model, collection) in [("bbbb", "c.1"), ("aaaa", "c.1"), ("aaaa", "c.2")] {
            cache.vector_writer(model, collection, 2).unwrap();
        }
        assert_eq!(
            cache.vector_paths("c.1").unwrap(),
            [
                cache.vector_path("aaaa", "c.1"),
                cache.vector_path("bbbb", "c.1")
            ]
        );
    }
}
