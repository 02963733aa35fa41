//! The LLM-down paths: an endpoint that refuses, stalls, answers an error status, sends garbage
//! or breaks mid-stream must give an extractive answer that says why. Also the extractive
//! generator on the fixture passages. No LLM server needed.

use crate::generate_support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use convrag::llm::{ChatMessage, ChatModel, ChatRequest, LlmError, OpenAiClient, Retry};
use convrag::pipeline::generate::{
    ExtractiveGenerator, FallbackKind, GenerationEvent, Generator, GeneratorId, LlmGenerator,
    LlmGeneratorConfig, WordLimit,
};
use generate_support::*;

fn client(port: u16, timeout: Duration) -> OpenAiClient {
    OpenAiClient::new(
        &format!("http://127.0.0.1:{port}/v1"),
        "test-model",
        None,
        timeout,
    )
    .unwrap()
}

fn llm_generator(model: impl ChatModel + 'static) -> LlmGenerator {
    LlmGenerator::new(Arc::new(model), LlmGeneratorConfig::default())
}

fn hello() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("Hello")])
}

#[tokio::test]
async fn extractive_on_fixture_passages() {
    for limit in [WordLimit::IKAT, WordLimit::TREC_RAG] {
        let request = fixture_request(limit);
        let g = ExtractiveGenerator::default()
            .generate(&request)
            .await
            .unwrap();
        assert_valid(&g, &request);
        assert_eq!(g.generator, GeneratorId::Extractive);
        let text = g.response_text();
        eprintln!("extractive ({:?}): {:#?}", limit.measure, g.sentences);
        assert!(text.contains("330 m"), "{text}");
        assert!(text.contains("1887"), "{text}");
        assert!(!text.contains("Bananas"), "{text}");
        assert!(!text.contains("[1]"), "footnote marker leaked: {text}");
        assert!(g.sentences.iter().all(|s| !s.citations.is_empty()));
        // The banana passage is not used; the top passage is.
        let used = g.used_flags(request.passages.len());
        assert!(used[0] && !used[4], "{used:?}");
    }
}

#[tokio::test]
async fn refused_connection_falls_back_with_reason() {
    let port = closed_port();
    let c = client(port, Duration::from_secs(5));
    let err = c.chat(&hello()).await.unwrap_err();
    assert!(matches!(err, LlmError::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains(&port.to_string()), "{err}");

    let request = fixture_request(WordLimit::IKAT);
    let g = llm_generator(c).generate(&request).await.unwrap();
    assert_valid(&g, &request);
    assert_eq!(g.generator, GeneratorId::Extractive);
    let fb = g.diagnostics.fallback.as_ref().expect("fallback recorded");
    assert_eq!(fb.kind, FallbackKind::Unreachable);
    assert_eq!(fb.from.to_string(), "llm:test-model");
    assert!(fb.reason.contains("not reachable"), "{}", fb.reason);
    assert!(!g.sentences.is_empty());
}

#[tokio::test]
async fn stalling_server_times_out_and_falls_back() {
    let port = stalling_server();
    let c = client(port, Duration::from_secs(1));
    let started = Instant::now();
    let err = c.chat(&hello()).await.unwrap_err();
    assert!(matches!(err, LlmError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));

    let request = fixture_request(WordLimit::TREC_RAG);
    let started = Instant::now();
    let mut events = Vec::new();
    let mut on_event = |e: GenerationEvent| events.push(e);
    let g = llm_generator(client(port, Duration::from_secs(1)))
        .generate_streaming(&request, &mut on_event)
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_valid(&g, &request);
    assert_eq!(
        g.diagnostics.fallback.as_ref().unwrap().kind,
        FallbackKind::Timeout
    );
    // Nothing was streamed before the failure: no restart, just the fallback's sentences.
    let streamed: Vec<_> = events
        .iter()
        .map(|e| match e {
            GenerationEvent::Sentence { sentence, .. } => sentence.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(streamed, g.sentences);
}

#[tokio::test]
async fn error_status_carries_the_server_message_and_is_retried() {
    let (port, count) = scripted_server(http_response(
        "503 Service Unavailable",
        "application/json",
        r#"{"error":{"message":"model is still loading","type":"unavailable"}}"#,
    ));
    let err = client(port, Duration::from_secs(5))
        .chat(&hello())
        .await
        .unwrap_err();
    match &err {
        LlmError::Status {
            status, message, ..
        } => {
            assert_eq!(*status, 503);
            assert_eq!(message, "model is still loading");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(count.load(Ordering::SeqCst), 1);

    let retrying = Retry::new(
        client(port, Duration::from_secs(5)),
        3,
        Duration::from_millis(10),
    );
    assert!(retrying.chat(&hello()).await.is_err());
    assert_eq!(count.load(Ordering::SeqCst), 4, "1 + 3 attempts");

    let request = fixture_request(WordLimit::IKAT);
    let g = llm_generator(client(port, Duration::from_secs(5)))
        .generate(&request)
        .await
        .unwrap();
    let fb = g.diagnostics.fallback.unwrap();
    assert_eq!(fb.kind, FallbackKind::HttpStatus);
    assert!(
        fb.reason.contains("503") && fb.reason.contains("still loading"),
        "{}",
        fb.reason
    );
}

#[tokio::test]
async fn malformed_bodies_are_reported() {
    let (port, _) = scripted_server(http_response(
        "200 OK",
        "application/json",
        "<html>hi</html>",
    ));
    let err = client(port, Duration::from_secs(5))
        .chat(&hello())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Malformed { .. }), "{err:?}");

    let (port, _) = scripted_server(http_response(
        "200 OK",
        "application/json",
        r#"{"choices":[{"message":{"role":"assistant"}}]}"#,
    ));
    let err = client(port, Duration::from_secs(5))
        .chat(&hello())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("content"), "{err}");
}

#[tokio::test]
async fn scripted_stream_yields_cited_sentences_as_they_complete() {
    // Deltas split mid-word, mid-marker and mid-abbreviation, as real servers do.
    let deltas = [
        "The Eiffel Tower is 330 m tall [",
        "1]. It was built from 1887 to 1889 by Gustave Eiffel's co",
        "mpany, e.g",
        ". for the World's Fair [1, 3]",
        ". Tickets cost approx. 11.80 EUR [2][9].",
    ];
    let (port, _) = scripted_server(sse_response(&deltas, true));
    let request = fixture_request(WordLimit::IKAT);
    let mut events = Vec::new();
    let mut on_event = |e: GenerationEvent| events.push(e);
    let g = llm_generator(client(port, Duration::from_secs(5)))
        .generate_streaming(&request, &mut on_event)
        .await
        .unwrap();
    assert_eq!(
        g.generator,
        GeneratorId::Llm {
            model: "test-model".into()
        }
    );
    assert!(g.diagnostics.fallback.is_none());
    assert_valid(&g, &request);
    let texts: Vec<&str> = g.sentences.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "The Eiffel Tower is 330 m tall.",
            "It was built from 1887 to 1889 by Gustave Eiffel's company, e.g. for the World's Fair.",
            "Tickets cost approx. 11.80 EUR."
        ]
    );
    let cites: Vec<Vec<usize>> = g.sentences.iter().map(|s| s.citations.clone()).collect();
    assert_eq!(cites, vec![vec![0], vec![0, 2], vec![1]]);
    assert_eq!(g.diagnostics.dropped_citations, vec![9]);
    let llm = g.diagnostics.llm.as_ref().unwrap();
    assert!(llm.streamed);
    assert_eq!(llm.stream_chunks, Some(deltas.len() as u32));
    // The events are exactly the final sentences, in order.
    let streamed: Vec<_> = events
        .iter()
        .map(|e| match e {
            GenerationEvent::Sentence { index, sentence } => (*index, sentence.clone()),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        streamed,
        g.sentences.iter().cloned().enumerate().collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn stream_broken_midway_restarts_with_the_fallback() {
    let deltas = ["Paris has a tower [1]. ", "It is tall [1]. It was buil"];
    let (port, _) = scripted_server(sse_response(&deltas, false));
    let request = fixture_request(WordLimit::IKAT);
    let mut events = Vec::new();
    let mut on_event = |e: GenerationEvent| events.push(e);
    let g = llm_generator(client(port, Duration::from_secs(5)))
        .generate_streaming(&request, &mut on_event)
        .await
        .unwrap();
    assert_eq!(g.generator, GeneratorId::Extractive);
    assert_eq!(
        g.diagnostics.fallback.as_ref().unwrap().kind,
        FallbackKind::Malformed
    );
    let restart = events
        .iter()
        .position(|e| matches!(e, GenerationEvent::Restart { .. }))
        .expect("a restart event after the partial LLM sentences");
    assert!(restart >= 1, "{events:?}");
    let after: Vec<_> = events[restart + 1..]
        .iter()
        .map(|e| match e {
            GenerationEvent::Sentence { sentence, .. } => sentence.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(after, g.sentences);
}

#[tokio::test]
async fn uncited_llm_answer_falls_back_and_keeps_the_raw_output() {
    let body = serde_json::json!({
        "choices": [{"message": {"role": "assistant", "content": "The tower is tall. It is in Paris [7]."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 9}
    })
    .to_string();
    let (port, _) = scripted_server(http_response("200 OK", "application/json", &body));
    let request = fixture_request(WordLimit::IKAT);
    let g = llm_generator(client(port, Duration::from_secs(5)))
        .generate(&request)
        .await
        .unwrap();
    assert_eq!(g.generator, GeneratorId::Extractive);
    let fb = g.diagnostics.fallback.as_ref().unwrap();
    assert_eq!(fb.kind, FallbackKind::NoCitedSentence);
    assert_eq!(
        g.diagnostics.dropped_citations,
        vec![7],
        "[7] is beyond the 5 shown passages"
    );
    let llm = g.diagnostics.llm.as_ref().unwrap();
    assert!(llm.raw_output.contains("It is in Paris [7]."));
    assert_eq!(llm.completion_tokens, Some(9));
    assert_valid(&g, &request);
}

#[tokio::test]
async fn llm_answer_is_cut_to_the_word_limit() {
    let content = "The Eiffel Tower is 330 m tall [1]. It was completed in 1889 [3]. It is made of wrought iron and was designed by the company of Gustave Eiffel [1].";
    let body = serde_json::json!({"choices": [{"message": {"content": content}}]}).to_string();
    let (port, _) = scripted_server(http_response("200 OK", "application/json", &body));
    let mut request = fixture_request(WordLimit::TREC_RAG);
    request.limit.max_words = 15;
    let g = llm_generator(client(port, Duration::from_secs(5)))
        .generate(&request)
        .await
        .unwrap();
    assert_eq!(
        g.generator,
        GeneratorId::Llm {
            model: "test-model".into()
        }
    );
    assert_eq!(g.sentences.len(), 2);
    assert_eq!(g.diagnostics.sentences_cut_for_limit, 1);
    assert_valid(&g, &request);
    assert_eq!(
        convrag::service::rows::stored_sentences(&g)[1].citations,
        vec![3]
    );
}
