//! The web UI (`static/`): the page at `/` and its files at `/static/{file}`, compiled into the
//! binary so the server stays one self-contained file. Served with an ETag (revalidated on every
//! load, so a new binary's files are picked up at once) and a same-origin-only content policy.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use sha2::{Digest, Sha256};

use crate::web::error::{ApiError, ErrorCode};
use utoipa::openapi::schema::{ObjectBuilder, Type};

/// One compiled-in file.
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static str,
}

/// The page at `/`.
pub const INDEX: Asset = Asset {
    name: "index.html",
    content_type: "text/html; charset=utf-8",
    body: include_str!("../../static/index.html"),
};

/// The files under `/static/`.
pub const ASSETS: &[Asset] = &[
    // Vendored, pinned (static/vendor/README.md): the Markdown renderer and the sanitizer.
    Asset {
        name: "marked.esm.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/vendor/marked.esm.js"),
    },
    Asset {
        name: "purify.es.mjs",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/vendor/purify.es.mjs"),
    },
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../static/app.css"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/app.js"),
    },
    Asset {
        name: "api.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/api.js"),
    },
    Asset {
        name: "errors.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/errors.js"),
    },
    Asset {
        name: "stream.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/stream.js"),
    },
    Asset {
        name: "state.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/state.js"),
    },
    Asset {
        name: "runs-view.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/runs-view.js"),
    },
    Asset {
        name: "dom.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/dom.js"),
    },
    Asset {
        name: "session.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/session.js"),
    },
    Asset {
        name: "drawers.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/drawers.js"),
    },
    Asset {
        name: "conversation-list.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/conversation-list.js"),
    },
    Asset {
        name: "sign-in-link.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/sign-in-link.js"),
    },
    Asset {
        name: "collection-status.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/collection-status.js"),
    },
    Asset {
        name: "new-conversation.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/new-conversation.js"),
    },
    Asset {
        name: "conversation.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/conversation.js"),
    },
    Asset {
        name: "composer.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/composer.js"),
    },
    Asset {
        name: "turn-settings.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/turn-settings.js"),
    },
    Asset {
        name: "turn-view.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/turn-view.js"),
    },
    Asset {
        name: "regenerate.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/regenerate.js"),
    },
    Asset {
        name: "passage-dialog.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/passage-dialog.js"),
    },
    Asset {
        name: "ptkb-panel.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/ptkb-panel.js"),
    },
    Asset {
        name: "documents-panel.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/documents-panel.js"),
    },
    Asset {
        name: "profile-panel.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/profile-panel.js"),
    },
    Asset {
        name: "render.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/render.js"),
    },
];

/// The files of [`ASSETS`] copied unchanged from upstream packages (`static/vendor/`, pinned and
/// checked by `scripts/vendor-js.sh`): their text names other origins in comments and XML
/// namespaces, and DOMPurify parses with `innerHTML`, which the page's own modules never use.
pub const VENDORED: &[&str] = &["marked.esm.js", "purify.es.mjs"];

/// The page may load and call only its own origin and runs no inline code: nothing it shows
/// (passage texts, titles, URLs) can make the browser fetch from elsewhere.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'";

fn etag(asset: &Asset) -> String {
    let digest = Sha256::digest(asset.body.as_bytes());
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

fn serve(req: &HttpRequest, asset: &Asset) -> HttpResponse {
    let tag = etag(asset);
    let fresh = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let mut response = if fresh {
        HttpResponse::NotModified()
    } else {
        HttpResponse::Ok()
    };
    response
        .insert_header((header::ETAG, tag))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY));
    if fresh {
        response.finish()
    } else {
        response.content_type(asset.content_type).body(asset.body)
    }
}

/// `GET /`: the chat page.
#[utoipa::path(get, path = "/", operation_id = "index", tag = "page", security(()),
    params(("If-None-Match" = Option<String>, Header, description = "An ETag from an earlier answer")),
    responses(
        (status = 200, description = "The chat page", content_type = "text/html; charset=utf-8", body = String),
        (status = 304, description = "Unchanged since the ETag given"),
    ))]
pub async fn index(req: HttpRequest) -> HttpResponse {
    serve(&req, &INDEX)
}

/// `/static/{file}` serves the files of [`ASSETS`]: the document lists their names.
pub(super) struct StaticFileNames;

impl utoipa::Modify for StaticFileNames {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let operation = doc
            .paths
            .paths
            .get_mut("/static/{file}")
            .and_then(|item| item.get.as_mut());
        let params = operation
            .into_iter()
            .flat_map(|op| op.parameters.iter_mut().flatten());
        for param in params.filter(|p| p.name == "file") {
            let names = ASSETS.iter().map(|a| a.name);
            param.schema = Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(names))
                    .into(),
            );
        }
    }
}

/// `GET /static/{file}` (the document lists the file names: [`ASSETS`])
#[utoipa::path(get, path = "/static/{file}", operation_id = "static_file", tag = "page", security(()),
    params(
        ("file" = String, Path, description = "A file of the page"),
        ("If-None-Match" = Option<String>, Header, description = "An ETag from an earlier answer"),
    ),
    responses(
        (status = 200, description = "The file",
            content((String = "text/javascript; charset=utf-8"), (String = "text/css; charset=utf-8"))),
        (status = 304, description = "Unchanged since the ETag given"),
    ))]
pub async fn file(req: HttpRequest, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let name = path.into_inner();
    let asset = ASSETS.iter().find(|a| a.name == name).ok_or_else(|| {
        ApiError::new(
            ErrorCode::NotFound,
            format!("no static file {name:?}; the page's files are {}", names()),
        )
    })?;
    Ok(serve(&req, asset))
}

fn names() -> String {
    ASSETS.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
}
