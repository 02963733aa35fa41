//! `convrag serve`: database (embedded or external), migrations, HTTP server, clean shutdown;
//! `convrag migrate`; `convrag config`.

use std::sync::Arc;

use actix_web::web;
use anyhow::Context;
use clap::Args;
use convrag::api::{self, AppState};
use convrag::config::{Config, SETTINGS};
use convrag::store::embedded::Database;

/// The administrator token: configured, or generated once into `home/admin_token` (mode 0600).
fn admin_token(config: &Config) -> anyhow::Result<String> {
    if let Some(token) = &config.admin_token {
        return Ok(token.clone());
    }
    let path = config.home.join("admin_token");
    if path.exists() {
        let token = convrag::formats::read_text(&path)?.trim().to_string();
        anyhow::ensure!(
            !token.is_empty(),
            "{} is empty: delete it to generate a new admin token",
            path.display()
        );
        return Ok(token);
    }
    let token = format!("adm_{}", &convrag::store::users::generate_token()[4..]);
    convrag::formats::atomic::write_private(&path, token.as_bytes())?;
    tracing::info!(path = %path.display(), "generated an administrator token");
    Ok(token)
}

/// Runs the server until SIGINT/SIGTERM, then shuts down cleanly.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.home)
        .with_context(|| format!("cannot create the data directory {}", config.home.display()))?;
    let admin_token = admin_token(&config)?;
    // An unusable LLM configuration is a start-up error, not a silent extractive server.
    convrag::pipeline::rewrite_llm::llm_stages_from_config(&config.llm)
        .context("the LLM configuration (llm.* / CONVRAG_LLM_*) is unusable")?;
    let database = Database::open(&config).await?;
    let mut state = AppState::new(
        database.store.clone(),
        Arc::new(config.clone()),
        &admin_token,
    );
    if let Some(model) = convrag::rerank::load_default(&config) {
        state = state.with_reranker(model);
    }
    // Servers sharing the database serve the same collection files, or refuse the differing.
    let node = format!("{} ({})", super::host_name(), config.bind);
    let checked = convrag::service::manifests::check_collection_manifests(
        &database.store,
        state.turns.collections(),
        &node,
    )
    .await;
    if let Err(e) = checked {
        let _ = database.close().await;
        return Err(anyhow::Error::new(e).context("checking the collections against the database"));
    }
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let result = match api::http_server(web::Data::new(state), &config.bind, workers, true) {
        Ok((addr, server)) => {
            tracing::info!(%addr, "convrag is listening");
            println!("convrag listening on http://{addr}");
            server.await.context("HTTP server failed")
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot listen on {}", config.bind))),
    };
    let closed = database.close().await;
    result.and(closed.map_err(anyhow::Error::from))
}

/// `convrag migrate`: applies pending migrations and exits.
pub async fn migrate(config: Config) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.home)
        .with_context(|| format!("cannot create the data directory {}", config.home.display()))?;
    let database = Database::open(&config).await?;
    println!("migrations applied");
    Ok(database.close().await?)
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Listen address (overrides CONVRAG_BIND).
    #[arg(long, value_name = "HOST:PORT")]
    pub bind: Option<String>,
}

/// `convrag config`: the effective configuration (secrets masked) and the settings read.
pub fn print_config(config: &Config) {
    print!("{}", config.to_display_toml());
    println!();
    println!("# environment variables read:");
    for s in SETTINGS {
        println!("#   {:<26} {}", s.env, s.meaning);
    }
}
