//! `convrag run ikat|trec-rag|qrecc|poleval ...`: the arguments, the progress bar and what is
//! printed. Planning and running are library code (`convrag::batch::task`, `convrag::batch::plan`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use convrag::batch::engine::Worker;
use convrag::batch::ikat::{IkatFormat, IkatOptions, PtkbList};
use convrag::batch::plan::{self, CommonOptions, Execution, Stage};
use convrag::batch::poleval::PolevalOptions;
use convrag::batch::qrecc::QreccOptions;
use convrag::batch::task::{self, RunOptions};
use convrag::batch::trec_rag::{AnswerLayout, RagRunType, RagTask, RagYear, TrecRagOptions};
use convrag::batch::BatchError;
use convrag::config::Config;
use convrag::dense::Retrieval;
use convrag::formats::ikat::RunType;
use convrag::pipeline::turn::{GeneratorChoice, RewriterChoice};
use convrag::progress::SharedProgress;
use convrag::rerank::Fusion;
use convrag::service::TurnService;

use super::progress::Bar;

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
    pub generator: Option<GeneratorChoice>,
    /// Query rewriter: history (default, no LLM) or llm (the configured endpoint with
    /// prompts/rewrite.*.md, falling back to the history-aware rewrite). Manual runs use the
    /// supplied rewrites either way.
    #[arg(long, value_enum)]
    pub rewriter: Option<RewriterChoice>,
    /// BM25/neural score fusion: none | rrf | rrf:K | weighted:W.
    #[arg(long, value_name = "FUSION")]
    pub fusion: Option<Fusion>,
    /// First stage: bm25 (default), dense (the bi-encoder over the collection's passage
    /// vectors, computed by `convrag index` or `convrag embed`) or hybrid (both, fused by RRF).
    #[arg(long, value_enum)]
    pub retrieval: Option<Retrieval>,
    /// Discard what is stored under this run name and start over.
    #[arg(long, conflicts_with = "worker")]
    pub restart: bool,
    /// Compute the run together with other `--worker` processes (on any machine, same
    /// database): topics are claimed through PostgreSQL leases, and exactly one worker writes
    /// the files once every topic is stored.
    #[arg(long)]
    pub worker: bool,
    /// The worker's name in the leases (default: host name and process id).
    #[arg(long, value_name = "NAME", requires = "worker")]
    pub worker_id: Option<String>,
    /// Seconds a claimed topic stays leased without renewal (a dead worker's topics are taken
    /// over after this long).
    #[arg(long, default_value_t = 60, value_name = "SECONDS", requires = "worker",
          value_parser = clap::value_parser!(u64).range(3..=3600))]
    pub lease: u64,
    /// The existing user the run's conversations and record belong to (they see it in the
    /// page's Runs view); default: the `batch` user.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunTypeArg {
    Automatic,
    Manual,
    /// As the 2024 guidelines spell it (`only-response`, and 2025's `generation-only`, are
    /// accepted too).
    #[value(name = "only_response", aliases = ["only-response", "generation-only"])]
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
    /// Run JSON (2024) or JSONL (2025) to write.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// Also write the passage ranking as a TREC run (first 1000 unique passages per turn; for
    /// 2025, the references as the organizers' generate_run.py converts them).
    #[arg(long, value_name = "FILE")]
    pub trec_output: Option<PathBuf>,
    /// `ptkb_provenance`: the selected statements (the submission) or all of them, ranked.
    #[arg(long, value_enum, default_value = "selected")]
    pub ptkb_list: PtkbList,
    /// Submission layout: 2024 (one run JSON) or 2025 (JSONL with references, citations and
    /// PTKB statement texts). Default: 2025 for topics in the 2025 layout, else 2024.
    #[arg(long, value_enum)]
    pub format: Option<IkatFormat>,
    /// 2025 `metadata.team_id`.
    #[arg(long, value_name = "ID", default_value = "convrag")]
    pub team_id: String,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct TrecRagArgs {
    #[arg(long, value_enum)]
    pub year: RagYear,
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
    #[arg(long, value_enum, default_value = "1")]
    pub format: AnswerLayout,
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

/// Alone (with `--restart`) or as a `--worker`.
fn execution(c: &CommonArgs) -> Execution {
    if !c.worker {
        return Execution::Alone { restart: c.restart };
    }
    Execution::Worker(Worker {
        id: c.worker_id.clone().unwrap_or_else(default_worker_id),
        lease: Duration::from_secs(c.lease),
    })
}

/// `<host name>:<process id>`.
fn default_worker_id() -> String {
    format!("{}:{}", super::host_name(), std::process::id())
}

impl From<CommonArgs> for CommonOptions {
    fn from(a: CommonArgs) -> Self {
        CommonOptions {
            run_name: a.run_name,
            stages: a.stages,
            jobs: a.jobs,
            depth: a.depth,
            passages: a.passages,
            generation_passages: a.generation_passages,
            max_words: a.max_words,
            generator: a.generator,
            rewriter: a.rewriter,
            fusion: a.fusion,
            retrieval: a.retrieval,
        }
    }
}

impl RunTask {
    /// The library's options, and the command line's own (how to execute, `--quiet`, `--user`).
    fn into_options(self) -> (RunOptions, Flags) {
        let flags = |c: &CommonArgs| Flags {
            execution: execution(c),
            quiet: c.quiet,
            user: c.user.clone(),
        };
        match self {
            RunTask::Ikat(a) => {
                let flags = flags(&a.common);
                let options = IkatOptions {
                    topics: a.topics,
                    collection: a.collection,
                    run_type: a.run_type.into(),
                    ranking: a.ranking,
                    output: a.output,
                    trec_output: a.trec_output,
                    ptkb_list: a.ptkb_list,
                    format: a.format,
                    team_id: a.team_id,
                    common: a.common.into(),
                };
                (RunOptions::Ikat(options), flags)
            }
            RunTask::TrecRag(a) => {
                let flags = flags(&a.common);
                let options = TrecRagOptions {
                    year: a.year,
                    task: a.task,
                    topics: a.topics,
                    collection: a.collection,
                    ranking: a.ranking,
                    requests: a.requests,
                    output: a.output,
                    trec_output: a.trec_output,
                    references: a.references,
                    team_id: a.team_id,
                    run_type: a.run_type,
                    format: a.format,
                    checker_layout: a.checker_layout,
                    common: a.common.into(),
                };
                (RunOptions::TrecRag(options), flags)
            }
            RunTask::Qrecc(a) => {
                let flags = flags(&a.common);
                let options = QreccOptions {
                    input_dir: a.input_dir,
                    output_dir: a.output_dir,
                    collection: a.collection,
                    rewritten: a.rewritten,
                    common: a.common.into(),
                };
                (RunOptions::Qrecc(options), flags)
            }
            RunTask::Poleval(a) => {
                let flags = flags(&a.common);
                let options = PolevalOptions {
                    input: a.input,
                    output: a.output,
                    collections: a.collections,
                    common: a.common.into(),
                };
                (RunOptions::Poleval(options), flags)
            }
        }
    }
}

/// What the command line decides beyond the task's options.
struct Flags {
    execution: Execution,
    quiet: bool,
    user: Option<String>,
}

/// Runs `convrag run ...`.
pub fn run(config: &Config, args: RunArgs) -> anyhow::Result<()> {
    // As the server builds it.
    let search = convrag::dense::load_default_search(config);
    let reranker = search.as_ref().map(|s| s.reranker());
    let service = TurnService::from_config(config, reranker)?.with_vectors(search);
    let (options, flags) = args.task.into_options();
    let planned = task::plan(&service, options)?;
    let run_name = planned.plan.run_name.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let database = convrag::store::embedded::Database::open(config).await?;
        let service = Arc::new(service.with_store(database.store.clone()));
        let work = plan::execute(
            service,
            config,
            planned,
            flags.execution,
            flags.user.as_deref(),
            progress_bar(flags.quiet),
        );
        // Ctrl-C stops the run cleanly: turns in flight roll back, the embedded database (if
        // any) is shut down, and the same command resumes.
        let result = tokio::select! {
            r = work => r,
            _ = tokio::signal::ctrl_c() => Err(BatchError::Resume(format!(
                "run {run_name} interrupted; the turns computed so far are stored, and the same command resumes it"
            ))),
        };
        let closed = database.close().await;
        let summary = result?;
        closed?;
        if summary.discarded > 0 {
            eprintln!(
                "run {}: discarded {} stored topics",
                summary.run_name, summary.discarded
            );
        }
        if let Some(by) = &summary.rendered_by {
            eprintln!(
                "run {}: {} turns ({} computed by this worker); worker {by} writes {}",
                summary.run_name,
                summary.counts.total,
                summary.counts.computed,
                summary.output.display()
            );
            return Ok(());
        }
        eprintln!(
            "run {}: {} turns ({} computed now, {} stored before) -> {} (and {})",
            summary.run_name,
            summary.counts.total,
            summary.counts.computed,
            summary.counts.resumed,
            summary.output.display(),
            summary.sidecar.display()
        );
        Ok(())
    })
}

pub(crate) fn progress_bar(quiet: bool) -> SharedProgress {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} turns, {elapsed} elapsed, ETA {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    // The estimate should come from this invocation's pace, not from the resumed turns.
    Bar::new(bar).resuming().shared()
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
}
