//! convrag: conversational, personalized retrieval-augmented generation.
//!
//! The library holds everything; `src/main.rs` is only the command line. Each area has its own
//! error enum and `Result` alias; the HTTP layer maps them to responses in one place.

pub mod config;
pub mod rerank;

pub use config::Config;
