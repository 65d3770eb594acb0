//! Rows as tables on the terminal and in Markdown, and as JSON.
//!
//! A row is one case of a workload, summarized over its runs: with
//! `--repeat N`, each figure is the median of the runs' figures, and the
//! headline figure (p50, GiB/s, ns per call) also gives the runs' min–max.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::calls;
use crate::error::{Context, Error};
use crate::matrix::Results;
use crate::pingpong;
use crate::pool::PoolUse;
use crate::runner::Runs;
use crate::stats::{Spread, micros};
use crate::svg;
use crate::throughput;

/// The transports each row is compared with, at the same size and
/// placement: the OS's everyday socket, and the floor of a hand-written
/// shared-memory slot with a futex.
pub const BASELINES: &[&str] = &["unix-stream", "shm-futex"];

/// A pingpong row, as written to JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PingpongRow {
    /// The transport's name.
    pub transport: &'static str,
    /// How it waits.
    pub wait: &'static str,
    /// Where the processes ran.
    pub placement: &'static str,
    /// Payload bytes each way.
    pub size: usize,
    /// Timed round trips (per run).
    pub count: usize,
    /// Median round trip, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    pub p999_us: f64,
    /// Slowest, µs.
    pub max_us: f64,
    /// Mean, µs.
    pub mean_us: f64,
    /// CPU time of both processes per round trip, µs.
    pub cpu_us: f64,
    /// The smallest run's p50, µs.
    pub p50_min_us: f64,
    /// The largest run's p50, µs.
    pub p50_max_us: f64,
    /// Runs summarized.
    pub runs: usize,
    /// A run stopped at the row's time cap, before its count.
    pub capped: bool,
    /// Wall-clock seconds of all the row's runs, start-up included.
    pub wall_s: f64,
    /// ferry's block pool in this process over the timed spans of all the
    /// row's runs; `null` where no block was used.
    pub pool: Option<PoolUse>,
}

/// A throughput row, as written to JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputRow {
    /// The transport's name.
    pub transport: &'static str,
    /// How it waits.
    pub wait: &'static str,
    /// Where the processes ran.
    pub placement: &'static str,
    /// Payload bytes per message.
    pub size: usize,
    /// Timed messages (per run).
    pub count: usize,
    /// Messages per second.
    pub msgs_per_s: f64,
    /// Payload GiB per second.
    pub gib_per_s: f64,
    /// The slowest run's GiB/s.
    pub gib_per_s_min: f64,
    /// The fastest run's GiB/s.
    pub gib_per_s_max: f64,
    /// CPU time of both processes per message, µs.
    pub cpu_us: f64,
    /// Runs summarized.
    pub runs: usize,
    /// A run stopped at the row's time cap, before its count.
    pub capped: bool,
    /// Wall-clock seconds of all the row's runs, start-up included.
    pub wall_s: f64,
    /// ferry's block pool in this process over the timed spans of all the
    /// row's runs; `null` where no block was used.
    pub pool: Option<PoolUse>,
}

/// A calls row, as written to JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallsRow {
    /// The function called.
    pub call: &'static str,
    /// How the call travels.
    pub via: &'static str,
    /// Where the caller (and callee thread) ran.
    pub placement: &'static str,
    /// Timed calls (per run).
    pub count: usize,
    /// Nanoseconds per call.
    pub ns_per_call: f64,
    /// The fastest run's ns per call.
    pub ns_min: f64,
    /// The slowest run's ns per call.
    pub ns_max: f64,
    /// Runs summarized.
    pub runs: usize,
    /// A run stopped at the row's time cap, before its count.
    pub capped: bool,
    /// Wall-clock seconds of all the row's runs.
    pub wall_s: f64,
}

/// The median of `f` over the samples (callers pass at least one),
/// rounded as [`round`] does.
fn med<S>(samples: &[S], f: impl Fn(&S) -> f64) -> f64 {
    round(Spread::of(samples.iter().map(f)).map_or(f64::NAN, |s| s.median))
}

/// `x` to four significant digits: the JSON says no more than a run can
/// tell.
fn round(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = (3 - x.abs().log10().floor() as i32).clamp(0, 12);
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

fn median_count<S>(samples: &[S], f: impl Fn(&S) -> usize) -> usize {
    let spread = Spread::of(samples.iter().map(|s| f(s) as f64));
    spread.map_or(0, |s| s.median.round() as usize)
}

impl PingpongRow {
    /// The row of a case's runs; `None` if none succeeded.
    pub fn of(runs: &Runs<pingpong::Case>) -> Option<Self> {
        let (case, s) = (&runs.case, &runs.samples[..]);
        let p50 = Spread::of(s.iter().map(|x| micros(x.summary.p50)))?;
        Some(Self {
            transport: case.transport.name(),
            wait: case.transport.wait(),
            placement: case.placement.name(),
            size: case.size,
            count: median_count(s, |x| x.summary.count),
            p50_us: round(p50.median),
            p99_us: med(s, |x| micros(x.summary.p99)),
            p999_us: med(s, |x| micros(x.summary.p999)),
            max_us: med(s, |x| micros(x.summary.max)),
            mean_us: med(s, |x| micros(x.summary.mean)),
            cpu_us: med(s, |x| micros(x.cpu)),
            p50_min_us: round(p50.min),
            p50_max_us: round(p50.max),
            runs: s.len(),
            capped: s.iter().any(|x| x.capped),
            wall_s: round(runs.wall.as_secs_f64()),
            pool: pool_of(s.iter().map(|x| x.pool)),
        })
    }
}

/// The pool's use over some runs, if it was used.
fn pool_of(uses: impl Iterator<Item = PoolUse>) -> Option<PoolUse> {
    let sum = PoolUse::sum(uses);
    sum.is_used().then_some(sum)
}

impl ThroughputRow {
    /// The row of a case's runs; `None` if none succeeded.
    pub fn of(runs: &Runs<throughput::Case>) -> Option<Self> {
        let (case, s) = (&runs.case, &runs.samples[..]);
        let gib = Spread::of(s.iter().map(|x| x.gib_per_s(case.size)))?;
        Some(Self {
            transport: case.transport.name(),
            wait: case.transport.wait(),
            placement: case.placement.name(),
            size: case.size,
            count: median_count(s, |x| x.messages),
            msgs_per_s: med(s, throughput::Sample::rate),
            gib_per_s: round(gib.median),
            gib_per_s_min: round(gib.min),
            gib_per_s_max: round(gib.max),
            cpu_us: med(s, |x| micros(x.cpu_per_message())),
            runs: s.len(),
            capped: s.iter().any(|x| x.capped),
            wall_s: round(runs.wall.as_secs_f64()),
            pool: pool_of(s.iter().map(|x| x.pool)),
        })
    }
}

impl CallsRow {
    /// The row of a case's runs; `None` if none succeeded.
    pub fn of(runs: &Runs<calls::Case>) -> Option<Self> {
        let (case, s) = (&runs.case, &runs.samples[..]);
        let ns = Spread::of(s.iter().map(|x| x.ns_per_call))?;
        Some(Self {
            call: case.call.name(),
            via: case.via.name(),
            placement: case.placement.name(),
            count: median_count(s, |x| x.calls),
            ns_per_call: round(ns.median),
            ns_min: round(ns.min),
            ns_max: round(ns.max),
            runs: s.len(),
            capped: s.iter().any(|x| x.capped),
            wall_s: round(runs.wall.as_secs_f64()),
        })
    }
}

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
            online_cpus: ferry::sys::online_cpus(),
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
        Self {
            pingpong: results
                .pingpong
                .iter()
                .filter_map(PingpongRow::of)
                .collect(),
            throughput: results
                .throughput
                .iter()
                .filter_map(ThroughputRow::of)
                .collect(),
            calls: results.calls.iter().filter_map(CallsRow::of).collect(),
            run: info,
        }
    }

    /// The tables of the workloads that ran.
    pub fn tables(&self) -> Vec<Table> {
        let repeat = self.run.repeat;
        let mut tables = Vec::new();
        if !self.pingpong.is_empty() {
            tables.push(pingpong_table(&self.pingpong, repeat));
        }
        if let Some(pool) = pool_table("pingpong", &self.pingpong, |r| r.pool, |r| r.key()) {
            tables.push(pool);
        }
        if !self.throughput.is_empty() {
            tables.push(throughput_table(&self.throughput, repeat));
        }
        if let Some(pool) = pool_table("throughput", &self.throughput, |r| r.pool, |r| r.key()) {
            tables.push(pool);
        }
        if !self.calls.is_empty() {
            tables.push(calls_table(&self.calls, repeat));
        }
        tables
    }

    /// The tables as aligned text, for the terminal.
    pub fn text(&self) -> String {
        let tables: Vec<String> = self.tables().iter().map(Table::text).collect();
        tables.join("\n")
    }

    /// The whole report as Markdown.
    pub fn markdown(&self) -> String {
        let run = &self.run;
        let mut out = String::from("# ferry-bench report\n\n");
        let _ = writeln!(out, "- command: `{}`", run.command);
        let _ = writeln!(
            out,
            "- machine: {} CPUs online, {}, Linux {}",
            run.online_cpus, run.cpu_model, run.kernel
        );
        let runs = match run.repeat {
            1 => "1".to_string(),
            n => format!("{n}, interleaved; each figure is the median of the runs'"),
        };
        let _ = writeln!(
            out,
            "- runs: {runs}; time cap {} s per row{}",
            run.row_cap_s,
            if run.quick { "; quick counts" } else { "" }
        );
        let walls: Vec<String> = run
            .workload_wall_s
            .iter()
            .map(|(name, s)| format!("{name} {s:.1} s"))
            .collect();
        let _ = writeln!(
            out,
            "- took: {:.1} s ({})\n\n![charts](report.svg)\n",
            run.wall_s,
            walls.join(", ")
        );
        for table in self.tables() {
            out.push_str(&table.markdown());
            out.push('\n');
        }
        if !run.failures.is_empty() {
            out.push_str("## Failures\n\n");
            for failure in &run.failures {
                let _ = writeln!(out, "- {}", failure.replace('\n', " "));
            }
        }
        out
    }

    /// Writes `report.json`, `report.md` and `report.svg` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, Error> {
        std::fs::create_dir_all(dir).context(format!("creating {}", dir.display()))?;
        let json = serde_json::to_string_pretty(self).context("encoding the report as JSON")?;
        let files = [
            ("report.json", json + "\n"),
            ("report.md", self.markdown()),
            ("report.svg", svg::report(self)),
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

/// Writes `rows` to `path` as a JSON array.
pub fn write_json<T: Serialize>(path: &Path, rows: &[T]) -> Result<(), Error> {
    let json = serde_json::to_string_pretty(rows).context("encoding the rows as JSON")?;
    std::fs::write(path, json + "\n").context(format!("writing {}", path.display()))
}

/// A table: a title, headers, rows of cells, and notes under it.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// What the table shows.
    pub title: String,
    /// Column headers.
    pub headers: Vec<String>,
    /// The first columns are names, left-aligned; the rest are numbers.
    pub text_columns: usize,
    /// The cells, one vector per row.
    pub rows: Vec<Vec<String>>,
    /// Rows before which the text form leaves a blank line.
    pub breaks: Vec<usize>,
    /// Lines under the table.
    pub notes: Vec<String>,
}

impl Table {
    /// The table as aligned text.
    pub fn text(&self) -> String {
        let mut cells = vec![self.headers.clone()];
        cells.extend(self.rows.iter().cloned());
        let widths = widths(&cells);
        let mut out = format!("{}\n", self.title);
        for (i, line) in cells.iter().enumerate() {
            if i > 0 && self.breaks.contains(&(i - 1)) {
                out.push('\n');
            }
            out.push_str(self.line_of(line, &widths).trim_end());
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "{note}");
        }
        out
    }

    /// The table in Markdown, under a heading.
    pub fn markdown(&self) -> String {
        let mut out = format!("## {}\n\n", self.title);
        let _ = writeln!(out, "| {} |", self.headers.join(" | "));
        let rule: Vec<&str> = (0..self.headers.len())
            .map(|c| if c < self.text_columns { "---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "|{}|", rule.join("|"));
        for row in &self.rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        if !self.notes.is_empty() {
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "{note}  ");
        }
        out
    }

    fn line_of(&self, cells: &[String], widths: &[usize]) -> String {
        let mut line = String::new();
        for (c, (cell, &w)) in cells.iter().zip(widths).enumerate() {
            let _ = if c < self.text_columns {
                write!(line, "{cell:<w$}  ")
            } else {
                write!(line, "{cell:>w$}  ")
            };
        }
        line
    }
}

fn widths(cells: &[Vec<String>]) -> Vec<usize> {
    let columns = cells[0].len();
    let width = |c: usize| {
        cells
            .iter()
            .map(|l| l.get(c).map_or(0, |s| s.chars().count()))
            .max()
            .unwrap_or(0)
    };
    (0..columns).map(width).collect()
}

/// Indices of the rows that start a new group (by `key`), but the first.
fn breaks<R, K: PartialEq>(rows: &[R], key: impl Fn(&R) -> K) -> Vec<usize> {
    (1..rows.len())
        .filter(|&i| key(&rows[i]) != key(&rows[i - 1]))
        .collect()
}

/// `value(row)` over `value` of the row of `baseline` that `same` accepts.
fn ratio<R>(
    row: &R,
    rows: &[R],
    is_baseline: impl Fn(&R) -> bool,
    value: impl Fn(&R) -> f64,
) -> Option<f64> {
    let base = rows.iter().find(|r| is_baseline(r))?;
    let (v, b) = (value(row), value(base));
    (b > 0.0 && v.is_finite()).then(|| v / b)
}

const CAPPED_NOTE: &str = "* stopped by the row's time cap: fewer than the asked-for count, over the cap's time (one CPU each for two spinners sharing one is the usual cause)";

fn count_cell(count: usize, capped: bool) -> String {
    match capped {
        true => format!("{count}*"),
        false => count.to_string(),
    }
}

fn spread_cell(min: f64, max: f64, format: fn(f64) -> String) -> String {
    format!("{}–{}", format(min), format(max))
}

/// The headers: `names`, then `spread` (the runs' min–max of the headline
/// figure) with `repeat > 1`, then `ratios`.
fn headers(
    names: &[&str],
    repeat: usize,
    spread: &str,
    ratios: impl IntoIterator<Item = String>,
) -> Vec<String> {
    let mut headers: Vec<String> = names.iter().map(|&n| n.to_string()).collect();
    if repeat > 1 {
        headers.push(spread.to_string());
    }
    headers.extend(ratios);
    headers
}

/// The cell of `value(row)` over `value` of the row `is_baseline` accepts;
/// `-` without one.
fn ratio_cell<R>(
    row: &R,
    rows: &[R],
    is_baseline: impl Fn(&R) -> bool,
    value: impl Fn(&R) -> f64,
) -> String {
    let ratio = ratio(row, rows, is_baseline, value);
    ratio.map_or_else(|| "-".to_string(), format_ratio)
}

/// A ratio cell per baseline: `value(row)` over `value` of the baseline's
/// row whose size and placement are the row's. `key` is a row's transport,
/// size and placement.
fn baseline_cells<R>(
    row: &R,
    rows: &[R],
    key: impl Fn(&R) -> (&'static str, usize, &'static str),
    value: impl Fn(&R) -> f64,
) -> impl Iterator<Item = String> {
    let (_, size, placement) = key(row);
    BASELINES.iter().map(move |baseline| {
        let same = |r: &R| key(r) == (*baseline, size, placement);
        ratio_cell(row, rows, same, &value)
    })
}

impl Table {
    /// A table of `rows`, `cells` each, a break between groups of `group`,
    /// and `notes` under it, with the capped note if `capped` is true of a row.
    fn of<R, K: PartialEq>(
        title: &str,
        headers: Vec<String>,
        rows: &[R],
        cells: impl Fn(&R) -> Vec<String>,
        group: impl Fn(&R) -> K,
        capped: impl Fn(&R) -> bool,
        mut notes: Vec<String>,
    ) -> Self {
        if rows.iter().any(capped) {
            notes.push(CAPPED_NOTE.to_string());
        }
        Self {
            title: title.to_string(),
            headers,
            text_columns: 3,
            rows: rows.iter().map(cells).collect(),
            breaks: breaks(rows, group),
            notes,
        }
    }
}

fn pingpong_table(rows: &[PingpongRow], repeat: usize) -> Table {
    let names = [
        "transport",
        "wait",
        "placement",
        "size",
        "count",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "mean µs",
        "cpu µs",
    ];
    let ratios = BASELINES.iter().map(|b| format!("p50 ×{b}"));
    let cells = |row: &PingpongRow| {
        let mut cells = vec![
            row.transport.to_string(),
            row.wait.to_string(),
            row.placement.to_string(),
            row.size.to_string(),
            count_cell(row.count, row.capped),
        ];
        let times = [
            row.p50_us,
            row.p99_us,
            row.p999_us,
            row.max_us,
            row.mean_us,
            row.cpu_us,
        ];
        cells.extend(times.map(format_us));
        if repeat > 1 {
            cells.push(spread_cell(row.p50_min_us, row.p50_max_us, format_us));
        }
        let key = |r: &PingpongRow| (r.transport, r.size, r.placement);
        cells.extend(baseline_cells(row, rows, key, |r| r.p50_us));
        cells
    };
    let notes = vec![
        "Round trips between two processes, µs; cpu is both processes' CPU time per round trip; ×baseline is p50 over the baseline's p50 at the same size and placement (below 1 is faster; - where the baseline did not run).".to_string(),
    ];
    Table::of(
        "pingpong",
        headers(&names, repeat, "p50 min–max", ratios),
        rows,
        cells,
        |r| (r.placement, r.size),
        |r| r.capped,
        notes,
    )
}

fn throughput_table(rows: &[ThroughputRow], repeat: usize) -> Table {
    let names = [
        "transport",
        "wait",
        "placement",
        "size",
        "count",
        "msg/s",
        "GiB/s",
        "cpu µs/msg",
    ];
    let ratios = BASELINES.iter().map(|b| format!("GiB/s ×{b}"));
    let cells = |row: &ThroughputRow| {
        let mut cells = vec![
            row.transport.to_string(),
            row.wait.to_string(),
            row.placement.to_string(),
            row.size.to_string(),
            count_cell(row.count, row.capped),
            format_rate(row.msgs_per_s),
            format_gib(row.gib_per_s),
            format_us(row.cpu_us),
        ];
        if repeat > 1 {
            cells.push(spread_cell(
                row.gib_per_s_min,
                row.gib_per_s_max,
                format_gib,
            ));
        }
        let key = |r: &ThroughputRow| (r.transport, r.size, r.placement);
        cells.extend(baseline_cells(row, rows, key, |r| r.gib_per_s));
        cells
    };
    let notes = vec![
        "A one-way stream, the receiver checksumming every byte; cpu is both processes' CPU time per message; ×baseline is GiB/s over the baseline's at the same size and placement (above 1 is faster).".to_string(),
    ];
    Table::of(
        "throughput",
        headers(&names, repeat, "GiB/s min–max", ratios),
        rows,
        cells,
        |r| (r.placement, r.size),
        |r| r.capped,
        notes,
    )
}

impl PingpongRow {
    /// The row's transport, wait, placement and size.
    fn key(&self) -> RowKey {
        (self.transport, self.wait, self.placement, self.size)
    }
}

impl ThroughputRow {
    /// The row's transport, wait, placement and size.
    fn key(&self) -> RowKey {
        (self.transport, self.wait, self.placement, self.size)
    }
}

/// A row's transport, wait, placement and size.
type RowKey = (&'static str, &'static str, &'static str, usize);

/// Where the blocks of `workload`'s rows that used ferry's pool came from;
/// `None` if no row did.
fn pool_table<R>(
    workload: &str,
    rows: &[R],
    pool: impl Fn(&R) -> Option<PoolUse>,
    key: impl Fn(&R) -> RowKey,
) -> Option<Table> {
    let used: Vec<(RowKey, PoolUse)> = rows
        .iter()
        .filter_map(|r| Some((key(r), pool(r)?)))
        .collect();
    if used.is_empty() {
        return None;
    }
    let headers = [
        "transport",
        "wait",
        "placement",
        "size",
        "blocks",
        "reused",
        "from reserve",
        "mapped on send path",
        "made in background",
        "ring fallbacks",
        "no mapping on path",
    ];
    let cells = |((transport, wait, placement, size), pool): &(RowKey, PoolUse)| {
        let share = pool
            .off_path_share()
            .map_or_else(|| "-".to_string(), |s| format!("{:.1}%", s * 100.0));
        vec![
            transport.to_string(),
            wait.to_string(),
            placement.to_string(),
            size.to_string(),
            pool.blocks.to_string(),
            pool.reused.to_string(),
            pool.from_reserve.to_string(),
            pool.mapped_on_send_path.to_string(),
            pool.made_in_background.to_string(),
            pool.ring_fallbacks.to_string(),
            share,
        ]
    };
    let notes = vec![format!(
        "ferry's block pool in this process (the sender of {}) over the timed spans of all runs, from ferry::pool_stats(): messages sent out of line, and whether each block was reused, taken from the background reserve, or mapped on the sender's own path.",
        match workload {
            "pingpong" => "every request",
            _ => "every message",
        }
    )];
    Some(Table::of(
        &format!("ferry pool ({workload})"),
        headers.iter().map(|h| h.to_string()).collect(),
        &used,
        cells,
        |((_, _, placement, size), _)| (*placement, *size),
        |_| false,
        notes,
    ))
}

fn calls_table(rows: &[CallsRow], repeat: usize) -> Table {
    let names = ["call", "via", "placement", "count", "ns/call"];
    let cells = |row: &CallsRow| {
        let mut cells = vec![
            row.call.to_string(),
            row.via.to_string(),
            row.placement.to_string(),
            count_cell(row.count, row.capped),
            format_ns(row.ns_per_call),
        ];
        if repeat > 1 {
            cells.push(spread_cell(row.ns_min, row.ns_max, format_ns));
        }
        let same = |r: &CallsRow| {
            r.via == calls::Via::Direct.name() && r.call == row.call && r.placement == row.placement
        };
        cells.push(ratio_cell(row, rows, same, |r| r.ns_per_call));
        cells
    };
    let mut notes = vec![
        "In-process calls, ns per call (the median batch); ×direct is over the direct call of the same function.".to_string(),
    ];
    notes.extend(
        calls::Via::ALL
            .iter()
            .map(|v| format!("{}: {}", v.name(), v.meaning())),
    );
    Table::of(
        "calls",
        headers(&names, repeat, "ns min–max", ["×direct".to_string()]),
        rows,
        cells,
        |r| (r.placement, r.call),
        |r| r.capped,
        notes,
    )
}

/// Microseconds: two decimals below 100, one above.
pub fn format_us(us: f64) -> String {
    if us < 100.0 {
        format!("{us:.2}")
    } else {
        format!("{us:.1}")
    }
}

fn format_ratio(ratio: f64) -> String {
    if ratio < 0.1 {
        format!("{ratio:.3}")
    } else if ratio < 10.0 {
        format!("{ratio:.2}")
    } else if ratio < 100.0 {
        format!("{ratio:.1}")
    } else {
        format!("{ratio:.0}")
    }
}

/// A rate with a k or M suffix.
fn format_rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.2} M", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1} k", per_s / 1e3)
    } else {
        format!("{per_s:.0}")
    }
}

/// GiB/s to three significant digits or so.
pub fn format_gib(gib: f64) -> String {
    if gib < 0.01 {
        format!("{gib:.4}")
    } else if gib < 1.0 {
        format!("{gib:.3}")
    } else {
        format!("{gib:.2}")
    }
}

/// Nanoseconds: three significant digits or so.
pub fn format_ns(ns: f64) -> String {
    if ns < 10.0 {
        format!("{ns:.2}")
    } else if ns < 1000.0 {
        format!("{ns:.1}")
    } else {
        format!("{ns:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(transport: &'static str, size: usize, p50_us: f64) -> PingpongRow {
        PingpongRow {
            transport,
            wait: "sleep",
            placement: "unpinned",
            size,
            count: 10,
            p50_us,
            p99_us: p50_us,
            p999_us: p50_us,
            max_us: p50_us,
            mean_us: p50_us,
            cpu_us: p50_us,
            p50_min_us: p50_us,
            p50_max_us: p50_us,
            runs: 1,
            capped: false,
            wall_s: 1.0,
            pool: None,
        }
    }

    #[test]
    fn ratios_compare_within_a_size_and_show_a_dash_without_a_baseline() {
        let rows = [
            row("ferry", 12, 1.0),
            row("unix-stream", 12, 20.0),
            row("shm-futex", 12, 2.0),
            row("ferry", 144, 3.0),
        ];
        let table = pingpong_table(&rows, 1);
        let last = |r: usize, back: usize| {
            let cells = &table.rows[r];
            cells[cells.len() - back].clone()
        };
        assert_eq!((last(0, 2), last(0, 1)), ("0.050".into(), "0.50".into()));
        assert_eq!((last(3, 2), last(3, 1)), ("-".into(), "-".into()));
    }

    #[test]
    fn text_has_a_title_a_line_per_row_and_gaps_between_sizes() {
        let rows = [
            row("ferry", 12, 1.0),
            row("unix-stream", 12, 20.0),
            row("ferry", 144, 3.0),
        ];
        let text = pingpong_table(&rows, 1).text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "pingpong");
        assert!(lines[1].starts_with("transport") && lines[1].ends_with("p50 ×shm-futex"));
        assert!(lines[2].contains("0.050"), "{text}");
        assert_eq!(lines[4], "", "{text}");
        assert!(
            lines[5].ends_with("-  -") || lines[5].ends_with('-'),
            "{text}"
        );
    }

    #[test]
    fn markdown_tables_align_numbers_right() {
        let md = pingpong_table(&[row("ferry", 12, 1.0)], 3).markdown();
        assert!(
            md.starts_with("## pingpong\n\n| transport | wait |"),
            "{md}"
        );
        assert!(md.contains("|---|---|---|---:|"), "{md}");
        assert!(md.contains("p50 min–max"), "{md}");
    }

    #[test]
    fn pingpong_json_keeps_the_first_keys_and_adds_cpu() {
        let json = serde_json::to_value([row("pipe", 12, 4.0)]).unwrap();
        let keys: Vec<&String> = json[0].as_object().unwrap().keys().collect();
        for key in [
            "transport",
            "wait",
            "placement",
            "size",
            "count",
            "p50_us",
            "p99_us",
            "p999_us",
            "max_us",
            "mean_us",
            "cpu_us",
            "capped",
            "runs",
        ] {
            assert!(keys.iter().any(|k| *k == key), "{key} missing: {keys:?}");
        }
    }

    #[test]
    fn capped_counts_are_marked_and_explained() {
        let mut capped = row("shm-spin", 12, 9.0);
        capped.capped = true;
        let table = pingpong_table(&[capped], 1);
        assert_eq!(table.rows[0][4], "10*");
        assert!(table.notes.iter().any(|n| n.starts_with('*')));
    }

    #[test]
    fn numbers_read_easily() {
        assert_eq!(format_rate(2_500_000.0), "2.50 M");
        assert_eq!(format_rate(45_600.0), "45.6 k");
        assert_eq!(format_gib(0.0312), "0.031");
        assert_eq!(format_gib(4.567), "4.57");
        assert_eq!(format_ns(1.234), "1.23");
        assert_eq!(format_ns(12_345.6), "12346");
    }

    #[test]
    fn json_numbers_keep_four_digits() {
        assert_eq!(round(21.691999999999997), 21.69);
        assert_eq!(round(4788.281999999999), 4788.0);
        assert_eq!(round(0.012345678), 0.01235);
        assert_eq!(round(6_847_298.4), 6_847_298.0);
        assert_eq!(round(0.0), 0.0);
    }
}
