//! Progress reporting for long jobs (indexing, embedding, batch runs) without tying the library
//! to a terminal: the library reports through [`Progress`]; the command line draws it (indicatif),
//! the server logs it, tests ignore it.

use std::sync::atomic::{AtomicU64, Ordering};
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

/// Progress kept in two counters, read by another thread (a listing showing a background job).
#[derive(Debug, Default)]
pub struct Counter {
    total: AtomicU64,
    done: AtomicU64,
}

impl Counter {
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// The share done, 0 to 1 (0 while the total is unknown).
    pub fn share(&self) -> f64 {
        match self.total() {
            0 => 0.0,
            total => (self.done() as f64 / total as f64).min(1.0),
        }
    }

    /// Units left to do.
    pub fn remaining(&self) -> u64 {
        self.total().saturating_sub(self.done())
    }
}

impl Progress for Counter {
    fn set_length(&self, total: u64) {
        self.total.store(total, Ordering::Relaxed);
    }
    fn set_position(&self, done: u64) {
        self.done.store(done, Ordering::Relaxed);
    }
    fn inc(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_reports_its_share_and_what_remains() {
        let c = Counter::default();
        assert_eq!((c.share(), c.remaining()), (0.0, 0));
        c.set_length(8);
        c.set_position(2);
        c.inc(4);
        assert_eq!((c.done(), c.total(), c.remaining()), (6, 8, 2));
        assert!((c.share() - 0.75).abs() < 1e-12);
        c.inc(5);
        assert_eq!((c.share(), c.remaining()), (1.0, 0));
    }
}
