//! The command line's own layer: each command's arguments (clap), progress bars (indicatif) and
//! printing. Commands call library functions and return `anyhow` errors, which `main` prints.

pub mod bench;
pub mod embed;
pub mod eval;
pub mod index;
pub mod mcp;
pub mod pipeline;
pub mod progress;
pub mod rerank;
pub mod run;
pub mod serve;
pub mod tune;
pub mod user;
pub mod validate;
