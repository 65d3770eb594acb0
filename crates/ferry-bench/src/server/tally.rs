//! `ferry-bench connect-loop`: connects to a server of each engine many
//! times, one client at a time, timing only the whole loop, and counts
//! page faults and context switches per connect of both processes (from
//! `/proc`, before and after). System calls and instructions per connect
//! come from two loop lengths, N = 200 and 1,200 under strace, 100 and
//! 300 under callgrind (the sum of the `totals:` lines of every `cg.N.*`;
//! with the build `ferry-bench instructions` makes): the counts subtracted
//! (start-up cancels) over the difference in N.
//!
//! ```text
//! strace -f -c -o st.N ferry-bench connect-loop --engine E --count N --warmup 50
//! valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=cg.N.%p \
//!     target/instructions/release/ferry-bench connect-loop --engine E --count N --warmup 20
//! ```
//!
//! The address is asked once where every client connects at one address,
//! so the control pipe costs the loop nothing. Switches are summed over
//! each process's live threads, so those of threads that have exited are
//! lost (ipc-channel starts one per connection); faults count every one's.

use std::time::Instant;

use clap::Args;

use super::SIZE;
use super::child::{ChildArgs, Role, Seat, next_address, with_child};
use super::engine::{self, Server};
use super::timed::check_echo;
use crate::error::{Context, Error};
use crate::payload;
use crate::placement::Placement;

/// Flags of the `connect-loop` command.
#[derive(Debug, Args)]
pub struct LoopArgs {
    /// Server engines, comma-separated.
    #[arg(long = "engine", value_delimiter = ',', value_parser = engine_arg)]
    #[arg(default_value = "ferry,unix-seqpacket,shm-floor")]
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
    args.placement.pin_parent()?;
    let tallies = |side| ["minflt", "vcsw", "ivcsw"].map(|t| format!("{side} {t}"));
    let first = ["engine", "placement", "connects", "µs/connect"];
    println!("{}", line(first, tallies("cl"), tallies("sv")));
    for &engine in &args.engines {
        let row = count(args, engine).map_err(|e| e.within(engine.name().to_string()))?;
        println!("{row}");
    }
    Ok(())
}

/// A line of the table: four cells, then the client's three tallies and
/// the server's.
fn line(first: [&str; 4], client: [String; 3], server: [String; 3]) -> String {
    let [engine, placement, connects, us] = first;
    let [client, server] = [client, server].map(|[a, b, c]| format!("{a:>9} {b:>9} {c:>9}"));
    format!("{engine:<20} {placement:>9} {connects:>8} {us:>10} | {client} | {server}")
}

/// One engine's loop, as a line of the table.
fn count(args: &LoopArgs, engine: &dyn Server) -> Result<String, Error> {
    let child = ChildArgs::new(Role::Serve, engine.name(), args.placement, Seat::Child);
    let (took, client, served) = with_child(&child, |ctl, them| {
        let me = std::process::id();
        let mut address = next_address(ctl)?;
        let (mut request, mut reply) = (vec![0; SIZE], Vec::with_capacity(SIZE));
        let mut connect = |i: usize, address: &mut String| -> Result<(), Error> {
            if !engine.one_address() {
                *address = next_address(ctl)?;
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
    })?;
    let us = took.as_secs_f64() * 1e6 / args.count as f64;
    let cells = |tally: [f64; 3]| tally.map(|x| format!("{x:.2}"));
    let first = [
        engine.name(),
        args.placement.name(),
        &args.count.to_string(),
        &format!("{us:.2}"),
    ];
    Ok(line(first, cells(client), cells(served)))
}
