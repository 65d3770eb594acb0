//! The in-process calls in `report.svg`: a bar per function, way and
//! placement, ns per call on a log scale, with the runs' min–max as an
//! error bar.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::Report;
use super::chart::{Area, Drawn, FONT, decades, placements, rgb};
use super::format::{format_ns, number};

const TITLE: &str = "In-process calls: ns per call (log; lower is better)";
/// Pixels per bar.
const ROW: u32 = 26;
/// A colour per function.
const COLOURS: [u32; 3] = [0x1f4e9c, 0xd62728, 0x2ca02c];

/// One bar of the calls chart.
#[derive(Debug, Clone)]
pub struct Bar {
    label: String,
    ns: f64,
    range: (f64, f64),
    colour: RGBColor,
}

/// A bar per calls row that can go on a log scale, coloured by function.
pub fn of(report: &Report) -> Vec<Bar> {
    let calls = placements(report.calls.iter().map(|r| r.call));
    let colour = |call: &str| {
        let index = calls.iter().position(|c| *c == call).unwrap_or(0);
        rgb(COLOURS[index % COLOURS.len()])
    };
    let rows = report.calls.iter();
    rows.filter(|r| r.ns_per_call > 0.0 && r.ns_per_call.is_finite())
        .map(|r| Bar {
            label: format!("{} · {} ({})", r.call, r.via, r.placement),
            ns: r.ns_per_call,
            range: (r.ns_min, r.ns_max),
            colour: colour(r.call),
        })
        .collect()
}

/// The height the chart of `bars` bars takes; nothing without bars.
pub fn height(bars: usize) -> u32 {
    match bars {
        0 => 0,
        n => 110 + ROW * n as u32,
    }
}

/// The bars, the first at the top.
pub fn draw(area: &Area<'_>, bars: &[Bar]) -> Drawn {
    let (lo, hi) = x_range(bars);
    // Row `n - 1` is the top; with one bar the axis keeps an empty row.
    let top = bars.len().saturating_sub(1).max(1);
    let mut cc = ChartBuilder::on(area)
        .caption(TITLE, (FONT, 20))
        .margin(12)
        .margin_right(70)
        .x_label_area_size(40)
        .y_label_area_size(300)
        .build_cartesian_2d((lo..hi).log_scale(), (0..top).into_segmented())?;
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(row) => bars
            .get(bars.len().wrapping_sub(row + 1))
            .map_or_else(String::new, |b| b.label.clone()),
        _ => String::new(),
    };
    cc.configure_mesh()
        .disable_y_mesh()
        .y_labels(bars.len() + 1)
        .y_label_formatter(&label)
        .x_label_formatter(&|x| number(*x))
        .x_desc("ns per call (log)")
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()?;
    let row = |i: usize| bars.len() - 1 - i;
    cc.draw_series(bars.iter().enumerate().map(|(i, b)| {
        let corners = [
            (lo, SegmentValue::Exact(row(i))),
            (b.ns, SegmentValue::Exact(row(i) + 1)),
        ];
        let mut rect = Rectangle::new(corners, b.colour.mix(0.75).filled());
        rect.set_margin(4, 4, 0, 0);
        rect
    }))?;
    let ranged = bars
        .iter()
        .enumerate()
        .filter(|(_, b)| b.range.1 > b.range.0);
    cc.draw_series(ranged.map(|(i, b)| {
        let at = SegmentValue::CenterOf(row(i));
        ErrorBar::new_horizontal(at, b.range.0, b.ns, b.range.1, BLACK.stroke_width(1), 8)
    }))?;
    let value = TextStyle::from((FONT, 14)).pos(Pos::new(HPos::Left, VPos::Center));
    cc.draw_series(bars.iter().enumerate().map(|(i, b)| {
        let at = (b.ns.max(b.range.1) * 1.12, SegmentValue::CenterOf(row(i)));
        Text::new(format_ns(b.ns), at, value.clone())
    }))?;
    Ok(())
}

/// Whole decades around the bars, starting at least a third of the
/// fastest call below it, so every bar shows.
fn x_range(bars: &[Bar]) -> (f64, f64) {
    let (_, hi) = decades(bars.iter().flat_map(|b| [b.ns, b.range.0, b.range.1]));
    let fastest = bars
        .iter()
        .map(|b| b.ns.min(b.range.0))
        .fold(f64::INFINITY, f64::min);
    let lo = (fastest / 3.0).log10().floor().min(hi.log10() - 1.0);
    (10f64.powf(lo), hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_starts_a_decade_below_a_third_of_the_fastest() {
        let bar = |ns: f64| Bar {
            label: String::new(),
            ns,
            range: (ns, ns),
            colour: BLACK,
        };
        assert_eq!(x_range(&[bar(2.0), bar(450.0)]), (0.1, 1000.0));
        assert_eq!(x_range(&[bar(40.0)]), (10.0, 100.0));
    }
}
