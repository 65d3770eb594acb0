//! The benchmark as data: every row of every workload, listed before
//! anything runs, then run `repeat` times, interleaved (run 1 of every row,
//! then run 2, ...), so a disturbance on the machine lands on one run of
//! many rows rather than on every run of one.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use crate::calls;
use crate::error::Error;
use crate::pingpong;
use crate::placement::{Placement, Seen};
use crate::progress::{Bar, Progress, human};
use crate::runner::{self, RunIndex, Runs};
use crate::server;
use crate::throughput;

/// One row of a workload: what it is, and how to run it once.
pub trait Bench: Debug + Sync {
    /// What one run measures.
    type Sample: Debug + Send;

    /// Names the row in progress lines and errors.
    fn label(&self) -> String;

    /// Where the row's processes (or threads) run.
    fn placement(&self) -> Placement;

    /// Units of progress one run makes.
    fn work(&self) -> u64;

    /// Runs the row once, on a thread already placed for the parent.
    fn run(&self, bar: &Bar) -> Result<Self::Sample, Error>;

    /// A sample in a few words, for the progress line.
    fn brief(sample: &Self::Sample) -> String;

    /// Where both processes ran around the sample's timed span, for rows
    /// of two processes that report it.
    fn seen(_sample: &Self::Sample) -> Option<Seen> {
        None
    }
}

/// Every row of a run, by workload.
#[derive(Debug, Default)]
pub struct Plan {
    /// Round trips between two processes.
    pub pingpong: Vec<pingpong::Case>,
    /// One-way streams between two processes.
    pub throughput: Vec<throughput::Case>,
    /// Calls within this process.
    pub calls: Vec<calls::Case>,
    /// Connects, descriptor passing and many clients.
    pub server: Vec<server::Case>,
    /// Runs of the whole matrix.
    pub repeat: usize,
}

/// Everything a plan's runs produced.
#[derive(Debug)]
pub struct Results {
    /// Per pingpong row, its runs.
    pub pingpong: Vec<Runs<pingpong::Case>>,
    /// Per throughput row, its runs.
    pub throughput: Vec<Runs<throughput::Case>>,
    /// Per calls row, its runs.
    pub calls: Vec<Runs<calls::Case>>,
    /// Per server row, its runs.
    pub server: Vec<Runs<server::Case>>,
    /// The failed runs' errors, naming their rows.
    pub failures: Vec<Error>,
    /// Wall-clock time of the whole plan.
    pub wall: Duration,
}

impl Plan {
    /// Runs every row `repeat` times, interleaved, with a bar per workload.
    pub fn run(self) -> Results {
        let repeat = self.repeat.max(1);
        let started = Instant::now();
        let mut results = Results {
            pingpong: self.pingpong.into_iter().map(Runs::new).collect(),
            throughput: self.throughput.into_iter().map(Runs::new).collect(),
            calls: self.calls.into_iter().map(Runs::new).collect(),
            server: self.server.into_iter().map(Runs::new).collect(),
            failures: Vec::new(),
            wall: Duration::ZERO,
        };
        let progress = Progress::default();
        let pingpong = bar(&progress, "pingpong", &results.pingpong, repeat);
        let throughput = bar(&progress, "throughput", &results.throughput, repeat);
        let calls = bar(&progress, "calls", &results.calls, repeat);
        let server = bar(&progress, "server", &results.server, repeat);
        for run in 0..repeat {
            let at = RunIndex { run, runs: repeat };
            let failures = &mut results.failures;
            runner::run_all(&mut results.pingpong, at, &pingpong, failures);
            runner::run_all(&mut results.throughput, at, &throughput, failures);
            runner::run_all(&mut results.calls, at, &calls, failures);
            runner::run_all(&mut results.server, at, &server, failures);
        }
        for bar in [&pingpong, &throughput, &calls, &server] {
            bar.finish();
        }
        results.wall = started.elapsed();
        progress.note(&results.timings());
        results
    }
}

fn bar<C: Bench>(progress: &Progress, name: &str, rows: &[Runs<C>], repeat: usize) -> Bar {
    let total: u64 = rows.iter().map(|r| r.case.work()).sum();
    progress.bar(name, total * repeat as u64)
}

impl Results {
    /// The wall-clock time each workload took, and the whole run.
    pub fn workload_walls(&self) -> [(&'static str, Duration); 4] {
        fn sum<C: Bench>(rows: &[Runs<C>]) -> Duration {
            rows.iter().map(|r| r.wall).sum()
        }
        [
            ("pingpong", sum(&self.pingpong)),
            ("throughput", sum(&self.throughput)),
            ("calls", sum(&self.calls)),
            ("server", sum(&self.server)),
        ]
    }

    /// Every line round trip measured around the runs (see
    /// [`crate::distance`]), ns, sorted.
    pub fn line_round_trips(&self) -> Vec<u64> {
        fn of<C: Bench>(rows: &[Runs<C>]) -> impl Iterator<Item = u64> + '_ {
            rows.iter()
                .flat_map(|r| &r.apart)
                .flat_map(|a| [a.before, a.after])
                .flatten()
                .map(|d| d.as_nanos() as u64)
        }
        let mut all: Vec<u64> = of(&self.pingpong)
            .chain(of(&self.throughput))
            .chain(of(&self.calls))
            .chain(of(&self.server))
            .collect();
        all.sort_unstable();
        all
    }

    /// One line: how long each workload and the whole run took.
    pub fn timings(&self) -> String {
        let parts: Vec<String> = self
            .workload_walls()
            .iter()
            .filter(|(_, wall)| !wall.is_zero())
            .map(|(name, wall)| format!("{name} {}", human(*wall)))
            .collect();
        format!("done in {} ({})", human(self.wall), parts.join(", "))
    }
}
