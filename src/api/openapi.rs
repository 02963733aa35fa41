//! The OpenAPI document of the API, kept by hand beside the routes; a test checks that it
//! documents exactly the routes in [`super::ROUTES`].

use actix_web::HttpResponse;

/// The document, as served.
pub const DOCUMENT: &str = include_str!("openapi.json");

/// `GET /v1/openapi.json`
pub async fn document() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(DOCUMENT)
}

/// (method, path) of every operation in the document, upper-case methods.
pub fn operations() -> Result<Vec<(String, String)>, serde_json::Error> {
    let doc: serde_json::Value = serde_json::from_str(DOCUMENT)?;
    let mut ops = Vec::new();
    if let Some(paths) = doc.get("paths").and_then(|p| p.as_object()) {
        for (path, item) in paths {
            if let Some(item) = item.as_object() {
                for method in item.keys() {
                    if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                        ops.push((method.to_uppercase(), path.clone()));
                    }
                }
            }
        }
    }
    ops.sort();
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_matches_the_routes() {
        let mut routes: Vec<(String, String)> = super::super::ROUTES
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        routes.sort();
        assert_eq!(operations().unwrap(), routes);
    }
}
