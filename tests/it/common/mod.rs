//! Shared set-up for integration tests: a fresh PostgreSQL database per test on the machine's
//! server (127.0.0.1:5432 unless CONVRAG_TEST_DATABASE_URL says otherwise), dropped afterwards.
#![allow(dead_code)]

use std::sync::Arc;

use convrag::api::{self, RunningServer};
use convrag::config::Config;
use convrag::store::{DbTarget, Store};
use convrag::web::AppState;
use sqlx::Connection;

pub const ADMIN_TOKEN: &str = "test-admin-token";

/// The server-level URL tests create their databases through.
pub fn admin_url() -> String {
    std::env::var("CONVRAG_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

fn url_for(database: &str) -> String {
    let base = admin_url();
    let cut = base.rfind('/').expect("database URL has a path");
    format!("{}/{}", &base[..cut], database)
}

/// A database of its own for one test.
pub struct TestDb {
    pub name: String,
    pub url: String,
    pub store: Store,
}

impl TestDb {
    pub async fn new() -> TestDb {
        let name = format!("convrag_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sqlx::PgConnection::connect(&admin_url())
            .await
            .expect("PostgreSQL must listen on 127.0.0.1:5432 (or set CONVRAG_TEST_DATABASE_URL)");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.unwrap();
        let url = url_for(&name);
        let store = Store::connect(&DbTarget::Url(url.clone())).await.unwrap();
        TestDb { name, url, store }
    }

    pub fn config(&self) -> Config {
        Config {
            database_url: Some(self.url.clone()),
            admin_token: Some(ADMIN_TOKEN.to_string()),
            max_body_bytes: 64 * 1024,
            ..Config::default()
        }
    }

    /// The API on a free loopback port, backed by this database.
    pub fn serve(&self) -> RunningServer {
        let config = Arc::new(self.config());
        api::spawn(AppState::new(self.store.clone(), config, ADMIN_TOKEN)).unwrap()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop runs outside async context: use a thread with its own runtime.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                if let Ok(mut admin) = sqlx::PgConnection::connect(&admin_url()).await {
                    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&mut admin)
                        .await;
                }
            });
        })
        .join();
    }
}

/// A small HTTP client for the API.
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub token: Option<String>,
}

pub struct Reply {
    pub status: u16,
    pub body: serde_json::Value,
}

impl Reply {
    /// The error code of an error envelope.
    pub fn code(&self) -> &str {
        self.body["error"]["code"]
            .as_str()
            .unwrap_or("<no error code>")
    }
    pub fn field(&self) -> &str {
        self.body["error"]["field"].as_str().unwrap_or("<no field>")
    }
}

impl Client {
    pub fn new(server: &RunningServer, token: Option<&str>) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: server.url(""),
            token: token.map(str::to_string),
        }
    }

    pub fn with_token(&self, token: &str) -> Client {
        Client {
            http: self.http.clone(),
            base: self.base.clone(),
            token: Some(token.to_string()),
        }
    }

    pub async fn send(&self, method: &str, path: &str, body: Option<serde_json::Value>) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{}", self.base, path));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request reaches the server");
        Self::reply(response).await
    }

    pub async fn raw(&self, method: &str, path: &str, content_type: &str, body: Vec<u8>) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .http
            .request(method, format!("{}{}", self.base, path))
            .header("content-type", content_type)
            .body(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        Self::reply(request.send().await.expect("request reaches the server")).await
    }

    async fn reply(response: reqwest::Response) -> Reply {
        let status = response.status().as_u16();
        let is_json = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let bytes = response.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            serde_json::Value::Null
        } else if is_json {
            serde_json::from_slice(&bytes).expect("JSON body")
        } else {
            panic!(
                "non-JSON response {status}: {}",
                String::from_utf8_lossy(&bytes)
            );
        };
        Reply { status, body }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, None).await
    }
    pub async fn post(&self, path: &str, body: serde_json::Value) -> Reply {
        self.send("POST", path, Some(body)).await
    }
}

/// Creates a user through the API and returns a client authenticated as it.
pub async fn new_user(anon: &Client, name: &str) -> Client {
    let admin = anon.with_token(ADMIN_TOKEN);
    let reply = admin
        .post("/v1/users", serde_json::json!({"name": name}))
        .await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    anon.with_token(reply.body["token"].as_str().unwrap())
}

/// A data directory the unprivileged `postgres` user can traverse (tempdirs are 0700).
pub fn shared_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("cvr")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Where `scripts/fetch-models.sh` installed the ONNX Runtime and models (CONVRAG_HOME, default
/// ./.convrag).
pub fn data_home() -> std::path::PathBuf {
    match std::env::var("CONVRAG_HOME") {
        Ok(v) if !v.trim().is_empty() => std::path::PathBuf::from(v),
        _ => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".convrag"),
    }
}

/// Fails loudly when `path` is missing: the model files are installed by a script, not by tests.
pub fn require(path: &std::path::Path) {
    assert!(
        path.exists(),
        "{} not found: run scripts/fetch-models.sh first (it fills CONVRAG_HOME, default ./.convrag)",
        path.display()
    );
}

/// The ONNX Runtime library under [`data_home`] (or ORT_DYLIB_PATH).
pub fn ort_library() -> std::path::PathBuf {
    let path = match std::env::var("ORT_DYLIB_PATH") {
        Ok(v) if !v.trim().is_empty() => std::path::PathBuf::from(v),
        _ => data_home().join("onnxruntime/libonnxruntime.so.1.31.1"),
    };
    require(&path);
    path
}

/// An installed model's directory under [`data_home`].
pub fn model_dir(name: &str) -> std::path::PathBuf {
    let dir = data_home().join("models").join(name);
    require(&dir.join("manifest.json"));
    dir
}

/// The default model (all-MiniLM-L6-v2), failing loudly when it is not installed.
pub fn default_model() -> convrag::rerank::OnnxReranker {
    convrag::rerank::OnnxReranker::open(
        &model_dir("all-MiniLM-L6-v2"),
        &ort_library(),
        convrag::rerank::OnnxOptions::default(),
    )
    .unwrap()
}

/// The `convrag` binary with a private data directory (`home`, also its working directory) and
/// the installed ONNX Runtime library and default model (absolute paths).
pub fn convrag_with_model(home: &std::path::Path) -> std::process::Command {
    let lib = std::fs::canonicalize(ort_library()).unwrap();
    let model = std::fs::canonicalize(model_dir("all-MiniLM-L6-v2")).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_convrag"));
    cmd.env("CONVRAG_HOME", home)
        .env("ORT_DYLIB_PATH", lib)
        .env("CONVRAG_MODEL_DIR", model)
        .env("RUST_LOG", "warn")
        .current_dir(home);
    cmd
}

/// The status, `Retry-After` and error body of a request.
pub async fn with_retry_after(
    client: &Client,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, Option<u64>, serde_json::Value) {
    let mut request = client
        .http
        .request(method, format!("{}{}", client.base, path))
        .bearer_auth(client.token.as_deref().unwrap());
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (
        response.status().as_u16(),
        retry_after,
        response.json().await.unwrap(),
    )
}
