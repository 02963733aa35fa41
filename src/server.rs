//! `convrag serve`: database (embedded or external), migrations, HTTP server, clean shutdown.

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use actix_web::web;
use anyhow::Context;

use crate::api::{self, AppState};
use crate::config::Config;
use crate::store::{DbTarget, EmbeddedCluster, Store};

/// The database convrag talks to, and the embedded cluster when it runs one.
pub struct Database {
    pub store: Store,
    pub cluster: Option<EmbeddedCluster>,
}

impl Database {
    /// Connects to `DATABASE_URL`, or creates/starts the embedded cluster, then migrates.
    pub async fn open(config: &Config) -> anyhow::Result<Self> {
        match &config.database_url {
            Some(url) => {
                let store = Store::connect(&DbTarget::Url(url.clone()))
                    .await
                    .with_context(|| {
                        format!("cannot use the database at DATABASE_URL ({})", redact(url))
                    })?;
                Ok(Self {
                    store,
                    cluster: None,
                })
            }
            None => {
                let cluster = EmbeddedCluster::new(&config.pgdata_dir())?;
                tracing::info!(dir = %cluster.data_dir().display(), bin = %cluster.bin_dir().display(), "starting the embedded PostgreSQL cluster");
                cluster
                    .start()
                    .await
                    .context("cannot start the embedded PostgreSQL cluster")?;
                match Store::connect(&cluster.target()).await {
                    Ok(store) => Ok(Self {
                        store,
                        cluster: Some(cluster),
                    }),
                    Err(e) => {
                        let _ = cluster.stop();
                        Err(anyhow::Error::new(e)
                            .context("cannot use the embedded PostgreSQL cluster"))
                    }
                }
            }
        }
    }

    /// Closes connections and stops the embedded cluster, if any.
    pub async fn close(self) -> anyhow::Result<()> {
        self.store.close().await;
        if let Some(cluster) = self.cluster {
            tracing::info!("stopping the embedded PostgreSQL cluster");
            cluster
                .stop()
                .context("cannot stop the embedded PostgreSQL cluster")?;
        }
        Ok(())
    }
}

fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://***@{}", &url[..s], &url[at + 1..]),
        _ => url.to_string(),
    }
}

/// The administrator token: configured, or generated once into `home/admin_token` (mode 0600).
pub fn admin_token(config: &Config) -> anyhow::Result<String> {
    if let Some(token) = &config.admin_token {
        return Ok(token.clone());
    }
    let path = config.home.join("admin_token");
    if path.exists() {
        let token = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let token = token.trim().to_string();
        anyhow::ensure!(
            !token.is_empty(),
            "{} is empty: delete it to generate a new admin token",
            path.display()
        );
        return Ok(token);
    }
    let token = format!("adm_{}", &crate::store::users::generate_token()[4..]);
    write_private(&path, &token)?;
    tracing::info!(path = %path.display(), "generated an administrator token");
    Ok(token)
}

fn write_private(path: &Path, content: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    file.write_all(content.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Moved to the turn service, where the pipeline is assembled.
pub use crate::service::load_reranker;

/// Runs the server until SIGINT/SIGTERM, then shuts down cleanly.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.home)
        .with_context(|| format!("cannot create the data directory {}", config.home.display()))?;
    let admin_token = admin_token(&config)?;
    // An unusable LLM configuration is a start-up error, not a silent extractive server.
    crate::pipeline::rewrite_llm::llm_stages_from_config(&config.llm)
        .context("the LLM configuration (llm.* / CONVRAG_LLM_*) is unusable")?;
    let database = Database::open(&config).await?;
    let mut state = AppState::new(
        database.store.clone(),
        Arc::new(config.clone()),
        &admin_token,
    );
    if let Some(model) = load_reranker(&config) {
        state = state.with_reranker(model);
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
    result.and(closed)
}

/// `convrag migrate`: applies pending migrations and exits.
pub async fn migrate(config: Config) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.home)
        .with_context(|| format!("cannot create the data directory {}", config.home.display()))?;
    let database = Database::open(&config).await?;
    println!("migrations applied");
    database.close().await
}
