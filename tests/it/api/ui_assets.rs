//! The chat page's files as the server serves them: every file the page and its modules refer to
//! is served with its content type, revalidation works, nothing refers to another origin, and
//! the page runs no inline code (so the Content-Security-Policy can forbid it).

use crate::common;

use std::collections::BTreeSet;

use common::TestDb;
use convrag::api::assets::{ASSETS, CONTENT_SECURITY_POLICY, INDEX, VENDORED};

/// Values of `attr="..."` in an HTML text.
fn attribute_values(html: &str, attr: &str) -> Vec<String> {
    let needle = format!("{attr}=\"");
    let mut values = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(&needle) {
        let after = &rest[start + needle.len()..];
        let end = after.find('"').expect("attribute value is closed");
        values.push(after[..end].to_string());
        rest = &after[end..];
    }
    values
}

/// Module specifiers of the static `import ... from "./x.js"` lines of a script.
fn imports(script: &str) -> Vec<String> {
    script
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let from = line.strip_prefix("} from ").or_else(|| {
                line.starts_with("import ")
                    .then(|| line.rsplit_once(" from ").map(|(_, f)| f))
                    .flatten()
            })?;
            Some(from.trim_end_matches(';').trim_matches('"').to_string())
        })
        .collect()
}

#[test]
fn every_file_in_static_is_compiled_in() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("static");
    let files = |dir: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    // static/vendor/ also holds the licences and the README of what is vendored.
    let vendored: BTreeSet<String> = files(&dir.join("vendor"))
        .into_iter()
        .filter(|f| f.ends_with(".js") || f.ends_with(".mjs"))
        .collect();
    assert_eq!(
        vendored,
        VENDORED
            .iter()
            .map(|v| v.to_string())
            .collect::<BTreeSet<_>>()
    );
    let on_disk: BTreeSet<String> = files(&dir).into_iter().chain(vendored).collect();
    let compiled: BTreeSet<String> = std::iter::once(INDEX.name)
        .chain(ASSETS.iter().map(|a| a.name))
        .map(str::to_string)
        .collect();
    assert_eq!(on_disk, compiled, "static/ and api::assets::ASSETS differ");
}

/// The stream parser is imported by node too (tests/ui/stream.test.mjs, the SSE contract test):
/// it and every module it imports use no browser-only global.
#[test]
fn the_stream_parser_and_its_imports_use_no_dom() {
    let mut queue = vec!["stream.js".to_string()];
    let mut seen = BTreeSet::new();
    while let Some(name) = queue.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let asset = ASSETS
            .iter()
            .find(|a| a.name == name)
            .unwrap_or_else(|| panic!("{name} is not compiled in"));
        for global in [
            "document",
            "window",
            "localStorage",
            "sessionStorage",
            "location",
            "history",
            "navigator",
        ] {
            assert!(
                !asset.body.contains(&format!("{global}.")),
                "{name} uses {global}"
            );
        }
        queue.extend(imports(asset.body).into_iter().map(|specifier| {
            specifier
                .strip_prefix("./")
                .unwrap_or_else(|| panic!("{name} imports {specifier}: not ./-relative"))
                .to_string()
        }));
    }
    assert_eq!(
        seen,
        BTreeSet::from(["stream.js".to_string(), "errors.js".to_string()])
    );
}

#[test]
fn the_page_runs_no_inline_code_and_names_no_other_origin() {
    let html = INDEX.body;
    // Every <script> has a src; no inline handlers or styles.
    assert_eq!(
        html.matches("<script").count(),
        attribute_values(html, "src").len()
    );
    assert!(!html.contains("<style"), "inline <style> in index.html");
    assert!(!html.contains(" style=\""), "inline style attribute");
    for handler in [
        " onclick=",
        " onload=",
        " onsubmit=",
        " oninput=",
        " onerror=",
    ] {
        assert!(!html.contains(handler), "inline handler {handler}");
    }
    let own = ASSETS.iter().filter(|a| !VENDORED.contains(&a.name));
    for asset in std::iter::once(&INDEX).chain(own) {
        for scheme in ["http://", "https://", "//fonts.", "cdn"] {
            assert!(
                !asset.body.contains(scheme),
                "{} refers to another origin ({scheme})",
                asset.name
            );
        }
        // Markup is built with text nodes only: no HTML injection from passage texts.
        assert!(
            !asset.body.contains("innerHTML"),
            "{} uses innerHTML",
            asset.name
        );
    }
    assert!(CONTENT_SECURITY_POLICY.contains("script-src 'self'"));
    assert!(CONTENT_SECURITY_POLICY.contains("connect-src 'self'"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_everything_it_loads_is_served() {
    let db = TestDb::new().await;
    let server = db.serve();
    let http = reqwest::Client::new();

    let page = http.get(server.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(
        page.headers()["content-security-policy"],
        CONTENT_SECURITY_POLICY
    );
    assert_eq!(page.headers()["cache-control"], "no-cache");
    let page_etag = page.headers()["etag"].to_str().unwrap().to_string();
    assert_eq!(page.text().await.unwrap(), INDEX.body);

    // Follow the page's references and the modules' imports: each must be served, as what type.
    let mut referenced: BTreeSet<String> = attribute_values(INDEX.body, "src")
        .into_iter()
        .chain(attribute_values(INDEX.body, "href"))
        .filter(|v| v.starts_with("/static/"))
        .collect();
    let mut queue: Vec<String> = referenced.iter().cloned().collect();
    while let Some(path) = queue.pop() {
        let r = http.get(server.url(&path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let expected = if path.ends_with(".js") || path.ends_with(".mjs") {
            "text/javascript; charset=utf-8"
        } else if path.ends_with(".css") {
            "text/css; charset=utf-8"
        } else {
            panic!("unexpected kind of file {path}")
        };
        assert_eq!(r.headers()["content-type"], expected, "{path}");
        assert_eq!(r.headers()["x-content-type-options"], "nosniff");
        let body = r.text().await.unwrap();
        if path.ends_with(".js") || path.ends_with(".mjs") {
            for specifier in imports(&body) {
                let target = format!(
                    "/static/{}",
                    specifier
                        .strip_prefix("./")
                        .unwrap_or_else(|| panic!("{path} imports {specifier}: not ./-relative"))
                );
                if referenced.insert(target.clone()) {
                    queue.push(target);
                }
            }
        }
    }
    // No compiled-in file is dead weight.
    let all: BTreeSet<String> = ASSETS
        .iter()
        .map(|a| format!("/static/{}", a.name))
        .collect();
    assert_eq!(referenced, all);

    // Revalidation: the same ETag gives 304 without a body; another gives the file.
    let again = http
        .get(server.url("/"))
        .header("if-none-match", &page_etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert!(again.bytes().await.unwrap().is_empty());
    let changed = http
        .get(server.url("/static/app.js"))
        .header("if-none-match", &page_etag)
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200);

    // An unknown file: the JSON envelope, not a route error.
    let missing = http
        .get(server.url("/static/missing.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body: serde_json::Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not_found");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("app.js"));
    server.stop().await;
}
