//! The server workload's rows and its three tables: connect and first
//! round trip, descriptor passing, and many clients of one server.

use serde::Serialize;

use super::columns::{capped_note, count_column, ratio_column, spread_cell};
use super::format::{format_rate, format_us};
use super::rows::{Buckets, med, median_count, round, tail};
use super::table::{Column, Table};
use crate::runner::Runs;
use crate::server::{self, Sample, Test};
use crate::stats::{Spread, pooled};

/// What every server row is compared with: the OS's own socket.
const BASELINE: &str = "unix-seqpacket";

const CONNECT_NOTE: &str = "A server in a child process; this process connects, makes one 144 B round trip and hangs up, count times; each figure is µs from before the connect to the reply (asking the child where to connect, and hanging up, are not timed). ferry: Server::bind at an abstract name and ferry::connect; unix-seqpacket: a SOCK_SEQPACKET listener at an abstract name, socket and connect; ipc-channel: an IpcOneShotServer per connection, made by the child ahead of time with a thread already in its accept, its name handed over out of band, and the client makes a reply channel, IpcSender::connect, sends, and waits for the reply; shm-floor, the floor of a shared-memory connect: the client makes a memfd of ferry's default pipe region size (528,384 B), seals its size, maps it, connects a SOCK_SEQPACKET socket and sends a 40 B hello with the memfd; the server checks the seals and the size (fstat), maps it and answers an 8 B welcome, then request and reply go through the region with a futex wait on each side; shm-floor-unsealed: no seals; shm-floor-4k: a one-page region; shm-floor-eager: the request is in the region before the hello and the reply is the only answer (no welcome); shm-floor-min: all three (one page, no seals, no welcome); shm-floor-spare: ferry's shape with the client's region and socket made, sealed and mapped at the previous hang-up, outside the timed span; shm-floor-min-spare: shm-floor-min with its region made at the previous hang-up. Every server answers a client's first request on the thread that accepted it. p99 and max are of all runs pooled; ×baseline is p50 over the baseline's at the same placement.";

const FD_NOTE: &str = "144 B round trips with a child over a connection made ahead, through the same calls with one descriptor (a memfd) in the message each way, or none: ferry's send_with with an Handle::Fd and recv_with; unix-seqpacket, the floor: sendmsg and recvmsg with SCM_RIGHTS on a socket pair. Each side closes the descriptor it sent. fd adds µs is p50 minus the same engine's p50 without one: two descriptors' cost, one each way; ×unix-seqpacket compares rows with the same descriptors.";

const CLIENTS_NOTE: &str = "One server in a child process (on CPU 0 when pinned), its clients in another (on CPU 1 with split), each client a thread making 144 B round trips for the window, all at once, after connecting one by one; the window opens once every client's thread has started. rt/s counts every client's round trips that ended in the window, slowest client rt/s only those of the client that made the fewest (a server that starves some clients shows it there, not in the percentiles); p50, p99 and max are of each round trip as its client timed it. ferry and unix-seqpacket: a thread per client in the server; ferry-select: one thread serving every client through a ferry::Select; ipc-channel: a one-shot server, and a thread, per client.";

/// A server row, as written to JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerRow {
    /// `connect`, `fd` or `clients`.
    pub test: &'static str,
    /// The engine (or the fd rows' carrier).
    pub engine: &'static str,
    /// A descriptor rode with each message (fd rows).
    pub fd: bool,
    /// Clients at once.
    pub clients: usize,
    /// Where the processes ran.
    pub placement: &'static str,
    /// Timed connects or round trips (per run; clients rows: those that
    /// ended in the window).
    pub count: usize,
    /// The median (the median of the runs' medians), µs.
    pub p50_us: f64,
    /// 99th percentile of all runs pooled, µs.
    pub p99_us: f64,
    /// Slowest of all runs, µs.
    pub max_us: f64,
    /// Operations per second (clients rows: every client's round trips
    /// over the window).
    pub per_s: f64,
    /// The smallest run's p50, µs.
    pub p50_min_us: f64,
    /// The largest run's p50, µs.
    pub p50_max_us: f64,
    /// The slowest run's rate.
    pub per_s_min: f64,
    /// The fastest run's rate.
    pub per_s_max: f64,
    /// Round trips per second of the client that made the fewest (clients
    /// rows; the median of the runs').
    pub slowest_client_per_s: Option<f64>,
    /// Runs summarized.
    pub runs: usize,
    /// A run stopped at the row's time cap, before its count.
    pub capped: bool,
    /// Wall-clock seconds of all the row's runs, start-up included.
    pub wall_s: f64,
    /// Every timed operation of all the row's runs.
    pub histogram_ns: Buckets,
}

impl ServerRow {
    /// The row of a case's runs; `None` if none succeeded.
    pub fn of(runs: &Runs<server::Case>) -> Option<Self> {
        let (case, s) = (&runs.case, &runs.samples[..]);
        let p50 = Spread::of(s.iter().map(Sample::p50_us))?;
        let rate = Spread::of(s.iter().map(Sample::rate))?;
        let all = pooled(s.iter().map(|x| &x.histogram));
        let [p99, _, max] = tail(&all, s.iter().map(|x| x.histogram.max()).max()?);
        Some(Self {
            test: case.row.test().name(),
            engine: case.row.engine(),
            fd: case.row.fd(),
            clients: case.row.clients(),
            placement: case.placement.name(),
            count: median_count(s, |x| x.ops as usize),
            p50_us: round(p50.median),
            p99_us: p99,
            max_us: max,
            per_s: med(s, Sample::rate),
            p50_min_us: round(p50.min),
            p50_max_us: round(p50.max),
            per_s_min: round(rate.min),
            per_s_max: round(rate.max),
            slowest_client_per_s: Spread::of(s.iter().filter_map(Sample::slowest_client_rate))
                .map(|spread| round(spread.median)),
            runs: s.len(),
            capped: s.iter().any(|x| x.capped),
            wall_s: round(runs.wall.as_secs_f64()),
            histogram_ns: Buckets(all),
        })
    }

    /// The engine's name, with `+fd` where a descriptor rode along.
    fn name(&self) -> String {
        match self.fd {
            true => format!("{}+fd", self.engine),
            false => self.engine.to_string(),
        }
    }
}

/// The table of one test's rows.
type TableOf = fn(&[ServerRow], usize) -> Table;

/// The tables of the tests that ran.
pub fn tables(rows: &[ServerRow], repeat: usize) -> Vec<Table> {
    let tests = [
        (Test::Connect, connect as TableOf),
        (Test::Fd, fd),
        (Test::Clients, clients),
    ];
    let table = |(test, table): (Test, TableOf)| {
        let rows: Vec<ServerRow> = rows
            .iter()
            .filter(|r| r.test == test.name())
            .cloned()
            .collect();
        (!rows.is_empty()).then(|| table(&rows, repeat))
    };
    tests.into_iter().filter_map(table).collect()
}

/// p50, p99 and max, and the runs' p50 range with `--repeat`.
fn time_columns<'a>(repeat: usize) -> Vec<Column<'a, ServerRow>> {
    let mut columns = vec![
        Column::number("p50 µs", |r: &ServerRow| format_us(r.p50_us)),
        Column::number("p99 µs", |r: &ServerRow| format_us(r.p99_us)),
        Column::number("max µs", |r: &ServerRow| format_us(r.max_us)),
    ];
    if repeat > 1 {
        let range = |r: &ServerRow| spread_cell(r.p50_min_us, r.p50_max_us, format_us);
        columns.push(Column::number("p50 min–max", range));
    }
    columns
}

/// `{figure} ×{baseline}`: the row's `value` over that of `baseline`'s row
/// with the same test, placement, clients and descriptors.
fn ratio<'a>(
    rows: &'a [ServerRow],
    figure: &str,
    baseline: &'static str,
    value: fn(&ServerRow) -> f64,
) -> Column<'a, ServerRow> {
    let base = move |row: &ServerRow, r: &ServerRow| {
        (r.engine, r.test, r.placement, r.clients, r.fd)
            == (baseline, row.test, row.placement, row.clients, row.fd)
    };
    ratio_column(rows, &format!("{figure} ×{baseline}"), base, value)
}

/// A table of one connection's timed operations: the engine, placement,
/// count and times, then `last`.
fn timed<'a>(
    title: &str,
    note: &str,
    rows: &'a [ServerRow],
    repeat: usize,
    last: [Column<'a, ServerRow>; 2],
) -> Table {
    let mut columns = vec![
        Column::name("engine", ServerRow::name),
        Column::name("placement", |r: &ServerRow| r.placement.to_string()),
        count_column(|r: &ServerRow| (r.count, r.capped)),
    ];
    columns.extend(time_columns(repeat));
    columns.extend(last);
    Table::new(title, &columns, rows)
        .grouped(rows, |r| r.placement)
        .noted([note.to_string()])
        .noted(capped_note(rows.iter().any(|r| r.capped)))
}

fn connect(rows: &[ServerRow], repeat: usize) -> Table {
    let last = [
        ratio(rows, "p50", BASELINE, |r| r.p50_us),
        ratio(rows, "p50", "ferry", |r| r.p50_us),
    ];
    timed(
        "connect + first round trip (144 B)",
        CONNECT_NOTE,
        rows,
        repeat,
        last,
    )
}

fn fd(rows: &[ServerRow], repeat: usize) -> Table {
    let adds = Column::number("fd adds µs", |row: &ServerRow| {
        let without = |r: &&ServerRow| {
            (r.test, r.placement, r.engine, r.fd) == (row.test, row.placement, row.engine, false)
        };
        match (row.fd, rows.iter().find(without)) {
            (true, Some(base)) => format_us(row.p50_us - base.p50_us),
            _ => "-".to_string(),
        }
    });
    let last = [adds, ratio(rows, "p50", BASELINE, |r| r.p50_us)];
    timed("fd passing round trip (144 B)", FD_NOTE, rows, repeat, last)
}

fn clients(rows: &[ServerRow], repeat: usize) -> Table {
    let mut columns = vec![
        Column::name("engine", ServerRow::name),
        Column::name("placement", |r: &ServerRow| r.placement.to_string()),
        Column::number("clients", |r: &ServerRow| r.clients.to_string()),
        Column::number("round trips", |r: &ServerRow| r.count.to_string()),
        Column::number("rt/s", |r: &ServerRow| format_rate(r.per_s)),
        Column::number("slowest client rt/s", |r: &ServerRow| {
            r.slowest_client_per_s
                .map_or_else(|| "-".to_string(), format_rate)
        }),
    ];
    if repeat > 1 {
        let range = |r: &ServerRow| spread_cell(r.per_s_min, r.per_s_max, format_rate);
        columns.push(Column::number("rt/s min–max", range));
    }
    columns.extend(time_columns(1));
    columns.push(ratio(rows, "rt/s", BASELINE, |r| r.per_s));
    columns.push(ratio(rows, "p99", BASELINE, |r| r.p99_us));
    let title = "one server, many clients (144 B round trips)";
    Table::new(title, &columns, rows)
        .grouped(rows, |r| (r.placement, r.clients))
        .noted([CLIENTS_NOTE.to_string()])
}
