//! Per-block impacts: what bounds a term's BM25 contribution in each block of 128 postings, for
//! any k1, b and average length, so pruned top-k ([`super::topk`]) can skip blocks on tight bounds.
//!
//! tantivy keeps per block only the (fieldnorm, tf) pair maximizing its own BM25 (k1 = 1.2,
//! b = 0.75); a bound for other parameters derived from it is loose. Like Lucene's competitive
//! impacts, we keep per block the Pareto front of (tf, fieldnorm id) pairs — no other posting of
//! the block has both a larger tf and a shorter length than every kept pair — so the block's best
//! `tf / (tf + k1 (1 − b + b · dl / avgdl))` is the best over the front, for every parameter set
//! (the factor grows with tf and shrinks with dl). Fronts longer than [`SLOTS`] are reduced by
//! merging neighbours into (larger tf, shorter length), which dominates both: still a bound.
//!
//! One file per segment, `impacts/<segment id>.impacts` beside the tantivy directory, written by
//! the indexer before the checksum manifest (so it is one of the collection's files) and
//! memory-mapped by the retriever. Only terms with at least two blocks get entries: a one-block
//! list costs one decode anyway. A missing or unreadable file only makes pruning use tantivy's
//! looser bounds; results never depend on it.
//!
//! Layout (little-endian): `MAGIC`, u32 field count, u32 0; per field u32 field id, u32 term
//! count, u64 offset of its term table, u64 offset of its block table; a term record is u64 term
//! ordinal, u32 first block, u32 block count and the term's whole-list front; a block record is
//! u32 last document and its front. A front is `SLOTS` u32 tf then `SLOTS` u8 fieldnorm ids
//! (unused slots have tf 0).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use memmap2::Mmap;
use rayon::prelude::*;
use tantivy::index::SegmentId;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, SegmentReader};

use super::{io_err, tantivy_err, Result};

pub const IMPACTS_DIR: &str = "impacts";
const MAGIC: &[u8; 8] = b"CVIMPCT1";
/// Pairs kept per front.
pub(crate) const SLOTS: usize = 4;
/// tantivy's postings block size.
const BLOCK: u32 = 128;
const FRONT_BYTES: usize = SLOTS * 5;
const TERM_BYTES: usize = 16 + FRONT_BYTES;
const BLOCK_BYTES: usize = 4 + FRONT_BYTES;
const FIELD_BYTES: usize = 24;

/// A Pareto front of (tf, fieldnorm id) pairs; tf 0 marks an unused slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Front {
    tf: [u32; SLOTS],
    fieldnorm: [u8; SLOTS],
}

impl Front {
    /// The front of `pairs` (any order), reduced to [`SLOTS`] pairs that still dominate them all.
    pub(crate) fn of(pairs: impl IntoIterator<Item = (u32, u8)>) -> Front {
        // Largest tf per fieldnorm id; then, by increasing length, keep a pair only when its tf
        // beats every shorter pair's.
        let mut best = [0u32; 256];
        for (tf, f) in pairs {
            best[f as usize] = best[f as usize].max(tf);
        }
        let mut front: Vec<(u32, u8)> = Vec::new();
        let mut top = 0u32;
        for (f, &tf) in best.iter().enumerate() {
            if tf > top {
                front.push((tf, f as u8));
                top = tf;
            }
        }
        // Merge the neighbours whose union loses least (the smallest tf step, then the
        // smallest length step), into (the larger tf, the shorter length).
        while front.len() > SLOTS {
            let i = (0..front.len() - 1)
                .min_by_key(|&i| {
                    let (a, b) = (front[i], front[i + 1]);
                    (b.0 - a.0, b.1 - a.1)
                })
                .expect("at least two pairs");
            front[i] = (front[i + 1].0, front[i].1);
            front.remove(i + 1);
        }
        let mut out = Front::default();
        for (k, (tf, f)) in front.into_iter().enumerate() {
            out.tf[k] = tf;
            out.fieldnorm[k] = f;
        }
        out
    }

    /// The largest `tf / (tf + norm[fieldnorm])` over the front (0 for an empty front).
    pub(crate) fn factor_bound(&self, norm_cache: &[f32; 256]) -> f64 {
        let mut best = 0f64;
        for k in 0..SLOTS {
            if self.tf[k] == 0 {
                break;
            }
            let tf = f64::from(self.tf[k]);
            let norm = f64::from(norm_cache[self.fieldnorm[k] as usize]);
            best = best.max(tf / (tf + norm));
        }
        best
    }

    fn write(&self, out: &mut Vec<u8>) {
        for tf in self.tf {
            out.extend_from_slice(&tf.to_le_bytes());
        }
        out.extend_from_slice(&self.fieldnorm);
    }

    fn read(bytes: &[u8]) -> Front {
        let mut f = Front::default();
        for k in 0..SLOTS {
            f.tf[k] = u32_at(bytes, 4 * k);
        }
        f.fieldnorm.copy_from_slice(&bytes[4 * SLOTS..FRONT_BYTES]);
        f
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The impacts file of one segment, as bytes.
pub(crate) fn build_segment(seg: &SegmentReader, fields: &[Field]) -> tantivy::Result<Vec<u8>> {
    let mut tables: Vec<(Field, Vec<u8>, Vec<u8>, u32)> = Vec::new();
    for &field in fields {
        let inv = seg.inverted_index(field)?;
        let norms = seg.get_fieldnorms_reader(field)?;
        let (mut terms, mut blocks, mut n_terms, mut n_blocks) =
            (Vec::new(), Vec::new(), 0u32, 0u32);
        let mut stream = inv.terms().stream()?;
        let mut pairs: Vec<(u32, u8)> = Vec::with_capacity(BLOCK as usize);
        while stream.advance() {
            let info = stream.value();
            if info.doc_freq <= BLOCK {
                continue;
            }
            let mut postings =
                inv.read_block_postings_from_terminfo(info, IndexRecordOption::WithFreqs)?;
            let first = n_blocks;
            let mut whole: Vec<(u32, u8)> = Vec::new();
            while postings.block_len() > 0 {
                pairs.clear();
                for (&doc, &tf) in postings.docs().iter().zip(postings.freqs()) {
                    pairs.push((tf, norms.fieldnorm_id(doc)));
                }
                let front = Front::of(pairs.iter().copied());
                blocks.extend_from_slice(&postings.docs()[postings.block_len() - 1].to_le_bytes());
                front.write(&mut blocks);
                for k in 0..SLOTS {
                    if front.tf[k] > 0 {
                        whole.push((front.tf[k], front.fieldnorm[k]));
                    }
                }
                n_blocks += 1;
                postings.advance();
            }
            terms.extend_from_slice(&stream.term_ord().to_le_bytes());
            terms.extend_from_slice(&first.to_le_bytes());
            terms.extend_from_slice(&(n_blocks - first).to_le_bytes());
            Front::of(whole).write(&mut terms);
            n_terms += 1;
        }
        tables.push((field, terms, blocks, n_terms));
    }
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(tables.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut offset = (16 + FIELD_BYTES * tables.len()) as u64;
    for (field, terms, blocks, n) in &tables {
        out.extend_from_slice(&field.field_id().to_le_bytes());
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        offset += terms.len() as u64;
        out.extend_from_slice(&offset.to_le_bytes());
        offset += blocks.len() as u64;
    }
    for (_, terms, blocks, _) in &tables {
        out.extend_from_slice(terms);
        out.extend_from_slice(blocks);
    }
    Ok(out)
}

/// One field's tables inside a mapped file.
#[derive(Debug, Clone, Copy)]
struct FieldTables {
    field: u32,
    terms: usize,
    term_table: usize,
    block_table: usize,
}

/// A segment's impacts, memory-mapped.
pub(crate) struct SegmentImpacts {
    map: Mmap,
    fields: Vec<FieldTables>,
}

impl std::fmt::Debug for SegmentImpacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentImpacts")
            .field("bytes", &self.map.len())
            .field("fields", &self.fields)
            .finish()
    }
}

/// A term's blocks inside a mapped file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TermImpacts<'a> {
    blocks: &'a [u8],
    /// Bound of the whole list.
    pub(crate) front: Front,
}

impl TermImpacts<'_> {
    pub(crate) fn len(&self) -> usize {
        self.blocks.len() / BLOCK_BYTES
    }

    pub(crate) fn last_doc(&self, block: usize) -> DocId {
        u32_at(self.blocks, block * BLOCK_BYTES)
    }

    pub(crate) fn front(&self, block: usize) -> Front {
        let at = block * BLOCK_BYTES + 4;
        Front::read(&self.blocks[at..at + FRONT_BYTES])
    }

    /// The block holding `doc` if it is in the list: the first whose last document is ≥ `doc`.
    pub(crate) fn block_of(&self, doc: DocId) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.last_doc(mid) < doc {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < self.len()).then_some(lo)
    }
}

impl SegmentImpacts {
    /// Maps and checks a file; `None` with a warning when it is not a complete impacts file.
    fn open(path: &Path) -> Option<SegmentImpacts> {
        let file = std::fs::File::open(path).ok()?;
        // SAFETY: impacts files are written once by an atomic rename and never modified in place.
        let map = unsafe { Mmap::map(&file) }.ok()?;
        match Self::parse(&map) {
            Some(fields) => Some(SegmentImpacts { map, fields }),
            None => {
                tracing::warn!(
                    "{}: not a complete impacts file; pruning uses looser bounds",
                    path.display()
                );
                None
            }
        }
    }

    fn parse(b: &[u8]) -> Option<Vec<FieldTables>> {
        if b.len() < 16 || &b[..8] != MAGIC {
            return None;
        }
        let n = u32_at(b, 8) as usize;
        let mut fields = Vec::with_capacity(n);
        for k in 0..n {
            let at = 16 + k * FIELD_BYTES;
            if b.len() < at + FIELD_BYTES {
                return None;
            }
            let t = FieldTables {
                field: u32_at(b, at),
                terms: u32_at(b, at + 4) as usize,
                term_table: usize::try_from(u64_at(b, at + 8)).ok()?,
                block_table: usize::try_from(u64_at(b, at + 16)).ok()?,
            };
            if t.term_table.checked_add(t.terms.checked_mul(TERM_BYTES)?)? != t.block_table
                || t.block_table > b.len()
            {
                return None;
            }
            fields.push(t);
        }
        // Every term's blocks must lie inside the file.
        for t in &fields {
            for i in 0..t.terms {
                let rec = t.term_table + i * TERM_BYTES;
                let end = (u32_at(b, rec + 8) as usize + u32_at(b, rec + 12) as usize)
                    .checked_mul(BLOCK_BYTES)?;
                if t.block_table.checked_add(end)? > b.len() {
                    return None;
                }
            }
        }
        Some(fields)
    }

    /// The impacts of the term with ordinal `term_ord` in `field`, if it has two blocks or more.
    pub(crate) fn term(&self, field: Field, term_ord: u64) -> Option<TermImpacts<'_>> {
        let t = self.fields.iter().find(|t| t.field == field.field_id())?;
        let b = &self.map[..];
        let ord_of = |i: usize| u64_at(b, t.term_table + i * TERM_BYTES);
        let (mut lo, mut hi) = (0, t.terms);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if ord_of(mid) < term_ord {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == t.terms || ord_of(lo) != term_ord {
            return None;
        }
        let rec = t.term_table + lo * TERM_BYTES;
        let first = u32_at(b, rec + 8) as usize;
        let count = u32_at(b, rec + 12) as usize;
        let start = t.block_table + first * BLOCK_BYTES;
        Some(TermImpacts {
            blocks: &b[start..start + count * BLOCK_BYTES],
            front: Front::read(&b[rec + 16..rec + 16 + FRONT_BYTES]),
        })
    }
}

fn file_name(id: SegmentId) -> String {
    format!("{}.impacts", id.uuid_string())
}

/// Impacts files by segment, loaded on first use.
#[derive(Debug)]
pub(crate) struct ImpactStore {
    dir: PathBuf,
    loaded: Mutex<HashMap<SegmentId, Option<Arc<SegmentImpacts>>>>,
}

impl ImpactStore {
    /// The store of the collection in `collection_dir`.
    pub(crate) fn new(collection_dir: &Path) -> Self {
        ImpactStore {
            dir: collection_dir.join(IMPACTS_DIR),
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// The impacts of each of the searcher's segments, under one lock. Files of segments no
    /// longer searched are unmapped, so a merge's disk space is freed while a running
    /// `convrag index` changes a served collection. A missing file is looked for again next
    /// time: the indexer writes them after its last commit, while the new segments are served.
    pub(crate) fn for_segments(&self, live: &[SegmentId]) -> Vec<Option<Arc<SegmentImpacts>>> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if loaded.keys().any(|id| !live.contains(id)) {
            loaded.retain(|id, _| live.contains(id));
        }
        live.iter()
            .map(|&id| {
                if let Some(found) = loaded.get(&id) {
                    return found.clone();
                }
                let path = self.dir.join(file_name(id));
                if !path.exists() {
                    return None;
                }
                // A file that is there but unreadable is remembered, so it is warned about once.
                let found = SegmentImpacts::open(&path).map(Arc::new);
                loaded.insert(id, found.clone());
                found
            })
            .collect()
    }
}

/// Writes the impacts file of every segment of the index in `collection_dir` that lacks one
/// (both cores), and removes those of segments no longer in the index. The indexer calls it
/// after its last commit, before the checksum manifest.
pub fn write_impacts(collection_dir: &Path, index: &tantivy::Index) -> Result<()> {
    let dir = collection_dir.join(IMPACTS_DIR);
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let tdir = collection_dir.join(super::TANTIVY_DIR);
    let reader = index.reader().map_err(tantivy_err(&tdir))?;
    let searcher = reader.searcher();
    let fields = super::Fields::from_schema(&index.schema())?;
    let scored = [fields.body, fields.title, fields.headings];
    let segments = searcher.segment_readers();
    let wanted: HashSet<String> = segments.iter().map(|s| file_name(s.segment_id())).collect();
    segments
        .par_iter()
        .filter(|s| !dir.join(file_name(s.segment_id())).exists())
        .try_for_each(|seg| -> Result<()> {
            let bytes = build_segment(seg, &scored).map_err(tantivy_err(&tdir))?;
            crate::formats::atomic::write_atomic(&dir.join(file_name(seg.segment_id())), &bytes)?;
            Ok(())
        })?;
    for entry in std::fs::read_dir(&dir).map_err(io_err(&dir))? {
        let entry = entry.map_err(io_err(&dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !wanted.contains(&name) {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(io_err(&path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn factor(tf: u32, f: u8, norms: &[f32; 256]) -> f64 {
        let tf = f64::from(tf);
        tf / (tf + f64::from(norms[f as usize]))
    }

    fn norms(k1: f32, b: f32, avgdl: f32) -> [f32; 256] {
        let mut n = [0f32; 256];
        for (i, c) in n.iter_mut().enumerate() {
            let dl = tantivy::fieldnorm::FieldNormReader::id_to_fieldnorm(i as u8) as f32;
            *c = k1 * (1.0 - b + b * dl / avgdl);
        }
        n
    }

    #[test]
    fn the_front_bounds_every_pair_for_any_parameters_and_is_tight_when_small() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..3000 {
            let len = 1 + next(128) as usize;
            let pairs: Vec<(u32, u8)> = (0..len)
                .map(|_| {
                    (
                        1 + next(if round % 3 == 0 { 40 } else { 4 }) as u32,
                        next(200) as u8,
                    )
                })
                .collect();
            let front = Front::of(pairs.iter().copied());
            for (k1, b, avgdl) in [
                (0.9, 0.4, 60.0),
                (1.2, 0.75, 20.0),
                (2.0, 1.0, 300.0),
                (0.5, 0.0, 10.0),
            ] {
                let n = norms(k1, b, avgdl);
                let max = pairs
                    .iter()
                    .map(|&(tf, f)| factor(tf, f, &n))
                    .fold(0.0, f64::max);
                let bound = front.factor_bound(&n);
                assert!(bound >= max, "{bound} < {max} for {pairs:?}");
                // With at most SLOTS pairs on the true front, the bound is exact.
                let distinct: HashSet<(u32, u8)> = pairs.iter().copied().collect();
                if distinct.len() <= SLOTS {
                    assert!((bound - max).abs() < 1e-12, "{bound} vs {max}");
                }
            }
        }
    }

    #[test]
    fn a_front_keeps_only_undominated_pairs() {
        let f = Front::of([(1, 10), (3, 50), (2, 60), (1, 5), (3, 40)]);
        assert_eq!(f.tf, [1, 3, 0, 0]);
        assert_eq!(f.fieldnorm, [5, 40, 0, 0]);
        assert_eq!(Front::of([]).factor_bound(&[1.0; 256]), 0.0);
    }

    #[test]
    fn files_are_mapped_once_and_unmapped_when_their_segment_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(IMPACTS_DIR)).unwrap();
        let empty = [MAGIC.as_slice(), &0u32.to_le_bytes(), &0u32.to_le_bytes()].concat();
        let (a, b) = (SegmentId::generate_random(), SegmentId::generate_random());
        for id in [a, b] {
            std::fs::write(dir.path().join(IMPACTS_DIR).join(file_name(id)), &empty).unwrap();
        }
        let store = ImpactStore::new(dir.path());
        let found = store.for_segments(&[a, b, SegmentId::generate_random()]);
        assert!(found[0].is_some() && found[1].is_some());
        assert!(found[2].is_none());
        assert!(store.for_segments(&[a])[0].is_some());
        let loaded: Vec<SegmentId> = store.loaded.lock().unwrap().keys().copied().collect();
        assert_eq!(loaded, vec![a]);
    }

    #[test]
    fn truncated_or_foreign_files_are_refused() {
        assert!(SegmentImpacts::parse(b"not an impacts file").is_none());
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        // A field directory entry pointing past the end.
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&5u32.to_le_bytes());
        b.extend_from_slice(&40u64.to_le_bytes());
        b.extend_from_slice(&(40 + 5 * TERM_BYTES as u64).to_le_bytes());
        assert!(SegmentImpacts::parse(&b).is_none());
    }
}
