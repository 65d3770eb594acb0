//! `ferry-bench`: round trips through ferry and through the OS's own IPC,
//! under one protocol, in one run.
//!
//! With no subcommand it runs `pingpong` with every transport and size,
//! unpinned. `ferry-bench pingpong --help` lists the flags.

mod child;
mod error;
mod payload;
mod pingpong;
mod placement;
mod progress;
mod report;
mod runner;
mod stats;
mod transport;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::child::ChildArgs;
use crate::error::Error;
use crate::pingpong::Case;
use crate::placement::Placement;
use crate::progress::Progress;
use crate::transport::Transport;

/// Round-trip benchmarks of ferry against the OS's own IPC primitives.
#[derive(Debug, Parser)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand: `pingpong`'s flags.
    #[command(flatten)]
    pingpong: PingpongArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Round trips between this process and a child it starts: the child
    /// echoes each message; every round trip after a warm-up is timed.
    Pingpong(PingpongArgs),
    /// The child's side of a workload (started by the benchmark itself).
    #[command(hide = true)]
    Child(ChildArgs),
}

#[derive(Debug, Default, Args)]
struct PingpongArgs {
    /// Transports, comma-separated [default: all]: ferry (adaptive wait),
    /// ferry-spin, ferry-block, unix-stream, pipe.
    #[arg(long = "transport", value_delimiter = ',', value_parser = transport::by_name)]
    transports: Vec<&'static dyn Transport>,
    /// Payload sizes in bytes, comma-separated
    /// [default: 12,144,1728,20736,248832,1048576].
    #[arg(long = "size", value_delimiter = ',', value_parser = positive)]
    sizes: Vec<usize>,
    /// Timed round trips per row [default: by size, from 50000 for small
    /// messages to 500 for 1 MiB; 300 with --quick].
    #[arg(long, value_parser = positive)]
    count: Option<usize>,
    /// Untimed round trips before each row [default: a tenth of --count,
    /// from 10 to 1000].
    #[arg(long)]
    warmup: Option<usize>,
    /// A few hundred round trips per row, for a check in seconds.
    #[arg(long)]
    quick: bool,
    /// Where the two processes run: split is parent on CPU 0 and child on
    /// CPU 1; same is both on CPU 0.
    #[arg(long, value_enum, default_value_t)]
    placement: Placement,
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

impl PingpongArgs {
    /// The rows to run: every size, and within each size every transport.
    fn cases(&self) -> Vec<Case> {
        let transports = match self.transports.is_empty() {
            true => transport::ALL.to_vec(),
            false => self.transports.clone(),
        };
        let sizes = match self.sizes.is_empty() {
            true => pingpong::SIZES.iter().map(|s| s.size).collect(),
            false => self.sizes.clone(),
        };
        let case = |(size, transport)| self.case(transport, size);
        let pairs = sizes
            .iter()
            .flat_map(|&s| transports.iter().map(move |&t| (s, t)));
        pairs.map(case).collect()
    }

    fn case(&self, transport: &'static dyn Transport, size: usize) -> Case {
        let count = match (self.count, self.quick) {
            (Some(count), _) => count,
            (None, true) => pingpong::QUICK_COUNT,
            (None, false) => pingpong::default_count(size),
        };
        let warmup = self
            .warmup
            .unwrap_or_else(|| pingpong::default_warmup(count));
        Case {
            transport,
            placement: self.placement,
            size,
            count,
            warmup,
        }
    }
}

fn run_pingpong(args: &PingpongArgs) -> Result<(), Error> {
    args.placement.check()?;
    let cases = args.cases();
    let progress = Progress::new(cases.iter().map(Case::round_trips).sum());
    let outcome = runner::run(&cases, &progress);
    progress.finish();
    let (rows, failed) = match outcome.into_result() {
        Ok(rows) => (rows, None),
        Err((rows, error)) => (rows, Some(error)),
    };
    print!("{}", report::table(&rows));
    if let Some(path) = &args.json {
        report::write_json(path, &rows)?;
        eprintln!("wrote {} rows to {}", rows.len(), path.display());
    }
    failed.map_or(Ok(()), Err)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        None => run_pingpong(&cli.pingpong),
        Some(Command::Pingpong(args)) => run_pingpong(args),
        Some(Command::Child(args)) => child::serve(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}
