//! The `convrag` command line: parses arguments and hands over to the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use convrag::config::{Config, Overrides, SETTINGS};

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
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the HTTP server (embedded PostgreSQL unless DATABASE_URL is set).
    Serve {
        /// Listen address (overrides CONVRAG_BIND).
        #[arg(long, value_name = "HOST:PORT")]
        bind: Option<String>,
    },
    /// Apply database migrations and exit.
    Migrate,
    /// Print the effective configuration and the settings convrag reads.
    Config,
    /// Check a submission file against its official format (one line per problem).
    Validate(convrag::formats::cli::ValidateArgs),
    /// Evaluate runs, PTKB rankings, rewrites and answers (trec_eval-exact).
    Eval(convrag::eval::cli::EvalArgs),
    /// Index a passage collection (BM25, tantivy).
    Index(convrag::index::cli::IndexArgs),
    /// Search a collection: one query, or a topics file into a TREC run.
    Search(convrag::index::cli::SearchArgs),
    /// Rerank first-stage candidates with a neural model and write a TREC run.
    Rerank(convrag::rerank::cli::RerankArgs),
    /// Precompute a collection's passage embeddings into the on-disk cache (resumable).
    Embed(convrag::rerank::embed::EmbedArgs),
    /// Run pipeline stages (PTKB ranking, query rewriting) over a topics file.
    Pipeline(convrag::pipeline::cli::PipelineArgs),
    /// Batch runs: official submission files (iKAT, TREC RAG, SCAI-QReCC, PolEval), resumable.
    Run(convrag::batch::cli::RunArgs),
    /// Model Context Protocol over stdio, bridged to a running server's /mcp (for MCP clients).
    Mcp(convrag::mcp::stdio::McpArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
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
    match command {
        Command::Serve { bind } => {
            let config = Config::load(&Overrides { bind, ..overrides })?;
            actix_web::rt::System::new().block_on(convrag::server::serve(config))
        }
        Command::Migrate => {
            let config = Config::load(&overrides)?;
            actix_web::rt::System::new().block_on(convrag::server::migrate(config))
        }
        Command::Config => {
            let config = Config::load(&overrides)?;
            print!("{}", config.to_display_toml());
            println!();
            println!("# environment variables read:");
            for s in SETTINGS {
                println!("#   {:<26} {}", s.env, s.meaning);
            }
            Ok(())
        }
        Command::Validate(args) => convrag::formats::cli::run(&Config::load(&overrides)?, args),
        Command::Eval(args) => convrag::eval::cli::run(&Config::load(&overrides)?, args),
        Command::Index(args) => convrag::index::cli::run_index(&Config::load(&overrides)?, args),
        Command::Search(args) => convrag::index::cli::run_search(&Config::load(&overrides)?, args),
        Command::Rerank(args) => convrag::rerank::cli::run(&Config::load(&overrides)?, args),
        Command::Embed(args) => convrag::rerank::embed::run(&Config::load(&overrides)?, args),
        Command::Pipeline(args) => convrag::pipeline::cli::run(&Config::load(&overrides)?, args),
        Command::Run(args) => convrag::batch::cli::run(&Config::load(&overrides)?, args),
        Command::Mcp(args) => convrag::mcp::stdio::run(&Config::load(&overrides)?, args),
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,tantivy=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
