//! BM25 retrieval over a collection, and the registry of collections under the data directory.
//!
//! Scoring follows Lucene's `BM25Similarity` (Lucene 8+, used by Anserini):
//!   score(d, q) = Σ_t boost_t · idf_t · tf / (tf + k1 · (1 − b + b · dl / avgdl))
//!   idf_t = ln(1 + (N − df_t + 0.5) / (df_t + 0.5)),  avgdl = total tokens / N
//! where `dl` is the document length decoded from its one-byte norm. Tantivy quantizes lengths
//! with the same table as Lucene's `SmallFloat.intToByte4` (exact up to 40 tokens, then 4 bits
//! of mantissa), so the lengths, and therefore the scores, match Anserini's for equal tokens.
//! Differences: N counts all live documents (Lucene: documents having the field) and the
//! arithmetic is f32 throughout (Lucene mixes f64 and f32), so scores agree to about 1e-6.
//! A term repeated in the query counts once per occurrence (Anserini's bag-of-words boost).
//!
//! Top-k evaluation is pruned by default (block-max MaxScore, `topk.rs`): documents that cannot
//! enter the top k are skipped. Exhaustive term-at-a-time scoring stays as the reference; both
//! return the same documents with the same scores.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;
use tantivy::schema::{IndexRecordOption, TantivyDocument, Value};
use tantivy::{DocAddress, Index, IndexReader, ReloadPolicy, Searcher, SegmentReader, Term};

use super::bm25::{term_score, FieldPlan};
use super::query::{Evaluation, SearchOptions, WeightedQuery};
use super::topk;
use super::{
    open_tantivy, read_manifest, tantivy_err, Bm25Params, FieldWeights, Fields, IndexError,
    Language, Manifest, Result,
};

/// One retrieved passage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub id: String,
    pub score: f32,
    pub title: String,
    pub url: String,
    pub headings: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doc_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_char: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_char: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<String>,
    /// Position in the index's current layout (its segments in order, then the document
    /// number): the address of the passage's precomputed vector. Not part of any output.
    #[serde(skip)]
    pub ordinal: Option<u64>,
}

impl Hit {
    /// A hit without stored fields (what a run file needs).
    pub fn id_only(id: String, score: f32, ordinal: Option<u64>) -> Self {
        Hit {
            id,
            score,
            title: String::new(),
            url: String::new(),
            headings: String::new(),
            text: String::new(),
            doc_id: None,
            start_char: None,
            end_char: None,
            meta: None,
            ordinal,
        }
    }

    /// What a neural model reads of the passage: the title, a newline, then the text. Every
    /// caller uses this, so cached embeddings (keyed by passage id) always match.
    pub fn model_text(&self) -> String {
        if self.title.trim().is_empty() {
            self.text.clone()
        } else {
            format!("{}\n{}", self.title, self.text)
        }
    }
}
/// An f32 ordered by `total_cmp`, for heaps of scores.
#[derive(Debug, Clone, Copy)]
struct TotalF32(f32);
impl PartialEq for TotalF32 {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}
impl Eq for TotalF32 {}
impl PartialOrd for TotalF32 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for TotalF32 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Anything that retrieves passages for a query.
pub trait Retriever: Send + Sync {
    /// Top `k` passages for a plain-text query, with their stored fields.
    fn search(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        self.search_with(&WeightedQuery::text(query), &SearchOptions::top(k))
    }
    /// Search with weighted query parts and explicit options.
    fn search_with(&self, query: &WeightedQuery, options: &SearchOptions) -> Result<Vec<Hit>>;
    /// A passage by id, if present.
    fn passage(&self, id: &str) -> Result<Option<Hit>>;
    /// Up to `limit` passage ids starting with `prefix`, in byte order (a page's passages:
    /// `page.html#`). An id deleted since may be among them; [`Retriever::passage`] tells.
    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>>;
    /// Number of passages searchable now.
    fn num_passages(&self) -> u64;
    /// A name for the index's current files, which the ordinals of its hits are positions in:
    /// it changes whenever they may shift. `None` when hits carry no ordinals.
    fn layout(&self) -> Option<String> {
        None
    }
}

/// The key of a collection's passage embeddings: the name with the index layout, so two indexes
/// of one name (a rebuilt collection, another user's private one) never share vectors.
pub fn embedding_key(collection: &str, retriever: &dyn Retriever) -> String {
    match retriever.layout() {
        Some(layout) => format!("{collection}.{layout}"),
        None => collection.to_string(),
    }
}

/// BM25 retrieval over one tantivy-backed collection. Cheap to share (`Arc`); searches run
/// concurrently; a commit by a running `convrag index` becomes visible automatically.
pub struct TantivyRetriever {
    dir: PathBuf,
    manifest: Manifest,
    fields: Fields,
    reader: IndexReader,
    impacts: super::impacts::ImpactStore,
    _index: Index,
}

impl TantivyRetriever {
    /// The collection's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Opens the collection stored in `dir` (`<collections_dir>/<name>`).
    pub fn open(dir: &Path) -> Result<Self> {
        let manifest = read_manifest(dir)?;
        let index = open_tantivy(dir, manifest.language)?;
        let fields = Fields::from_schema(&index.schema())?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::OnCommitWithDelay)
            .try_into()
            .map_err(tantivy_err(dir))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            manifest,
            fields,
            reader,
            impacts: super::impacts::ImpactStore::new(dir),
            _index: index,
        })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn language(&self) -> Language {
        self.manifest.language
    }

    fn searcher(&self) -> Searcher {
        self.reader.searcher()
    }

    /// Number of ordinals of the current layout (live and deleted documents).
    pub fn ordinal_count(&self) -> u64 {
        self.searcher()
            .segment_readers()
            .iter()
            .map(|s| u64::from(s.max_doc()))
            .sum()
    }

    /// Live passages at ordinals `start` and above.
    pub fn live_from(&self, start: u64) -> u64 {
        let mut base = 0u64;
        let mut live = 0u64;
        for segment in self.searcher().segment_readers() {
            let end = base + u64::from(segment.max_doc());
            let first = start.clamp(base, end) - base;
            live += (first as u32..segment.max_doc())
                .filter(|&doc| !segment.is_deleted(doc))
                .count() as u64;
            base = end;
        }
        live
    }

    /// The passages at the ordinals of `scored`, each with its score, in the order given; an
    /// ordinal beyond the layout or of a deleted passage is left out. Without `with_fields` only
    /// ids and ordinals are loaded.
    pub fn hits_at(&self, scored: &[(u64, f32)], with_fields: bool) -> Result<Vec<Hit>> {
        let searcher = self.searcher();
        let segments = searcher.segment_readers();
        let mut id_columns = HashMap::new();
        let mut out = Vec::with_capacity(scored.len());
        for &(ordinal, score) in scored {
            let Some((seg_ord, doc)) = locate(segments, ordinal) else {
                continue;
            };
            let seg = &segments[seg_ord];
            if seg.is_deleted(doc) {
                continue;
            }
            let col = match id_columns.entry(seg_ord) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(self.id_column(seg)?),
            };
            let mut id = String::new();
            if let Some(ord) = col.ords().first(doc) {
                col.ord_to_str(ord, &mut id)
                    .map_err(super::io_err(&self.dir))?;
            }
            out.push(if with_fields {
                self.load_hit(&searcher, DocAddress::new(seg_ord as u32, doc), id, score)?
            } else {
                Hit::id_only(id, score, Some(ordinal))
            });
        }
        Ok(out)
    }

    fn id_column(&self, seg: &SegmentReader) -> Result<tantivy::columnar::StrColumn> {
        seg.fast_fields()
            .str("id")
            .map_err(tantivy_err(&self.dir))?
            .ok_or_else(|| IndexError::Invalid("index has no id column".into()))
    }

    /// Calls `f` with every live passage (stored fields, score 0), in index order and in batches
    /// of at most `batch`, e.g. to precompute embeddings for the whole collection.
    pub fn for_each_passage(
        &self,
        batch: usize,
        f: impl FnMut(&[Hit]) -> Result<()>,
    ) -> Result<()> {
        self.for_each_passage_from(0, batch, f)
    }

    /// [`Self::for_each_passage`] from ordinal `start` on (resuming a walk that stopped there).
    pub fn for_each_passage_from(
        &self,
        start: u64,
        batch: usize,
        mut f: impl FnMut(&[Hit]) -> Result<()>,
    ) -> Result<()> {
        let searcher = self.searcher();
        let mut pending: Vec<Hit> = Vec::with_capacity(batch.max(1));
        let mut base = 0u64;
        for (ord, segment) in searcher.segment_readers().iter().enumerate() {
            let segment_base = base;
            base += u64::from(segment.max_doc());
            if base <= start {
                continue;
            }
            let first = start.saturating_sub(segment_base) as u32;
            for doc in first..segment.max_doc() {
                if segment.is_deleted(doc) {
                    continue;
                }
                let addr = DocAddress::new(ord as u32, doc);
                let stored: TantivyDocument = searcher.doc(addr).map_err(tantivy_err(&self.dir))?;
                let id = stored
                    .get_first(self.fields.id)
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                pending.push(self.load_hit(&searcher, addr, id, 0.0)?);
                if pending.len() >= batch.max(1) {
                    f(&pending)?;
                    pending.clear();
                }
            }
        }
        if !pending.is_empty() {
            f(&pending)?;
        }
        Ok(())
    }

    /// The `n` smallest passage ids (byte order) of live passages: a choice of passages that does
    /// not depend on how the index happens to be laid out in segments. Reads the id field's term
    /// dictionaries, not the documents.
    pub fn smallest_ids(&self, n: usize) -> Result<Vec<String>> {
        use tantivy::{DocSet, TERMINATED};
        let searcher = self.searcher();
        let mut ids: Vec<String> = Vec::new();
        for seg in searcher.segment_readers() {
            let inv = seg
                .inverted_index(self.fields.id)
                .map_err(tantivy_err(&self.dir))?;
            let mut stream = inv.terms().stream().map_err(super::io_err(&self.dir))?;
            let mut taken = 0;
            while taken < n && stream.advance() {
                let mut postings = inv
                    .read_postings_from_terminfo(stream.value(), IndexRecordOption::Basic)
                    .map_err(super::io_err(&self.dir))?;
                let mut live = false;
                let mut doc = postings.doc();
                while doc != TERMINATED && !live {
                    live = !seg.is_deleted(doc);
                    doc = postings.advance();
                }
                if live {
                    ids.push(String::from_utf8_lossy(stream.key()).into_owned());
                    taken += 1;
                }
            }
        }
        ids.sort();
        ids.dedup();
        ids.truncate(n);
        Ok(ids)
    }

    /// The top `k` documents as (score, address, id), ties broken by ascending id as Anserini
    /// does. Both evaluations return identical lists (ids and scores).
    pub fn score(
        &self,
        searcher: &Searcher,
        query: &WeightedQuery,
        k: usize,
        bm25: Bm25Params,
        weights: FieldWeights,
        evaluation: Evaluation,
    ) -> Result<Vec<(f32, DocAddress, String)>> {
        let terms = query.terms(self.manifest.language);
        if terms.is_empty() || k == 0 || searcher.num_docs() == 0 {
            return Ok(Vec::new());
        }
        let plans = self.plan(searcher, &terms, bm25, weights)?;
        let dir = &self.dir;
        let mut candidates: Vec<(f32, u32, u32)> = Vec::new();
        match evaluation {
            Evaluation::Pruned if topk::prunable(bm25, &plans) => {
                let live: Vec<_> = searcher
                    .segment_readers()
                    .iter()
                    .map(|s| s.segment_id())
                    .collect();
                let impacts = self.impacts.for_segments(&live);
                // The k-th best score so far: later segments only keep documents reaching it.
                let mut best = std::collections::BinaryHeap::new();
                for (seg_ord, seg) in searcher.segment_readers().iter().enumerate() {
                    let floor = (best.len() == k).then(|| {
                        let std::cmp::Reverse(TotalF32(s)) = best.peek().copied().expect("k > 0");
                        s
                    });
                    let segment = topk::SegmentToSearch {
                        reader: seg,
                        ord: seg_ord as u32,
                        impacts: impacts[seg_ord].as_deref(),
                    };
                    let top = topk::segment_top_k(segment, &plans, bm25, k, floor, dir)?;
                    for c in &top {
                        best.push(std::cmp::Reverse(TotalF32(c.0)));
                        if best.len() > k {
                            best.pop();
                        }
                    }
                    candidates.extend(top);
                }
            }
            Evaluation::Pruned | Evaluation::Exhaustive => {
                for (seg_ord, seg) in searcher.segment_readers().iter().enumerate() {
                    self.score_segment_exhaustively(seg, seg_ord as u32, &plans, &mut candidates)?;
                }
            }
        }
        self.top_k_with_ids(searcher, candidates, k)
    }

    /// Per scored field: the length normalization per norm byte and each query term's weight
    /// (idf × query weight × field weight), in a fixed order that fixes the summation order.
    fn plan(
        &self,
        searcher: &Searcher,
        terms: &BTreeMap<String, f32>,
        bm25: Bm25Params,
        weights: FieldWeights,
    ) -> Result<Vec<FieldPlan>> {
        let dir = &self.dir;
        let n_docs = searcher.num_docs();
        let field_list = [
            (self.fields.body, weights.body),
            (self.fields.title, weights.title),
            (self.fields.headings, weights.headings),
        ];
        let mut plans = Vec::new();
        for (field, fw) in field_list {
            if fw == 0.0 {
                continue;
            }
            let mut total_tokens = 0u64;
            for seg in searcher.segment_readers() {
                total_tokens += seg
                    .inverted_index(field)
                    .map_err(tantivy_err(dir))?
                    .total_num_tokens();
            }
            let avgdl = (total_tokens as f64 / n_docs as f64).max(1e-9) as f32;
            let mut norm_cache = [0f32; 256];
            for (i, c) in norm_cache.iter_mut().enumerate() {
                let dl = tantivy::fieldnorm::FieldNormReader::id_to_fieldnorm(i as u8) as f32;
                *c = bm25.k1 * (1.0 - bm25.b + bm25.b * dl / avgdl);
            }
            let mut term_weights = Vec::new();
            for (text, qw) in terms {
                let term = Term::from_field_text(field, text);
                let df = searcher.doc_freq(&term).map_err(tantivy_err(dir))?;
                if df == 0 {
                    continue;
                }
                let idf = (1.0 + (n_docs as f64 - df as f64 + 0.5) / (df as f64 + 0.5)).ln() as f32;
                term_weights.push((term, idf * qw * fw));
            }
            plans.push(FieldPlan {
                field,
                avgdl,
                norm_cache,
                term_weights,
            });
        }
        Ok(plans)
    }

    /// Term at a time: adds every posting of every query term into one accumulator per document
    /// and appends every live matching document to `candidates`. The reference for pruning.
    fn score_segment_exhaustively(
        &self,
        seg: &SegmentReader,
        seg_ord: u32,
        plans: &[FieldPlan],
        candidates: &mut Vec<(f32, u32, u32)>,
    ) -> Result<()> {
        use tantivy::postings::Postings;
        use tantivy::{DocSet, TERMINATED};
        let dir = &self.dir;
        let mut acc = vec![0f32; seg.max_doc() as usize];
        let mut touched: Vec<u32> = Vec::new();
        for plan in plans {
            let inv = seg.inverted_index(plan.field).map_err(tantivy_err(dir))?;
            let norms = seg
                .get_fieldnorms_reader(plan.field)
                .map_err(tantivy_err(dir))?;
            for (term, w) in &plan.term_weights {
                let Some(mut postings) = inv
                    .read_postings(term, IndexRecordOption::WithFreqs)
                    .map_err(super::io_err(dir))?
                else {
                    continue;
                };
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    let tf = postings.term_freq() as f32;
                    let norm = plan.norm_cache[norms.fieldnorm_id(doc) as usize];
                    let slot = &mut acc[doc as usize];
                    if *slot == 0.0 {
                        touched.push(doc);
                    }
                    *slot += term_score(*w, tf, norm);
                    doc = postings.advance();
                }
            }
        }
        let alive = seg.alive_bitset();
        for doc in touched {
            if alive.is_some_and(|a| a.is_deleted(doc)) {
                continue;
            }
            candidates.push((acc[doc as usize], seg_ord, doc));
        }
        Ok(())
    }

    /// Keeps the top `k` candidates and everything tied with the k-th score, resolves their ids
    /// and orders them by (score desc, id asc).
    fn top_k_with_ids(
        &self,
        searcher: &Searcher,
        mut candidates: Vec<(f32, u32, u32)>,
        k: usize,
    ) -> Result<Vec<(f32, DocAddress, String)>> {
        let dir = &self.dir;
        let by_score_desc = |a: &(f32, u32, u32), b: &(f32, u32, u32)| b.0.total_cmp(&a.0);
        if candidates.len() > k {
            candidates.select_nth_unstable_by(k - 1, by_score_desc);
            let kth = candidates[k - 1].0;
            candidates.retain(|c| c.0 >= kth);
        }
        let mut with_ids = Vec::with_capacity(candidates.len());
        let mut id_columns = HashMap::new();
        let mut buf = String::new();
        for (score, seg_ord, doc) in candidates {
            let seg = &searcher.segment_readers()[seg_ord as usize];
            let col = match id_columns.entry(seg_ord) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(
                    seg.fast_fields()
                        .str("id")
                        .map_err(tantivy_err(dir))?
                        .ok_or_else(|| IndexError::Invalid("index has no id column".into()))?,
                ),
            };
            buf.clear();
            if let Some(ord) = col.ords().first(doc) {
                col.ord_to_str(ord, &mut buf).map_err(super::io_err(dir))?;
            }
            with_ids.push((score, DocAddress::new(seg_ord, doc), buf.clone()));
        }
        with_ids.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.2.cmp(&b.2)));
        with_ids.truncate(k);
        Ok(with_ids)
    }

    fn load_hit(
        &self,
        searcher: &Searcher,
        addr: DocAddress,
        id: String,
        score: f32,
    ) -> Result<Hit> {
        let doc: TantivyDocument = searcher.doc(addr).map_err(tantivy_err(&self.dir))?;
        let text = |f| {
            doc.get_first(f)
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        };
        let opt_text = |f| {
            doc.get_first(f)
                .and_then(|v| v.as_str().map(str::to_string))
        };
        let num = |f| doc.get_first(f).and_then(|v| v.as_u64());
        let segment_base = segment_bases(searcher)[addr.segment_ord as usize];
        Ok(Hit {
            id,
            score,
            title: text(self.fields.title),
            url: text(self.fields.url),
            headings: text(self.fields.headings),
            text: text(self.fields.text),
            doc_id: opt_text(self.fields.doc_id),
            start_char: num(self.fields.start_char),
            end_char: num(self.fields.end_char),
            meta: opt_text(self.fields.meta),
            ordinal: Some(segment_base + u64::from(addr.doc_id)),
        })
    }
}

/// The ordinal of each segment's first document: the documents of the segments before it.
fn segment_bases(searcher: &Searcher) -> Vec<u64> {
    searcher
        .segment_readers()
        .iter()
        .scan(0u64, |base, segment| {
            let first = *base;
            *base += u64::from(segment.max_doc());
            Some(first)
        })
        .collect()
}

impl Retriever for TantivyRetriever {
    fn search_with(&self, query: &WeightedQuery, options: &SearchOptions) -> Result<Vec<Hit>> {
        let searcher = self.searcher();
        let bm25 = options.bm25.unwrap_or(self.manifest.bm25);
        let weights = options.weights.unwrap_or(self.manifest.weights);
        let top = self.score(
            &searcher,
            query,
            options.k,
            bm25,
            weights,
            options.evaluation,
        )?;
        let bases = segment_bases(&searcher);
        top.into_iter()
            .map(|(score, addr, id)| {
                if options.with_fields {
                    self.load_hit(&searcher, addr, id, score)
                } else {
                    let ordinal = bases[addr.segment_ord as usize] + u64::from(addr.doc_id);
                    Ok(Hit::id_only(id, score, Some(ordinal)))
                }
            })
            .collect()
    }

    fn passage(&self, id: &str) -> Result<Option<Hit>> {
        let searcher = self.searcher();
        let term = Term::from_field_text(self.fields.id, id);
        for (ord, seg) in searcher.segment_readers().iter().enumerate() {
            let inv = seg
                .inverted_index(self.fields.id)
                .map_err(tantivy_err(&self.dir))?;
            if let Some(p) = inv
                .read_postings(&term, IndexRecordOption::Basic)
                .map_err(super::io_err(&self.dir))?
            {
                use tantivy::{DocSet, TERMINATED};
                let mut p = p;
                let mut doc = p.doc();
                while doc != TERMINATED {
                    if !seg.is_deleted(doc) {
                        return self
                            .load_hit(
                                &searcher,
                                DocAddress::new(ord as u32, doc),
                                id.to_string(),
                                0.0,
                            )
                            .map(Some);
                    }
                    doc = p.advance();
                }
            }
        }
        Ok(None)
    }

    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        let mut ids = std::collections::BTreeSet::new();
        for seg in self.searcher().segment_readers() {
            let inv = seg
                .inverted_index(self.fields.id)
                .map_err(tantivy_err(&self.dir))?;
            let mut terms = inv
                .terms()
                .range()
                .ge(prefix.as_bytes())
                .into_stream()
                .map_err(super::io_err(&self.dir))?;
            let mut taken = 0;
            while taken < limit && terms.advance() {
                let Ok(id) = std::str::from_utf8(terms.key()) else {
                    continue;
                };
                if !id.starts_with(prefix) {
                    break;
                }
                ids.insert(id.to_string());
                taken += 1;
            }
        }
        Ok(ids.into_iter().take(limit).collect())
    }

    fn num_passages(&self) -> u64 {
        self.searcher().num_docs()
    }

    /// The segments' ids and sizes (deletions leave ordinals in place), hashed.
    fn layout(&self) -> Option<String> {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        for segment in self.searcher().segment_readers() {
            hash.update(segment.segment_id().uuid_string().as_bytes());
            hash.update(segment.max_doc().to_le_bytes());
        }
        Some(hex::encode(&hash.finalize()[..8]))
    }
}

/// The (segment, document) of `ordinal` in a layout of `segments`.
fn locate(segments: &[SegmentReader], ordinal: u64) -> Option<(usize, u32)> {
    let mut base = 0u64;
    for (seg_ord, segment) in segments.iter().enumerate() {
        let end = base + u64::from(segment.max_doc());
        if ordinal < end {
            return Some((seg_ord, (ordinal - base) as u32));
        }
        base = end;
    }
    None
}
