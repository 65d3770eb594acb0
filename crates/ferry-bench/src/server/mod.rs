//! The `server` workload: reaching a named server ([`timed::connect`]),
//! a descriptor in each message ([`fds`]), and many clients of one server
//! at once ([`fleet`]); ferry beside a Unix socket and ipc-channel. A row's
//! engine is one of [`crate::engine::ALL`]: its server capability
//! ([`engine::Server`]) or its descriptor capability ([`fds::Carrier`]).

mod child;
pub(crate) mod engine;
pub(crate) mod fds;
pub(crate) mod ferry;
mod fleet;
pub(crate) mod scm;
pub(crate) mod shm;
mod tally;
mod timed;

use std::time::Duration;

use clap::ValueEnum;
use hdrhistogram::Histogram;

use crate::definitions::DEFINITIONS;
use crate::error::Error;
use crate::matrix::Bench;
use crate::pingpong;
use crate::placement::Placement;
use crate::progress::Bar;

pub use child::{ChildArgs, serve_child};
pub use engine::Server;
pub use fds::Carrier;
pub use tally::{LoopArgs, Tally, run as connect_loop};

/// Payload bytes of every request and reply.
pub const SIZE: usize = DEFINITIONS.server.size;

/// The three tests, as `--test` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Test {
    /// Connect to a server and make one round trip.
    Connect,
    /// Round trips with a descriptor in each message, and without.
    Fd,
    /// One server, many clients at once.
    Clients,
}

impl Test {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Fd => "fd",
            Self::Clients => "clients",
        }
    }
}

/// What one row runs.
#[derive(Debug, Clone, Copy)]
pub enum Row {
    /// Connect and one round trip, through this engine.
    Connect(&'static dyn Server),
    /// Round trips through `carrier`, with one descriptor each way if `fd`.
    Fd {
        carrier: &'static dyn Carrier,
        fd: bool,
    },
    /// `clients` clients of one server of `engine`.
    Clients {
        engine: &'static dyn Server,
        clients: usize,
    },
}

impl Row {
    /// The test this row belongs to.
    pub fn test(self) -> Test {
        match self {
            Self::Connect(_) => Test::Connect,
            Self::Fd { .. } => Test::Fd,
            Self::Clients { .. } => Test::Clients,
        }
    }

    /// The engine's (or carrier's) name.
    pub fn engine(self) -> &'static str {
        match self {
            Self::Connect(engine) | Self::Clients { engine, .. } => engine.name(),
            Self::Fd { carrier, .. } => carrier.name(),
        }
    }

    /// Whether a descriptor rides with each message.
    pub fn fd(self) -> bool {
        matches!(self, Self::Fd { fd: true, .. })
    }

    /// Clients served at once.
    pub fn clients(self) -> usize {
        match self {
            Self::Clients { clients, .. } => clients,
            _ => 1,
        }
    }

    /// The engine's name, with `+fd` where a descriptor rides along.
    pub fn display_name(self) -> String {
        match self.fd() {
            true => format!("{}+fd", self.engine()),
            false => self.engine().to_string(),
        }
    }
}

/// One row of the workload.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub row: Row,
    pub placement: Placement,
    /// Timed connects or round trips (connect and fd rows), after `warmup`
    /// untimed ones.
    pub count: usize,
    pub warmup: usize,
    /// How long the clients run (clients rows).
    pub window: Duration,
    /// A connect or fd row stops once it has run this long.
    pub cap: Duration,
}

/// What the command line asks of the workload.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Which tests run [default: all].
    pub tests: Vec<Test>,
    /// Which engines (and carriers) run, by name [default: all].
    pub engines: Vec<String>,
    /// Timed operations per connect or fd row, if not the default.
    pub count: Option<usize>,
    /// Small counts.
    pub quick: bool,
    /// Clients per clients row.
    pub clients: usize,
    /// The clients' window, if not the default.
    pub window: Option<Duration>,
    /// Each row's time cap.
    pub cap: Duration,
}

/// The rows at `placement`: by test, then engine.
pub fn cases(placement: Placement, settings: &Settings) -> Vec<Case> {
    let tests = match settings.tests.is_empty() {
        true => Test::value_variants().to_vec(),
        false => settings.tests.clone(),
    };
    let defaults = &DEFINITIONS.server;
    let window = match settings.quick {
        true => defaults.quick_window,
        false => defaults.window,
    };
    let engines = &settings.engines;
    let picked = |row: &Row| engines.is_empty() || engines.iter().any(|e| e == row.engine());
    let rows = tests.into_iter().flat_map(|test| rows_of(test, settings));
    rows.filter(picked)
        .map(|row| {
            let count = match (settings.quick, row.test()) {
                (true, _) => defaults.quick_count,
                (false, Test::Fd) => defaults.fd_round_trips,
                (false, _) => defaults.connects,
            };
            let count = settings.count.unwrap_or(count);
            Case {
                row,
                placement,
                count,
                warmup: pingpong::default_warmup(count),
                window: settings.window.unwrap_or(window),
                cap: settings.cap,
            }
        })
        .collect()
}

/// Every row of `test`.
fn rows_of(test: Test, settings: &Settings) -> Vec<Row> {
    let servers = crate::engine::servers().into_iter();
    match test {
        Test::Connect => servers.filter(|s| s.connects()).map(Row::Connect).collect(),
        Test::Fd => crate::engine::carriers()
            .into_iter()
            .flat_map(|carrier| [false, true].map(|fd| Row::Fd { carrier, fd }))
            .collect(),
        Test::Clients => servers
            .filter(|s| s.serves_many())
            .map(|engine| Row::Clients {
                engine,
                clients: settings.clients,
            })
            .collect(),
    }
}

/// What one run of a row measured.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Every timed connect or round trip, in nanoseconds.
    pub histogram: Histogram<u64>,
    /// Operations counted for the rate: every timed one where one ran at
    /// a time; where many clients ran at once, those that ended in the
    /// window.
    pub ops: u64,
    /// The time they took: their sum where one ran at a time, the window
    /// where many clients ran at once.
    pub span: Duration,
    /// The time cap stopped the row before its count.
    pub capped: bool,
    /// Round trips of the client that made the fewest (clients rows): a
    /// server that starves some clients shows it here, not in the
    /// percentiles of all round trips.
    pub fewest: Option<u64>,
}

impl Sample {
    /// Operations per second over the span.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.span.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// The slowest client's round trips per second (clients rows).
    pub fn slowest_client_rate(&self) -> Option<f64> {
        let span = self.span.as_secs_f64().max(f64::MIN_POSITIVE);
        self.fewest.map(|n| n as f64 / span)
    }

    /// The median, µs.
    pub fn p50_us(&self) -> f64 {
        self.histogram.value_at_quantile(0.5) as f64 / 1e3
    }

    /// The 99th percentile, µs.
    pub fn p99_us(&self) -> f64 {
        self.histogram.value_at_quantile(0.99) as f64 / 1e3
    }
}

impl Bench for Case {
    type Sample = Sample;

    fn label(&self) -> String {
        let test = match self.row {
            Row::Clients { clients, .. } => format!("{clients} clients"),
            row => row.test().name().to_string(),
        };
        let engine = self.row.display_name();
        format!("{test}: {engine} ({})", self.placement.name())
    }

    fn placement(&self) -> Placement {
        self.placement
    }

    fn work(&self) -> u64 {
        match self.row {
            // Milliseconds of the window, advanced as it passes.
            Row::Clients { .. } => self.window.as_millis() as u64,
            _ => (self.warmup + self.count) as u64,
        }
    }

    fn run(&self, bar: &Bar) -> Result<Sample, Error> {
        match self.row {
            Row::Connect(engine) => timed::connect(self, engine, bar),
            Row::Fd { carrier, fd } => fds::run(self, carrier, fd, bar),
            Row::Clients { engine, clients } => fleet::run(self, engine, clients, bar),
        }
    }

    fn brief(sample: &Sample) -> String {
        let capped = if sample.capped { " (capped)" } else { "" };
        format!(
            "p50 {:.2} µs, p99 {:.2} µs, {:.0}/s{capped}",
            sample.p50_us(),
            sample.p99_us(),
            sample.rate()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(tests: Vec<Test>, quick: bool) -> Settings {
        Settings {
            tests,
            engines: Vec::new(),
            count: None,
            quick,
            clients: DEFINITIONS.server.clients,
            window: None,
            cap: Duration::from_secs(1),
        }
    }

    #[test]
    fn every_test_has_its_rows_in_order() {
        let cases = cases(Placement::Unpinned, &settings(Vec::new(), false));
        let names: Vec<String> = cases
            .iter()
            .map(|c| format!("{} {}", c.row.test().name(), c.row.display_name()))
            .collect();
        let expected: Vec<&str> = [
            "connect ferry",
            "connect unix-seqpacket",
            "connect ipc-channel",
            "connect shm-floor",
            "connect shm-floor-unsealed",
            "connect shm-floor-4k",
            "connect shm-floor-eager",
            "connect shm-floor-min",
            "connect shm-floor-spare",
            "connect shm-floor-min-spare",
            "fd ferry",
            "fd ferry+fd",
            "fd unix-seqpacket",
            "fd unix-seqpacket+fd",
            "clients ferry",
            "clients ferry-select",
            "clients unix-seqpacket",
            "clients ipc-channel",
        ]
        .into_iter()
        .filter(|name| cfg!(feature = "ipc-channel") || !name.ends_with("ipc-channel"))
        .collect();
        assert_eq!(names, expected);
        let first = |test| cases.iter().find(|c| c.row.test() == test).unwrap();
        assert_eq!(first(Test::Connect).count, DEFINITIONS.server.connects);
        assert_eq!(first(Test::Fd).count, DEFINITIONS.server.fd_round_trips);
        assert_eq!(first(Test::Clients).window, DEFINITIONS.server.window);
    }

    #[test]
    fn tests_engines_and_quick_runs_can_be_picked() {
        let mut picked = settings(vec![Test::Connect, Test::Clients], true);
        picked.engines = vec!["shm-floor".into(), "unix-seqpacket".into()];
        let cases = cases(Placement::Same, &picked);
        let rows: Vec<_> = cases
            .iter()
            .map(|c| (c.row.test(), c.row.engine()))
            .collect();
        let expected = [
            (Test::Connect, "unix-seqpacket"),
            (Test::Connect, "shm-floor"),
            (Test::Clients, "unix-seqpacket"),
        ];
        assert_eq!(rows, expected);
        assert_eq!(cases[0].count, DEFINITIONS.server.quick_count);
        assert_eq!(cases[2].window, DEFINITIONS.server.quick_window);
        assert_eq!(cases[2].row.clients(), DEFINITIONS.server.clients);
    }
}
