//! The terminal's view of [`Progress`]: an indicatif bar per long job, hidden with `--quiet`.

use std::sync::Arc;

use convrag::progress::{Progress, SharedProgress};
use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar on standard error.
pub struct Bar {
    bar: ProgressBar,
    /// The job resumes work done before: its ETA restarts with each position reported.
    resuming: bool,
}

impl Bar {
    /// `bar` as a [`Progress`].
    pub fn new(bar: ProgressBar) -> Self {
        Bar {
            bar,
            resuming: false,
        }
    }

    /// For a job that resumes: the estimate comes from this invocation's pace, not from what
    /// was done before.
    pub fn resuming(self) -> Self {
        Bar {
            resuming: true,
            ..self
        }
    }

    /// A bar counting `unit`s (passages, turns), with rate and ETA; hidden when `quiet`.
    pub fn items(unit: &str, quiet: bool) -> Self {
        let template =
            format!("{{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}}) {{msg}}");
        Self::styled(&template, quiet)
    }

    /// A bar counting input bytes, with a status message (passages indexed so far).
    pub fn bytes(quiet: bool) -> Self {
        Self::styled(
            "{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta}) {msg}",
            quiet,
        )
    }

    fn styled(template: &str, quiet: bool) -> Self {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(0)
        };
        bar.set_style(
            ProgressStyle::with_template(template)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        Self::new(bar)
    }

    /// Redrawn regularly, so a job that reports nothing for a while still shows its elapsed time.
    #[cfg(feature = "bench")]
    pub fn ticking(self) -> Self {
        self.bar
            .enable_steady_tick(std::time::Duration::from_millis(250));
        self
    }

    pub fn shared(self) -> SharedProgress {
        Arc::new(self)
    }
}

impl Progress for Bar {
    fn set_length(&self, total: u64) {
        self.bar.set_length(total);
    }
    fn set_position(&self, done: u64) {
        self.bar.set_position(done);
        if self.resuming {
            self.bar.reset_eta();
        }
    }
    fn inc(&self, n: u64) {
        self.bar.inc(n);
    }
    fn set_message(&self, message: String) {
        self.bar.set_message(message);
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
