//! `convrag ikat interactive`: the arguments, the progress bar and what is printed. The client
//! of the Simulation API is library code (`convrag::batch::interactive`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use convrag::batch::engine::run_owner;
use convrag::batch::interactive::{self, ApiMode, InteractiveOptions};
use convrag::batch::BatchError;
use convrag::config::Config;
use convrag::pipeline::turn::GeneratorChoice;
use convrag::service::{RequestedSettings, TurnService};

#[derive(Debug, Args)]
pub struct IkatArgs {
    #[command(subcommand)]
    pub command: IkatCommand,
}

#[derive(Debug, Subcommand)]
pub enum IkatCommand {
    /// The interactive task: answer the simulated users of a Simulation API (Sim.API) until
    /// they end the run; the same command resumes an interrupted run.
    Interactive(InteractiveArgs),
}

#[derive(Debug, Args)]
pub struct InteractiveArgs {
    /// The API's base URL (e.g. https://trec-ikat25.webis.de/simulation).
    #[arg(long, value_name = "URL")]
    pub api: String,
    /// The team's access token (sent as `Authorization: Bearer`).
    #[arg(
        long,
        env = "CONVRAG_SIMAPI_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// The team id; checked against the token (`auth/verify`) and sent with the run.
    #[arg(long, value_name = "ID")]
    pub team_id: Option<String>,
    /// The run's name at the API; also the key of its stored conversations.
    #[arg(long, value_name = "ID")]
    pub run_id: String,
    /// The run's description the API records.
    #[arg(
        long,
        default_value = "convrag: BM25, neural reranking, extractive or LLM answers with citations"
    )]
    pub description: String,
    /// Use the debugging endpoints (`debug/...`: not evaluated) instead of the run endpoints.
    #[arg(long)]
    pub debug: bool,
    /// Remember what each returning simulated user says about themselves (first-person
    /// statements) as the PTKB of their later sessions; the run tells the API so.
    #[arg(long)]
    pub track_persona: bool,
    /// Collection the turns retrieve from.
    #[arg(long, value_name = "NAME")]
    pub collection: String,
    /// Write the stored turns of the run as 2025 JSONL at the end.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Passages kept per turn (sent as citations, at most 1000).
    #[arg(long, value_name = "N")]
    pub passages: Option<usize>,
    /// BM25 candidates per turn.
    #[arg(long, value_name = "N")]
    pub depth: Option<usize>,
    /// Generator (default: llm when an LLM endpoint is configured, else extractive).
    #[arg(long, value_enum)]
    pub generator: Option<GeneratorChoice>,
    /// Seconds one request to the API may take.
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub timeout: u64,
    /// The existing user the conversations belong to; default: the `batch` user.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs `convrag ikat ...`.
pub fn run(config: &Config, args: IkatArgs) -> anyhow::Result<()> {
    let IkatCommand::Interactive(a) = args.command;
    let service = TurnService::from_config(config, convrag::dense::load_default(config))?;
    let requested = RequestedSettings {
        generator: a.generator,
        passages: a.passages,
        depth: a.depth,
        ..RequestedSettings::default()
    };
    let settings = interactive::settings(&service, &requested)?;
    service.collections().get(&a.collection)?;
    let options = InteractiveOptions {
        api: a.api,
        token: a.token,
        team_id: a.team_id,
        run_id: a.run_id,
        description: a.description,
        track_persona: a.track_persona,
        mode: if a.debug {
            ApiMode::Debug
        } else {
            ApiMode::Run
        },
        collection: a.collection,
        settings,
        timeout: Duration::from_secs(a.timeout),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let database = convrag::store::embedded::Database::open(config).await?;
        let store = &database.store;
        let service = Arc::new(service.with_store(store.clone()));
        let work = async {
            let user_id = run_owner(store, a.user.as_deref()).await?;
            let bar = crate::cli::run::progress_bar(a.quiet);
            let summary = interactive::run(Arc::clone(&service), user_id, &options, bar).await?;
            let written = match &a.output {
                Some(path) => {
                    let team = options.team_id.as_deref().unwrap_or("convrag");
                    Some(
                        interactive::write_stored(store, user_id, team, &options.run_id, path)
                            .await?,
                    )
                }
                None => None,
            };
            Ok::<_, BatchError>((summary, written))
        };
        // Ctrl-C: a turn in flight rolls back; the same command resumes where the API is.
        let result = tokio::select! {
            r = work => r,
            _ = tokio::signal::ctrl_c() => Err(BatchError::Resume(format!(
                "run {} interrupted; the same command resumes it", options.run_id
            ))),
        };
        let closed = database.close().await;
        let (summary, written) = result?;
        closed?;
        eprintln!(
            "run {}: {} sessions ended, {} turns computed, {} stored turns sent{}",
            options.run_id,
            summary.sessions,
            summary.computed,
            summary.resent,
            if summary.resumed { " (resumed)" } else { "" }
        );
        if let Some(n) = summary.dump_checked {
            eprintln!("run/dump matches the {n} stored turns");
        }
        if let (Some(n), Some(path)) = (written, &a.output) {
            eprintln!("{n} turns -> {}", path.display());
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: IkatCommand,
    }

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
