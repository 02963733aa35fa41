//! `convrag run ...` as library code: the options of each task are checked against the inputs
//! and the installed model and become a [`PlannedRun`] (topics of turns, settings, the facts
//! recorded with the run, and how the stored turns render into the submission file), which
//! [`execute`] runs (or resumes) through the [`TurnService`] and writes with its `.meta.json`
//! sidecar. The command line only parses arguments and prints.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::engine::{batch_user, Engine, TopicJob, Worker};
use super::record::{self, OutputRecord, RunRecord, Sidecar, TurnCounts};
use super::{option, BatchError, Result};
use crate::config::Config;
use crate::formats::ikat::{self as ikat_format, RunType};
use crate::formats::trec_rag::{self as rag_format, AnswerFormat, Rag25Metadata};
use crate::formats::{atomic, poleval as poleval_format, qrecc as qrecc_format, trec_run};
use crate::formats::{FormatError, ValidationContext};
use crate::index::{Language, Retriever, TantivyRetriever};
use crate::pipeline::generate::{WordLimit, WordMeasure};
use crate::pipeline::turn::{GeneratorChoice, RewriterChoice, SettingField, TurnSettings};
use crate::progress::SharedProgress;
use crate::rerank::Fusion;
use crate::service::{RequestedSettings, SettingLimits, TurnService};
use crate::store::{RenderClaim, Store, Turn};

/// A stage of the turn pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Ptkb,
    Rewrite,
    Retrieve,
    Rerank,
    Generate,
}

/// Options every task shares.
#[derive(Debug, Clone, Default)]
pub struct CommonOptions {
    /// Name of the run (default: derived from the output's name).
    pub run_name: Option<String>,
    /// Stages to run (default: every stage the task uses; rerank when the model is installed).
    pub stages: Option<Vec<Stage>>,
    /// Topics computed in parallel.
    pub jobs: usize,
    pub depth: Option<usize>,
    pub passages: Option<usize>,
    pub generation_passages: Option<usize>,
    pub max_words: Option<usize>,
    pub generator: Option<GeneratorChoice>,
    pub rewriter: Option<RewriterChoice>,
    pub fusion: Option<Fusion>,
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
    pub ptkb_list: super::ikat::PtkbList,
    pub common: CommonOptions,
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

/// PolEval 2022 passage retrieval: in.tsv → out.tsv.
#[derive(Debug, Clone)]
pub struct PolevalOptions {
    pub input: PathBuf,
    pub output: Option<PathBuf>,
    /// (domain, collection) routes.
    pub collections: Vec<(String, String)>,
    pub common: CommonOptions,
}

/// A batch run's task with its options.
#[derive(Debug, Clone)]
pub enum RunOptions {
    Ikat(IkatOptions),
    TrecRag(TrecRagOptions),
    Qrecc(QreccOptions),
    Poleval(PolevalOptions),
}

/// Which stages run, resolved against the task and the installed model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stages {
    pub retrieve: bool,
    pub rerank: bool,
    pub generate: bool,
}

impl Stages {
    pub fn list(self) -> Vec<Stage> {
        let mut v = vec![Stage::Ptkb, Stage::Rewrite];
        if self.retrieve {
            v.push(Stage::Retrieve);
        }
        if self.rerank {
            v.push(Stage::Rerank);
        }
        if self.generate {
            v.push(Stage::Generate);
        }
        v
    }
}

fn resolve_stages(given: Option<&[Stage]>, default: &[Stage], model: bool) -> Result<Stages> {
    let explicit = given.is_some();
    let list: BTreeSet<Stage> = given.unwrap_or(default).iter().copied().collect();
    if !list.contains(&Stage::Ptkb) || !list.contains(&Stage::Rewrite) {
        return Err(option(
            "--stages",
            "ptkb and rewrite always run: list them (e.g. ptkb,rewrite or ptkb,rewrite,retrieve,generate)",
        ));
    }
    let retrieve = list.contains(&Stage::Retrieve);
    let mut rerank = list.contains(&Stage::Rerank);
    let generate = list.contains(&Stage::Generate);
    if (rerank || generate) && !retrieve {
        return Err(option(
            "--stages",
            "rerank and generate need retrieve (the passages they work on)",
        ));
    }
    if rerank && !model {
        if explicit {
            return Err(option(
                "--stages",
                "rerank needs the reranking model (scripts/fetch-models.sh installs it; see `convrag config`)",
            ));
        }
        tracing::info!("no reranking model installed: BM25 order only");
        rerank = false;
    }
    Ok(Stages {
        retrieve,
        rerank,
        generate,
    })
}

/// A resolved run, ready to execute.
#[derive(Debug)]
pub struct Plan {
    pub task: String,
    pub run_name: String,
    pub stages: Stages,
    pub settings: TurnSettings,
    /// Task options recorded with the settings.
    pub options: Map<String, Value>,
    /// Options of the output only: a finished run may be written again with others.
    pub output_options: Map<String, Value>,
    pub collections: BTreeSet<String>,
    pub inputs: BTreeMap<String, PathBuf>,
    pub topics: Vec<TopicJob>,
    pub fill_to: usize,
    /// Topics computed in parallel.
    pub jobs: usize,
    pub output: PathBuf,
}

/// What a render produced: files to write, the first being the submission.
type Outputs = Vec<(PathBuf, String)>;

type Render = Box<dyn FnOnce(&[Vec<Turn>]) -> Result<Outputs>>;

/// A plan with the rendering of its stored turns into the submission file.
pub struct PlannedRun {
    pub plan: Plan,
    render: Render,
}

/// Checks `options` against the inputs and the installed model and plans the run.
pub fn plan(service: &TurnService, options: RunOptions) -> Result<PlannedRun> {
    let (plan, render) = match options {
        RunOptions::Ikat(a) => plan_ikat(service, a)?,
        RunOptions::TrecRag(a) => plan_trec_rag(service, a)?,
        RunOptions::Qrecc(a) => plan_qrecc(service, a)?,
        RunOptions::Poleval(a) => plan_poleval(service, a)?,
    };
    Ok(PlannedRun { plan, render })
}

fn retriever(service: &TurnService, name: &str) -> Result<Arc<TantivyRetriever>> {
    Ok(service.collections().get(name)?)
}

/// The task-independent turn settings of `common`, on top of `base`.
fn settings(
    service: &TurnService,
    common: &CommonOptions,
    stages: Stages,
    base: TurnSettings,
    max_passages: usize,
    max_words: usize,
) -> Result<TurnSettings> {
    let requested = RequestedSettings {
        generator: common.generator,
        rewriter: common.rewriter,
        rerank: Some(stages.rerank),
        depth: common.depth,
        passages: common.passages,
        generation_passages: common.generation_passages,
        max_words: common.max_words,
        fusion: common.fusion,
    };
    let base = TurnSettings {
        retrieve: stages.retrieve,
        generate: stages.generate,
        // The track's limit is the default.
        limit: WordLimit {
            max_words,
            measure: base.limit.measure,
        },
        ..base
    };
    let limits = SettingLimits {
        passages: max_passages,
        max_words,
    };
    service
        .resolve(&requested, base, limits)
        .map_err(|e| option(option_name(e.field), e.reason))
}

/// The command-line option of a setting.
fn option_name(field: SettingField) -> &'static str {
    match field {
        SettingField::Generator => "--generator",
        SettingField::Rewriter => "--rewriter",
        SettingField::Rerank => "--stages",
        SettingField::Depth => "--depth",
        SettingField::Passages => "--passages",
        SettingField::GenerationPassages => "--generation-passages",
        SettingField::MaxWords => "--max-words",
        SettingField::Fusion => "--fusion",
        SettingField::Collection => "--collection",
        SettingField::PtkbQueryWeight => "settings",
    }
}

fn run_name(given: Option<&str>, fallback: &str) -> Result<String> {
    let name = match given {
        Some(n) => n.to_string(),
        None => {
            let cleaned: String = fallback
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            let cleaned = cleaned.trim_start_matches(['.', '_', '-']).to_string();
            if cleaned.is_empty() {
                "run".to_string()
            } else {
                cleaned.chars().take(100).collect()
            }
        }
    };
    let ok = !name.is_empty()
        && name.len() <= 100
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !ok {
        return Err(option(
            "--run-name",
            format!("{name:?}: use 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"),
        ));
    }
    Ok(name)
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn check_jobs(common: &CommonOptions) -> Result<()> {
    // Each topic in flight holds one database connection for its turn (the pool has 16).
    if common.jobs == 0 || common.jobs > 12 {
        return Err(option("--jobs", "must be between 1 and 12"));
    }
    Ok(())
}

/// What a finished run did.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub run_name: String,
    pub counts: TurnCounts,
    /// Topics discarded first (`restart`).
    pub discarded: u64,
    pub output: PathBuf,
    pub sidecar: PathBuf,
    /// As a worker: the worker that renders (or rendered) the files when it is not this one.
    pub rendered_by: Option<String>,
}

/// The facts the run's output depends on.
fn run_record(service: &TurnService, config: &Config, plan: &Plan) -> Result<RunRecord> {
    let mut collections = BTreeMap::new();
    for name in &plan.collections {
        let manifest = retriever(service, name)?.manifest().clone();
        collections.insert(name.clone(), json!(manifest));
    }
    // The model is part of the pipeline (reranking, and PTKB ranking may use it) whenever loaded.
    let model = match service.reranker() {
        Some(m) => Some(record::model_record(
            &config.default_model_dir(),
            m.model_id(),
        )?),
        None => None,
    };
    let mut inputs = BTreeMap::new();
    for (role, path) in &plan.inputs {
        inputs.insert(role.clone(), record::input_file(path)?);
    }
    let mut settings = Map::new();
    settings.insert("stages".into(), json!(plan.stages.list()));
    settings.insert("turn".into(), json!(plan.settings));
    if (plan.stages.generate && plan.settings.generator == GeneratorChoice::Llm)
        || plan.settings.rewriter == RewriterChoice::Llm
    {
        settings.insert("llm_model".into(), json!(config.llm.model));
    }
    settings.extend(plan.options.clone());
    settings.insert(
        record::OUTPUT_OPTIONS.into(),
        Value::Object(plan.output_options.clone()),
    );
    Ok(RunRecord {
        name: plan.run_name.clone(),
        task: plan.task.clone(),
        settings: Value::Object(settings),
        model,
        collections,
        inputs,
        convrag_version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

/// How `execute` computes the run.
#[derive(Debug, Clone)]
pub enum Execution {
    /// This process alone (holding the run's lock); `restart` discards what is stored first.
    Alone { restart: bool },
    /// One of any number of workers claiming topics; exactly one of them writes the files.
    Worker(Worker),
}

/// Runs (or resumes) a planned run in `store` and writes its files (as a worker: when this worker
/// is the one that renders them). Dropping the future (Ctrl-C) rolls back the turns in flight;
/// the same plan resumes.
pub async fn execute(
    service: Arc<TurnService>,
    config: &Config,
    store: &Store,
    run: PlannedRun,
    execution: Execution,
    progress: SharedProgress,
) -> Result<RunSummary> {
    let PlannedRun { plan, render } = run;
    let record = run_record(&service, config, &plan)?;
    let user = batch_user(store).await?;
    let busy = || {
        BatchError::Resume(format!(
            "run {} is being computed by another convrag process (wait for it, or choose another --run-name)",
            plan.run_name
        ))
    };
    // Held until the run is written (alone), or never (workers coordinate through leases).
    let (_lock, discarded) = match &execution {
        Execution::Alone { restart } => {
            let lock = store.lock_run(&plan.run_name).await?.ok_or_else(busy)?;
            let discarded = if *restart {
                record::delete(store, user, &plan.run_name).await?
            } else {
                0
            };
            (Some(lock), discarded)
        }
        Execution::Worker(_) => {
            // Workers share the run; a process computing it alone does not.
            if store.run_locked_elsewhere(&plan.run_name).await? {
                return Err(busy());
            }
            (None, 0)
        }
    };
    let stored = stored_run(store, user, &record).await?;
    let mut engine = Engine::new(
        store.clone(),
        user,
        plan.run_name.clone(),
        service,
        plan.settings.clone(),
        plan.jobs,
        progress,
    );
    engine.fill_to = plan.fill_to;
    let counts = match &execution {
        Execution::Alone { .. } => engine.run(&plan.topics).await?,
        Execution::Worker(worker) => {
            let counts = engine.run_as_worker(&plan.topics, worker).await?;
            let claim = store
                .claim_batch_render(user, &plan.run_name, &worker.id, worker.lease)
                .await?;
            if let RenderClaim::Other(by) = claim {
                return Ok(RunSummary {
                    run_name: plan.run_name,
                    counts,
                    discarded,
                    sidecar: record::sidecar_path(&plan.output),
                    output: plan.output,
                    rendered_by: Some(by),
                });
            }
            counts
        }
    };
    let turns = engine.stored_turns(&plan.topics).await?;
    let outputs = render(&turns)?;
    for (path, text) in &outputs {
        atomic::write_atomic(path, text.as_bytes())?;
    }
    let (main_path, main_text) = &outputs[0];
    let sha256 = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(main_text.as_bytes()));
    let finished_at = record::finish(store, user, &record, main_path, &sha256).await?;
    let sidecar = record::write_sidecar(
        main_path,
        &Sidecar {
            record: &record,
            created_at: stored.created_at,
            finished_at,
            output: OutputRecord {
                path: main_path.display().to_string(),
                sha256,
                bytes: main_text.len(),
            },
            turns: counts,
        },
    )?;
    Ok(RunSummary {
        run_name: plan.run_name,
        counts,
        discarded,
        output: plan.output,
        sidecar,
        rendered_by: None,
    })
}

/// The stored run of this name, recorded now when new; refused when it was recorded with other
/// facts (settings, inputs, model, collections).
async fn stored_run(store: &Store, user: i64, record: &RunRecord) -> Result<record::StoredRun> {
    let stored = match record::load(store, user, &record.name).await? {
        Some(stored) => stored,
        None => match record::insert(store, user, record).await? {
            Some(new) => return Ok(new),
            // Another worker recorded it between our look and our insert.
            None => record::load(store, user, &record.name)
                .await?
                .ok_or_else(|| {
                    BatchError::Resume(format!("run {}: deleted meanwhile", record.name))
                })?,
        },
    };
    let diff = record.differences(&stored.record);
    if !diff.is_empty() {
        return Err(BatchError::Resume(format!(
            "run {} was started with other settings or inputs, so it is not resumed:\n  {}\n(--restart discards the stored run; --run-name starts another one)",
            record.name,
            diff.join("\n  ")
        )));
    }
    Ok(stored)
}

fn collection_required(name: Option<String>, why: &str) -> Result<String> {
    name.ok_or_else(|| option("--collection", format!("is required {why}")))
}

fn plan_ikat(service: &TurnService, a: IkatOptions) -> Result<(Plan, Render)> {
    check_jobs(&a.common)?;
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
    let stages = resolve_stages(
        a.common.stages.as_deref(),
        default,
        service.reranker().is_some(),
    )?;
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
    let topics = ikat_format::read_topics(&a.topics)?;
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
            Some(super::ikat::read_given_ranking(
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
    let jobs = super::ikat::jobs(&topics, run_type, collection.as_deref(), given)?;
    let run_name = run_name(a.common.run_name.as_deref(), &stem(&a.output))?;
    let mut options = Map::new();
    options.insert("run_type".into(), json!(run_type.as_str()));
    let mut output_options = Map::new();
    output_options.insert("ptkb_list".into(), json!(a.ptkb_list));
    let plan = Plan {
        task: "ikat".into(),
        run_name: run_name.clone(),
        stages,
        settings,
        options,
        output_options,
        collections: collection.into_iter().collect(),
        inputs,
        topics: jobs,
        fill_to: 0,
        jobs: a.common.jobs,
        output: a.output.clone(),
    };
    let output = a.output;
    let trec_output = a.trec_output;
    let ptkb_list = a.ptkb_list;
    if trec_output.is_some() && !stages.retrieve {
        return Err(option(
            "--trec-output",
            "needs passages: include retrieve in --stages",
        ));
    }
    let render: Render = Box::new(move |stored: &[Vec<Turn>]| {
        let run = super::ikat::render(
            &super::ikat::RenderOptions {
                run_name: &run_name,
                run_type,
                responses: stages.generate,
                ptkb_list,
            },
            stored,
        )?;
        let text = run.render()?;
        let report = ikat_format::validate_run_text_with(
            &text,
            Some(&topics),
            &ValidationContext::default(),
            stages.retrieve,
        );
        if report.has_errors() {
            return Err(FormatError::Invalid(report.error_summary()).into());
        }
        let mut outputs = vec![(output, text)];
        if let Some(path) = trec_output {
            let ids: Vec<String> = topics
                .iter()
                .flat_map(|t| t.turns.iter().map(|u| t.turn_key(u)))
                .collect();
            let trec = trec_run::TrecRunWriter::new(run_name.clone(), ikat_format::MAX_PROVENANCE)
                .render(&run.to_ranked_lists())?;
            let rules = trec_run::RunRules {
                max_per_topic: ikat_format::MAX_PROVENANCE,
                topics: Some(ids),
            };
            let report = trec_run::validate_text(&trec, &rules, &ValidationContext::default());
            if report.has_errors() {
                return Err(FormatError::Invalid(report.error_summary()).into());
            }
            outputs.push((path, trec));
        }
        Ok(outputs)
    });
    Ok((plan, render))
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
        (None, Some(reqs)) => super::trec_rag::topics_of_requests(reqs),
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

fn plan_trec_rag(service: &TurnService, a: TrecRagOptions) -> Result<(Plan, Render)> {
    check_jobs(&a.common)?;
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
    let stages = resolve_stages(
        a.common.stages.as_deref(),
        default,
        service.reranker().is_some(),
    )?;
    check_trec_rag(&a, stages)?;
    // R runs (and RAG runs writing their ranking too) keep 100 segments; answers cite the top.
    let base_passages = if a.task == RagTask::R || a.trec_output.is_some() {
        super::trec_rag::MAX_RUN_SEGMENTS
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
        super::trec_rag::MAX_RUN_SEGMENTS,
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
        Some(super::trec_rag::given_ranking(
            a.ranking.as_deref().zip(ranking.as_deref()),
            a.requests.as_deref().zip(requests.as_deref()),
            retriever.as_deref().map(|r| r as &dyn Retriever),
            super::trec_rag::MAX_RUN_SEGMENTS,
        )?)
    } else {
        None
    };
    let jobs = super::trec_rag::jobs(&topics, collection.as_deref(), given)?;
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
    let mut options = Map::new();
    options.insert("references".into(), json!(a.references));
    let mut output_options = Map::new();
    if year2025 && answers {
        output_options.insert("format".into(), json!(a.format.as_str()));
        output_options.insert("checker_layout".into(), json!(a.checker_layout));
        output_options.insert("team_id".into(), json!(a.team_id));
        output_options.insert("run_type".into(), json!(a.run_type));
    }
    let plan = Plan {
        task: task_name,
        run_name: run_name.clone(),
        stages,
        settings,
        options,
        output_options,
        collections: collection.into_iter().collect(),
        inputs,
        topics: jobs,
        fill_to: 0,
        jobs: a.common.jobs,
        output: a.output.clone(),
    };
    let output = a.output;
    let trec_output = a.trec_output;
    let references = a.references;
    let task = a.task;
    let format2 = a.format == AnswerLayout::Format2;
    let checker_layout = a.checker_layout;
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
        output,
        trec_output,
        references,
        task,
        year2025,
        format2,
        checker_layout,
        metadata,
    };
    let render: Render = Box::new(move |stored: &[Vec<Turn>]| render.render(stored));
    Ok((plan, render))
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
        let trec = |max| super::trec_rag::render_run(&run_name, &ids, stored, max);
        if task == RagTask::R {
            return Ok(vec![(output, trec(super::trec_rag::MAX_RUN_SEGMENTS)?)]);
        }
        let ctx = ValidationContext::default();
        let check = |text: String, format: AnswerFormat| -> Result<String> {
            let report = rag_format::validate_answers_text(&text, format, Some(&topics), &ctx);
            if report.has_errors() {
                return Err(FormatError::Invalid(report.error_summary()).into());
            }
            Ok(text)
        };
        let text = if !year2025 {
            let answers = super::trec_rag::render_2024(&run_name, &topics, stored, references)?;
            check(rag_format::render_jsonl(&answers)?, AnswerFormat::Rag24)?
        } else {
            let answers = super::trec_rag::render_2025(&metadata, &topics, stored, references)?;
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
            outputs.push((path, trec(super::trec_rag::MAX_RUN_SEGMENTS)?));
        }
        Ok(outputs)
    }
}

fn plan_qrecc(service: &TurnService, a: QreccOptions) -> Result<(Plan, Render)> {
    check_jobs(&a.common)?;
    let default = [
        Stage::Ptkb,
        Stage::Rewrite,
        Stage::Retrieve,
        Stage::Rerank,
        Stage::Generate,
    ];
    let stages = resolve_stages(
        a.common.stages.as_deref(),
        &default,
        service.reranker().is_some(),
    )?;
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
    let jobs = super::qrecc::jobs(&questions, collection.as_deref(), a.rewritten);
    let input_name = a
        .input_dir
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let run_name = run_name(a.common.run_name.as_deref(), &format!("qrecc-{input_name}"))?;
    let mut options = Map::new();
    options.insert("rewritten".into(), json!(a.rewritten));
    let output_options = Map::new();
    let plan = Plan {
        task: "qrecc".into(),
        run_name,
        stages,
        settings,
        options,
        output_options,
        collections: collection.into_iter().collect(),
        inputs: BTreeMap::from([("questions".to_string(), questions_path)]),
        topics: jobs,
        fill_to: 0,
        jobs: a.common.jobs,
        output: output.clone(),
    };
    let fields = super::qrecc::Fields {
        passages: stages.retrieve,
        answer: stages.generate,
    };
    let render: Render = Box::new(move |stored: &[Vec<Turn>]| {
        let answers = super::qrecc::render(&questions, stored, fields)?;
        let text = qrecc_format::render_run(&answers)?;
        let report =
            qrecc_format::validate_run_text(&text, Some(&questions), &ValidationContext::default());
        if report.has_errors() {
            return Err(FormatError::Invalid(report.error_summary()).into());
        }
        Ok(vec![(output, text)])
    });
    Ok((plan, render))
}

fn plan_poleval(service: &TurnService, a: PolevalOptions) -> Result<(Plan, Render)> {
    check_jobs(&a.common)?;
    // The installed model reads English; rerank Polish passages only when asked to.
    let default = [Stage::Ptkb, Stage::Rewrite, Stage::Retrieve];
    let stages = resolve_stages(
        a.common.stages.as_deref(),
        &default,
        service.reranker().is_some(),
    )?;
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
    let routes = super::poleval::collections(&questions, &a.collections);
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
    let jobs = super::poleval::jobs(&questions, &routes);
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
    let mut options = Map::new();
    options.insert("collections".into(), json!(routes));
    let output_options = Map::new();
    let plan = Plan {
        task: "poleval".into(),
        run_name,
        stages,
        settings,
        options,
        output_options,
        collections: routes.values().cloned().collect(),
        inputs: BTreeMap::from([("in".to_string(), a.input.clone())]),
        topics: jobs,
        fill_to: poleval_format::PASSAGES_PER_LINE,
        jobs: a.common.jobs,
        output: output.clone(),
    };
    let render: Render = Box::new(move |stored: &[Vec<Turn>]| {
        let rankings = super::poleval::render(&questions, stored)?;
        let text = poleval_format::render_out(&rankings)?;
        let report = poleval_format::validate_out_text(
            &text,
            Some(&questions),
            &ValidationContext::default(),
        );
        if report.has_errors() {
            return Err(FormatError::Invalid(report.error_summary()).into());
        }
        Ok(vec![(output, text)])
    });
    Ok((plan, render))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_must_start_with_ptkb_and_rewrite() {
        let all = [Stage::Ptkb, Stage::Rewrite, Stage::Retrieve, Stage::Rerank];
        assert!(resolve_stages(Some(&[Stage::Retrieve]), &all, true).is_err());
        assert!(resolve_stages(
            Some(&[Stage::Ptkb, Stage::Rewrite, Stage::Generate]),
            &all,
            true
        )
        .is_err());
        let s = resolve_stages(Some(&[Stage::Rewrite, Stage::Ptkb]), &all, true).unwrap();
        assert!(!s.retrieve && !s.rerank && !s.generate);
        // Default rerank is dropped without a model; an explicit one is refused.
        assert!(!resolve_stages(None, &all, false).unwrap().rerank);
        assert!(resolve_stages(Some(&all), &all, false).is_err());
    }

    #[test]
    fn run_names_default_to_the_output_stem() {
        assert_eq!(run_name(None, "my run (v2)").unwrap(), "my-run--v2-");
        assert_eq!(run_name(None, "").unwrap(), "run");
        assert!(run_name(Some("../x"), "y").is_err());
    }
}
