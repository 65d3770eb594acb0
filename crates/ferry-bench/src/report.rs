//! Rows as a table on the terminal and as JSON.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::error::{Context, Error};
use crate::pingpong::Case;
use crate::stats::{Summary, micros};

/// The transports each row's p50 is compared with, at the same size and
/// placement.
pub const BASELINES: &[&str] = &["unix-stream"];

/// One measured row, as written to JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The transport's name.
    pub transport: &'static str,
    /// How it waits.
    pub wait: &'static str,
    /// Where the processes ran.
    pub placement: &'static str,
    /// Payload bytes each way.
    pub size: usize,
    /// Timed round trips.
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
}

impl Row {
    /// The row for `case`, summarized by `s`.
    pub fn new(case: &Case, s: &Summary) -> Self {
        Self {
            transport: case.transport.name(),
            wait: case.transport.wait(),
            placement: case.placement.name(),
            size: case.size,
            count: s.count,
            p50_us: micros(s.p50),
            p99_us: micros(s.p99),
            p999_us: micros(s.p999),
            max_us: micros(s.max),
            mean_us: micros(s.mean),
        }
    }

    fn same_setting(&self, other: &Row) -> bool {
        self.size == other.size && self.placement == other.placement
    }
}

/// Writes `rows` to `path` as a JSON array.
pub fn write_json(path: &Path, rows: &[Row]) -> Result<(), Error> {
    let json = serde_json::to_string_pretty(rows).context("encoding the rows as JSON")?;
    std::fs::write(path, json + "\n").context(format!("writing {}", path.display()))
}

/// `row`'s p50 over that of `baseline` at the same size and placement.
fn ratio(row: &Row, rows: &[Row], baseline: &str) -> Option<f64> {
    let base = rows
        .iter()
        .find(|r| r.transport == baseline && r.same_setting(row))?;
    (base.p50_us > 0.0).then(|| row.p50_us / base.p50_us)
}

const HEADERS: &[&str] = &[
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
];
/// Columns left-aligned (names); the rest are numbers, right-aligned.
const TEXT_COLUMNS: usize = 3;

/// The rows as an aligned text table, with a blank line between settings
/// and a p50 ratio column per baseline.
pub fn table(rows: &[Row]) -> String {
    let mut cells = vec![headers()];
    cells.extend(rows.iter().map(|r| cells_of(r, rows)));
    let widths = widths(&cells);
    let mut out = String::new();
    for (i, line) in cells.iter().enumerate() {
        let starts_setting = i > 1 && !rows[i - 2].same_setting(&rows[i - 1]);
        if starts_setting {
            out.push('\n');
        }
        out.push_str(line_of(line, &widths).trim_end());
        out.push('\n');
    }
    out
}

fn headers() -> Vec<String> {
    let names = HEADERS.iter().map(|h| h.to_string());
    names
        .chain(BASELINES.iter().map(|b| format!("p50 ×{b}")))
        .collect()
}

fn cells_of(row: &Row, rows: &[Row]) -> Vec<String> {
    let mut cells = vec![
        row.transport.to_string(),
        row.wait.to_string(),
        row.placement.to_string(),
        row.size.to_string(),
        row.count.to_string(),
    ];
    let times = [row.p50_us, row.p99_us, row.p999_us, row.max_us, row.mean_us];
    cells.extend(times.into_iter().map(format_us));
    let ratios = BASELINES.iter().map(|b| ratio(row, rows, b));
    cells.extend(ratios.map(|r| r.map_or_else(|| "-".to_string(), format_ratio)));
    cells
}

fn widths(cells: &[Vec<String>]) -> Vec<usize> {
    let columns = cells[0].len();
    let width = |c: usize| {
        cells
            .iter()
            .map(|l| l[c].chars().count())
            .max()
            .unwrap_or(0)
    };
    (0..columns).map(width).collect()
}

fn line_of(cells: &[String], widths: &[usize]) -> String {
    let mut line = String::new();
    for (c, (cell, &w)) in cells.iter().zip(widths).enumerate() {
        let _ = if c < TEXT_COLUMNS {
            write!(line, "{cell:<w$}  ")
        } else {
            write!(line, "{cell:>w$}  ")
        };
    }
    line
}

fn format_us(us: f64) -> String {
    if us < 100.0 {
        format!("{us:.2}")
    } else {
        format!("{us:.1}")
    }
}

fn format_ratio(ratio: f64) -> String {
    if ratio < 0.1 {
        format!("{ratio:.3}")
    } else {
        format!("{ratio:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(transport: &'static str, size: usize, p50_us: f64) -> Row {
        Row {
            transport,
            wait: "block",
            placement: "unpinned",
            size,
            count: 10,
            p50_us,
            p99_us: p50_us,
            p999_us: p50_us,
            max_us: p50_us,
            mean_us: p50_us,
        }
    }

    #[test]
    fn ratios_compare_within_a_size() {
        let rows = [
            row("ferry", 12, 1.0),
            row("unix-stream", 12, 20.0),
            row("ferry", 144, 3.0),
        ];
        assert_eq!(ratio(&rows[0], &rows, "unix-stream"), Some(0.05));
        assert_eq!(ratio(&rows[2], &rows, "unix-stream"), None);
    }

    #[test]
    fn table_has_a_line_per_row_and_gaps_between_sizes() {
        let rows = [
            row("ferry", 12, 1.0),
            row("unix-stream", 12, 20.0),
            row("ferry", 144, 3.0),
        ];
        let table = table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[0].starts_with("transport") && lines[0].ends_with("p50 ×unix-stream"));
        assert!(lines[1].ends_with("0.050"), "{table}");
        assert_eq!(lines[3], "");
        assert!(lines[4].ends_with('-'), "{table}");
    }

    #[test]
    fn json_has_the_documented_keys() {
        let json = serde_json::to_value([row("pipe", 12, 4.0)]).unwrap();
        let keys: Vec<&String> = json[0].as_object().unwrap().keys().collect();
        let expected = [
            "count",
            "max_us",
            "mean_us",
            "p50_us",
            "p999_us",
            "p99_us",
            "placement",
            "size",
            "transport",
            "wait",
        ];
        assert_eq!(keys, expected);
    }
}
