//! Progress on stderr: a bar over every round trip of the run when stderr is
//! a terminal, and one line per finished row either way.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// The progress of a run.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

const TEMPLATE: &str = "{elapsed_precise} [{bar:30}] {percent:>3}% eta {eta} {msg}";

impl Progress {
    /// Progress over `round_trips` in all.
    pub fn new(round_trips: usize) -> Self {
        let bar = ProgressBar::new(round_trips as u64);
        if let Ok(style) = ProgressStyle::with_template(TEMPLATE) {
            bar.set_style(style.progress_chars("=> "));
        }
        Self { bar }
    }

    /// Names the row under way.
    pub fn start(&self, label: &str) {
        self.bar.set_message(label.to_string());
        self.bar.tick();
    }

    /// Counts `n` more round trips done.
    pub fn advance(&self, n: usize) {
        self.bar.inc(n as u64);
    }

    /// Prints one line above the bar (or alone, without a terminal).
    pub fn note(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// Removes the bar and says how long the run took.
    pub fn finish(&self) {
        let took = Duration::from_secs(self.bar.elapsed().as_secs());
        self.bar.finish_and_clear();
        eprintln!("done in {took:?}");
    }
}
