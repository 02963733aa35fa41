//! The command line's own layer: each command's arguments (clap), progress bars (indicatif) and
//! printing. Commands call library functions and return `anyhow` errors, which `main` prints.

#[cfg(feature = "bench")]
pub mod bench;
#[cfg(feature = "bench")]
pub mod bench_ann;
pub mod collection;
pub mod embed;
pub mod eval;
pub mod ikat;
pub mod index;
pub mod mcp;
pub mod pipeline;
pub mod progress;
pub mod rerank;
pub mod run;
pub mod serve;
pub mod telemetry;
pub mod tune;
pub mod user;
pub mod validate;

/// This machine's host name (`localhost` when unknown): names a server or a batch worker in
/// what other nodes see in the database.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
