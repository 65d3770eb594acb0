//! `report.svg`, drawn with plotters' SVG backend: round-trip p50 and
//! one-way throughput against message size, log-log, one chart per
//! placement and one line per transport with a legend beside it; then the
//! in-process calls as bars.
//!
//! A point whose row hit its time cap is drawn hollow. With `--repeat`, an
//! error bar through each point spans the runs' min–max. The backend writes
//! text as `<text>` elements, so drawing needs no fonts.

use plotters::coord::Shift;
use plotters::coord::combinators::WithKeyPoints;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::Report;
use super::RunInfo;
use super::bars::{self, Bar};
use super::format::{bytes, number};
use super::rows::{PingpongRow, RowKey, ThroughputRow};
use crate::error::{Context, Error};

/// A part of the picture.
pub type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// What drawing on an area returns.
pub type Drawn = Result<(), DrawingAreaErrorKind<std::io::Error>>;
/// Message size against a figure, both on log scales.
type LogLog = Cartesian2d<WithKeyPoints<LogCoord<f64>>, LogCoord<f64>>;

/// The typeface of every text; the viewer picks its own sans-serif.
pub const FONT: &str = "sans-serif";
const WIDTH: u32 = 1100;
const HEADER_HEIGHT: u32 = 70;
const CHART_HEIGHT: u32 = 540;
/// The width of a line chart's plot; its legend takes the rest.
const PLOT_WIDTH: u32 = 820;
const LEGEND_ROW: i32 = 22;

/// One point of a line: x, y, the runs' range of y, and whether capped.
struct Point {
    x: f64,
    y: f64,
    range: (f64, f64),
    capped: bool,
}

/// A point's y, the runs' range of y, and whether its row was capped.
type Y = (f64, (f64, f64), bool);

/// One line: a transport, and how it waits.
struct Series {
    name: &'static str,
    wait: &'static str,
    points: Vec<Point>,
}

/// A log-log line chart.
struct LineChart {
    title: String,
    y_label: &'static str,
    series: Vec<Series>,
}

/// The whole picture, as SVG.
pub fn svg(report: &Report) -> Result<String, Error> {
    let p50 = ("Round trip p50", "lower", "p50 round trip, µs");
    let mut charts = line_charts(&report.pingpong, p50, PingpongRow::key, |r| {
        (r.p50_us, (r.p50_min_us, r.p50_max_us), r.capped)
    });
    let gib = ("One-way throughput", "higher", "GiB/s");
    charts.extend(line_charts(
        &report.throughput,
        gib,
        ThroughputRow::key,
        |r| (r.gib_per_s, (r.gib_per_s_min, r.gib_per_s_max), r.capped),
    ));
    let bars = bars::of(report);
    let height = HEADER_HEIGHT + CHART_HEIGHT * charts.len() as u32 + bars::height(bars.len());
    let mut out = String::new();
    draw(&mut out, (WIDTH, height), &report.run, &charts, &bars).context("drawing report.svg")?;
    Ok(out)
}

/// The header (what ran where), each line chart, then the bars.
fn draw(
    out: &mut String,
    size: (u32, u32),
    run: &RunInfo,
    charts: &[LineChart],
    bars: &[Bar],
) -> Drawn {
    let root = SVGBackend::with_string(out, size).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, mut body) = root.split_vertically(HEADER_HEIGHT);
    header.draw(&Text::new("ferry-bench", (20, 12), (FONT, 28)))?;
    let quick = if run.quick { ", quick counts" } else { "" };
    let subtitle = format!(
        "{} CPUs, {}; {} run(s){quick}; {}",
        run.online_cpus, run.cpu_model, run.repeat, run.command
    );
    header.draw(&Text::new(subtitle, (20, 46), (FONT, 15)))?;
    for chart in charts {
        let (area, rest) = body.split_vertically(CHART_HEIGHT);
        draw_line_chart(&area, chart)?;
        body = rest;
    }
    if !bars.is_empty() {
        bars::draw(&body, bars)?;
    }
    root.present()
}

/// A line chart per placement of `rows`: `y` against size, one line per
/// transport in order of first appearance, titled `what` and which way is
/// `better`; points that cannot go on a log scale are left out.
fn line_charts<R>(
    rows: &[R],
    (what, better, y_label): (&str, &str, &'static str),
    key: fn(&R) -> RowKey,
    y: fn(&R) -> Y,
) -> Vec<LineChart> {
    let chart = |placement: &str| {
        let mut series: Vec<Series> = Vec::new();
        for r in rows.iter().filter(|r| key(r).2 == placement) {
            let ((name, wait, _, size), (y, range, capped)) = (key(r), y(r));
            if !(y > 0.0 && y.is_finite()) {
                continue;
            }
            let x = size as f64;
            let point = Point {
                x,
                y,
                range,
                capped,
            };
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push(point),
                None => series.push(Series {
                    name,
                    wait,
                    points: vec![point],
                }),
            }
        }
        for s in &mut series {
            s.points.sort_by(|a, b| a.x.total_cmp(&b.x));
        }
        LineChart {
            title: format!("{what} against message size ({placement}; {better} is better)"),
            y_label,
            series,
        }
    };
    let charts = placements(rows.iter().map(|r| key(r).2)).into_iter();
    charts.map(chart).filter(|c| !c.series.is_empty()).collect()
}

/// The distinct names, in order of appearance.
pub fn placements<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = Vec::new();
    for name in names {
        if !seen.contains(&name) {
            seen.push(name);
        }
    }
    seen
}

/// How a transport's line looks.
#[derive(Clone, Copy)]
struct Look {
    colour: RGBColor,
    dashed: bool,
    width: u32,
}

/// ferry's own lines in blues and thick, the OS's in warm colours,
/// shared-memory floors in greens, libraries in purples and pinks;
/// spinning variants dashed.
fn look(name: &str, index: usize) -> Look {
    const OTHERS: [u32; 6] = [0xbcbd22, 0x17becf, 0x7f7f7f, 0x8c564b, 0xe7ba52, 0x637939];
    let (hex, width) = match name {
        "ferry" | "ferry-spin" => (0x1f4e9c, 3),
        "ferry-loan" | "ferry-loan-borrowed" => (0x00a6d6, 3),
        "ferry-in-place" => (0x6baed6, 3),
        "ferry-sleep" => (0x5b8fd6, 3),
        "unix-stream" => (0xd62728, 2),
        "pipe" => (0xff7f0e, 2),
        "unix-seqpacket" => (0xa0522d, 2),
        "shm-futex" | "shm-spin" => (0x2ca02c, 2),
        "shm-in-place" => (0x7fc97f, 2),
        "ipc-channel-bytes" => (0x9467bd, 2),
        "ipc-channel-typed" => (0xc49ddb, 2),
        "iceoryx2-event" | "iceoryx2-spin" => (0xe377c2, 2),
        _ => (OTHERS[index % OTHERS.len()], 2),
    };
    Look {
        colour: rgb(hex),
        dashed: name.ends_with("spin"),
        width,
    }
}

/// A colour from its `0xRRGGBB` code.
pub fn rgb(hex: u32) -> RGBColor {
    let [_, r, g, b] = hex.to_be_bytes();
    RGBColor(r, g, b)
}

/// Whole decades around the positive, finite values: (10^a, 10^b).
pub fn decades(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| *v > 0.0 && v.is_finite()) {
        lo = lo.min(v.log10());
        hi = hi.max(v.log10());
    }
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    let (lo, hi) = (lo.floor(), hi.ceil());
    let hi = if hi > lo { hi } else { lo + 1.0 };
    (10f64.powf(lo), 10f64.powf(hi))
}

fn draw_line_chart(area: &Area<'_>, chart: &LineChart) -> Drawn {
    let (plot, legend) = area.split_horizontally(PLOT_WIDTH);
    let points = || chart.series.iter().flat_map(|s| &s.points);
    let mut sizes: Vec<f64> = points().map(|p| p.x).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    let x = (sizes[0] / 1.6)..(sizes[sizes.len() - 1] * 1.6);
    let (y_lo, y_hi) = decades(points().flat_map(|p| [p.y, p.range.0, p.range.1]));
    let mut cc = ChartBuilder::on(&plot)
        .caption(&chart.title, (FONT, 20))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(
            x.log_scale().with_key_points(sizes),
            (y_lo..y_hi).log_scale(),
        )?;
    cc.configure_mesh()
        .x_desc("message size (log)")
        .y_desc(format!("{} (log)", chart.y_label))
        .x_label_formatter(&|x| bytes(*x))
        .y_label_formatter(&|y| number(*y))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()?;
    for (i, series) in chart.series.iter().enumerate() {
        draw_series(&mut cc, series, look(series.name, i))?;
    }
    draw_legend(&legend, &chart.series)
}

fn draw_series(
    cc: &mut ChartContext<'_, SVGBackend<'_>, LogLog>,
    series: &Series,
    look: Look,
) -> Drawn {
    let line = look.colour.stroke_width(look.width);
    let points = series.points.iter().map(|p| (p.x, p.y));
    match look.dashed {
        true => cc.draw_series(DashedLineSeries::new(points, 8, 5, line))?,
        false => cc.draw_series(LineSeries::new(points, line))?,
    };
    let ranged = series
        .points
        .iter()
        .filter(|p| p.range.0 > 0.0 && p.range.1 > p.range.0);
    let bar = look.colour.stroke_width(2);
    cc.draw_series(
        ranged.map(|p| ErrorBar::new_vertical(p.x, p.range.0, p.y, p.range.1, bar, 10)),
    )?;
    // Filled (hollow where capped), then every outline over them.
    let fills = series.points.iter().map(|p| match p.capped {
        true => WHITE.filled(),
        false => look.colour.filled(),
    });
    let outlines = series.points.iter().map(|_| look.colour.stroke_width(2));
    let styles = fills.chain(outlines);
    let at = series.points.iter().cycle().map(|p| (p.x, p.y));
    cc.draw_series(at.zip(styles).map(|(at, style)| Circle::new(at, 4, style)))?;
    Ok(())
}

/// A line, a point and a label per series, down the area; a note on
/// hollow points if any.
fn draw_legend(area: &Area<'_>, series: &[Series]) -> Drawn {
    let label = TextStyle::from((FONT, 16)).pos(Pos::new(HPos::Left, VPos::Center));
    let mut y = 60;
    for (i, s) in series.iter().enumerate() {
        let look = look(s.name, i);
        let line = look.colour.stroke_width(look.width);
        let ends = vec![(10, y), (44, y)];
        match look.dashed {
            true => area.draw(&DashedPathElement::new(ends, 6, 3, line))?,
            false => area.draw(&PathElement::new(ends, line))?,
        }
        area.draw(&Circle::new((27, y), 4, look.colour.filled()))?;
        area.draw(&Text::new(
            format!("{} ({})", s.name, s.wait),
            (52, y),
            label.clone(),
        ))?;
        y += LEGEND_ROW;
    }
    if series.iter().any(|s| s.points.iter().any(|p| p.capped)) {
        let note = "hollow point: stopped by the time cap";
        area.draw(&Text::new(note, (10, y + 8), label.clone()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decades_enclose_the_data() {
        assert_eq!(decades([3.0, 450.0].into_iter()), (1.0, 1000.0));
        assert_eq!(decades([10.0].into_iter()), (10.0, 100.0));
        assert_eq!(decades(std::iter::empty()), (1.0, 10.0));
    }
}
