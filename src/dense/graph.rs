//! The HNSW graph dense retrieval serves for a large collection: built by `hnsw_rs`
//! ([`HnswRsIndex`], [`HnswParams`]'s defaults) once the collection's vector file is complete
//! and it has at least `dense.ann_min_vectors` passages, persisted beside the vector file, and
//! loaded by [`super::search::DenseRetriever`] when it was built from the vectors the file holds.
//!
//! Files beside `<key>.vec`: hnsw_rs's `<key>.vec.hnsw.graph` (links) and `<key>.vec.hnsw.data`
//! (its copy of the vectors), and `<key>.vec.hnsw.sha256.json` ([`GraphSums`]): their sizes and
//! SHA-256, the vector file's record count and SHA-256 they were built from, and the parameters.
//! The graph is dumped into a temporary directory, its sums are removed, the files are renamed
//! into place, and the sums are written last (atomically): files without sums, or not matching
//! them, are not a graph. `convrag collection verify` checks them ([`super::vector_sums`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};

use super::ann::{HnswParams, HnswRsIndex, VectorIndex, VectorSource};
use super::EmbedError;
use crate::config::DenseConfig;
use crate::index::checksum::{file_sum, FileSum};
use crate::progress::Progress;
use crate::rerank::files::{cache_err, io_err, read_json, write_json};
use crate::rerank::{RerankError, Result};

/// When a collection's vectors get a graph, and how it is built.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraphPolicy {
    /// Passages from which a complete vector file gets a graph (`dense.ann_min_vectors`).
    pub min_vectors: u64,
    pub params: HnswParams,
}

impl Default for GraphPolicy {
    fn default() -> Self {
        Self {
            min_vectors: DenseConfig::DEFAULT_ANN_MIN_VECTORS,
            params: HnswParams::default(),
        }
    }
}

/// hnsw_rs's name for the graph of the vector file at `vector_path` (its files are this name
/// with `.hnsw.graph` and `.hnsw.data`).
fn basename(vector_path: &Path) -> String {
    vector_path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

fn dir_of(vector_path: &Path) -> &Path {
    vector_path.parent().unwrap_or_else(|| Path::new("."))
}

/// The graph files of the vector file at `vector_path`: the links, then hnsw_rs's copy of the
/// vectors.
pub fn graph_files(vector_path: &Path) -> [PathBuf; 2] {
    HnswRsIndex::dump_files(dir_of(vector_path), &basename(vector_path))
}

/// The sums file of the graph of the vector file at `vector_path`.
pub fn graph_sums_path(vector_path: &Path) -> PathBuf {
    dir_of(vector_path).join(format!("{}.hnsw.sha256.json", basename(vector_path)))
}

/// What a complete graph is and was built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphSums {
    /// Records of the vector file the graph was built from (empty ones are not in the graph).
    pub vectors: u64,
    /// SHA-256 of that vector file (hex), as its own sums recorded it.
    pub vector_sha256: String,
    pub m: usize,
    pub ef_construction: usize,
    /// Candidates kept while searching (a search for more keeps as many as it asks for).
    pub ef_search: usize,
    /// Each graph file by its name beside the vector file.
    pub files: BTreeMap<String, FileSum>,
}

impl GraphSums {
    /// The graph sums beside `vector_path`; `None` when there are none.
    pub fn read(vector_path: &Path) -> Result<Option<Self>> {
        read_json(&graph_sums_path(vector_path), "graph sums")
    }

    fn write(&self, vector_path: &Path) -> Result<()> {
        write_json(&graph_sums_path(vector_path), self)
    }

    /// The graph files with the sums recorded for each, beside the vector file at
    /// `vector_path`.
    pub fn files_beside(&self, vector_path: &Path) -> Vec<(PathBuf, &FileSum)> {
        self.files
            .iter()
            .map(|(name, sum)| (dir_of(vector_path).join(name), sum))
            .collect()
    }

    /// Built from these vectors with these parameters.
    fn built_from(&self, vectors: &VectorsBuilt<'_>, params: &HnswParams) -> bool {
        self.vectors == vectors.records
            && self.vector_sha256 == vectors.sha256
            && (self.m, self.ef_construction, self.ef_search)
                == (params.m, params.ef_construction, params.ef_search)
    }
}

/// A complete vector file, as its sums recorded it.
#[derive(Debug, Clone, Copy)]
pub struct VectorsBuilt<'a> {
    /// Records in the file.
    pub records: u64,
    /// Its SHA-256 (hex).
    pub sha256: &'a str,
    /// Live passages of the collection.
    pub passages: u64,
}

/// What [`ensure_graph`] found or did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GraphOutcome {
    /// Fewer passages than the policy's minimum: no graph (one left from before is removed).
    BelowThreshold,
    /// A graph of these vectors was there already.
    Kept,
    /// Built now, in this many seconds.
    Built { seconds: f64 },
}

/// Removes the graph of the vector file at `vector_path`, sums first; none is fine.
pub fn remove_graph(vector_path: &Path) -> Result<()> {
    let sums = graph_sums_path(vector_path);
    for path in std::iter::once(sums).chain(graph_files(vector_path)) {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(cache_err(&path, format!("cannot remove: {e}"))),
        }
    }
    Ok(())
}

/// Gives the complete vector file at `vector_path` (`vectors`) its graph under `policy`: kept
/// when one built from these vectors with these parameters is there with its files' recorded
/// sizes, else built (reporting inserted vectors to `progress`) and written; a collection below
/// the policy's minimum has none. The caller holds the vector file's writer lock, so the vectors
/// do not change meanwhile.
pub fn ensure_graph(
    vector_path: &Path,
    vectors: &VectorsBuilt<'_>,
    policy: &GraphPolicy,
    progress: &dyn Progress,
) -> Result<GraphOutcome, EmbedError> {
    if vectors.passages < policy.min_vectors {
        remove_graph(vector_path)?;
        return Ok(GraphOutcome::BelowThreshold);
    }
    if let Some(sums) = GraphSums::read(vector_path)? {
        let sizes_match = sums
            .files_beside(vector_path)
            .iter()
            .all(|(path, sum)| std::fs::metadata(path).is_ok_and(|m| m.len() == sum.bytes));
        if sums.built_from(vectors, &policy.params) && sizes_match {
            return Ok(GraphOutcome::Kept);
        }
    }
    let started = Instant::now();
    build_graph(vector_path, vectors, &policy.params, progress)?;
    Ok(GraphOutcome::Built {
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn graph_err(path: &Path, e: super::ann::AnnError) -> RerankError {
    match e {
        super::ann::AnnError::Vectors(e) => e,
        other => cache_err(path, other.to_string()),
    }
}

fn build_graph(
    vector_path: &Path,
    vectors: &VectorsBuilt<'_>,
    params: &HnswParams,
    progress: &dyn Progress,
) -> Result<(), EmbedError> {
    let source =
        VectorSource::open(&[vector_path.to_path_buf()]).map_err(|e| graph_err(vector_path, e))?;
    progress.set_message("building the nearest-neighbour graph".to_string());
    progress.set_position(0);
    let index = HnswRsIndex::build(&source, params, u64::MAX, progress)
        .map_err(|e| graph_err(vector_path, e))?;
    let dir = dir_of(vector_path);
    let name = basename(vector_path);
    let temp = tempfile::Builder::new()
        .prefix(".hnsw-")
        .tempdir_in(dir)
        .map_err(|e| io_err(dir, e))?;
    index
        .dump(temp.path(), &name)
        .map_err(|e| graph_err(vector_path, e))?;
    let written = HnswRsIndex::dump_files(temp.path(), &name);
    let mut files = BTreeMap::new();
    for path in &written {
        // Durable before the rename makes it the graph.
        std::fs::File::open(path)
            .and_then(|f| f.sync_all())
            .map_err(|e| io_err(path, e))?;
        let file_name = path.file_name().unwrap_or_default().to_string_lossy();
        files.insert(file_name.into_owned(), file_sum(path)?);
    }
    remove_graph(vector_path)?;
    for (from, to) in written.iter().zip(graph_files(vector_path)) {
        std::fs::rename(from, &to).map_err(|e| io_err(&to, e))?;
    }
    let sums = GraphSums {
        vectors: vectors.records,
        vector_sha256: vectors.sha256.to_string(),
        m: params.m,
        ef_construction: params.ef_construction,
        ef_search: params.ef_search,
        files,
    };
    Ok(sums.write(vector_path)?)
}

/// Sizes and modification times of a graph's sums and files: a graph written again has other
/// ones.
type Stamp = Vec<Option<(u64, SystemTime)>>;

fn stamp(vector_path: &Path) -> Stamp {
    std::iter::once(graph_sums_path(vector_path))
        .chain(graph_files(vector_path))
        .map(|p| {
            let m = std::fs::metadata(p).ok()?;
            Some((m.len(), m.modified().ok()?))
        })
        .collect()
}

enum Slot {
    /// A search is reading it; the others search exactly meanwhile.
    Loading,
    Ready(Stamp, GraphSums, Arc<HnswRsIndex>),
    /// Not a graph of its sums (damaged, or unreadable): not read again until it changes.
    Refused(Stamp),
}

/// Graphs loaded by this process, by vector file: a graph's files are hashed and read once per
/// version of them, not per search.
#[derive(Default)]
pub struct LoadedGraphs {
    slots: Mutex<HashMap<PathBuf, Slot>>,
}

impl LoadedGraphs {
    /// The graph of the `dim`-dimensional vector file at `vector_path` when one was built from
    /// the vectors it holds now (`records` records, SHA-256 `vector_sha256`) and its files
    /// match their sums; `None` otherwise, and while another search is reading it.
    pub fn get(
        &self,
        vector_path: &Path,
        dim: usize,
        records: u64,
        vector_sha256: &str,
    ) -> Option<Arc<HnswRsIndex>> {
        let current = stamp(vector_path);
        // No sums: no graph.
        current[0]?;
        let of_these_vectors =
            |sums: &GraphSums| sums.vectors == records && sums.vector_sha256 == vector_sha256;
        {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            match slots.get(vector_path) {
                Some(Slot::Loading) => return None,
                Some(Slot::Ready(s, sums, graph)) if *s == current => {
                    return of_these_vectors(sums).then(|| graph.clone());
                }
                Some(Slot::Refused(s)) if *s == current => return None,
                _ => {}
            }
            slots.insert(vector_path.to_path_buf(), Slot::Loading);
        }
        let started = Instant::now();
        let loaded = load_checked(vector_path, dim);
        let (slot, found) = match loaded {
            Ok((sums, graph)) => {
                tracing::info!(
                    vectors = %vector_path.display(),
                    points = graph.len(),
                    seconds = started.elapsed().as_secs_f64(),
                    "nearest-neighbour graph loaded"
                );
                let found = of_these_vectors(&sums).then(|| graph.clone());
                (Slot::Ready(current, sums, graph), found)
            }
            Err(e) => {
                tracing::warn!(error = %e, "nearest-neighbour graph refused; dense search is exact");
                (Slot::Refused(current), None)
            }
        };
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.insert(vector_path.to_path_buf(), slot);
        found
    }
}

/// The graph beside `vector_path` after its files were checked against its sums (hnsw_rs
/// trusts its files' contents).
fn load_checked(vector_path: &Path, dim: usize) -> Result<(GraphSums, Arc<HnswRsIndex>)> {
    let sums = GraphSums::read(vector_path)?
        .ok_or_else(|| cache_err(&graph_sums_path(vector_path), "removed while being read"))?;
    for (path, expected) in sums.files_beside(vector_path) {
        let actual = file_sum(&path).map_err(|e| cache_err(&path, e.to_string()))?;
        if actual != *expected {
            return Err(cache_err(
                &path,
                format!(
                    "size or SHA-256 differs from {} ({} bytes, sha256 {}; the file has {} bytes, sha256 {})",
                    graph_sums_path(vector_path).display(),
                    expected.bytes,
                    expected.sha256,
                    actual.bytes,
                    actual.sha256
                ),
            ));
        }
    }
    let graph = HnswRsIndex::load(
        dir_of(vector_path),
        &basename(vector_path),
        dim,
        sums.ef_search,
    )
    .map_err(|e| graph_err(vector_path, e))?;
    Ok((sums, Arc::new(graph)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dense::vectors::VectorWriter;
    use crate::progress::NoProgress;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// A vector file of `n` seeded 16-dimensional vectors around 8 centres; returns it with its
    /// SHA-256.
    fn vector_file(dir: &Path, n: usize) -> (PathBuf, String) {
        let mut rng = StdRng::seed_from_u64(3);
        let centres: Vec<Vec<f32>> = (0..8)
            .map(|_| (0..16).map(|_| rng.gen_range(-1.0..1.0)).collect())
            .collect();
        let vectors: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                let c = &centres[i % centres.len()];
                c.iter().map(|x| x + rng.gen_range(-0.3..0.3)).collect()
            })
            .collect();
        let ids: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
        let path = dir.join("m/c.vec");
        let mut w = VectorWriter::open(&path, 16).unwrap();
        let records: Vec<(u64, &str, &[f32])> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| (i as u64, ids[i].as_str(), v.as_slice()))
            .collect();
        w.append(&records).unwrap();
        w.sync().unwrap();
        let sha256 = file_sum(&path).unwrap().sha256;
        (path, sha256)
    }

    fn policy(min_vectors: u64) -> GraphPolicy {
        GraphPolicy {
            min_vectors,
            ..Default::default()
        }
    }

    #[test]
    fn a_graph_is_built_kept_loaded_for_its_vectors_only_and_removed_below_the_threshold() {
        let dir = tempfile::tempdir().unwrap();
        let (path, sha256) = vector_file(dir.path(), 500);
        let built = VectorsBuilt {
            records: 500,
            sha256: &sha256,
            passages: 500,
        };
        let outcome = ensure_graph(&path, &built, &policy(100), &NoProgress).unwrap();
        assert!(matches!(outcome, GraphOutcome::Built { .. }), "{outcome:?}");
        let sums = GraphSums::read(&path).unwrap().unwrap();
        assert_eq!(
            (sums.vectors, sums.vector_sha256.as_str()),
            (500, sha256.as_str())
        );
        let names: Vec<&str> = sums.files.keys().map(String::as_str).collect();
        assert_eq!(names, ["c.vec.hnsw.data", "c.vec.hnsw.graph"]);
        // Nothing but the graph and the vectors is left in the directory.
        let mut left: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "c.vec",
                "c.vec.hnsw.data",
                "c.vec.hnsw.graph",
                "c.vec.hnsw.sha256.json"
            ]
        );
        let again = ensure_graph(&path, &built, &policy(100), &NoProgress).unwrap();
        assert_eq!(again, GraphOutcome::Kept);

        let graphs = LoadedGraphs::default();
        let graph = graphs.get(&path, 16, 500, &sha256).unwrap();
        assert_eq!(graph.len(), 500);
        // The reloaded graph finds each vector itself.
        let source = VectorSource::open(std::slice::from_ref(&path)).unwrap();
        let queries = source.vectors_at(&[0, 123, 499]).unwrap();
        for (ord, q) in [0u64, 123, 499].iter().zip(queries) {
            assert_eq!(graph.search(&q.unwrap(), 1).unwrap()[0].0, *ord);
        }
        // Not for other vectors, nor other dimensions.
        assert!(graphs.get(&path, 16, 501, &sha256).is_none());
        assert!(graphs.get(&path, 16, 500, "other").is_none());
        assert!(LoadedGraphs::default()
            .get(&path, 8, 500, &sha256)
            .is_none());

        let outcome = ensure_graph(&path, &built, &policy(501), &NoProgress).unwrap();
        assert_eq!(outcome, GraphOutcome::BelowThreshold);
        assert!(GraphSums::read(&path).unwrap().is_none());
        assert!(graph_files(&path).iter().all(|f| !f.exists()));
        assert!(graphs.get(&path, 16, 500, &sha256).is_none());
    }

    #[test]
    fn a_changed_graph_file_is_refused_and_rebuilt_once_gone() {
        let dir = tempfile::tempdir().unwrap();
        let (path, sha256) = vector_file(dir.path(), 200);
        let built = VectorsBuilt {
            records: 200,
            sha256: &sha256,
            passages: 200,
        };
        ensure_graph(&path, &built, &policy(1), &NoProgress).unwrap();
        let [graph, data] = graph_files(&path);
        let mut bytes = std::fs::read(&data).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&data, &bytes).unwrap();
        let graphs = LoadedGraphs::default();
        assert!(graphs.get(&path, 16, 200, &sha256).is_none());
        let err = load_checked(&path, 16).err().unwrap().to_string();
        assert!(
            err.contains("c.vec.hnsw.data") && err.contains("differs from"),
            "{err}"
        );

        std::fs::remove_file(&graph).unwrap();
        let outcome = ensure_graph(&path, &built, &policy(1), &NoProgress).unwrap();
        assert!(matches!(outcome, GraphOutcome::Built { .. }), "{outcome:?}");
        assert!(graphs.get(&path, 16, 200, &sha256).is_some());
    }
}
