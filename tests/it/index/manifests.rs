//! Collections copied to every node: `convrag index` writes `manifest.sha256.json`,
//! `convrag collection verify` names a changed file, and two real `convrag serve` processes on
//! one database serve a collection only while their copies match the manifest recorded for its
//! name (the first server records it); a differing copy is refused with 503
//! `collection_unavailable` until `verify --record` makes it the recorded one.

use crate::batch_support::Env;
use crate::common::ADMIN_TOKEN;
use crate::support::{copy_dir, fixture, ServeProcess};

use serde_json::{json, Value};

/// A real `convrag serve` of an environment, on a free port, its standard error collected.
struct Server {
    process: ServeProcess,
}

impl Server {
    fn start(env: &Env) -> Server {
        let process = ServeProcess::start_logged(
            env.cmd()
                .args(["serve", "--bind", "127.0.0.1:0"])
                .env("CONVRAG_ADMIN_TOKEN", ADMIN_TOKEN)
                .env("RUST_LOG", "info"),
        );
        Server { process }
    }

    async fn token(&self) -> String {
        let r = reqwest::Client::new()
            .post(format!("{}/v1/users", self.process.url))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"name": format!("u{}", uuid::Uuid::new_v4().simple())}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let body: Value = r.json().await.unwrap();
        body["token"].as_str().unwrap().to_string()
    }

    /// (status, body) of a search in `recipes`.
    async fn search(&self) -> (u16, Value) {
        let token = self.token().await;
        let r = reqwest::Client::new()
            .get(format!(
                "{}/v1/collections/recipes/search?q=curry",
                self.process.url
            ))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    fn stop(mut self) -> String {
        self.process.kill();
        self.process.log()
    }
}

#[tokio::test]
async fn servers_refuse_a_collection_whose_files_differ_from_the_recorded_manifest() {
    let one = Env::new(false).await;
    // Another node: its own data directory, the same database.
    let two = Env {
        db: crate::common::TestDb {
            name: one.db.name.clone(),
            url: one.db.url.clone(),
            store: one.db.store.clone(),
        },
        home: tempfile::tempdir().unwrap(),
        model: false,
    };
    one.index("recipes", "jsonl", &fixture("jsonl/recipes.jsonl"), None);
    let collection = |env: &Env| env.path("collections/recipes");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(collection(&one).join("manifest.sha256.json")).unwrap(),
    )
    .unwrap();
    assert!(
        manifest["files"]["collection.json"]["sha256"]
            .as_str()
            .unwrap()
            .len()
            == 64
    );
    assert!(
        manifest["files"]["tantivy/meta.json"]["bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    copy_dir(&collection(&one), &collection(&two));
    two.ok(&["collection", "verify", "recipes"]);

    let a = Server::start(&one);
    let b = Server::start(&two);
    assert_eq!(a.search().await.0, 200);
    assert_eq!(b.search().await.0, 200);
    b.stop();

    // Node two's copy changes (indexed again with one more passage).
    let extra = two.path("extra.jsonl");
    std::fs::write(
        &extra,
        "{\"id\": \"r99\", \"title\": \"Toast\", \"url\": \"https://example.org/toast\", \"text\": \"Toast bread.\"}\n",
    )
    .unwrap();
    two.index("recipes", "jsonl", &extra, None);
    let b = Server::start(&two);
    let (status, body) = b.search().await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "collection_unavailable");
    assert_eq!(body["error"]["field"], "collection");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("collection verify recipes --record"),
        "{body}"
    );
    assert_eq!(
        a.search().await.0,
        200,
        "node one's copy is the recorded one"
    );
    let log = b.stop();
    assert!(log.contains("collection refused"), "{log}");

    // A file changed behind the manifest's back is named.
    let meta = collection(&two).join("collection.json");
    let mut text = std::fs::read_to_string(&meta).unwrap();
    text.push(' ');
    std::fs::write(&meta, &text).unwrap();
    let stderr = two.fails(&["collection", "verify", "recipes"]);
    assert!(
        stderr.contains("collection.json: size or SHA-256 differs"),
        "{stderr}"
    );
    text.pop();
    std::fs::write(&meta, &text).unwrap();

    // Recording node two's copy makes it the served one: node one's copy is now refused.
    let out = two.convrag(&["collection", "verify", "recipes", "--record"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("recorded"));
    let b = Server::start(&two);
    assert_eq!(b.search().await.0, 200);
    a.stop();
    let a = Server::start(&one);
    assert_eq!(a.search().await.0, 503);
    a.stop();
    b.stop();
}

/// The collection's `.vec` file under the data directory's embeddings (one model installed).
fn vector_file(env: &Env, name: &str) -> std::path::PathBuf {
    let mut found = Vec::new();
    for model in std::fs::read_dir(env.path("embeddings")).unwrap() {
        for file in std::fs::read_dir(model.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            let file_name = path.file_name().unwrap().to_str().unwrap().to_string();
            if file_name.starts_with(&format!("{name}.")) && file_name.ends_with(".vec") {
                found.push(path);
            }
        }
    }
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}

/// `convrag index` computes the passage vectors and records their sums beside them;
/// `collection verify` checks them, says when they are not complete without failing, and names a
/// vector file changed since.
#[tokio::test]
async fn verify_checks_the_passage_vectors_against_their_sums() {
    let env = Env::new(true).await;
    env.index("recipes", "jsonl", &fixture("jsonl/recipes.jsonl"), None);
    let vectors = vector_file(&env, "recipes");
    let sums_path = std::path::PathBuf::from(format!("{}.sha256.json", vectors.display()));
    let sums: Value = serde_json::from_str(&env.read(sums_path.to_str().unwrap())).unwrap();
    let digest = convrag::index::checksum::ChecksumManifest::read(&env.path("collections/recipes"))
        .unwrap()
        .unwrap()
        .digest();
    assert_eq!(sums["collection_manifest_sha256"], digest.as_str());
    assert_eq!(
        sums["bytes"].as_u64().unwrap(),
        std::fs::metadata(&vectors).unwrap().len()
    );
    assert_eq!(sums["dim"], 384);
    let passages = sums["passages"].as_u64().unwrap();
    assert!(passages >= 20, "{sums}");

    let verified = |env: &Env| {
        let out = env.convrag(&["collection", "verify", "recipes"]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        String::from_utf8(out.stdout).unwrap()
    };
    let stdout = verified(&env);
    assert!(
        stdout.contains("vectors all-MiniLM-L6-v2@")
            && stdout.contains(&format!("{passages} passages match")),
        "{stdout}"
    );

    // Without its sums the file is not complete: said, not failed; `convrag embed` records them.
    std::fs::remove_file(&sums_path).unwrap();
    let stdout = verified(&env);
    assert!(
        stdout.contains("not complete") && stdout.contains("convrag embed --collection recipes"),
        "{stdout}"
    );
    env.ok(&["embed", "--collection", "recipes", "--quiet"]);
    assert!(verified(&env).contains(&format!("{passages} passages match")));

    // One byte of the vector file changed: verify fails naming it.
    let mut bytes = std::fs::read(&vectors).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&vectors, &bytes).unwrap();
    let out = env.convrag(&["collection", "verify", "recipes"]);
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("files match"),
        "the BM25 files still match: {stdout}"
    );
    assert!(
        stderr.contains(&format!("{}: size or SHA-256 differs", vectors.display()))
            && stderr.contains("vector files do not match"),
        "{stderr}"
    );
}
