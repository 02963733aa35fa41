//! `convrag serve`: database (embedded or external), migrations, HTTP server, clean shutdown;
//! `convrag migrate`; `convrag config`.

use std::path::PathBuf;
use std::sync::Arc;

use actix_web::web;
use anyhow::Context;
use clap::Args;
use convrag::api;
use convrag::config::{Config, SETTINGS};
use convrag::index::background::DefaultCollection;
use convrag::store::embedded::Database;
use convrag::web::AppState;

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

/// Request bodies and qrels texts are buffers of megabytes: served by `mmap` they go back to the
/// system when freed, where glibc's adaptive threshold would soon keep them in its heaps, which
/// seldom shrink (issue 53: memory that stayed after a burst of large requests).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_large_buffers() {
    // SAFETY: mallopt sets an allocator parameter under the allocator's own lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_large_buffers() {}

/// Runs the server until SIGINT/SIGTERM, then shuts down cleanly.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    release_large_buffers();
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
    let interrupted = state
        .collections
        .recover()
        .await
        .context("recovering interrupted uploads")?;
    if interrupted > 0 {
        tracing::warn!(
            interrupted,
            "uploads cut off by the last stop were marked failed"
        );
    }
    if let Some(search) = convrag::dense::load_default_search(&config) {
        state = state.with_vector_search(search);
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
    let purge = database
        .store
        .spawn_idempotency_purge(std::time::Duration::from_secs(600));
    if let Some(default) = start_default_collection(&config, state.turns.clone()) {
        state = state.with_default_collection(default);
    }
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let state = web::Data::new(state);
    let metrics = match &config.metrics_bind {
        Some(bind) => match api::metrics_server(state.clone(), bind, false) {
            Ok((addr, server)) => {
                say(format_args!("metrics on http://{addr}/metrics"));
                Some((server.handle(), tokio::spawn(server)))
            }
            Err(e) => {
                let _ = database.close().await;
                return Err(anyhow::Error::new(e).context(format!("cannot listen on {bind}")));
            }
        },
        None => None,
    };
    let result = match api::http_server(state, &config.bind, workers, true) {
        Ok((addr, server)) => {
            tracing::info!(%addr, "convrag is listening");
            say(format_args!("convrag listening on http://{addr}"));
            // Not fatal: an early return here would leave the embedded cluster running.
            if let Err(e) = print_first_sign_in(&database.store, addr).await {
                tracing::error!(error = %format!("{e:#}"), "no sign-in link for the first user");
            }
            server.await.context("HTTP server failed")
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot listen on {}", config.bind))),
    };
    purge.abort();
    if let Some((handle, task)) = metrics {
        handle.stop(true).await;
        let _ = task.await;
    }
    let closed = database.close().await;
    result.and(closed.map_err(anyhow::Error::from))
}

/// The default collection, when one is configured or already built, with its build started on a
/// thread of its own (one indexing thread, so the server keeps answering meanwhile), then its
/// passage vectors (with a bi-encoder).
fn start_default_collection(
    config: &Config,
    turns: Arc<convrag::service::TurnService>,
) -> Option<Arc<DefaultCollection>> {
    let name = &config.default_collection;
    let built = config.collections_dir().join(name).is_dir();
    let source = match &config.default_collection_source {
        Some(source) => source.clone(),
        None if built => PathBuf::new(),
        None => return None,
    };
    let default = Arc::new(DefaultCollection::new(name, &source));
    let building = default.clone();
    let collections = config.collections_dir();
    let staging = config.home.join("staging");
    // A failed build is logged by the build; the server goes on without the collection.
    std::thread::spawn(move || {
        let built = building.build(&collections, &staging, 1);
        if let Ok(Some(report)) = &built {
            tracing::info!(
                passages = report.passages_total,
                "default collection built in {:.0}s",
                report.seconds
            );
        }
        if built.is_ok() {
            if let Err(e) = turns.build_vectors(building.name()) {
                tracing::error!(error = %e, "no passage vectors for the default collection");
            }
        }
    });
    Some(default)
}

/// On a fresh server: creates the first user and prints its one-time sign-in link (again at each
/// start until it has been used).
async fn print_first_sign_in(
    store: &convrag::store::Store,
    addr: std::net::SocketAddr,
) -> anyhow::Result<()> {
    let Some(first) = store
        .first_user_sign_in()
        .await
        .context("cannot create the first user's sign-in link")?
    else {
        return Ok(());
    };
    let host = if addr.ip().is_unspecified() {
        std::net::SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
    } else {
        addr
    };
    if first.created {
        tracing::info!(user = %first.user.name, "created the first user");
    }
    say(format_args!(
        "Sign in as \"{}\" by opening this link (it works once, until {}):\n  http://{host}/#sign-in={}",
        first.user.name,
        first.expires_at.format("%Y-%m-%d %H:%M UTC"),
        first.code
    ));
    Ok(())
}

/// Prints a line for whoever started the server. A closed stdout (the parent stopped reading)
/// must not take the server down, so write errors are ignored rather than panicking like
/// `println!`.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
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
    /// Also serve `GET /metrics` here, without a token (overrides CONVRAG_METRICS_BIND).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_bind: Option<String>,
    /// Directory of HTML pages to build the default collection from, once, in the background
    /// (overrides CONVRAG_DEFAULT_COLLECTION_SOURCE).
    #[arg(long, value_name = "DIR")]
    pub default_collection: Option<PathBuf>,
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
