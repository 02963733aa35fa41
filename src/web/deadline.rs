//! A total read deadline for request bodies (`limits.body_read_secs`): actix's
//! `client_request_timeout` covers only the head, so a client sending a byte every few seconds
//! could otherwise hold a connection and a worker's attention for as long as it likes.
//!
//! The middleware wraps every request's payload in a stream that fails with `TimedOut` once the
//! deadline passes, counted from the first read (a handler may wait for its turn, as qrels
//! uploads do, before it reads). Readers of the API's own ([`super::extract`], qrels text) answer that with
//! 408 `request_timeout` themselves; for any other reader the middleware replaces the error
//! answer with that 408. Uploads have their own, longer deadline (`uploads.deadline_secs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::web::{self, Bytes};
use actix_web::HttpMessage;
use futures_util::{Stream, StreamExt};

use super::error::{ApiError, ErrorCode};
use super::AppState;

/// Routes whose bodies keep their own deadline (multipart uploads: `uploads.deadline_secs`).
const OWN_DEADLINE: &[&str] = &["/v1/collections/{name}/documents"];

/// Whether a payload error is the body deadline's.
pub fn is_deadline(e: &PayloadError) -> bool {
    matches!(e, PayloadError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut)
}

/// The 408 of a body that did not arrive within `limits.body_read_secs`.
pub fn deadline_error(secs: u64) -> ApiError {
    ApiError::field(
        ErrorCode::RequestTimeout,
        "body",
        format!("the request body did not arrive within {secs} s (limits.body_read_secs)"),
    )
}

/// A payload that fails with `TimedOut` when it has not ended `after` its first read.
struct Deadline {
    inner: Payload,
    after: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    fired: Arc<AtomicBool>,
    done: bool,
}

impl Stream for Deadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = self.inner.poll_next_unpin(cx) {
            if item.is_none() {
                self.done = true;
            }
            return Poll::Ready(item);
        }
        let after = self.after;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(after)));
        if sleep.as_mut().poll(cx).is_ready() {
            self.done = true;
            self.fired.store(true, Ordering::Relaxed);
            let e = std::io::Error::new(std::io::ErrorKind::TimedOut, "body read deadline");
            return Poll::Ready(Some(Err(PayloadError::Io(e))));
        }
        Poll::Pending
    }
}

/// Applies `limits.body_read_secs` to the request's body (see the module's documentation).
pub async fn body_deadline<B: MessageBody + 'static>(
    mut req: ServiceRequest,
    next: Next<B>,
) -> actix_web::Result<ServiceResponse<EitherBody<B>>> {
    let secs = req
        .app_data::<web::Data<AppState>>()
        .map_or(30, |s| s.config.limits.body_read_secs);
    let exempt = req
        .match_pattern()
        .is_some_and(|p| OWN_DEADLINE.contains(&p.as_str()));
    let fired = Arc::new(AtomicBool::new(false));
    if !exempt {
        let inner = req.take_payload();
        let stream = Deadline {
            inner,
            after: Duration::from_secs(secs),
            sleep: None,
            fired: fired.clone(),
            done: false,
        };
        req.set_payload(Payload::Stream {
            payload: Box::pin(stream),
        });
    }
    let res = next.call(req).await?;
    let failed = res.status().is_client_error() || res.status().is_server_error();
    if failed && fired.load(Ordering::Relaxed) && res.status() != StatusCode::REQUEST_TIMEOUT {
        let (req, _) = res.into_parts();
        let body = deadline_error(secs).to_response();
        return Ok(ServiceResponse::new(req, body).map_into_right_body());
    }
    Ok(res.map_into_left_body())
}
