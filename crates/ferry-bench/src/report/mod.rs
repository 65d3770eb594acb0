//! The report of a run: its rows as tables on the terminal and in
//! Markdown, as JSON, and as charts.
//!
//! [`mod@rows`] (and [`server`], [`instructions`]) build a row from each
//! case's runs; [`columns`] and those two say which columns each
//! workload's [`table`] shows; [`markdown`], [`json`] and [`chart`] write
//! the three files.

mod bars;
mod chart;
mod columns;
mod format;
#[cfg(test)]
mod golden;
mod instructions;
mod json;
mod markdown;
mod moves;
mod rows;
mod server;
mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Context, Error};
use crate::matrix::{Bench, Results};
use crate::runner::Runs;

pub use instructions::InstructionsRow;
pub use json::write_json;
pub use moves::MoveRow;
pub use rows::{CallsRow, PingpongRow, ThroughputRow};
pub use server::ServerRow;
pub use table::Table;

/// The transports each row is compared with, at the same size and
/// placement: the OS's everyday socket, and the floor of a hand-written
/// shared-memory slot with a futex.
pub const BASELINES: &[&str] = &["ferry", "unix-stream", "shm-futex"];

/// How the run was made, for the reader of the files.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunInfo {
    /// The command line.
    pub command: String,
    /// `--quick` was given.
    pub quick: bool,
    /// Runs of the whole matrix.
    pub repeat: usize,
    /// The time cap of each row, seconds.
    pub row_cap_s: f64,
    /// CPUs this process may run on.
    pub online_cpus: usize,
    /// The processor, from /proc/cpuinfo.
    pub cpu_model: String,
    /// The kernel release.
    pub kernel: String,
    /// Wall-clock seconds of the whole run.
    pub wall_s: f64,
    /// Wall-clock seconds per workload.
    pub workload_wall_s: BTreeMap<&'static str, f64>,
    /// The failed runs, each naming its row and why.
    pub failures: Vec<String>,
    /// A cache line's round trip between CPUs 0 and 1 around the runs
    /// (see `crate::distance`), ns: fastest, median and slowest of all
    /// measured; `null` where none was.
    pub line_round_trip_ns: Option<[u64; 3]>,
}

impl RunInfo {
    /// What this machine is, and the given settings.
    pub fn here(quick: bool, repeat: usize, row_cap_s: f64) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, name)| name.trim().to_string())
            .unwrap_or_default();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        Self {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            quick,
            repeat,
            row_cap_s,
            online_cpus: ferry::internals::online_cpus(),
            cpu_model,
            kernel: kernel.trim().to_string(),
            ..Self::default()
        }
    }
}

/// Everything a run measured, as written to `report.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Round trips, one row per transport, size and placement.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pingpong: Vec<PingpongRow>,
    /// One-way streams, one row per transport, size and placement.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub throughput: Vec<ThroughputRow>,
    /// In-process calls, one row per function, way and placement.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallsRow>,
    /// Connects, descriptor passing and many clients, one row per test,
    /// engine and placement.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server: Vec<ServerRow>,
    /// User-space instructions per round trip, one row per transport
    /// (`ferry-bench instructions`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instructions: Vec<InstructionsRow>,
    /// What moving a pipe end cost, one row per forwarded transport: its
    /// setups' forwards, timed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<MoveRow>,
    /// How the run was made.
    pub run: RunInfo,
}

impl Report {
    /// The rows of `results`, with `info` completed from them.
    pub fn new(results: &Results, mut info: RunInfo) -> Self {
        info.wall_s = results.wall.as_secs_f64();
        info.workload_wall_s = results
            .workload_walls()
            .iter()
            .filter(|(_, wall)| !wall.is_zero())
            .map(|(name, wall)| (*name, wall.as_secs_f64()))
            .collect();
        info.failures = results.failures.iter().map(|e| e.to_string()).collect();
        let lines = results.line_round_trips();
        info.line_round_trip_ns =
            (!lines.is_empty()).then(|| [lines[0], lines[lines.len() / 2], lines[lines.len() - 1]]);
        Self {
            pingpong: rows(&results.pingpong, PingpongRow::of),
            throughput: rows(&results.throughput, ThroughputRow::of),
            calls: rows(&results.calls, CallsRow::of),
            server: rows(&results.server, ServerRow::of),
            instructions: Vec::new(),
            moves: moves::rows(&crate::transport::ferry_forwarded::travels()),
            run: info,
        }
    }

    /// The tables of the workloads that ran.
    pub fn tables(&self) -> Vec<Table> {
        let repeat = self.run.repeat;
        let mut tables = columns::pingpong(&self.pingpong, repeat);
        tables.extend(columns::throughput(&self.throughput, repeat));
        tables.extend(columns::calls(&self.calls, repeat));
        tables.extend(server::tables(&self.server, repeat));
        tables.extend(instructions::table(&self.instructions));
        tables.extend(moves::table(&self.moves));
        tables
    }

    /// The tables as aligned text, for the terminal.
    pub fn text(&self) -> String {
        let tables: Vec<String> = self.tables().iter().map(Table::text).collect();
        tables.join("\n")
    }

    /// Writes `report.json`, `report.md` and `report.svg` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, Error> {
        std::fs::create_dir_all(dir).context(format!("creating {}", dir.display()))?;
        let files = [
            ("report.json", self.json()?),
            ("report.md", self.markdown()),
            ("report.svg", chart::svg(self)?),
        ];
        let mut written = Vec::new();
        for (name, text) in files {
            let path = dir.join(name);
            std::fs::write(&path, text).context(format!("writing {}", path.display()))?;
            written.push(path);
        }
        Ok(written)
    }
}

/// The rows of the cases whose runs succeeded.
fn rows<C: Bench, R>(cases: &[Runs<C>], of: fn(&Runs<C>) -> Option<R>) -> Vec<R> {
    cases.iter().filter_map(of).collect()
}
