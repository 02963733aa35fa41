//! What an operator observes of a real `convrag serve` process: `GET /metrics` (the
//! administrator's route on the main address, the open `--metrics-bind` listener, exact counts
//! for what one client did: the process serves nobody else), `--log-format json`, and
//! OpenTelemetry traces received over OTLP/HTTP by a receiver in the test.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{TestDb, ADMIN_TOKEN};
use crate::support::{fixture, serve_command, ServeProcess};
use convrag::collection::Format;
use convrag::index::{index_collection, IndexOptions};
use serde_json::{json, Value};

struct Served {
    process: ServeProcess,
    api: String,
    metrics: String,
}

/// `convrag serve` on free ports with the diet collection, JSON logs into `log`.
fn serve(db: &TestDb, home: &Path, log: &Path, env: &[(&str, String)]) -> Served {
    let config = db.config();
    let mut options = IndexOptions::new("diet", Format::Jsonl);
    options.inputs = vec![fixture("jsonl/diet.jsonl")];
    options.threads = 1;
    options.heap_bytes = 16 << 20;
    index_collection(&home.join("collections"), &options).unwrap();
    let process = ServeProcess::start(
        serve_command()
            .args(["--bind", "127.0.0.1:0", "--metrics-bind", "127.0.0.1:0"])
            .env_remove("CONVRAG_LLM_BASE_URL")
            .env_remove("CONVRAG_MODEL_DIR")
            .env_remove("CONVRAG_DEFAULT_COLLECTION_SOURCE")
            // The exporter's settings are the test's alone (its defaults included).
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .env("CONVRAG_HOME", home)
            .env("DATABASE_URL", config.database_url.as_deref().unwrap())
            .env("CONVRAG_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("CONVRAG_LOG_FORMAT", "json")
            .env("RUST_LOG", "info")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stderr(std::fs::File::create(log).unwrap()),
    );
    let metrics = process
        .printed_after("metrics on ")
        .expect("the metrics address is printed before the API's")
        .to_string();
    Served {
        api: process.url.clone(),
        metrics,
        process,
    }
}

/// Every sample of a text exposition by `name{labels}` (as written).
fn samples(page: &str) -> BTreeMap<String, f64> {
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (key, value) = l.rsplit_once(' ').expect("sample line");
            (key.to_string(), value.parse::<f64>().expect("sample value"))
        })
        .collect()
}

async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    token: Option<&str>,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = http.request(method, url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_exactly_what_clients_did() {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("serve.log");
    let s = serve(&db, home.path(), &log, &[]);
    let http = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", s.api);
    use reqwest::Method;

    let r = send(
        &http,
        Method::POST,
        url("/v1/users"),
        Some(ADMIN_TOKEN),
        Some(json!({"name": "alice"})),
    )
    .await;
    assert_eq!(r.status(), 201);
    let alice: Value = r.json().await.unwrap();
    let alice = alice["token"].as_str().unwrap().to_string();

    // Only the administrator reads /metrics on the main address.
    let r = send(&http, Method::GET, url("/metrics"), None, None).await;
    assert_eq!(r.status(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    let r = send(&http, Method::GET, url("/metrics"), Some(&alice), None).await;
    assert_eq!(r.status(), 403);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "admin_required");

    // One conversation, one turn, one read, one unknown path.
    let r = send(&http, Method::POST, url("/v1/conversations"), Some(&alice),
        Some(json!({"title": "dinner", "collection": "diet", "ptkb": [{"text": "I am vegetarian."}]}))).await;
    assert_eq!(r.status(), 201);
    let conversation: Value = r.json().await.unwrap();
    let id = conversation["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = send(
        &http,
        Method::POST,
        url(&format!("/v1/conversations/{id}/turns")),
        Some(&alice),
        Some(json!({"utterance": "What can I cook for dinner tonight?"})),
    )
    .await;
    assert_eq!(r.status(), 201);
    let r = send(
        &http,
        Method::GET,
        url(&format!("/v1/conversations/{id}")),
        Some(&alice),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let r = send(&http, Method::GET, url("/no/such/route"), None, None).await;
    assert_eq!(r.status(), 404);

    let r = send(&http, Method::GET, url("/metrics"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let admin_page = r.text().await.unwrap();
    // The open listener serves the same registry, without a token.
    let r = send(&http, Method::GET, s.metrics.clone(), None, None).await;
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    assert!(
        !page.contains(&id),
        "route patterns, never ids, label requests"
    );
    let m = samples(&page);
    let at = |key: &str| {
        *m.get(key)
            .unwrap_or_else(|| panic!("no sample {key} in\n{page}"))
    };

    let requests = |method: &str, route: &str, status: u16| {
        format!(
            r#"convrag_http_requests_total{{method="{method}",route="{route}",status="{status}"}}"#
        )
    };
    assert_eq!(at(&requests("POST", "/v1/users", 201)), 1.0);
    assert_eq!(at(&requests("GET", "/metrics", 401)), 1.0);
    assert_eq!(at(&requests("GET", "/metrics", 403)), 1.0);
    assert_eq!(at(&requests("POST", "/v1/conversations", 201)), 1.0);
    assert_eq!(
        at(&requests(
            "POST",
            "/v1/conversations/{conversation_id}/turns",
            201
        )),
        1.0
    );
    assert_eq!(
        at(&requests("GET", "/v1/conversations/{conversation_id}", 200)),
        1.0
    );
    assert_eq!(at(&requests("GET", "unmatched", 404)), 1.0);
    // The administrator's scrape was counted once it had answered.
    assert_eq!(at(&requests("GET", "/metrics", 200)), 1.0);
    assert!(admin_page.contains("convrag_http_requests_in_flight 1"));
    assert_eq!(
        at(
            r#"convrag_http_request_duration_seconds_count{method="POST",route="/v1/conversations/{conversation_id}/turns"}"#
        ),
        1.0
    );

    assert_eq!(
        at(r#"convrag_errors_total{code="missing_token",status="401"}"#),
        1.0
    );
    assert_eq!(
        at(r#"convrag_errors_total{code="admin_required",status="403"}"#),
        1.0
    );
    assert_eq!(
        at(r#"convrag_errors_total{code="route_not_found",status="404"}"#),
        1.0
    );

    assert_eq!(at(r#"convrag_turns_total{outcome="answered"}"#), 1.0);
    for stage in ["ptkb", "rewrite", "retrieve", "generate", "total"] {
        let key = format!(r#"convrag_turn_stage_duration_seconds_count{{stage="{stage}"}}"#);
        assert_eq!(at(&key), 1.0, "{stage}");
    }
    // No LLM is configured and no reranking model installed: neither was called.
    for outcome in ["ok", "fallback"] {
        let key = format!(r#"convrag_llm_requests_total{{outcome="{outcome}",stage="generate"}}"#);
        assert_eq!(at(&key), 0.0);
    }
    assert_eq!(
        at(r#"convrag_llm_fallbacks_total{reason="unreachable",stage="generate"}"#),
        0.0
    );
    assert_eq!(at(r#"convrag_turns_total{outcome="failed"}"#), 0.0);
    assert_eq!(
        at(r#"convrag_errors_total{code="rate_limited",status="429"}"#),
        0.0
    );
    assert_eq!(at("convrag_rerank_batches_total"), 0.0);
    assert!(at(r#"convrag_db_pool_connections{state="idle"}"#) >= 1.0);
    assert!(at("convrag_db_pool_max_connections") >= 1.0);
    let passages = std::fs::read_to_string(fixture("jsonl/diet.jsonl"))
        .unwrap()
        .lines()
        .count() as f64;
    assert_eq!(
        at(r#"convrag_collection_passages{collection="diet"}"#),
        passages
    );
    assert!(at(r#"convrag_collection_index_bytes{collection="diet"}"#) > 1000.0);
    assert_eq!(
        at(&format!(
            r#"convrag_build_info{{version="{}"}}"#,
            env!("CARGO_PKG_VERSION")
        )),
        1.0
    );

    // Every log line is one JSON object with a level.
    drop(s);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string(), "{line}");
    }
}

/// Every OTLP/HTTP export request the receiver got: its `Content-Type` and body.
type Exports = std::sync::Arc<std::sync::Mutex<Vec<(String, Vec<u8>)>>>;

/// A minimal OTLP/HTTP receiver on a free loopback port: it keeps each export's body, in
/// whichever encoding the exporter chose, and answers success in the same encoding.
fn otlp_receiver() -> (String, Exports) {
    use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
    let exports: Exports = Default::default();
    let kept = exports.clone();
    let server = HttpServer::new(move || {
        let kept = kept.clone();
        App::new().route(
            "/v1/traces",
            web::post().to(move |req: HttpRequest, body: web::Bytes| {
                let kept = kept.clone();
                async move {
                    let content_type = req
                        .headers()
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    kept.lock()
                        .unwrap()
                        .push((content_type.clone(), body.to_vec()));
                    // An empty ExportTraceServiceResponse: `{}` in JSON, no bytes in protobuf.
                    let reply = if content_type == "application/json" {
                        "{}"
                    } else {
                        ""
                    };
                    HttpResponse::Ok().content_type(content_type).body(reply)
                }
            }),
        )
    })
    .workers(1)
    .disable_signals()
    .bind("127.0.0.1:0")
    .unwrap();
    let addr = server.addrs()[0];
    tokio::spawn(server.run());
    (format!("http://{addr}"), exports)
}

/// One exported span: trace id, span id, parent span id (hex, empty for a root) and name.
type SpanIds = (String, String, String, String);

/// Every span of OTLP/HTTP JSON exports.
fn json_spans(exports: &[Vec<u8>]) -> Vec<SpanIds> {
    let mut out = Vec::new();
    for export in exports {
        let export: Value = serde_json::from_slice(export).expect("an OTLP JSON body");
        for resource in export["resourceSpans"].as_array().unwrap() {
            let service = resource["resource"]["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == "service.name")
                .map(|a| a["value"]["stringValue"].clone());
            assert_eq!(service, Some(json!("convrag")));
            for scope in resource["scopeSpans"].as_array().unwrap() {
                for span in scope["spans"].as_array().unwrap() {
                    let text = |k: &str| span[k].as_str().unwrap_or_default().to_string();
                    out.push((
                        text("traceId"),
                        text("spanId"),
                        text("parentSpanId"),
                        text("name"),
                    ));
                }
            }
        }
    }
    out
}

/// Every span of OTLP/HTTP protobuf exports, decoded as `ExportTraceServiceRequest` messages.
fn protobuf_spans(exports: &[Vec<u8>]) -> Vec<SpanIds> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use prost::Message;
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let mut out = Vec::new();
    for export in exports {
        let export =
            ExportTraceServiceRequest::decode(export.as_slice()).expect("an OTLP protobuf body");
        for resource in export.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .and_then(|a| a.value.as_ref()?.value.clone());
            assert_eq!(service, Some(Any::StringValue("convrag".into())));
            for scope in resource.scope_spans {
                for span in scope.spans {
                    out.push((
                        hex(&span.trace_id),
                        hex(&span.span_id),
                        hex(&span.parent_span_id),
                        span.name,
                    ));
                }
            }
        }
    }
    out
}

/// With `OTEL_EXPORTER_OTLP_ENDPOINT` set (and `protocol` as `OTEL_EXPORTER_OTLP_PROTOCOL`, or
/// the exporter's default when `None`), one turn is exported as one trace whose id is the
/// request id, the request span its root, the turn inside it and each stage inside the turn;
/// exports arrive with `content_type` and are read by `decode`.
async fn turn_is_traced(
    protocol: Option<&str>,
    content_type: &str,
    decode: fn(&[Vec<u8>]) -> Vec<SpanIds>,
) {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("serve.log");
    let (endpoint, exports) = otlp_receiver();
    let mut env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_string()),
    ];
    if let Some(protocol) = protocol {
        env.push(("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_string()));
    }
    let mut s = serve(&db, home.path(), &log, &env);
    let http = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", s.api);
    use reqwest::Method;

    let r = send(
        &http,
        Method::POST,
        url("/v1/users"),
        Some(ADMIN_TOKEN),
        Some(json!({"name": "alice"})),
    )
    .await;
    let alice: Value = r.json().await.unwrap();
    let alice = alice["token"].as_str().unwrap().to_string();
    let r = send(&http, Method::POST, url("/v1/conversations"), Some(&alice),
        Some(json!({"title": "dinner", "collection": "diet", "ptkb": [{"text": "I am vegetarian."}]}))).await;
    let conversation: Value = r.json().await.unwrap();
    let id = conversation["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = send(
        &http,
        Method::POST,
        url(&format!("/v1/conversations/{id}/turns")),
        Some(&alice),
        Some(json!({"utterance": "What can I cook for dinner tonight?"})),
    )
    .await;
    assert_eq!(r.status(), 201);
    let request_id = r.headers()["x-request-id"].to_str().unwrap().to_string();

    // SIGTERM: a clean stop exports what is left.
    let status = tokio::task::spawn_blocking(move || {
        let status = s.process.terminate(libc::SIGTERM);
        (status, s)
    })
    .await
    .unwrap()
    .0;
    assert!(status.success(), "{status:?}");

    let exports = exports.lock().unwrap().clone();
    assert!(!exports.is_empty(), "nothing was exported");
    for (received, _) in &exports {
        assert_eq!(received, content_type, "every export is {content_type}");
    }
    let bodies: Vec<Vec<u8>> = exports.into_iter().map(|(_, body)| body).collect();
    let all = decode(&bodies);
    let turn_trace: Vec<_> = all.iter().filter(|s| s.0 == request_id).collect();
    let root = turn_trace
        .iter()
        .find(|s| s.3 == "POST /v1/conversations/{conversation_id}/turns")
        .unwrap_or_else(|| panic!("no request span with trace id {request_id} in {all:?}"));
    assert_eq!(root.2, "", "the request span is the trace's root");
    let turn = turn_trace
        .iter()
        .find(|s| s.3 == "turn")
        .unwrap_or_else(|| panic!("no turn span in {turn_trace:?}"));
    assert_eq!(turn.2, root.1, "the turn runs inside the request");
    // One trace per turn: the turn's spans are all in the request's trace.
    assert_eq!(
        all.iter().filter(|s| s.3 == "turn").count(),
        1,
        "one turn, one turn span: {all:?}"
    );
    for stage in ["ptkb", "rewrite", "retrieve", "generate"] {
        let span = turn_trace
            .iter()
            .find(|s| s.3 == stage)
            .unwrap_or_else(|| panic!("no {stage} span in {turn_trace:?}"));
        assert_eq!(span.2, turn.1, "{stage} runs inside the turn");
    }
    // Other requests are traces of their own.
    assert!(all
        .iter()
        .any(|s| s.3 == "POST /v1/conversations" && s.0 != request_id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_is_one_trace_whose_id_is_the_request_id() {
    turn_is_traced(Some("http/json"), "application/json", json_spans).await;
}

/// The exporter's default encoding, protobuf, decoded with `opentelemetry-proto`'s messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_exported_in_the_default_protobuf_encoding() {
    turn_is_traced(None, "application/x-protobuf", protobuf_spans).await;
}
