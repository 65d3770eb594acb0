//! `report.svg`, written by hand: round trip p50 against message size and
//! throughput against message size, log-log, one line per transport with a
//! legend, then the in-process calls as bars. A point whose row hit its
//! time cap is drawn hollow; with `--repeat`, a bar through each point
//! spans the runs' min–max.

use std::fmt::Write as _;

use crate::report::{Report, format_gib, format_ns, format_us};

const WIDTH: f64 = 1100.0;
const MARGIN_LEFT: f64 = 80.0;
const PLOT_WIDTH: f64 = 730.0;
const PLOT_HEIGHT: f64 = 420.0;
const LEGEND_X: f64 = MARGIN_LEFT + PLOT_WIDTH + 30.0;
const CHART_HEIGHT: f64 = PLOT_HEIGHT + 120.0;
const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

/// One point of a line: x, y, the runs' range of y, and whether capped.
#[derive(Debug, Clone, Copy)]
struct Point {
    x: f64,
    y: f64,
    range: (f64, f64),
    capped: bool,
}

/// One line: a transport.
#[derive(Debug, Clone)]
struct Series {
    name: String,
    note: String,
    points: Vec<Point>,
}

/// A log-log line chart.
#[derive(Debug, Clone)]
struct LineChart {
    title: String,
    y_label: String,
    series: Vec<Series>,
    format_y: fn(f64) -> String,
}

/// The whole picture.
pub fn report(report: &Report) -> String {
    let mut charts = Vec::new();
    for placement in placements(report.pingpong.iter().map(|r| r.placement)) {
        let rows: Vec<_> = report
            .pingpong
            .iter()
            .filter(|r| r.placement == placement)
            .collect();
        let series = group(
            &rows,
            |r| (r.transport, r.wait),
            |r| Point {
                x: r.size as f64,
                y: r.p50_us,
                range: (r.p50_min_us, r.p50_max_us),
                capped: r.capped,
            },
        );
        charts.push(LineChart {
            title: format!("Round trip p50 against message size ({placement}; lower is better)"),
            y_label: "p50 round trip, µs".to_string(),
            series,
            format_y: format_us,
        });
    }
    for placement in placements(report.throughput.iter().map(|r| r.placement)) {
        let rows: Vec<_> = report
            .throughput
            .iter()
            .filter(|r| r.placement == placement)
            .collect();
        let series = group(
            &rows,
            |r| (r.transport, r.wait),
            |r| Point {
                x: r.size as f64,
                y: r.gib_per_s,
                range: (r.gib_per_s_min, r.gib_per_s_max),
                capped: r.capped,
            },
        );
        charts.push(LineChart {
            title: format!(
                "One-way throughput against message size ({placement}; higher is better)"
            ),
            y_label: "GiB/s".to_string(),
            series,
            format_y: format_gib,
        });
    }
    let bars = calls_bars(report);
    let bars_height = if bars.is_empty() {
        0.0
    } else {
        90.0 + 22.0 * bars.len() as f64
    };
    let height = 70.0 + CHART_HEIGHT * charts.len() as f64 + bars_height + 20.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" {FONT} font-size=\"13\">"
    );
    let _ = writeln!(
        out,
        "<rect width=\"{WIDTH}\" height=\"{height}\" fill=\"white\"/>"
    );
    let run = &report.run;
    text(&mut out, 20.0, 30.0, 20, "start", "ferry-bench");
    let subtitle = format!(
        "{} CPUs, {}; {} run(s){}; {}",
        run.online_cpus,
        run.cpu_model,
        run.repeat,
        if run.quick { ", quick counts" } else { "" },
        run.command
    );
    text(&mut out, 20.0, 52.0, 12, "start", &subtitle);
    let mut top = 70.0;
    for chart in &charts {
        line_chart(&mut out, chart, top);
        top += CHART_HEIGHT;
    }
    if !bars.is_empty() {
        bar_chart(&mut out, &bars, top);
    }
    out.push_str("</svg>\n");
    out
}

/// The distinct placements, in order of appearance.
fn placements<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = Vec::new();
    for name in names {
        if !seen.contains(&name) {
            seen.push(name);
        }
    }
    seen
}

/// Rows grouped into one series per key, in order of first appearance.
fn group<R>(
    rows: &[&R],
    key: impl Fn(&R) -> (&'static str, &'static str),
    point: impl Fn(&R) -> Point,
) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for row in rows {
        let (name, note) = key(row);
        let p = point(row);
        if !(p.y > 0.0 && p.y.is_finite()) {
            continue;
        }
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push(p),
            None => series.push(Series {
                name: name.to_string(),
                note: note.to_string(),
                points: vec![p],
            }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    series
}

/// Colour, dash pattern and width of a transport's line: ferry's own in
/// blues and thick, the OS's in warm colours, shared-memory floors in
/// greens, libraries in purples and pinks; spinning variants dashed.
fn style(name: &str, index: usize) -> (&'static str, &'static str, f64) {
    const OTHERS: &[&str] = &[
        "#bcbd22", "#17becf", "#7f7f7f", "#8c564b", "#e7ba52", "#637939",
    ];
    let dash = if name.ends_with("spin") { "7 4" } else { "" };
    let (colour, width) = match name {
        "ferry" => ("#1f4e9c", 3.0),
        "ferry-spin" => ("#1f4e9c", 2.5),
        "ferry-sleep" => ("#5b8fd6", 2.5),
        "ferry-loan" => ("#00a6d6", 3.0),
        "unix-stream" => ("#d62728", 2.0),
        "pipe" => ("#ff7f0e", 2.0),
        "unix-seqpacket" => ("#a0522d", 2.0),
        "shm-futex" => ("#2ca02c", 2.0),
        "shm-spin" => ("#2ca02c", 2.0),
        "shm-in-place" => ("#7fc97f", 2.0),
        "ipc-channel-bytes" => ("#9467bd", 2.0),
        "ipc-channel-typed" => ("#c49ddb", 2.0),
        "iceoryx2-event" => ("#e377c2", 2.0),
        "iceoryx2-spin" => ("#e377c2", 2.0),
        _ => (OTHERS[index % OTHERS.len()], 2.0),
    };
    (colour, dash, width)
}

/// Where log10 of the data's range falls: whole decades around it.
fn decades(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| *v > 0.0 && v.is_finite()) {
        lo = lo.min(v.log10());
        hi = hi.max(v.log10());
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let (lo, hi) = (lo.floor(), hi.ceil());
    (lo, if hi > lo { hi } else { lo + 1.0 })
}

fn line_chart(out: &mut String, chart: &LineChart, top: f64) {
    let (x0, y0) = (MARGIN_LEFT, top + 40.0);
    let (w, h) = (PLOT_WIDTH, PLOT_HEIGHT);
    text(out, x0, top + 22.0, 15, "start", &chart.title);
    let points = || chart.series.iter().flat_map(|s| s.points.iter());
    let (xs_lo, xs_hi) = points().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
        (lo.min(p.x), hi.max(p.x))
    });
    let (x_lo, x_hi) = ((xs_lo / 1.6).log10(), (xs_hi * 1.6).log10());
    let (y_lo, y_hi) = decades(points().flat_map(|p| [p.y, p.range.0, p.range.1]));
    let px = |x: f64| x0 + (x.log10() - x_lo) / (x_hi - x_lo) * w;
    let py = |y: f64| y0 + h - (y.log10() - y_lo) / (y_hi - y_lo) * h;
    let _ = writeln!(
        out,
        "<rect x=\"{x0}\" y=\"{y0}\" width=\"{w}\" height=\"{h}\" fill=\"#fafafa\" stroke=\"#888\"/>"
    );
    // Horizontal grid: every decade labelled, 2 and 5 between them.
    let mut decade = y_lo;
    while decade <= y_hi {
        for (m, major) in [(1.0, true), (2.0, false), (5.0, false)] {
            let y = m * 10f64.powf(decade);
            if y.log10() > y_hi + 1e-9 {
                continue;
            }
            let yy = py(y);
            let stroke = if major { "#bbb" } else { "#e4e4e4" };
            let _ = writeln!(
                out,
                "<line x1=\"{x0}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"{stroke}\"/>",
                x0 + w
            );
            if major || y_hi - y_lo <= 3.0 {
                text(out, x0 - 8.0, yy + 4.0, 11, "end", &number(y));
            }
        }
        decade += 1.0;
    }
    // Vertical grid at every size measured.
    let mut sizes: Vec<f64> = points().map(|p| p.x).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    for &size in &sizes {
        let xx = px(size);
        let _ = writeln!(
            out,
            "<line x1=\"{xx:.1}\" y1=\"{y0}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#e4e4e4\"/>",
            y0 + h
        );
        text(out, xx, y0 + h + 18.0, 11, "middle", &bytes(size));
    }
    text(
        out,
        x0 + w / 2.0,
        y0 + h + 40.0,
        12,
        "middle",
        "message size (log)",
    );
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 {:.1} {:.1})\">{} (log)</text>",
        x0 - 55.0,
        y0 + h / 2.0,
        x0 - 55.0,
        y0 + h / 2.0,
        escape(&chart.y_label)
    );
    for (i, series) in chart.series.iter().enumerate() {
        let (colour, dash, width) = style(&series.name, i);
        let path: Vec<String> = series
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", px(p.x), py(p.y)))
            .collect();
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"{width}\" stroke-dasharray=\"{dash}\" stroke-linejoin=\"round\"><title>{}</title></polyline>",
            path.join(" "),
            escape(&series.name)
        );
        for p in &series.points {
            let (xx, yy) = (px(p.x), py(p.y));
            if p.range.0 > 0.0 && p.range.1 > p.range.0 {
                let _ = writeln!(
                    out,
                    "<line x1=\"{xx:.1}\" y1=\"{:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-width=\"1.5\"/>",
                    py(p.range.0),
                    py(p.range.1)
                );
            }
            let fill = if p.capped { "white" } else { colour };
            let _ = writeln!(
                out,
                "<circle cx=\"{xx:.1}\" cy=\"{yy:.1}\" r=\"3.5\" fill=\"{fill}\" stroke=\"{colour}\" stroke-width=\"1.5\"><title>{} at {}: {}</title></circle>",
                escape(&series.name),
                bytes(p.x),
                (chart.format_y)(p.y)
            );
        }
    }
    legend(out, &chart.series, y0);
}

fn legend(out: &mut String, series: &[Series], y0: f64) {
    let x = LEGEND_X;
    for (i, s) in series.iter().enumerate() {
        let (colour, dash, width) = style(&s.name, i);
        let y = y0 + 10.0 + 22.0 * i as f64;
        let _ = writeln!(
            out,
            "<line x1=\"{x}\" y1=\"{y}\" x2=\"{:.1}\" y2=\"{y}\" stroke=\"{colour}\" stroke-width=\"{width}\" stroke-dasharray=\"{dash}\"/>",
            x + 34.0
        );
        let _ = writeln!(
            out,
            "<circle cx=\"{:.1}\" cy=\"{y}\" r=\"3.5\" fill=\"{colour}\"/>",
            x + 17.0
        );
        let label = format!("{} ({})", s.name, s.note);
        text(out, x + 42.0, y + 4.5, 12, "start", &label);
    }
    if series.iter().any(|s| s.points.iter().any(|p| p.capped)) {
        let y = y0 + 10.0 + 22.0 * series.len() as f64 + 8.0;
        text(
            out,
            x,
            y,
            11,
            "start",
            "hollow point: stopped by the time cap",
        );
    }
}

/// One bar of the calls chart.
#[derive(Debug, Clone)]
struct BarRow {
    label: String,
    ns: f64,
    range: (f64, f64),
    group: usize,
}

fn calls_bars(report: &Report) -> Vec<BarRow> {
    let groups = placements(report.calls.iter().map(|r| r.call));
    report
        .calls
        .iter()
        .filter(|r| r.ns_per_call > 0.0 && r.ns_per_call.is_finite())
        .map(|r| BarRow {
            label: format!("{} · {} ({})", r.call, r.via, r.placement),
            ns: r.ns_per_call,
            range: (r.ns_min, r.ns_max),
            group: groups.iter().position(|g| *g == r.call).unwrap_or(0),
        })
        .collect()
}

fn bar_chart(out: &mut String, bars: &[BarRow], top: f64) {
    text(
        out,
        MARGIN_LEFT,
        top + 22.0,
        15,
        "start",
        "In-process calls: ns per call (log; lower is better)",
    );
    let (x0, y0) = (MARGIN_LEFT + 240.0, top + 45.0);
    let w = PLOT_WIDTH + 120.0 - 240.0;
    let (_, hi) = decades(bars.iter().flat_map(|b| [b.ns, b.range.0, b.range.1]));
    // The axis starts at least a third of the fastest call below it, so
    // every bar shows.
    let fastest = bars
        .iter()
        .map(|b| b.ns.min(b.range.0))
        .fold(f64::INFINITY, f64::min);
    let lo = (fastest / 3.0).log10().floor().min(hi - 1.0);
    let px = |ns: f64| x0 + (ns.max(10f64.powf(lo)).log10() - lo) / (hi - lo) * w;
    let h = 22.0 * bars.len() as f64;
    let mut decade = lo;
    while decade <= hi {
        let xx = px(10f64.powf(decade));
        let _ = writeln!(
            out,
            "<line x1=\"{xx:.1}\" y1=\"{y0}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#ccc\"/>",
            y0 + h
        );
        text(
            out,
            xx,
            y0 + h + 16.0,
            11,
            "middle",
            &number(10f64.powf(decade)),
        );
        decade += 1.0;
    }
    for (i, bar) in bars.iter().enumerate() {
        let y = y0 + 22.0 * i as f64;
        let colour = ["#1f4e9c", "#d62728", "#2ca02c"][bar.group % 3];
        text(out, x0 - 8.0, y + 15.0, 12, "end", &bar.label);
        let _ = writeln!(
            out,
            "<rect x=\"{x0}\" y=\"{:.1}\" width=\"{:.1}\" height=\"15\" fill=\"{colour}\" fill-opacity=\"0.75\"/>",
            y + 3.0,
            (px(bar.ns) - x0).max(1.0)
        );
        if bar.range.1 > bar.range.0 {
            let _ = writeln!(
                out,
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>",
                px(bar.range.0),
                y + 10.5,
                px(bar.range.1),
                y + 10.5
            );
        }
        text(
            out,
            px(bar.ns) + 6.0,
            y + 15.0,
            11,
            "start",
            &format_ns(bar.ns),
        );
    }
}

fn text(out: &mut String, x: f64, y: f64, size: u32, anchor: &str, content: &str) {
    let _ = writeln!(
        out,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\">{}</text>",
        escape(content)
    );
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A tick label: as few digits as the value needs.
fn number(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", number(v / 1e6))
    } else if v >= 1e4 {
        format!("{}k", number(v / 1e3))
    } else if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').to_string()
    }
}

/// A size in bytes, KiB or MiB.
fn bytes(b: f64) -> String {
    if b >= 1_048_576.0 {
        format!("{} MiB", number(b / 1_048_576.0))
    } else if b >= 1024.0 {
        format!("{} KiB", number(b / 1024.0))
    } else {
        format!("{b:.0} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(number(1.0), "1");
        assert_eq!(number(0.2), "0.2");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(20_000.0), "20k");
        assert_eq!(bytes(12.0), "12 B");
        assert_eq!(bytes(20_736.0), "20.2 KiB");
        assert_eq!(bytes(1_048_576.0), "1 MiB");
    }

    #[test]
    fn decades_enclose_the_data() {
        assert_eq!(decades([3.0, 450.0].into_iter()), (0.0, 3.0));
        assert_eq!(decades([10.0].into_iter()), (1.0, 2.0));
        assert_eq!(decades(std::iter::empty()), (0.0, 1.0));
    }

    #[test]
    fn names_are_escaped() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
