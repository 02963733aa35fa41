//! `convrag embed`: precompute the bi-encoder embeddings of a whole collection into the on-disk
//! cache (resumable).

use std::path::PathBuf;

use clap::Args;
use convrag::dense::embed::{embed_collection, EmbedOptions};
use convrag::Config;

use super::progress::Bar;

#[derive(Debug, Args)]
pub struct EmbedArgs {
    /// Collection to embed (a name under the data directory's collections/).
    #[arg(long)]
    pub collection: String,
    /// Model directory (default: the configured default model).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Passages read and encoded per step.
    #[arg(long, default_value_t = 256)]
    pub chunk: usize,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs `convrag embed`; prints how many passages were encoded and how many were already cached.
pub fn run(config: &Config, args: EmbedArgs) -> anyhow::Result<()> {
    let options = EmbedOptions {
        collection: args.collection,
        model: args.model,
        chunk: args.chunk,
    };
    let bar = Bar::items("passages", args.quiet);
    let r = embed_collection(config, &options, &bar)?;
    println!(
        "{}: {} passages, {} encoded now, {} already cached (model {})",
        options.collection,
        r.passages,
        r.encoded,
        r.passages - r.encoded,
        r.model_id
    );
    Ok(())
}
