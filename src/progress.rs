//! Progress reporting for long jobs (indexing, embedding, batch runs) without tying the library
//! to a terminal: the library reports through [`Progress`]; the command line draws it (indicatif),
//! the server logs it, tests ignore it.

use std::sync::Arc;

/// Receives the progress of one long job. Implementations must be cheap: `inc` is called per item.
pub trait Progress: Send + Sync {
    /// The job's total size, in its own unit (passages, bytes, turns), once known.
    fn set_length(&self, total: u64);
    /// Work already done before this process started (a resumed job).
    fn set_position(&self, done: u64);
    /// `n` more units done.
    fn inc(&self, n: u64);
    /// A short status line (`12,000 passages, 3,100 passages/s`).
    fn set_message(&self, message: String);
    /// The job ended (successfully or not).
    fn finish(&self);
}

/// Reports nowhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn set_length(&self, _total: u64) {}
    fn set_position(&self, _done: u64) {}
    fn inc(&self, _n: u64) {}
    fn set_message(&self, _message: String) {}
    fn finish(&self) {}
}

/// A shared progress sink.
pub type SharedProgress = Arc<dyn Progress>;

/// The sink that reports nowhere, shared.
pub fn no_progress() -> SharedProgress {
    Arc::new(NoProgress)
}

impl std::fmt::Debug for dyn Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}
