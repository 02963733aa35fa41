//! The ONNX reranking models, the embedding cache, `convrag rerank`, dense and hybrid retrieval.

mod cli;
mod cross_encoder;
mod dense;
mod embed;
mod model;
