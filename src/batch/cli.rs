//! `convrag run ikat|trec-rag|qrecc|poleval ...`: checks the options and inputs, builds the
//! pipeline as the server does, runs (or resumes) the topics, then renders, validates and writes
//! the submission file with its `.meta.json` sidecar.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Map, Value};

use super::engine::{batch_user, Engine, RunLock, TopicJob};
use super::record::{self, OutputRecord, RunRecord, Sidecar};
use super::{option, BatchError, Result};
use crate::config::Config;
use crate::formats::ikat::{self as ikat_format, RunType};
use crate::formats::trec_rag::{self as rag_format, AnswerFormat, Rag25Metadata};
use crate::formats::{atomic, poleval as poleval_format, qrecc as qrecc_format, trec_run};
use crate::formats::{FormatError, ValidationContext};
use crate::index::{CollectionRegistry, Language, Retriever};
use crate::pipeline::generate::{WordLimit, WordMeasure};
use crate::pipeline::turn::{GeneratorChoice, RewriterChoice, TurnPipeline, TurnSettings};
use crate::rerank::Reranker;
use crate::store::Turn;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(subcommand)]
    pub task: RunTask,
}

#[derive(Debug, Subcommand)]
pub enum RunTask {
    /// TREC iKAT: topics JSON → run JSON (automatic, manual or only_response).
    Ikat(IkatArgs),
    /// TREC RAG 2024/2025: R (TREC run), AG (answers over a given ranking), RAG (answers).
    TrecRag(TrecRagArgs),
    /// SCAI-QReCC-21, TIRA convention: INPUT_DIR/questions.json → OUTPUT_DIR/run.json.
    Qrecc(QreccArgs),
    /// PolEval 2022 passage retrieval: in.tsv → out.tsv (ten passage ids per line).
    Poleval(PolevalArgs),
}

/// A stage of the turn pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Ptkb,
    Rewrite,
    Retrieve,
    Rerank,
    Generate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GeneratorArg {
    Extractive,
    Llm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RewriterArg {
    History,
    Llm,
}

/// Options every task shares.
#[derive(Debug, Args, Clone)]
pub struct CommonArgs {
    /// Name of the run: its tag in the file and the key of its stored turns (a run with the same
    /// name resumes). Default: the output file's name without extension.
    #[arg(long, value_name = "NAME")]
    pub run_name: Option<String>,
    /// Stages to run, comma-separated: ptkb,rewrite[,retrieve[,rerank][,generate]]. Default:
    /// every stage the task uses (rerank when the model is installed).
    #[arg(long, value_delimiter = ',', value_name = "STAGES")]
    pub stages: Option<Vec<Stage>>,
    /// Topics computed in parallel (the turns of a topic are always in order).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub jobs: usize,
    /// BM25 candidates per turn (all reranked when reranking).
    #[arg(long, value_name = "N")]
    pub depth: Option<usize>,
    /// Passages kept per turn: the ranking the run submits.
    #[arg(long, value_name = "N")]
    pub passages: Option<usize>,
    /// Passages (from the top) the generator reads.
    #[arg(long, value_name = "N")]
    pub generation_passages: Option<usize>,
    /// Longest response in words (default and maximum: the track's limit).
    #[arg(long, value_name = "N")]
    pub max_words: Option<usize>,
    /// Generator (default: llm when an LLM endpoint is configured, else extractive).
    #[arg(long, value_enum)]
    pub generator: Option<GeneratorArg>,
    /// Query rewriter: history (default, no LLM) or llm (the configured endpoint with
    /// prompts/rewrite.*.md, falling back to the history-aware rewrite). Manual runs use the
    /// supplied rewrites either way.
    #[arg(long, value_enum)]
    pub rewriter: Option<RewriterArg>,
    /// BM25/neural score fusion: none | rrf | rrf:K | weighted:W.
    #[arg(long, value_name = "FUSION")]
    pub fusion: Option<String>,
    /// Discard what is stored under this run name and start over.
    #[arg(long)]
    pub restart: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunTypeArg {
    Automatic,
    Manual,
    /// As the guidelines spell it (`only-response` is accepted too).
    #[value(name = "only_response", alias = "only-response")]
    OnlyResponse,
}

impl From<RunTypeArg> for RunType {
    fn from(r: RunTypeArg) -> Self {
        match r {
            RunTypeArg::Automatic => RunType::Automatic,
            RunTypeArg::Manual => RunType::Manual,
            RunTypeArg::OnlyResponse => RunType::OnlyResponse,
        }
    }
}

#[derive(Debug, Args)]
pub struct IkatArgs {
    /// iKAT topics JSON (2023, 2024 or 2025 layout).
    #[arg(long, value_name = "FILE")]
    pub topics: PathBuf,
    /// Collection to retrieve from (not needed with --stages ptkb,rewrite).
    #[arg(long, value_name = "NAME")]
    pub collection: Option<String>,
    #[arg(long, value_enum, default_value = "automatic")]
    pub run_type: RunTypeArg,
    /// only_response: the given passage ranking, a TREC run with `<number>_<turn_id>` topics
    /// (texts come from --collection).
    #[arg(long, value_name = "FILE")]
    pub ranking: Option<PathBuf>,
    /// Run JSON to write.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// Also write the passage ranking as a TREC run (first 1000 unique passages per turn).
    #[arg(long, value_name = "FILE")]
    pub trec_output: Option<PathBuf>,
    /// `ptkb_provenance`: the selected statements (the submission) or all of them, ranked.
    #[arg(long, value_enum, default_value = "selected")]
    pub ptkb_list: super::ikat::PtkbList,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RagTask {
    R,
    Ag,
    Rag,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RagRunType {
    Automatic,
    Manual,
}

#[derive(Debug, Args)]
pub struct TrecRagArgs {
    #[arg(long, value_parser = ["2024", "2025"])]
    pub year: String,
    #[arg(long, value_enum)]
    pub task: RagTask,
    /// Topics: 2024 TSV; 2025 narratives (JSON lines, JSON array or TSV). AG runs may take the
    /// topics from --requests instead.
    #[arg(long, value_name = "FILE")]
    pub topics: Option<PathBuf>,
    /// Collection to retrieve from (R, RAG); for AG, where segment texts missing from
    /// --requests are looked up.
    #[arg(long, value_name = "NAME")]
    pub collection: Option<String>,
    /// AG: the given ranking (`baseline_r_out.tsv`, a TREC run).
    #[arg(long, value_name = "FILE")]
    pub ranking: Option<PathBuf>,
    /// AG: reranker-request JSONL (`.gz` accepted) with the segments' fields.
    #[arg(long, value_name = "FILE")]
    pub requests: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// RAG: also write the retrieval as an R run (100 segments per topic).
    #[arg(long, value_name = "FILE")]
    pub trec_output: Option<PathBuf>,
    /// Segments listed in `references` (at most 20).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub references: usize,
    /// 2025: team id of the metadata.
    #[arg(long, value_name = "ID")]
    pub team_id: Option<String>,
    /// 2025: run type of the metadata.
    #[arg(long, value_enum, default_value = "automatic")]
    pub run_type: RagRunType,
    /// 2025 answer layout: 1 (citations index `references`) or 2 (citations are segment ids).
    #[arg(long, default_value = "1", value_parser = ["1", "2"])]
    pub format: String,
    /// 2025 Format 1 in the organizers' checker layout (narrative_id and narrative inside
    /// `metadata`, as `check_trec_rag25_gen.py` requires).
    #[arg(long)]
    pub checker_layout: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct QreccArgs {
    /// Directory holding `questions.json`.
    pub input_dir: PathBuf,
    /// Directory that receives `run.json` (created when missing).
    pub output_dir: PathBuf,
    /// Collection to retrieve from (not needed with --stages ptkb,rewrite).
    #[arg(long, value_name = "NAME")]
    pub collection: Option<String>,
    /// The questions are human rewrites (`questions-rewritten.json`): used as they are.
    #[arg(long)]
    pub rewritten: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct PolevalArgs {
    /// GEval `in.tsv` (`<domain>\t<question>`).
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// `out.tsv` to write (default: next to the input).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Collection of a domain, DOMAIN=NAME (repeatable; default: the collection named like the
    /// domain). Index each domain's passages.jl with `--language polish`.
    #[arg(long = "collection", value_name = "DOMAIN=NAME", value_parser = parse_route)]
    pub collections: Vec<(String, String)>,
    #[command(flatten)]
    pub common: CommonArgs,
}

fn parse_route(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((d, c)) if !d.trim().is_empty() && !c.trim().is_empty() => {
            Ok((d.trim().to_string(), c.trim().to_string()))
        }
        _ => Err(format!("expected DOMAIN=NAME, got {s:?}")),
    }
}

/// Which stages run, resolved against the task and the installed model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stages {
    retrieve: bool,
    rerank: bool,
    generate: bool,
}

impl Stages {
    fn list(self) -> Vec<Stage> {
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
struct Plan {
    task: String,
    run_name: String,
    stages: Stages,
    settings: TurnSettings,
    /// Task options recorded with the settings.
    options: Map<String, Value>,
    /// Options of the output only: a finished run may be written again with others.
    output_options: Map<String, Value>,
    collections: BTreeSet<String>,
    inputs: BTreeMap<String, PathBuf>,
    topics: Vec<TopicJob>,
    fill_to: usize,
    output: PathBuf,
}

/// What a render produced: files to write, the first being the submission.
type Outputs = Vec<(PathBuf, String)>;

/// The loaded parts every task needs.
struct Context<'a> {
    config: &'a Config,
    registry: CollectionRegistry,
    model: Option<Arc<dyn Reranker>>,
    pipeline: Arc<TurnPipeline>,
}

impl<'a> Context<'a> {
    fn new(config: &'a Config) -> anyhow::Result<Self> {
        // As the server builds it (api::AppState::with_reranker).
        let model = crate::rerank::load_default(config);
        let (llm, llm_rewriter) =
            match crate::pipeline::rewrite_llm::llm_stages_from_config(&config.llm)? {
                Some(s) => (Some(s.generator), Some(s.rewriter)),
                None => (None, None),
            };
        let pipeline = Arc::new(
            TurnPipeline::new(
                crate::pipeline::ptkb::recommended_ranker(model.clone()),
                model.clone(),
                llm,
            )
            .with_llm_rewriter(llm_rewriter),
        );
        Ok(Context {
            config,
            registry: CollectionRegistry::new(config.collections_dir()),
            model,
            pipeline,
        })
    }

    fn retriever(&self, name: &str) -> Result<Arc<crate::index::TantivyRetriever>> {
        Ok(self.registry.get(name)?)
    }

    /// The task-independent turn settings of `common`, on top of `base`.
    fn settings(
        &self,
        common: &CommonArgs,
        stages: Stages,
        base: TurnSettings,
        max_passages: usize,
        max_words: usize,
    ) -> Result<TurnSettings> {
        let generator = match common.generator {
            Some(GeneratorArg::Extractive) => GeneratorChoice::Extractive,
            Some(GeneratorArg::Llm) => GeneratorChoice::Llm,
            None if self.pipeline.llm.is_some() => GeneratorChoice::Llm,
            None => GeneratorChoice::Extractive,
        };
        if generator == GeneratorChoice::Llm && self.pipeline.llm.is_none() {
            return Err(option(
                "--generator",
                "llm needs an LLM endpoint (llm.base_url / CONVRAG_LLM_BASE_URL)",
            ));
        }
        let rewriter = match common.rewriter {
            None | Some(RewriterArg::History) => RewriterChoice::History,
            Some(RewriterArg::Llm) => RewriterChoice::Llm,
        };
        if rewriter == RewriterChoice::Llm && self.pipeline.llm_rewriter.is_none() {
            return Err(option(
                "--rewriter",
                "llm needs an LLM endpoint (llm.base_url / CONVRAG_LLM_BASE_URL)",
            ));
        }
        let passages = common.passages.unwrap_or(base.passages);
        if passages == 0 || passages > max_passages {
            return Err(option(
                "--passages",
                format!("must be between 1 and {max_passages} for this task"),
            ));
        }
        let max = common.max_words.unwrap_or(max_words);
        if max == 0 || max > max_words {
            return Err(option(
                "--max-words",
                format!("must be between 1 and {max_words} (the track's limit)"),
            ));
        }
        let settings = TurnSettings {
            retrieve: stages.retrieve,
            generate: stages.generate,
            rerank: stages.rerank,
            depth: common.depth.unwrap_or(base.depth.max(passages)),
            passages,
            generation_passages: common
                .generation_passages
                .unwrap_or(base.generation_passages.min(passages)),
            generator,
            rewriter,
            limit: WordLimit {
                max_words: max,
                measure: base.limit.measure,
            },
            fusion: common.fusion.clone().unwrap_or(base.fusion.clone()),
            ..base
        };
        settings.validate().map_err(|(field, reason)| {
            let o = match field {
                "depth" => "--depth",
                "passages" => "--passages",
                "generation_passages" => "--generation-passages",
                "max_words" => "--max-words",
                "fusion" => "--fusion",
                _ => "settings",
            };
            option(o, reason)
        })?;
        Ok(settings)
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

fn check_jobs(common: &CommonArgs) -> Result<()> {
    // Each topic in flight holds one database connection for its turn (the pool has 16).
    if common.jobs == 0 || common.jobs > 12 {
        return Err(option("--jobs", "must be between 1 and 12"));
    }
    Ok(())
}

/// Runs `convrag run ...`.
pub fn run(config: &Config, args: RunArgs) -> anyhow::Result<()> {
    let ctx = Context::new(config)?;
    let (plan, common, render) = match args.task {
        RunTask::Ikat(a) => plan_ikat(&ctx, a)?,
        RunTask::TrecRag(a) => plan_trec_rag(&ctx, a)?,
        RunTask::Qrecc(a) => plan_qrecc(&ctx, a)?,
        RunTask::Poleval(a) => plan_poleval(&ctx, a)?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(execute(&ctx, &common, plan, render))
}

type Render = Box<dyn FnOnce(&[Vec<Turn>]) -> Result<Outputs>>;

async fn execute(
    ctx: &Context<'_>,
    common: &CommonArgs,
    plan: Plan,
    render: Render,
) -> anyhow::Result<()> {
    let mut collections = BTreeMap::new();
    for name in &plan.collections {
        let manifest = ctx.retriever(name)?.manifest().clone();
        collections.insert(name.clone(), serde_json::to_value(manifest)?);
    }
    // The model is part of the pipeline (reranking, and PTKB ranking may use it) whenever loaded.
    let model = match &ctx.model {
        Some(m) => Some(record::model_record(
            &ctx.config.default_model_dir(),
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
    settings.insert("turn".into(), serde_json::to_value(&plan.settings)?);
    if (plan.stages.generate && plan.settings.generator == GeneratorChoice::Llm)
        || plan.settings.rewriter == RewriterChoice::Llm
    {
        settings.insert("llm_model".into(), json!(ctx.config.llm.model));
    }
    settings.extend(plan.options.clone());
    settings.insert(
        record::OUTPUT_OPTIONS.into(),
        Value::Object(plan.output_options.clone()),
    );
    let record = RunRecord {
        name: plan.run_name.clone(),
        task: plan.task.clone(),
        settings: Value::Object(settings),
        model,
        collections,
        inputs,
        convrag_version: env!("CARGO_PKG_VERSION").to_string(),
    };

    let database = crate::store::embedded::Database::open(ctx.config).await?;
    let work = async {
        let store = database.store.clone();
        let user = batch_user(&store).await?;
        let _lock = RunLock::acquire(&store, &plan.run_name).await?;
        if common.restart {
            let n = record::delete(&store, user, &plan.run_name).await?;
            if n > 0 {
                eprintln!("run {}: discarded {n} stored topics", plan.run_name);
            }
        }
        let stored = match record::load(&store, user, &plan.run_name).await? {
            Some(stored) => {
                let diff = record.differences(&stored.record);
                if !diff.is_empty() {
                    return Err(BatchError::Resume(format!(
                        "run {} was started with other settings or inputs, so it is not resumed:\n  {}\n(--restart discards the stored run; --run-name starts another one)",
                        plan.run_name,
                        diff.join("\n  ")
                    )));
                }
                stored
            }
            None => record::insert(&store, user, &record).await?,
        };
        let mut engine = Engine::new(
            store.clone(),
            user,
            plan.run_name.clone(),
            Arc::clone(&ctx.pipeline),
            plan.settings.clone(),
            ctx.registry.clone(),
            common.jobs,
            !common.quiet,
        );
        engine.fill_to = plan.fill_to;
        let counts = engine.run(&plan.topics).await?;
        let turns = engine.stored_turns(&plan.topics).await?;
        let outputs = render(&turns)?;
        for (path, text) in &outputs {
            atomic::write_atomic(path, text.as_bytes())?;
        }
        let (main_path, main_text) = &outputs[0];
        let sha256 = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(main_text.as_bytes()));
        let finished_at = record::finish(&store, user, &record, main_path, &sha256).await?;
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
        eprintln!(
            "run {}: {} turns ({} computed now, {} stored before) -> {} (and {})",
            plan.run_name,
            counts.total,
            counts.computed,
            counts.resumed,
            plan.output.display(),
            sidecar.display()
        );
        Ok(())
    };
    // Ctrl-C stops the run cleanly: turns in flight roll back, the embedded database (if any)
    // is shut down, and the same command resumes.
    let result = tokio::select! {
        r = work => r,
        _ = tokio::signal::ctrl_c() => Err(BatchError::Resume(format!(
            "run {} interrupted; the turns computed so far are stored, and the same command resumes it",
            plan.run_name
        ))),
    };
    let closed = database.close().await;
    result?;
    Ok(closed?)
}

fn collection_required(name: Option<String>, why: &str) -> Result<String> {
    name.ok_or_else(|| option("--collection", format!("is required {why}")))
}

fn plan_ikat(ctx: &Context<'_>, a: IkatArgs) -> anyhow::Result<(Plan, CommonArgs, Render)> {
    check_jobs(&a.common)?;
    let run_type: RunType = a.run_type.into();
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
    let stages = resolve_stages(a.common.stages.as_deref(), default, ctx.model.is_some())?;
    if only_response && (!stages.retrieve || !stages.generate || stages.rerank) {
        return Err(option(
            "--stages",
            "only_response runs answer from the given ranking as it is: ptkb,rewrite,retrieve,generate",
        )
        .into());
    }
    if only_response != a.ranking.is_some() {
        return Err(option(
            "--ranking",
            "is the given passage ranking of only_response runs, and only of them",
        )
        .into());
    }
    let base = TurnSettings {
        passages: 100,
        limit: WordLimit::IKAT,
        ..TurnSettings::default()
    };
    let settings = ctx.settings(
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
                ctx.retriever(name)?.as_ref(),
                settings.passages,
            )?)
        }
        None => None,
    };
    if let Some(name) = &collection {
        ctx.retriever(name)?;
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
        output: a.output.clone(),
    };
    let output = a.output;
    let trec_output = a.trec_output;
    let ptkb_list = a.ptkb_list;
    if trec_output.is_some() && !stages.retrieve {
        return Err(option(
            "--trec-output",
            "needs passages: include retrieve in --stages",
        )
        .into());
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
    Ok((plan, a.common, render))
}

fn plan_trec_rag(ctx: &Context<'_>, a: TrecRagArgs) -> anyhow::Result<(Plan, CommonArgs, Render)> {
    check_jobs(&a.common)?;
    let year2025 = a.year == "2025";
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
    let stages = resolve_stages(a.common.stages.as_deref(), default, ctx.model.is_some())?;
    if !stages.retrieve || stages.generate != answers {
        return Err(option(
            "--stages",
            if answers {
                "AG and RAG answers need retrieve and generate"
            } else {
                "an R run is a ranking: retrieve (and rerank), no generate"
            },
        )
        .into());
    }
    if a.references == 0 || a.references > rag_format::MAX_REFERENCES {
        return Err(option(
            "--references",
            format!("must be between 1 and {}", rag_format::MAX_REFERENCES),
        )
        .into());
    }
    let given_input = a.ranking.is_some() || a.requests.is_some();
    if (a.task == RagTask::Ag) != given_input {
        return Err(option(
            "--ranking",
            "the AG task answers over a given ranking (--ranking and/or --requests); R and RAG retrieve themselves",
        )
        .into());
    }
    if a.trec_output.is_some() && a.task != RagTask::Rag {
        return Err(option(
            "--trec-output",
            "is for RAG runs (an R run's output is already a TREC run)",
        )
        .into());
    }
    if year2025 && answers && a.team_id.is_none() {
        return Err(option(
            "--team-id",
            "is required for 2025 answers (metadata.team_id)",
        )
        .into());
    }
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
    let settings = ctx.settings(
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
        )
        .into());
    }
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
            )
            .into())
        }
    };
    let collection = match a.task {
        RagTask::Ag => a.collection.clone(),
        _ => Some(collection_required(a.collection.clone(), "to retrieve")?),
    };
    let retriever = collection
        .as_deref()
        .map(|c| ctx.retriever(c))
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
        output_options.insert("format".into(), json!(a.format));
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
        output: a.output.clone(),
    };
    let output = a.output;
    let trec_output = a.trec_output;
    let references = a.references;
    let task = a.task;
    let format2 = a.format == "2";
    let checker_layout = a.checker_layout;
    let metadata = Rag25Metadata {
        team_id: a.team_id.unwrap_or_default(),
        run_id: run_name.clone(),
        run_type: match a.run_type {
            RagRunType::Automatic => "automatic".into(),
            RagRunType::Manual => "manual".into(),
        },
    };
    let render: Render = Box::new(move |stored: &[Vec<Turn>]| {
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
    });
    Ok((plan, a.common, render))
}

fn plan_qrecc(ctx: &Context<'_>, a: QreccArgs) -> anyhow::Result<(Plan, CommonArgs, Render)> {
    check_jobs(&a.common)?;
    let default = [
        Stage::Ptkb,
        Stage::Rewrite,
        Stage::Retrieve,
        Stage::Rerank,
        Stage::Generate,
    ];
    let stages = resolve_stages(a.common.stages.as_deref(), &default, ctx.model.is_some())?;
    let base = TurnSettings {
        passages: 10,
        limit: WordLimit {
            max_words: ikat_format::MAX_RESPONSE_WORDS,
            measure: WordMeasure::Ikat,
        },
        ..TurnSettings::default()
    };
    // QReCC sets no word limit; iKAT's 250 bounds the answers.
    let settings = ctx.settings(&a.common, stages, base, 1000, 1000)?;
    let (questions_path, output) = qrecc_format::tira_paths(&a.input_dir, &a.output_dir);
    let questions = qrecc_format::read_questions(&questions_path)?;
    let collection = if stages.retrieve {
        let name =
            collection_required(a.collection, "to retrieve (or give --stages ptkb,rewrite)")?;
        ctx.retriever(&name)?;
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
    Ok((plan, a.common, render))
}

fn plan_poleval(ctx: &Context<'_>, a: PolevalArgs) -> anyhow::Result<(Plan, CommonArgs, Render)> {
    check_jobs(&a.common)?;
    // The installed model reads English; rerank Polish passages only when asked to.
    let default = [Stage::Ptkb, Stage::Rewrite, Stage::Retrieve];
    let stages = resolve_stages(a.common.stages.as_deref(), &default, ctx.model.is_some())?;
    if !stages.retrieve || stages.generate {
        return Err(option(
            "--stages",
            "out.tsv holds passage ids: retrieve (and rerank), no generate",
        )
        .into());
    }
    let base = TurnSettings {
        passages: poleval_format::PASSAGES_PER_LINE,
        ..TurnSettings::default()
    };
    let settings = ctx.settings(
        &a.common,
        stages,
        base,
        1000,
        ikat_format::MAX_RESPONSE_WORDS,
    )?;
    if settings.passages < poleval_format::PASSAGES_PER_LINE {
        return Err(option("--passages", "out.tsv needs ten passages per line").into());
    }
    let questions = poleval_format::read_questions(&a.input)?;
    let routes = super::poleval::collections(&questions, &a.collections);
    for (domain, name) in &routes {
        let retriever = ctx.retriever(name).map_err(|e| {
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
    Ok((plan, a.common, render))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        task: RunTask,
    }

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }

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
