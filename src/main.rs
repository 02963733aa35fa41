//! The `convrag` command line: parses arguments, loads the configuration and hands over to the
//! command in `cli/`.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use convrag::config::{Config, Overrides};

#[derive(Parser)]
#[command(
    name = "convrag",
    version,
    about = "Conversational, personalized RAG server and TREC toolkit"
)]
struct Cli {
    /// Configuration file (default: ./convrag.toml when present).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory (overrides CONVRAG_HOME).
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Log lines on stderr as text, or as one JSON object per line (for log shippers).
    #[arg(long, global = true, value_enum, env = "CONVRAG_LOG_FORMAT", default_value_t = cli::telemetry::LogFormat::Text)]
    log_format: cli::telemetry::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the HTTP server (embedded PostgreSQL unless DATABASE_URL is set).
    Serve(cli::serve::ServeArgs),
    /// Apply database migrations and exit.
    Migrate,
    /// Print the effective configuration and the settings convrag reads.
    Config,
    /// Check a submission file against its official format (one line per problem).
    Validate(cli::validate::ValidateArgs),
    /// Evaluate runs, PTKB rankings, rewrites and answers (trec_eval-exact).
    Eval(cli::eval::EvalArgs),
    /// Index a passage collection (BM25, tantivy).
    Index(cli::index::IndexArgs),
    /// Search a collection: one query, or a topics file into a TREC run.
    Search(cli::index::SearchArgs),
    /// Collection directories shared by many nodes: verify against the checksum manifest.
    Collection(cli::collection::CollectionArgs),
    /// Rerank first-stage candidates with a neural model and write a TREC run.
    Rerank(cli::rerank::RerankArgs),
    /// Precompute a collection's passage embeddings into the on-disk cache (resumable).
    Embed(cli::embed::EmbedArgs),
    /// Run pipeline stages (PTKB ranking, query rewriting) over a topics file.
    Pipeline(cli::pipeline::PipelineArgs),
    /// Fit learned pipeline weights on training topics (cross-validated by topic).
    Tune(cli::tune::TuneArgs),
    /// Batch runs: official submission files (iKAT, TREC RAG, SCAI-QReCC, PolEval), resumable.
    Run(cli::run::RunArgs),
    /// TREC iKAT's interactive task: answer a Simulation API's simulated users, resumable.
    Ikat(cli::ikat::IkatArgs),
    /// User accounts: add (prints the token), list, disable, enable; works beside a running server.
    User(cli::user::UserArgs),
    #[cfg(feature = "bench")]
    /// Benchmarks of the library's parts (`bench ann`: approximate vs exact vector search).
    Bench(cli::bench::BenchArgs),
    /// Model Context Protocol over stdio, bridged to a running server's /mcp (for MCP clients).
    Mcp(cli::mcp::McpArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Dropped at the end of main, after the command: exports the last spans.
    let _telemetry = match cli::telemetry::init(cli.log_format) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let overrides = Overrides {
        config_file: cli.config.clone(),
        home: cli.home.clone(),
        ..Default::default()
    };
    match run(cli.command, overrides) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command, overrides: Overrides) -> anyhow::Result<()> {
    let config = || Config::load(&overrides);
    match command {
        // Commands that only read and write the files they are given need no configuration.
        Command::Validate(args) => cli::validate::run(args),
        Command::Eval(args) => cli::eval::run(args),
        Command::Tune(args) => cli::tune::run(&config()?, args),
        Command::Serve(args) => {
            let mut config = Config::load(&Overrides {
                bind: args.bind.clone(),
                metrics_bind: args.metrics_bind.clone(),
                ..overrides.clone()
            })?;
            if let Some(dir) = args.default_collection {
                config.default_collection_source = Some(dir);
            }
            block_on(cli::serve::serve(config))
        }
        Command::Migrate => block_on(cli::serve::migrate(config()?)),
        Command::Config => {
            cli::serve::print_config(&config()?);
            Ok(())
        }
        Command::Index(args) => cli::index::run_index(&config()?, args),
        Command::Search(args) => cli::index::run_search(&config()?, args),
        Command::Collection(args) => cli::collection::run(&config()?, args),
        Command::Rerank(args) => cli::rerank::run(&config()?, args),
        Command::Embed(args) => cli::embed::run(&config()?, args),
        Command::Pipeline(args) => cli::pipeline::run(&config()?, args),
        Command::Run(args) => cli::run::run(&config()?, args),
        Command::Ikat(args) => cli::ikat::run(&config()?, args),
        Command::Mcp(args) => cli::mcp::run(&config()?, args),
        Command::User(args) => cli::user::run(&config()?, args),
        #[cfg(feature = "bench")]
        Command::Bench(args) => cli::bench::run_bench(&config()?, args),
    }
}

fn block_on<F: std::future::Future>(job: F) -> F::Output {
    actix_web::rt::System::new().block_on(job)
}
