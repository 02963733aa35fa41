//! The configured default model, opened once per process: it reranks, ranks PTKB statements and,
//! with the embedding cache its passage vectors are in ([`crate::dense::load_default_search`]),
//! serves dense and hybrid retrieval.

use super::{OnnxReranker, Reranker};

/// The configured default reranking model, when installed. A missing model is normal (BM25
/// only); a broken one is logged and the caller runs without it.
pub fn open_default(config: &crate::Config) -> Option<OnnxReranker> {
    let dir = config.default_model_dir();
    if !dir.join("manifest.json").exists() {
        tracing::info!(dir = %dir.display(), "no reranking model installed (scripts/fetch-models.sh installs one); searches are BM25 only");
        return None;
    }
    match super::open_model(config, Some(&dir)) {
        Ok(model) => {
            tracing::info!(model = %model.model_id(), "reranking model loaded");
            Some(model)
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot load the reranking model; searches are BM25 only");
            None
        }
    }
}
