//! Nearest-neighbour indexes over passage vectors behind one trait, [`VectorIndex`]: the exact
//! scan of the memory-mapped vector files dense retrieval serves today ([`ExactIndex`]), an int8
//! scalar-quantized scan ([`Int8Index`]), and HNSW graphs of two maintained Rust libraries
//! ([`HnswRsIndex`]: `hnsw_rs`, [`InstantIndex`]: `instant-distance`). `convrag bench ann`
//! compares them ([`bench`]); dense retrieval serves `hnsw_rs` graphs persisted beside
//! large collections' vector files ([`super::graph`]), and the exact scan otherwise.
//!
//! Every index ranks by cosine: vectors and queries are normalized once, so cosine is a dot
//! product, and both graphs use the same dot-product kernel ([`dot`]) and differ only in their
//! algorithms.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::vectors::VectorFile;
use crate::rerank::RerankError;

#[cfg(feature = "bench")]
pub mod bench;
mod hnsw;
#[cfg(feature = "bench")]
mod instant;
#[cfg(feature = "bench")]
mod int8;

pub use hnsw::{DotDistance, HnswRsIndex};
#[cfg(feature = "bench")]
pub use instant::{InstantIndex, UnitPoint};
#[cfg(feature = "bench")]
pub use int8::Int8Index;

/// Errors of building or searching an index.
#[derive(Debug, thiserror::Error)]
pub enum AnnError {
    #[error("no vector file {}", .0.display())]
    Missing(PathBuf),
    #[error("vector files of different dimensions: {} has {found}, {} has {expected}", .path.display(), .first.display())]
    Dimension {
        path: PathBuf,
        found: usize,
        first: PathBuf,
        expected: usize,
    },
    #[error("a {found}-dimensional query for {expected}-dimensional vectors")]
    QueryDimension { found: usize, expected: usize },
    #[error("no vectors to index")]
    Empty,
    #[error("invalid {name} {value}: {reason}")]
    Param {
        name: &'static str,
        value: usize,
        reason: &'static str,
    },
    #[error("nearest-neighbour graph {}: {reason}", path.display())]
    Graph { path: PathBuf, reason: String },
    #[error(transparent)]
    Vectors(#[from] RerankError),
}

pub type Result<T, E = AnnError> = std::result::Result<T, E>;

/// Which index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum IndexKind {
    /// Exact cosine over the memory-mapped vector files, on all cores (what dense retrieval
    /// serves).
    Exact,
    #[cfg(feature = "bench")]
    /// Exact scan of int8 codes (one scale per vector), in memory, on all cores.
    Int8,
    /// HNSW of the `hnsw_rs` crate.
    HnswRs,
    #[cfg(feature = "bench")]
    /// HNSW of the `instant-distance` crate.
    InstantDistance,
}

impl IndexKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IndexKind::Exact => "exact",
            #[cfg(feature = "bench")]
            IndexKind::Int8 => "int8",
            IndexKind::HnswRs => "hnsw-rs",
            #[cfg(feature = "bench")]
            IndexKind::InstantDistance => "instant-distance",
        }
    }
}

/// A nearest-neighbour index over passage vectors: the `k` ordinals nearest to a query, best
/// first, with their cosines (exact or approximated).
pub trait VectorIndex: Send + Sync {
    fn kind(&self) -> IndexKind;
    /// Vectors indexed.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(u64, f32)>>;
    /// Vectors of the source left out of a build stopped by its time budget.
    fn left_out(&self) -> u64 {
        0
    }
}

/// HNSW build and search parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HnswParams {
    /// Links per node above layer 0 (hnsw_rs; instant-distance fixes 32).
    pub m: usize,
    /// Candidates kept while inserting.
    pub ef_construction: usize,
    /// Candidates kept while searching (at least the `k` asked for).
    pub ef_search: usize,
    /// Layer assignment (instant-distance; hnsw_rs draws from its own generator).
    pub seed: u64,
    /// Stop inserting after this long (hnsw_rs only): an estimate of a build too long to run.
    pub budget: Option<Duration>,
}

impl Default for HnswParams {
    fn default() -> Self {
        // Chosen on real MiniLM vectors to reach recall@10 >= 0.95 (BENCHMARKS.md).
        Self {
            m: 32,
            ef_construction: 200,
            ef_search: 128,
            seed: 42,
            budget: None,
        }
    }
}

impl HnswParams {
    fn check(&self) -> Result<()> {
        let bad = |name, value, reason| {
            Err(AnnError::Param {
                name,
                value,
                reason,
            })
        };
        if !(2..=255).contains(&self.m) {
            return bad("m", self.m, "must be in 2..=255");
        }
        if self.ef_construction == 0 {
            return bad("ef_construction", 0, "must be > 0");
        }
        if self.ef_search == 0 {
            return bad("ef_search", 0, "must be > 0");
        }
        Ok(())
    }
}

/// Dot product, written so the compiler vectorizes it (four independent sums).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `v` scaled to unit length (a zero vector stays zero).
pub fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = dot(&v, &v).sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// One or more vector files searched as one set: ordinals of a later file follow the earlier
/// files' (a benchmark joins collections this way).
pub struct VectorSource {
    parts: Vec<(VectorFile, u64)>,
    dim: usize,
    len: u64,
}

impl VectorSource {
    pub fn open(paths: &[PathBuf]) -> Result<Self> {
        let mut parts = Vec::new();
        let mut len = 0u64;
        let mut dim = 0;
        for path in paths {
            let file = VectorFile::open(path)?.ok_or_else(|| AnnError::Missing(path.clone()))?;
            if dim == 0 {
                dim = file.dim();
            } else if file.dim() != dim {
                return Err(AnnError::Dimension {
                    path: path.clone(),
                    found: file.dim(),
                    first: paths[0].clone(),
                    expected: dim,
                });
            }
            let n = file.current_len()?;
            parts.push((file, len));
            len += n;
        }
        if len == 0 {
            return Err(AnnError::Empty);
        }
        Ok(Self { parts, dim, len })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Records (with empty ones) in all files.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Calls `f` with the normalized vectors of ordinals `[0, limit)`, `chunk` records at a time
    /// (empty records left out), until `f` returns false.
    pub fn for_each_chunk(
        &self,
        chunk: usize,
        limit: u64,
        mut f: impl FnMut(Vec<(u64, Vec<f32>)>) -> bool,
    ) -> Result<()> {
        for (file, offset) in &self.parts {
            let n = file.len().min(limit.saturating_sub(*offset));
            let mut start = 0;
            while start < n {
                let end = (start + chunk as u64).min(n);
                let records = file.records(start..end)?;
                let vectors = (start..end)
                    .zip(records)
                    .filter_map(|(ord, v)| v.map(|v| (offset + ord, normalized(v))))
                    .collect();
                if !f(vectors) {
                    return Ok(());
                }
                start = end;
            }
        }
        Ok(())
    }

    /// The normalized vector at each ordinal (`None`: an empty record or past the end).
    pub fn vectors_at(&self, ordinals: &[u64]) -> Result<Vec<Option<Vec<f32>>>> {
        ordinals
            .iter()
            .map(|&ord| {
                let Some((file, offset)) = self.parts.iter().rev().find(|(_, o)| *o <= ord) else {
                    return Ok(None);
                };
                let local = ord - offset;
                Ok(file
                    .records(local..local + 1)?
                    .pop()
                    .flatten()
                    .map(normalized))
            })
            .collect()
    }

    /// The exact top `k` by cosine over every file: each file's top `k` merged.
    pub fn nearest(&self, query: &[f32], k: usize) -> Result<Vec<(u64, f32)>> {
        check_query(query, self.dim)?;
        let mut all = Vec::new();
        for (file, offset) in &self.parts {
            all.extend(
                file.nearest(query, k)?
                    .into_iter()
                    .map(|n| (offset + n.ordinal, n.score)),
            );
        }
        sort_best_first(&mut all);
        all.truncate(k);
        Ok(all)
    }
}

fn check_query(query: &[f32], dim: usize) -> Result<()> {
    if query.len() != dim {
        return Err(AnnError::QueryDimension {
            found: query.len(),
            expected: dim,
        });
    }
    Ok(())
}

/// Best score first, ties by ordinal.
fn sort_best_first(v: &mut [(u64, f32)]) {
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
}

/// Keeps the best `k` of `v`, unordered.
#[cfg(feature = "bench")]
fn keep_best(v: &mut Vec<(u64, f32)>, k: usize) {
    if v.len() > k {
        v.select_nth_unstable_by(k, |a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v.truncate(k);
    }
}

/// Records read per step while building (and per progress tick).
const BUILD_CHUNK: usize = 4096;

/// The exact search dense retrieval serves: [`VectorFile::nearest`] over each file.
pub struct ExactIndex {
    source: Arc<VectorSource>,
}

impl ExactIndex {
    pub fn new(source: Arc<VectorSource>) -> Self {
        Self { source }
    }
}

impl VectorIndex for ExactIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::Exact
    }
    fn len(&self) -> usize {
        self.source.len() as usize
    }
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(u64, f32)>> {
        self.source.nearest(query, k)
    }
}

/// Opens or builds an index of `kind` over `source`.
#[cfg(feature = "bench")]
pub fn build_index(
    kind: IndexKind,
    source: &Arc<VectorSource>,
    params: &HnswParams,
    int8_rescore: usize,
    progress: &dyn crate::progress::Progress,
) -> Result<Box<dyn VectorIndex>> {
    Ok(match kind {
        IndexKind::Exact => Box::new(ExactIndex::new(Arc::clone(source))),
        IndexKind::Int8 => Box::new(Int8Index::build(
            Arc::clone(source),
            int8_rescore,
            progress,
        )?),
        IndexKind::HnswRs => Box::new(HnswRsIndex::build(source, params, u64::MAX, progress)?),
        IndexKind::InstantDistance => Box::new(InstantIndex::build(source, params, progress)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dense::vectors::VectorWriter;
    use crate::progress::NoProgress;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// `n` vectors around 40 seeded centres (text embeddings cluster by topic), and `q` queries
    /// drawn the same way but not among them.
    fn clustered(n: usize, q: usize, dim: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
        let mut rng = StdRng::seed_from_u64(7);
        let centres: Vec<Vec<f32>> = (0..40)
            .map(|_| (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect())
            .collect();
        let draw = |rng: &mut StdRng| -> Vec<f32> {
            let c = &centres[rng.gen_range(0..centres.len())];
            c.iter().map(|x| x + rng.gen_range(-0.4..0.4)).collect()
        };
        let data = (0..n).map(|_| draw(&mut rng)).collect();
        let queries = (0..q).map(|_| draw(&mut rng)).collect();
        (data, queries)
    }

    fn write(path: &std::path::Path, vectors: &[Vec<f32>], skip: Option<usize>) {
        let mut w = VectorWriter::open(path, vectors[0].len()).unwrap();
        let ids: Vec<String> = (0..vectors.len()).map(|i| format!("p{i}")).collect();
        let records: Vec<(u64, &str, &[f32])> = vectors
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != skip)
            .map(|(i, v)| (i as u64, ids[i].as_str(), v.as_slice()))
            .collect();
        w.append(&records).unwrap();
    }

    /// Exact top k by brute force over normalized vectors (ties by ordinal).
    fn brute_force(data: &[Vec<f32>], query: &[f32], k: usize) -> Vec<(u64, f32)> {
        let q = normalized(query.to_vec());
        let mut all: Vec<(u64, f32)> = data
            .iter()
            .enumerate()
            .map(|(i, v)| (i as u64, dot(&q, &normalized(v.clone()))))
            .collect();
        sort_best_first(&mut all);
        all.truncate(k);
        all
    }

    fn recall(index: &dyn VectorIndex, data: &[Vec<f32>], queries: &[Vec<f32>]) -> f64 {
        let mut found = 0;
        for q in queries {
            let exact: Vec<u64> = brute_force(data, q, 10).iter().map(|e| e.0).collect();
            let got = index.search(q, 10).unwrap();
            assert!(got.len() <= 10);
            assert!(got.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
            found += got.iter().filter(|g| exact.contains(&g.0)).count();
        }
        found as f64 / (10 * queries.len()) as f64
    }

    #[test]
    fn the_served_indexes_find_the_exact_neighbours_of_a_seeded_set() {
        let dir = tempfile::tempdir().unwrap();
        let (source, data, queries) = seeded_source(dir.path());
        let params = HnswParams::default();

        let exact = ExactIndex::new(Arc::clone(&source));
        for q in &queries[..5] {
            let got = exact.search(q, 10).unwrap();
            let want = brute_force(&data, q, 10);
            assert_eq!(
                got.iter().map(|g| g.0).collect::<Vec<_>>(),
                want.iter().map(|w| w.0).collect::<Vec<_>>()
            );
            assert!(got.iter().zip(&want).all(|(g, w)| (g.1 - w.1).abs() < 1e-5));
        }
        // Thresholds a graph with broken links or a wrong distance falls far below (a random
        // answer finds about 10/2000 of them).
        let hnsw = HnswRsIndex::build(&source, &params, u64::MAX, &NoProgress).unwrap();
        assert_eq!(hnsw.len(), 2000);
        let r = recall(&hnsw, &data, &queries);
        assert!(r >= 0.95, "hnsw_rs recall@10 {r}");
    }

    /// A seeded set's vectors in a file, opened as the indexes read them.
    fn seeded_source(dir: &std::path::Path) -> (Arc<VectorSource>, Vec<Vec<f32>>, Vec<Vec<f32>>) {
        let (data, queries) = clustered(2000, 50, 24);
        let path = dir.join("c.vec");
        write(&path, &data, None);
        (
            Arc::new(VectorSource::open(&[path]).unwrap()),
            data,
            queries,
        )
    }

    #[cfg(feature = "bench")]
    #[test]
    fn the_benchmarks_indexes_find_the_exact_neighbours_of_a_seeded_set() {
        let dir = tempfile::tempdir().unwrap();
        let (source, data, queries) = seeded_source(dir.path());
        let params = HnswParams::default();
        let instant = InstantIndex::build(&source, &params, &NoProgress).unwrap();
        assert_eq!(instant.len(), 2000);
        let r = recall(&instant, &data, &queries);
        assert!(r >= 0.95, "instant-distance recall@10 {r}");
        let int8 = Int8Index::build(Arc::clone(&source), 0, &NoProgress).unwrap();
        assert_eq!(int8.bytes(), 2000 * (24 + 4 + 8));
        let r = recall(&int8, &data, &queries);
        assert!(r >= 0.9, "int8 recall@10 {r}");
        let rescored = Int8Index::build(Arc::clone(&source), 50, &NoProgress).unwrap();
        let r = recall(&rescored, &data, &queries);
        assert!(r >= 0.99, "int8 rescored recall@10 {r}");
        // Rescored scores are the exact cosines.
        let q = &queries[0];
        let (got, want) = (rescored.search(q, 3).unwrap(), brute_force(&data, q, 3));
        assert!(got
            .iter()
            .zip(&want)
            .all(|(g, w)| g.0 == w.0 && (g.1 - w.1).abs() < 1e-5));
    }

    #[test]
    fn files_join_with_later_ordinals_and_empty_records_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let (data, _) = clustered(300, 0, 8);
        let (a, b) = (dir.path().join("a.vec"), dir.path().join("b.vec"));
        // Ordinal 5 of the first file is empty.
        write(&a, &data[..100], Some(5));
        write(&b, &data[100..], None);
        let source = Arc::new(VectorSource::open(&[a.clone(), b]).unwrap());
        assert_eq!((source.len(), source.dim()), (300, 8));
        let mut seen = Vec::new();
        source
            .for_each_chunk(64, u64::MAX, |chunk| {
                seen.extend(chunk.into_iter().map(|(o, _)| o));
                true
            })
            .unwrap();
        assert_eq!(seen.len(), 299);
        assert!(!seen.contains(&5) && seen.contains(&100) && seen.contains(&299));
        let at = source.vectors_at(&[5, 150, 300]).unwrap();
        assert!(at[0].is_none() && at[2].is_none());
        assert_eq!(
            at[1].as_deref(),
            Some(normalized(data[150].clone()).as_slice())
        );
        // The nearest to a vector of the second file is itself, at its joined ordinal.
        let got = ExactIndex::new(Arc::clone(&source))
            .search(&data[150], 1)
            .unwrap();
        assert_eq!(got[0].0, 150);
        let hnsw =
            HnswRsIndex::build(&source, &HnswParams::default(), u64::MAX, &NoProgress).unwrap();
        assert_eq!(hnsw.len(), 299);
        assert_eq!(hnsw.search(&data[150], 1).unwrap()[0].0, 150);

        let err = HnswRsIndex::build(
            &source,
            &HnswParams {
                m: 1,
                ..Default::default()
            },
            u64::MAX,
            &NoProgress,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("invalid m 1"), "{err}");
        let err = exact_err(&source);
        assert!(
            err.contains("a 3-dimensional query for 8-dimensional"),
            "{err}"
        );
        let missing = dir.path().join("none.vec");
        let err = VectorSource::open(&[a, missing]).err().unwrap().to_string();
        assert!(err.contains("none.vec"), "{err}");
    }

    fn exact_err(source: &Arc<VectorSource>) -> String {
        ExactIndex::new(Arc::clone(source))
            .search(&[1.0, 0.0, 0.0], 1)
            .unwrap_err()
            .to_string()
    }
}
