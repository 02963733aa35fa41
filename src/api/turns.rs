//! A conversation's turns: run one (`POST`, JSON or a server-sent event stream), read them back.

use std::sync::Arc;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiError, ErrorCode};
use super::extract::{parse_uuid, ApiJson, ApiQuery, AuthUser};
use super::AppState;
use crate::pipeline::generate::{GenerationEvent, WordLimit, WordMeasure};
use crate::pipeline::turn::{
    context_from_store, GeneratorChoice, PassageSource, RankedPassage, RetrievalTarget,
    RewriterChoice, TurnEvent, TurnSettings,
};
use crate::store::TurnSlot;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Include earlier versions of regenerated turns.
    #[serde(default)]
    pub all_versions: bool,
}

/// Body of `POST .../turns`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTurn {
    /// What the user said (optional when regenerating: the earlier version's utterance).
    pub utterance: Option<String>,
    /// Id of a turn to regenerate: a new version at its position.
    pub regenerate: Option<String>,
    pub generator: Option<GeneratorChoice>,
    pub rerank: Option<bool>,
    /// BM25 candidates retrieved (and reranked).
    pub rerank_depth: Option<usize>,
    /// Passages kept with the turn and shown to the generator.
    pub passages: Option<usize>,
    pub max_words: Option<usize>,
    /// A manual rewrite used instead of the automatic one.
    pub rewrite: Option<String>,
    /// Who rewrites the utterance: `history` (default) or `llm`.
    pub rewriter: Option<RewriterChoice>,
}

const MAX_UTTERANCE_CHARS: usize = 10_000;
const MAX_TURN_PASSAGES: usize = 100;

/// The effective settings of a request (defaults: the LLM when configured, reranking when a
/// model is loaded).
fn settings_for(state: &AppState, body: &CreateTurn) -> Result<TurnSettings, ApiError> {
    let defaults = TurnSettings::default();
    let generator = body.generator.unwrap_or(if state.pipeline.llm.is_some() {
        GeneratorChoice::Llm
    } else {
        GeneratorChoice::Extractive
    });
    if generator == GeneratorChoice::Llm && state.pipeline.llm.is_none() {
        return Err(ApiError::invalid(
            "generator",
            "this server has no LLM endpoint configured (llm.base_url); use \"extractive\"",
        ));
    }
    let rewriter = body.rewriter.unwrap_or_default();
    if rewriter == RewriterChoice::Llm && state.pipeline.llm_rewriter.is_none() {
        return Err(ApiError::invalid(
            "rewriter",
            "this server has no LLM endpoint configured (llm.base_url); use \"history\"",
        ));
    }
    let rerank = body.rerank.unwrap_or(state.reranker.is_some());
    if rerank && state.reranker.is_none() {
        return Err(ApiError::field(
            ErrorCode::ModelUnavailable,
            "rerank",
            "no reranking model is loaded (run scripts/fetch-models.sh)",
        ));
    }
    let passages = body.passages.unwrap_or(defaults.passages);
    if passages == 0 || passages > MAX_TURN_PASSAGES {
        return Err(ApiError::invalid(
            "passages",
            format!("must be between 1 and {MAX_TURN_PASSAGES}"),
        ));
    }
    let settings = TurnSettings {
        generator,
        rewriter,
        rerank,
        depth: body.rerank_depth.unwrap_or(defaults.depth),
        passages,
        generation_passages: passages.min(defaults.generation_passages),
        limit: WordLimit {
            max_words: body.max_words.unwrap_or(defaults.limit.max_words),
            measure: WordMeasure::Ikat,
        },
        ..defaults
    };
    settings.validate().map_err(|(field, reason)| {
        let field = match field {
            "depth" => "rerank_depth",
            other => other,
        };
        ApiError::invalid(field, reason)
    })?;
    Ok(settings)
}

fn check_text(field: &str, text: &str) -> Result<(), ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::invalid(field, "must not be empty"));
    }
    if text.chars().count() > MAX_UTTERANCE_CHARS {
        return Err(ApiError::invalid(
            field,
            format!("must be at most {MAX_UTTERANCE_CHARS} characters"),
        ));
    }
    Ok(())
}

/// One server-sent event.
fn sse(event: &str, data: &Value) -> web::Bytes {
    web::Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

fn passage_json(rank: usize, p: &RankedPassage, collection: &str) -> Value {
    json!({"rank": rank, "passage_id": p.id, "collection": collection,
        "retrieval_score": p.retrieval_score, "rerank_score": p.rerank_score, "score": p.score,
        "used": false, "title": p.title, "url": p.url, "text": p.text})
}

/// The stream event a pipeline event becomes.
fn event_frame(event: TurnEvent<'_>, collection: &str) -> web::Bytes {
    match event {
        TurnEvent::Ptkb(ranking) => {
            let statements: Vec<Value> = ranking
                .statements
                .iter()
                .enumerate()
                .map(|(i, s)| json!({"id": s.id, "text": s.text, "score": s.score, "rank": i + 1, "selected": s.selected}))
                .collect();
            sse("ptkb", &json!({ "ptkb_ranking": statements }))
        }
        TurnEvent::Rewrite(rewrite) => sse(
            "rewrite",
            &json!({"rewritten_utterance": rewrite.text, "method": rewrite.method}),
        ),
        TurnEvent::Passages(passages) => {
            let list: Vec<Value> = passages
                .iter()
                .enumerate()
                .map(|(i, p)| passage_json(i + 1, p, collection))
                .collect();
            sse("passages", &json!({ "passages": list }))
        }
        TurnEvent::Generation(GenerationEvent::Sentence { index, sentence }) => {
            let citations: Vec<usize> = sentence.citations.iter().map(|c| c + 1).collect();
            sse(
                "sentence",
                &json!({"index": index, "text": sentence.text, "citations": citations}),
            )
        }
        TurnEvent::Generation(GenerationEvent::Restart { reason }) => {
            sse("restart", &json!({ "reason": reason }))
        }
    }
}

fn wants_event_stream(req: &HttpRequest) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

/// `POST /v1/conversations/{conversation_id}/turns`: runs the pipeline for an utterance and
/// stores the whole turn atomically. The conversation stays locked while the turn runs, so
/// concurrent turns of one conversation are serialized and each sees the one before.
pub async fn create(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
    body: ApiJson<CreateTurn>,
) -> Result<HttpResponse, ApiError> {
    let conversation_id = parse_uuid("conversation_id", &path)?;
    let body = body.0;
    if let Some(u) = &body.utterance {
        check_text("utterance", u)?;
    } else if body.regenerate.is_none() {
        return Err(ApiError::invalid(
            "utterance",
            "is required (unless regenerate names a turn)",
        ));
    }
    if let Some(r) = &body.rewrite {
        check_text("rewrite", r)?;
    }
    let settings = settings_for(&state, &body)?;
    let slot = match &body.regenerate {
        None => TurnSlot::Next,
        Some(id) => {
            let turn_id = parse_uuid("regenerate", id)?;
            let earlier = state
                .store
                .turn(user.id, conversation_id, turn_id)
                .await
                .map_err(|e| match e {
                    crate::store::StoreError::NotFound { .. } => ApiError::field(
                        ErrorCode::NotFound,
                        "regenerate",
                        "no such turn in this conversation",
                    ),
                    other => other.into(),
                })?;
            TurnSlot::Regenerate { seq: earlier.seq }
        }
    };

    let pending = state
        .store
        .begin_turn(user.id, conversation_id, slot)
        .await?;
    let utterance = match (body.utterance, &pending.replaced_utterance) {
        (Some(u), _) => u,
        (None, Some(u)) => u.clone(),
        (None, None) => return Err(ApiError::invalid("utterance", "is required")),
    };
    let collection = pending.collection.clone().ok_or_else(|| {
        ApiError::invalid(
            "collection",
            "the conversation has no collection to retrieve from (PATCH it with one)",
        )
    })?;
    let registry = state.collections.clone();
    let name = collection.clone();
    let retriever = web::block(move || registry.get(&name))
        .await
        .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))??;
    let target = PassageSource::Collection(RetrievalTarget {
        collection: collection.clone(),
        retriever,
    });
    let ctx = context_from_store(&utterance, &pending.history, &pending.ptkb, body.rewrite);
    let pipeline = Arc::clone(&state.pipeline);

    if !wants_event_stream(&req) {
        let output = pipeline
            .run(ctx, Some(target), &settings, &mut |_| {})
            .await?;
        let turn = pending
            .commit(
                &state.store,
                output.to_new_turn(&utterance, Some(&collection), &settings),
            )
            .await?;
        return Ok(HttpResponse::Created().json(json!({ "turn": turn })));
    }

    // Streaming: the turn runs in its own task and reports through a channel; the response
    // body is the channel. The turn is stored even if the client goes away mid-stream.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<web::Bytes>();
    let store = state.store.clone();
    actix_web::rt::spawn(async move {
        let events = tx.clone();
        let name = collection.clone();
        let mut on_event = move |e: TurnEvent<'_>| {
            let _ = events.send(event_frame(e, &name));
        };
        let result: Result<_, ApiError> = async {
            let output = pipeline
                .run(ctx, Some(target), &settings, &mut on_event)
                .await?;
            let turn = pending
                .commit(
                    &store,
                    output.to_new_turn(&utterance, Some(&collection), &settings),
                )
                .await?;
            Ok(turn)
        }
        .await;
        let frame = match result {
            Ok(turn) => sse("turn", &json!({ "turn": turn })),
            Err(e) => {
                if e.code == ErrorCode::Internal {
                    tracing::error!(message = %e.message, "turn failed");
                }
                sse("error", &e.envelope())
            }
        };
        let _ = tx.send(frame);
    });
    let body = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|frame| frame.map(Ok::<_, std::convert::Infallible>))
    });
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(body))
}

/// `GET /v1/conversations/{conversation_id}/turns`
pub async fn list(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: ApiQuery<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_uuid("conversation_id", &path)?;
    let turns = state
        .store
        .list_turns(user.id, id, query.0.all_versions)
        .await?;
    Ok(HttpResponse::Ok().json(json!({"turns": turns})))
}

/// `GET /v1/conversations/{conversation_id}/turns/{turn_id}`
pub async fn get(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (conversation, turn) = path.into_inner();
    let id = parse_uuid("conversation_id", &conversation)?;
    let turn_id = parse_uuid("turn_id", &turn)?;
    let turn = state.store.turn(user.id, id, turn_id).await?;
    Ok(HttpResponse::Ok().json(json!({"turn": turn})))
}
