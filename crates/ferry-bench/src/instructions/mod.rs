//! `ferry-bench instructions`: user-space instructions per round trip,
//! counted rather than timed, so a change in a hot path shows as a number
//! that is exact and repeatable, not only as a noisy time.
//!
//! Each transport makes the pingpong workload's round trips (both sides
//! write and read every payload byte; see [`crate::pingpong`]) in two runs
//! of N1 and N2 round trips, each a fresh pair of processes pinned to CPU 0,
//! under a counter ([`counter`]): the CPU's `instructions:u` through
//! `perf stat` where the machine has hardware counters, callgrind
//! ([`callgrind`]) where it has not. (I(N2) − I(N1)) / (N2 − N1) is one
//! round trip in both processes, start-up and teardown cancelling out.
//!
//! On one CPU no waiter spins (ferry's adaptive wait yields to a peer on
//! its CPU, then sleeps; the floor and the sockets always sleep), so what
//! a run executes hardly depends on timing. The counted run is the
//! hidden `instructions-run` subcommand ([`count_here`]).

mod callgrind;
mod cgfile;
mod counter;
mod perf;

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use crate::child::{self, Workload};
use crate::error::Error;
use crate::payload;
use crate::pingpong;
use crate::placement::Placement;
use crate::report::{self, InstructionsRow, Report, RunInfo, Table};
use crate::transport::{self, Connection, Endpoint, Transport};

pub use counter::CounterChoice;
use counter::{Count, Counter};

/// The transports counted by default: ferry, the floor, and the socket.
const DEFAULT_TRANSPORTS: &[&str] = &["ferry", "shm-futex", "unix-stream"];
/// Round trips of the two runs.
const ROUNDS: [usize; 2] = [2_000, 4_000];
/// Round trips of the two runs with `--quick`: a few seconds per transport
/// under callgrind. Fewer (200 and 400) left ferry's count to a handful of
/// waits that found the peer slow under valgrind and slept: 1,593–1,724
/// per round trip over repeated runs, against 1,593 with 2,000 and 4,000.
const QUICK_ROUNDS: [usize; 2] = [1_000, 2_000];
/// The payload each way.
const SIZE: usize = 144;

/// Flags of the `instructions` command.
#[derive(Debug, Args)]
pub struct InstructionsArgs {
    /// Transports, comma-separated [default: ferry,shm-futex,unix-stream].
    #[arg(long = "transport", value_delimiter = ',', value_parser = transport::by_name)]
    transports: Vec<&'static dyn Transport>,
    /// Payload bytes each way.
    #[arg(long, default_value_t = SIZE, value_parser = crate::positive)]
    size: usize,
    /// The round trips of the two runs, N1,N2 (N2 > N1) [default:
    /// 2000,4000, or 1000,2000 with --quick].
    #[arg(long, value_delimiter = ',', value_parser = crate::positive)]
    rounds: Vec<usize>,
    /// Fewer round trips, for a check in seconds (once the counting build
    /// exists).
    #[arg(long)]
    quick: bool,
    /// What counts: perf (hardware counters), callgrind, or auto (perf
    /// where it counts, else callgrind).
    #[arg(long, value_enum, default_value_t = CounterChoice::Auto)]
    counter: CounterChoice,
    /// Keep the counter's files (callgrind's cg.PID.PART, for
    /// callgrind_annotate; perf's output) in DIR instead of removing them.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Also list the N functions that execute the most instructions per
    /// round trip in each transport's two processes (callgrind only).
    #[arg(long, value_name = "N", default_value_t = 0)]
    top: usize,
    /// Write report.json, report.md and report.svg into DIR.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Also write the rows to this file as a JSON array.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

/// Flags of the hidden `instructions-run` subcommand: one counted run.
#[derive(Debug, Args)]
pub struct CountArgs {
    /// The transport to the child.
    #[arg(long, value_parser = transport::by_name)]
    transport: &'static dyn Transport,
    /// Round trips to make.
    #[arg(long)]
    rounds: usize,
    /// Payload bytes each way.
    #[arg(long, value_parser = crate::positive)]
    size: usize,
}

/// One counted run to make: a transport, its round trips and size.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// What carries the messages.
    pub transport: &'static dyn Transport,
    /// Round trips.
    pub rounds: usize,
    /// Payload bytes each way.
    pub size: usize,
}

impl Job {
    /// The arguments of `instructions-run` for this job.
    pub fn args(&self) -> Vec<String> {
        let transport = self.transport.name().to_string();
        let (rounds, size) = (self.rounds.to_string(), self.size.to_string());
        ["instructions-run", "--transport", &transport]
            .into_iter()
            .chain(["--rounds", &rounds, "--size", &size])
            .map(str::to_string)
            .collect()
    }
}

/// Runs the command: counts every transport, prints the table (and the
/// functions asked for), writes the files asked for, and fails if any
/// transport could not be counted.
pub fn run(args: &InstructionsArgs) -> Result<(), Error> {
    let started = Instant::now();
    let rounds = rounds(args)?;
    let counter = Counter::choose(args.counter)?;
    if args.top > 0 && !counter.sees_functions() {
        eprintln!("instructions: --top needs callgrind; perf counts whole processes only");
    }
    let (mut rows, mut functions) = (Vec::new(), Vec::new());
    let mut failures = Vec::new();
    for transport in transports(args)? {
        match count_transport(&counter, transport, rounds, args) {
            Ok((row, table)) => {
                rows.push(row);
                functions.extend(table);
            }
            Err(e) => {
                let e = e.within(transport.name());
                eprintln!("instructions: FAILED: {e}");
                failures.push(e.to_string());
            }
        }
    }
    let mut info = RunInfo::here(args.quick, 1, 0.0);
    info.failures = failures.clone();
    info.wall_s = started.elapsed().as_secs_f64();
    info.workload_wall_s.insert("instructions", info.wall_s);
    let report = Report {
        pingpong: Vec::new(),
        throughput: Vec::new(),
        calls: Vec::new(),
        server: Vec::new(),
        instructions: rows,
        run: info,
    };
    print!("{}", report.text());
    for table in functions {
        print!("\n{}", table.text());
    }
    write(&report, args)?;
    match failures.len() {
        0 => Ok(()),
        n => Err(Error::new(format!(
            "{n} transport(s) could not be counted:\n  {}",
            failures.join("\n  ")
        ))),
    }
}

fn rounds(args: &InstructionsArgs) -> Result<[usize; 2], Error> {
    match (args.rounds.as_slice(), args.quick) {
        ([], false) => Ok(ROUNDS),
        ([], true) => Ok(QUICK_ROUNDS),
        (&[n1, n2], _) if n2 > n1 => Ok([n1, n2]),
        (given, _) => Err(Error::new(format!(
            "--rounds takes two counts N1,N2 with N2 > N1, not {given:?}"
        ))),
    }
}

fn transports(args: &InstructionsArgs) -> Result<Vec<&'static dyn Transport>, Error> {
    match args.transports.is_empty() {
        false => Ok(args.transports.clone()),
        true => DEFAULT_TRANSPORTS
            .iter()
            .map(|name| transport::by_name(name).map_err(Error::new))
            .collect(),
    }
}

/// Counts `transport`'s two runs and makes its row, and the table of its
/// functions if asked for.
fn count_transport(
    counter: &Counter,
    transport: &'static dyn Transport,
    rounds: [usize; 2],
    args: &InstructionsArgs,
) -> Result<(InstructionsRow, Option<Table>), Error> {
    let job = |rounds| Job {
        transport,
        rounds,
        size: args.size,
    };
    let keep = args.keep.as_deref();
    let fewer = counter.count(&job(rounds[0]), keep)?;
    let more = counter.count(&job(rounds[1]), keep)?;
    let n = (rounds[1] - rounds[0]) as f64;
    let per = |f: fn(&Count) -> Option<u64>| Some(delta(f(&fewer)?, f(&more)?) / n);
    let functions = match args.top {
        0 => None,
        top => counter::top_functions(transport.name(), &fewer, &more, n, top),
    };
    let row = InstructionsRow {
        transport: transport.name(),
        wait: transport.wait(),
        size: args.size,
        placement: Placement::Same.name(),
        counter: counter.name(),
        round_trips: rounds,
        instructions: [fewer.total, more.total],
        per_round_trip: delta(fewer.total, more.total) / n,
        parent_per_round_trip: per(|c| c.parent),
        child_per_round_trip: per(|c| c.child),
    };
    Ok((row, functions))
}

/// `more − fewer`, which may be negative if a count is off.
fn delta(fewer: u64, more: u64) -> f64 {
    more as f64 - fewer as f64
}

fn write(report: &Report, args: &InstructionsArgs) -> Result<(), Error> {
    if let Some(dir) = &args.out {
        let files = report.write(dir)?;
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        eprintln!("wrote {}", names.join(", "));
    }
    if let Some(path) = &args.json {
        report::write_json(path, &report.instructions)?;
        eprintln!("wrote the rows to {}", path.display());
    }
    Ok(())
}

/// The counted run (`instructions-run`): this process and the child it
/// starts, both on CPU 0, make exactly `rounds` round trips; then this
/// process hangs up and waits for the child to exit, without polling, so
/// the teardown executes the same instructions in every run.
pub fn count_here(args: &CountArgs) -> Result<(), Error> {
    let placement = Placement::Same;
    placement.pin_parent()?;
    let command = child::command(Workload::Pingpong, args.transport, placement)?;
    let Connection {
        child,
        mut endpoint,
    } = args.transport.spawn(command)?;
    counted(&mut || round_trips(&mut *endpoint, args.rounds, args.size))?;
    drop(endpoint);
    let status = child.wait()?;
    match status.success() {
        true => Ok(()),
        false => Err(Error::new(format!("the child exited with {status}"))),
    }
}

/// The parent's round trips.
fn round_trips(endpoint: &mut dyn Endpoint, rounds: usize, size: usize) -> Result<(), Error> {
    for n in 0..rounds {
        pingpong::round_trip(endpoint, size, payload::marker(n))
            .map_err(|e| e.within(format!("round trip {n}")))?;
    }
    Ok(())
}

/// Runs `work`: the span of each process that callgrind counts, from
/// entering this function to leaving it (the parent's round trips, and the
/// child's echoing them, from its first receive to the parent's hang-up),
/// so the processes' start-up, whose work depends on timing, is left out.
/// One function for both, never inlined, because callgrind 3.19 honours
/// only one `--zero-before` pattern.
#[inline(never)]
pub fn counted(work: &mut dyn FnMut() -> Result<(), Error>) -> Result<(), Error> {
    work()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_names_its_transport_rounds_and_size() {
        let job = Job {
            transport: transport::by_name("ferry").unwrap(),
            rounds: 200,
            size: 144,
        };
        assert_eq!(
            job.args(),
            [
                "instructions-run",
                "--transport",
                "ferry",
                "--rounds",
                "200",
                "--size",
                "144"
            ]
        );
    }

    #[test]
    fn the_default_transports_exist() {
        for name in DEFAULT_TRANSPORTS {
            assert!(transport::by_name(name).is_ok(), "{name}");
        }
    }
}
