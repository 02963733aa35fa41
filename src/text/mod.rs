//! Text utilities shared by the pipeline stages, the API and the evaluator: sentence splitting,
//! citation markers, the parts of a passage its citing sentences draw on, a small lexical analyzer (terms for sentence scoring), NLTK's Porter stemmer and the
//! English stopword list.

pub mod citations;
pub mod cited;
pub mod porter_nltk;
pub mod rouge_tokens;
pub mod sentences;
pub mod stopwords;
pub mod terms;

pub use citations::{parse_cited_sentence, CitedSentence};
pub use sentences::split_sentences;
