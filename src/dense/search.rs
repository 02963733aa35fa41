//! First-stage retrieval by the bi-encoder: exact search over a collection's memory-mapped
//! passage vectors ([`super::vectors`], filled by `convrag embed` or `convrag index`), and its
//! reciprocal-rank fusion with BM25. [`FirstStage`] is the one entry point for the three
//! [`Retrieval`] modes.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::ann::{AnnError, HnswRsIndex, IndexKind, VectorIndex};
use super::embed::{encode_passages, write_vectors, VectorModel, VectorTarget};
use super::vector_sums::VectorSums;
use super::vectors::{id_hash, VectorFile};
use super::{DiskEmbeddingCache, EmbedError};
use crate::index::{
    embedding_key, Hit, IndexError, Retriever, SearchOptions, TantivyRetriever, WeightedQuery,
};
use crate::progress::Progress;
use crate::rerank::{open_default, Fusion, OnnxReranker, RerankError, Reranker};

/// Errors of dense and hybrid retrieval.
#[derive(Debug, thiserror::Error)]
pub enum DenseError {
    #[error("collection {collection:?} has no passage vectors for model {model} (no {}); run `convrag embed --collection {collection}`", path.display())]
    Missing {
        collection: String,
        model: String,
        path: PathBuf,
    },
    #[error("collection {collection:?} has passage vectors for {have} of {total} passages; run `convrag embed --collection {collection}` to finish them")]
    Incomplete {
        collection: String,
        have: u64,
        total: u64,
    },
    #[error("dense retrieval of collection {0:?} needs a bi-encoder model (scripts/fetch-models.sh installs one)")]
    NoModel(String),
    #[error("invalid RRF k {0}: must be finite and > 0")]
    RrfK(f32),
    #[error(transparent)]
    Graph(AnnError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Model(#[from] RerankError),
}

pub type Result<T, E = DenseError> = std::result::Result<T, E>;

/// Which first stage finds the candidates.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Retrieval {
    /// BM25 over the tantivy index.
    #[default]
    Bm25,
    /// The bi-encoder: exact cosine over every passage vector.
    Dense,
    /// Reciprocal-rank fusion of BM25's and the bi-encoder's top candidates.
    Hybrid,
}

impl fmt::Display for Retrieval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Retrieval::Bm25 => "bm25",
            Retrieval::Dense => "dense",
            Retrieval::Hybrid => "hybrid",
        })
    }
}

impl Retrieval {
    /// The recommended fusion after this first stage.
    pub fn recommended_fusion(self) -> Fusion {
        match self {
            Retrieval::Bm25 | Retrieval::Dense => Fusion::RECOMMENDED,
            Retrieval::Hybrid => Fusion::RECOMMENDED_HYBRID,
        }
    }
}

/// How hybrid retrieval fuses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HybridOptions {
    /// RRF's k: a passage scores `1/(k + rank)` per list it is in, ranks from 1.
    pub rrf_k: f32,
    /// Candidates taken from each retriever (at least the `k` asked for).
    pub depth: usize,
}

impl Default for HybridOptions {
    fn default() -> Self {
        Self {
            rrf_k: 60.0,
            depth: 1000,
        }
    }
}

/// The bi-encoder with the embedding cache its passage vectors are in: opens a collection's
/// [`FirstStage`] for every mode. Cheap to clone; a stage opened per search sees vectors
/// finished since the last one.
#[derive(Clone)]
pub struct VectorSearch {
    model: Arc<OnnxReranker>,
    cache: Arc<DiskEmbeddingCache>,
    hybrid: HybridOptions,
}

impl VectorSearch {
    /// `model` is the bi-encoder whose vectors `cache` holds.
    pub fn new(model: Arc<OnnxReranker>, cache: Arc<DiskEmbeddingCache>) -> Self {
        Self {
            model,
            cache,
            hybrid: HybridOptions::default(),
        }
    }

    /// How hybrid retrieval fuses (RRF k = 60 over each retriever's top 1000 by default).
    pub fn with_hybrid(mut self, hybrid: HybridOptions) -> Self {
        self.hybrid = hybrid;
        self
    }

    /// The model as a reranker (the same weights and cache).
    pub fn reranker(&self) -> Arc<dyn Reranker> {
        self.model.clone()
    }

    /// Computes the vectors of `collection`'s passages (BM25 index `bm25`) its vector file
    /// lacks, in ordinal order (an interrupted run resumes); returns (passages, encoded now).
    pub fn embed(
        &self,
        collection: &str,
        bm25: &TantivyRetriever,
        progress: &dyn Progress,
    ) -> std::result::Result<(u64, u64), EmbedError> {
        let model_id = self.model.model_id();
        let model = VectorModel {
            id: &model_id,
            sha256: self.model.model_sha256(),
            dim: self.model.embedding_dim()?,
        };
        let target = VectorTarget {
            cache: &self.cache,
            collection,
            retriever: bm25,
        };
        write_vectors(&target, model, EMBED_CHUNK, progress, &mut |hits| {
            encode_passages(&self.model, hits)
        })
    }

    /// Passages of `collection` (BM25 index `bm25`) with a vector, and passages in all.
    pub fn coverage(&self, collection: &str, bm25: &TantivyRetriever) -> Result<(u64, u64)> {
        let key = embedding_key(collection, bm25);
        let path = self.cache.vector_path(self.model.model_sha256(), &key);
        let total = bm25.num_passages();
        let Some(vectors) = VectorFile::open(&path)? else {
            return Ok((0, total));
        };
        let missing = bm25.live_from(vectors.current_len()?);
        Ok((total.saturating_sub(missing), total))
    }

    /// `collection`'s first stage (BM25 index `bm25`) with its vectors; an error naming
    /// `convrag embed` while they are missing or do not cover every passage.
    pub fn first_stage(&self, collection: &str, bm25: Arc<TantivyRetriever>) -> Result<FirstStage> {
        let dense = DenseRetriever::open(&self.cache, Arc::clone(&self.model), collection, bm25)?;
        FirstStage::with_dense(dense, self.hybrid)
    }
}

/// [`load_default_search`] as a reranker: the configured default model with its on-disk
/// embedding cache, when installed.
pub fn load_default(config: &crate::Config) -> Option<Arc<dyn Reranker>> {
    load_default_search(config).map(|search| search.reranker())
}

/// The configured default model ([`open_default`]) as a [`VectorSearch`]: it reranks with the
/// embedding cache its passage vectors are in, and opens collections' vectors for dense
/// retrieval.
pub fn load_default_search(config: &crate::Config) -> Option<VectorSearch> {
    let model = open_default(config)?;
    let cache = Arc::new(DiskEmbeddingCache::for_config(config));
    let model = Arc::new(model.with_cache(cache.clone()));
    Some(VectorSearch::new(model, cache))
}

/// Passages encoded per step of [`VectorSearch::embed`] (a step holds the model briefly, so turns
/// running meanwhile wait little).
const EMBED_CHUNK: usize = 32;

/// Bi-encoder search over one collection's passage vectors: through their nearest-neighbour
/// graph when the collection has one built from them ([`super::graph`]), else exact.
pub struct DenseRetriever {
    collection: String,
    bm25: Arc<TantivyRetriever>,
    vectors: VectorFile,
    model: Arc<OnnxReranker>,
    graph: Option<Arc<HnswRsIndex>>,
}

impl DenseRetriever {
    /// The vectors of `collection` (whose BM25 index is `bm25`) computed by `model` in `cache`;
    /// an error naming `convrag embed` when they are missing or do not cover every passage.
    pub fn open(
        cache: &DiskEmbeddingCache,
        model: Arc<OnnxReranker>,
        collection: &str,
        bm25: Arc<TantivyRetriever>,
    ) -> Result<Self> {
        let key = embedding_key(collection, bm25.as_ref());
        let path = cache.vector_path(model.model_sha256(), &key);
        let vectors = VectorFile::open(&path)?.ok_or_else(|| DenseError::Missing {
            collection: collection.to_string(),
            model: model.model_id(),
            path: path.clone(),
        })?;
        let written = vectors.current_len()?;
        let missing = bm25.live_from(written);
        if missing > 0 {
            let total = bm25.num_passages();
            return Err(DenseError::Incomplete {
                collection: collection.to_string(),
                have: total.saturating_sub(missing),
                total,
            });
        }
        // Vectors without sums are not known to be complete: no graph is trusted for them.
        let graph = match VectorSums::read(&path) {
            Ok(sums) => sums.and_then(|s| cache.graph(&path, vectors.dim(), written, &s.sha256)),
            Err(e) => {
                tracing::warn!(collection, error = %e, "dense search is exact: the vectors' sums are unreadable");
                None
            }
        };
        let kind = graph.as_ref().map_or(IndexKind::Exact, |g| g.kind());
        tracing::debug!(collection, search = kind.as_str(), "dense retrieval opened");
        Ok(Self {
            collection: collection.to_string(),
            bm25,
            vectors,
            model,
            graph,
        })
    }

    pub fn collection(&self) -> &str {
        &self.collection
    }

    /// How [`Self::search_vector`] searches: the exact scan, or the collection's HNSW graph.
    pub fn search_kind(&self) -> IndexKind {
        self.graph.as_ref().map_or(IndexKind::Exact, |g| g.kind())
    }

    /// The query's vector: each part embedded, weighted and summed (a plain query is one part).
    pub fn embed_query(&self, query: &WeightedQuery) -> Result<Vec<f32>> {
        let parts: Vec<&(String, f32)> = query.parts.iter().filter(|(_, w)| *w != 0.0).collect();
        let texts: Vec<&str> = parts.iter().map(|(t, _)| t.as_str()).collect();
        let embedded = self.model.embed_queries(&texts)?.unwrap_or_default();
        let mut sum = vec![0.0f32; self.vectors.dim()];
        for ((_, weight), vector) in parts.iter().zip(&embedded) {
            for (s, x) in sum.iter_mut().zip(vector) {
                *s += weight * x;
            }
        }
        Ok(sum)
    }

    /// The `k` passages nearest to `query` by cosine, best first.
    pub fn search(&self, query: &WeightedQuery, k: usize, with_fields: bool) -> Result<Vec<Hit>> {
        let vector = self.embed_query(query)?;
        self.search_vector(&vector, k, with_fields)
    }

    /// [`Self::search`] with the query already embedded.
    pub fn search_vector(&self, vector: &[f32], k: usize, with_fields: bool) -> Result<Vec<Hit>> {
        // A query of another dimension gets the exact scan's error, which names the file.
        let graph = self
            .graph
            .as_ref()
            .filter(|_| vector.len() == self.vectors.dim());
        let Some(graph) = graph else {
            return self.search_exact(vector, k, with_fields);
        };
        // The graph keeps max(ef_search, k) candidates.
        let scored = graph.search(vector, k).map_err(|e| match e {
            AnnError::Vectors(e) => DenseError::Model(e),
            other => DenseError::Graph(other),
        })?;
        let hits = self.bm25.hits_at(&scored, with_fields)?;
        // A record is only trusted for the id it was computed from.
        let keys: Vec<(u64, &str)> = hits
            .iter()
            .map(|h| (h.ordinal.unwrap_or(u64::MAX), h.id.as_str()))
            .collect();
        let records = self.vectors.get_many(&keys)?;
        Ok(hits
            .into_iter()
            .zip(records)
            .filter_map(|(h, record)| record.map(|_| h))
            .collect())
    }

    /// The exact `k` nearest: every vector scanned.
    fn search_exact(&self, vector: &[f32], k: usize, with_fields: bool) -> Result<Vec<Hit>> {
        let nearest = self.vectors.nearest(vector, k)?;
        let scored: Vec<(u64, f32)> = nearest.iter().map(|n| (n.ordinal, n.score)).collect();
        let hits = self.bm25.hits_at(&scored, with_fields)?;
        // A record is only trusted for the id it was computed from.
        let hashes: HashMap<u64, u64> = nearest.iter().map(|n| (n.ordinal, n.id_hash)).collect();
        Ok(hits
            .into_iter()
            .filter(|h| {
                h.ordinal
                    .and_then(|o| hashes.get(&o))
                    .is_some_and(|&hash| hash == id_hash(&h.id))
            })
            .collect())
    }
}

/// Reciprocal-rank fusion of ranked lists: a passage scores the sum of `1/(k + rank)` over the
/// lists it is in (ranks from 1); best first, ties by id. The first list's hit is kept for a
/// passage in several (its stored fields).
pub fn rrf(lists: &[&[Hit]], k: f32, top: usize) -> Vec<Hit> {
    let mut fused: HashMap<&str, (f32, &Hit)> = HashMap::new();
    for list in lists {
        for (rank, hit) in list.iter().enumerate() {
            let add = 1.0 / (k + rank as f32 + 1.0);
            fused
                .entry(hit.id.as_str())
                .and_modify(|(score, _)| *score += add)
                .or_insert((add, hit));
        }
    }
    let mut out: Vec<Hit> = fused
        .into_values()
        .map(|(score, hit)| Hit {
            score,
            ..hit.clone()
        })
        .collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    out.truncate(top);
    out
}

/// Where a first-stage candidate stood in each retriever's list (1-based; `None`: that retriever
/// did not run, or did not return it within its depth). "Why this answer" shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRanks {
    pub bm25: Option<u32>,
    pub dense: Option<u32>,
    /// Its rank in the fused (hybrid) list.
    pub fused: Option<u32>,
}

impl SourceRanks {
    /// The ranks of `hits`, a list of `mode`'s alone (BM25's or the bi-encoder's).
    pub fn of_list(mode: Retrieval, hits: Vec<Hit>) -> Vec<FirstStageHit> {
        hits.into_iter()
            .enumerate()
            .map(|(i, hit)| {
                let rank = Some(i as u32 + 1);
                let (ranks, bm25_score) = match mode {
                    Retrieval::Bm25 => (
                        SourceRanks {
                            bm25: rank,
                            ..Default::default()
                        },
                        Some(hit.score),
                    ),
                    Retrieval::Dense => (
                        SourceRanks {
                            dense: rank,
                            ..Default::default()
                        },
                        None,
                    ),
                    Retrieval::Hybrid => (
                        SourceRanks {
                            fused: rank,
                            ..Default::default()
                        },
                        None,
                    ),
                };
                FirstStageHit {
                    hit,
                    ranks,
                    bm25_score,
                }
            })
            .collect()
    }
}

/// One candidate of a first stage: the hit (its score is the mode's own: BM25's, the cosine or
/// the RRF score), its ranks, and BM25's score where BM25 returned it, which reranking fuses
/// with the model's so that the bi-encoder, when it is also the reranker, does not vote twice.
#[derive(Debug, Clone)]
pub struct FirstStageHit {
    pub hit: Hit,
    pub ranks: SourceRanks,
    pub bm25_score: Option<f32>,
}

/// 1-based positions of each id in `hits`.
fn positions(hits: &[Hit]) -> HashMap<&str, u32> {
    hits.iter()
        .enumerate()
        .map(|(i, h)| (h.id.as_str(), i as u32 + 1))
        .collect()
}

/// A collection's first stage in every [`Retrieval`] mode: BM25 always, dense when its vectors
/// are complete.
pub struct FirstStage {
    collection: String,
    bm25: Arc<TantivyRetriever>,
    dense: Option<DenseRetriever>,
    hybrid: HybridOptions,
}

impl FirstStage {
    /// BM25 only.
    pub fn bm25(collection: &str, bm25: Arc<TantivyRetriever>) -> Self {
        Self {
            collection: collection.to_string(),
            bm25,
            dense: None,
            hybrid: HybridOptions::default(),
        }
    }

    /// BM25 and the bi-encoder.
    pub fn with_dense(dense: DenseRetriever, hybrid: HybridOptions) -> Result<Self> {
        if !(hybrid.rrf_k.is_finite() && hybrid.rrf_k > 0.0) {
            return Err(DenseError::RrfK(hybrid.rrf_k));
        }
        Ok(Self {
            collection: dense.collection.clone(),
            bm25: dense.bm25.clone(),
            dense: Some(dense),
            hybrid,
        })
    }

    /// The modes this collection can serve now.
    pub fn supports(&self, mode: Retrieval) -> bool {
        mode == Retrieval::Bm25 || self.dense.is_some()
    }

    /// The top `options.k` passages of `query` by `mode`. `options` (BM25 parameters, fields)
    /// applies to BM25's part; scores are BM25's, cosines or RRF scores.
    pub fn search(
        &self,
        mode: Retrieval,
        query: &WeightedQuery,
        options: &SearchOptions,
    ) -> Result<Vec<Hit>> {
        Ok(self
            .search_ranked(mode, query, None, options)?
            .into_iter()
            .map(|c| c.hit)
            .collect())
    }

    /// The model whose vectors dense retrieval compares (a query vector must be its own).
    pub fn dense_model(&self) -> Option<&dyn Reranker> {
        self.dense
            .as_ref()
            .map(|d| d.model.as_ref() as &dyn Reranker)
    }

    /// [`Self::search`] with each passage's ranks in the lists it came from; `vector` is the
    /// query's, already embedded by [`Self::dense_model`] (else embedded here).
    pub fn search_ranked(
        &self,
        mode: Retrieval,
        query: &WeightedQuery,
        vector: Option<Vec<f32>>,
        options: &SearchOptions,
    ) -> Result<Vec<FirstStageHit>> {
        let dense = || self.dense.as_ref().ok_or_else(|| self.missing());
        let semantic = |dense: &DenseRetriever, k: usize, with_fields: bool| match &vector {
            Some(v) => dense.search_vector(v, k, with_fields),
            None => dense.search(query, k, with_fields),
        };
        match mode {
            Retrieval::Bm25 => Ok(SourceRanks::of_list(
                mode,
                self.bm25.search_with(query, options)?,
            )),
            Retrieval::Dense => Ok(SourceRanks::of_list(
                mode,
                semantic(dense()?, options.k, options.with_fields)?,
            )),
            Retrieval::Hybrid => {
                let dense = dense()?;
                // Both lists ids only: stored fields are read for the fused top k alone.
                let mut ids_only = options.clone();
                ids_only.k = self.hybrid.depth.max(options.k);
                ids_only.with_fields = false;
                let lexical = self.bm25.search_with(query, &ids_only)?;
                let semantic = semantic(dense, ids_only.k, false)?;
                let mut fused = rrf(
                    &[lexical.as_slice(), semantic.as_slice()],
                    self.hybrid.rrf_k,
                    options.k,
                );
                if options.with_fields {
                    fused = self.with_fields(fused)?;
                }
                let (in_bm25, in_dense) = (positions(&lexical), positions(&semantic));
                let bm25_scores: HashMap<&str, f32> =
                    lexical.iter().map(|h| (h.id.as_str(), h.score)).collect();
                Ok(fused
                    .into_iter()
                    .enumerate()
                    .map(|(i, hit)| {
                        let id = hit.id.as_str();
                        let ranks = SourceRanks {
                            bm25: in_bm25.get(id).copied(),
                            dense: in_dense.get(id).copied(),
                            fused: Some(i as u32 + 1),
                        };
                        let bm25_score = bm25_scores.get(id).copied();
                        FirstStageHit {
                            hit,
                            ranks,
                            bm25_score,
                        }
                    })
                    .collect())
            }
        }
    }

    /// `hits` (ids and ordinals only) with their stored fields, in order. A passage whose
    /// ordinal names another id by now (the index was reloaded between the reads) is read by id;
    /// one deleted meanwhile is left out.
    fn with_fields(&self, hits: Vec<Hit>) -> Result<Vec<Hit>> {
        let scored: Vec<(u64, f32)> = hits
            .iter()
            .filter_map(|h| h.ordinal.map(|o| (o, h.score)))
            .collect();
        let mut loaded: HashMap<u64, Hit> = self
            .bm25
            .hits_at(&scored, true)?
            .into_iter()
            .filter_map(|h| h.ordinal.map(|o| (o, h)))
            .collect();
        let mut out = Vec::with_capacity(hits.len());
        for hit in hits {
            let at_ordinal = hit.ordinal.and_then(|o| loaded.remove(&o));
            match at_ordinal.filter(|loaded| loaded.id == hit.id) {
                Some(loaded) => out.push(loaded),
                None => {
                    if let Some(mut moved) = self.bm25.passage(&hit.id)? {
                        moved.score = hit.score;
                        out.push(moved);
                    }
                }
            }
        }
        Ok(out)
    }

    fn missing(&self) -> DenseError {
        DenseError::NoModel(self.collection.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_retrieval_recommends_a_larger_bm25_share() {
        assert_eq!(Retrieval::Bm25.recommended_fusion(), Fusion::RECOMMENDED);
        assert_eq!(Retrieval::Dense.recommended_fusion(), Fusion::RECOMMENDED);
        assert_eq!(
            Retrieval::Hybrid.recommended_fusion().to_string(),
            "weighted:0.35"
        );
    }

    fn hits(ids: &[&str]) -> Vec<Hit> {
        ids.iter()
            .map(|id| Hit::id_only(id.to_string(), 0.0, None))
            .collect()
    }

    #[test]
    fn rrf_sums_reciprocal_ranks_and_breaks_ties_by_id() {
        let a = hits(&["x", "y", "z"]);
        let b = hits(&["y", "w"]);
        let fused = rrf(&[a.as_slice(), b.as_slice()], 60.0, 10);
        let ids: Vec<&str> = fused.iter().map(|h| h.id.as_str()).collect();
        // y: 1/62 + 1/61, x: 1/61, w: 1/62, z: 1/63.
        assert_eq!(ids, vec!["y", "x", "w", "z"]);
        assert!((fused[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-7);
        let (b, a) = (hits(&["b"]), hits(&["a"]));
        let tied = rrf(&[b.as_slice(), a.as_slice()], 60.0, 1);
        assert_eq!(tied[0].id, "a", "equal scores: smaller id first");
    }

    #[test]
    fn a_list_alone_ranks_in_its_own_retriever() {
        let ranked = SourceRanks::of_list(Retrieval::Dense, hits(&["a", "b"]));
        assert_eq!(ranked[1].ranks.dense, Some(2));
        assert_eq!((ranked[1].ranks.bm25, ranked[1].ranks.fused), (None, None));
        assert_eq!(ranked[1].bm25_score, None);
        let lexical =
            SourceRanks::of_list(Retrieval::Bm25, vec![Hit::id_only("c".into(), 7.5, None)]);
        assert_eq!(
            (lexical[0].ranks.bm25, lexical[0].bm25_score),
            (Some(1), Some(7.5))
        );
        assert_eq!(positions(&hits(&["x", "y"]))["y"], 2);
    }

    #[test]
    fn retrieval_modes_read_and_print_in_lowercase() {
        for mode in [Retrieval::Bm25, Retrieval::Dense, Retrieval::Hybrid] {
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, format!("\"{mode}\""));
            assert_eq!(serde_json::from_str::<Retrieval>(&json).unwrap(), mode);
        }
        assert!(serde_json::from_str::<Retrieval>("\"sparse\"").is_err());
    }
}
