//! PolEval 2022 passage retrieval: `in.tsv` (`<domain>\t<question>`) → one one-turn conversation
//! per line, each routed to its domain's collection; the stored rankings → `out.tsv`, ten ids per
//! line, line-aligned with `in.tsv`.

use std::collections::BTreeMap;

use super::engine::{TopicJob, TurnContext, TurnJob, TurnPassages};
use super::{BatchError, Result};
use crate::formats::poleval::{PolevalQuestion, PASSAGES_PER_LINE};
use crate::pipeline::context::ConversationContext;
use crate::store::Turn;

/// Collection of each domain: `routes` (DOMAIN=NAME options) over the default, the collection
/// named like the domain (`wiki-trivia`, `legal-questions`, `allegro-faq`).
pub fn collections(
    questions: &[PolevalQuestion],
    routes: &[(String, String)],
) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for q in questions {
        let name = routes
            .iter()
            .find(|(d, _)| *d == q.domain)
            .map_or_else(|| q.domain.clone(), |(_, c)| c.clone());
        map.insert(q.domain.clone(), name);
    }
    map
}

/// One conversation per question (the topic id is the `in.tsv` line number).
pub fn jobs(questions: &[PolevalQuestion], routes: &BTreeMap<String, String>) -> Vec<TopicJob> {
    questions
        .iter()
        .map(|q| TopicJob {
            id: q.line.to_string(),
            title: format!("{} line {}", q.domain, q.line),
            collection: routes.get(&q.domain).cloned(),
            ptkb: Vec::new(),
            turns: vec![TurnJob {
                external_id: q.line.to_string(),
                utterance: q.question.trim().to_string(),
                reference_rewrite: None,
                reference_ptkb: None,
                canonical_response: None,
                context: TurnContext::Given(ConversationContext::new(q.question.trim())),
                passages: TurnPassages::Retrieve,
            }],
        })
        .collect()
}

/// The ten best passage ids of each line.
pub fn render(questions: &[PolevalQuestion], stored: &[Vec<Turn>]) -> Result<Vec<Vec<String>>> {
    questions
        .iter()
        .zip(stored)
        .map(|(q, turns)| {
            let ids: Vec<String> = turns[0]
                .passages
                .iter()
                .take(PASSAGES_PER_LINE)
                .map(|p| p.passage_id.clone())
                .collect();
            if ids.len() < PASSAGES_PER_LINE {
                return Err(BatchError::Resume(format!(
                    "line {}: {} passages stored, {PASSAGES_PER_LINE} needed (the collection {} is too small)",
                    q.line,
                    ids.len(),
                    turns[0].passages.first().and_then(|p| p.collection.clone()).unwrap_or_default()
                )));
            }
            Ok(ids)
        })
        .collect()
}
