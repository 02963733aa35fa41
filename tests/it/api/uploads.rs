//! Private collections over HTTP: ownership (another user's private collection is not found
//! anywhere: listing, search, conversations, turns, the OpenAI endpoint, MCP), uploads of real
//! PDF and Markdown files indexed in the background, and every refused upload leaving the
//! collection exactly as it was.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{new_user, Client, Reply, TestDb, ADMIN_TOKEN};
use convrag::api;
use convrag::collection::Format;
use convrag::config::UploadLimits;
use convrag::index::{index_collection, CollectionRegistry, IndexOptions};
use convrag::service::CollectionService;
use convrag::web::AppState;
use serde_json::{json, Value};

const SHARED: &str = r#"{"id": "s1", "title": "Foxes", "text": "Red foxes live in dens and hunt small rodents at night."}
"#;

const PDF: &[u8] = include_bytes!("../../fixtures/pdf/tide-pools.pdf");

const MARKDOWN: &str = "# Otters of Kestrel Bay\n\nThe sea otters of Kestrel Bay *crack clams* on \
     their bellies with a favourite stone.\n\n## Wardens\n\nWardens ring a brass bell at dusk.\n";

struct Setup {
    _db: TestDb,
    server: api::RunningServer,
    home: tempfile::TempDir,
}

async fn setup() -> Setup {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let mut config = db.config();
    config.home = home.path().to_path_buf();
    config.uploads = UploadLimits {
        max_file_bytes: 4096,
        max_files: 3,
        max_documents: 3,
        max_collection_bytes: 1 << 20,
        max_collections: 2,
        body_idle_secs: 2,
        deadline_secs: 4,
        ..UploadLimits::default()
    };
    let input = home.path().join("shared.jsonl");
    std::fs::write(&input, SHARED).unwrap();
    let mut options = IndexOptions::new("demo", Format::Jsonl);
    options.inputs = vec![input];
    options.threads = 1;
    options.heap_bytes = 16 << 20;
    index_collection(&config.collections_dir(), &options).unwrap();
    let state = AppState::new(db.store.clone(), Arc::new(config), ADMIN_TOKEN);
    let server = api::spawn(state).unwrap();
    Setup {
        _db: db,
        server,
        home,
    }
}

/// A multipart/form-data body with one `files` part per (file name, contents).
fn multipart(files: &[(&str, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "convrag-test-boundary-7d1f";
    let mut body = Vec::new();
    for (name, bytes) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; \
                 filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn upload(client: &Client, collection: &str, files: &[(&str, &[u8])]) -> Reply {
    let (content_type, body) = multipart(files);
    client
        .raw(
            "POST",
            &format!("/v1/collections/{collection}/documents"),
            &content_type,
            body,
        )
        .await
}

/// Polls the collection until its upload is indexed (status no longer `building`).
async fn wait_indexed(client: &Client, collection: &str) -> Value {
    for _ in 0..600 {
        let r = client.get(&format!("/v1/collections/{collection}")).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        if r.body["collection"]["status"] != "building" {
            return r.body["collection"].clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{collection} was still building after 600 polls");
}

fn names(r: &Reply) -> Vec<String> {
    r.body["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

fn result_ids(r: &Reply) -> Vec<String> {
    r.body["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{:?}", r.body))
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

/// Version directories of a user's private collections on disk (one per live collection).
fn versions(home: &Path) -> Vec<String> {
    let root = home.join("collections/.private");
    let mut out = Vec::new();
    for owner in std::fs::read_dir(root).unwrap().flatten() {
        for entry in std::fs::read_dir(owner.path()).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                out.push(name);
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploaded_documents_are_searched_and_cited_by_their_owner_only() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;

    let r = alice
        .post("/v1/collections", json!({"name": "notes"}))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["collection"]["visibility"], "private");
    assert_eq!(r.body["collection"]["status"], "ready");
    assert_eq!(r.body["collection"]["documents"], 0);

    let r = upload(
        &alice,
        "notes",
        &[("tide-pools.pdf", PDF), ("otters.md", MARKDOWN.as_bytes())],
    )
    .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["collection"]["files_total"], 2);
    let c = wait_indexed(&alice, "notes").await;
    assert_eq!(c["status"], "ready", "{c}");
    assert_eq!(c["documents"], 2);
    assert!(c["passages"].as_u64().unwrap() >= 2, "{c}");

    // Both files are searchable, each passage naming its file.
    let r = alice
        .get("/v1/collections/notes/search?q=violet%20sea%20slug%20Glaucilla")
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body["results"][0]["url"], "tide-pools.pdf",
        "{:?}",
        r.body
    );
    assert!(r.body["results"][0]["text"]
        .as_str()
        .unwrap()
        .contains("Glaucilla"));
    let r = alice
        .get("/v1/collections/notes/search?q=otters%20crack%20clams")
        .await;
    assert_eq!(r.body["results"][0]["url"], "otters.md", "{:?}", r.body);
    assert_eq!(r.body["results"][0]["title"], "Otters of Kestrel Bay");

    // A turn over the private collection answers from and cites the uploaded passages.
    let r = alice
        .post(
            "/v1/conversations",
            json!({"title": "bay", "collection": "notes"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let conv = r.body["conversation"]["id"].as_str().unwrap().to_string();
    let r = alice
        .post(
            &format!("/v1/conversations/{conv}/turns"),
            json!({"utterance": "Which sea slug lives in the tide pools of Kestrel Bay?",
                   "generator": "extractive"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let turn = &r.body["turn"];
    let top = &turn["passages"][0];
    assert!(
        top["passage_id"]
            .as_str()
            .unwrap()
            .starts_with("tide-pools.pdf-"),
        "{turn}"
    );
    assert!(
        turn["response_text"]
            .as_str()
            .unwrap()
            .contains("Glaucilla"),
        "{turn}"
    );
    let cited: Vec<u64> = turn["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s["citations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_u64().unwrap())
        })
        .collect();
    assert!(
        cited.contains(&1),
        "the answer cites the PDF's passage: {turn}"
    );

    // Bob sees neither the collection nor its documents, anywhere.
    let r = bob.get("/v1/collections").await;
    assert_eq!(names(&r), vec!["demo"]);
    for path in [
        "/v1/collections/notes",
        "/v1/collections/notes/search?q=Glaucilla",
    ] {
        let r = bob.get(path).await;
        assert_eq!(
            (r.status, r.code()),
            (404, "not_found"),
            "{path}: {:?}",
            r.body
        );
    }
    let r = bob
        .post("/v1/conversations", json!({"collection": "notes"}))
        .await;
    assert_eq!((r.status, r.field()), (404, "collection"), "{:?}", r.body);
    let r = upload(&bob, "notes", &[("x.txt", b"bob was here")]).await;
    assert_eq!((r.status, r.code()), (404, "not_found"), "{:?}", r.body);
    let r = bob.get("/v1/models").await;
    let models: Vec<&str> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(models, vec!["demo"]);
    let r = bob
        .post(
            "/v1/chat/completions",
            json!({"model": "notes", "messages": [{"role": "user", "content": "slugs?"}]}),
        )
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    let r = bob
        .post(
            "/mcp",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "search",
                              "arguments": {"collection": "notes", "query": "Glaucilla"}}}),
        )
        .await;
    assert_eq!(r.body["result"]["isError"], true, "{:?}", r.body);
    // Alice's model list has her collection; the shared one stays shared.
    let r = alice.get("/v1/models").await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 2, "{:?}", r.body);

    // Private names are per user: Bob's own "notes" is his, empty, and never Alice's.
    let r = bob.post("/v1/collections", json!({"name": "notes"})).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let r = bob.get("/v1/collections/notes/search?q=Glaucilla").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(result_ids(&r).is_empty(), "{:?}", r.body);
    let r = alice.get("/v1/collections/notes/search?q=Glaucilla").await;
    assert_eq!(result_ids(&r).len(), 1, "{:?}", r.body);

    // Adding documents keeps the earlier ones.
    let r = upload(
        &alice,
        "notes",
        &[("bell.txt", b"The brass bell was cast in 1911.")],
    )
    .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let c = wait_indexed(&alice, "notes").await;
    assert_eq!(
        (c["status"].as_str(), c["documents"].as_i64()),
        (Some("ready"), Some(3))
    );
    let r = alice
        .get("/v1/collections/notes/search?q=brass%20bell%201911")
        .await;
    assert_eq!(r.body["results"][0]["url"], "bell.txt", "{:?}", r.body);
    let r = alice.get("/v1/collections/notes/search?q=Glaucilla").await;
    assert_eq!(result_ids(&r).len(), 1, "{:?}", r.body);
    // One version per collection on disk: replaced versions are removed.
    assert_eq!(
        versions(s.home.path()).len(),
        2,
        "{:?}",
        versions(s.home.path())
    );
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_names_and_counts_are_checked() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    assert_eq!(
        anon.post("/v1/collections", json!({"name": "x"}))
            .await
            .status,
        401
    );
    for (name, status, field) in [
        ("../etc", 400, "name"),
        (".hidden", 400, "name"),
        ("demo", 409, "name"),
    ] {
        let r = alice.post("/v1/collections", json!({"name": name})).await;
        assert_eq!(
            (r.status, r.field()),
            (status, field),
            "{name}: {:?}",
            r.body
        );
    }
    let r = alice.post("/v1/collections", json!({"title": "x"})).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(
        alice
            .post("/v1/collections", json!({"name": "a"}))
            .await
            .status,
        201
    );
    let r = alice.post("/v1/collections", json!({"name": "a"})).await;
    assert_eq!((r.status, r.field()), (409, "name"), "{:?}", r.body);
    assert_eq!(
        alice
            .post("/v1/collections", json!({"name": "b"}))
            .await
            .status,
        201
    );
    // uploads.max_collections = 2.
    let r = alice.post("/v1/collections", json!({"name": "c"})).await;
    assert_eq!((r.status, r.field()), (409, "name"), "{:?}", r.body);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("uploads.max_collections"));
    let r = alice.get("/v1/collections").await;
    assert_eq!(names(&r), vec!["demo", "a", "b"]);
    s.server.stop().await;
}

/// A refused upload: what it is, its files, and the status, code, field and words expected.
type RefusedCase<'a> = (
    &'a str,
    Vec<(&'a str, &'a [u8])>,
    u16,
    &'a str,
    &'a str,
    &'a str,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_uploads_leave_the_collection_as_it_was() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    assert_eq!(
        alice
            .post("/v1/collections", json!({"name": "notes"}))
            .await
            .status,
        201
    );
    let r = upload(&alice, "notes", &[("otters.md", MARKDOWN.as_bytes())]).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let before = wait_indexed(&alice, "notes").await;
    assert_eq!(before["documents"], 1);
    let search = "/v1/collections/notes/search?q=otters%20clams%20bell";
    let hits_before = result_ids(&alice.get(search).await);
    assert!(!hits_before.is_empty());
    let versions_before = versions(s.home.path());

    let big = vec![b'a'; 5000];
    let corrupt_pdf: &[u8] = b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R";
    let text_only: &[u8] = b"fine text";
    let cases: Vec<RefusedCase> = vec![
        (
            "too large",
            vec![("ok.txt", text_only), ("big.txt", &big)],
            413,
            "payload_too_large",
            "files[1]",
            "too large",
        ),
        (
            "wrong type",
            vec![("tool.exe", b"MZ\x90\x00")],
            415,
            "unsupported_media_type",
            "files[0]",
            "not an accepted type",
        ),
        (
            "a PDF named .txt",
            vec![("paper.txt", PDF)],
            415,
            "unsupported_media_type",
            "files[0]",
            "PDF",
        ),
        (
            "binary named .md",
            vec![("x.md", b"\x00\x01\x02\x03")],
            415,
            "unsupported_media_type",
            "files[0]",
            "binary",
        ),
        (
            "empty",
            vec![("ok.txt", text_only), ("empty.txt", b"")],
            400,
            "invalid_field",
            "files[1]",
            "empty",
        ),
        (
            "corrupt PDF",
            vec![("broken.pdf", corrupt_pdf)],
            422,
            "unreadable_file",
            "files[0]",
            "not a readable PDF",
        ),
        (
            "not a PDF at all",
            vec![("fake.pdf", text_only)],
            422,
            "unreadable_file",
            "files[0]",
            "PDF header",
        ),
        (
            "no text",
            vec![("blank.md", b"   \n\n  ")],
            422,
            "unreadable_file",
            "files[0]",
            "no text",
        ),
        (
            "too many files",
            vec![
                ("1.txt", text_only),
                ("2.txt", text_only),
                ("3.txt", text_only),
                ("4.txt", text_only),
            ],
            413,
            "payload_too_large",
            "files",
            "uploads.max_files",
        ),
        (
            "too many documents in the collection",
            vec![
                ("1.txt", text_only),
                ("2.txt", text_only),
                ("3.txt", text_only),
            ],
            400,
            "invalid_field",
            "files",
            "uploads.max_documents",
        ),
        (
            "no files",
            vec![],
            400,
            "invalid_field",
            "files",
            "at least one",
        ),
    ];
    for (what, files, status, code, field, reason) in cases {
        let r = upload(&alice, "notes", &files).await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (status, code, field),
            "{what}: {:?}",
            r.body
        );
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(reason), "{what}: {message}");
        // Nothing half-indexed: same status and counts, no staging directory, same results.
        let after = alice.get("/v1/collections/notes").await.body["collection"].clone();
        assert_eq!(after["status"], "ready", "{what}");
        assert_eq!(after["documents"], before["documents"], "{what}");
        assert_eq!(after["passages"], before["passages"], "{what}");
        assert_eq!(versions(s.home.path()), versions_before, "{what}");
        assert_eq!(result_ids(&alice.get(search).await), hits_before, "{what}");
    }

    // A part not named "files" is refused by name.
    let (content_type, body) = multipart(&[("a.txt", b"x")]);
    let body = String::from_utf8(body)
        .unwrap()
        .replace("name=\"files\"", "name=\"document\"");
    let r = alice
        .raw(
            "POST",
            "/v1/collections/notes/documents",
            &content_type,
            body.into_bytes(),
        )
        .await;
    assert_eq!((r.status, r.field()), (400, "document"), "{:?}", r.body);
    // Not multipart at all.
    let r = alice
        .raw(
            "POST",
            "/v1/collections/notes/documents",
            "text/plain",
            b"hello".to_vec(),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_cut_off_by_a_stop_is_failed_and_its_leftovers_removed() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let user_id = alice.get("/v1/users/me").await.body["user"]["id"]
        .as_i64()
        .unwrap();
    assert_eq!(
        alice
            .post("/v1/collections", json!({"name": "notes"}))
            .await
            .status,
        201
    );
    let r = upload(&alice, "notes", &[("otters.md", MARKDOWN.as_bytes())]).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    wait_indexed(&alice, "notes").await;
    let versions_before = versions(s.home.path());
    // What a stop in the middle of the next upload leaves: the row building, a half-written
    // version and the new symlink not yet renamed over the live one.
    sqlx::query("UPDATE collections SET status = 'building' WHERE name = 'notes'")
        .execute(s._db.store.pool())
        .await
        .unwrap();
    let owner = s
        .home
        .path()
        .join(format!("collections/.private/{user_id}"));
    std::fs::create_dir_all(owner.join(".v-0123456789abcdef/notes/tantivy")).unwrap();
    std::fs::write(owner.join(".v-0123456789abcdef/documents.jsonl"), "{}").unwrap();
    std::os::unix::fs::symlink(
        ".v-0123456789abcdef/notes",
        owner.join(".v-0123456789abcdef.link"),
    )
    .unwrap();

    // The start-up recovery of a new process over the same database and directory.
    let mut config = s._db.config();
    config.home = s.home.path().to_path_buf();
    let restarted = CollectionService::new(
        s._db.store.clone(),
        CollectionRegistry::new(config.collections_dir()),
        config.uploads,
    );
    assert_eq!(restarted.recover().await.unwrap(), 1);
    assert_eq!(versions(s.home.path()), versions_before);
    let c = alice.get("/v1/collections/notes").await.body["collection"].clone();
    assert_eq!(c["status"], "failed", "{c}");
    assert!(
        c["error"]
            .as_str()
            .unwrap()
            .contains("upload the files again"),
        "{c}"
    );
    assert_eq!(c["documents"], 1);
    // The documents it had are still searched, and the files can be uploaded again.
    let r = alice.get("/v1/collections/notes/search?q=otters").await;
    assert_eq!(result_ids(&r).len(), 1, "{:?}", r.body);
    let r = upload(
        &alice,
        "notes",
        &[("bell.txt", b"The brass bell was cast in 1911.")],
    )
    .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let c = wait_indexed(&alice, "notes").await;
    assert_eq!(
        (c["status"].as_str(), c["documents"].as_i64()),
        (Some("ready"), Some(2))
    );
    assert_eq!(restarted.recover().await.unwrap(), 0);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_collections_and_accounts_leave_no_files_behind() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let bob = new_user(&anon, "bob").await;
    let alice_id = alice.get("/v1/users/me").await.body["user"]["id"]
        .as_i64()
        .unwrap();
    let private = s.home.path().join("collections/.private");
    for name in ["notes", "otters"] {
        let r = alice.post("/v1/collections", json!({"name": name})).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        let r = upload(&alice, name, &[("otters.md", MARKDOWN.as_bytes())]).await;
        assert_eq!(r.status, 202, "{:?}", r.body);
        wait_indexed(&alice, name).await;
    }
    assert_eq!(versions(s.home.path()).len(), 2);

    // Another user cannot delete it (not found, as everywhere), nor anyone a shared collection.
    let r = bob.send("DELETE", "/v1/collections/notes", None).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let r = alice.send("DELETE", "/v1/collections/demo", None).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert_eq!(r.body["error"]["field"], "name");
    assert!(alice.get("/v1/collections/demo").await.status == 200);

    // The owner deletes it: gone from the listing, from search and from the disk.
    let r = alice.send("DELETE", "/v1/collections/notes", None).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    assert_eq!(alice.get("/v1/collections/notes").await.status, 404);
    let r = alice.get("/v1/collections/notes/search?q=otters").await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    assert_eq!(
        names(&alice.get("/v1/collections").await),
        ["demo", "otters"]
    );
    assert_eq!(versions(s.home.path()).len(), 1);
    assert!(!private.join(format!("{alice_id}/notes")).exists());
    assert_eq!(
        alice
            .send("DELETE", "/v1/collections/notes", None)
            .await
            .status,
        404
    );
    // The name is free again.
    let r = alice
        .post("/v1/collections", json!({"name": "notes"}))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);

    // Deleting the account removes every file of its collections.
    assert_eq!(alice.send("DELETE", "/v1/users/me", None).await.status, 204);
    assert!(!private.join(alice_id.to_string()).exists());

    // Files a server could not remove (it stopped first, or another server deleted the rows)
    // go at the next start-up: an owner with no collection, and a collection with no row.
    let bob_id = bob.get("/v1/users/me").await.body["user"]["id"]
        .as_i64()
        .unwrap();
    let r = bob.post("/v1/collections", json!({"name": "kept"})).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let ghost_owner = private.join("999999");
    std::fs::create_dir_all(ghost_owner.join(".v-00/gone/tantivy")).unwrap();
    std::os::unix::fs::symlink(".v-00/gone", ghost_owner.join("gone")).unwrap();
    let bob_dir = private.join(bob_id.to_string());
    std::fs::create_dir_all(bob_dir.join(".v-11/stale/tantivy")).unwrap();
    std::os::unix::fs::symlink(".v-11/stale", bob_dir.join("stale")).unwrap();
    let mut config = s._db.config();
    config.home = s.home.path().to_path_buf();
    let restarted = CollectionService::new(
        s._db.store.clone(),
        CollectionRegistry::new(config.collections_dir()),
        config.uploads,
    );
    restarted.recover().await.unwrap();
    assert!(!ghost_owner.exists());
    assert!(!bob_dir.join("stale").exists() && !bob_dir.join(".v-11").exists());
    assert!(bob_dir.join("kept").exists());
    assert_eq!(bob.get("/v1/collections/kept").await.status, 200);
    s.server.stop().await;
}

/// Sends an upload's request line and headers over a raw connection declaring `length` bytes
/// of body, then `sent` bytes of it (a part header and filler); the connection stays open.
async fn start_raw_upload(
    server: &api::RunningServer,
    token: &str,
    collection: &str,
    length: u64,
    sent: usize,
) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let boundary = "convrag-test-boundary-7d1f";
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /v1/collections/{collection}/documents HTTP/1.1\r\nHost: {}\r\n\
         Authorization: Bearer {token}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n\
         Content-Length: {length}\r\n\r\n",
        server.addr
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.txt\"\r\n\
         Content-Type: text/plain\r\n\r\n"
    )
    .into_bytes();
    body.resize(sent.max(body.len()), b'a');
    stream.write_all(&body).await.unwrap();
    stream
}

/// The status code of the response on a raw connection, within `wait`.
async fn raw_status(stream: &mut tokio::net::TcpStream, wait: Duration) -> u16 {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(wait, stream.read(&mut buf))
        .await
        .expect("the server answered in time")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    head.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {head:?}"))
}

/// Resident memory of this process (the server runs in it), in bytes.
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_refused_before_their_bodies_are_read() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let token = alice.token.clone().unwrap();
    let r = alice
        .post("/v1/collections", json!({"name": "notes"}))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);

    // A collection that does not exist: 404 after the headers alone (200 MB declared, none sent).
    let mut stream = start_raw_upload(&s.server, &token, "missing", 200 << 20, 0).await;
    assert_eq!(raw_status(&mut stream, Duration::from_secs(10)).await, 404);

    // Three uploads of 200 MB at once into a collection that can take 1 MiB more: each is
    // refused from its declared length, and the server's memory does not grow with them.
    let before = rss_bytes();
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(start_raw_upload(&s.server, &token, "notes", 200 << 20, 1 << 20).await);
    }
    for stream in &mut streams {
        assert_eq!(raw_status(stream, Duration::from_secs(10)).await, 413);
    }
    let grown = rss_bytes().saturating_sub(before);
    assert!(grown < 50 << 20, "RSS grew by {grown} bytes");

    // Nothing was stored.
    let r = alice.get("/v1/collections/notes").await;
    assert_eq!(r.body["collection"]["documents"], 0, "{:?}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_upload_body_times_out_and_uploads_in_progress_are_capped() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let token = alice.token.clone().unwrap();
    let r = alice
        .post("/v1/collections", json!({"name": "notes"}))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);

    // Two uploads that stall after their part header hold the user's two upload slots...
    let mut first = start_raw_upload(&s.server, &token, "notes", 2000, 200).await;
    let mut second = start_raw_upload(&s.server, &token, "notes", 2000, 200).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // ...so a third is refused at once, with a time to retry.
    let r = upload(&alice, "notes", &[("a.txt", b"a small note about otters")]).await;
    assert_eq!(r.status, 429, "{:?}", r.body);
    assert_eq!(r.body["error"]["code"], "rate_limited");
    assert_eq!(r.body["error"]["field"], "files");
    // The stalled bodies are cut off after uploads.body_idle_secs (2 s here) with 408.
    assert_eq!(raw_status(&mut first, Duration::from_secs(10)).await, 408);
    assert_eq!(raw_status(&mut second, Duration::from_secs(10)).await, 408);
    // Their slots are free again.
    let r = upload(&alice, "notes", &[("a.txt", b"a small note about otters")]).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
}

/// A name without an extension, or a part without a file name, does not type the document: its
/// contents do (a PDF, else UTF-8 text). An unknown extension or binary contents are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_without_a_typed_name_are_read_by_their_contents() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let r = alice
        .post("/v1/collections", json!({"name": "notes"}))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);

    // A README, a PDF named without an extension, and a text part without a file name.
    let (content_type, mut body) = multipart(&[
        (
            "README",
            b"Harbour seals haul out on the sandbars at low tide.".as_slice(),
        ),
        ("tide-pools", PDF),
    ]);
    let end = b"--convrag-test-boundary-7d1f--\r\n";
    body.truncate(body.len() - end.len());
    body.extend_from_slice(
        b"--convrag-test-boundary-7d1f\r\nContent-Disposition: form-data; name=\"files\"\r\n\r\n\
          Puffins nest in burrows on the cliffs of Skerry Head.\r\n",
    );
    body.extend_from_slice(end);
    let r = alice
        .raw(
            "POST",
            "/v1/collections/notes/documents",
            &content_type,
            body,
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let c = wait_indexed(&alice, "notes").await;
    assert_eq!(
        (&c["status"], &c["documents"]),
        (&json!("ready"), &json!(3)),
        "{c}"
    );
    for (query, url, title) in [
        (
            "harbour%20seals%20sandbars",
            "README",
            "Harbour seals haul out on the sandbars at low tide.",
        ),
        ("violet%20sea%20slug%20Glaucilla", "tide-pools", ""),
        (
            "puffins%20burrows%20Skerry",
            "document-3",
            "Puffins nest in burrows on the cliffs of Skerry Head.",
        ),
    ] {
        let r = alice
            .get(&format!("/v1/collections/notes/search?q={query}"))
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.body["results"][0]["url"], url, "{query}: {:?}", r.body);
        if !title.is_empty() {
            assert_eq!(r.body["results"][0]["title"], title, "{:?}", r.body);
        }
    }

    for (files, reason) in [
        (
            vec![("photo.png", b"\x89PNG\r\n\x1a\n".as_slice())],
            "not an accepted type",
        ),
        (vec![("LICENSE", b"\x00\x01\x02\x03".as_slice())], "binary"),
    ] {
        let r = upload(&alice, "notes", &files).await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (415, "unsupported_media_type", "files[0]"),
            "{:?}",
            r.body
        );
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(reason), "{message}");
    }
    s.server.stop().await;
}

/// A body that never pauses long enough for the idle timeout is still cut at the upload's
/// overall deadline (`uploads.deadline_secs`, 4 s here, for a small declared length).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_upload_is_cut_at_its_deadline() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let token = alice.token.clone().unwrap();
    let r = alice
        .post("/v1/collections", json!({"name": "notes"}))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);

    let started = std::time::Instant::now();
    let mut stream = start_raw_upload(&s.server, &token, "notes", 3000, 200).await;
    let mut buf = vec![0u8; 4096];
    let answer = loop {
        assert!(started.elapsed() < Duration::from_secs(20), "no answer");
        // A byte every 0.5 s: the 2 s idle timeout never fires.
        match tokio::time::timeout(Duration::from_millis(500), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => break String::from_utf8_lossy(&buf[..n]).to_string(),
            Ok(_) => panic!("closed without an answer"),
            Err(_) => {
                let _ = stream.write_all(b"a").await;
            }
        }
    };
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("uploads.deadline_secs"), "{answer}");
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(8),
        "{took:?}"
    );
}

/// A user's second upload takes a slot only while half the server's slots are free, so a few
/// accounts holding two uploads each leave slots to everyone else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_slots_are_shared_across_users() {
    let s = setup().await;
    let anon = Client::new(&s.server, None);
    let mut users = Vec::new();
    for name in ["u1", "u2", "u3", "u4"] {
        let user = new_user(&anon, name).await;
        let r = user.post("/v1/collections", json!({"name": "notes"})).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        users.push(user);
    }
    let token = |i: usize| users[i].token.clone().unwrap();
    // u1 and u2 take two slots each (4 of 8): stalled after their part headers.
    let mut held = Vec::new();
    for i in [0, 0, 1, 1] {
        held.push(start_raw_upload(&s.server, &token(i), "notes", 2000, 200).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // u3 takes one, but not a second while others may be waiting.
    held.push(start_raw_upload(&s.server, &token(2), "notes", 2000, 200).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = upload(
        &users[2],
        "notes",
        &[("a.txt", b"a small note about otters")],
    )
    .await;
    assert_eq!((r.status, r.code()), (429, "rate_limited"), "{:?}", r.body);
    // u4, holding none, gets one at once.
    let r = upload(
        &users[3],
        "notes",
        &[("a.txt", b"a small note about otters")],
    )
    .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    // The stalled ones are cut (idle timeout) and free their slots.
    for stream in &mut held {
        assert_eq!(raw_status(stream, Duration::from_secs(10)).await, 408);
    }
    let r = upload(
        &users[2],
        "notes",
        &[("a.txt", b"a small note about otters")],
    )
    .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
}
