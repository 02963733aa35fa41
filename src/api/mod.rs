//! The HTTP API under `/v1`: thin actix handlers, split by resource, that call the store and the
//! pipeline. Errors go through [`error`], the single mapping to HTTP.

pub mod assets;
pub mod collections;
pub mod conversations;
pub mod embeddings;
pub mod health;
pub mod metrics;
pub mod model;
pub mod openai;
pub mod openapi;
pub mod profile;
pub mod ptkb;
pub mod responses;
pub mod runs;
pub mod sign_in;
pub mod turns;
pub mod users;

use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{Server, ServerHandle, ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method};
use actix_web::middleware::{from_fn, Condition, ErrorHandlerResponse, ErrorHandlers, Next};
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};

use crate::web::error::{ApiError, ErrorCode};
use crate::web::{AppState, REQUEST_ID, REQUEST_ID_HEADER};

/// Declares the routes once: the table (for the OpenAPI check and 405 answers) and their
/// registration cannot drift apart.
macro_rules! routes {
    ($( $method:ident $path:literal => $handler:path ),* $(,)?) => {
        /// Every route of the API as (method, path pattern).
        pub const ROUTES: &[(&str, &str)] = &[ $( (stringify!($method), $path) ),* ];

        fn register(cfg: &mut web::ServiceConfig) {
            $( cfg.route($path, web::method(Method::$method).to($handler)); )*
        }
    };
}

routes! {
    GET "/" => assets::index,
    GET "/static/{file}" => assets::file,
    GET "/healthz" => health::healthz,
    GET "/readyz" => health::readyz,
    GET "/metrics" => metrics::scrape,
    GET "/v1/openapi.json" => openapi::document,
    POST "/v1/users" => users::create,
    GET "/v1/users/me" => users::me,
    DELETE "/v1/users/me" => users::delete_me,
    POST "/v1/users/me/tokens" => users::create_token,
    GET "/v1/users/me/tokens" => users::list_tokens,
    DELETE "/v1/users/me/tokens/{token_id}" => users::revoke_token,
    POST "/v1/users/{user_id}/disable" => users::disable,
    POST "/v1/users/{user_id}/enable" => users::enable,
    POST "/v1/sign-in" => sign_in::sign_in,
    POST "/v1/conversations" => conversations::create,
    GET "/v1/conversations" => conversations::list,
    GET "/v1/conversations/{conversation_id}" => conversations::get,
    PATCH "/v1/conversations/{conversation_id}" => conversations::update,
    DELETE "/v1/conversations/{conversation_id}" => conversations::delete,
    GET "/v1/conversations/{conversation_id}/ptkb" => ptkb::list,
    POST "/v1/conversations/{conversation_id}/ptkb" => ptkb::add,
    PUT "/v1/conversations/{conversation_id}/ptkb/{statement_id}" => ptkb::edit,
    DELETE "/v1/conversations/{conversation_id}/ptkb/{statement_id}" => ptkb::remove,
    GET "/v1/conversations/{conversation_id}/turns" => turns::list,
    POST "/v1/conversations/{conversation_id}/turns" => turns::create,
    GET "/v1/conversations/{conversation_id}/turns/{turn_id}" => turns::get,
    GET "/v1/collections" => collections::list,
    POST "/v1/collections" => collections::create,
    GET "/v1/collections/{name}" => collections::get,
    DELETE "/v1/collections/{name}" => collections::delete,
    POST "/v1/collections/{name}/documents" => collections::upload,
    GET "/v1/collections/{name}/search" => collections::search,
    GET "/v1/models" => openai::models,
    GET "/v1/models/{model}" => openai::model,
    POST "/v1/chat/completions" => openai::chat_completions,
    POST "/v1/responses" => responses::create,
    GET "/v1/responses/{response_id}" => responses::get,
    POST "/v1/embeddings" => embeddings::create,
    GET "/v1/profile/statements" => profile::list,
    POST "/v1/profile/statements" => profile::add,
    DELETE "/v1/profile/statements/{statement_id}" => profile::remove,
    GET "/v1/runs" => runs::list,
    // Before `{run}`: `compare` is not a run's name here.
    GET "/v1/runs/compare" => runs::compare,
    GET "/v1/runs/{run}" => runs::get,
    DELETE "/v1/runs/{run}" => runs::delete,
    GET "/v1/qrels" => runs::list_qrels,
    PUT "/v1/qrels/{name}" => runs::put_qrels,
    DELETE "/v1/qrels/{name}" => runs::delete_qrels,
    POST "/mcp" => crate::mcp::http::post,
}

/// Registers the routes, the JSON fallbacks and the error-body rewriting on an actix app.
pub fn configure(cfg: &mut web::ServiceConfig) {
    register(cfg);
    cfg.default_service(web::to(fallback));
}

/// Whether errors on `path` take OpenAI's shape (the OpenAI-compatible endpoints, so that OpenAI
/// clients read every error the same way).
pub fn openai_shaped(path: &str) -> bool {
    path == "/v1/models"
        || path.starts_with("/v1/models/")
        || path == "/v1/chat/completions"
        || path.starts_with("/v1/chat/")
        || path == "/v1/responses"
        || path.starts_with("/v1/responses/")
}

/// What an OpenAI client that calls an endpoint convrag does not serve (legacy completions,
/// images, audio, ...) is told.
const OPENAI_SERVED: &str = "the OpenAI-compatible API serves GET /v1/models, \
    GET /v1/models/{model}, POST /v1/chat/completions, POST /v1/responses, \
    GET /v1/responses/{id} and POST /v1/embeddings";

/// Unknown path: 404 `route_not_found` (under `/v1/`, in OpenAI's error shape, naming the
/// OpenAI endpoints served, since OpenAI clients call paths convrag does not have); known path
/// with another method: 405 with `Allow`.
async fn fallback(req: HttpRequest) -> HttpResponse {
    let mut error = fallback_error(&req);
    let unknown_v1 = error.1.is_none() && req.path().starts_with("/v1/");
    if unknown_v1 {
        error.0.message = format!("{}; {OPENAI_SERVED}", error.0.message);
    }
    if unknown_v1 || openai_shaped(req.path()) {
        let mut response = error.0.to_openai_response();
        if let Some(allow) = error.1 {
            response.headers_mut().insert(header::ALLOW, allow);
        }
        return response;
    }
    let mut response = error.0.to_response();
    if let Some(allow) = error.1 {
        response.headers_mut().insert(header::ALLOW, allow);
    }
    response
}

/// The error of a request no route takes, with the `Allow` header of a 405.
fn fallback_error(req: &HttpRequest) -> (ApiError, Option<header::HeaderValue>) {
    let matching: Vec<&(&str, &str)> = ROUTES
        .iter()
        .filter(|(_, pattern)| actix_web::dev::ResourceDef::new(*pattern).is_match(req.path()))
        .collect();
    // A literal path (`/v1/runs/compare`) is its own resource, not the `{run}` beside it.
    let literal = matching.iter().any(|(_, pattern)| !pattern.contains('{'));
    let mut allowed: Vec<&str> = Vec::new();
    for (method, pattern) in matching {
        if (!literal || !pattern.contains('{')) && !allowed.contains(method) {
            allowed.push(method);
        }
    }
    if allowed.is_empty() {
        let error = ApiError::new(
            ErrorCode::RouteNotFound,
            format!("no route for {} {}", req.method(), req.path()),
        );
        (error, None)
    } else {
        let error = ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!(
                "{} is not allowed on {}; allowed: {}",
                req.method(),
                req.path(),
                allowed.join(", ")
            ),
        );
        (
            error,
            header::HeaderValue::from_str(&allowed.join(", ")).ok(),
        )
    }
}

/// Any error response that is not already our JSON envelope (actix's own plain-text defaults)
/// is rewritten into it, keeping the status.
fn json_error_bodies<B: MessageBody + 'static>(
    res: ServiceResponse<B>,
) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let is_json = res
        .response()
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let status = res.status();
    let code = match status.as_u16() {
        400 => ErrorCode::InvalidField,
        401 => ErrorCode::InvalidToken,
        404 => ErrorCode::RouteNotFound,
        405 => ErrorCode::MethodNotAllowed,
        413 => ErrorCode::PayloadTooLarge,
        415 => ErrorCode::UnsupportedMediaType,
        503 => ErrorCode::DatabaseUnavailable,
        _ => ErrorCode::Internal,
    };
    let message = status.canonical_reason().unwrap_or("error").to_string();
    let (req, _) = res.into_parts();
    let error = ApiError::new(code, message);
    let mut body = if openai_shaped(req.path()) {
        error.to_openai_response()
    } else {
        error.to_response()
    };
    *body.status_mut() = status;
    let res = ServiceResponse::new(req, body.map_into_boxed_body()).map_into_right_body();
    Ok(ErrorHandlerResponse::Response(res))
}

/// Browser pages of the configured origins may call the API (`/v1/*`, `/mcp`): preflights are
/// answered, and the answers carry `Access-Control-Allow-Origin`. The server's own page is
/// same-origin and always allowed.
fn cors(origins: Arc<Vec<String>>) -> actix_cors::Cors {
    let any = origins.iter().any(|o| o == "*");
    actix_cors::Cors::default()
        .allowed_origin_fn(move |origin, head| {
            let Ok(origin) = origin.to_str() else {
                return false;
            };
            any || origins.iter().any(|o| o == origin) || same_origin(origin, head)
        })
        .allowed_methods(["GET", "POST", "PUT", "PATCH", "DELETE"])
        // Any request header: SDKs send their own (openai-node's `x-stainless-*`), and the
        // token travels in `Authorization`, never in cookies (no credentials are allowed).
        .allow_any_header()
        .expose_headers([
            header::HeaderName::from_static("x-convrag-conversation-id"),
            header::HeaderName::from_static(REQUEST_ID_HEADER),
            header::RETRY_AFTER,
            header::WWW_AUTHENTICATE,
        ])
        .max_age(600)
}

/// Whether `origin` is the server's own (the `Host` the request was sent to).
fn same_origin(origin: &str, head: &actix_web::dev::RequestHead) -> bool {
    let host = head
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    let origin_host = origin.split_once("://").map(|(_, host)| host);
    matches!((host, origin_host), (Some(h), Some(o)) if h.eq_ignore_ascii_case(o))
}

/// Gives every request an id and a tracing span: handlers (and [`ApiError`]'s response) see the
/// id through `current_request_id`, and every response carries it as `X-Request-Id`. When traces
/// are exported the id is the span's trace id, so the id a client reports finds its trace.
async fn request_ids(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> actix_web::Result<ServiceResponse<impl MessageBody>> {
    use opentelemetry::trace::TraceContextExt;
    use tracing::Instrument;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    // The route pattern names the span, never the path with its ids (the pattern comes from the
    // app's resource map, known before routing; a trace's name is fixed once it has an id).
    let route = req.match_pattern();
    let name = match &route {
        Some(route) => format!("{} {route}", req.method()),
        None => format!("{} unmatched", req.method()),
    };
    let span = tracing::info_span!(
        "http_request",
        "otel.name" = name.as_str(),
        "otel.kind" = "server",
        "http.request.method" = %req.method(),
        "http.route" = route.as_deref().unwrap_or_default(),
        "http.response.status_code" = tracing::field::Empty,
    );
    let trace_id = span.context().span().span_context().trace_id();
    let id = if trace_id == opentelemetry::trace::TraceId::INVALID {
        uuid::Uuid::new_v4().simple().to_string()
    } else {
        trace_id.to_string()
    };
    let mut res = REQUEST_ID
        .scope(id.clone(), next.call(req))
        .instrument(span.clone())
        .await?;
    span.record("http.response.status_code", res.status().as_u16());
    if let Ok(value) = header::HeaderValue::from_str(&id) {
        res.headers_mut()
            .insert(header::HeaderName::from_static(REQUEST_ID_HEADER), value);
    }
    Ok(res)
}

/// Counts every request by its route pattern (never the raw path: ids would make a series per
/// conversation) and status, and times it until the response head.
async fn request_metrics(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> actix_web::Result<ServiceResponse<impl MessageBody>> {
    let m = crate::metrics::metrics();
    let started = std::time::Instant::now();
    // A closed set: any token is a method to HTTP, and this runs before routing and auth.
    let method = crate::metrics::method_label(req.method().as_str());
    m.http_in_flight.inc();
    let result = next.call(req).await;
    m.http_in_flight.dec();
    let (route, status) = match &result {
        Ok(res) => (
            res.request().match_pattern(),
            res.status().as_u16().to_string(),
        ),
        Err(e) => (
            None,
            e.as_response_error().status_code().as_u16().to_string(),
        ),
    };
    let route = route.unwrap_or_else(|| "unmatched".to_string());
    m.http_requests
        .with_label_values(&[method, &route, &status])
        .inc();
    m.http_duration
        .with_label_values(&[method, &route])
        .observe(started.elapsed().as_secs_f64());
    result
}

/// Binds an `HttpServer` and starts it, with its own signal handling only when asked; the bound
/// address and the server future. A macro because a function over `HttpServer<F, I, S, B>` must
/// name bounds on types of `actix-http` and `actix-service`, which are not our dependencies.
macro_rules! start {
    ($server:expr, $bind:expr, $handle_signals:expr, $what:literal) => {{
        let server = $server;
        let server = if $handle_signals {
            server
        } else {
            server.disable_signals()
        };
        let server = server.bind($bind)?;
        let addr = server
            .addrs()
            .first()
            .copied()
            .ok_or_else(|| std::io::Error::other(concat!($what, " bound to no address")))?;
        Ok((addr, server.run()))
    }};
}

/// A listener serving only `GET /metrics`, without a token: for `--metrics-bind`, an address
/// that only the monitoring system reaches.
pub fn metrics_server(
    state: web::Data<AppState>,
    bind: &str,
    handle_signals: bool,
) -> std::io::Result<(std::net::SocketAddr, Server)> {
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .route("/metrics", web::get().to(metrics::exposition))
    })
    .workers(1)
    .shutdown_timeout(2);
    start!(server, bind, handle_signals, "metrics server")
}

/// Binds and starts an HTTP server for `state` on `bind` (port 0 picks a free port).
/// Returns the bound address and the server future (which the caller drives).
pub fn http_server(
    state: web::Data<AppState>,
    bind: &str,
    workers: usize,
    handle_signals: bool,
) -> std::io::Result<(std::net::SocketAddr, Server)> {
    let origins = Arc::new(state.config.cors_origins.clone());
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .wrap(from_fn(crate::web::deadline::body_deadline))
            .wrap(ErrorHandlers::new().default_handler(json_error_bodies))
            .wrap(Condition::new(!origins.is_empty(), cors(origins.clone())))
            .wrap(from_fn(request_ids))
            .wrap(from_fn(request_metrics))
            .wrap(
                actix_web::middleware::Logger::new("%r %s %Dms id=%{x-request-id}o")
                    .log_target("convrag::http"),
            )
            .configure(configure)
    })
    .workers(workers.max(1))
    .shutdown_timeout(10);
    start!(server, bind, handle_signals, "server")
}

/// A running server in the background of the current tokio runtime (tests and embedding).
pub struct RunningServer {
    pub addr: std::net::SocketAddr,
    pub handle: ServerHandle,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl RunningServer {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn stop(self) {
        self.handle.stop(true).await;
        let _ = self.task.await;
    }
}

/// Starts the API on a free loopback port without signal handling.
pub fn spawn(state: AppState) -> std::io::Result<RunningServer> {
    let (addr, server) = http_server(web::Data::new(state), "127.0.0.1:0", 2, false)?;
    let handle = server.handle();
    let task = tokio::spawn(server);
    Ok(RunningServer { addr, handle, task })
}
