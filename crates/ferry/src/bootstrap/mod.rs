//! Starting a child process that begins life with a pipe to its parent.
//!
//! The parent makes a control socket pair and a pipe, sends the pipe's far
//! end over the socket (before the child exists, so it is waiting there),
//! and spawns the child with its socket inherited under a number named in
//! the `FERRY_BOOTSTRAP` environment variable, together with the parent's
//! process id. The child checks that its parent is that process, so a
//! grandchild that merely inherited the environment is refused.

use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::channel::{BootstrapError, Pipe, PipeOptions, ProtocolError};
use crate::link::{BOOTSTRAP_ID, Link};
use crate::sys::{ControlSocket, adopt_inherited, inherit_in_child, parent_pid, socket_pair};

/// The environment variable naming the inherited socket: `"<fd>:<ppid>"`.
pub const ENV: &str = "FERRY_BOOTSTRAP";

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
    let link = Link::new(ours, options.pool_cap);
    far.send_region(&link, Some(BOOTSTRAP_ID))
        .map_err(BootstrapError::Io)?;
    far.moved_over(&link);
    let raw = inherit_in_child(&mut command, theirs.as_fd());
    let o = options;
    let (wait, limit, ool, cap) = (o.wait.to_u8(), o.limit, o.out_of_line, o.pool_cap);
    let value = format!("{raw}:{}:{limit}:{ool}:{cap}:{wait}", std::process::id());
    command.env(ENV, value);
    let child = command.spawn().map_err(BootstrapError::Io)?;
    drop(theirs);
    Ok((child, near))
}

static TAKEN: AtomicBool = AtomicBool::new(false);

impl Pipe {
    /// The pipe to the parent process, in a child started by [`spawn`].
    ///
    /// Fails with [`BootstrapError::NotSpawned`] in a process that ferry did
    /// not start, and with [`BootstrapError::AlreadyTaken`] the second time.
    pub fn from_parent() -> Result<Pipe, BootstrapError> {
        let value = std::env::var(ENV).map_err(|_| {
            BootstrapError::NotSpawned(format!(
                "{ENV} is not set: this process was not started by ferry::spawn"
            ))
        })?;
        let (raw, options) = parse_env(&value)?;
        // Relaxed: a once-only latch; the descriptor itself is the resource.
        if TAKEN.swap(true, Ordering::Relaxed) {
            return Err(BootstrapError::AlreadyTaken);
        }
        let fd = adopt_inherited(raw).map_err(|e| {
            BootstrapError::NotSpawned(format!(
                "{ENV} names descriptor {raw}, which is not an inherited socket: {e}"
            ))
        })?;
        let link = Link::new(ControlSocket::from_fd(fd), crate::link::DEFAULT_POOL_CAP);
        let (region, role) = link
            .claim(BOOTSTRAP_ID)
            .map_err(|why| BootstrapError::Protocol(ProtocolError(why)))?;
        Pipe::adopt(&link, region, role, &options)
            .map_err(|why| BootstrapError::Protocol(ProtocolError(why.0)))
    }
}

/// Parses `"<fd>:<ppid>:<limit>:<out of line>:<pool cap>:<wait>"`, checks
/// the parent is the one named, and returns the descriptor and the options
/// the parent chose for this end.
fn parse_env(value: &str) -> Result<(i32, PipeOptions), BootstrapError> {
    let bad = || {
        BootstrapError::NotSpawned(format!(
            "{ENV}={value:?} is malformed (expected \"<fd>:<parent pid>:...\" as ferry::spawn writes it)"
        ))
    };
    let fields: Vec<&str> = value.split(':').collect();
    let [fd, ppid, limit, ool, cap, wait] = fields[..] else {
        return Err(bad());
    };
    let number = |s: &str| s.parse::<usize>().map_err(|_| bad());
    let fd: i32 = fd.parse().map_err(|_| bad())?;
    let ppid: u32 = ppid.parse().map_err(|_| bad())?;
    let wait = u8::try_from(number(wait)?).map_err(|_| bad())?;
    let options = PipeOptions::new()
        .max_message(number(limit)?)
        .out_of_line(number(ool)?)
        .pool_cap(number(cap)?)
        .wait(crate::Wait::from_u8(wait));
    match parent_pid() {
        Some(actual) if actual == ppid => Ok((fd, options)),
        actual => Err(BootstrapError::NotSpawned(format!(
            "{ENV} was set by process {ppid}, but this process's parent is {}: it was inherited, not given by ferry::spawn",
            actual.map_or_else(|| "gone".to_string(), |p| p.to_string())
        ))),
    }
}
