//! `convrag collection verify NAME [--record]`: compares a collection directory with its
//! `manifest.sha256.json`, and with `--record` makes it the version every server must serve.

use anyhow::Context;
use clap::{Args, Subcommand};
use convrag::config::Config;
use convrag::index::checksum::{self, ChecksumManifest};
use convrag::store::embedded::Database;

#[derive(Debug, Args)]
pub struct CollectionArgs {
    #[command(subcommand)]
    pub command: CollectionCommand,
}

#[derive(Debug, Subcommand)]
pub enum CollectionCommand {
    /// Check every file of a collection against its manifest.sha256.json (exit 1 when any
    /// differs, naming them).
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The collection's name (a directory under CONVRAG_HOME/collections).
    pub name: String,
    /// When the files match: record this manifest in the database as the one servers serve
    /// (servers with another copy refuse the collection from their next start).
    #[arg(long)]
    pub record: bool,
}

pub fn run(config: &Config, args: CollectionArgs) -> anyhow::Result<()> {
    match args.command {
        CollectionCommand::Verify(a) => verify(config, a),
    }
}

fn verify(config: &Config, args: VerifyArgs) -> anyhow::Result<()> {
    convrag::index::validate_name(&args.name)?;
    let dir = config.collections_dir().join(&args.name);
    anyhow::ensure!(dir.is_dir(), "no collection directory {}", dir.display());
    let differences = checksum::verify(&dir)?;
    if !differences.is_empty() {
        for d in &differences {
            eprintln!("{}: {d}", dir.display());
        }
        anyhow::bail!(
            "collection {}: {} files differ from {}",
            args.name,
            differences.len(),
            dir.join(checksum::CHECKSUM_FILE).display()
        );
    }
    let manifest = ChecksumManifest::read(&dir)?.context("the manifest disappeared")?;
    let digest = manifest.digest();
    println!(
        "collection {}: {} files match {} (sha256 {digest})",
        args.name,
        manifest.files.len(),
        checksum::CHECKSUM_FILE
    );
    if args.record {
        let node = super::host_name();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let database = Database::open(config).await?;
            let recorded = database
                .store
                .replace_collection_manifest(&args.name, &digest, &node)
                .await;
            database.close().await?;
            recorded?;
            println!("recorded as the collection every server serves");
            anyhow::Ok(())
        })?;
    }
    Ok(())
}
