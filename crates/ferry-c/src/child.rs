//! `ferry_child`: a process started by `ferry_spawn`, with a pipe to it.

use std::ffi::{CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::pipe::{Wait, ferry_pipe};
use crate::status::{FERRY_TIMED_OUT, FERRY_WOULD_BLOCK, Failure, Result};

/// A child process started by `ferry_spawn`. Freed by `ferry_child_close`
/// (which neither waits for nor kills the process).
#[allow(non_camel_case_types)]
pub struct ferry_child {
    child: Mutex<std::process::Child>,
}

/// How often a waiting `ferry_child_wait` looks.
const WAIT_SLICE: Duration = Duration::from_millis(5);

/// Starts `argv[0]` (looked up on `PATH` if it has no `/`) with `argv[1..]`
/// and a pipe to it, which the child takes with `ferry_from_parent` (or
/// `ferry::Pipe::from_parent` in Rust).
pub(crate) fn spawn(
    argv: &[&CStr],
    options: ferry::PipeOptions,
) -> Result<(ferry_child, ferry_pipe)> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| Failure::invalid("argv is empty: it needs at least the program"))?;
    let mut command = std::process::Command::new(OsStr::from_bytes(program.to_bytes()));
    command.args(args.iter().map(|a| OsStr::from_bytes(a.to_bytes())));
    let (child, pipe) = options.spawn(command).map_err(|e| match e {
        ferry::BootstrapError::Io(io) => {
            Failure::io(&format!("starting {}", program.to_string_lossy()), &io)
        }
        other => Failure::new(crate::status::FERRY_INTERNAL, other.to_string()),
    })?;
    Ok((
        ferry_child {
            child: Mutex::new(child),
        },
        ferry_pipe::new(pipe),
    ))
}

/// The pipe from the parent that spawned this process.
pub(crate) fn from_parent() -> Result<ferry_pipe> {
    use ferry::BootstrapError as E;
    match ferry::Pipe::from_parent() {
        Ok(pipe) => Ok(ferry_pipe::new(pipe)),
        Err(e) => {
            let words = e.to_string();
            Err(match e {
                E::NotSpawned(_) | E::AlreadyTaken => Failure::invalid(words),
                E::Protocol(_) => Failure::new(crate::status::FERRY_PROTOCOL, words),
                E::Io(io) => Failure::io("taking the pipe from the parent", &io),
                _ => Failure::new(crate::status::FERRY_INTERNAL, words),
            })
        }
    }
}

impl ferry_child {
    pub(crate) fn pid(&self) -> u32 {
        self.child.lock().unwrap_or_else(|e| e.into_inner()).id()
    }

    /// Waits for the child to exit: its exit status as `waitpid` gives it
    /// (`WIFEXITED`, `WEXITSTATUS`… apply).
    pub(crate) fn wait(&self, wait: Wait) -> Result<i32> {
        let start = Instant::now();
        loop {
            let status = (self.child.lock().unwrap_or_else(|e| e.into_inner()))
                .try_wait()
                .map_err(|e| Failure::io("waiting for the child", &e))?;
            if let Some(status) = status {
                return Ok(status.into_raw());
            }
            match wait {
                Wait::Never => return Err(Failure::new(FERRY_WOULD_BLOCK, "the child is running")),
                Wait::For(d) if start.elapsed() >= d => {
                    return Err(Failure::new(FERRY_TIMED_OUT, "the child is still running"));
                }
                _ => std::thread::sleep(WAIT_SLICE),
            }
        }
    }

    /// Sends the child `SIGKILL` (a child already waited for: nothing).
    pub(crate) fn kill(&self) -> Result<()> {
        (self.child.lock().unwrap_or_else(|e| e.into_inner()))
            .kill()
            .map_err(|e| Failure::io("killing the child", &e))
    }
}
