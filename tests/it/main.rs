//! The integration tests, one binary (one link) with shared support modules.

mod batch_support;
mod common;
mod eval_common;
mod generate_support;

mod api_collections;
mod api_errors;
mod api_foundation;
mod api_openai;
mod api_turns;
mod batch_golden;
mod batch_real_data;
mod batch_resume;
mod embedded_cluster;
mod eval_answers;
mod eval_ptkb;
mod eval_ranking;
mod eval_rouge;
mod formats_golden;
mod formats_malformed;
mod formats_real_data;
mod formats_words;
mod generate_fallback;
mod generate_llm_server;
mod index_build;
mod index_cranfield;
mod index_readers;
mod index_topk;
mod mcp_http;
mod pipeline_ptkb_ikat;
mod pipeline_rewrite_rouge;
mod rerank_cli;
mod rerank_cross_encoder;
mod rerank_embed;
mod rerank_model;
mod ui_assets;
