//! The JSON the API answers with, separate from the store's rows: a stored turn
//! ([`TurnResponse`]) and the events of a streamed turn are built from the same parts, so the
//! `passages` event and a stored turn's `passages` are the same objects.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::pipeline::generate::GenerationEvent;
use crate::pipeline::query::SearchQuery;
use crate::pipeline::turn::{RankedPassage, TurnEvent};
use crate::service::rows::SEARCH_QUERY;
use crate::store::turns::{RankedStatement, Sentence, TurnPassage};
use crate::store::Turn;
use crate::text::cited::cited_spans;

/// The events of a streamed turn (`Accept: text/event-stream`), in the order they can come:
/// `ptkb`, `rewrite`, `passages`, then `sentence`s (a `restart` discards those before it), and
/// last `turn` (the stored turn) or `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEvent {
    Ptkb,
    Rewrite,
    Passages,
    Sentence,
    Restart,
    Turn,
    Error,
}

impl StreamEvent {
    pub const ALL: [StreamEvent; 7] = [
        StreamEvent::Ptkb,
        StreamEvent::Rewrite,
        StreamEvent::Passages,
        StreamEvent::Sentence,
        StreamEvent::Restart,
        StreamEvent::Turn,
        StreamEvent::Error,
    ];

    /// The SSE `event:` name.
    pub const fn as_str(self) -> &'static str {
        match self {
            StreamEvent::Ptkb => "ptkb",
            StreamEvent::Rewrite => "rewrite",
            StreamEvent::Passages => "passages",
            StreamEvent::Sentence => "sentence",
            StreamEvent::Restart => "restart",
            StreamEvent::Turn => "turn",
            StreamEvent::Error => "error",
        }
    }
}

/// The SSE event names of a streamed turn.
pub const STREAM_EVENT_NAMES: [&str; 7] = [
    StreamEvent::Ptkb.as_str(),
    StreamEvent::Rewrite.as_str(),
    StreamEvent::Passages.as_str(),
    StreamEvent::Sentence.as_str(),
    StreamEvent::Restart.as_str(),
    StreamEvent::Turn.as_str(),
    StreamEvent::Error.as_str(),
];

/// A pipeline score (`f32`) as JSON shows it: the shortest decimal of the `f32`, not the
/// widened `f64`'s digits.
fn shown(score: f32) -> f64 {
    format!("{score}").parse().unwrap_or(score as f64)
}

/// A turn as the API returns it.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct TurnResponse {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub seq: i32,
    pub version: i32,
    pub is_current: bool,
    pub external_turn_id: Option<String>,
    pub utterance: String,
    pub reference_rewrite: Option<String>,
    pub reference_ptkb: Option<Vec<String>>,
    pub canonical_response: Option<String>,
    pub rewritten_utterance: Option<String>,
    /// The query the first stage searched with (the rewrite, then the selected statements'
    /// content words), each word with its origin. Absent in turns stored before it was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub search_query: Option<SearchQuery>,
    pub response_text: Option<String>,
    pub generator: Option<String>,
    #[schema(value_type = Object)]
    pub settings: serde_json::Value,
    #[schema(value_type = Object)]
    pub timings_ms: serde_json::Value,
    #[schema(value_type = Object)]
    pub diagnostics: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub ptkb_ranking: Vec<PtkbRankResponse>,
    pub passages: Vec<PassageResponse>,
    pub sentences: Vec<SentenceResponse>,
}

/// A PTKB statement as ranked for a turn.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct PtkbRankResponse {
    pub id: String,
    pub text: String,
    pub score: f64,
    pub rank: usize,
    pub selected: bool,
}

/// A passage of a turn's ranking.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct PassageResponse {
    pub rank: usize,
    pub passage_id: String,
    pub collection: Option<String>,
    /// The first stage's score: BM25's (after hybrid retrieval too, where a passage BM25 did not
    /// return, `bm25_rank` null, has the lowest BM25 score among the candidates), or the cosine
    /// after dense retrieval.
    pub retrieval_score: Option<f64>,
    pub rerank_score: Option<f64>,
    pub score: f64,
    pub used: bool,
    pub title: Option<String>,
    pub url: Option<String>,
    pub text: Option<String>,
    /// Which retrievers found it: its rank in BM25's first-stage list, in the bi-encoder's, and
    /// in their fusion (hybrid); `null` where that retriever did not run or did not return it.
    pub bm25_rank: Option<u32>,
    pub dense_rank: Option<u32>,
    pub fused_rank: Option<u32>,
    /// The parts of `text` that the answer's sentences citing this passage draw on (their own
    /// words where they are extractive), sorted, not overlapping; empty where no sentence cites it.
    pub cited_spans: Vec<TextSpan>,
}

/// Part of a text: `[start, end)` in Unicode characters (code points).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, utoipa::ToSchema)]
pub struct TextSpan {
    pub start: usize,
    pub end: usize,
}

/// A response sentence with the 1-based ranks of the passages it cites.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct SentenceResponse {
    pub text: String,
    pub citations: Vec<usize>,
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct TurnEnvelope {
    pub turn: TurnResponse,
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct TurnsEnvelope {
    pub turns: Vec<TurnResponse>,
}

impl From<RankedStatement> for PtkbRankResponse {
    fn from(s: RankedStatement) -> Self {
        PtkbRankResponse {
            id: s.id,
            text: s.text,
            score: s.score,
            rank: s.rank.max(0) as usize,
            selected: s.selected,
        }
    }
}

impl From<TurnPassage> for PassageResponse {
    fn from(p: TurnPassage) -> Self {
        PassageResponse {
            rank: p.rank.max(0) as usize,
            passage_id: p.passage_id,
            collection: p.collection,
            retrieval_score: p.retrieval_score,
            rerank_score: p.rerank_score,
            score: p.score,
            used: p.used,
            title: p.title,
            url: p.url,
            text: p.text,
            bm25_rank: p.bm25_rank.map(|r| r.max(1) as u32),
            dense_rank: p.dense_rank.map(|r| r.max(1) as u32),
            fused_rank: p.fused_rank.map(|r| r.max(1) as u32),
            cited_spans: Vec::new(),
        }
    }
}

impl From<Sentence> for SentenceResponse {
    fn from(s: Sentence) -> Self {
        SentenceResponse {
            text: s.text,
            citations: s.citations.into_iter().map(|c| c.max(0) as usize).collect(),
        }
    }
}

impl From<Turn> for TurnResponse {
    fn from(t: Turn) -> Self {
        // Kept in the diagnostics, shown as a field of its own.
        let mut diagnostics = t.diagnostics;
        let search_query = diagnostics
            .as_object_mut()
            .and_then(|d| d.remove(SEARCH_QUERY))
            .and_then(|v| serde_json::from_value(v).ok());
        let sentences: Vec<SentenceResponse> = t.sentences.into_iter().map(Into::into).collect();
        let passages = t
            .passages
            .into_iter()
            .map(|p| PassageResponse::from(p).cited_by(&sentences))
            .collect();
        TurnResponse {
            id: t.id,
            conversation_id: t.conversation_id,
            seq: t.seq,
            version: t.version,
            is_current: t.is_current,
            external_turn_id: t.external_turn_id,
            utterance: t.utterance,
            reference_rewrite: t.reference_rewrite,
            reference_ptkb: t.reference_ptkb,
            canonical_response: t.canonical_response,
            rewritten_utterance: t.rewritten_utterance,
            search_query,
            response_text: t.response_text,
            generator: t.generator,
            settings: t.settings,
            timings_ms: t.timings_ms,
            diagnostics,
            created_at: t.created_at,
            ptkb_ranking: t.ptkb_ranking.into_iter().map(Into::into).collect(),
            passages,
            sentences,
        }
    }
}

impl From<Turn> for TurnEnvelope {
    fn from(turn: Turn) -> Self {
        TurnEnvelope { turn: turn.into() }
    }
}

impl PassageResponse {
    /// A passage of a turn still running (not yet cited: `used` is false).
    pub fn ranked(rank: usize, p: &RankedPassage, collection: &str) -> Self {
        PassageResponse {
            rank,
            passage_id: p.id.clone(),
            collection: Some(collection.to_string()),
            retrieval_score: Some(shown(p.retrieval_score)),
            rerank_score: p.rerank_score.map(shown),
            score: shown(p.score),
            used: false,
            title: Some(p.title.clone()),
            url: Some(p.url.clone()),
            text: Some(p.text.clone()),
            bm25_rank: p.ranks.bm25,
            dense_rank: p.ranks.dense,
            fused_rank: p.ranks.fused,
            cited_spans: Vec::new(),
        }
    }

    /// This passage with the parts of its text that those of `sentences` citing it draw on.
    fn cited_by(mut self, sentences: &[SentenceResponse]) -> Self {
        let citing: Vec<&str> = sentences
            .iter()
            .filter(|s| s.citations.contains(&self.rank))
            .map(|s| s.text.as_str())
            .collect();
        if let Some(text) = self.text.as_deref().filter(|_| !citing.is_empty()) {
            self.cited_spans = cited_spans(text, &citing)
                .into_iter()
                .map(|[start, end]| TextSpan { start, end })
                .collect();
        }
        self
    }
}

#[derive(Serialize)]
struct PtkbEvent {
    ptkb_ranking: Vec<PtkbRankResponse>,
}

#[derive(Serialize)]
struct RewriteEvent<'a> {
    rewritten_utterance: &'a str,
    method: &'a str,
    search_query: &'a SearchQuery,
}

#[derive(Serialize)]
struct PassagesEvent {
    passages: Vec<PassageResponse>,
}

#[derive(Serialize)]
struct SentenceEvent<'a> {
    index: usize,
    text: &'a str,
    citations: Vec<usize>,
}

#[derive(Serialize)]
struct RestartEvent<'a> {
    reason: &'a str,
}

/// The stream event a pipeline event becomes: its name and data.
pub fn stream_event(event: TurnEvent<'_>, collection: &str) -> (StreamEvent, serde_json::Value) {
    let value = |v: Result<serde_json::Value, serde_json::Error>| v.unwrap_or_default();
    match event {
        TurnEvent::Ptkb(ranking) => {
            let ptkb_ranking = ranking
                .statements
                .iter()
                .enumerate()
                .map(|(i, s)| PtkbRankResponse {
                    id: s.id.clone(),
                    text: s.text.clone(),
                    score: shown(s.score),
                    rank: i + 1,
                    selected: s.selected,
                })
                .collect();
            let data = serde_json::to_value(PtkbEvent { ptkb_ranking });
            (StreamEvent::Ptkb, value(data))
        }
        TurnEvent::Rewrite(rewrite, search_query) => {
            let data = serde_json::to_value(RewriteEvent {
                rewritten_utterance: &rewrite.text,
                method: rewrite.method.as_str(),
                search_query,
            });
            (StreamEvent::Rewrite, value(data))
        }
        TurnEvent::Passages(passages) => {
            let passages = passages
                .iter()
                .enumerate()
                .map(|(i, p)| PassageResponse::ranked(i + 1, p, collection))
                .collect();
            let data = serde_json::to_value(PassagesEvent { passages });
            (StreamEvent::Passages, value(data))
        }
        TurnEvent::Generation(GenerationEvent::Sentence { index, sentence }) => {
            let data = serde_json::to_value(SentenceEvent {
                index,
                text: &sentence.text,
                citations: sentence.citations.iter().map(|c| c + 1).collect(),
            });
            (StreamEvent::Sentence, value(data))
        }
        TurnEvent::Generation(GenerationEvent::Restart { reason }) => {
            let data = serde_json::to_value(RestartEvent { reason: &reason });
            (StreamEvent::Restart, value(data))
        }
    }
}

/// The `{conversation_id}` of a route.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // documents the path; handlers parse it with `parse_uuid` to name it in errors
pub struct ConversationPath {
    pub conversation_id: uuid::Uuid,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_show_as_the_f32_they_are() {
        assert_eq!(serde_json::to_string(&shown(0.8)).unwrap(), "0.8");
        assert_eq!(
            serde_json::to_string(&shown(-1.25e-7)).unwrap(),
            serde_json::to_string(&-1.25e-7f32).unwrap()
        );
    }

    fn stored_turn(diagnostics: serde_json::Value) -> Turn {
        Turn {
            id: Uuid::nil(),
            conversation_id: Uuid::nil(),
            seq: 2,
            version: 1,
            is_current: true,
            external_turn_id: None,
            utterance: "Is it cheap?".into(),
            reference_rewrite: None,
            reference_ptkb: None,
            canonical_response: None,
            rewritten_utterance: Some("Is ramen cheap?".into()),
            response_text: None,
            generator: None,
            settings: serde_json::json!({}),
            timings_ms: serde_json::json!({}),
            diagnostics,
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            ptkb_ranking: Vec::new(),
            passages: Vec::new(),
            sentences: Vec::new(),
        }
    }

    #[test]
    fn the_search_query_is_a_field_of_its_own_and_absent_in_older_turns() {
        let words = serde_json::json!({"text": "Is ramen cheap?", "words": [
            {"text": "Is", "origin": "utterance"},
            {"text": "ramen", "origin": "history", "turn": 1},
            {"text": "cheap", "origin": "utterance"}]});
        let turn = TurnResponse::from(stored_turn(
            serde_json::json!({"rewrite_method": "history", "search_query": words}),
        ));
        let query = turn.search_query.as_ref().expect("the stored query");
        assert_eq!(query.words[1].turn, Some(1));
        let json = serde_json::to_value(&turn).unwrap();
        assert_eq!(json["search_query"], words);
        assert_eq!(
            json["diagnostics"],
            serde_json::json!({"rewrite_method": "history"})
        );
        // Stored before the query was kept (or unreadable): no field, no error.
        for diagnostics in [
            serde_json::json!({"rewrite_method": "history"}),
            serde_json::json!({"search_query": {"text": 3}}),
            serde_json::Value::Null,
        ] {
            let json = serde_json::to_value(TurnResponse::from(stored_turn(diagnostics))).unwrap();
            assert!(json.get("search_query").is_none(), "{json}");
            assert_eq!(json["rewritten_utterance"], "Is ramen cheap?");
        }
    }

    #[test]
    fn event_names_are_distinct() {
        let names: std::collections::HashSet<_> = STREAM_EVENT_NAMES.iter().collect();
        assert_eq!(names.len(), StreamEvent::ALL.len());
    }
}
