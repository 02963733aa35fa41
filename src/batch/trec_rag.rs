//! TREC RAG 2024 and 2025: R (a TREC run, at most 100 segments per topic), AG (answers over a
//! given ranking: `baseline_r_out.tsv` and/or reranker-request JSONL carrying the segments) and RAG
//! (answers over convrag's own retrieval). Each topic is a one-turn conversation.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::json;

use super::engine::{TopicJob, TurnContext, TurnJob, TurnPassages};
use super::plan::{
    collection_required, retriever, run_name, settings, stages, stem, CommonOptions, Outputs, Plan,
    PlannedRun, Render, Stage, Stages,
};
use super::{input_error, option, submitted_score, BatchError, Result};
use crate::formats::trec_rag::{
    self as rag_format, AnswerFormat, Rag24Answer, Rag25Answer, Rag25Metadata, RerankRequest,
    SegmentFields, Sentence, Topic,
};
use crate::formats::trec_run::{self, RankedList, RunRules, TrecRunLine, TrecRunWriter};
use crate::formats::ValidationContext;
use crate::index::Retriever;
use crate::pipeline::context::ConversationContext;
use crate::pipeline::generate::WordLimit;
use crate::pipeline::turn::{RankedPassage, TurnSettings};
use crate::service::TurnService;
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
        ranks: Default::default(),
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
            ranks: Default::default(),
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
    report.check()?;
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
    answers(topics, stored, references, |topic, refs, sentences| {
        let answer = sentences
            .into_iter()
            .map(|(text, cites)| Sentence {
                text,
                // 2024 asks for no order; the generator's order is kept.
                citations: cites.into_iter().map(|(i, _)| i).collect(),
            })
            .collect();
        Rag24Answer::new(run_id, topic, refs, answer)
    })
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
    answers(topics, stored, references, |topic, refs, sentences| {
        Rag25Answer::new(metadata.clone(), topic, refs, sentences)
    })
}

/// Each topic's answer from its one stored turn's [`answer_parts`], as `answer` writes them.
fn answers<A>(
    topics: &[Topic],
    stored: &[Vec<Turn>],
    references: usize,
    answer: impl Fn(&Topic, Vec<String>, Vec<CitedSentence>) -> A,
) -> Result<Vec<A>> {
    topics
        .iter()
        .zip(stored)
        .map(|(topic, turns)| {
            let (refs, sentences) = answer_parts(&turns[0], references)?;
            Ok(answer(topic, refs, sentences))
        })
        .collect()
}

/// The TREC RAG task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RagTask {
    R,
    Ag,
    Rag,
}

/// The run type of TREC RAG 2025 metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RagRunType {
    Automatic,
    Manual,
}

/// The TREC RAG edition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum RagYear {
    #[value(name = "2024")]
    #[serde(rename = "2024")]
    Y2024,
    #[value(name = "2025")]
    #[serde(rename = "2025")]
    Y2025,
}

impl std::fmt::Display for RagYear {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RagYear::Y2024 => "2024",
            RagYear::Y2025 => "2025",
        })
    }
}

/// TREC RAG 2025 answer layout: 1 (citations index `references`) or 2 (citations are segment
/// ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
pub enum AnswerLayout {
    #[default]
    #[value(name = "1")]
    #[serde(rename = "1")]
    Format1,
    #[value(name = "2")]
    #[serde(rename = "2")]
    Format2,
}

impl AnswerLayout {
    /// As recorded with the run (`"1"`, `"2"`).
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerLayout::Format1 => "1",
            AnswerLayout::Format2 => "2",
        }
    }
}

/// TREC RAG 2024/2025: R (a TREC run), AG (answers over a given ranking), RAG (answers).
#[derive(Debug, Clone)]
pub struct TrecRagOptions {
    pub year: RagYear,
    pub task: RagTask,
    pub topics: Option<PathBuf>,
    pub collection: Option<String>,
    pub ranking: Option<PathBuf>,
    pub requests: Option<PathBuf>,
    pub output: PathBuf,
    pub trec_output: Option<PathBuf>,
    /// Segments listed in `references`.
    pub references: usize,
    pub team_id: Option<String>,
    pub run_type: RagRunType,
    pub format: AnswerLayout,
    /// Format 1 in the organizers' checker layout.
    pub checker_layout: bool,
    pub common: CommonOptions,
}

/// The TREC RAG options that must agree with the task and with each other.
fn check_trec_rag(a: &TrecRagOptions, stages: Stages) -> Result<()> {
    let answers = a.task != RagTask::R;
    let year2025 = a.year == RagYear::Y2025;
    if !stages.retrieve || stages.generate != answers {
        return Err(option(
            "--stages",
            if answers {
                "AG and RAG answers need retrieve and generate"
            } else {
                "an R run is a ranking: retrieve (and rerank), no generate"
            },
        ));
    }
    if a.references == 0 || a.references > rag_format::MAX_REFERENCES {
        return Err(option(
            "--references",
            format!("must be between 1 and {}", rag_format::MAX_REFERENCES),
        ));
    }
    let given_input = a.ranking.is_some() || a.requests.is_some();
    if (a.task == RagTask::Ag) != given_input {
        return Err(option(
            "--ranking",
            "the AG task answers over a given ranking (--ranking and/or --requests); R and RAG retrieve themselves",
        ));
    }
    if a.trec_output.is_some() && a.task != RagTask::Rag {
        return Err(option(
            "--trec-output",
            "is for RAG runs (an R run's output is already a TREC run)",
        ));
    }
    if year2025 && answers && a.team_id.is_none() {
        return Err(option(
            "--team-id",
            "is required for 2025 answers (metadata.team_id)",
        ));
    }
    Ok(())
}

/// The input files of a TREC RAG run, read.
struct RagInputs {
    /// Role → path, recorded with the run.
    files: BTreeMap<String, PathBuf>,
    requests: Option<Vec<rag_format::RerankRequest>>,
    ranking: Option<Vec<trec_run::TrecRunLine>>,
    topics: Vec<rag_format::Topic>,
}

fn read_trec_rag_inputs(a: &TrecRagOptions) -> Result<RagInputs> {
    let year2025 = a.year == RagYear::Y2025;
    let mut inputs = BTreeMap::new();
    let requests = match &a.requests {
        Some(p) => {
            inputs.insert("requests".to_string(), p.clone());
            Some(rag_format::read_rerank_requests(p)?)
        }
        None => None,
    };
    let ranking = match &a.ranking {
        Some(p) => {
            inputs.insert("ranking".to_string(), p.clone());
            Some(trec_run::read_run(p)?)
        }
        None => None,
    };
    let topics = match (&a.topics, &requests) {
        (Some(p), _) => {
            inputs.insert("topics".to_string(), p.clone());
            if year2025 {
                rag_format::read_rag25_topics(p)?
            } else {
                rag_format::read_topics_tsv(p)?
            }
        }
        (None, Some(reqs)) => topics_of_requests(reqs),
        (None, None) => {
            return Err(option(
                "--topics",
                "is required (AG runs may give --requests instead)",
            ))
        }
    };
    Ok(RagInputs {
        files: inputs,
        requests,
        ranking,
        topics,
    })
}

/// Checks the options against the inputs and the installed model and plans the run.
pub(super) fn plan(service: &TurnService, a: TrecRagOptions) -> Result<PlannedRun> {
    let year2025 = a.year == RagYear::Y2025;
    let answers = a.task != RagTask::R;
    let default: &[Stage] = if answers {
        &[
            Stage::Ptkb,
            Stage::Rewrite,
            Stage::Retrieve,
            Stage::Rerank,
            Stage::Generate,
        ]
    } else {
        &[Stage::Ptkb, Stage::Rewrite, Stage::Retrieve, Stage::Rerank]
    };
    let stages = stages(service, &a.common, default)?;
    check_trec_rag(&a, stages)?;
    // R runs (and RAG runs writing their ranking too) keep 100 segments; answers cite the top.
    let base_passages = if a.task == RagTask::R || a.trec_output.is_some() {
        MAX_RUN_SEGMENTS
    } else {
        a.references
    };
    let base = TurnSettings {
        passages: base_passages,
        generation_passages: a.references,
        limit: WordLimit::TREC_RAG,
        ..TurnSettings::default()
    };
    let settings = settings(
        service,
        &a.common,
        stages,
        base,
        MAX_RUN_SEGMENTS,
        rag_format::MAX_WORDS,
    )?;
    if answers && (settings.passages < a.references || settings.generation_passages > a.references)
    {
        return Err(option(
            "--passages",
            format!("answers cite their references: keep --passages at least and --generation-passages at most --references ({})", a.references),
        ));
    }
    let RagInputs {
        files: inputs,
        requests,
        ranking,
        topics,
    } = read_trec_rag_inputs(&a)?;
    let collection = match a.task {
        RagTask::Ag => a.collection.clone(),
        _ => Some(collection_required(a.collection.clone(), "to retrieve")?),
    };
    let retriever = collection
        .as_deref()
        .map(|c| retriever(service, c))
        .transpose()?;
    let given = if a.task == RagTask::Ag {
        Some(given_ranking(
            a.ranking.as_deref().zip(ranking.as_deref()),
            a.requests.as_deref().zip(requests.as_deref()),
            retriever.as_deref().map(|r| r as &dyn Retriever),
            MAX_RUN_SEGMENTS,
        )?)
    } else {
        None
    };
    let jobs = jobs(&topics, collection.as_deref(), given)?;
    let run_name = run_name(a.common.run_name.as_deref(), &stem(&a.output))?;
    let task_name = format!(
        "trec-rag-{}-{}",
        a.year,
        match a.task {
            RagTask::R => "r",
            RagTask::Ag => "ag",
            RagTask::Rag => "rag",
        }
    );
    let mut plan = Plan::new(
        task_name,
        run_name.clone(),
        &a.common,
        stages,
        settings,
        jobs,
        a.output.clone(),
    );
    plan.options
        .insert("references".into(), json!(a.references));
    if year2025 && answers {
        let output_options = &mut plan.output_options;
        output_options.insert("format".into(), json!(a.format.as_str()));
        output_options.insert("checker_layout".into(), json!(a.checker_layout));
        output_options.insert("team_id".into(), json!(a.team_id));
        output_options.insert("run_type".into(), json!(a.run_type));
    }
    plan.collections.extend(collection);
    plan.inputs = inputs;
    let metadata = Rag25Metadata {
        team_id: a.team_id.unwrap_or_default(),
        run_id: run_name.clone(),
        run_type: match a.run_type {
            RagRunType::Automatic => "automatic".into(),
            RagRunType::Manual => "manual".into(),
        },
    };
    let render = RagRender {
        run_name,
        topics,
        output: a.output,
        trec_output: a.trec_output,
        references: a.references,
        task: a.task,
        year2025,
        format2: a.format == AnswerLayout::Format2,
        checker_layout: a.checker_layout,
        metadata,
    };
    let render: Render = Box::new(move |stored: &[Vec<Turn>]| render.render(stored));
    Ok(PlannedRun::new(plan, render))
}

/// What a TREC RAG run's stored turns render into.
struct RagRender {
    run_name: String,
    topics: Vec<rag_format::Topic>,
    output: PathBuf,
    trec_output: Option<PathBuf>,
    references: usize,
    task: RagTask,
    year2025: bool,
    format2: bool,
    checker_layout: bool,
    metadata: Rag25Metadata,
}

impl RagRender {
    fn render(self, stored: &[Vec<Turn>]) -> Result<Outputs> {
        let RagRender {
            run_name,
            topics,
            output,
            trec_output,
            references,
            task,
            year2025,
            format2,
            checker_layout,
            metadata,
        } = self;
        let ids: Vec<String> = topics.iter().map(|t| t.id.clone()).collect();
        let trec = |max| render_run(&run_name, &ids, stored, max);
        if task == RagTask::R {
            return Ok(vec![(output, trec(MAX_RUN_SEGMENTS)?)]);
        }
        let ctx = ValidationContext::default();
        let check = |text: String, format: AnswerFormat| -> Result<String> {
            let report = rag_format::validate_answers_text(&text, format, Some(&topics), &ctx);
            report.check()?;
            Ok(text)
        };
        let text = if !year2025 {
            let answers = render_2024(&run_name, &topics, stored, references)?;
            check(rag_format::render_jsonl(&answers)?, AnswerFormat::Rag24)?
        } else {
            let answers = render_2025(&metadata, &topics, stored, references)?;
            if format2 {
                let f2 = answers
                    .iter()
                    .map(|a| a.to_format2())
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                check(rag_format::render_jsonl(&f2)?, AnswerFormat::Rag25Format2)?
            } else if checker_layout {
                let c: Vec<_> = answers.iter().map(|a| a.to_checker_layout()).collect();
                check(rag_format::render_jsonl(&c)?, AnswerFormat::Rag25Format1)?
            } else {
                check(
                    rag_format::render_jsonl(&answers)?,
                    AnswerFormat::Rag25Format1,
                )?
            }
        };
        let mut outputs = vec![(output, text)];
        if let Some(path) = trec_output {
            outputs.push((path, trec(MAX_RUN_SEGMENTS)?));
        }
        Ok(outputs)
    }
}
