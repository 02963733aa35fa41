//! Request extractors that fail with the API's error envelope: JSON bodies (size limit, field path
//! of every error), query strings, path ids, and bearer-token authentication.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::AppState;
use crate::store::idempotency::{self, IdempotencyKey};
use crate::store::User;
use crate::web::error::{ApiError, ErrorCode};

type LocalFuture<T> = Pin<Box<dyn Future<Output = Result<T, ApiError>>>>;

/// A JSON body. Errors name the offending field (`ptkb[2].text`, `title`, ...). `NUL_ALLOWED`:
/// NUL characters are not refused (the handler checks the parts it reads).
pub struct ApiJson<T, const NUL_ALLOWED: bool = false>(pub T);

impl<T: DeserializeOwned + 'static, const NUL_ALLOWED: bool> FromRequest
    for ApiJson<T, NUL_ALLOWED>
{
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = json_body(req, payload);
        Box::pin(async move { parse_object(&body.await?, NUL_ALLOWED).map(ApiJson) })
    }
}

/// The bytes of a JSON body, refused when its `Content-Type` is not JSON or it is larger than
/// `max_body_bytes`.
fn json_body(req: &HttpRequest, payload: &mut Payload) -> LocalFuture<web::BytesMut> {
    let state = req.app_data::<web::Data<AppState>>();
    let limit = state.map_or(1024 * 1024, |s| s.config.max_body_bytes);
    let deadline_secs = state.map_or(30, |s| s.config.limits.body_read_secs);
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
        let expected = declared_length.unwrap_or(0);
        read_body(
            &mut payload,
            limit,
            expected,
            deadline_secs,
            too_large,
            |e| ApiError::new(ErrorCode::MalformedJson, format!("cannot read body: {e}")),
        )
        .await
    })
}

/// A request body of at most `limit` bytes, stopping at the first byte beyond it
/// (`too_large`), within the body deadline (`super::deadline`: 408 naming
/// `limits.body_read_secs`); other read errors are `unreadable`'s. `expected` (the declared
/// length) sizes the buffer once, rather than doubling it up to twice the body.
pub async fn read_body(
    payload: &mut Payload,
    limit: usize,
    expected: usize,
    deadline_secs: u64,
    too_large: impl Fn() -> ApiError,
    unreadable: impl Fn(actix_web::error::PayloadError) -> ApiError,
) -> Result<web::BytesMut, ApiError> {
    let mut body = web::BytesMut::with_capacity(expected.min(limit));
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| match e {
            actix_web::error::PayloadError::Overflow => too_large(),
            e if super::deadline::is_deadline(&e) => super::deadline::deadline_error(deadline_secs),
            other => unreadable(other),
        })?;
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A JSON body that may be left out (no body at all, or the JSON `null` the document allows
/// for it): then `T::default()`.
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
        let body = json_body(req, payload);
        Box::pin(async move {
            let body = body.await?;
            if body.trim_ascii() == b"null" {
                return Ok(OptionalJson(T::default()));
            }
            parse_object(&body, false).map(OptionalJson)
        })
    }
}

/// Deserializes a JSON object from `body`, naming the field of any error. Strings holding NUL
/// are refused (PostgreSQL text cannot hold it: better a 400 naming the field than a failure
/// storing it).
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    parse_object(body, false)
}

/// What [`parse_json`] does, with `nul_allowed` for bodies whose unread parts may hold anything.
fn parse_object<T: DeserializeOwned>(body: &[u8], nul_allowed: bool) -> Result<T, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::new(
            ErrorCode::MalformedJson,
            "request body is empty; expected a JSON object",
        ));
    }
    let mut value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::new(ErrorCode::MalformedJson, format!("malformed JSON: {e}")))?;
    // serde would read a struct from an array of its fields in order too.
    if !value.is_object() {
        return Err(ApiError::invalid("body", "expected a JSON object"));
    }
    if !nul_allowed {
        if let Some(field) = nul_field(&value, String::new()) {
            return Err(ApiError::invalid(field, "must not contain NUL characters"));
        }
    }
    integral_floats(&mut value);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        ApiError::invalid(field_of(&path, &message), message)
    })
}

/// `3.0` is an integer to JSON Schema (and to the OpenAPI document): read it as `3`.
fn integral_floats(value: &mut serde_json::Value) {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every integer up to it is an exact f64
    match value {
        serde_json::Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() <= EXACT) {
                *value = if f < 0.0 {
                    serde_json::Value::from(f as i64)
                } else {
                    serde_json::Value::from(f as u64)
                };
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(integral_floats),
        serde_json::Value::Object(map) => map.values_mut().for_each(integral_floats),
        _ => {}
    }
}

/// The path of the first string (or key) holding a NUL character.
fn nul_field(value: &serde_json::Value, path: String) -> Option<String> {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match value {
        serde_json::Value::String(s) if s.contains('\0') => {
            Some(if path.is_empty() { "body".into() } else { path })
        }
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_field(item, format!("{path}[{i}]"))),
        serde_json::Value::Object(map) => map.iter().find_map(|(key, item)| {
            if key.contains('\0') {
                Some(join(key))
            } else {
                nul_field(item, join(key))
            }
        }),
        _ => None,
    }
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

/// The authenticated user of a request, the token used and when it expires (`None`: never).
pub struct AuthToken {
    pub user: User,
    pub token_id: i64,
    pub expires_at: Option<DateTime<Utc>>,
}

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

impl FromRequest for AuthToken {
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
            let authenticated = state.users.authenticate(&token).await?;
            Ok(AuthToken {
                user: authenticated.user,
                token_id: authenticated.token_id,
                expires_at: authenticated.token_expires_at,
            })
        })
    }
}

impl FromRequest for AuthUser {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let token = AuthToken::from_request(req, payload);
        Box::pin(async move { Ok(AuthUser(token.await?.user)) })
    }
}

/// A request made with the administrator token or the token of a user who is an administrator.
pub struct AdminAuth {
    /// When the token used expires (`None`: never, as the administrator token).
    pub expires_at: Option<DateTime<Utc>>,
}

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
                return Ok(AdminAuth { expires_at: None });
            }
            let refused = || {
                ApiError::new(
                    ErrorCode::AdminRequired,
                    "this operation needs the administrator token or an administrator's token",
                )
            };
            // An unknown, expired or revoked token (or a disabled user's) keeps its own 401 code,
            // as on every other route: only a valid token of a non-administrator is 403.
            match state.users.authenticate(&token).await {
                Ok(authenticated) if authenticated.user.is_admin => Ok(AdminAuth {
                    expires_at: authenticated.token_expires_at,
                }),
                Ok(_) => Err(refused()),
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
        let e = parse_json::<Body>(br#"["t", []]"#).unwrap_err();
        assert_eq!(
            (e.code, e.field.as_deref()),
            (ErrorCode::InvalidField, Some("body"))
        );
        let e =
            parse_json::<Body>(br#"{"title": "t", "items": [{"text": "a\u0000b"}]}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("items[0].text"), "{e}");
        assert_eq!(e.code, ErrorCode::InvalidField);
    }

    #[test]
    fn integral_floats_are_integers() {
        #[derive(serde::Deserialize, Debug)]
        struct Limits {
            max_words: usize,
            weight: f64,
        }
        let limits = parse_json::<Limits>(br#"{"max_words": 439.0, "weight": 2.0}"#).unwrap();
        assert_eq!((limits.max_words, limits.weight), (439, 2.0));
        let e = parse_json::<Limits>(br#"{"max_words": 439.5, "weight": 2}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("max_words"));
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
