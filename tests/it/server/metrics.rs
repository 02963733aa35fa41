//! `GET /metrics` on a real `convrag serve` process: the administrator's route on the main
//! address, the open `--metrics-bind` listener, exact counts for what one client did (the
//! process serves nobody else), and `--log-format json`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::common::{TestDb, ADMIN_TOKEN};
use convrag::collection::Format;
use convrag::index::{index_collection, IndexOptions};
use serde_json::{json, Value};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ui/diet.jsonl");

struct Served {
    child: Child,
    api: String,
    metrics: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `convrag serve` on free ports with the diet collection, JSON logs into `log`.
fn serve(db: &TestDb, home: &Path, log: &Path) -> Served {
    let config = db.config();
    let mut options = IndexOptions::new("diet", Format::Jsonl);
    options.inputs = vec![Path::new(FIXTURE).to_path_buf()];
    options.threads = 1;
    options.heap_bytes = 16 << 20;
    index_collection(&home.join("collections"), &options).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--metrics-bind",
            "127.0.0.1:0",
        ])
        .env_remove("CONVRAG_CONFIG")
        .env_remove("CONVRAG_LLM_BASE_URL")
        .env_remove("CONVRAG_MODEL_DIR")
        .env_remove("CONVRAG_DEFAULT_COLLECTION_SOURCE")
        .env("CONVRAG_HOME", home)
        .env("DATABASE_URL", config.database_url.as_deref().unwrap())
        .env("CONVRAG_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("CONVRAG_LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut metrics = None;
    let api = loop {
        let line = lines.next().expect("serve printed its addresses").unwrap();
        if let Some(url) = line.strip_prefix("metrics on ") {
            metrics = Some(url.to_string());
        }
        if let Some(url) = line.strip_prefix("convrag listening on ") {
            break url.to_string();
        }
    };
    Served {
        child,
        api,
        metrics: metrics.expect("the metrics address is printed before the API's"),
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
    let s = serve(&db, home.path(), &log);
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
    let passages = std::fs::read_to_string(FIXTURE).unwrap().lines().count() as f64;
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
