//! The tables of each workload: which columns they show, and what each
//! column's cell says for a row.

use crate::calls;
use crate::pool::PoolUse;
use crate::stats::Spread;

use super::BASELINES;
use super::format::{format_gib, format_ns, format_rate, format_ratio, format_us};
use super::rows::{CallsRow, PingpongRow, RowKey, RunPoint, ThroughputRow};
use super::table::{Column, Table};

const CAPPED_NOTE: &str = "* stopped by the row's time cap: fewer than the asked-for count, over the cap's time (one CPU each for two spinners sharing one is the usual cause)";

const PINGPONG_NOTE: &str = "Round trips between two processes, µs; p99, p99.9 and max are of all runs' round trips pooled; cpu is both processes' CPU time per round trip; ×baseline is p50 over the baseline's p50 at the same size and placement (below 1 is faster; - where the baseline did not run).";

const THROUGHPUT_NOTE: &str = "A one-way stream, the receiver checksumming every byte; cpu is both processes' CPU time per message; ×baseline is GiB/s over the baseline's at the same size and placement (above 1 is faster).";

const ONE_CPU_NOTE: &str = "one CPU: of an unpinned row's runs, how many had both processes on one CPU for most of the timed span (each notes its CPU every few round trips or messages; `one_cpu_share` in report.json has each run's share). The scheduler chooses, and mostly keeps its choice for a whole run. on one / on two: the median figure of the runs on one CPU and of those on two, with their number. Where one CPU is faster or slower than two, the row's median says more about where the scheduler put the pair than about the transport: compare the rows state by state (`per_run` in report.json has each run's figure and CPUs).";

const CALLS_NOTE: &str = "In-process calls, ns per call (the median batch); ×direct is over the direct call of the same function.";

/// A column's header and the figure of a row it shows.
type Figure<R, T> = (&'static str, fn(&R) -> T);

/// The pingpong table.
pub fn pingpong(rows: &[PingpongRow], repeat: usize) -> Table {
    let mut columns = key_columns(PingpongRow::key);
    columns.push(count_column(|r: &PingpongRow| (r.count, r.capped)));
    let times: [Figure<PingpongRow, f64>; 6] = [
        ("p50 µs", |r| r.p50_us),
        ("p99 µs", |r| r.p99_us),
        ("p99.9 µs", |r| r.p999_us),
        ("max µs", |r| r.max_us),
        ("mean µs", |r| r.mean_us),
        ("cpu µs", |r| r.cpu_us),
    ];
    columns.extend(times.map(|(header, us)| Column::number(header, move |r| format_us(us(r)))));
    if repeat > 1 {
        let range = |r: &PingpongRow| spread_cell(r.p50_min_us, r.p50_max_us, format_us);
        columns.push(Column::number("p50 min–max", range));
    }
    let unpinned = rows.iter().any(|r| r.placement == UNPINNED);
    if unpinned {
        let cell = |r: &PingpongRow| one_cpu_cell(r.placement, &r.per_run);
        columns.push(Column::number("one CPU", cell));
        let on =
            |one: bool| move |r: &PingpongRow| state_cell(r.placement, &r.per_run, one, format_us);
        columns.push(Column::number("p50 on one", on(true)));
        columns.push(Column::number("p50 on two", on(false)));
    }
    columns.extend(baseline_columns(rows, "p50", PingpongRow::key, |r| {
        r.p50_us
    }));
    Table::new("pingpong", &columns, rows)
        .grouped(rows, |r| (r.placement, r.size))
        .noted([PINGPONG_NOTE.to_string()])
        .noted(unpinned.then(|| ONE_CPU_NOTE.to_string()))
        .noted(capped_note(rows.iter().any(|r| r.capped)))
}

/// The throughput table.
pub fn throughput(rows: &[ThroughputRow], repeat: usize) -> Table {
    let mut columns = key_columns(ThroughputRow::key);
    columns.extend([
        count_column(|r: &ThroughputRow| (r.count, r.capped)),
        Column::number("msg/s", |r: &ThroughputRow| format_rate(r.msgs_per_s)),
        Column::number("GiB/s", |r: &ThroughputRow| format_gib(r.gib_per_s)),
        Column::number("cpu µs/msg", |r: &ThroughputRow| format_us(r.cpu_us)),
    ]);
    if repeat > 1 {
        let range = |r: &ThroughputRow| spread_cell(r.gib_per_s_min, r.gib_per_s_max, format_gib);
        columns.push(Column::number("GiB/s min–max", range));
    }
    let unpinned = rows.iter().any(|r| r.placement == UNPINNED);
    if unpinned {
        let cell = |r: &ThroughputRow| one_cpu_cell(r.placement, &r.per_run);
        columns.push(Column::number("one CPU", cell));
        let on = |one: bool| {
            move |r: &ThroughputRow| {
                let gib = |rate: f64| format_gib(rate * r.size as f64 / GIB);
                state_cell(r.placement, &r.per_run, one, gib)
            }
        };
        columns.push(Column::number("GiB/s on one", on(true)));
        columns.push(Column::number("GiB/s on two", on(false)));
    }
    columns.extend(baseline_columns(rows, "GiB/s", ThroughputRow::key, |r| {
        r.gib_per_s
    }));
    Table::new("throughput", &columns, rows)
        .grouped(rows, |r| (r.placement, r.size))
        .noted([THROUGHPUT_NOTE.to_string()])
        .noted(unpinned.then(|| ONE_CPU_NOTE.to_string()))
        .noted(capped_note(rows.iter().any(|r| r.capped)))
}

/// The calls table.
pub fn calls(rows: &[CallsRow], repeat: usize) -> Table {
    let mut columns = vec![
        Column::name("call", |r: &CallsRow| r.call.to_string()),
        Column::name("via", |r: &CallsRow| r.via.to_string()),
        Column::name("placement", |r: &CallsRow| r.placement.to_string()),
        count_column(|r: &CallsRow| (r.count, r.capped)),
        Column::number("ns/call", |r: &CallsRow| format_ns(r.ns_per_call)),
    ];
    if repeat > 1 {
        let range = |r: &CallsRow| spread_cell(r.ns_min, r.ns_max, format_ns);
        columns.push(Column::number("ns min–max", range));
    }
    columns.push(Column::number("×direct", |row: &CallsRow| {
        let direct = |r: &&CallsRow| {
            r.via == calls::Via::Direct.name() && r.call == row.call && r.placement == row.placement
        };
        ratio_cell(row, rows.iter().find(direct), |r| r.ns_per_call)
    }));
    let ways = calls::Via::ALL.map(|v| format!("{}: {}", v.name(), v.meaning()));
    Table::new("calls", &columns, rows)
        .grouped(rows, |r| (r.placement, r.call))
        .noted([CALLS_NOTE.to_string()])
        .noted(ways)
        .noted(capped_note(rows.iter().any(|r| r.capped)))
}

/// Where the blocks of `workload`'s rows that used ferry's pool came from;
/// `None` if no row did.
pub fn pool<R>(
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
    let mut columns = key_columns(|(key, _): &(RowKey, PoolUse)| *key);
    let counts: [Figure<PoolUse, u64>; 6] = [
        ("blocks", |p| p.blocks),
        ("reused", |p| p.reused),
        ("from reserve", |p| p.from_reserve),
        ("mapped on send path", |p| p.mapped_on_send_path),
        ("made in background", |p| p.made_in_background),
        ("ring fallbacks", |p| p.ring_fallbacks),
    ];
    columns.extend(counts.map(|(header, count)| {
        Column::number(header, move |(_, p): &(RowKey, PoolUse)| {
            count(p).to_string()
        })
    }));
    columns.push(Column::number(
        "no mapping on path",
        |(_, p): &(RowKey, PoolUse)| {
            let share = p.off_path_share();
            share.map_or_else(|| "-".to_string(), |s| format!("{:.1}%", s * 100.0))
        },
    ));
    Some(
        Table::new(&format!("ferry pool ({workload})"), &columns, &used)
            .grouped(&used, |((_, _, placement, size), _)| (*placement, *size))
            .noted([pool_note(workload)]),
    )
}

fn pool_note(workload: &str) -> String {
    let sender = match workload {
        "pingpong" => "every request",
        _ => "every message",
    };
    format!(
        "ferry's block pool in this process (the sender of {sender}) over the timed spans of all runs, from ferry::pool_stats(): messages sent out of line, and whether each block was reused, taken from the background reserve, or mapped on the sender's own path."
    )
}

/// Transport, wait and placement (names), then size.
fn key_columns<'a, R>(key: impl Fn(&R) -> RowKey + Copy + 'a) -> Vec<Column<'a, R>> {
    vec![
        Column::name("transport", move |r| key(r).0.to_string()),
        Column::name("wait", move |r| key(r).1.to_string()),
        Column::name("placement", move |r| key(r).2.to_string()),
        Column::number("size", move |r| key(r).3.to_string()),
    ]
}

/// The count of each run, starred where the time cap stopped one.
pub(super) fn count_column<'a, R>(count: impl Fn(&R) -> (usize, bool) + 'a) -> Column<'a, R> {
    Column::number("count", move |r| match count(r) {
        (count, true) => format!("{count}*"),
        (count, false) => count.to_string(),
    })
}

/// A ratio column per baseline, headed `{figure} ×{baseline}`: `value` of
/// the row over `value` of the baseline's row whose size and placement are
/// the row's.
fn baseline_columns<'a, R>(
    rows: &'a [R],
    figure: &str,
    key: fn(&R) -> RowKey,
    value: fn(&R) -> f64,
) -> impl Iterator<Item = Column<'a, R>> {
    BASELINES.iter().map(move |&baseline| {
        Column::number(format!("{figure} ×{baseline}"), move |row: &R| {
            let (_, _, placement, size) = key(row);
            let same = |r: &&R| {
                let (transport, _, p, s) = key(r);
                (transport, p, s) == (baseline, placement, size)
            };
            ratio_cell(row, rows.iter().find(same), value)
        })
    })
}

/// `value(row)` over `value(base)`; `-` without a base or a ratio.
pub(super) fn ratio_cell<R>(row: &R, base: Option<&R>, value: impl Fn(&R) -> f64) -> String {
    let ratio = base.and_then(|base| {
        let (v, b) = (value(row), value(base));
        (b > 0.0 && v.is_finite()).then(|| v / b)
    });
    ratio.map_or_else(|| "-".to_string(), format_ratio)
}

pub(super) fn spread_cell(min: f64, max: f64, format: fn(f64) -> String) -> String {
    format!("{}–{}", format(min), format(max))
}

/// The placement name of rows whose processes the scheduler places.
const UNPINNED: &str = "unpinned";

/// How many of an unpinned row's runs had both processes on one CPU, as
/// `k/n`; `-` for a pinned row (or runs that did not say).
fn one_cpu_cell(placement: &str, runs: &[RunPoint]) -> String {
    if placement != UNPINNED {
        return "-".to_string();
    }
    let said: Vec<&str> = runs.iter().filter_map(|r| r.one_cpu).collect();
    if said.is_empty() {
        return "-".to_string();
    }
    let yes = said.iter().filter(|&&s| s == "yes").count();
    format!("{yes}/{}", said.len())
}

/// Bytes in a GiB.
const GIB: f64 = (1u64 << 30) as f64;

/// The median figure of an unpinned row's runs that had both processes on
/// one CPU (`one`) or on two, with how many runs that is; `-` for a pinned
/// row or where no run was in that state.
fn state_cell(
    placement: &str,
    runs: &[RunPoint],
    one: bool,
    format: impl Fn(f64) -> String,
) -> String {
    let want = if one { "yes" } else { "no" };
    let values = runs
        .iter()
        .filter(|r| r.one_cpu == Some(want))
        .map(|r| r.value);
    match Spread::of(values) {
        Some(spread) if placement == UNPINNED => {
            let n = runs.iter().filter(|r| r.one_cpu == Some(want)).count();
            format!("{} ({n})", format(spread.median))
        }
        _ => "-".to_string(),
    }
}

pub(super) fn capped_note(any_capped: bool) -> Option<String> {
    any_capped.then(|| CAPPED_NOTE.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::rows::tests::row;

    #[test]
    fn ratios_compare_within_a_size_and_show_a_dash_without_a_baseline() {
        let rows = [
            row("ferry", 12, 1.0),
            row("unix-stream", 12, 20.0),
            row("shm-futex", 12, 2.0),
            row("ferry", 144, 3.0),
        ];
        let table = pingpong(&rows, 1);
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
        let text = pingpong(&rows, 1).text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "pingpong");
        assert!(lines[1].starts_with("transport") && lines[1].ends_with("p50 ×shm-futex"));
        assert!(lines[2].contains("0.050"), "{text}");
        assert_eq!(lines[4], "", "{text}");
        assert!(lines[5].ends_with('-'), "{text}");
    }

    #[test]
    fn pingpong_columns_are_the_figures_then_the_range_then_the_ratios() {
        let table = pingpong(&[row("ferry", 12, 1.0)], 3);
        let headers = table.headers.join(",");
        assert_eq!(
            headers,
            "transport,wait,placement,size,count,p50 µs,p99 µs,p99.9 µs,max µs,mean µs,cpu µs,p50 min–max,one CPU,p50 on one,p50 on two,p50 ×ferry,p50 ×unix-stream,p50 ×shm-futex"
        );
        assert_eq!(table.rows[0][11], "1.00–1.00");
    }

    #[test]
    fn unpinned_rows_count_the_runs_on_one_cpu_and_pinned_rows_show_a_dash() {
        let run = |one_cpu| RunPoint {
            value: match one_cpu {
                Some("yes") => 4.0,
                _ => 7.0,
            },
            line_before_ns: None,
            line_after_ns: None,
            one_cpu_share: None,
            one_cpu,
        };
        let mut unpinned = row("ferry", 12, 1.0);
        unpinned.per_run = vec![run(Some("yes")), run(Some("no")), run(Some("yes"))];
        let mut apart = row("ferry", 144, 1.0);
        apart.per_run = vec![run(Some("no")), run(Some("no")), run(None)];
        let mut pinned = row("ferry", 1728, 1.0);
        pinned.placement = "split";
        pinned.per_run = vec![run(Some("no"))];
        let table = pingpong(&[unpinned, apart, pinned], 3);
        let column = table.headers.iter().position(|h| h == "one CPU").unwrap();
        let cells: Vec<&str> = table
            .rows
            .iter()
            .map(|r| r[column].as_str())
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(cells, ["2/3", "0/2", "-"]);
        let state = |header: &str| -> Vec<String> {
            let column = table.headers.iter().position(|h| h == header).unwrap();
            let cells = table.rows.iter().map(|r| r[column].clone());
            cells.filter(|c| !c.is_empty()).collect()
        };
        assert_eq!(state("p50 on one"), ["4.00 (2)", "-", "-"]);
        assert_eq!(state("p50 on two"), ["7.00 (1)", "7.00 (2)", "-"]);
        assert!(table.notes.iter().any(|n| n.starts_with("one CPU")));
        // Without an unpinned row, no such column.
        let mut split = row("ferry", 12, 1.0);
        split.placement = "split";
        assert!(!pingpong(&[split], 3).headers.iter().any(|h| h == "one CPU"));
    }

    #[test]
    fn capped_counts_are_marked_and_explained() {
        let mut capped = row("shm-spin", 12, 9.0);
        capped.capped = true;
        let table = pingpong(&[capped], 1);
        assert_eq!(table.rows[0][4], "10*");
        assert!(table.notes.iter().any(|n| n.starts_with('*')));
    }

    #[test]
    fn rows_without_pool_use_make_no_pool_table() {
        let rows = [row("ferry", 12, 1.0)];
        assert!(pool("pingpong", &rows, |r| r.pool, PingpongRow::key).is_none());
    }
}
