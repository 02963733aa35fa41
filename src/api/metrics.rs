//! `GET /metrics`: the Prometheus text exposition, for the administrator on the main address
//! (and for anyone on `--metrics-bind`, an address the operator keeps private).

use actix_web::{web, HttpResponse};

use crate::metrics::{metrics, CONTENT_TYPE};
use crate::web::extract::AdminAuth;
use crate::web::AppState;

/// Prometheus metrics (text format 0.0.4): HTTP requests by route and status, turn stage
/// latencies, LLM calls and fallbacks, error codes (rate-limit and quota refusals among them),
/// reranker batches, database pool use, shared collections' sizes.
#[utoipa::path(get, path = "/metrics", operation_id = "metrics", tag = "health",
    responses((status = 200, description = "Prometheus text exposition",
        content_type = "text/plain; version=0.0.4; charset=utf-8", body = String)))]
pub async fn scrape(_admin: AdminAuth, state: web::Data<AppState>) -> HttpResponse {
    exposition(state).await
}

/// The page both listeners serve: gauges read now, everything else as recorded.
pub async fn exposition(state: web::Data<AppState>) -> HttpResponse {
    let pool = state.store.pool();
    metrics().set_db_pool(
        pool.size(),
        pool.num_idle(),
        state.store.options().pool_size,
    );
    metrics()
        .embedding_backlog
        .set(state.turns.vector_builds().map_or(0, |b| b.backlog()) as i64);
    // Opening indexes and walking their files is blocking work.
    let sizes = web::block(move || state.collections.shared_sizes()).await;
    match sizes {
        Ok(Ok(sizes)) => metrics().set_collections(
            sizes
                .iter()
                .map(|(name, passages, bytes)| (name.as_str(), *passages, *bytes)),
        ),
        // The other series are still worth a scrape.
        Ok(Err(e)) => tracing::warn!(error = %e, "collection sizes unavailable for /metrics"),
        Err(e) => tracing::warn!(error = %e, "collection sizes unavailable for /metrics"),
    }
    HttpResponse::Ok()
        .content_type(CONTENT_TYPE)
        .body(metrics().render())
}
