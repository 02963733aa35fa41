//! [`QueryVectors`]: a turn's query texts embedded once by the bi-encoder, then reused by every
//! stage that needs them (PTKB ranking, dense retrieval, reranking).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{Reranker, Result};

/// The embeddings of one turn's (or search's) query texts: each distinct text goes through the
/// model once, whichever stage asks first.
pub struct QueryVectors {
    model: Arc<dyn Reranker>,
    model_id: String,
    memo: Mutex<HashMap<String, Arc<[f32]>>>,
}

impl QueryVectors {
    /// Over `model` (texts embedded only when it is a bi-encoder: [`Self::get`] says `None`
    /// otherwise).
    pub fn new(model: Arc<dyn Reranker>) -> Self {
        Self {
            model_id: model.model_id(),
            model,
            memo: Mutex::new(HashMap::new()),
        }
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Whether these are `model`'s vectors (another model's query vector would mean nothing to
    /// it).
    pub fn encodes_for(&self, model: &dyn Reranker) -> bool {
        model.model_id() == self.model_id
    }

    /// The vectors of `texts`, in order; those not seen yet encoded in one call. Empty when the
    /// model has no query vectors (a cross-encoder).
    pub fn get(&self, texts: &[&str]) -> Result<Vec<Arc<[f32]>>> {
        let missing: Vec<&str> = {
            let memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
            let mut missing: Vec<&str> = texts
                .iter()
                .copied()
                .filter(|t| !memo.contains_key(*t))
                .collect();
            missing.sort_unstable();
            missing.dedup();
            missing
        };
        if !missing.is_empty() {
            let Some(encoded) = self.model.embed_queries(&missing)? else {
                return Ok(Vec::new());
            };
            let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
            for (text, vector) in missing.iter().zip(encoded) {
                memo.insert((*text).to_string(), Arc::from(vector));
            }
        }
        let memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        Ok(texts.iter().filter_map(|t| memo.get(*t).cloned()).collect())
    }

    /// The vector of a weighted query: each part's vector times its weight, summed (parts of
    /// weight 0 left out). `None` without query vectors.
    pub fn weighted(&self, parts: &[(String, f32)]) -> Result<Option<Vec<f32>>> {
        let parts: Vec<&(String, f32)> = parts.iter().filter(|(_, w)| *w != 0.0).collect();
        let texts: Vec<&str> = parts.iter().map(|(t, _)| t.as_str()).collect();
        let vectors = self.get(&texts)?;
        if vectors.len() != parts.len() || vectors.is_empty() {
            return Ok(None);
        }
        let mut sum = vec![0.0f32; vectors[0].len()];
        for ((_, weight), vector) in parts.iter().zip(&vectors) {
            for (s, x) in sum.iter_mut().zip(vector.iter()) {
                *s += weight * x;
            }
        }
        Ok(Some(sum))
    }
}
