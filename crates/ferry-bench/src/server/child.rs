//! The children of this workload: this binary re-run with the hidden
//! `server-child` subcommand, holding a ferry pipe to the parent for what
//! is not timed (addresses, the clients' report, the fd rows' socket). A
//! child serves one engine, runs many clients of it ([`super::fleet`]) or
//! echoes the fd rows' messages ([`super::fds`]), until the parent hangs up.

use std::process::Command;
use std::time::Duration;

use ::ferry::Pipe;
use clap::{Args, ValueEnum};

use super::{engine, fds, fleet};
use crate::child::{rerun, value_name};
use crate::error::{Context, Error};
use crate::placement::Placement;
use crate::transport::ChildGuard;

/// The parent asks the serving child where to connect next.
const NEXT: &[u8] = b"next";

/// The part a child plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// A server of one engine.
    Serve,
    /// Many clients of a server, at once.
    Clients,
    /// The far end of the fd rows.
    Echo,
}

/// Which of the placement's two CPUs a child takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Seat {
    /// The parent's (CPU 0 when pinned).
    Parent,
    /// The child's (CPU 1 with `split`).
    Child,
}

/// Arguments of the hidden `server-child` subcommand.
#[derive(Debug, Clone, Args)]
pub struct ChildArgs {
    /// The part it plays.
    #[arg(long)]
    role: Role,
    /// The engine (or, for `echo`, the carrier).
    #[arg(long)]
    engine: String,
    /// Where the processes run.
    #[arg(long)]
    placement: Placement,
    /// Which CPU of the placement this child takes.
    #[arg(long)]
    seat: Seat,
    /// Clients the server will have (ferry-select accepts this many).
    #[arg(long, default_value_t = 1)]
    clients: usize,
    /// How long the clients make round trips, in milliseconds.
    #[arg(long, default_value_t = 0)]
    window_ms: u64,
}

impl ChildArgs {
    /// A child playing `role` for `engine`.
    pub fn new(role: Role, engine: &str, placement: Placement, seat: Seat) -> Self {
        Self {
            role,
            engine: engine.to_string(),
            placement,
            seat,
            clients: 1,
            window_ms: 0,
        }
    }

    /// The same, for `clients` clients running for `window`.
    pub fn with_clients(mut self, clients: usize, window: Duration) -> Self {
        self.clients = clients;
        self.window_ms = window.as_millis() as u64;
        self
    }

    fn command(&self) -> Result<Command, Error> {
        let (role, seat) = (value_name(self.role), value_name(self.seat));
        let (clients, window) = (self.clients.to_string(), self.window_ms.to_string());
        let flags = [
            ("--role", role.as_str()),
            ("--engine", &self.engine),
            ("--placement", self.placement.name()),
            ("--seat", &seat),
            ("--clients", &clients),
            ("--window-ms", &window),
        ];
        rerun("server-child", &flags)
    }

    fn what(&self) -> String {
        format!("the {} child ({})", value_name(self.role), self.engine)
    }
}

impl Role {
    /// Makes `ctl` sleep in the kernel while it waits, unless it is what
    /// the role measures (the fd rows' ferry carrier). A control pipe left
    /// to ferry's default wait spins while the other process works on
    /// another CPU, up to a millisecond at a time, on the CPU the
    /// measured threads need: a serving child waiting for the parent's
    /// next request would starve its own server threads.
    fn quiet(self, ctl: &Pipe) {
        if self != Self::Echo {
            ctl.sender().set_wait(::ferry::Wait::Sleep);
            ctl.receiver().set_wait(::ferry::Wait::Sleep);
        }
    }
}

/// Starts the child `args` describe, runs `measure` with its control pipe
/// and process id, closes the pipe, and joins what was measured with how
/// the child ended.
pub fn with_child<T>(
    args: &ChildArgs,
    measure: impl FnOnce(&Pipe, u32) -> Result<T, Error>,
) -> Result<T, Error> {
    let what = args.what();
    let (child, ctl) = ::ferry::spawn(args.command()?).context(format!("starting {what}"))?;
    args.role.quiet(&ctl);
    let pid = child.id();
    let child = ChildGuard::new(child);
    let measured = measure(&ctl, pid);
    drop(ctl);
    crate::transport::finish(child, &what, measured)
}

/// The parent: where the serving child says its next client should
/// connect.
pub fn next_address(ctl: &Pipe) -> Result<String, Error> {
    ctl.send(NEXT).context("asking the server for an address")?;
    let reply = ctl.recv().context("waiting for the server's address")?;
    String::from_utf8(reply).context("the server's address")
}

/// The `server-child` subcommand.
pub fn serve_child(args: &ChildArgs) -> Result<(), Error> {
    let run = || {
        match args.seat {
            Seat::Parent => args.placement.pin_parent()?,
            Seat::Child => args.placement.pin_child()?,
        }
        let ctl = Pipe::from_parent().context("taking the pipe from the parent")?;
        args.role.quiet(&ctl);
        match args.role {
            Role::Serve => serve(&ctl, engine::by_name(&args.engine)?, args.clients),
            Role::Clients => {
                let window = Duration::from_millis(args.window_ms);
                fleet::clients(&ctl, engine::by_name(&args.engine)?, window)
            }
            Role::Echo => fds::by_name(&args.engine)?.echo(&ctl),
        }
    };
    run().map_err(|e| e.within(args.what()))
}

/// Serves `engine` and answers the parent's requests for addresses until
/// it hangs up.
fn serve(ctl: &Pipe, engine: &dyn engine::Server, clients: usize) -> Result<(), Error> {
    let mut next = engine.serve(clients)?;
    loop {
        match ctl.recv() {
            Ok(request) if request == NEXT => {
                let address = next()?;
                ctl.send(address.as_bytes())
                    .context("sending the parent an address")?;
            }
            Ok(other) => {
                return Err(Error::new(format!(
                    "the parent sent {} bytes that are not a request for an address",
                    other.len()
                )));
            }
            Err(::ferry::RecvError::Disconnected) => return Ok(()),
            Err(e) => return Err(e).context("waiting for the parent"),
        }
    }
}
