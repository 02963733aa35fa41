//! PolEval 2022 passage retrieval: `in.tsv` (`<domain>\t<question>`) → one one-turn conversation
//! per line, each routed to its domain's collection; the stored rankings → `out.tsv`, ten ids per
//! line, line-aligned with `in.tsv`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::json;

use super::engine::{TopicJob, TurnContext, TurnJob, TurnPassages};
use super::plan::{
    retriever, run_name, settings, stages, CommonOptions, Plan, PlannedRun, Render, Stage,
};
use super::{option, BatchError, Result};
use crate::formats::poleval::{PolevalQuestion, PASSAGES_PER_LINE};
use crate::formats::{ikat as ikat_format, poleval as poleval_format, ValidationContext};
use crate::index::Language;
use crate::pipeline::context::ConversationContext;
use crate::pipeline::turn::TurnSettings;
use crate::service::TurnService;
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

/// PolEval 2022 passage retrieval: in.tsv → out.tsv.
#[derive(Debug, Clone)]
pub struct PolevalOptions {
    pub input: PathBuf,
    pub output: Option<PathBuf>,
    /// (domain, collection) routes.
    pub collections: Vec<(String, String)>,
    pub common: CommonOptions,
}

/// Checks the options against the inputs and the installed model and plans the run.
pub(super) fn plan(service: &TurnService, a: PolevalOptions) -> Result<PlannedRun> {
    // The installed model reads English; rerank Polish passages only when asked to.
    let default = [Stage::Ptkb, Stage::Rewrite, Stage::Retrieve];
    let stages = stages(service, &a.common, &default)?;
    if !stages.retrieve || stages.generate {
        return Err(option(
            "--stages",
            "out.tsv holds passage ids: retrieve (and rerank), no generate",
        ));
    }
    let base = TurnSettings {
        passages: poleval_format::PASSAGES_PER_LINE,
        ..TurnSettings::default()
    };
    let settings = settings(
        service,
        &a.common,
        stages,
        base,
        1000,
        ikat_format::MAX_RESPONSE_WORDS,
    )?;
    if settings.passages < poleval_format::PASSAGES_PER_LINE {
        return Err(option("--passages", "out.tsv needs ten passages per line"));
    }
    let questions = poleval_format::read_questions(&a.input)?;
    let routes = collections(&questions, &a.collections);
    for (domain, name) in &routes {
        let retriever = retriever(service, name).map_err(|e| {
            option(
                "--collection",
                format!("domain {domain}: {e} (index its passages.jl with --language polish, or route it with --collection {domain}=NAME)"),
            )
        })?;
        if retriever.manifest().language != Language::Polish {
            tracing::warn!(collection = %name, domain = %domain, "the collection is not indexed with the Polish analyzer");
        }
    }
    let output = a
        .output
        .unwrap_or_else(|| a.input.with_file_name("out.tsv"));
    let jobs = jobs(&questions, &routes);
    let fallback = format!(
        "poleval-{}",
        a.input
            .canonicalize()
            .ok()
            .and_then(|p| p
                .parent()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default()
    );
    let run_name = run_name(a.common.run_name.as_deref(), &fallback)?;
    let mut plan = Plan::new(
        "poleval",
        run_name,
        &a.common,
        stages,
        settings,
        jobs,
        output.clone(),
    );
    plan.options.insert("collections".into(), json!(routes));
    plan.collections.extend(routes.values().cloned());
    plan.inputs.insert("in".into(), a.input.clone());
    plan.fill_to = poleval_format::PASSAGES_PER_LINE;
    let render: Render = Box::new(move |stored: &[Vec<Turn>]| {
        let rankings = render(&questions, stored)?;
        let text = poleval_format::render_out(&rankings)?;
        let report = poleval_format::validate_out_text(
            &text,
            Some(&questions),
            &ValidationContext::default(),
        );
        report.check()?;
        Ok(vec![(output, text)])
    });
    Ok(PlannedRun::new(plan, render))
}
