//! TREC iKAT runs: topics (2023/2024/2025 layouts) → one conversation per topic × persona, the
//! context of each turn under the run type's rules ([`ConversationContext::from_ikat`]), and the
//! stored turns → the run JSON (plus, optionally, its TREC run).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::json;

use super::engine::{TopicJob, TurnContext, TurnJob, TurnPassages};
use super::plan::{
    collection_required, retriever, run_name, settings, stages, stem, CommonOptions, Outputs, Plan,
    PlannedRun, Render, Stage, Stages,
};
use super::{input_error, option, submitted_score, BatchError, Result};
use crate::formats::ikat::{
    self as ikat_format, IkatResponse, IkatRun, IkatRunTurn, IkatTopic, PassageProvenance, RunType,
    TopicsLayout,
};
use crate::formats::ikat25::{self, Ikat25Metadata, Ikat25Response, Ikat25Turn, ScoredIds};
use crate::formats::trec_run::{self, read_run, TrecRunLine};
use crate::formats::ValidationContext;
use crate::index::Retriever;
use crate::pipeline::context::ConversationContext;
use crate::pipeline::generate::WordLimit;
use crate::pipeline::turn::{RankedPassage, TurnSettings};
use crate::service::TurnService;
use crate::store::turns::TurnPassage;
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
                ranks: Default::default(),
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

/// TREC iKAT: topics JSON → run JSON.
#[derive(Debug, Clone)]
pub struct IkatOptions {
    pub topics: PathBuf,
    pub collection: Option<String>,
    pub run_type: RunType,
    /// only_response: the given passage ranking (a TREC run).
    pub ranking: Option<PathBuf>,
    pub output: PathBuf,
    pub trec_output: Option<PathBuf>,
    pub ptkb_list: PtkbList,
    /// The submission layout (default: 2025 for topics in the 2025 layout, else 2024).
    pub format: Option<IkatFormat>,
    /// 2025 `metadata.team_id`.
    pub team_id: String,
    pub common: CommonOptions,
}

/// The iKAT submission layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum IkatFormat {
    /// One run JSON (the 2024 guidelines).
    #[value(name = "2024")]
    #[serde(rename = "2024")]
    Y2024,
    /// JSONL, one line per turn with references, responses, citations and PTKB texts.
    #[value(name = "2025")]
    #[serde(rename = "2025")]
    Y2025,
}

/// Checks the options against the inputs and the installed model and plans the run.
pub(super) fn plan(service: &TurnService, a: IkatOptions) -> Result<PlannedRun> {
    let run_type: RunType = a.run_type;
    let only_response = run_type == RunType::OnlyResponse;
    let default: &[Stage] = if only_response {
        &[
            Stage::Ptkb,
            Stage::Rewrite,
            Stage::Retrieve,
            Stage::Generate,
        ]
    } else {
        &[
            Stage::Ptkb,
            Stage::Rewrite,
            Stage::Retrieve,
            Stage::Rerank,
            Stage::Generate,
        ]
    };
    let stages = stages(service, &a.common, default)?;
    if only_response && (!stages.retrieve || !stages.generate || stages.rerank) {
        return Err(option(
            "--stages",
            "only_response runs answer from the given ranking as it is: ptkb,rewrite,retrieve,generate",
        ));
    }
    if only_response != a.ranking.is_some() {
        return Err(option(
            "--ranking",
            "is the given passage ranking of only_response runs, and only of them",
        ));
    }
    let base = TurnSettings {
        passages: 100,
        limit: WordLimit::IKAT,
        ..TurnSettings::default()
    };
    let settings = settings(
        service,
        &a.common,
        stages,
        base,
        ikat_format::MAX_PROVENANCE,
        ikat_format::MAX_RESPONSE_WORDS,
    )?;
    let (topics, layout) = ikat_format::read_topics_with_layout(&a.topics)?;
    let format = a.format.unwrap_or(match layout {
        TopicsLayout::Y2025 => IkatFormat::Y2025,
        TopicsLayout::Y2023 | TopicsLayout::Y2024 => IkatFormat::Y2024,
    });
    let collection = if stages.retrieve {
        Some(collection_required(
            a.collection,
            "to retrieve (or give --stages ptkb,rewrite)",
        )?)
    } else {
        None
    };
    let mut inputs = BTreeMap::from([("topics".to_string(), a.topics.clone())]);
    let given = match &a.ranking {
        Some(path) => {
            let name = collection.as_deref().expect("only_response retrieves");
            inputs.insert("ranking".into(), path.clone());
            Some(read_given_ranking(
                path,
                retriever(service, name)?.as_ref(),
                settings.passages,
            )?)
        }
        None => None,
    };
    if let Some(name) = &collection {
        retriever(service, name)?;
    }
    let jobs = jobs(&topics, run_type, collection.as_deref(), given)?;
    let run_name = run_name(a.common.run_name.as_deref(), &stem(&a.output))?;
    let mut plan = Plan::new(
        "ikat",
        run_name.clone(),
        &a.common,
        stages,
        settings,
        jobs,
        a.output.clone(),
    );
    plan.options
        .insert("run_type".into(), json!(run_type.as_str()));
    plan.output_options
        .insert("ptkb_list".into(), json!(a.ptkb_list));
    if format == IkatFormat::Y2025 {
        plan.output_options.insert("format".into(), json!(format));
        plan.output_options
            .insert("team_id".into(), json!(a.team_id));
    }
    plan.collections.extend(collection);
    plan.inputs = inputs;
    if a.trec_output.is_some() && !stages.retrieve {
        return Err(option(
            "--trec-output",
            "needs passages: include retrieve in --stages",
        ));
    }
    let render = IkatRender {
        run_name,
        run_type,
        stages,
        ptkb_list: a.ptkb_list,
        format,
        team_id: a.team_id,
        topics,
        output: a.output,
        trec_output: a.trec_output,
    };
    let render: Render = Box::new(move |stored: &[Vec<Turn>]| render.render(stored));
    Ok(PlannedRun::new(plan, render))
}

/// What an iKAT run's stored turns render into.
struct IkatRender {
    run_name: String,
    run_type: RunType,
    stages: Stages,
    ptkb_list: PtkbList,
    format: IkatFormat,
    team_id: String,
    topics: Vec<IkatTopic>,
    output: PathBuf,
    trec_output: Option<PathBuf>,
}

impl IkatRender {
    fn render(self, stored: &[Vec<Turn>]) -> Result<Outputs> {
        if self.format == IkatFormat::Y2025 {
            return self.render_2025(stored);
        }
        let run = render(
            &RenderOptions {
                run_name: &self.run_name,
                run_type: self.run_type,
                responses: self.stages.generate,
                ptkb_list: self.ptkb_list,
            },
            stored,
        )?;
        let text = run.render()?;
        let report = ikat_format::validate_run_text_with(
            &text,
            Some(&self.topics),
            &ValidationContext::default(),
            self.stages.retrieve,
        );
        report.check()?;
        let mut outputs = vec![(self.output, text)];
        if let Some(path) = self.trec_output {
            let ids: Vec<String> = self
                .topics
                .iter()
                .flat_map(|t| t.turns.iter().map(|u| t.turn_key(u)))
                .collect();
            let trec =
                trec_run::TrecRunWriter::new(self.run_name.clone(), ikat_format::MAX_PROVENANCE)
                    .render(&run.to_ranked_lists())?;
            let rules = trec_run::RunRules {
                max_per_topic: ikat_format::MAX_PROVENANCE,
                topics: Some(ids),
            };
            let report = trec_run::validate_text(&trec, &rules, &ValidationContext::default());
            report.check()?;
            outputs.push((path, trec));
        }
        Ok(outputs)
    }

    /// The 2025 JSONL, refused when the organizers' checker would report an error or fix it.
    fn render_2025(self, stored: &[Vec<Turn>]) -> Result<Outputs> {
        let metadata = Ikat25Metadata {
            team_id: self.team_id.clone(),
            run_id: self.run_name.clone(),
            run_type: self.run_type.into(),
        };
        let turns = render_2025(&metadata, self.stages.generate, self.ptkb_list, stored)?;
        let text = ikat25::render_jsonl(&turns)?;
        ikat25::check_rendered(&text, &self.topics)?;
        let mut outputs = vec![(self.output, text)];
        if let Some(path) = self.trec_output {
            outputs.push((path, ikat25::trec_run_text(&turns)));
        }
        Ok(outputs)
    }
}

/// The 2025 submission lines of the stored turns (topic order, turn order): the turn's passages
/// as references, those the response used as its citations, the selected PTKB statements' texts
/// (or all, ranked) as its provenance. Without generation a line has no response.
pub fn render_2025(
    metadata: &Ikat25Metadata,
    responses: bool,
    ptkb_list: PtkbList,
    stored: &[Vec<Turn>],
) -> Result<Vec<Ikat25Turn>> {
    let mut out = Vec::new();
    for turn in stored.iter().flatten() {
        let key = turn.external_turn_id.clone().unwrap_or_default();
        let scored = |p: &TurnPassage| (p.passage_id.clone(), submitted_score(p.score));
        let references = ScoredIds(turn.passages.iter().map(scored).collect());
        let citations = ScoredIds(
            turn.passages
                .iter()
                .filter(|p| p.used)
                .map(scored)
                .collect(),
        );
        let ptkb_provenance = turn
            .ptkb_ranking
            .iter()
            .filter(|s| ptkb_list == PtkbList::All || s.selected)
            .map(|s| s.text.clone())
            .collect();
        let responses = if responses {
            vec![Ikat25Response {
                text: turn.response_text.clone().unwrap_or_default(),
                citations,
                ptkb_provenance,
            }]
        } else {
            Vec::new()
        };
        out.push(Ikat25Turn {
            metadata: metadata.clone(),
            turn_id: key,
            references,
            responses,
        });
    }
    Ok(out)
}
