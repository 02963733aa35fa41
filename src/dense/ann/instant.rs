//! HNSW graphs of the `instant-distance` crate, compared by `convrag bench ann`.

use instant_distance::{Builder, HnswMap, Point, Search};

use super::{
    check_query, dot, normalized, sort_best_first, AnnError, HnswParams, IndexKind, Result,
    VectorIndex, VectorSource, BUILD_CHUNK,
};
use crate::progress::Progress;

/// A unit vector as an `instant-distance` point (cosine distance, the kernel of
/// [`super::DotDistance`]).
#[derive(Debug, Clone)]
pub struct UnitPoint(Box<[f32]>);

impl Point for UnitPoint {
    fn distance(&self, other: &Self) -> f32 {
        (1.0 - dot(&self.0, &other.0)).max(0.0)
    }
}

/// An HNSW graph of `instant-distance` (built in one call on rayon's threads: it reports no
/// progress of its own, and its search breadth is fixed when it is built).
pub struct InstantIndex {
    map: HnswMap<UnitPoint, u64>,
    dim: usize,
}

impl InstantIndex {
    pub fn build(
        source: &VectorSource,
        params: &HnswParams,
        progress: &dyn Progress,
    ) -> Result<Self> {
        params.check()?;
        let mut points = Vec::new();
        let mut ordinals = Vec::new();
        source.for_each_chunk(BUILD_CHUNK, u64::MAX, |chunk| {
            for (ord, v) in chunk {
                points.push(UnitPoint(v.into_boxed_slice()));
                ordinals.push(ord);
            }
            true
        })?;
        if points.is_empty() {
            return Err(AnnError::Empty);
        }
        progress.set_length(points.len() as u64);
        progress.set_message("instant-distance builds in one call".to_string());
        let map = Builder::default()
            .ef_construction(params.ef_construction)
            .ef_search(params.ef_search)
            .seed(params.seed)
            .build(points, ordinals);
        progress.set_position(map.values.len() as u64);
        progress.finish();
        Ok(Self {
            map,
            dim: source.dim(),
        })
    }
}

impl VectorIndex for InstantIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::InstantDistance
    }
    fn len(&self) -> usize {
        self.map.values.len()
    }
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(u64, f32)>> {
        check_query(query, self.dim)?;
        let q = UnitPoint(normalized(query.to_vec()).into_boxed_slice());
        let mut search = Search::default();
        let mut found: Vec<(u64, f32)> = self
            .map
            .search(&q, &mut search)
            .take(k)
            .map(|item| (*item.value, 1.0 - item.distance))
            .collect();
        sort_best_first(&mut found);
        Ok(found)
    }
}
