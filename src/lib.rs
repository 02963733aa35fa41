//! convrag: conversational, personalized retrieval-augmented generation.
//!
//! The library holds everything; `src/main.rs` is only the command line. Each area has its own
//! error enum and `Result` alias; the HTTP layer maps them to responses in one place
//! (`api::error`).

pub mod api;
pub mod batch;
pub mod collection;
pub mod config;
pub mod dense;
pub mod digest;
pub mod eval;
pub mod formats;
pub mod index;
pub mod llm;
pub mod mcp;
pub mod metrics;
pub mod pipeline;
pub mod progress;
pub mod rerank;
pub mod service;
pub mod store;
pub mod text;
pub mod tune;
pub mod web;

pub use config::Config;
pub use store::Store;
