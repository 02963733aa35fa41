//! BM25 indexing and retrieval (tantivy), checksum manifests, against Anserini.

mod build;
pub(crate) mod cranfield;
mod manifests;
mod readers;
mod topk;
