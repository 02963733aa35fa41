//! HNSW graphs of the `hnsw_rs` crate: what dense retrieval serves for large collections
//! ([`super::super::graph`]), dumped and reloaded.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::Instant;

use hnsw_rs::api::AnnT;
use hnsw_rs::hnswio::HnswIo;
use hnsw_rs::prelude::{Distance, Hnsw};

use super::{
    check_query, dot, normalized, sort_best_first, AnnError, HnswParams, IndexKind, Result,
    VectorIndex, VectorSource, BUILD_CHUNK,
};
use crate::progress::Progress;

/// Cosine distance of unit vectors for hnsw_rs, with the same kernel as [`UnitPoint`].
#[derive(Debug, Clone, Copy, Default)]
pub struct DotDistance;

impl Distance<f32> for DotDistance {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        (1.0 - dot(a, b)).max(0.0)
    }
}

/// An HNSW graph of `hnsw_rs` (parallel insertion on rayon's threads).
pub struct HnswRsIndex {
    hnsw: Hnsw<'static, f32, DotDistance>,
    dim: usize,
    ef_search: usize,
    left_out: u64,
}

impl HnswRsIndex {
    /// Inserts the first `limit` records of `source` (all: `u64::MAX`), `BUILD_CHUNK` at a time,
    /// stopping early once `params.budget` has passed.
    pub fn build(
        source: &VectorSource,
        params: &HnswParams,
        limit: u64,
        progress: &dyn Progress,
    ) -> Result<Self> {
        params.check()?;
        let total = source.len().min(limit);
        // hnsw_rs caps its layers at 16; 16 is ample below billions of points.
        let mut hnsw = Hnsw::new(
            params.m,
            total as usize,
            16,
            params.ef_construction,
            DotDistance,
        );
        let started = Instant::now();
        let mut inserted = 0u64;
        progress.set_length(total);
        source.for_each_chunk(BUILD_CHUNK, limit, |chunk| {
            let refs: Vec<(&[f32], usize)> = chunk
                .iter()
                .map(|(ord, v)| (v.as_slice(), *ord as usize))
                .collect();
            hnsw.parallel_insert_slice(&refs);
            inserted += chunk.len() as u64;
            progress.inc(chunk.len() as u64);
            params.budget.is_none_or(|b| started.elapsed() < b)
        })?;
        progress.finish();
        hnsw.set_searching_mode(true);
        Ok(Self {
            hnsw,
            dim: source.dim(),
            ef_search: params.ef_search,
            left_out: total.saturating_sub(inserted),
        })
    }
}

/// What a panic inside hnsw_rs said (it asserts on its files' contents instead of failing).
fn panic_reason(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "hnsw_rs panicked".to_string())
}

impl HnswRsIndex {
    /// hnsw_rs's two files of a graph dumped in `dir` under `basename`: the links, then the
    /// vectors.
    pub fn dump_files(dir: &Path, basename: &str) -> [PathBuf; 2] {
        ["graph", "data"].map(|part| dir.join(format!("{basename}.hnsw.{part}")))
    }

    /// Writes the graph and its vectors into [`Self::dump_files`]`(dir, basename)`.
    pub fn dump(&self, dir: &Path, basename: &str) -> Result<()> {
        let [graph, _] = Self::dump_files(dir, basename);
        let graph_err = |reason: String| AnnError::Graph {
            path: graph.clone(),
            reason,
        };
        let dumped =
            std::panic::catch_unwind(AssertUnwindSafe(|| self.hnsw.file_dump(dir, basename)))
                .map_err(|p| graph_err(panic_reason(p)))?
                .map_err(|e| graph_err(format!("cannot write: {e:#}")))?;
        // hnsw_rs picks another name only when it must not overwrite a mapped dump.
        if dumped != basename {
            return Err(graph_err(format!("written as {dumped} instead")));
        }
        Ok(())
    }

    /// The graph [`Self::dump`] wrote, searched with `ef_search` (at least the `k` asked for);
    /// an error when it is not one of `dim`-dimensional vectors under [`DotDistance`].
    pub fn load(dir: &Path, basename: &str, dim: usize, ef_search: usize) -> Result<Self> {
        let [graph, _] = Self::dump_files(dir, basename);
        let graph_err = |reason: String| AnnError::Graph {
            path: graph.clone(),
            reason,
        };
        // The loaded graph borrows its reader for as long as it lives, though it holds no
        // reference into it without memory mapping (not asked for here): the small reader is
        // leaked so the graph can be kept, once per graph loaded.
        let loaded = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let reader: &'static mut HnswIo = Box::leak(Box::new(HnswIo::new(dir, basename)));
            reader.load_hnsw::<f32, DotDistance>()
        }))
        .map_err(|p| graph_err(panic_reason(p)))?;
        let mut hnsw = loaded.map_err(|e| graph_err(format!("cannot read: {e:#}")))?;
        if hnsw.get_point_indexation().get_data_dimension() != dim {
            return Err(graph_err(format!(
                "{}-dimensional vectors, the vector file's are {dim}-dimensional",
                hnsw.get_point_indexation().get_data_dimension()
            )));
        }
        hnsw.set_searching_mode(true);
        Ok(Self {
            hnsw,
            dim,
            ef_search,
            left_out: 0,
        })
    }
}

impl VectorIndex for HnswRsIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::HnswRs
    }
    fn len(&self) -> usize {
        self.hnsw.get_nb_point()
    }
    fn left_out(&self) -> u64 {
        self.left_out
    }
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(u64, f32)>> {
        check_query(query, self.dim)?;
        let q = normalized(query.to_vec());
        let mut found: Vec<(u64, f32)> = self
            .hnsw
            .search(&q, k, self.ef_search.max(k))
            .into_iter()
            .map(|n| (n.d_id as u64, 1.0 - n.distance))
            .collect();
        sort_best_first(&mut found);
        Ok(found)
    }
}
