//! The integration tests, one binary (one link) with shared support modules.

mod batch_support;
mod common;
mod eval_common;
mod generate_support;
mod multinode_support;
mod support;

mod api;
mod batch;
mod dense;
mod eval;
mod formats;
mod index;
mod pipeline;
mod rerank;
mod server;
