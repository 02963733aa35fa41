//! Request extractors that fail with the API's error envelope: JSON bodies (size limit, field path
//! of every error), query strings, path ids, and bearer-token authentication.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::error::{ApiError, ErrorCode};
use super::AppState;
use crate::store::idempotency::{self, IdempotencyKey};
use crate::store::User;

type LocalFuture<T> = Pin<Box<dyn Future<Output = Result<T, ApiError>>>>;

/// A JSON body. Errors name the offending field (`ptkb[2].text`, `title`, ...).
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for ApiJson<T> {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let limit = req
            .app_data::<web::Data<AppState>>()
            .map(|s| s.config.max_body_bytes)
            .unwrap_or(1024 * 1024);
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.to_ascii_lowercase());
        let declared_length = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        let mut payload = payload.take();
        Box::pin(async move {
            if let Some(ct) = &content_type {
                let essence = ct.split(';').next().unwrap_or_default().trim();
                if essence != "application/json" && !essence.ends_with("+json") {
                    return Err(ApiError::new(
                        ErrorCode::UnsupportedMediaType,
                        format!("expected Content-Type: application/json, got {essence:?}"),
                    ));
                }
            }
            let too_large = || {
                ApiError::new(
                    ErrorCode::PayloadTooLarge,
                    format!("request body larger than the limit of {limit} bytes"),
                )
            };
            if declared_length.is_some_and(|n| n > limit) {
                return Err(too_large());
            }
            let mut body = web::BytesMut::new();
            while let Some(chunk) = payload.next().await {
                let chunk = chunk.map_err(|e| match e {
                    actix_web::error::PayloadError::Overflow => too_large(),
                    other => ApiError::new(
                        ErrorCode::MalformedJson,
                        format!("cannot read body: {other}"),
                    ),
                })?;
                if body.len() + chunk.len() > limit {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
            parse_json(&body).map(ApiJson)
        })
    }
}

/// A JSON body that may be left out (no body at all): then `T::default()`.
pub struct OptionalJson<T>(pub T);

impl<T: DeserializeOwned + Default + 'static> FromRequest for OptionalJson<T> {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let length = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<usize>().ok());
        let chunked = req.headers().contains_key(header::TRANSFER_ENCODING);
        if length == Some(0) || (length.is_none() && !chunked) {
            return Box::pin(async { Ok(OptionalJson(T::default())) });
        }
        let body = ApiJson::<T>::from_request(req, payload);
        Box::pin(async move { body.await.map(|ApiJson(value)| OptionalJson(value)) })
    }
}

/// Deserializes `body`, naming the field of any error.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::new(
            ErrorCode::MalformedJson,
            "request body is empty; expected a JSON object",
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        match inner.classify() {
            serde_json::error::Category::Syntax
            | serde_json::error::Category::Eof
            | serde_json::error::Category::Io => {
                ApiError::new(ErrorCode::MalformedJson, format!("malformed JSON: {inner}"))
            }
            serde_json::error::Category::Data => {
                let message = strip_position(&inner.to_string());
                ApiError::invalid(field_of(&path, &message), message)
            }
        }
    })?;
    deserializer
        .end()
        .map_err(|e| ApiError::new(ErrorCode::MalformedJson, format!("malformed JSON: {e}")))?;
    Ok(value)
}

/// serde reports unknown and missing fields at the parent's path; name the field itself.
fn field_of(path: &str, message: &str) -> String {
    let named = ["unknown field `", "missing field `"]
        .iter()
        .find_map(|prefix| {
            let start = message.find(prefix)? + prefix.len();
            let end = message[start..].find('`')? + start;
            Some(message[start..end].to_string())
        });
    match (path, named) {
        (".", Some(name)) => name,
        // Unknown fields are already part of the path; missing ones are not.
        (p, Some(name)) if p == name || p.ends_with(&format!(".{name}")) => p.to_string(),
        (parent, Some(name)) => format!("{parent}.{name}"),
        (".", None) => "body".to_string(),
        (p, None) => p.to_string(),
    }
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// A query string, rejected with the envelope (and the parameter's name) when invalid.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for ApiQuery<T> {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let query = req.query_string();
        let deserializer = serde_urlencoded_deserializer(query);
        std::future::ready(deserializer.map(ApiQuery))
    }
}

fn serde_urlencoded_deserializer<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let deserializer =
        serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        let field = field_of(&path, &message);
        ApiError::invalid(
            if field == "body" {
                "query".to_string()
            } else {
                field
            },
            message,
        )
    })
}

/// Parses an id from the path, naming the parameter when it is not a UUID.
/// The request's `Idempotency-Key` for `route` and its parsed `body` (`None` without the header).
pub fn idempotency_key<B: serde::Serialize>(
    req: &HttpRequest,
    route: &str,
    body: &B,
) -> Result<Option<IdempotencyKey>, ApiError> {
    let Some(value) = req.headers().get(idempotency::HEADER) else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .map_err(|_| ApiError::invalid(idempotency::HEADER, "must be visible ASCII characters"))?;
    let body = serde_json::to_value(body)
        .map_err(|e| ApiError::new(ErrorCode::Internal, format!("request body: {e}")))?;
    Ok(Some(IdempotencyKey::new(key, route, &body)?))
}

/// Header marking an answer replayed from an `Idempotency-Key` record.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

pub fn parse_uuid(name: &str, value: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(value)
        .map_err(|_| ApiError::invalid(name, format!("{value:?} is not a valid id")))
}

/// The authenticated user of a request (`Authorization: Bearer <token>`).
pub struct AuthUser(pub User);

fn bearer(req: &HttpRequest) -> Result<String, ApiError> {
    let value = req.headers().get(header::AUTHORIZATION).ok_or_else(|| {
        ApiError::new(
            ErrorCode::MissingToken,
            "missing Authorization: Bearer <token> header",
        )
    })?;
    let value = value.to_str().map_err(|_| {
        ApiError::new(
            ErrorCode::InvalidToken,
            "Authorization header is not valid text",
        )
    })?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidToken,
                "expected Authorization: Bearer <token>",
            )
        })?;
    Ok(token.to_string())
}

impl FromRequest for AuthUser {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let token = bearer(req);
        let state = req.app_data::<web::Data<AppState>>().cloned();
        Box::pin(async move {
            let token = token?;
            let state = state
                .ok_or_else(|| ApiError::new(ErrorCode::Internal, "application state missing"))?;
            // Unknown, expired, revoked, or a disabled user's: each with its own code.
            Ok(AuthUser(state.store.authenticate(&token).await?))
        })
    }
}

/// A request made with the administrator token or the token of a user who is an administrator.
pub struct AdminAuth;

impl FromRequest for AdminAuth {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let token = bearer(req);
        let state = req.app_data::<web::Data<AppState>>().cloned();
        Box::pin(async move {
            let token = token?;
            let state = state
                .ok_or_else(|| ApiError::new(ErrorCode::Internal, "application state missing"))?;
            // Compare digests so the comparison time does not depend on how much of the token matches.
            let given: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            let mut diff = 0u8;
            for (a, b) in given.iter().zip(state.admin_token_digest.iter()) {
                diff |= a ^ b;
            }
            if diff == 0 {
                return Ok(AdminAuth);
            }
            let refused = || {
                ApiError::new(
                    ErrorCode::AdminRequired,
                    "this operation needs the administrator token or an administrator's token",
                )
            };
            match state.store.authenticate(&token).await {
                Ok(user) if user.is_admin => Ok(AdminAuth),
                Ok(_) | Err(crate::store::StoreError::Unauthorized(_)) => Err(refused()),
                Err(e) => Err(e.into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        title: String,
        items: Vec<Item>,
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        text: String,
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse_json::<Body>(br#"{"title": 5, "items": []}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("title"));
        let e = parse_json::<Body>(br#"{"title": "t", "items": [{"text": "a"}, {"txt": "b"}]}"#)
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("items[1].txt"), "{e}");
        let e = parse_json::<Body>(br#"{"items": []}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("title"));
        let e = parse_json::<Body>(br#"{"title": "t", "items": [], "extra": 1}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("extra"));
    }

    #[test]
    fn syntax_errors_are_malformed_json() {
        let e = parse_json::<Body>(br#"{"title": "#).unwrap_err();
        assert_eq!(e.code, ErrorCode::MalformedJson);
        let e = parse_json::<Body>(b"   ").unwrap_err();
        assert_eq!(e.code, ErrorCode::MalformedJson);
        let e = parse_json::<Body>(br#"{"title": "t", "items": []} trailing"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::MalformedJson);
    }
}
