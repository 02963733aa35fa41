//! The conversational turn pipeline. Each stage is a trait with real implementations; this
//! module holds the types stages share.

pub mod generate;

use serde::{Deserialize, Serialize};

/// A retrieved (and possibly reranked) passage as the later stages see it, in final rank order.
/// Minimal on purpose: retrieval/reranking may add fields (scores per stage, collection, ...);
/// generation only reads `text` (and `title` for the prompt) and `score` (as a prior).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Passage {
    /// Collection passage id (e.g. `clueweb22-en0000-00-00000:3`, `msmarco_v2.1_doc_..._0#3_1`).
    pub id: String,
    pub title: Option<String>,
    pub url: Option<String>,
    pub text: String,
    /// Final ranking score (higher is better); only its order matters to generation.
    pub score: f64,
}
