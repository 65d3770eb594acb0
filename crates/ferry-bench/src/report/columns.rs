//! The pingpong, throughput and calls tables: which columns they show,
//! and what each column's cell says for a row.

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

/// The placement name of rows whose processes the scheduler places.
const UNPINNED: &str = "unpinned";

/// Bytes in a GiB.
const GIB: f64 = (1u64 << 30) as f64;

/// A column's header and the figure of a row it shows.
type Figure<R, T> = (&'static str, fn(&R) -> T);

/// What a pingpong or throughput table shows of its rows, around the
/// columns both have.
struct Measured<'a, R> {
    title: &'static str,
    note: &'static str,
    /// The headline figure's name, heading its range, states and ratios.
    figure: &'static str,
    /// The columns after the count.
    figures: Vec<Column<'a, R>>,
    /// The headline figure, compared with the baselines'.
    value: fn(&R) -> f64,
    /// The runs' min–max of the headline figure (with `--repeat`).
    range: fn(&R) -> String,
    /// A run's value, as the headline figure.
    run: fn(&R, f64) -> String,
    key: fn(&R) -> RowKey,
    count: fn(&R) -> (usize, bool),
    runs: fn(&R) -> &[RunPoint],
    pool: fn(&R) -> Option<PoolUse>,
}

/// The pingpong table, and its pool table if a row used ferry's pool.
pub fn pingpong(rows: &[PingpongRow], repeat: usize) -> Vec<Table> {
    let times: [Figure<PingpongRow, f64>; 6] = [
        ("p50 µs", |r| r.p50_us),
        ("p99 µs", |r| r.p99_us),
        ("p99.9 µs", |r| r.p999_us),
        ("max µs", |r| r.max_us),
        ("mean µs", |r| r.mean_us),
        ("cpu µs", |r| r.cpu_us),
    ];
    let figures = times.map(|(header, us)| Column::number(header, move |r| format_us(us(r))));
    let shape = Measured {
        title: "pingpong",
        note: PINGPONG_NOTE,
        figure: "p50",
        figures: figures.into(),
        value: |r| r.p50_us,
        range: |r| spread_cell(r.p50_min_us, r.p50_max_us, format_us),
        run: |_, us| format_us(us),
        key: PingpongRow::key,
        count: |r| (r.count, r.capped),
        runs: |r| &r.per_run,
        pool: |r| r.pool,
    };
    measured(rows, repeat, shape)
}

/// The throughput table, and its pool table if a row used ferry's pool.
pub fn throughput(rows: &[ThroughputRow], repeat: usize) -> Vec<Table> {
    let figures = vec![
        Column::number("msg/s", |r: &ThroughputRow| format_rate(r.msgs_per_s)),
        Column::number("GiB/s", |r: &ThroughputRow| format_gib(r.gib_per_s)),
        Column::number("cpu µs/msg", |r: &ThroughputRow| format_us(r.cpu_us)),
    ];
    let shape = Measured {
        title: "throughput",
        note: THROUGHPUT_NOTE,
        figure: "GiB/s",
        figures,
        value: |r| r.gib_per_s,
        range: |r| spread_cell(r.gib_per_s_min, r.gib_per_s_max, format_gib),
        run: |r, rate| format_gib(rate * r.size as f64 / GIB),
        key: ThroughputRow::key,
        count: |r| (r.count, r.capped),
        runs: |r| &r.per_run,
        pool: |r| r.pool,
    };
    measured(rows, repeat, shape)
}

/// The table of `rows` in `shape`, then its pool table; none without rows.
fn measured<'a, R>(rows: &'a [R], repeat: usize, shape: Measured<'a, R>) -> Vec<Table> {
    if rows.is_empty() {
        return Vec::new();
    }
    let Measured { key, runs, run, .. } = shape;
    let mut columns = key_columns(key);
    columns.push(count_column(shape.count));
    columns.extend(shape.figures);
    if repeat > 1 {
        let header = format!("{} min–max", shape.figure);
        columns.push(Column::number(header, shape.range));
    }
    let unpinned = rows.iter().any(|r| key(r).2 == UNPINNED);
    if unpinned {
        columns.push(Column::number("one CPU", move |r| {
            one_cpu_cell(key(r).2, runs(r))
        }));
        for (one, cpus) in [(true, "one"), (false, "two")] {
            let header = format!("{} on {cpus}", shape.figure);
            columns.push(Column::number(header, move |r| {
                state_cell(key(r).2, runs(r), one, |v| run(r, v))
            }));
        }
    }
    columns.extend(baseline_columns(rows, shape.figure, key, shape.value));
    let capped = rows.iter().any(|r| (shape.count)(r).1);
    let table = Table::new(shape.title, &columns, rows)
        .grouped(rows, |r| (key(r).2, key(r).3))
        .noted([shape.note.to_string()])
        .noted(unpinned.then(|| ONE_CPU_NOTE.to_string()))
        .noted(capped_note(capped));
    let pool = pool(shape.title, rows, shape.pool, key);
    std::iter::once(table).chain(pool).collect()
}

/// The calls table; none without rows.
pub fn calls(rows: &[CallsRow], repeat: usize) -> Option<Table> {
    rows.first()?;
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
    let direct = |row: &CallsRow, r: &CallsRow| {
        r.via == calls::Via::Direct.name() && (r.call, r.placement) == (row.call, row.placement)
    };
    columns.push(ratio_column(rows, "×direct", direct, |r| r.ns_per_call));
    let ways = calls::Via::ALL.map(|v| format!("{}: {}", v.name(), v.meaning()));
    let table = Table::new("calls", &columns, rows)
        .grouped(rows, |r| (r.placement, r.call))
        .noted([CALLS_NOTE.to_string()])
        .noted(ways)
        .noted(capped_note(rows.iter().any(|r| r.capped)));
    Some(table)
}

/// Where the blocks of `workload`'s rows that used ferry's pool came from;
/// `None` if no row did.
fn pool<R>(
    workload: &str,
    rows: &[R],
    pool: fn(&R) -> Option<PoolUse>,
    key: fn(&R) -> RowKey,
) -> Option<Table> {
    type Used = (RowKey, PoolUse);
    let used: Vec<Used> = rows
        .iter()
        .filter_map(|r| Some((key(r), pool(r)?)))
        .collect();
    if used.is_empty() {
        return None;
    }
    let mut columns = key_columns(|(key, _): &Used| *key);
    let counts: [Figure<PoolUse, u64>; 6] = [
        ("blocks", |p| p.blocks),
        ("reused", |p| p.reused),
        ("from reserve", |p| p.from_reserve),
        ("mapped on send path", |p| p.mapped_on_send_path),
        ("made in background", |p| p.made_in_background),
        ("ring fallbacks", |p| p.ring_fallbacks),
    ];
    columns.extend(
        counts.map(|(header, count)| {
            Column::number(header, move |(_, p): &Used| count(p).to_string())
        }),
    );
    let share = |(_, p): &Used| {
        let share = p.off_path_share();
        share.map_or_else(|| "-".to_string(), |s| format!("{:.1}%", s * 100.0))
    };
    columns.push(Column::number("no mapping on path", share));
    let sender = match workload {
        "pingpong" => "every request",
        _ => "every message",
    };
    let note = format!(
        "ferry's block pool in this process (the sender of {sender}) over the timed spans of all runs, from ferry::pool_stats(): messages sent out of line, and whether each block was reused, taken from the background reserve, or mapped on the sender's own path."
    );
    let table = Table::new(&format!("ferry pool ({workload})"), &columns, &used)
        .grouped(&used, |((_, _, placement, size), _)| (*placement, *size))
        .noted([note]);
    Some(table)
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
/// the row over that of the baseline's row at the row's size and placement.
fn baseline_columns<'a, R>(
    rows: &'a [R],
    figure: &str,
    key: fn(&R) -> RowKey,
    value: fn(&R) -> f64,
) -> impl Iterator<Item = Column<'a, R>> {
    BASELINES.iter().map(move |&baseline| {
        let same = move |row: &R, r: &R| {
            let ((_, _, placement, size), (transport, _, p, s)) = (key(row), key(r));
            (transport, p, s) == (baseline, placement, size)
        };
        ratio_column(rows, &format!("{figure} ×{baseline}"), same, value)
    })
}

/// `header`: a row's `value` over that of the first of `rows` that is its
/// `base`; `-` without a base or a ratio.
pub(super) fn ratio_column<'a, R>(
    rows: &'a [R],
    header: &str,
    base: impl Fn(&R, &R) -> bool + 'a,
    value: fn(&R) -> f64,
) -> Column<'a, R> {
    Column::number(header, move |row: &R| {
        let ratio = rows.iter().find(|r| base(row, r)).and_then(|base| {
            let (v, b) = (value(row), value(base));
            (b > 0.0 && v.is_finite()).then(|| v / b)
        });
        ratio.map_or_else(|| "-".to_string(), format_ratio)
    })
}

pub(super) fn spread_cell(min: f64, max: f64, format: fn(f64) -> String) -> String {
    format!("{}–{}", format(min), format(max))
}

/// How many of an unpinned row's runs had both processes on one CPU, as
/// `k/n`; `-` for a pinned row (or runs that did not say).
fn one_cpu_cell(placement: &str, runs: &[RunPoint]) -> String {
    let said: Vec<&str> = runs.iter().filter_map(|r| r.one_cpu).collect();
    if placement != UNPINNED || said.is_empty() {
        return "-".to_string();
    }
    let yes = said.iter().filter(|&&s| s == "yes").count();
    format!("{yes}/{}", said.len())
}

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
    let values: Vec<f64> = runs
        .iter()
        .filter(|r| r.one_cpu == Some(want))
        .map(|r| r.value)
        .collect();
    match Spread::of(values.iter().copied()) {
        Some(spread) if placement == UNPINNED => {
            format!("{} ({})", format(spread.median), values.len())
        }
        _ => "-".to_string(),
    }
}

pub(super) fn capped_note(any_capped: bool) -> Option<String> {
    any_capped.then(|| CAPPED_NOTE.to_string())
}
