//! Shared by the `generate_*` integration tests: the fixture passages, invariant checks, and a
//! tiny scripted HTTP peer standing in for *external* servers that misbehave (closed port,
//! stalling, error status, broken stream) — behaviour a real LLM server cannot be made to show.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::fixture;
use convrag::pipeline::generate::{ContextTurn, Generation, GenerationRequest, WordLimit};
use convrag::pipeline::Passage;

pub fn fixture_request(limit: WordLimit) -> GenerationRequest {
    let path = fixture("generation/passages.json");
    let text = std::fs::read_to_string(&path).expect("fixture");
    let v: serde_json::Value = serde_json::from_str(&text).expect("fixture json");
    let passages: Vec<Passage> = serde_json::from_value(v["passages"].clone()).expect("passages");
    let context: Vec<ContextTurn> = serde_json::from_value(v["context"].clone()).expect("context");
    let mut request = GenerationRequest::new(v["query"].as_str().unwrap(), passages, limit);
    request.context = context;
    request
}

/// Every citation points into the request's passages and the word limit holds.
pub fn assert_valid(generation: &Generation, request: &GenerationRequest) {
    let n = request.passages.len();
    for s in &generation.sentences {
        assert!(
            !s.text.trim().is_empty(),
            "empty sentence in {generation:?}"
        );
        for &c in &s.citations {
            assert!(c < n, "citation {c} outside {n} passages: {generation:?}");
        }
    }
    let words = request
        .limit
        .count(generation.sentences.iter().map(|s| s.text.as_str()));
    assert!(
        words <= request.limit.max_words,
        "{words} words > limit {}: {generation:?}",
        request.limit.max_words
    );
    assert_eq!(words, generation.diagnostics.words);
}

/// A port where nothing listens (bound, then released).
pub fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    port
}

/// A listener that accepts connections and never answers; returns its port.
pub fn stalling_server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in l.incoming().flatten() {
            held.push(conn); // keep it open, say nothing
        }
    });
    port
}

fn read_request(conn: &mut TcpStream) {
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let Ok(n) = conn.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while data.len() < end + 4 + len {
                let Ok(n) = conn.read(&mut buf) else { return };
                if n == 0 {
                    return;
                }
                data.extend_from_slice(&buf[..n]);
            }
            return;
        }
    }
}

/// Answers every request with `response` (raw HTTP, `Connection: close`); counts requests.
pub fn scripted_server(response: String) -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for mut conn in l.incoming().flatten() {
            read_request(&mut conn);
            seen.fetch_add(1, Ordering::SeqCst);
            let _ = conn.write_all(response.as_bytes());
            let _ = conn.flush();
        }
    });
    (port, count)
}

pub fn http_response(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// An SSE response of `deltas`, with `[DONE]` only if `complete` (else the body just ends).
pub fn sse_response(deltas: &[&str], complete: bool) -> String {
    let mut body = String::new();
    body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n");
    for d in deltas {
        let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": d}}]});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    if complete {
        body.push_str("data: [DONE]\n\n");
    }
    http_response("200 OK", "text/event-stream", &body)
}

pub fn llm_url_from_env() -> String {
    std::env::var("CONVRAG_TEST_LLM_URL").ok().filter(|v| !v.trim().is_empty()).unwrap_or_else(|| {
        panic!(
            "CONVRAG_TEST_LLM_URL is not set. These tests need the real SmolLM2 server: run \
             `export CONVRAG_TEST_LLM_URL=$(scripts/llm-server.sh start)` (scripts/test.sh does it, \
             and `scripts/llm-server.sh stop` afterwards)"
        )
    })
}
