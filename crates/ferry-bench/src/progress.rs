//! Progress on stderr: a bar per workload when stderr is a terminal, and one
//! line per finished row either way.

use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// The progress of a run: one bar per workload, stacked on stderr (hidden
/// when stderr is not a terminal).
#[derive(Debug, Clone, Default)]
pub struct Progress {
    multi: MultiProgress,
}

/// The bar of one workload.
#[derive(Debug, Clone)]
pub struct Bar {
    bar: ProgressBar,
    multi: MultiProgress,
}

const TEMPLATE: &str = "{prefix:>10} {elapsed_precise} [{bar:30}] {percent:>3}% eta {eta} {msg}";

impl Progress {
    /// A bar for `workload`, over `total` units of its work (round trips,
    /// messages, batches of calls); none for a workload with no work.
    pub fn bar(&self, workload: &str, total: u64) -> Bar {
        let bar = match total {
            0 => ProgressBar::hidden(),
            _ => self.multi.add(ProgressBar::new(total)),
        };
        if let Ok(style) = ProgressStyle::with_template(TEMPLATE) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(workload.to_string());
        Bar {
            bar,
            multi: self.multi.clone(),
        }
    }

    /// Prints one line above the bars (or alone, without a terminal).
    pub fn note(&self, line: &str) {
        note(&self.multi, line);
    }
}

fn note(multi: &MultiProgress, line: &str) {
    if multi.is_hidden() || multi.println(line).is_err() {
        eprintln!("{line}");
    }
}

impl Bar {
    /// Names the row under way.
    pub fn start(&self, label: &str) {
        self.bar.set_message(label.to_string());
        self.bar.tick();
    }

    /// Starts its workload's next run: the bar stood still while the other
    /// workloads ran, so its rate starts afresh.
    pub fn resume(&self) {
        self.bar.reset_eta();
    }

    /// Counts `n` more units done.
    pub fn advance(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Prints one line above the bars (or alone, without a terminal).
    pub fn note(&self, line: &str) {
        note(&self.multi, line);
    }

    /// Removes the bar, once its workload has run every row.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// A duration as the summary lines show it: whole seconds past a minute.
pub fn human(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1} s")
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_seconds_then_minutes() {
        assert_eq!(human(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(human(Duration::from_secs(125)), "2m05s");
    }
}
