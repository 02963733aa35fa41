//! SCAI-QReCC-21: `questions.json` → one conversation per `Conversation_no`, turns in file order;
//! each turn's context is the stored conversation (earlier questions with convrag's own answers:
//! the task gives no canonical responses). The stored turns → `run.json`.

use std::collections::HashMap;

use super::engine::{TopicJob, TurnContext, TurnJob, TurnPassages};
use super::{submitted_score, BatchError, Result};
use crate::formats::qrecc::{QreccAnswer, Question};
use crate::store::Turn;

/// The questions as conversations, in order of first appearance. `rewritten`: the questions are
/// the human rewrites (`-rewritten` files), used as manual rewrites.
pub fn jobs(questions: &[Question], collection: Option<&str>, rewritten: bool) -> Vec<TopicJob> {
    let mut order: Vec<u64> = Vec::new();
    let mut by_conversation: HashMap<u64, Vec<&Question>> = HashMap::new();
    for q in questions {
        by_conversation
            .entry(q.conversation_no)
            .or_insert_with(|| {
                order.push(q.conversation_no);
                Vec::new()
            })
            .push(q);
    }
    order
        .into_iter()
        .map(|no| TopicJob {
            id: no.to_string(),
            title: format!("QReCC conversation {no}"),
            collection: collection.map(str::to_string),
            ptkb: Vec::new(),
            turns: by_conversation[&no]
                .iter()
                .map(|q| TurnJob {
                    external_id: q.key(),
                    utterance: q.question.clone(),
                    reference_rewrite: rewritten.then(|| q.question.clone()),
                    reference_ptkb: None,
                    canonical_response: None,
                    context: TurnContext::Stored {
                        manual_rewrite: rewritten.then(|| q.question.clone()),
                    },
                    passages: TurnPassages::Retrieve,
                })
                .collect(),
        })
        .collect()
}

/// Which `Model_*` fields the run carries (the stages that ran).
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    pub passages: bool,
    pub answer: bool,
}

/// `run.json` records in the questions' order.
pub fn render(
    questions: &[Question],
    stored: &[Vec<Turn>],
    fields: Fields,
) -> Result<Vec<QreccAnswer>> {
    let by_key: HashMap<&str, &Turn> = stored
        .iter()
        .flatten()
        .filter_map(|t| t.external_turn_id.as_deref().map(|k| (k, t)))
        .collect();
    questions
        .iter()
        .map(|q| {
            let key = q.key();
            let turn = by_key
                .get(key.as_str())
                .ok_or_else(|| BatchError::Resume(format!("turn {key} is not stored")))?;
            Ok(QreccAnswer {
                conversation_no: q.conversation_no,
                turn_no: q.turn_no,
                model_rewrite: turn.rewritten_utterance.clone(),
                model_passages: fields.passages.then(|| {
                    turn.passages
                        .iter()
                        .map(|p| (p.passage_id.clone(), submitted_score(p.score)))
                        .collect()
                }),
                model_answer: fields
                    .answer
                    .then(|| turn.response_text.clone().unwrap_or_default()),
            })
        })
        .collect()
}
