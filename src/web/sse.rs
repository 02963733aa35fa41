//! Server-sent event streams: a turn runs in a task of its own and sends frames through a
//! channel that is the response body, so the turn finishes and is stored even if the client
//! goes away mid-stream.

use std::future::Future;

use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::HttpResponse;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

/// One named event (`event: NAME`, `data: JSON`).
pub fn event_frame(event: &str, data: &serde_json::Value) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// One unnamed event (`data: TEXT`), as OpenAI's streams send them.
pub fn data_frame(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// Sends frames to the stream's client; a client that went away is not an error.
#[derive(Clone)]
pub struct FrameSender(UnboundedSender<Bytes>);

impl FrameSender {
    pub fn send(&self, frame: Bytes) {
        let _ = self.0.send(frame);
    }
}

/// Starts `task` with the sender of a new stream and answers 200 with the stream: the frames
/// the task sends, in order, until it ends.
pub fn stream<T, F>(task: T) -> HttpResponse
where
    T: FnOnce(FrameSender) -> F,
    F: Future<Output = ()> + 'static,
{
    let (tx, mut rx) = unbounded_channel::<Bytes>();
    actix_web::rt::spawn(task(FrameSender(tx)));
    let body = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|frame| frame.map(Ok::<_, std::convert::Infallible>))
    });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(body)
}
