//! Process-wide Prometheus metrics: one registry, typed handles for what the server records, and
//! the text exposition `/metrics` serves.
//!
//! The registry is global because every layer records into it (the HTTP middleware, turns, the
//! LLM stage, the reranker) and a scrape must see them all. Labels are closed sets (route
//! patterns, stage names, snake_case error codes and fallback kinds), never user input, so the
//! number of series stays bounded.

use once_cell::sync::Lazy;
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Upper bounds (seconds) for request and stage latencies: 1 ms to 60 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Every metric the server exports.
pub struct Metrics {
    registry: Registry,
    /// `convrag_http_requests_total{method, route, status}`.
    pub http_requests: IntCounterVec,
    /// `convrag_http_request_duration_seconds{method, route}` until the response head is sent.
    pub http_duration: HistogramVec,
    /// `convrag_http_requests_in_flight`.
    pub http_in_flight: IntGauge,
    /// `convrag_errors_total{code, status}`: every error answer by its stable code, so rate-limit
    /// and quota refusals (`rate_limited`, `quota_exceeded`, …) are series of their own.
    pub errors: IntCounterVec,
    /// `convrag_turns_total{outcome}`: `answered` or `failed`.
    pub turns: IntCounterVec,
    /// `convrag_turn_stage_duration_seconds{stage}`: ptkb, rewrite, retrieve, rerank, generate, total.
    pub turn_stage_duration: HistogramVec,
    /// `convrag_llm_requests_total{stage, outcome}`: answers and rewrites by the LLM, `ok` or
    /// `fallback`.
    pub llm_requests: IntCounterVec,
    /// `convrag_llm_fallbacks_total{stage, reason}`: why an LLM's output was not used.
    pub llm_fallbacks: IntCounterVec,
    /// `convrag_rerank_batches_total` and `convrag_rerank_encode_duration_seconds`.
    pub rerank_batches: IntCounter,
    pub rerank_encode_duration: Histogram,
    /// `convrag_rerank_passages_encoded_total`: passages run through the model (cache misses).
    pub rerank_passages_encoded: IntCounter,
    /// `convrag_db_pool_connections{state}`: `in_use` and `idle`, read at scrape time.
    pub db_pool_connections: IntGaugeVec,
    /// `convrag_db_pool_max_connections`.
    pub db_pool_max: IntGauge,
    /// `convrag_collection_passages{collection}` and `convrag_collection_index_bytes{collection}`
    /// of the shared collections, read at scrape time.
    pub collection_passages: IntGaugeVec,
    pub collection_index_bytes: IntGaugeVec,
    /// `convrag_lease_waits_total`: turns and PTKB edits that found their conversation leased.
    pub lease_waits: IntCounter,
    /// `convrag_embedding_backlog_passages`: passages the background vector builds have still
    /// to embed, read at scrape time.
    pub embedding_backlog: IntGauge,
    /// `convrag_build_info{version}` = 1.
    pub build_info: IntGaugeVec,
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: Lazy<Metrics> = Lazy::new(Metrics::new);
    &METRICS
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry.register(Box::new(c.clone())).expect("unique");
    c
}

fn histogram_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> HistogramVec {
    let opts = HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec());
    let h = HistogramVec::new(opts, labels).expect("valid metric");
    registry.register(Box::new(h.clone())).expect("unique");
    h
}

impl Metrics {
    // The names and label sets below are constants: `expect` can only fail on a programming
    // error, which the unit test below catches.
    fn new() -> Self {
        let r = Registry::new();
        let http_in_flight = IntGauge::new(
            "convrag_http_requests_in_flight",
            "HTTP requests being served",
        )
        .expect("valid metric");
        r.register(Box::new(http_in_flight.clone()))
            .expect("unique");
        let rerank_batches = IntCounter::new(
            "convrag_rerank_batches_total",
            "batches the reranking model encoded",
        )
        .expect("valid metric");
        r.register(Box::new(rerank_batches.clone()))
            .expect("unique");
        let rerank_passages_encoded = IntCounter::new(
            "convrag_rerank_passages_encoded_total",
            "passages and queries the reranking model encoded (cache misses)",
        )
        .expect("valid metric");
        r.register(Box::new(rerank_passages_encoded.clone()))
            .expect("unique");
        let rerank_encode_duration = Histogram::with_opts(
            HistogramOpts::new(
                "convrag_rerank_encode_duration_seconds",
                "time to encode one batch with the reranking model",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
        )
        .expect("valid metric");
        r.register(Box::new(rerank_encode_duration.clone()))
            .expect("unique");
        let db_pool_connections = IntGaugeVec::new(
            Opts::new(
                "convrag_db_pool_connections",
                "database pool connections by state",
            ),
            &["state"],
        )
        .expect("valid metric");
        r.register(Box::new(db_pool_connections.clone()))
            .expect("unique");
        let db_pool_max = IntGauge::new(
            "convrag_db_pool_max_connections",
            "the database pool's size limit",
        )
        .expect("valid metric");
        r.register(Box::new(db_pool_max.clone())).expect("unique");
        let lease_waits = IntCounter::new(
            "convrag_lease_waits_total",
            "times a turn or PTKB edit waited for its conversation's lease",
        )
        .expect("valid metric");
        r.register(Box::new(lease_waits.clone())).expect("unique");
        let embedding_backlog = IntGauge::new(
            "convrag_embedding_backlog_passages",
            "passages the server's background vector builds have still to embed",
        )
        .expect("valid metric");
        r.register(Box::new(embedding_backlog.clone()))
            .expect("unique");
        let build_info = IntGaugeVec::new(
            Opts::new("convrag_build_info", "the running convrag version"),
            &["version"],
        )
        .expect("valid metric");
        r.register(Box::new(build_info.clone())).expect("unique");
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        let collection_passages = IntGaugeVec::new(
            Opts::new(
                "convrag_collection_passages",
                "passages of each shared collection",
            ),
            &["collection"],
        )
        .expect("valid metric");
        r.register(Box::new(collection_passages.clone()))
            .expect("unique");
        let collection_index_bytes = IntGaugeVec::new(
            Opts::new(
                "convrag_collection_index_bytes",
                "bytes on disk of each shared collection's directory",
            ),
            &["collection"],
        )
        .expect("valid metric");
        r.register(Box::new(collection_index_bytes.clone()))
            .expect("unique");
        Self {
            http_requests: counter_vec(
                &r,
                "convrag_http_requests_total",
                "HTTP requests by route pattern and status",
                &["method", "route", "status"],
            ),
            http_duration: histogram_vec(
                &r,
                "convrag_http_request_duration_seconds",
                "HTTP request latency until the response head",
                &["method", "route"],
            ),
            http_in_flight,
            errors: counter_vec(
                &r,
                "convrag_errors_total",
                "error answers by stable error code",
                &["code", "status"],
            ),
            turns: counter_vec(
                &r,
                "convrag_turns_total",
                "turns run, by outcome",
                &["outcome"],
            ),
            turn_stage_duration: histogram_vec(
                &r,
                "convrag_turn_stage_duration_seconds",
                "time spent in each stage of a turn",
                &["stage"],
            ),
            llm_requests: counter_vec(
                &r,
                "convrag_llm_requests_total",
                "LLM calls by pipeline stage and outcome",
                &["stage", "outcome"],
            ),
            llm_fallbacks: counter_vec(
                &r,
                "convrag_llm_fallbacks_total",
                "LLM outputs not used, by stage and reason",
                &["stage", "reason"],
            ),
            rerank_batches,
            rerank_encode_duration,
            rerank_passages_encoded,
            db_pool_connections,
            db_pool_max,
            collection_passages,
            collection_index_bytes,
            lease_waits,
            embedding_backlog,
            build_info,
            registry: r,
        }
    }

    /// Sets the pool gauges (read at scrape time: the pool knows, nothing needs recording).
    pub fn set_db_pool(&self, size: u32, idle: usize, max: u32) {
        let idle = idle.min(size as usize) as i64;
        self.db_pool_connections
            .with_label_values(&["in_use"])
            .set(i64::from(size) - idle);
        self.db_pool_connections
            .with_label_values(&["idle"])
            .set(idle);
        self.db_pool_max.set(i64::from(max));
    }

    /// Replaces the collection gauges (a deleted collection's series disappear).
    pub fn set_collections<'a>(&self, collections: impl IntoIterator<Item = (&'a str, u64, u64)>) {
        self.collection_passages.reset();
        self.collection_index_bytes.reset();
        for (name, passages, bytes) in collections {
            self.collection_passages
                .with_label_values(&[name])
                .set(passages as i64);
            self.collection_index_bytes
                .with_label_values(&[name])
                .set(bytes as i64);
        }
    }

    /// The Prometheus text exposition (format 0.0.4) of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail on I/O; a metric family the encoder refuses would be
        // a programming error, and a partial page is better than none for a scrape.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The `method` label of an HTTP request: one of the methods of RFC 9110 and PATCH, else `other`.
/// Any token is a valid method to HTTP, and the label is set before routing or authentication,
/// so a caller's made-up methods must not each become a series.
pub fn method_label(method: &str) -> &'static str {
    const KNOWN: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE",
    ];
    KNOWN
        .iter()
        .find(|known| **known == method)
        .copied()
        .unwrap_or("other")
}

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_registers_and_renders() {
        let m = metrics();
        m.http_requests
            .with_label_values(&["GET", "/healthz", "200"])
            .inc();
        m.turn_stage_duration
            .with_label_values(&["rerank"])
            .observe(0.02);
        m.set_db_pool(5, 2, 10);
        let text = m.render();
        assert!(text.contains(
            r#"convrag_http_requests_total{method="GET",route="/healthz",status="200"}"#
        ));
        assert!(text
            .contains(r#"convrag_turn_stage_duration_seconds_bucket{stage="rerank",le="0.025"}"#));
        assert!(text.contains(r#"convrag_db_pool_connections{state="in_use"} 3"#));
        assert!(text.contains(r#"convrag_db_pool_max_connections 10"#));
        assert!(text.contains(&format!(
            r#"convrag_build_info{{version="{}"}} 1"#,
            env!("CARGO_PKG_VERSION")
        )));
    }

    #[test]
    fn method_labels_are_a_closed_set() {
        for method in [
            "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE",
        ] {
            assert_eq!(method_label(method), method);
        }
        assert_eq!(method_label("CONNECT"), "CONNECT");
        // Methods are case-sensitive (RFC 9110 9.1): `get` is not GET.
        for odd in ["get", "PROPFIND", "XYZZY", "", &"M".repeat(4000)] {
            assert_eq!(method_label(odd), "other", "{odd:.20}");
        }
        let distinct: std::collections::HashSet<&str> = (0..3000)
            .map(|i| format!("M{i}"))
            .map(|m| method_label(&m))
            .collect();
        assert_eq!(distinct.len(), 1);
    }
}
