//! `ferry-bench`: ferry against the OS's own IPC and the best libraries,
//! under one protocol, in one run. With no subcommand it runs every
//! workload (`pingpong`, `throughput`, `calls`, `server`), prints their
//! tables, and writes `report.json`, `report.md` and `report.svg` to
//! `target/ferry-bench/`; each workload also runs alone as a subcommand.

mod calls;
mod child;
mod control;
mod cpu;
mod definitions;
mod distance;
mod engine;
mod error;
mod instructions;
mod liveness;
mod matrix;
mod payload;
mod pingpong;
mod placement;
mod pool;
mod progress;
mod report;
mod runner;
mod server;
mod stats;
mod throughput;
mod transport;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};

use crate::child::ChildArgs;
use crate::definitions::DEFINITIONS;
use crate::error::Error;
use crate::matrix::Plan;
use crate::placement::Placement;
use crate::report::{Report, RunInfo};
use crate::transport::Transport;

/// ferry against the OS's own IPC and the best libraries: round trips, a
/// one-way stream, in-process calls, and a named server (connects,
/// descriptors in messages, many clients), under one protocol.
///
/// With no subcommand, every workload but liveness runs: a few
/// minutes on 2 cores (the server workload's share is about 15 s), or
/// seconds with --quick.
#[derive(Debug, Parser)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand: every workload, and the report files.
    #[command(flatten)]
    all: AllArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Round trips between this process and a child it starts: the child
    /// echoes each message; every round trip after a warm-up is timed.
    Pingpong(PingpongArgs),
    /// A one-way stream of messages to a child, which checksums every byte:
    /// messages/s and GiB/s.
    Throughput(ThroughputArgs),
    /// In-process calls of add(i32, i32) and echo(String): direct, through
    /// a closure, to another thread, through a ferry pipe in this process.
    Calls(CallsArgs),
    /// A named server: connect + first round trip (ferry's Server against
    /// a Unix socket listener and ipc-channel's one-shot server), 144 B
    /// round trips with a file descriptor each way against raw
    /// SCM_RIGHTS, and one server with 100 clients at once.
    Server(ServerArgs),
    /// Connects to a server of each engine many times in a row, nothing
    /// timed per connect: page faults and context switches per connect of
    /// the client and the server (from /proc), for counting connects under
    /// strace, perf stat or callgrind. Not part of the full run.
    ConnectLoop(server::LoopArgs),
    /// What waiting costs when nothing happens (wakeups per second of
    /// idle pipes, beside idle socket reads) and how soon a killed peer is
    /// seen (beside a plain read of its output). Not part of the full run.
    Liveness(liveness::LivenessArgs),
    /// User-space instructions per 144 B round trip of ferry, the floor
    /// (shm-futex) and unix-stream, counted rather than timed (callgrind,
    /// on a build of its own that valgrind can run), so a hot-path change
    /// shows as a number, not as noise. Not part of the full run.
    Instructions(instructions::InstructionsArgs),
    /// The child's side of a workload (started by the benchmark itself).
    #[command(hide = true)]
    Child(ChildArgs),
    /// One counted run of the instructions command (started by it, under
    /// the counter).
    #[command(hide = true)]
    InstructionsRun(instructions::CountArgs),
    /// The child of the liveness workload (started by it).
    #[command(hide = true)]
    LivenessChild,
    /// A child of the server workload (started by it).
    #[command(hide = true)]
    ServerChild(server::ChildArgs),
    /// The forwarder of the forwarded-sender pipes (started by them).
    #[command(hide = true)]
    Forwarder,
    /// The forwarder of the liveness workload's forwarded death trials.
    #[command(hide = true)]
    LivenessForwarder,
}

/// Flags every workload takes.
#[derive(Debug, Default, Args)]
struct RunArgs {
    /// Where the processes (or threads) run, comma-separated: unpinned;
    /// split (parent on CPU 0, child on CPU 1); same (both on CPU 0).
    /// Every row runs at each [default: unpinned].
    #[arg(long = "placement", value_enum, value_delimiter = ',')]
    placements: Vec<Placement>,
    /// Run the whole matrix N times, interleaved (run 1 of every row, then
    /// run 2, ...), and report the median of the runs with their min–max.
    #[arg(long, default_value_t = 1, value_parser = positive)]
    repeat: usize,
    /// Small counts, for a check in seconds.
    #[arg(long)]
    quick: bool,
    /// Timed round trips, messages or calls per row [default: by workload
    /// and size; throughput streams each row for a fixed time instead].
    #[arg(long, value_parser = positive)]
    count: Option<usize>,
    /// Stop a row after this many seconds and report what it measured,
    /// marked as capped [default: 10, or 1 with --quick].
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    row_seconds: Option<f64>,
    /// Write report.json, report.md and report.svg into DIR [default for
    /// the full run: target/ferry-bench in the workspace; a subcommand
    /// writes them only when given this].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// The transports of the two-process workloads.
#[derive(Debug, Default, Args)]
struct TransportArgs {
    /// Transports, comma-separated [default: all of them]; an unknown name
    /// is refused with the list of known ones.
    #[arg(long = "transport", value_delimiter = ',', value_parser = transport_parser())]
    transports: Vec<&'static dyn Transport>,
}

/// Parses a transport's name, listing every name in `--help`.
fn transport_parser() -> impl TypedValueParser<Value = &'static dyn Transport> {
    PossibleValuesParser::new(transport::names()).try_map(|name: String| transport::by_name(&name))
}

#[derive(Debug, Default, Args)]
struct AllArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    transports: TransportArgs,
}

#[derive(Debug, Default, Args)]
struct PingpongArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    transports: TransportArgs,
    /// Payload sizes in bytes, comma-separated
    /// [default: 12,144,1728,20736,248832,1048576].
    #[arg(long = "size", value_delimiter = ',', value_parser = positive)]
    sizes: Vec<usize>,
    /// Untimed round trips before each row [default: a tenth of the count,
    /// from 10 to 1000].
    #[arg(long)]
    warmup: Option<usize>,
    /// Also write the rows to this file as a JSON array.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

#[derive(Debug, Default, Args)]
struct ThroughputArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    transports: TransportArgs,
    /// Message sizes in bytes, comma-separated [default: 64,1024,65536,1048576].
    #[arg(long = "size", value_delimiter = ',', value_parser = positive)]
    sizes: Vec<usize>,
    /// Stream each row for this long [default: 1, or 0.1 with --quick];
    /// --count streams a fixed number of messages instead.
    #[arg(long, value_name = "SECONDS", value_parser = seconds, conflicts_with = "count")]
    seconds: Option<f64>,
    /// Also write the rows to this file as a JSON array.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

#[derive(Debug, Default, Args)]
struct CallsArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Also write the rows to this file as a JSON array.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

#[derive(Debug, Default, Args)]
struct ServerArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Tests, comma-separated: connect (connect + first round trip), fd
    /// (round trips with a descriptor each way, and without), clients (one
    /// server, many clients) [default: all three].
    #[arg(long = "test", value_enum, value_delimiter = ',')]
    tests: Vec<server::Test>,
    /// Engines (and fd carriers), comma-separated: ferry, ferry-select,
    /// unix-seqpacket, ipc-channel, shm-floor, shm-floor-unsealed,
    /// shm-floor-4k, shm-floor-eager, shm-floor-min, shm-floor-spare,
    /// shm-floor-min-spare [default: every one of each test].
    #[arg(long = "engine", value_delimiter = ',')]
    engines: Vec<String>,
    /// Clients of the one server in the clients test [default: 100].
    #[arg(long, value_parser = positive)]
    clients: Option<usize>,
    /// How long the clients make round trips [default: 2, or 0.2 with
    /// --quick]; --count sets the connect and fd tests' counts
    /// [default: 2000 connects, 20000 round trips, or 100 with --quick].
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    seconds: Option<f64>,
    /// Also write the rows to this file as a JSON array.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

fn positive(arg: &str) -> Result<usize, String> {
    match arg.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a whole number: {e}")),
    }
}

fn seconds(arg: &str) -> Result<f64, String> {
    match arg.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() => Ok(s),
        Ok(_) => Err("must be a positive number of seconds".to_string()),
        Err(e) => Err(format!("not a number: {e}")),
    }
}

/// `given`, or `default` when nothing is given.
fn given_or<T: Clone>(given: &[T], default: impl FnOnce() -> Vec<T>) -> Vec<T> {
    match given.is_empty() {
        true => default(),
        false => given.to_vec(),
    }
}

impl RunArgs {
    fn placements(&self) -> Vec<Placement> {
        given_or(&self.placements, || DEFINITIONS.placements.to_vec())
    }

    fn cap_seconds(&self) -> f64 {
        match (self.row_seconds, self.quick) {
            (Some(s), _) => s,
            (None, true) => DEFINITIONS.quick_row_seconds,
            (None, false) => DEFINITIONS.row_seconds,
        }
    }

    fn cap(&self) -> Duration {
        Duration::from_secs_f64(self.cap_seconds())
    }
}

/// The two-process rows' placement, size and transport, in report order:
/// by placement, then size, then transport.
fn grid(
    run: &RunArgs,
    sizes: &[usize],
    transports: &TransportArgs,
) -> Vec<(Placement, usize, &'static dyn Transport)> {
    let transports = given_or(&transports.transports, engine::pipes);
    let mut grid = Vec::new();
    for placement in run.placements() {
        for &size in sizes {
            grid.extend(transports.iter().map(|&t| (placement, size, t)));
        }
    }
    grid
}

/// The pingpong rows, in [`grid`]'s order.
fn pingpong_cases(
    run: &RunArgs,
    transports: &TransportArgs,
    sizes: &[usize],
    warmup: Option<usize>,
) -> Vec<pingpong::Case> {
    let sizes = given_or(sizes, || {
        DEFINITIONS.pingpong.sizes.iter().map(|s| s.size).collect()
    });
    let grid = grid(run, &sizes, transports).into_iter();
    grid.map(|(placement, size, transport)| {
        let count = match (run.count, run.quick) {
            (Some(count), _) => count,
            (None, true) => DEFINITIONS.pingpong.quick_count,
            (None, false) => pingpong::default_count(size),
        };
        let warmup = warmup.unwrap_or_else(|| pingpong::default_warmup(count));
        pingpong::Case {
            transport,
            placement,
            size,
            count,
            warmup,
            cap: run.cap(),
        }
    })
    .collect()
}

/// The throughput rows, in [`grid`]'s order.
fn throughput_cases(
    run: &RunArgs,
    transports: &TransportArgs,
    sizes: &[usize],
    seconds: Option<f64>,
) -> Vec<throughput::Case> {
    let sizes = given_or(sizes, || DEFINITIONS.throughput.sizes.to_vec());
    let amount = match (run.count, seconds, run.quick) {
        (Some(count), _, _) => throughput::Amount::Count(count),
        (None, Some(s), _) => throughput::Amount::Time(Duration::from_secs_f64(s)),
        (None, None, true) => throughput::Amount::Time(DEFINITIONS.throughput.quick_duration),
        (None, None, false) => throughput::Amount::Time(DEFINITIONS.throughput.duration),
    };
    let grid = grid(run, &sizes, transports).into_iter();
    grid.map(|(placement, size, transport)| throughput::Case {
        transport,
        placement,
        size,
        amount,
        cap: run.cap(),
    })
    .collect()
}

/// The calls rows: by placement, then function, then way.
fn calls_cases(run: &RunArgs) -> Vec<calls::Case> {
    let mut cases = Vec::new();
    for placement in run.placements() {
        for call in calls::Call::ALL {
            cases.extend(calls::Via::ALL.map(|via| calls::Case {
                call,
                via,
                placement,
                count: run.count.unwrap_or_else(|| via.default_count(run.quick)),
                cap: run.cap(),
            }));
        }
    }
    cases
}

/// The server rows: by placement, then test, then engine.
fn server_cases(
    run: &RunArgs,
    tests: &[server::Test],
    engines: &[String],
    clients: Option<usize>,
    seconds: Option<f64>,
) -> Vec<server::Case> {
    let settings = server::Settings {
        tests: tests.to_vec(),
        engines: engines.to_vec(),
        count: run.count,
        quick: run.quick,
        clients: clients.unwrap_or(DEFINITIONS.server.clients),
        window: seconds.map(Duration::from_secs_f64),
        cap: run.cap(),
    };
    let placements = run.placements().into_iter();
    placements
        .flat_map(|placement| server::cases(placement, &settings))
        .collect()
}

/// Writes a report's rows of one workload to a file, as a JSON array.
type JsonRows = fn(&Path, &Report) -> Result<(), Error>;

/// One workload's rows: what its subcommand runs, and `--json` writes.
enum Rows {
    Pingpong(Vec<pingpong::Case>),
    Throughput(Vec<throughput::Case>),
    Calls(Vec<calls::Case>),
    Server(Vec<server::Case>),
}

/// Runs one workload alone, as its subcommand does.
fn workload(rows: Rows, run: &RunArgs, json: Option<&Path>) -> Result<(), Error> {
    let mut plan = Plan::default();
    let write: JsonRows = match rows {
        Rows::Pingpong(cases) => {
            plan.pingpong = cases;
            |path, report| report::write_json(path, &report.pingpong)
        }
        Rows::Throughput(cases) => {
            plan.throughput = cases;
            |path, report| report::write_json(path, &report.throughput)
        }
        Rows::Calls(cases) => {
            plan.calls = cases;
            |path, report| report::write_json(path, &report.calls)
        }
        Rows::Server(cases) => {
            plan.server = cases;
            |path, report| report::write_json(path, &report.server)
        }
    };
    bench(
        plan,
        run,
        run.out.as_deref(),
        json.map(|path| (path, write)),
    )
}

/// Runs `plan`, prints the tables, writes the files asked for, and fails
/// if any row failed (after writing what the others measured).
fn bench(
    mut plan: Plan,
    run: &RunArgs,
    out: Option<&Path>,
    json: Option<(&Path, JsonRows)>,
) -> Result<(), Error> {
    for placement in run.placements() {
        placement.check()?;
    }
    plan.repeat = run.repeat;
    let info = RunInfo::here(run.quick, run.repeat, run.cap_seconds());
    let results = plan.run();
    let report = Report::new(&results, info);
    publish(&report, out, json)?;
    let failures: Vec<String> = results.failures.iter().map(Error::to_string).collect();
    none_failed("row run(s) failed", &failures)
}

/// Prints `report`'s tables, and writes its rows to the JSON file and the
/// report files into `out`, where asked.
fn publish(
    report: &Report,
    out: Option<&Path>,
    json: Option<(&Path, JsonRows)>,
) -> Result<(), Error> {
    print!("{}", report.text());
    if let Some((path, write)) = json {
        write(path, report)?;
        eprintln!("wrote the rows to {}", path.display());
    }
    if let Some(dir) = out {
        let files = report.write(dir)?;
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        eprintln!("wrote {}", names.join(", "));
    }
    Ok(())
}

/// Fails with `failures`, counted and named `what`, unless there are none.
fn none_failed(what: &str, failures: &[String]) -> Result<(), Error> {
    match failures.len() {
        0 => Ok(()),
        n => Err(Error::new(format!(
            "{n} {what}:\n  {}",
            failures.join("\n  ")
        ))),
    }
}

/// The workspace this was built in, when it is still there.
fn workspace() -> Option<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    match workspace.join("Cargo.toml").is_file() {
        true => Some(workspace.canonicalize().unwrap_or(workspace)),
        false => None,
    }
}

/// Every workload, and the report files into `--out` or else
/// `target/ferry-bench` of the workspace this was built in (when it is
/// still there) or of the current directory.
fn run_all(args: &AllArgs) -> Result<(), Error> {
    let run = &args.run;
    let plan = Plan {
        pingpong: pingpong_cases(run, &args.transports, &[], None),
        throughput: throughput_cases(run, &args.transports, &[], None),
        calls: calls_cases(run),
        server: server_cases(run, &[], &[], None, None),
        repeat: run.repeat,
    };
    let out = match (&run.out, workspace()) {
        (Some(dir), _) => dir.clone(),
        (None, Some(workspace)) => workspace.join("target/ferry-bench"),
        (None, None) => PathBuf::from("target/ferry-bench"),
    };
    bench(plan, run, Some(&out), None)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        None => run_all(&cli.all),
        Some(Command::Pingpong(a)) => {
            let cases = pingpong_cases(&a.run, &a.transports, &a.sizes, a.warmup);
            workload(Rows::Pingpong(cases), &a.run, a.json.as_deref())
        }
        Some(Command::Throughput(a)) => {
            let cases = throughput_cases(&a.run, &a.transports, &a.sizes, a.seconds);
            workload(Rows::Throughput(cases), &a.run, a.json.as_deref())
        }
        Some(Command::Calls(a)) => {
            workload(Rows::Calls(calls_cases(&a.run)), &a.run, a.json.as_deref())
        }
        Some(Command::Server(a)) => {
            let cases = server_cases(&a.run, &a.tests, &a.engines, a.clients, a.seconds);
            workload(Rows::Server(cases), &a.run, a.json.as_deref())
        }
        Some(Command::Child(args)) => child::serve(args),
        Some(Command::Liveness(args)) => liveness::run(args),
        Some(Command::ConnectLoop(args)) => server::connect_loop(args),
        Some(Command::Instructions(args)) => instructions::run(args),
        Some(Command::InstructionsRun(args)) => instructions::count_here(args),
        Some(Command::LivenessChild) => liveness::serve_child(),
        Some(Command::ServerChild(args)) => server::serve_child(args),
        Some(Command::Forwarder) => transport::ferry_forwarded::serve_forwarder(),
        Some(Command::LivenessForwarder) => liveness::serve_forwarder(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}
