//! The search entry point: a collection's first stage, reranked exactly as a turn reranks.

use std::sync::Arc;
use std::time::Instant;

use super::{Result, TurnService, WithoutVectors};
use crate::dense::Retrieval;
use crate::index::WeightedQuery;
use crate::pipeline::turn::{
    candidate_depth, rerank_fused, RankedPassage, RetrievalFallback, SettingError, SettingField,
};
use crate::service::input::{self, InvalidInput};
use crate::service::rate::RateKind;

/// A search of one collection.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// Whose private collections the name may mean (`None`: shared collections only).
    pub user_id: Option<i64>,
    pub collection: String,
    pub query: String,
    /// Results returned.
    pub k: usize,
    /// First-stage candidates the model reranks (at least `k`).
    pub depth: usize,
    pub rerank: bool,
    pub retrieval: Retrieval,
}

impl SearchRequest {
    /// Most results one search returns, and most first-stage candidates it reranks.
    pub const MAX_K: usize = 1000;
    pub const MAX_DEPTH: usize = 1000;

    /// The search contract every adapter applies: a query with text and no NUL (named
    /// `query_field`, the adapter's name for it), `k` and `depth` within their bounds.
    pub fn check(&self, query_field: &str) -> std::result::Result<(), InvalidInput> {
        input::required_text(query_field, &self.query, usize::MAX)?;
        input::in_range("k", self.k, Self::MAX_K)?;
        if self.depth > Self::MAX_DEPTH {
            return Err(InvalidInput::new(
                "depth",
                format!("must be at most {}", Self::MAX_DEPTH),
            ));
        }
        Ok(())
    }
}

/// What a search found, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutput {
    pub passages: Vec<RankedPassage>,
    /// The first stage that ran.
    pub retrieval: Retrieval,
    /// Set when BM25 ran instead of the mode asked for.
    pub fallback: Option<RetrievalFallback>,
    pub retrieve_ms: f64,
    pub rerank_ms: Option<f64>,
}

impl TurnService {
    /// [`TurnService::search`] on behalf of `user_id`, within the user's rate of searches.
    pub async fn search_as(&self, user_id: i64, request: &SearchRequest) -> Result<SearchOutput> {
        self.admit(user_id, RateKind::Searches)?;
        self.search(request).await
    }

    /// The first stage for the query (BM25 meanwhile when dense or hybrid is asked of a
    /// collection whose vectors are not ready), reranked (when asked) exactly as a turn whose
    /// rewrite is the query and that selected no statement: same candidates, same model query,
    /// same fusion.
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchOutput> {
        let model = match (request.rerank, self.reranker()) {
            (false, _) => None,
            (true, Some(model)) => Some(Arc::clone(model)),
            (true, None) => return Err(SettingError::unavailable(
                SettingField::Rerank,
                "no reranking model is loaded (run scripts/fetch-models.sh, see CONVRAG_MODEL_DIR)",
            )
            .into()),
        };
        let target = self
            .retrieval_target(
                request.user_id,
                &request.collection,
                request.retrieval,
                WithoutVectors::Bm25,
            )
            .await?;
        let depth = match model {
            Some(_) => candidate_depth(target.retrieval, request.depth.max(request.k), true),
            None => request.k,
        };
        // The query embedded once for dense retrieval and reranking.
        let vectors = self.pipeline.query_vectors();
        let started = Instant::now();
        let candidates = self
            .pipeline
            .retrieve(
                &target,
                WeightedQuery::text(&request.query),
                depth,
                vectors.clone(),
            )
            .await?;
        let retrieve_ms = started.elapsed().as_secs_f64() * 1000.0;
        let (mut passages, rerank_ms) = match model {
            Some(model) if !candidates.is_empty() => {
                let started = Instant::now();
                let reranked = rerank_fused(
                    model,
                    request.query.clone(),
                    candidates,
                    Some(target.embedding_key()),
                    target.retrieval.recommended_fusion(),
                    vectors,
                )
                .await?;
                (reranked, Some(started.elapsed().as_secs_f64() * 1000.0))
            }
            _ => (candidates, None),
        };
        passages.truncate(request.k);
        Ok(SearchOutput {
            passages,
            retrieval: target.retrieval,
            fallback: target.fallback,
            retrieve_ms,
            rerank_ms,
        })
    }
}
