//! Text utilities shared by the pipeline stages: sentence splitting, citation markers and a small
//! lexical analyzer (terms for sentence scoring).

pub mod citations;
pub mod sentences;
pub mod terms;

pub use citations::{parse_cited_sentence, CitedSentence};
pub use sentences::split_sentences;
