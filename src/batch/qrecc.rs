//! SCAI-QReCC-21: `questions.json` → one conversation per `Conversation_no`, turns in file order;
//! each turn's context is the stored conversation (earlier questions with convrag's own answers:
//! the task gives no canonical responses). The stored turns → `run.json`.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::json;

use super::engine::{TopicJob, TurnContext, TurnJob, TurnPassages};
use super::plan::{
    collection_required, retriever, run_name, settings, stages, CommonOptions, Plan, PlannedRun,
    Render, Stage,
};
use super::{submitted_score, BatchError, Result};
use crate::formats::qrecc::{QreccAnswer, Question};
use crate::formats::{ikat as ikat_format, qrecc as qrecc_format, ValidationContext};
use crate::pipeline::generate::{WordLimit, WordMeasure};
use crate::pipeline::turn::TurnSettings;
use crate::service::TurnService;
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

/// SCAI-QReCC-21 (TIRA): INPUT_DIR/questions.json → OUTPUT_DIR/run.json.
#[derive(Debug, Clone)]
pub struct QreccOptions {
    pub input_dir: PathBuf,
    pub output_dir: PathBuf,
    pub collection: Option<String>,
    /// The questions are human rewrites, used as they are.
    pub rewritten: bool,
    pub common: CommonOptions,
}

/// Checks the options against the inputs and the installed model and plans the run.
pub(super) fn plan(service: &TurnService, a: QreccOptions) -> Result<PlannedRun> {
    let default = [
        Stage::Ptkb,
        Stage::Rewrite,
        Stage::Retrieve,
        Stage::Rerank,
        Stage::Generate,
    ];
    let stages = stages(service, &a.common, &default)?;
    let base = TurnSettings {
        passages: 10,
        limit: WordLimit {
            max_words: ikat_format::MAX_RESPONSE_WORDS,
            measure: WordMeasure::Ikat,
        },
        ..TurnSettings::default()
    };
    // QReCC sets no word limit; iKAT's 250 bounds the answers.
    let settings = settings(service, &a.common, stages, base, 1000, 1000)?;
    let (questions_path, output) = qrecc_format::tira_paths(&a.input_dir, &a.output_dir);
    let questions = qrecc_format::read_questions(&questions_path)?;
    let collection = if stages.retrieve {
        let name =
            collection_required(a.collection, "to retrieve (or give --stages ptkb,rewrite)")?;
        retriever(service, &name)?;
        Some(name)
    } else {
        None
    };
    std::fs::create_dir_all(&a.output_dir).map_err(|source| BatchError::Io {
        path: a.output_dir.clone(),
        source,
    })?;
    let jobs = jobs(&questions, collection.as_deref(), a.rewritten);
    let input_name = a
        .input_dir
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let run_name = run_name(a.common.run_name.as_deref(), &format!("qrecc-{input_name}"))?;
    let mut plan = Plan::new(
        "qrecc",
        run_name,
        &a.common,
        stages,
        settings,
        jobs,
        output.clone(),
    );
    plan.options.insert("rewritten".into(), json!(a.rewritten));
    plan.collections.extend(collection);
    plan.inputs.insert("questions".into(), questions_path);
    let fields = Fields {
        passages: stages.retrieve,
        answer: stages.generate,
    };
    let render: Render = Box::new(move |stored: &[Vec<Turn>]| {
        let answers = render(&questions, stored, fields)?;
        let text = qrecc_format::render_run(&answers)?;
        let report =
            qrecc_format::validate_run_text(&text, Some(&questions), &ValidationContext::default());
        report.check()?;
        Ok(vec![(output, text)])
    });
    Ok(PlannedRun::new(plan, render))
}
