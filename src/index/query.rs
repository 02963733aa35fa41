//! What a search asks: weighted query text, how many, and how the top k are found.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Bm25Params, FieldWeights, Language};

/// A query as weighted pieces of text: e.g. the rewritten utterance with weight 1 and the
/// selected PTKB statements with weight 0.3. Each piece is analyzed; a term's weight is the sum of
/// the weights of its occurrences.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WeightedQuery {
    pub parts: Vec<(String, f32)>,
}

impl WeightedQuery {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn text(text: &str) -> Self {
        Self::new().with(text, 1.0)
    }
    pub fn with(mut self, text: &str, weight: f32) -> Self {
        self.parts.push((text.to_string(), weight));
        self
    }
    /// Analyzed terms with their summed weights, in a stable order.
    pub fn terms(&self, language: Language) -> BTreeMap<String, f32> {
        let mut out = BTreeMap::new();
        for (text, w) in &self.parts {
            if *w == 0.0 {
                continue;
            }
            for t in language.terms(text) {
                *out.entry(t).or_insert(0.0) += *w;
            }
        }
        out
    }
}

impl From<&str> for WeightedQuery {
    fn from(s: &str) -> Self {
        Self::text(s)
    }
}

/// How the top k are found. Both give identical results (ids, scores, order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Evaluation {
    /// Document at a time with block-max MaxScore: skips documents whose score bound is below
    /// the k-th best score so far, with per-block bounds from the collection's impacts files
    /// (`impacts.rs`; tantivy's looser block maxima where a segment has none). Falls back to
    /// exhaustive for parameters the bounds do not cover (b outside 0..=1, negative k1, term
    /// weights that are not positive and finite). The default: BENCHMARKS.md, "Pruned top-k".
    #[default]
    Pruned,
    /// Term at a time over every posting of every query term: the reference.
    Exhaustive,
}

/// Per-call search settings; `None` means the collection's defaults from its manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    pub k: usize,
    /// Load title/url/text/headings (not needed to write a run file).
    pub with_fields: bool,
    pub bm25: Option<Bm25Params>,
    pub weights: Option<FieldWeights>,
    pub evaluation: Evaluation,
}

impl SearchOptions {
    pub fn top(k: usize) -> Self {
        Self {
            k,
            with_fields: true,
            bm25: None,
            weights: None,
            evaluation: Evaluation::default(),
        }
    }
}
