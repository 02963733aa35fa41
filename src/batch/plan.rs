//! `convrag run ...` as library code: what every task shares (common options, stages, settings,
//! run name) and the execution. Each task's planning (`ikat::plan`, `trec_rag::plan`,
//! `qrecc::plan`, `poleval::plan`, reached through [`super::task::plan`]) checks its options
//! against the inputs and the installed model and makes a [`PlannedRun`] (topics of turns, settings, the facts
//! recorded with the run, and how the stored turns render into the submission file), which
//! [`execute`] runs (or resumes) through the [`TurnService`] and writes with its `.meta.json`
//! sidecar. The command line only parses arguments and prints.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::engine::{run_owner, Engine, TopicJob, Worker};
use super::record::{self, OutputRecord, RunRecord, Sidecar, TurnCounts};
use super::{option, BatchError, Result};
use crate::config::Config;
use crate::dense::Retrieval;
use crate::formats::atomic;
use crate::index::TantivyRetriever;
use crate::pipeline::generate::WordLimit;
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
    pub retrieval: Option<Retrieval>,
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

/// The start of every task's plan: `--jobs` checked, the stages resolved against the task's
/// `default` and the installed model.
pub(super) fn stages(
    service: &TurnService,
    common: &CommonOptions,
    default: &[Stage],
) -> Result<Stages> {
    check_jobs(common)?;
    resolve_stages(
        common.stages.as_deref(),
        default,
        service.reranker().is_some(),
    )
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

impl Plan {
    /// A plan of `topics` with no task options, inputs or collections yet, nor padding.
    pub(super) fn new(
        task: impl Into<String>,
        run_name: String,
        common: &CommonOptions,
        stages: Stages,
        settings: TurnSettings,
        topics: Vec<TopicJob>,
        output: PathBuf,
    ) -> Plan {
        Plan {
            task: task.into(),
            run_name,
            stages,
            settings,
            options: Map::new(),
            output_options: Map::new(),
            collections: BTreeSet::new(),
            inputs: BTreeMap::new(),
            topics,
            fill_to: 0,
            jobs: common.jobs,
            output,
        }
    }
}

/// What a render produced: files to write, the first being the submission.
pub(super) type Outputs = Vec<(PathBuf, String)>;

pub(super) type Render = Box<dyn FnOnce(&[Vec<Turn>]) -> Result<Outputs>>;

/// A plan with the rendering of its stored turns into the submission file.
pub struct PlannedRun {
    pub plan: Plan,
    render: Render,
}

impl PlannedRun {
    /// A task's plan with how its stored turns render.
    pub(super) fn new(plan: Plan, render: Render) -> Self {
        PlannedRun { plan, render }
    }
}

pub(super) fn retriever(service: &TurnService, name: &str) -> Result<Arc<TantivyRetriever>> {
    Ok(service.collections().get(name)?)
}

/// The task-independent turn settings of `common`, on top of `base`.
pub(super) fn settings(
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
        retrieval: common.retrieval,
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
pub(super) fn option_name(field: SettingField) -> &'static str {
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
        SettingField::Retrieval => "--retrieval",
    }
}

pub(super) fn run_name(given: Option<&str>, fallback: &str) -> Result<String> {
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

pub(super) fn stem(path: &Path) -> String {
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
/// is the one that renders them). The run belongs to the user named `owner` (default: `batch`).
/// Dropping the future (Ctrl-C) rolls back the turns in flight; the same plan resumes.
pub async fn execute(
    service: Arc<TurnService>,
    config: &Config,
    run: PlannedRun,
    execution: Execution,
    owner: Option<&str>,
    progress: SharedProgress,
) -> Result<RunSummary> {
    let PlannedRun { plan, render } = run;
    let store = &service
        .store()
        .map_err(|e| super::service_error(None, e))?
        .clone();
    let record = run_record(&service, config, &plan)?;
    let user = run_owner(store, owner).await?;
    let busy = || {
        BatchError::Resume(format!(
            "run {} is being computed by another convrag process (wait for it, or choose another --run-name)",
            plan.run_name
        ))
    };
    // Held until the run is written (alone), or never (workers coordinate through leases).
    let (_lock, discarded) = match &execution {
        Execution::Alone { restart } => {
            let lock = store
                .lock_run(user, &plan.run_name)
                .await?
                .ok_or_else(busy)?;
            let discarded = if *restart {
                record::delete(store, user, &plan.run_name).await?
            } else {
                0
            };
            (Some(lock), discarded)
        }
        Execution::Worker(_) => {
            // Workers share the run; a process computing it alone does not.
            if store.run_locked_elsewhere(user, &plan.run_name).await? {
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

pub(super) fn collection_required(name: Option<String>, why: &str) -> Result<String> {
    name.ok_or_else(|| option("--collection", format!("is required {why}")))
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
