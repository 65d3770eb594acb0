//! What moving a pipe end costs: the forwarded rows' setups, each of
//! which sends the parent's end to a forwarder process and takes it back
//! before the row's first message, timed.

use serde::Serialize;

use super::format::format_us;
use super::table::{Column, Table};
use crate::transport::ferry_forwarded::Travel;

const NOTE: &str = "Each setup of a forwarded row sends the parent's end to a forwarder process and takes it back, once (-fwd1) or three times (-fwd3), two forwards a trip, before the row's first message; timed from the first send to the end's last arrival back, the forwarder's start aside, and divided by the forwards. A forward of a half makes a socket pair, sends the other side's holder a Moved record (a socket and a process handle) and the new holder a Routed one (the region, a socket, a process handle) and the message naming it, and the new holder maps the region and watches the new link; a whole end moves both halves. A -fwd1 row's two forwards are the forwarder's first, which also pay for its first mapping of the region and first records on its link; -fwd3 spreads those over six. The rows' round trips, against the same pipe unmoved, are in the pingpong table.";

/// One transport's setups, as written to JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MoveRow {
    /// The row's transport.
    pub transport: &'static str,
    /// What travelled.
    pub what: &'static str,
    /// Setups timed.
    pub setups: usize,
    /// Forwards per setup.
    pub forwards: u32,
    /// µs per forward over the setups: fastest, median, slowest.
    pub per_forward_us: [f64; 3],
}

/// One row per transport of `travels`, in the order first seen.
pub fn rows(travels: &[Travel]) -> Vec<MoveRow> {
    let mut names: Vec<&'static str> = Vec::new();
    for travel in travels {
        if !names.contains(&travel.transport) {
            names.push(travel.transport);
        }
    }
    names
        .into_iter()
        .filter_map(|name| {
            let of: Vec<&Travel> = travels.iter().filter(|t| t.transport == name).collect();
            let first = of.first()?;
            let mut each: Vec<f64> = of
                .iter()
                .map(|t| t.took.as_secs_f64() * 1e6 / f64::from(t.forwards.max(1)))
                .collect();
            each.sort_by(f64::total_cmp);
            Some(MoveRow {
                transport: name,
                what: first.what,
                setups: each.len(),
                forwards: first.forwards,
                per_forward_us: [each[0], each[each.len() / 2], each[each.len() - 1]],
            })
        })
        .collect()
}

/// The table, or none without rows.
pub fn table(rows: &[MoveRow]) -> Option<Table> {
    rows.first()?;
    let columns = [
        Column::name("transport", |r: &MoveRow| r.transport.to_string()),
        Column::name("what travels", |r: &MoveRow| r.what.to_string()),
        Column::number("setups", |r: &MoveRow| r.setups.to_string()),
        Column::number("forwards", |r: &MoveRow| r.forwards.to_string()),
        Column::number("µs/forward p50", |r: &MoveRow| {
            format_us(r.per_forward_us[1])
        }),
        Column::number("min–max", |r: &MoveRow| {
            format!(
                "{}–{}",
                format_us(r.per_forward_us[0]),
                format_us(r.per_forward_us[2])
            )
        }),
    ];
    Some(Table::new("moving a pipe end (µs per forward)", &columns, rows).noted([NOTE.to_string()]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn setups_group_by_transport_with_the_median_per_forward() {
        let travel = |transport, us| Travel {
            transport,
            what: "whole end",
            forwards: 6,
            took: Duration::from_micros(us),
        };
        let rows = rows(&[
            travel("ferry-end-fwd3", 600),
            travel("ferry-fwd1", 200),
            travel("ferry-end-fwd3", 1200),
            travel("ferry-end-fwd3", 1800),
        ]);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].transport, "ferry-end-fwd3");
        assert_eq!(rows[0].setups, 3);
        assert_eq!(rows[0].per_forward_us, [100.0, 200.0, 300.0]);
        let table = table(&rows).expect("a table");
        assert_eq!(table.rows.len(), 2);
        assert!(table.text().contains("200"), "{}", table.text());
    }
}
