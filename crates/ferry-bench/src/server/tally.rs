//! `ferry-bench connect-loop`: connects to a server of each engine many
//! times in a row, one client at a time, as the connect rows do but with
//! nothing timed per connect, and counts what the connects cost both
//! processes: page faults and context switches per connect, read from
//! `/proc` before and after the loop, beside the loop's wall time per
//! connect. It is also the program to run under `strace -f -c`,
//! `perf stat` or `valgrind --tool=callgrind --trace-children=yes`, whose
//! counts of two loop lengths, subtracted, give one connect.
//!
//! System calls and user-space instructions per connect, both processes,
//! from two loop lengths (start-up cancels in the difference):
//!
//! ```text
//! strace -f -c -o st.N ferry-bench connect-loop --engine E --count N --warmup 50
//! valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=cg.N.%p \
//!     target/instructions/release/ferry-bench connect-loop --engine E --count N --warmup 20
//! ```
//!
//! with N = 200 and 1,200 (strace) or 100 and 300 (callgrind), each count
//! (calls per syscall; the sum of the `totals:` lines of every `cg.N.*`)
//! subtracted and divided by the difference in N. valgrind needs the build
//! `ferry-bench instructions` makes with rustix's libc backend (see
//! `instructions.rs`).
//!
//! The server's address is asked once, where the engine serves every
//! client at one address (ipc-channel's one-shot servers ask for each),
//! so the control pipe to the serving child costs the loop nothing.
//! Switches are summed over each process's live threads
//! (`/proc/PID/task/*/status`); those of a thread that has exited are
//! lost, which undercounts an engine that starts threads per connection
//! (ipc-channel); faults (`/proc/PID/stat`) count every thread's.

use std::time::Instant;

use clap::Args;

use super::SIZE;
use super::child::{ChildArgs, Helper, Role, Seat, next_address};
use super::dial::check_echo;
use super::engine::{self, Server};
use crate::error::{Context, Error};
use crate::payload;
use crate::placement::Placement;

/// Flags of the `connect-loop` command.
#[derive(Debug, Args)]
pub struct LoopArgs {
    /// Server engines, comma-separated [default: ferry,unix-seqpacket,shm-floor].
    #[arg(long = "engine", value_delimiter = ',', value_parser = engine_arg)]
    engines: Vec<&'static dyn Server>,
    /// Where the two processes run (see the other commands).
    #[arg(long, value_enum, default_value_t = Placement::Same)]
    placement: Placement,
    /// Connects counted per engine.
    #[arg(long, default_value_t = 2_000, value_parser = crate::positive)]
    count: usize,
    /// Connects before counting starts.
    #[arg(long, default_value_t = 200)]
    warmup: usize,
}

fn engine_arg(name: &str) -> Result<&'static dyn Server, String> {
    engine::by_name(name).map_err(|e| e.to_string())
}

/// What a process has done so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    minor_faults: u64,
    /// Voluntary context switches of its live threads.
    pub voluntary: u64,
    involuntary: u64,
}

impl Tally {
    /// The process `pid`'s tally now.
    pub fn of(pid: u32) -> Result<Self, Error> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .context(format!("reading /proc/{pid}/stat"))?;
        // Fields after the command name, which is in parentheses and may
        // hold anything: state is field 3, minflt field 10.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let minor_faults = after
            .split_whitespace()
            .nth(7)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| Error::new(format!("no minflt in /proc/{pid}/stat")))?;
        let mut tally = Self {
            minor_faults,
            ..Self::default()
        };
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .context(format!("listing /proc/{pid}/task"))?;
        for task in tasks.flatten() {
            // A thread that ends while this reads is skipped.
            if let Ok(status) = std::fs::read_to_string(task.path().join("status")) {
                tally.voluntary += field(&status, "voluntary_ctxt_switches:");
                tally.involuntary += field(&status, "nonvoluntary_ctxt_switches:");
            }
        }
        Ok(tally)
    }

    /// Per connect, from `before` to `self` over `n` connects.
    fn per(self, before: Self, n: usize) -> [f64; 3] {
        let n = n as f64;
        [
            self.minor_faults.saturating_sub(before.minor_faults) as f64 / n,
            self.voluntary.saturating_sub(before.voluntary) as f64 / n,
            self.involuntary.saturating_sub(before.involuntary) as f64 / n,
        ]
    }
}

/// The number after `name` at the start of a line of `status`, or 0.
fn field(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The `connect-loop` command.
pub fn run(args: &LoopArgs) -> Result<(), Error> {
    let engines = match args.engines.is_empty() {
        true => ["ferry", "unix-seqpacket", "shm-floor"]
            .into_iter()
            .map(engine::by_name)
            .collect::<Result<Vec<_>, _>>()?,
        false => args.engines.clone(),
    };
    args.placement.pin_parent()?;
    println!(
        "{:<20} {:>9} {:>8} {:>10} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9}",
        "engine",
        "placement",
        "connects",
        "µs/connect",
        "cl minflt",
        "cl vcsw",
        "cl ivcsw",
        "sv minflt",
        "sv vcsw",
        "sv ivcsw",
    );
    for engine in engines {
        let row = count(args, engine).map_err(|e| e.within(engine.name().to_string()))?;
        println!("{row}");
    }
    Ok(())
}

/// One engine's loop, as a line of the table.
fn count(args: &LoopArgs, engine: &dyn Server) -> Result<String, Error> {
    let child = ChildArgs::new(Role::Serve, engine.name(), args.placement, Seat::Child);
    let mut server = Helper::start(&child)?;
    let (me, them) = (std::process::id(), server.pid());
    let measured = (|| {
        let mut address = next_address(&server.ctl)?;
        let (mut request, mut reply) = (vec![0; SIZE], Vec::with_capacity(SIZE));
        let mut connect = |i: usize, address: &mut String| -> Result<(), Error> {
            if !engine.one_address() {
                *address = next_address(&server.ctl)?;
            }
            payload::fill(&mut request, payload::marker(i));
            let conn = engine.connect(address, &request, &mut reply)?;
            check_echo(&request, &reply)?;
            drop(conn);
            Ok(())
        };
        for i in 0..args.warmup {
            connect(i, &mut address)?;
        }
        let (client, served) = (Tally::of(me)?, Tally::of(them)?);
        let started = Instant::now();
        for i in 0..args.count {
            connect(args.warmup + i, &mut address)?;
        }
        let took = started.elapsed();
        let (client, served) = (
            Tally::of(me)?.per(client, args.count),
            Tally::of(them)?.per(served, args.count),
        );
        Ok((took, client, served))
    })();
    let (took, client, served) = server.finish(measured)?;
    let us = took.as_secs_f64() * 1e6 / args.count as f64;
    Ok(format!(
        "{:<20} {:>9} {:>8} {:>10.2} | {:>9.2} {:>9.2} {:>9.2} | {:>9.2} {:>9.2} {:>9.2}",
        engine.name(),
        args.placement.name(),
        args.count,
        us,
        client[0],
        client[1],
        client[2],
        served[0],
        served[1],
        served[2],
    ))
}
