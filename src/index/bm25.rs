//! What exhaustive and pruned BM25 scoring share: a query's per-field plan and one term's
//! contribution to a document's score.

use tantivy::Term;

/// One scored field of a query: its average length, the length normalization per norm byte,
/// and the weight of each query term present in the collection.
pub(crate) struct FieldPlan {
    pub(crate) field: tantivy::schema::Field,
    pub(crate) avgdl: f32,
    pub(crate) norm_cache: [f32; 256],
    pub(crate) term_weights: Vec<(Term, f32)>,
}

/// One term's contribution to a document's score; exhaustive and pruned scoring both call this,
/// so their f32 results are bit-identical.
#[inline]
pub(crate) fn term_score(weight: f32, tf: f32, norm: f32) -> f32 {
    weight * tf / (tf + norm)
}
