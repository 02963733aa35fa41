//! A real `convrag serve` with a default collection and the bi-encoder installed: once the
//! collection is built, its passage vectors are computed in the background (listed as
//! `vectors.status`), with their nearest-neighbour graph (`dense.ann_min_vectors` set to 1 here),
//! and dense retrieval serves it without `convrag embed`.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{self, TestDb, ADMIN_TOKEN};
use crate::support::{fixture, serve_command, ServeProcess};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_collection_gets_its_vectors_after_its_build() {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let config = db.config();
    let served = ServeProcess::start(
        serve_command()
            .args(["--bind", "127.0.0.1:0"])
            .env_remove("CONVRAG_LLM_BASE_URL")
            .env("CONVRAG_HOME", home.path())
            .env("DATABASE_URL", config.database_url.as_deref().unwrap())
            .env("CONVRAG_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("CONVRAG_DEFAULT_COLLECTION", "manual")
            .env("CONVRAG_DEFAULT_COLLECTION_SOURCE", fixture("html"))
            .env("CONVRAG_DENSE_ANN_MIN_VECTORS", "1")
            .env("CONVRAG_MODEL_DIR", common::model_dir("all-MiniLM-L6-v2"))
            .env("ORT_DYLIB_PATH", common::ort_library())
            .env("RUST_LOG", "warn")
            .stderr(Stdio::null()),
    );
    let api = served.url.clone();
    let http = reqwest::Client::new();
    let user: Value = http
        .post(format!("{api}/v1/users"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "alice"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = user["token"]
        .as_str()
        .unwrap_or_else(|| panic!("{user}"))
        .to_string();

    let mut listed = Value::Null;
    for _ in 0..1200 {
        let r: Value = http
            .get(format!("{api}/v1/collections"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        listed = r["collections"][0].clone();
        if listed["vectors"]["status"] == "ready" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(listed["name"], "manual", "{listed}");
    assert_eq!(listed["status"], "ready", "{listed}");
    assert_eq!(listed["vectors"], json!({"status": "ready"}), "{listed}");

    // The vectors the server computed have their sums, and their graph its own: `collection
    // verify` checks both.
    let verify = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .args(["collection", "verify", "manual"])
        .env_remove("CONVRAG_CONFIG")
        .env("CONVRAG_HOME", home.path())
        .env("DATABASE_URL", config.database_url.as_deref().unwrap())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&verify.stdout);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(
        stdout.contains("vectors all-MiniLM-L6-v2@") && stdout.contains("passages match"),
        "{stdout}"
    );
    assert!(
        stdout.contains("nearest-neighbour graph") && stdout.contains("2 files match"),
        "{stdout}"
    );

    // Nothing left to embed: the backlog gauge is back at zero.
    let page = http
        .get(format!("{api}/metrics"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.lines()
            .any(|l| l == "convrag_embedding_backlog_passages 0"),
        "{page}"
    );

    // Dense retrieval serves it now, as hybrid does.
    for mode in ["dense", "hybrid"] {
        let r = http
            .get(format!(
                "{api}/v1/collections/manual/search?q=sort%20the%20rows&retrieval={mode}&k=3"
            ))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["results"].as_array().unwrap().len(), 3, "{body}");
    }
    drop(served);
}
