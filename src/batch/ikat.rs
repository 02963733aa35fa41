//! TREC iKAT runs: topics (2023/2024/2025 layouts) → one conversation per topic × persona, the
//! context of each turn under the run type's rules ([`ConversationContext::from_ikat`]), and the
//! stored turns → the run JSON (plus, optionally, its TREC run).

use std::collections::HashMap;
use std::path::Path;

use super::engine::{TopicJob, TurnContext, TurnJob, TurnPassages};
use super::{input_error, submitted_score, BatchError, Result};
use crate::formats::ikat::{
    IkatResponse, IkatRun, IkatRunTurn, IkatTopic, PassageProvenance, RunType,
};
use crate::formats::trec_run::{read_run, TrecRunLine};
use crate::index::Retriever;
use crate::pipeline::context::ConversationContext;
use crate::pipeline::turn::RankedPassage;
use crate::store::Turn;

/// Which statements a response's `ptkb_provenance` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum PtkbList {
    /// The statements the ranker selected, best first (the submission form).
    Selected,
    /// Every statement, ranked (to measure the ranking itself with `convrag eval ptkb`).
    All,
}

/// The topics as conversations. `given`: only_response runs' passage ranking per turn key.
pub fn jobs(
    topics: &[IkatTopic],
    run_type: RunType,
    collection: Option<&str>,
    mut given: Option<HashMap<String, Vec<RankedPassage>>>,
) -> Result<Vec<TopicJob>> {
    let mut out = Vec::with_capacity(topics.len());
    for topic in topics {
        let mut turns = Vec::with_capacity(topic.turns.len());
        for (i, turn) in topic.turns.iter().enumerate() {
            let key = topic.turn_key(turn);
            let context = ConversationContext::from_ikat(topic, i, run_type)
                .expect("index within the topic's turns");
            let passages = match given.as_mut() {
                Some(map) => TurnPassages::Given(map.remove(&key).ok_or_else(|| {
                    BatchError::Resume(format!(
                        "turn {key} has no passages in the given ranking (--ranking)"
                    ))
                })?),
                None => TurnPassages::Retrieve,
            };
            turns.push(TurnJob {
                external_id: key,
                utterance: turn.utterance.clone(),
                reference_rewrite: turn.resolved_utterance.clone(),
                reference_ptkb: Some(turn.ptkb_provenance.clone()),
                canonical_response: turn.response.clone(),
                context: TurnContext::Given(context),
                passages,
            });
        }
        out.push(TopicJob {
            id: topic.number.clone(),
            title: topic.title.clone(),
            collection: collection.map(str::to_string),
            ptkb: topic.ptkb.clone(),
            turns,
        });
    }
    Ok(out)
}

/// Reads a given passage ranking (TREC run, one list per `<number>_<turn_id>`) and the passages'
/// text from `retriever`; fails on a passage the collection does not hold, naming the line.
pub fn read_given_ranking(
    path: &Path,
    retriever: &dyn Retriever,
    limit: usize,
) -> Result<HashMap<String, Vec<RankedPassage>>> {
    let lines = read_run(path)?;
    given_from_lines(path, &lines, retriever, limit)
}

/// The ranked passages of TREC run lines, per topic, in rank order (as the file ranks them:
/// score descending, then the listed rank), at most `limit` per topic, texts from `retriever`.
pub(crate) fn given_from_lines(
    path: &Path,
    lines: &[TrecRunLine],
    retriever: &dyn Retriever,
    limit: usize,
) -> Result<HashMap<String, Vec<RankedPassage>>> {
    let mut by_topic: HashMap<String, Vec<&TrecRunLine>> = HashMap::new();
    for l in lines {
        by_topic.entry(l.topic_id.clone()).or_default().push(l);
    }
    let mut out = HashMap::new();
    for (topic, mut ls) in by_topic {
        ls.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.rank.cmp(&b.rank)));
        let mut passages = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for l in ls
            .into_iter()
            .filter(|l| seen.insert(l.docid.as_str()))
            .take(limit)
        {
            let hit = retriever.passage(&l.docid)?.ok_or_else(|| {
                input_error(
                    path,
                    l.line,
                    format!("passage {} is not in the collection", l.docid),
                )
            })?;
            passages.push(RankedPassage {
                id: hit.id,
                title: hit.title,
                url: hit.url,
                text: hit.text,
                retrieval_score: l.score as f32,
                rerank_score: None,
                score: l.score as f32,
                ordinal: hit.ordinal,
            });
        }
        out.insert(topic, passages);
    }
    Ok(out)
}

/// How the stored turns become the run.
pub struct RenderOptions<'a> {
    pub run_name: &'a str,
    pub run_type: RunType,
    /// The run generated responses (`eval_response`).
    pub responses: bool,
    pub ptkb_list: PtkbList,
}

/// The run JSON of the stored turns (topic order, turn order).
pub fn render(options: &RenderOptions<'_>, stored: &[Vec<Turn>]) -> Result<IkatRun> {
    let only_response = options.run_type == RunType::OnlyResponse;
    let mut turns = Vec::new();
    for turn in stored.iter().flatten() {
        let key = turn.external_turn_id.clone().unwrap_or_default();
        let ptkb_provenance = turn
            .ptkb_ranking
            .iter()
            .filter(|s| options.ptkb_list == PtkbList::All || s.selected)
            .map(|s| {
                s.id.parse::<u32>().map_err(|_| {
                    BatchError::Resume(format!(
                        "turn {key}: PTKB id {:?} is not a number, which iKAT runs require",
                        s.id
                    ))
                })
            })
            .collect::<Result<Vec<u32>>>()?;
        let passage_provenance = turn
            .passages
            .iter()
            .map(|p| PassageProvenance {
                id: p.passage_id.clone(),
                // The only_response sample carries no scores: the ranking was given.
                score: (!only_response).then(|| submitted_score(p.score)),
                used: p.used,
            })
            .collect();
        turns.push(IkatRunTurn {
            turn_id: key,
            responses: vec![IkatResponse {
                rank: 1,
                text: turn.response_text.clone().unwrap_or_default(),
                ptkb_provenance,
                passage_provenance,
            }],
        });
    }
    Ok(IkatRun {
        run_name: options.run_name.to_string(),
        run_type: options.run_type,
        eval_response: (!only_response).then_some(options.responses),
        turns,
    })
}
