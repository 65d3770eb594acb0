//! The child process: this binary re-run with a hidden `child` subcommand
//! naming the workload, the transport and the placement.

use std::process::{Command, Stdio};

use clap::{Args, ValueEnum};

use crate::error::{Context, Error};
use crate::instructions;
use crate::pingpong;
use crate::placement::Placement;
use crate::throughput;
use crate::transport::{self, Connection, Endpoint, Transport};

/// Makes the child of the named transport fail at once, to check that a
/// failing transport fails the whole run (the tests set it).
pub const FAIL_ENV: &str = "FERRY_BENCH_FAIL_CHILD";

/// The child's half of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Echo every request.
    Pingpong,
    /// Read and checksum every message.
    Throughput,
}

/// Arguments of the hidden `child` subcommand.
#[derive(Debug, Args)]
pub struct ChildArgs {
    /// The child's half of which workload.
    #[arg(long)]
    workload: Workload,
    /// The transport to the parent.
    #[arg(long, value_parser = transport::by_name)]
    transport: &'static dyn Transport,
    /// Where the child runs.
    #[arg(long)]
    placement: Placement,
}

/// The command that starts the child of `workload` (see [`rerun`]).
pub fn command(
    workload: Workload,
    transport: &dyn Transport,
    placement: Placement,
) -> Result<Command, Error> {
    let workload = value_name(workload);
    let flags = [
        ("--workload", workload.as_str()),
        ("--transport", transport.name()),
        ("--placement", placement.name()),
    ];
    rerun("child", &flags)
}

/// This binary, to re-run as a child with `subcommand` and its `flags`
/// (each a flag and its value), its stdin and stdout closed (a transport
/// may claim them), its stderr shared for errors.
pub fn rerun(subcommand: &str, flags: &[(&str, &str)]) -> Result<Command, Error> {
    let exe = std::env::current_exe().context("finding this program to re-run as the child")?;
    let mut command = Command::new(exe);
    command.arg(subcommand);
    for (flag, value) in flags {
        command.args([flag, value]);
    }
    command.stdin(Stdio::null()).stdout(Stdio::null());
    Ok(command)
}

/// The name of `value` on the command line.
pub fn value_name(value: impl ValueEnum) -> String {
    let value = value.to_possible_value().expect("no value is skipped");
    value.get_name().to_string()
}

/// Starts the child of `workload`, lets `measure` work with the parent's
/// end, closes it, and joins what was measured with how the child ended.
pub fn run<T>(
    workload: Workload,
    transport: &dyn Transport,
    placement: Placement,
    measure: impl FnOnce(&mut dyn Endpoint) -> Result<T, Error>,
) -> Result<T, Error> {
    let command = command(workload, transport, placement)?;
    let Connection {
        child,
        mut endpoint,
    } = transport.spawn(command)?;
    let measured = measure(&mut *endpoint);
    drop(endpoint);
    crate::transport::finish(child, "the child", measured)
}

/// Runs the child: places itself, connects, and serves the workload.
pub fn serve(args: &ChildArgs) -> Result<(), Error> {
    let name = args.transport.name();
    let run = || {
        if std::env::var_os(FAIL_ENV).is_some_and(|v| v == name) {
            return Err(Error::new(format!("failing on purpose: {FAIL_ENV}={name}")));
        }
        args.placement.pin_child()?;
        let mut endpoint = args.transport.connect_to_parent()?;
        match args.workload {
            // The span `ferry-bench instructions` counts.
            Workload::Pingpong => instructions::counted(&mut || pingpong::echo(&mut *endpoint)),
            Workload::Throughput => throughput::receive(&mut *endpoint),
        }
    };
    run().map_err(|e| e.within(format!("child ({name})")))
}
