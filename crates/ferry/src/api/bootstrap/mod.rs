//! Starting a child process that begins life with a pipe to its parent.
//!
//! The parent makes a control socket pair and a pipe, sends the pipe's far
//! end over the socket (before the child exists, so it is waiting there),
//! and spawns the child with its socket inherited under a number named in
//! the `FERRY_BOOTSTRAP` environment variable, together with the parent's
//! process id and every option the parent chose for the child's end (see
//! [`crate::base::wire::bootstrap`] for the encoding). The child checks that its
//! parent is that process, so a grandchild that merely inherited the
//! environment is refused. A child whose parent is outside its pid
//! namespace (started through `unshare --pid --fork` or a sandbox that
//! makes one) cannot see its parent's id, so the check is skipped there.
//!
//! Each side watches the other process itself, beside the socket (see
//! [`crate::transport::link`]): the parent holds a pidfd of the child it just spawned
//! (not yet reaped, so its id cannot have been reused), and the child
//! opens one of its parent and then checks that its parent is still the
//! same (if not, the parent died in between and the link is down); a child
//! whose parent is outside its pid namespace asks its socket for the
//! process that made the socket pair, which is the parent.

mod address;
mod connect;
mod server;

pub use address::{Address, Token};
pub use connect::{
    CONNECT_TIMEOUT, ConnectError, ConnectOptions, connect, connect_invited, connect_invited_with,
};
#[cfg(feature = "tokio")]
pub use server::AsyncServer;
pub use server::{
    AcceptError, Connection, EVICTION_GRACE, HANDSHAKE_TIMEOUT, MAX_PENDING_HANDSHAKES, Server,
    ServerOptions,
};

use crate::base::sync::{AtomicBool, Ordering};
use crate::base::wire::Violation;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Instant;

use std::fmt;

use crate::api::channel::{Pipe, PipeOptions, ProtocolError};
use crate::base::sys::{
    ControlSocket, Process, adopt_inherited, inherit_in_child, parent_pid, socket_pair,
};
use crate::base::wire::bootstrap::BootstrapEnv;
use crate::transport::link::{Deadline, Fault, Link};

/// The environment variable naming the inherited socket, the parent, and
/// the options of the child's end (a [`BootstrapEnv`]).
pub(crate) const ENV: &str = "FERRY_BOOTSTRAP";

/// The environment variable naming the note a child invited to a server
/// reads (an [`crate::base::wire::handshake::InviteEnv`]).
pub(crate) const INVITE_ENV: &str = "FERRY_INVITE";

/// How long one side of a server's handshake looks for the other's next
/// datagram (yielding the CPU between looks) before it sleeps for it: an
/// honest client sends its opening microseconds after `connect`, and the
/// server answers within tens of microseconds, so a short look spares a
/// sleep and a wake-up each way (a cross-CPU wake costs 10-60 us here).
/// Yielding lets the other side run first when both share a CPU.
const HANDSHAKE_LOOK: std::time::Duration = std::time::Duration::from_micros(50);

/// Looks for `socket` to become readable for at most [`HANDSHAKE_LOOK`]
/// (never past `deadline`), yielding the CPU between looks; whether it did.
fn look_for_datagram(
    socket: std::os::fd::BorrowedFd<'_>,
    deadline: Option<Instant>,
) -> std::io::Result<bool> {
    let start = Instant::now();
    let until = deadline.map_or(start + HANDSHAKE_LOOK, |d| d.min(start + HANDSHAKE_LOOK));
    loop {
        crate::base::sys::yield_cpu();
        let now = Instant::now();
        if crate::base::sys::wait_readable(&[socket], Some(now))?[0] {
            return Ok(true);
        }
        if now >= until {
            return Ok(false);
        }
    }
}

/// The id of the pipe a spawned child (or a server's client) receives.
const BOOTSTRAP_ID: u64 = 0;
const _: () = assert!(
    BOOTSTRAP_ID < crate::base::wire::FIRST_PIPE_ID,
    "a reserved id"
);

/// Why [`crate::Pipe::from_parent`] or [`crate::spawn`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BootstrapError {
    /// This process was not started by [`crate::spawn`] (the message says how
    /// that was seen).
    NotSpawned(String),
    /// The pipe from the parent was already taken by an earlier call.
    AlreadyTaken,
    /// The parent sent something that is not a ferry pipe.
    Protocol(ProtocolError),
    /// The operating system refused.
    Io(std::io::Error),
}

impl BootstrapError {
    /// Whether the peer (the parent) is gone: true for
    /// [`Protocol`](Self::Protocol), since the pipe it sent is refused and
    /// its link shut down; false for the rest.
    ///
    /// ```
    /// assert!(!ferry::BootstrapError::AlreadyTaken.is_disconnected());
    /// ```
    pub fn is_disconnected(&self) -> bool {
        matches!(self, Self::Protocol(_))
    }
}

impl fmt::Display for BootstrapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotSpawned(why) => write!(f, "no ferry pipe from a parent: {why}"),
            Self::AlreadyTaken => f.write_str("the pipe from the parent was already taken"),
            Self::Protocol(e) => e.fmt(f),
            Self::Io(e) => write!(f, "system error during bootstrap: {e}"),
        }
    }
}

impl std::error::Error for BootstrapError {}

impl PipeOptions {
    /// Spawns `command` as a child process that starts with the other end of
    /// a pipe (see [`crate::spawn`]).
    pub fn spawn(
        &self,
        command: std::process::Command,
    ) -> Result<(std::process::Child, Pipe), BootstrapError> {
        spawn_with(command, self)
    }
}

/// Spawns `command` as a child process holding the other end of a new pipe
/// (default [`PipeOptions`]); the child takes it with [`Pipe::from_parent`].
///
/// ```no_run
/// let (mut child, pipe) = ferry::spawn(std::process::Command::new("my-worker"))?;
/// pipe.send(b"job")?;
/// let reply = pipe.recv()?;
/// child.wait()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn spawn(command: Command) -> Result<(Child, Pipe), BootstrapError> {
    spawn_with(command, &PipeOptions::new())
}

pub(crate) fn spawn_with(
    mut command: Command,
    options: &PipeOptions,
) -> Result<(Child, Pipe), BootstrapError> {
    let (ours, theirs) = socket_pair().map_err(BootstrapError::Io)?;
    let (near, far) = options.pipe().map_err(BootstrapError::Io)?;
    let link = Link::new(ours, options.link_limits());
    // The child does not exist yet: its fresh socket has room.
    far.send_whole(&link, BOOTSTRAP_ID, None)
        .map_err(BootstrapError::Io)?;
    let env = BootstrapEnv {
        fd: inherit_in_child(&mut command, theirs.as_fd()),
        parent: std::process::id(),
        limit: options.limit,
        out_of_line: options.out_of_line,
        pool_cap: options.pool_cap,
        max_mapped: options.max_mapped,
        wait: options.wait.to_u8(),
    };
    command.env(ENV, env.encode());
    let mut child = command.spawn().map_err(BootstrapError::Io)?;
    drop(theirs);
    // The child is not reaped before this: its id is still its own.
    if let Err(e) = link.watch_peer(Process::open(child.id())) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(BootstrapError::Io(e));
    }
    Ok((child, near))
}

static TAKEN: AtomicBool = AtomicBool::new(false);

impl Pipe {
    /// The pipe to the parent process, in a child started by [`spawn`].
    ///
    /// Fails with [`BootstrapError::NotSpawned`] in a process that ferry did
    /// not start, and with [`BootstrapError::AlreadyTaken`] the second time.
    pub fn from_parent() -> Result<Pipe, BootstrapError> {
        let env = read_env()?;
        // Relaxed: a once-only latch; the descriptor itself is the resource.
        if TAKEN.swap(true, Ordering::Relaxed) {
            return Err(BootstrapError::AlreadyTaken);
        }
        let fd = adopt_inherited(env.fd).map_err(|e| {
            BootstrapError::NotSpawned(format!(
                "{ENV} names descriptor {}, which is not an inherited socket: {e}",
                env.fd
            ))
        })?;
        let options = options_of(&env);
        let socket = ControlSocket::from_fd(fd);
        let parent = parent_process(&socket);
        let link = Link::new(socket, options.link_limits());
        link.watch_peer(parent).map_err(BootstrapError::Io)?;
        let protocol = |why: Violation| BootstrapError::Protocol(ProtocolError::from(why));
        first_pipe(&link, &options, None).map_err(|fault| match fault {
            Fault::Local(e) => BootstrapError::Io(e),
            Fault::Violation(why) => protocol(why),
            Fault::Late => protocol(Violation::NoBootstrapPipe),
        })
    }
}

/// Claims the pipe the other side sent over `link` under [`BOOTSTRAP_ID`]
/// before this side looked, by `deadline`.
fn first_pipe(
    link: &Arc<Link>,
    options: &PipeOptions,
    deadline: Option<Instant>,
) -> Result<Pipe, Fault> {
    let mut ends = link
        .collect(&[BOOTSTRAP_ID], None, &mut Deadline::new(deadline))?
        .0;
    let end = ends
        .pop()
        .ok_or(Fault::Violation(Violation::NoBootstrapPipe))?;
    Pipe::adopt(link, end, options).map_err(|why| Fault::Violation(why.0))
}

/// A handle on this process's parent, whose end of the socket pair is at
/// the other end of `socket` (see the module comment).
fn parent_process(socket: &ControlSocket) -> std::io::Result<Option<Process>> {
    let Some(pid) = parent_pid() else {
        return Process::of_peer(socket.as_fd());
    };
    let process = Process::open(pid)?;
    // A parent that died before the handle was made left this process to
    // a reaper: the id the handle names may be anyone's by now.
    match parent_pid() == Some(pid) {
        true => Ok(process),
        false => Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the parent process has exited",
        )),
    }
}

/// Whether process `parent` (as the parent's pid namespace numbers it) is
/// this process's parent; `true` also when this process cannot see its
/// parent (outside its pid namespace).
fn child_of(parent: u32) -> bool {
    parent_pid().is_none_or(|actual| actual == parent)
}

/// This process's [`ENV`], decoded, after checking that the parent named
/// in it is this process's parent (see [`child_of`]).
fn read_env() -> Result<BootstrapEnv, BootstrapError> {
    let value = std::env::var(ENV).map_err(|_| {
        BootstrapError::NotSpawned(format!(
            "{ENV} is not set: this process was not started by ferry::spawn"
        ))
    })?;
    let env = BootstrapEnv::decode(&value).map_err(|why| {
        BootstrapError::NotSpawned(format!(
            "{ENV}={value:?} is malformed: {why}; ferry::spawn writes \"fd=<descriptor>,parent=<pid>,...\" \
             (was this process spawned by another version of ferry?)"
        ))
    })?;
    match parent_pid() {
        Some(actual) if actual != env.parent => Err(BootstrapError::NotSpawned(format!(
            "{ENV} was set by process {}, but this process's parent is {actual}: it was inherited, not given by ferry::spawn",
            env.parent,
        ))),
        _ => Ok(env),
    }
}

/// The options the parent chose for this end.
fn options_of(env: &BootstrapEnv) -> PipeOptions {
    PipeOptions::new()
        .max_message(env.limit)
        .out_of_line(env.out_of_line)
        .pool_cap(env.pool_cap)
        .max_mapped(env.max_mapped)
        .wait(crate::api::channel::Wait::from_u8(env.wait))
}

#[cfg(test)]
mod tests {
    use crate::api::channel::Wait;
    use crate::base::wire::bootstrap::WAIT_KINDS;

    /// The codec accepts exactly the values that name a `Wait`, each a
    /// different one. (A new `Wait` fails to compile here.)
    #[test]
    fn every_wait_crosses_the_environment() {
        let on_the_wire = |wait: Wait| match wait {
            Wait::Sleep => 0,
            Wait::Spin => 1,
            Wait::Adaptive => 2,
            Wait::Tuned => 3,
        };
        for wait in [Wait::Sleep, Wait::Spin, Wait::Adaptive, Wait::Tuned] {
            assert_eq!(wait.to_u8(), on_the_wire(wait));
        }
        for raw in 0..WAIT_KINDS {
            assert_eq!(on_the_wire(Wait::from_u8(raw)), raw);
        }
        assert_eq!(WAIT_KINDS, 4);
    }
}
