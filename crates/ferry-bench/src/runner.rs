//! Runs a list of cases in order, each on a thread placed for it, and
//! collects the rows that succeeded and the errors of those that did not.

use std::thread;

use crate::error::Error;
use crate::pingpong::{self, Case};
use crate::progress::Progress;
use crate::report::Row;
use crate::stats::Summary;

/// What a run produced.
#[derive(Debug, Default)]
pub struct Outcome {
    /// One per case that succeeded, in run order.
    pub rows: Vec<Row>,
    /// One per case that failed, naming it.
    pub failures: Vec<Error>,
}

impl Outcome {
    /// `Ok` if every case succeeded, else an error naming the transports
    /// that failed.
    pub fn into_result(self) -> Result<Vec<Row>, (Vec<Row>, Error)> {
        if self.failures.is_empty() {
            return Ok(self.rows);
        }
        let error = Error::new(format!(
            "{} row(s) failed:\n  {}",
            self.failures.len(),
            self.failures
                .iter()
                .map(Error::to_string)
                .collect::<Vec<_>>()
                .join("\n  ")
        ));
        Err((self.rows, error))
    }
}

/// Runs every case, reporting each row as it finishes.
pub fn run(cases: &[Case], progress: &Progress) -> Outcome {
    let mut outcome = Outcome::default();
    for (i, case) in cases.iter().enumerate() {
        let label = format!("[{}/{}] {}", i + 1, cases.len(), case.label());
        progress.start(&label);
        match run_placed(case, progress) {
            Ok(summary) => {
                progress.note(&format!("{label}: {}", brief(&summary)));
                outcome.rows.push(Row::new(case, &summary));
            }
            Err(e) => {
                let e = e.within(case.label());
                progress.note(&format!("{label}: FAILED: {e}"));
                outcome.failures.push(e);
            }
        }
    }
    outcome
}

/// Runs `case` on a thread of its own, pinned where the parent belongs, so
/// each case's placement leaves the others' untouched.
fn run_placed(case: &Case, progress: &Progress) -> Result<Summary, Error> {
    thread::scope(|scope| {
        let worker = scope.spawn(|| {
            case.placement.pin_parent()?;
            pingpong::run(case, progress)
        });
        worker
            .join()
            .unwrap_or_else(|_| Err(Error::new("the measuring thread panicked")))
    })
}

fn brief(s: &Summary) -> String {
    format!(
        "p50 {:.2} µs, p99 {:.2} µs, max {:.2} µs",
        crate::stats::micros(s.p50),
        crate::stats::micros(s.p99),
        crate::stats::micros(s.max)
    )
}
