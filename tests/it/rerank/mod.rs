//! The ONNX reranking models, the embedding cache and `convrag rerank`.

mod cli;
mod cross_encoder;
mod model;
