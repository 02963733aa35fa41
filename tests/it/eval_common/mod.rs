//! Helpers shared by the eval integration tests.
#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::Parser;

pub fn shared(rel: &str) -> Option<PathBuf> {
    Some(crate::common::shared_data(rel))
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/eval")
        .join(name)
}

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(clap::Subcommand)]
enum Top {
    Eval(convrag::eval::cli::EvalArgs),
}

/// Runs `convrag eval <args>` in-process, as `main` does, writing the output with `-o` to a
/// temporary file (the atomic writer). Err carries what `main` would print on standard error.
///
/// In-process because the test binary path (`CARGO_BIN_EXE_convrag`) lives in the build
/// directory shared by all worktrees, where another branch's build may replace it at any moment.
pub fn convrag_eval<I, S>(args: I) -> Result<String, String>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let mut argv: Vec<OsString> = vec!["convrag".into(), "eval".into()];
    argv.extend(args.into_iter().map(Into::into));
    argv.push("-o".into());
    argv.push(out.clone().into());
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    let Top::Eval(args) = cli.command;
    let config = convrag::Config::default();
    convrag::eval::cli::run(&config, args).map_err(|e| format!("error: {e:#}"))?;
    Ok(std::fs::read_to_string(&out).unwrap())
}
