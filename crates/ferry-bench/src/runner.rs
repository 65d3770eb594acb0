//! Runs rows: each on a thread of its own placed where the parent belongs,
//! one line per finished row, and the errors of those that failed kept
//! while the others go on.

use std::thread;
use std::time::{Duration, Instant};

use crate::distance::{self, Apart};
use crate::error::Error;
use crate::matrix::Bench;
use crate::progress::Bar;

/// A row and everything its runs produced.
#[derive(Debug)]
pub struct Runs<C: Bench> {
    /// The row.
    pub case: C,
    /// One per run that succeeded, in run order.
    pub samples: Vec<C::Sample>,
    /// How far apart CPUs 0 and 1 were around each sample's run, in the
    /// same order (see [`crate::distance`]).
    pub apart: Vec<Apart>,
    /// Runs that failed.
    pub failed: usize,
    /// Wall-clock time of all its runs, child start-up and warm-up included.
    pub wall: Duration,
}

impl<C: Bench> Runs<C> {
    /// A row not yet run.
    pub fn new(case: C) -> Self {
        Self {
            case,
            samples: Vec::new(),
            apart: Vec::new(),
            failed: 0,
            wall: Duration::ZERO,
        }
    }
}

/// Where a run is in the matrix, for its progress lines.
#[derive(Debug, Clone, Copy)]
pub struct RunIndex {
    /// This run, from 0.
    pub run: usize,
    /// Runs in all.
    pub runs: usize,
}

/// Runs one run of every row in `rows`, adding to each its sample or its
/// failure; the failures' errors, naming their rows, go to `failures`.
pub fn run_all<C: Bench>(rows: &mut [Runs<C>], at: RunIndex, bar: &Bar, failures: &mut Vec<Error>) {
    let count = rows.len();
    bar.resume();
    for (i, row) in rows.iter_mut().enumerate() {
        let run = match at.runs {
            1 => String::new(),
            n => format!(" run {}/{n}", at.run + 1),
        };
        let label = format!("[{}/{count}{run}] {}", i + 1, row.case.label());
        bar.start(&label);
        let start = Instant::now();
        let before = distance::line_round_trip();
        let outcome = run_placed(&row.case, bar);
        let apart = Apart {
            before,
            after: distance::line_round_trip(),
        };
        row.wall += start.elapsed();
        match outcome {
            Ok(sample) => {
                bar.note(&format!("{label}: {} ({apart})", C::brief(&sample)));
                row.samples.push(sample);
                row.apart.push(apart);
            }
            Err(e) => {
                let e = e.within(format!("{}{run}", row.case.label()));
                bar.note(&format!("{label}: FAILED: {e}"));
                row.failed += 1;
                failures.push(e);
            }
        }
    }
}

/// Runs `case` on a thread of its own, pinned where the parent belongs, so
/// each case's placement leaves the others' untouched.
fn run_placed<C: Bench>(case: &C, bar: &Bar) -> Result<C::Sample, Error> {
    thread::scope(|scope| {
        let worker = scope.spawn(|| {
            case.placement().pin_parent()?;
            case.run(bar)
        });
        worker
            .join()
            .unwrap_or_else(|_| Err(Error::new("the measuring thread panicked")))
    })
}
