//! The children of this workload: this binary re-run with the hidden
//! `server-child` subcommand, holding a ferry pipe to the parent for
//! control (addresses, the clients' report, the fd rows' socket), outside
//! every timed span.
//!
//! A child plays one role: `serve` (a server of one engine, answering each
//! `next` with the address the parent's next client should connect to),
//! `clients` (many clients of such a server, see [`super::fleet`]) or
//! `echo` (the far end of the fd rows, see [`super::fds`]). It runs until
//! the parent closes the pipe; its threads end with it.

use std::process::Command;

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

    /// The same, for `clients` clients running for `window_ms`.
    pub fn with_clients(mut self, clients: usize, window_ms: u64) -> Self {
        self.clients = clients;
        self.window_ms = window_ms;
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
}

impl Role {
    /// Makes `ctl` sleep in the kernel while it waits, unless it is what
    /// the role measures (the fd rows' ferry carrier). A control pipe left
    /// to ferry's default wait spins while the other process works on
    /// another CPU, up to a millisecond at a time, on the CPU the
    /// measured threads need: a serving child waiting for the parent's
    /// next request would starve its own server threads.
    fn quiet(self, ctl: &::ferry::Pipe) {
        if self != Self::Echo {
            ctl.sender().set_wait(::ferry::Wait::Sleep);
            ctl.receiver().set_wait(::ferry::Wait::Sleep);
        }
    }
}

/// A started child and the parent's end of its control pipe.
pub struct Helper {
    child: ChildGuard,
    /// The control pipe (the fd rows' ferry carrier uses it for payloads).
    pub ctl: ::ferry::Pipe,
    what: String,
}

impl Helper {
    /// Starts the child `args` describe.
    pub fn start(args: &ChildArgs) -> Result<Self, Error> {
        let what = format!("the {} child ({})", value_name(args.role), args.engine);
        let (child, ctl) = ::ferry::spawn(args.command()?).context(format!("starting {what}"))?;
        args.role.quiet(&ctl);
        Ok(Self {
            child: ChildGuard::new(child),
            ctl,
            what,
        })
    }

    /// The child's process id.
    pub fn pid(&mut self) -> u32 {
        self.child.child_mut().id()
    }

    /// Closes the control pipe, waits for the child to exit, and joins
    /// what was measured with how it ended.
    pub fn finish<T>(self, measured: Result<T, Error>) -> Result<T, Error> {
        drop(self.ctl);
        crate::transport::finish(self.child, &self.what, measured)
    }
}

/// The parent: where the serving child says its next client should
/// connect.
pub fn next_address(ctl: &::ferry::Pipe) -> Result<String, Error> {
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
        let ctl = ::ferry::Pipe::from_parent().context("taking the pipe from the parent")?;
        args.role.quiet(&ctl);
        match args.role {
            Role::Serve => serve(&ctl, engine::by_name(&args.engine)?, args.clients),
            Role::Clients => {
                let window = std::time::Duration::from_millis(args.window_ms);
                fleet::clients(&ctl, engine::by_name(&args.engine)?, window)
            }
            Role::Echo => fds::by_name(&args.engine)?.echo(&ctl),
        }
    };
    run().map_err(|e| e.within(format!("{} child ({})", value_name(args.role), args.engine)))
}

/// Serves `engine` and answers the parent's requests for addresses until
/// it hangs up.
fn serve(ctl: &::ferry::Pipe, engine: &dyn engine::Server, clients: usize) -> Result<(), Error> {
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
