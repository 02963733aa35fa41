//! The terminal's view of [`Progress`]: an indicatif bar per long job, hidden with `--quiet`.

use std::sync::Arc;

use convrag::progress::{Progress, SharedProgress};
use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar on standard error.
pub struct Bar(ProgressBar);

impl Bar {
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
        Self(bar)
    }

    /// Redrawn regularly, so a job that reports nothing for a while still shows its elapsed time.
    pub fn ticking(self) -> Self {
        self.0
            .enable_steady_tick(std::time::Duration::from_millis(250));
        self
    }

    pub fn shared(self) -> SharedProgress {
        Arc::new(self)
    }
}

impl Progress for Bar {
    fn set_length(&self, total: u64) {
        self.0.set_length(total);
    }
    fn set_position(&self, done: u64) {
        self.0.set_position(done);
    }
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
    fn set_message(&self, message: String) {
        self.0.set_message(message);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
