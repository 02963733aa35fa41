//! Top-k BM25 by block-max MaxScore, document at a time, over one segment.
//!
//! It returns exactly what exhaustive scoring returns: the same documents with the same f32
//! scores (each contribution is computed by the same expression, [`term_score`], and a document's
//! contributions are summed in the same order) and the same ties (score descending, then id
//! ascending; inside a segment the id column's ordinals follow the ids' byte order). A document is
//! skipped only when an upper bound of its score is *strictly* below the k-th best score so far,
//! so documents tying the k-th score are still scored and ranked by id.
//!
//! MaxScore: terms are sorted by their upper bound; the longest prefix whose bounds sum below
//! the threshold is "non-essential" (a document matching only those cannot enter the top k), so
//! candidates come from the other, essential, terms and non-essential postings are only sought at
//! candidates. Block-max: for the window up to the nearest end of an essential term's current
//! block of 128 postings, the sum of the block bounds decides whether the whole window is skipped.
//!
//! Bounds. A term's contribution `w · tf / (tf + norm)` is below `w`. Per block, tantivy stores only
//! the (fieldnorm, tf) pair that maximizes *its own* BM25 (k1 = 1.2, b = 0.75, with the segment's
//! average length avg′ when the segment was written): neither the largest tf nor the shortest
//! length. That pair still bounds the block for any k1, b: with g* its tantivy tf factor and
//! R = 1/g* − 1, every posting (dl, tf) of the block satisfies
//!   1.2 · (0.25 + 0.75 · dl / avg′) / tf ≥ R,
//! and our factor tf / (tf + k1 (1 − b + b · dl / avgdl)) = 1 / (1 + k1 ((1 − b)/tf + (b/avgdl) · dl/tf))
//! is largest where the linear form in (1/tf, dl/tf) is smallest on that half-plane: at a vertex,
//! which gives 1 / (1 + k1 · R · min((1 − b)/0.3, b · avg′ / (0.9 · avgdl))). tantivy exposes g*
//! (scaled by a weight we choose) through `BlockSegmentPostings::block_max_score`; for the last,
//! partial block it computes the same maximum from the decoded postings. Slack covers f32 rounding.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::path::Path;

use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::BlockSegmentPostings;
use tantivy::query::Bm25Weight;
use tantivy::schema::IndexRecordOption;
use tantivy::{DocId, SegmentReader, TERMINATED};

use super::bm25::{term_score, FieldPlan};
use super::impacts::{SegmentImpacts, TermImpacts};
use super::{io_err, tantivy_err, Bm25Params, IndexError, Result};

/// tantivy's fixed BM25 parameters, under which it chose each block's stored (fieldnorm, tf) pair.
const TANTIVY_K1: f64 = 1.2;
const TANTIVY_B: f64 = 0.75;

/// Whether the bounds above hold: they assume 0 ≤ b ≤ 1, k1 ≥ 0 and positive finite term
/// weights (a query whose weighted parts cancel or subtract is scored exhaustively).
pub(crate) fn prunable(bm25: Bm25Params, plans: &[FieldPlan]) -> bool {
    (0.0..=1.0).contains(&bm25.b)
        && bm25.k1 >= 0.0
        && bm25.k1.is_finite()
        && plans
            .iter()
            .flat_map(|p| &p.term_weights)
            .all(|(_, w)| w.is_finite() && *w > 0.0)
}

/// Upper bound of `tf / (tf + k1 (1 − b + b · dl / avgdl))` over a block whose tantivy tf factor
/// maximum is `g_star` (see the module comment); `coef` is `min((1 − b)/0.3, b·avg′/(0.9·avgdl))`.
pub(crate) fn block_factor_bound(g_star: f64, coef: f64, k1: f64) -> f64 {
    // g* went through f32 arithmetic, and tantivy compared f32 factors to pick the pair: widen it.
    let g_hi = g_star * (1.0 + 1e-5) + 1e-6;
    if g_star.is_nan() || g_star <= 0.0 || g_hi >= 1.0 {
        // No usable block information (e.g. no term frequencies recorded): the factor is < 1.
        return 1.0;
    }
    let r = 1.0 / g_hi - 1.0;
    1.0 / (1.0 + k1 * r * coef)
}

/// The coefficient of [`block_factor_bound`] for a field.
pub(crate) fn block_coef(bm25: Bm25Params, tantivy_avg: f64, avgdl: f64) -> f64 {
    let b = bm25.b as f64;
    let by_tf = (1.0 - b) / (TANTIVY_K1 * (1.0 - TANTIVY_B));
    let by_len = b * tantivy_avg / (TANTIVY_K1 * TANTIVY_B * avgdl);
    by_tf.min(by_len).max(0.0)
}

/// A term's postings in one segment, positioned on a document.
struct Cursor<'a> {
    postings: BlockSegmentPostings,
    fieldnorms: FieldNormReader,
    norm_cache: &'a [f32; 256],
    weight: f32,
    /// Position in the exhaustive scorer's summation order.
    canon: usize,
    /// Upper bound of the contribution anywhere in the list.
    term_bound: f64,
    /// Weight handed to tantivy to read its block maxima, and its value at tf factor 1.
    probe: Bm25Weight,
    probe_unit: f64,
    coef: f64,
    k1: f64,
    idx: usize,
    doc: DocId,
    /// (last document of the block, bound of that block), memoized.
    block_bound: (DocId, f64),
    /// The term's per-block fronts, when the segment has an impacts file with it.
    impacts: Option<TermImpacts<'a>>,
}

impl Cursor<'_> {
    fn current(&self) -> DocId {
        match self.postings.docs().get(self.idx) {
            Some(d) => *d,
            None => TERMINATED,
        }
    }

    fn advance(&mut self) {
        self.idx += 1;
        if self.idx >= self.postings.block_len() {
            self.postings.advance();
            self.idx = 0;
        }
        self.doc = self.current();
    }

    /// Moves to the first document ≥ `target` (never backwards).
    fn seek(&mut self, target: DocId) {
        if self.doc >= target {
            return;
        }
        if self.block_last() < target {
            self.postings.seek(target);
            self.idx = 0;
        }
        let docs = self.postings.docs();
        self.idx += docs[self.idx.min(docs.len())..].partition_point(|d| *d < target);
        self.doc = self.current();
    }

    /// Last document of the current block (the cursor is not exhausted).
    fn block_last(&self) -> DocId {
        self.postings.docs().last().copied().unwrap_or(TERMINATED)
    }

    fn contribution(&self) -> f32 {
        let tf = self.postings.freq(self.idx) as f32;
        let norm = self.norm_cache[self.fieldnorms.fieldnorm_id(self.doc) as usize];
        term_score(self.weight, tf, norm)
    }

    /// Upper bound of the contribution for the documents of the current block.
    fn current_block_bound(&mut self) -> f64 {
        let last = self.block_last();
        if self.block_bound.0 != last {
            if let Some(imp) = &self.impacts {
                if let Some(i) = imp.block_of(last).filter(|&i| imp.last_doc(i) == last) {
                    let factor = imp.front(i).factor_bound(self.norm_cache);
                    self.block_bound = (last, f64::from(self.weight) * factor);
                    return self.block_bound.1;
                }
            }
            let scaled = self.postings.block_max_score(&self.fieldnorms, &self.probe) as f64;
            let factor = block_factor_bound(scaled / self.probe_unit, self.coef, self.k1);
            // Both bound the block: the weight times its factor bound, and the whole list's bound.
            self.block_bound = (last, (f64::from(self.weight) * factor).min(self.term_bound));
        }
        self.block_bound.1
    }
}

/// A top-k entry; "greater" means worse, so a max-heap's top is the entry to evict.
#[derive(Debug, Clone, Copy)]
struct Entry {
    score: f32,
    /// Id ordinal in the segment's id column (`None` sorts as the empty id).
    key: Option<u64>,
    doc: DocId,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.key.cmp(&other.key))
    }
}

/// One segment to search: its reader, its position in the searcher, its impacts file if any.
pub(crate) struct SegmentToSearch<'a> {
    pub(crate) reader: &'a SegmentReader,
    pub(crate) ord: u32,
    pub(crate) impacts: Option<&'a SegmentImpacts>,
}

/// The top `k` live documents of one segment as (score, segment ordinal, doc), leaving out
/// documents scoring below `floor` (the k-th best score of the segments searched before).
pub(crate) fn segment_top_k(
    segment: SegmentToSearch<'_>,
    plans: &[FieldPlan],
    bm25: Bm25Params,
    k: usize,
    floor: Option<f32>,
    dir: &Path,
) -> Result<Vec<(f32, u32, u32)>> {
    let (seg, seg_ord) = (segment.reader, segment.ord);
    let mut cursors = open_cursors(seg, plans, bm25, segment.impacts, dir)?;
    let n = cursors.len();
    if n == 0 || k == 0 {
        return Ok(Vec::new());
    }
    let ids = seg
        .fast_fields()
        .str("id")
        .map_err(tantivy_err(dir))?
        .ok_or_else(|| IndexError::Invalid("index has no id column".into()))?;
    let alive = seg.alive_bitset();

    cursors.sort_by(|a, b| a.term_bound.total_cmp(&b.term_bound));
    // prefix[i]: bound of the terms 0..=i together.
    let prefix: Vec<f64> = cursors
        .iter()
        .scan(0.0, |s, c| {
            *s += c.term_bound;
            Some(*s)
        })
        .collect();
    // Relative slack above the f32 rounding of a sum of n contributions.
    let eps = 1e-5 + 4.0 * n as f64 * f32::EPSILON as f64;
    let below = |bound: f64, theta: f64| bound * (1.0 + eps) < theta;

    let mut heap: BinaryHeap<Entry> = BinaryHeap::with_capacity(k + 1);
    let mut theta = floor.map_or(f64::NEG_INFINITY, f64::from);
    // cursors[..essential] are non-essential.
    let mut essential = 0;
    while essential < n && below(prefix[essential], theta) {
        essential += 1;
    }
    let mut contrib = vec![0f32; n];
    let mut matched = vec![false; n];
    let mut checked_window: (DocId, u64) = (TERMINATED, 0);

    while essential < n {
        let mut doc = TERMINATED;
        let mut window_end = TERMINATED;
        for c in &cursors[essential..] {
            if c.doc != TERMINATED {
                doc = doc.min(c.doc);
                window_end = window_end.min(c.block_last());
            }
        }
        if doc == TERMINATED {
            break;
        }
        let rest = if essential > 0 {
            prefix[essential - 1]
        } else {
            0.0
        };
        // A window is checked again only when it or the threshold changed.
        if theta > f64::NEG_INFINITY && checked_window != (window_end, theta.to_bits()) {
            checked_window = (window_end, theta.to_bits());
            let window_bound: f64 = cursors[essential..]
                .iter_mut()
                .filter(|c| c.doc != TERMINATED)
                .map(|c| c.current_block_bound())
                .sum();
            if below(window_bound + rest, theta) {
                for c in &mut cursors[essential..] {
                    if c.doc <= window_end {
                        c.seek(window_end + 1);
                    }
                }
                continue;
            }
        }

        let mut partial = 0.0f64;
        for c in &cursors[essential..] {
            if c.doc == doc {
                let v = c.contribution();
                contrib[c.canon] = v;
                matched[c.canon] = true;
                partial += f64::from(v);
            }
        }
        let mut complete = true;
        for j in (0..essential).rev() {
            if below(partial + prefix[j], theta) {
                complete = false;
                break;
            }
            let c = &mut cursors[j];
            c.seek(doc);
            if c.doc == doc {
                let v = c.contribution();
                contrib[c.canon] = v;
                matched[c.canon] = true;
                partial += f64::from(v);
            }
        }
        if complete && alive.is_none_or(|a| a.is_alive(doc)) {
            // Summed in the exhaustive scorer's order, so the f32 result is the same.
            let mut score = 0f32;
            for (v, m) in contrib.iter().zip(&matched) {
                if *m {
                    score += *v;
                }
            }
            if f64::from(score) >= theta {
                let entry = Entry {
                    score,
                    key: ids.ords().first(doc),
                    doc,
                };
                let enters = heap.len() < k || heap.peek().is_some_and(|worst| entry < *worst);
                if enters {
                    heap.push(entry);
                    if heap.len() > k {
                        heap.pop();
                    }
                    if heap.len() == k {
                        let kth = f64::from(heap.peek().expect("k > 0").score);
                        theta = theta.max(kth);
                        while essential < n && below(prefix[essential], theta) {
                            essential += 1;
                        }
                    }
                }
            }
        }
        matched.iter_mut().for_each(|m| *m = false);
        for c in &mut cursors[essential..] {
            if c.doc == doc {
                c.advance();
            }
        }
    }
    Ok(heap
        .into_iter()
        .map(|e| (e.score, seg_ord, e.doc))
        .collect())
}

/// One cursor per (field, term) with postings in this segment, numbered in the exhaustive
/// scorer's order (fields in plan order, then terms in plan order).
fn open_cursors<'a>(
    seg: &SegmentReader,
    plans: &'a [FieldPlan],
    bm25: Bm25Params,
    impacts: Option<&'a SegmentImpacts>,
    dir: &Path,
) -> Result<Vec<Cursor<'a>>> {
    let mut cursors = Vec::new();
    for plan in plans {
        let inv = seg.inverted_index(plan.field).map_err(tantivy_err(dir))?;
        let fieldnorms = seg
            .get_fieldnorms_reader(plan.field)
            .map_err(tantivy_err(dir))?;
        // The average length tantivy used when it wrote this segment's block maxima.
        let tantivy_avg = inv.total_num_tokens() as f32 / seg.max_doc().max(1) as f32;
        let probe = Bm25Weight::for_one_term_without_explain(1, 2, tantivy_avg);
        // tf factor of u32::MAX is exactly 1 in f32, so this is the probe's weight.
        let probe_unit = probe.score(0, u32::MAX) as f64;
        let coef = block_coef(bm25, tantivy_avg as f64, plan.avgdl as f64);
        for (term, w) in &plan.term_weights {
            let Some(postings) = inv
                .read_block_postings(term, IndexRecordOption::WithFreqs)
                .map_err(io_err(dir))?
            else {
                continue;
            };
            let term_impacts = match impacts {
                Some(imp) => inv
                    .terms()
                    .term_ord(term.serialized_value_bytes())
                    .map_err(io_err(dir))?
                    .and_then(|ord| imp.term(plan.field, ord)),
                None => None,
            };
            // The whole list's front bounds every contribution; without it, the weight does.
            let term_bound = match &term_impacts {
                Some(t) => f64::from(*w) * t.front.factor_bound(&plan.norm_cache),
                None => f64::from(*w),
            };
            let mut cursor = Cursor {
                postings,
                fieldnorms: fieldnorms.clone(),
                norm_cache: &plan.norm_cache,
                weight: *w,
                canon: cursors.len(),
                term_bound,
                probe: probe.clone(),
                probe_unit,
                coef,
                k1: bm25.k1 as f64,
                idx: 0,
                doc: TERMINATED,
                block_bound: (TERMINATED, 0.0),
                impacts: term_impacts,
            };
            cursor.doc = cursor.current();
            cursors.push(cursor);
        }
    }
    Ok(cursors)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic xorshift, to draw blocks without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// For random blocks, the bound derived from tantivy's argmax pair is at least the true
    /// maximum of our factor, for several k1/b and averages on both sides of tantivy's.
    #[test]
    fn block_bound_is_at_least_the_block_maximum() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut tight = 0usize;
        let mut total = 0usize;
        for _ in 0..4000 {
            let tantivy_avg = 5.0 + rng.below(200) as f32;
            let avgdl = tantivy_avg * (0.5 + rng.below(100) as f32 / 100.0);
            let bm25 = Bm25Params {
                k1: [0.9f32, 1.2, 0.0, 2.0][rng.below(4) as usize],
                b: [0.4f32, 0.75, 0.0, 1.0][rng.below(4) as usize],
            };
            let len = 1 + rng.below(128) as usize;
            let block: Vec<(u8, u32)> = (0..len)
                .map(|_| {
                    let f = 1 + rng.below(120) as u8;
                    let dl = FieldNormReader::id_to_fieldnorm(f);
                    let tf = 1 + rng.below(u64::from(dl.clamp(1, 12))) as u32;
                    (f, tf)
                })
                .collect();
            let probe = Bm25Weight::for_one_term_without_explain(1, 2, tantivy_avg);
            let unit = probe.score(0, u32::MAX) as f64;
            let scaled = block
                .iter()
                .map(|(f, tf)| probe.score(*f, *tf))
                .fold(0f32, f32::max) as f64;
            let ours = |f: u8, tf: u32| {
                let dl = FieldNormReader::id_to_fieldnorm(f) as f32;
                let norm = bm25.k1 * (1.0 - bm25.b + bm25.b * dl / avgdl);
                term_score(1.0, tf as f32, norm) as f64
            };
            let max = block
                .iter()
                .map(|(f, tf)| ours(*f, *tf))
                .fold(0.0, f64::max);
            let coef = block_coef(bm25, tantivy_avg as f64, avgdl as f64);
            let bound = block_factor_bound(scaled / unit, coef, bm25.k1 as f64);
            assert!(
                bound >= max,
                "bound {bound} < max {max} for {block:?} {bm25:?} avg {tantivy_avg}/{avgdl}"
            );
            if bm25.k1 > 0.0 && bm25.b > 0.0 && bm25.b < 1.0 {
                total += 1;
                if bound < 0.999 {
                    tight += 1;
                }
            }
        }
        // With 0 < b < 1 and k1 > 0 the bound must also be useful, not just 1.
        assert!(
            tight * 10 > total * 9,
            "only {tight}/{total} bounds below 1"
        );
    }

    #[test]
    fn entries_order_by_score_then_id() {
        let e = |score, key| Entry { score, key, doc: 0 };
        // "Greater" is worse.
        assert!(e(1.0, Some(5)) > e(2.0, Some(9)));
        assert!(e(1.0, Some(5)) > e(1.0, Some(4)));
        assert!(e(1.0, None) < e(1.0, Some(0)));
        let mut heap: BinaryHeap<Entry> = [e(3.0, Some(1)), e(1.0, Some(2)), e(1.0, Some(7))]
            .into_iter()
            .collect();
        assert_eq!(heap.pop().map(|x| x.key), Some(Some(7)));
    }
}
