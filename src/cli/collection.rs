//! `convrag collection verify NAME [--record]`: compares a collection directory with its
//! `manifest.sha256.json`, and with `--record` makes it the version every server must serve.
//!
//! Then it checks the collection's passage vectors, each model's file against the sums beside it
//! (`dense::vector_sums`): a file that differs from its sums, or was computed against another
//! version of the collection, fails the verification (nothing is recorded). Vectors absent or
//! not complete are said but do not fail it: they are optional (BM25 serves without them), and
//! the BM25 collection itself is verified.

use anyhow::Context;
use clap::{Args, Subcommand};
use convrag::config::Config;
use convrag::dense::vector_sums::{verify_collection_vectors, VectorCheck};
use convrag::index::checksum::{self, ChecksumManifest};
use convrag::store::embedded::Database;

#[derive(Debug, Args)]
pub struct CollectionArgs {
    #[command(subcommand)]
    pub command: CollectionCommand,
}

#[derive(Debug, Subcommand)]
pub enum CollectionCommand {
    /// Check every file of a collection against its manifest.sha256.json, and its passage
    /// vectors against their sums (exit 1 when any differs, naming them).
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
    verify_vectors(config, &args.name, &digest)?;
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

/// Prints what each vector file of the collection is; an error naming the files that do not
/// match (absent or incomplete vectors are only said).
fn verify_vectors(config: &Config, name: &str, digest: &str) -> anyhow::Result<()> {
    let checks = verify_collection_vectors(config, name, digest)?;
    if checks.is_empty() {
        println!(
            "vectors: none (dense and hybrid retrieval need `convrag embed --collection {name}`)"
        );
    }
    for check in &checks {
        match check {
            VectorCheck::Verified { .. } => println!("{check}"),
            VectorCheck::NotComplete { .. } => {
                println!("{check}: run `convrag embed --collection {name}`")
            }
            VectorCheck::Changed { .. } => eprintln!(
                "{check}: delete it and run `convrag embed --collection {name}`"
            ),
            VectorCheck::Stale { .. } => eprintln!(
                "{check}: run `convrag embed --collection {name}` to record it against this collection"
            ),
            VectorCheck::GraphVerified { .. } => println!("{check}"),
            VectorCheck::GraphChanged { .. } => eprintln!(
                "{check}: delete it and run `convrag embed --collection {name}` to build the graph again"
            ),
            VectorCheck::GraphStale { .. } => eprintln!(
                "{check}: run `convrag embed --collection {name}` to build it again"
            ),
        }
    }
    let mismatched: Vec<String> = checks
        .iter()
        .filter(|c| c.is_mismatch())
        .map(|c| c.path().display().to_string())
        .collect();
    anyhow::ensure!(
        mismatched.is_empty(),
        "collection {name}: {} vector files do not match: {}",
        mismatched.len(),
        mismatched.join(", ")
    );
    Ok(())
}
