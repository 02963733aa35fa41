//! Between the pipeline and the store: a stored conversation as the context of its next turn,
//! and a finished turn as the rows the store keeps.

use crate::pipeline::context::{ConversationContext, HistoryTurn, PtkbStatement};
use crate::pipeline::generate::Generation;
use crate::pipeline::turn::{TurnOutput, TurnSettings};
use crate::store::turns::{NewRankedStatement, NewTurn, Sentence, TurnPassage};
use crate::store::{HistoryEntry, Statement};

/// The key of the turn's search query in its stored diagnostics.
pub const SEARCH_QUERY: &str = "search_query";

/// The context of a stored conversation's next turn: earlier utterances with their canonical
/// response when one was supplied (batch runs of iKAT topics), else convrag's own answer; the
/// conversation's instructions.
pub fn context_from_store(
    utterance: &str,
    history: &[HistoryEntry],
    ptkb: &[Statement],
    manual_rewrite: Option<String>,
    instructions: Option<String>,
) -> ConversationContext {
    ConversationContext {
        utterance: utterance.to_string(),
        history: history
            .iter()
            .map(|h| HistoryTurn {
                utterance: h.utterance.clone(),
                response: h
                    .canonical_response
                    .clone()
                    .or_else(|| h.response_text.clone()),
            })
            .collect(),
        ptkb: ptkb
            .iter()
            .map(|s| PtkbStatement {
                id: s.id.clone(),
                text: s.text.clone(),
            })
            .collect(),
        manual_rewrite,
        instructions,
    }
}

/// The turn as the store keeps it. `settings` is recorded as given.
pub fn new_turn(
    output: &TurnOutput,
    utterance: &str,
    collection: Option<&str>,
    settings: &TurnSettings,
) -> NewTurn {
    let used = output
        .generation
        .as_ref()
        .map(|g| g.used_flags(output.passages.len()))
        .unwrap_or_else(|| vec![false; output.passages.len()]);
    let mut diagnostics = serde_json::Map::new();
    diagnostics.insert(
        "rewrite_method".into(),
        output.rewrite.method.as_str().into(),
    );
    diagnostics.insert("history_turns".into(), output.history_turns.into());
    // The search query with its words' origins: the API's `search_query` (absent in turns
    // stored before it).
    diagnostics.insert(
        SEARCH_QUERY.into(),
        serde_json::to_value(&output.query.shown).unwrap_or_default(),
    );
    if let Some(f) = &output.rewrite_fallback {
        diagnostics.insert(
            "rewrite_fallback".into(),
            serde_json::to_value(f).unwrap_or_default(),
        );
    }
    if let Some(raw) = &output.rewrite_llm_output {
        diagnostics.insert("rewrite_llm_output".into(), raw.clone().into());
    }
    if let Some(usage) = &output.rewrite_llm_usage {
        diagnostics.insert(
            "rewrite_llm_usage".into(),
            serde_json::to_value(usage).unwrap_or_default(),
        );
    }
    diagnostics.insert(
        "reranker".into(),
        output
            .reranker
            .clone()
            .map_or(serde_json::Value::Null, Into::into),
    );
    // The first stage that ran beside the one `settings` asked for (BM25 while a collection's
    // vectors are not ready).
    if let Some(retrieval) = output.retrieval {
        diagnostics.insert("retrieval".into(), retrieval.to_string().into());
    }
    if let Some(f) = &output.retrieval_fallback {
        diagnostics.insert(
            "retrieval_fallback".into(),
            serde_json::to_value(f).unwrap_or_default(),
        );
    }
    if let Some(g) = &output.generation {
        if let Ok(serde_json::Value::Object(d)) = serde_json::to_value(&g.diagnostics) {
            diagnostics.extend(d);
        }
    }
    NewTurn {
        utterance: utterance.to_string(),
        rewritten_utterance: Some(output.rewrite.text.clone()),
        response_text: output.generation.as_ref().map(Generation::response_text),
        generator: output.generation.as_ref().map(|g| g.generator.to_string()),
        settings: serde_json::to_value(settings).unwrap_or_default(),
        timings_ms: serde_json::to_value(&output.timings).unwrap_or_default(),
        diagnostics: serde_json::Value::Object(diagnostics),
        ptkb_ranking: output
            .ptkb
            .statements
            .iter()
            .map(|s| NewRankedStatement {
                statement_id: s.id.clone(),
                score: s.score as f64,
                selected: s.selected,
            })
            .collect(),
        passages: output
            .passages
            .iter()
            .zip(used)
            .zip(1..)
            .map(|((p, used), rank)| TurnPassage {
                rank,
                passage_id: p.id.clone(),
                collection: collection.map(str::to_string),
                retrieval_score: Some(p.retrieval_score as f64),
                rerank_score: p.rerank_score.map(|s| s as f64),
                score: p.score as f64,
                used,
                title: Some(p.title.clone()),
                url: Some(p.url.clone()),
                text: Some(p.text.clone()),
                bm25_rank: p.ranks.bm25.map(|r| r as i32),
                dense_rank: p.ranks.dense.map(|r| r as i32),
                fused_rank: p.ranks.fused.map(|r| r as i32),
            })
            .collect(),
        sentences: output
            .generation
            .as_ref()
            .map(stored_sentences)
            .unwrap_or_default(),
        ..NewTurn::default()
    }
}

/// The sentences as the store keeps them (citations as 1-based passage ranks).
pub fn stored_sentences(generation: &Generation) -> Vec<Sentence> {
    generation
        .sentences
        .iter()
        .map(|s| Sentence {
            text: s.text.clone(),
            citations: s.citations.iter().map(|&i| i as i32 + 1).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::generate::{Diagnostics, GeneratedSentence, GeneratorId};

    #[test]
    fn citations_are_stored_as_one_based_ranks() {
        let g = Generation {
            sentences: vec![
                GeneratedSentence {
                    text: "A.".into(),
                    citations: vec![2, 0],
                },
                GeneratedSentence {
                    text: "B.".into(),
                    citations: vec![],
                },
            ],
            generator: GeneratorId::Extractive,
            diagnostics: Diagnostics::default(),
        };
        assert_eq!(stored_sentences(&g)[0].citations, vec![3, 1]);
    }
}
