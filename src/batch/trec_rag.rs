//! TREC RAG 2024 and 2025: R (a TREC run, at most 100 segments per topic), AG (answers over a
//! given ranking: `baseline_r_out.tsv` and/or reranker-request JSONL carrying the segments) and RAG
//! (answers over convrag's own retrieval). Each topic is a one-turn conversation.

use std::collections::HashMap;
use std::path::Path;

use super::engine::{TopicJob, TurnContext, TurnJob, TurnPassages};
use super::{input_error, submitted_score, BatchError, Result};
use crate::formats::trec_rag::{
    Rag24Answer, Rag25Answer, Rag25Metadata, RerankRequest, SegmentFields, Sentence, Topic,
};
use crate::formats::trec_run::{self, RankedList, RunRules, TrecRunLine, TrecRunWriter};
use crate::formats::ValidationContext;
use crate::index::Retriever;
use crate::pipeline::context::ConversationContext;
use crate::pipeline::turn::RankedPassage;
use crate::store::Turn;

/// At most this many segments per topic in an R run ("We will take a maximum of 100 results").
pub const MAX_RUN_SEGMENTS: usize = 100;

/// The topics as one-turn conversations. `given`: the AG task's ranking per topic id.
pub fn jobs(
    topics: &[Topic],
    collection: Option<&str>,
    mut given: Option<HashMap<String, Vec<RankedPassage>>>,
) -> Result<Vec<TopicJob>> {
    topics
        .iter()
        .map(|t| {
            let passages = match given.as_mut() {
                Some(map) => TurnPassages::Given(map.remove(&t.id).ok_or_else(|| {
                    BatchError::Resume(format!(
                        "topic {} has no segments in the given ranking (--ranking / --requests)",
                        t.id
                    ))
                })?),
                None => TurnPassages::Retrieve,
            };
            Ok(TopicJob {
                id: t.id.clone(),
                title: t.id.clone(),
                collection: collection.map(str::to_string),
                ptkb: Vec::new(),
                turns: vec![TurnJob {
                    external_id: t.id.clone(),
                    utterance: t.text.clone(),
                    reference_rewrite: None,
                    reference_ptkb: None,
                    canonical_response: None,
                    // Topics stand alone: no history, no PTKB.
                    context: TurnContext::Given(ConversationContext::new(t.text.clone())),
                    passages,
                }],
            })
        })
        .collect()
}

/// The topics of reranker requests (for AG runs without a topics file).
pub fn topics_of_requests(requests: &[RerankRequest]) -> Vec<Topic> {
    requests
        .iter()
        .map(|r| Topic {
            line: r.line,
            id: r.query.id.clone(),
            text: r.query.text.clone(),
        })
        .collect()
}

fn passage_of(id: &str, fields: &SegmentFields, score: f64) -> RankedPassage {
    RankedPassage {
        id: id.to_string(),
        title: fields.title.clone(),
        url: fields.url.clone(),
        text: fields.segment.clone(),
        retrieval_score: score as f32,
        rerank_score: None,
        score: score as f32,
        ordinal: None,
    }
}

/// The AG task's given ranking per topic: the order and scores of `ranking` (a TREC run) when
/// given, else the candidates' order in `requests`; segment texts from the requests, else from
/// `collection`. At most `limit` segments per topic. Every problem names the file and line.
pub fn given_ranking(
    ranking: Option<(&Path, &[TrecRunLine])>,
    requests: Option<(&Path, &[RerankRequest])>,
    collection: Option<&dyn Retriever>,
    limit: usize,
) -> Result<HashMap<String, Vec<RankedPassage>>> {
    let mut fields: HashMap<&str, &SegmentFields> = HashMap::new();
    if let Some((_, reqs)) = requests {
        for r in reqs {
            for c in &r.candidates {
                if let Some(doc) = &c.doc {
                    fields.insert(c.docid.as_str(), doc);
                }
            }
        }
    }
    let lookup = |path: &Path, line: usize, id: &str, score: f64| -> Result<RankedPassage> {
        if let Some(f) = fields.get(id) {
            return Ok(passage_of(id, f, score));
        }
        let Some(retriever) = collection else {
            return Err(input_error(
                path,
                line,
                format!("segment {id}: no text (not in --requests, and no --collection given)"),
            ));
        };
        let hit = retriever.passage(id)?.ok_or_else(|| {
            input_error(
                path,
                line,
                format!("segment {id} is neither in --requests nor in the collection"),
            )
        })?;
        Ok(RankedPassage {
            id: hit.id,
            title: hit.title,
            url: hit.url,
            text: hit.text,
            retrieval_score: score as f32,
            rerank_score: None,
            score: score as f32,
            ordinal: hit.ordinal,
        })
    };
    let mut out: HashMap<String, Vec<RankedPassage>> = HashMap::new();
    match (ranking, requests) {
        (Some((path, lines)), _) => {
            let mut by_topic: HashMap<&str, Vec<&TrecRunLine>> = HashMap::new();
            for l in lines {
                by_topic.entry(l.topic_id.as_str()).or_default().push(l);
            }
            for (topic, mut ls) in by_topic {
                ls.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.rank.cmp(&b.rank)));
                let mut seen = std::collections::HashSet::new();
                let list = ls
                    .into_iter()
                    .filter(|l| seen.insert(l.docid.as_str()))
                    .take(limit)
                    .map(|l| lookup(path, l.line, &l.docid, l.score))
                    .collect::<Result<Vec<_>>>()?;
                out.insert(topic.to_string(), list);
            }
        }
        (None, Some((path, reqs))) => {
            for r in reqs {
                let mut seen = std::collections::HashSet::new();
                let list = r
                    .candidates
                    .iter()
                    .filter(|c| seen.insert(c.docid.as_str()))
                    .take(limit)
                    .map(|c| lookup(path, r.line, &c.docid, c.score))
                    .collect::<Result<Vec<_>>>()?;
                if out.insert(r.query.id.clone(), list).is_some() {
                    return Err(input_error(
                        path,
                        r.line,
                        format!("query {} appears twice", r.query.id),
                    ));
                }
            }
        }
        (None, None) => {}
    }
    Ok(out)
}

/// The stored rankings as a TREC run (topics in input order), validated against the topics.
pub fn render_run(
    run_tag: &str,
    topics: &[String],
    stored: &[Vec<Turn>],
    max_per_topic: usize,
) -> Result<String> {
    let lists: Vec<RankedList> = topics
        .iter()
        .zip(stored)
        .map(|(id, turns)| RankedList {
            topic_id: id.clone(),
            hits: turns
                .iter()
                .flat_map(|t| &t.passages)
                .map(|p| (p.passage_id.clone(), submitted_score(p.score)))
                .collect(),
        })
        .collect();
    let text = TrecRunWriter::new(run_tag, max_per_topic).render(&lists)?;
    let rules = RunRules {
        max_per_topic,
        topics: Some(topics.to_vec()),
    };
    let report = trec_run::validate_text(&text, &rules, &ValidationContext::default());
    if report.has_errors() {
        return Err(crate::formats::FormatError::Invalid(report.error_summary()).into());
    }
    Ok(text)
}

/// A sentence with its citations as (index into `references`, support).
type CitedSentence = (String, Vec<(usize, f64)>);

/// The answer of one stored turn: the first `references` passages, and each sentence with its
/// citations as 0-based indices into them, with the cited passage's score (its support).
fn answer_parts(turn: &Turn, references: usize) -> Result<(Vec<String>, Vec<CitedSentence>)> {
    let refs: Vec<String> = turn
        .passages
        .iter()
        .take(references)
        .map(|p| p.passage_id.clone())
        .collect();
    let key = turn.external_turn_id.as_deref().unwrap_or_default();
    let sentences = turn
        .sentences
        .iter()
        .map(|s| {
            let cites = s
                .citations
                .iter()
                .map(|&rank| {
                    let i = rank as usize - 1;
                    if i >= refs.len() {
                        return Err(BatchError::Resume(format!(
                            "topic {key}: a sentence cites passage {rank}, beyond the {} references",
                            refs.len()
                        )));
                    }
                    Ok((i, turn.passages[i].score))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((s.text.clone(), cites))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((refs, sentences))
}

/// TREC RAG 2024 answers (one JSON line per topic).
pub fn render_2024(
    run_id: &str,
    topics: &[Topic],
    stored: &[Vec<Turn>],
    references: usize,
) -> Result<Vec<Rag24Answer>> {
    topics
        .iter()
        .zip(stored)
        .map(|(topic, turns)| {
            let (refs, sentences) = answer_parts(&turns[0], references)?;
            let answer = sentences
                .into_iter()
                .map(|(text, cites)| Sentence {
                    text,
                    // 2024 asks for no order; the generator's order is kept.
                    citations: cites.into_iter().map(|(i, _)| i).collect(),
                })
                .collect();
            Ok(Rag24Answer::new(run_id, topic, refs, answer))
        })
        .collect()
}

/// TREC RAG 2025 answers in Format 1 (convertible to Format 2 and to the checker's layout).
/// Citations are sorted from highest to lowest support, the support of a cited segment being its
/// final ranking score for the topic.
pub fn render_2025(
    metadata: &Rag25Metadata,
    topics: &[Topic],
    stored: &[Vec<Turn>],
    references: usize,
) -> Result<Vec<Rag25Answer>> {
    topics
        .iter()
        .zip(stored)
        .map(|(topic, turns)| {
            let (refs, sentences) = answer_parts(&turns[0], references)?;
            Ok(Rag25Answer::new(metadata.clone(), topic, refs, sentences))
        })
        .collect()
}
